// A kernel is a free function: a method's `self` has no translation, and
// rustc's own errors for the attribute's output inside an `impl` ("struct
// is not supported in `impl`s") did not say so.
struct Solver;

impl Solver {
    #[parloop::kernel]
    fn scale(&self, a: &mut f64) {
        *a *= 2.0;
    }
}

fn main() {}
