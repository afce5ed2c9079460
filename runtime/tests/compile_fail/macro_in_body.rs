#[parloop::kernel]
fn noisy(a: &f64, o: &mut f64) {
    println!("{a}");
    *o = *a;
}

fn main() {}
