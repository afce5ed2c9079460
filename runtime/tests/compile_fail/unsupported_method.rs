#[parloop::kernel]
fn bits(a: &f64, o: &mut f64) {
    *o = a.to_bits() as f64;
}

fn main() {}
