#[parloop::kernel]
fn narrowing(a: &f64, o: &mut f32) {
    let x: f32 = *a;
    *o = x;
}

fn main() {}
