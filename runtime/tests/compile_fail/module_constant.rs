const SCALE: f64 = 2.0;

#[parloop::kernel]
fn scaled(a: &f64, o: &mut f64) {
    *o = *a * SCALE;
}

fn main() {}
