#[parloop::kernel]
fn pick(x: &[f64; 4], o: &mut f64) {
    *o = x[1] + x[7];
}

fn main() {}
