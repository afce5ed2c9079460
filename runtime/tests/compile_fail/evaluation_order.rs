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

#[parloop::device]
fn bump(y: &mut f64) -> f64 {
    *y += 1.0;
    *y
}

#[parloop::kernel]
fn a_mut_parameter_passed_on(y: &mut f64, o: &mut f64) {
    *o = bump(y) + *y;
}

#[parloop::kernel]
fn a_method_receiver(seed: &u32, o: &mut u32) {
    let mut s = *seed;
    *o = s.max(next_state(&mut s));
}

#[parloop::kernel]
fn separate_lets_are_fine(seed: &u32, o: &mut u32) {
    let mut s = *seed;
    let a: u32 = next_state(&mut s);
    let b: u32 = next_state(&mut s);
    *o = pair(a, b);
}

fn main() {}
