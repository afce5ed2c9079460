//! The lane-wise twins against the scalar kernels, bit for bit, on every
//! argument shape the twins move differently: direct rows of 1 to 4 values
//! and of 2x2, indirect rows of 1, 2, 3 and 4 (3 is not transposed), vector
//! arguments read and incremented, `f32` data, increments of 1, 2 and 3
//! values, and exact global increments of 1 to 4 values (`f64`, `f32`) in
//! indirect and direct loops; on `seq` and on `threads` with
//! blocks whose lengths are not multiples of any lane width. Run under
//! `PARLOOP_SIMD=avx2` too (ci/test): the twins have a four-lane AVX2 and an
//! eight-lane AVX-512 build, and a process uses the best its CPU has.

use parloop::{Access, Backend, Runtime};

/// Every `f64` shape through every kind of view.
#[parloop::kernel]
fn mix_f64(
    a: &f64,
    d2: &[f64; 2],
    d3: &[f64; 3],
    m22: &[[f64; 2]; 2],
    x: &[f64; 2],
    y: &f64,
    t3: &[f64; 3],
    q: &[f64; 4],
    v: &[[f64; 3]; 2],
    out: &mut [f64; 4],
    rw: &mut [f64; 3],
    acc: &mut [f64; 2],
    acc1: &mut f64,
    acc3: &mut [f64; 3],
    vinc: &mut [[f64; 1]; 2],
    total: &mut f64,
    total2: &mut [f64; 2],
    total3: &mut [f64; 3],
) {
    let s = *a * x[0] - x[1] / (*y + 3.0) + m22[1][0] * m22[0][1];
    out[0] = s + q[0] * d2[0];
    out[1] = (q[1] - d3[2]).abs() + d2[1];
    out[2] = (q[2] * q[2] + 1.0).sqrt() - v[0][2];
    out[3] = -q[3] + v[1][1] * m22[1][1];
    rw[0] = rw[0] * 0.5 + t3[0];
    rw[1] -= t3[1] * d3[0];
    rw[2] += t3[2] / (d3[1] * d3[1] + 1.0);
    acc[0] += s;
    acc[1] -= 0.25 * s;
    *acc1 += v[0][0] - v[1][2];
    acc3[0] += x[0];
    acc3[1] += x[1] * 2.0;
    acc3[2] -= *y;
    vinc[0][0] += s * 0.5;
    vinc[1][0] -= s * 0.125;
    *total += s * s;
    total2[0] += s;
    total2[1] -= x[1];
    total3[0] += *y;
    total3[1] += s * 0.5;
    total3[2] -= q[3];
}

/// A direct loop summing globals (the vector operations' shape: `threads`
/// runs it in chunks rather than plan blocks).
#[parloop::kernel]
fn sums(x: &[f64; 2], y: &f64, g1: &mut f64, g2: &mut [f64; 2], g4: &mut [f64; 4], g9: &mut [f64; 9]) {
    *g1 += x[0] * *y;
    g2[0] += x[1];
    g2[1] += x[0] * x[0];
    g4[0] += *y;
    g4[1] -= x[0];
    g4[2] += x[1] * *y;
    g4[3] += 1.5;
    // More values than get eight accumulators (`exec::INC_SLOTS_MAX_DIM`).
    for k in 0..9 {
        g9[k] += x[k % 2] * (k as f64 + *y);
    }
}

/// `f32` data: lanes without AVX arithmetic, moved value by value.
#[parloop::kernel]
fn mix_f32(a: &[f32; 2], x: &f32, v: &[[f32; 2]; 3], out: &mut [f32; 2], acc: &mut [f32; 3], ftotal: &mut f32) {
    *ftotal += a[1] * *x;
    out[0] = a[0] * *x + v[2][1];
    out[1] += a[1] / (*x * *x + 1.0) - v[0][0];
    acc[0] += out[0];
    acc[1] -= v[1][0] * 0.5;
    acc[2] += a[0] - a[1];
}

mod support;

use support::Rng;

/// Random mesh data for the test.
struct Noise(Rng);

