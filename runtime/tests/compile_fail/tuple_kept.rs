#[parloop::kernel]
fn kept(a: &f64, o: &mut f64) {
    // A tuple kept in a local is read by its fields (`t.0`), copied or
    // taken apart whole (`let u = t;`, `let (x, y) = t;`); referred to,
    // it would be a value the device has no form for (refused at the use).
    let t = (*a, 2.0 * *a);
    let r = &t;
    *o = r.0 + r.1;
}

fn main() {}
