// `max(a, b)` after `use std::cmp::max` reads as a call of a helper.
use std::cmp::max;

#[parloop::kernel]
fn clipped(a: &i32, o: &mut i32) {
    *o = max(*a, 2);
}

fn main() {}
