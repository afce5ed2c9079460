// C++ cannot take the address of a computed value.

#[parloop::device]
fn read_ref(x: &f64) -> f64 {
    *x * 2.0
}

#[parloop::kernel]
fn computed(a: &f64, o: &mut f64) {
    *o = read_ref(&(*a + 1.0));
}

fn main() {}
