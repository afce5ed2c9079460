//! Kernels that the backend comparisons (`backends.rs`) and the GPU suite
//! (`cuda_device.rs`) both run on their random meshes, in one copy.

/// Edge loop: INC through both columns, READ through a vector argument,
/// direct READ, and every kind of global reduction.
#[parloop::kernel]
pub fn edge_flux(
    w: &f64,
    xs: &[[f64; 2]; 2],
    r0: &mut [f64; 2],
    r1: &mut [f64; 2],
    count: &mut u64,
    lo: &mut i32,
    hi: &mut f32,
    total: &mut f64,
) {
    let f = *w * (xs[1][0] - xs[0][0] + 2.0 * xs[1][1]);
    r0[0] += f;
    r0[1] += 0.5 * *w;
    r1[0] -= f;
    r1[1] += 0.25 * *w;
    *count += 1;
    let k = (*w * 100.0) as i32;
    if k < *lo {
        *lo = k;
    }
    let wf = *w as f32;
    if wf > *hi {
        *hi = wf;
    }
    *total += f;
}

/// Integer increments, INC through a map column (an RW reaching one node
/// from two edges is refused as a write race) or RW through a
/// permutation: adding is order-independent, so the result is exact on
/// every backend (values stay far from overflow).
#[parloop::kernel]
pub fn tally(id: &i64, t: &mut [i64; 2]) {
    t[0] += *id;
    t[1] += 1;
}

/// Vector INC over every column, f32 data.
#[parloop::kernel]
pub fn spread(v: &f32, targets: &mut [[f32; 1]; 3]) {
    for k in 0..3 {
        targets[k][0] += *v * (k as f32 + 1.0);
    }
}
