// A closure is inlined into the loop a reduction becomes: a `return` in it
// would leave the kernel, not the closure.

#[parloop::kernel]
fn roots(a: &[f64; 3], o: &mut f64) {
    *o = a
        .iter()
        .map(|&v| {
            if v < 0.0 {
                return 0.0;
            }
            v.sqrt()
        })
        .sum::<f64>();
}

fn main() {}
