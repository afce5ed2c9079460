// Arrays are compared element by element in kernels: `==` on whole
// arrays has no C++ form.
#[parloop::kernel]
fn at_origin(x: &[f64; 2], o: &mut f64) {
    if *x == [0.0, 0.0] {
        *o = 1.0;
    }
}

fn main() {}
