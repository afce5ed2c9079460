// The device translation cannot see a helper's signature: where a value's
// type only the helper gives, it computes in the literals' default (f64,
// i32) and pins that type in the host function, so rustc refuses a helper
// that returns f32 or takes i64 rather than the device computing in f64 or
// i32. The usual f64 helpers compile as they are.

#[parloop::device]
fn third_f32(x: f32) -> f32 {
    x / 3.0
}

#[parloop::device]
fn ident_i64(x: i64) -> i64 {
    x
}

#[parloop::kernel]
fn compared(x: &f32, out: &mut i32) {
    *out = if third_f32(*x) > 0.1 { 1 } else { 0 };
}

#[parloop::kernel]
fn product_argument(o: &mut i64) {
    *o = ident_i64(200_000 * 100_000);
}

#[parloop::device]
fn dot2(a: &[f64; 2], b: &[f64; 2]) -> f64 {
    a[0] * b[0] + a[1] * b[1]
}

#[parloop::kernel]
fn f64_helpers_are_fine(u: &[f64; 2], n: &[f64; 2], o: &mut f64) {
    *o = if dot2(u, n) > 0.0 { -1.0 } else { dot2(u, u) * 0.5 };
}

#[parloop::kernel]
fn annotated_is_fine(x: &f32, o: &mut i64, out: &mut i32) {
    let third: f32 = third_f32(*x);
    *out = if third > 0.1 { 1 } else { 0 };
    *o = ident_i64(200_000i64 * 100_000);
}

fn main() {}
