#[parloop::kernel]
fn hyperbolic(a: &f64, o: &mut f64) {
    *o = a.sinh();
}

fn main() {}
