#[parloop::kernel]
fn texts(a: &String, o: &mut f64) {
    *o = a.len() as f64;
}

fn main() {}
