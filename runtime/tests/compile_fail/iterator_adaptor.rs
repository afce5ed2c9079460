// Reductions take `.map(f)`s before `sum`, `product`, `fold`, `any` and
// `all`; another adaptor is refused with the forms that work.

#[parloop::kernel]
fn positive_sum(a: &[f64; 3], o: &mut f64) {
    *o = a.iter().filter(|v| **v > 0.0).sum();
}

fn main() {}