impl Noise {
    /// Uniform in `[-1, 1)`.
    fn next(&mut self) -> f64 {
        2.0 * self.0.unit() - 1.0
    }
    fn index(&mut self, n: usize) -> i32 {
        (self.0.next() % n as u64) as i32
    }
    fn values(&mut self, n: usize) -> Vec<f64> {
        (0..n).map(|_| self.next() * 10.0).collect()
    }
}

/// Every dat's values and the global after two runs of each loop.
#[derive(Debug, PartialEq)]
struct Outcome {
    f64s: Vec<Vec<u64>>,
    f32s: Vec<Vec<u32>>,
}

fn run(backend: Backend, simd: bool, part_size: Option<usize>, nedges: usize, nnodes: usize) -> Outcome {
    let mut rt = Runtime::with_backend(backend).unwrap();
    rt.set_simd(simd);
    rt.set_part_size(part_size).unwrap();
    let mut noise = Noise(Rng(0x9e37_79b9_7f4a_7c15 ^ (nedges * 31 + nnodes) as u64));
    let edges = rt.set("edges", nedges).unwrap();
    let nodes = rt.set("nodes", nnodes).unwrap();
    // Clustered targets as well as random ones, so that consecutive
    // elements of a group often increment the same node.
    let pair: Vec<i32> =
        (0..2 * nedges).map(|k| if k % 5 == 0 { (k / 2 % nnodes) as i32 } else { noise.index(nnodes) }).collect();
    let pair = rt.map("pair", &edges, &nodes, 2, pair).unwrap();
    let random = |rt: &Runtime, set: &parloop::Set, name: &str, dim: usize, noise: &mut Noise| {
        rt.dat(name, set, dim, noise.values(set.size() * dim)).unwrap()
    };
    let a = random(&rt, &edges, "a", 1, &mut noise);
    let d2 = random(&rt, &edges, "d2", 2, &mut noise);
    let d3 = random(&rt, &edges, "d3", 3, &mut noise);
    let m22 = random(&rt, &edges, "m22", 4, &mut noise);
    let out = random(&rt, &edges, "out", 4, &mut noise);
    let rw = random(&rt, &edges, "rw", 3, &mut noise);
    let x = random(&rt, &nodes, "x", 2, &mut noise);
    let y = random(&rt, &nodes, "y", 1, &mut noise);
    let t3 = random(&rt, &nodes, "t3", 3, &mut noise);
    let q = random(&rt, &nodes, "q", 4, &mut noise);
    let v = random(&rt, &nodes, "v", 3, &mut noise);
    let acc = random(&rt, &nodes, "acc", 2, &mut noise);
    let acc1 = random(&rt, &nodes, "acc1", 1, &mut noise);
    let acc3 = random(&rt, &nodes, "acc3", 3, &mut noise);
    let vinc = random(&rt, &nodes, "vinc", 1, &mut noise);
    let total = rt.global("total", &[0.5f64]).unwrap();
    let total2 = rt.global("total2", &[0.25f64, -1.0]).unwrap();
    let total3 = rt.global("total3", &[0.0f64; 3]).unwrap();
    let g1 = rt.global("g1", &[0.0f64]).unwrap();
    let g2 = rt.global("g2", &[0.0f64; 2]).unwrap();
    let g4 = rt.global("g4", &[1.0f64; 4]).unwrap();
    let g9 = rt.global("g9", &[0.0f64; 9]).unwrap();
    let ftotal = rt.global("ftotal", &[0.0f32]).unwrap();
    let fa = rt.dat("fa", &edges, 2, noise.values(2 * nedges).iter().map(|&v| v as f32).collect()).unwrap();
    let fout = rt.dat("fout", &edges, 2, noise.values(2 * nedges).iter().map(|&v| v as f32).collect()).unwrap();
    let fx = rt.dat("fx", &nodes, 1, noise.values(nnodes).iter().map(|&v| v as f32).collect()).unwrap();
    let fv = rt.dat("fv", &nodes, 2, noise.values(2 * nnodes).iter().map(|&v| v as f32).collect()).unwrap();
    let facc = rt.dat("facc", &nodes, 3, vec![0.0f32; 3 * nnodes]).unwrap();
    let tri: Vec<i32> = (0..3 * nedges).map(|_| noise.index(nnodes)).collect();
    let tri = rt.map("tri", &edges, &nodes, 3, tri).unwrap();
    for _ in 0..2 {
        rt.par_loop(
            mix_f64::KERNEL,
            &edges,
            &[
                a.arg(Access::READ),
                d2.arg(Access::READ),
                d3.arg(Access::READ),
                m22.arg(Access::READ),
                x.arg_via(&pair, 0, Access::READ),
                y.arg_via(&pair, 1, Access::READ),
                t3.arg_via(&pair, 1, Access::READ),
                q.arg_via(&pair, 0, Access::READ),
                v.arg_vec(&pair, Access::READ),
                out.arg(Access::WRITE),
                rw.arg(Access::RW),
                acc.arg_via(&pair, 0, Access::INC),
                acc1.arg_via(&pair, 1, Access::INC),
                acc3.arg_via(&pair, 1, Access::INC),
                vinc.arg_vec(&pair, Access::INC),
                total.arg(Access::INC),
                total2.arg(Access::INC),
                total3.arg(Access::INC),
            ],
        )
        .unwrap();
        rt.par_loop(
            sums::KERNEL,
            &nodes,
            &[
                x.arg(Access::READ),
                y.arg(Access::READ),
                g1.arg(Access::INC),
                g2.arg(Access::INC),
                g4.arg(Access::INC),
                g9.arg(Access::INC),
            ],
        )
        .unwrap();
        rt.par_loop(
            mix_f32::KERNEL,
            &edges,
            &[
                fa.arg(Access::READ),
                fx.arg_via(&tri, 2, Access::READ),
                fv.arg_vec(&tri, Access::READ),
                fout.arg(Access::RW),
                facc.arg_via(&tri, 0, Access::INC),
                ftotal.arg(Access::INC),
            ],
        )
        .unwrap();
    }
    let bits = |v: Vec<f64>| v.into_iter().map(f64::to_bits).collect();
    Outcome {
        f64s: vec![
            bits(out.values().unwrap()),
            bits(rw.values().unwrap()),
            bits(acc.values().unwrap()),
            bits(acc1.values().unwrap()),
            bits(acc3.values().unwrap()),
            bits(vinc.values().unwrap()),
            bits(total.values().unwrap()),
            bits(total2.values().unwrap()),
            bits(total3.values().unwrap()),
            bits(g1.values().unwrap()),
            bits(g2.values().unwrap()),
            bits(g4.values().unwrap()),
            bits(g9.values().unwrap()),
        ],
        f32s: [fout.values().unwrap(), facc.values().unwrap(), ftotal.values().unwrap()]
            .into_iter()
            .map(|v| v.into_iter().map(f32::to_bits).collect())
            .collect(),
    }
}

#[test]
fn both_kernels_have_twins() {
    assert!(mix_f64::KERNEL.has_lanes(), "mix_f64 must keep its lane-wise twin, or this suite tests nothing");
    assert!(mix_f32::KERNEL.has_lanes(), "mix_f32 must keep its lane-wise twin, or this suite tests nothing");
    assert!(sums::KERNEL.has_lanes(), "sums must keep its lane-wise twin, or this suite tests nothing");
}

#[test]
fn twins_compute_the_scalar_bits_on_every_shape() {
    // Sizes around both lane widths (tails of every length) and a larger one.
    for (nedges, nnodes) in [(0, 1), (3, 2), (7, 5), (8, 3), (9, 4), (15, 9), (16, 1), (17, 30), (1000, 120)] {
        let scalar = run(Backend::Seq, false, None, nedges, nnodes);
        assert_eq!(run(Backend::Seq, true, None, nedges, nnodes), scalar, "seq, {nedges} edges");
        for part in [None, Some(5), Some(13)] {
            let scalar = run(Backend::Threads, false, part, nedges, nnodes);
            assert_eq!(run(Backend::Threads, true, part, nedges, nnodes), scalar, "threads, {nedges} edges, {part:?}");
        }
    }
}
