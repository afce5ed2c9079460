#[parloop::kernel]
fn swap(a: &[f64; 2], o: &mut [f64; 2]) {
    let (x, y) = (a[1], a[0]);
    o[0] = x;
    o[1] = y;
}

fn main() {}
