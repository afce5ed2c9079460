// Rust evaluates operands and arguments left to right; C++ leaves the
// order open (g++ calls the right one first).

#[parloop::device]
fn next_state(s: &mut u32) -> u32 {
    *s = *s % 1000 * 7 + 3;
    *s
}

#[parloop::device]
fn pair(a: u32, b: u32) -> u32 {
    a ^ (b << 1)
}

#[parloop::kernel]
fn arguments(seed: &u32, o: &mut u32) {
    let mut s = *seed;
    *o = pair(next_state(&mut s), next_state(&mut s));
}

#[parloop::kernel]
fn operands(seed: &u32, o: &mut u32) {
    let mut s = *seed;
    *o = next_state(&mut s) + s;
}

#[parloop::kernel]
fn separate_lets_are_fine(seed: &u32, o: &mut u32) {
    let mut s = *seed;
    let a: u32 = next_state(&mut s);
    let b: u32 = next_state(&mut s);
    *o = pair(a, b);
}

fn main() {}
