// A module-level constant read with another element type than declared:
// the translation took `i32` from the loop (rustc's default), the
// declaration says `u64`, and the attribute's check refuses it.
#[parloop::device]
const N: u64 = 3;

#[parloop::kernel]
fn count(o: &mut f64) {
    for i in 0..N {
        *o += if i > 1 { 1.0 } else { 2.0 };
    }
}

fn main() {}
