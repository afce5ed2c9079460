// The device translation cannot see a helper's signature: operations whose
// type only the helper gives (rustc's f32 and i64 here) are refused rather
// than computed in the literals' default f64 and i32.

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

#[parloop::kernel]
fn annotated_is_fine(x: &f32, o: &mut i64, out: &mut i32) {
    let third: f32 = third_f32(*x);
    *out = if third > 0.1 { 1 } else { 0 };
    *o = ident_i64(200_000i64 * 100_000);
}

fn main() {}
