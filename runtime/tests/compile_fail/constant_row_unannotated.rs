// A row of a nested module-level constant bound to a `let` without a
// type and passed on to a helper: the translation cannot see the
// constant's type. The message said "bound to a helper's result?" where
// no helper's result was bound.
#[parloop::device]
const TRI3: [[f64; 3]; 3] = [[0.5, 0.5, 0.0], [0.0, 0.5, 0.5], [0.5, 0.0, 0.5]];

#[parloop::device]
fn first(l: &[f64; 3]) -> f64 {
    l[0]
}

#[parloop::kernel]
fn mass(a: &mut [f64; 3]) {
    for q in 0..3 {
        let l = TRI3[q];
        a[q] += first(&l);
    }
}

fn main() {}
