// A helper's array result copied into an array whose element type is only
// a literal's default: the translation would have copied `f32`s into
// `double`s unseen by rustc, so it asks for the type.

#[parloop::device]
fn narrow(a: &[f64; 3]) -> [f32; 3] {
    [a[0] as f32, a[1] as f32, a[2] as f32]
}

#[parloop::kernel]
fn scaled(a: &[f64; 3], out: &mut f64) {
    let mut n = [0.0; 3];
    n = narrow(a);
    *out = (n[0] * 3.0) as f64;
}

fn main() {}
