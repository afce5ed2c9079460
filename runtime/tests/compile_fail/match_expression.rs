#[parloop::kernel]
fn pick(a: &i32, o: &mut f64) {
    *o = match *a {
        0 => 1.0,
        _ => 2.0,
    };
}

fn main() {}
