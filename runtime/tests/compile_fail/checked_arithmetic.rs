// Overflow checks: the device wraps; `checked_*` has no device form.

#[parloop::kernel]
fn next(a: &i32, o: &mut i32) {
    *o = a.checked_add(1).unwrap_or(i32::MAX);
}

fn main() {}
