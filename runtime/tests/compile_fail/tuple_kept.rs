#[parloop::kernel]
fn kept(a: &f64, o: &mut f64) {
    // A tuple kept in a local: kernels destructure tuples where they are made.
    let t = (*a, 2.0 * *a);
    *o = t.0 + t.1;
}

fn main() {}
