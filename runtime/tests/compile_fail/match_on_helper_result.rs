#[parloop::device]
fn find(x: f64) -> u32 {
    if x > 0.0 {
        u32::MAX
    } else {
        1
    }
}

#[parloop::kernel]
fn pick(x: &f64, o: &mut f64) {
    // The patterns' literals alone type the helper's result (i32 by
    // default), which rustc is asked to confirm: annotate it instead.
    match find(*x) {
        0xFFFF => *o = -1.0,
        _ => *o = 1.0,
    }
}

fn main() {}
