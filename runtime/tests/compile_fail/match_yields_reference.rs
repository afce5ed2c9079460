#[parloop::kernel]
fn pick(a: &f64, b: &f64, n: &i32, y: &mut f64) {
    *y = match *n {
        0 => a,
        _ => {
            let t = b;
            t
        }
    } * 2.0;
}

fn main() {}
