#[parloop::kernel]
fn returns(a: &f64) -> f64 {
    *a
}

fn main() {}
