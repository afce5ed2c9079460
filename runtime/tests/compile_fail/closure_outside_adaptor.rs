// A closure is only an iterator adaptor's argument; a function of one's
// own is a `#[parloop::device]` helper.
#[parloop::kernel]
fn doubled(x: &f64, o: &mut f64) {
    let f = |a: f64| a * 2.0;
    *o = f(*x);
}

fn main() {}
