#[parloop::kernel]
fn by_value(a: f64, o: &mut f64) {
    *o = a;
}

fn main() {}
