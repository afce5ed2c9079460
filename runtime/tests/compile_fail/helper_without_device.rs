// A helper a kernel calls needs #[parloop::device] (its CUDA translation):
// without it rustc stops at the kernel with "cannot find module or crate
// `twice`" (README, "Kernel language").
fn twice(x: f64) -> f64 {
    2.0 * x
}

#[parloop::kernel]
fn doubled(a: &f64, o: &mut f64) {
    *o = twice(*a);
}

fn main() {}
