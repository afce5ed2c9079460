// `.step_by(k).rev()` counts down from the last value the step reaches
// (6, 3, 0 for `(0..8).step_by(3).rev()`), `.rev().step_by(k)` from the
// range's end (7, 4, 1): only the second is taken.
#[parloop::kernel]
fn strided(x: &[f64; 8], o: &mut f64) {
    for i in (0..8).step_by(3).rev() {
        *o += x[i];
    }
}

fn main() {}
