#[parloop::kernel]
fn pick(a: &i32, o: &mut f64) {
    // Uppercase: a module-level constant (a comparison) or a binding?
    // The macro cannot see which, so it asks.
    *o = match *a {
        0 => 1.0,
        LIMIT => 2.0,
    };
}

fn main() {}
