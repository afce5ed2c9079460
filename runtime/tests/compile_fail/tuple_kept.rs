#[parloop::kernel]
fn kept(a: &f64, o: &mut f64) {
    // A tuple kept in a local is read by its fields (`t.0`); used whole,
    // it would be a value the device has no form for.
    let t = (*a, 2.0 * *a);
    let (x, y) = t;
    *o = x + y;
}

fn main() {}
