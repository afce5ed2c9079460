// Array loops take `.zip`, `.enumerate()` and `.rev()` in that order; a
// chain the rewrite does not take is refused with the forms it does.

#[parloop::kernel]
fn weighted(a: &[f64; 3], o: &mut f64) {
    for (i, x) in a.iter().rev().enumerate() {
        *o += *x * i as f64;
    }
}

fn main() {}
