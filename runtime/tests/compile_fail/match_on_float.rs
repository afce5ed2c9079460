#[parloop::kernel]
fn pick(a: &f64, o: &mut f64) {
    *o = match *a {
        x if x > 0.0 => 1.0,
        _ => 2.0,
    };
}

fn main() {}
