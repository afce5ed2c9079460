//! The kernel-language constructs finite-element kernels need compute the
//! same on every backend as the Rust function itself: nested local arrays
//! (rows read, filled by helpers, copied, assigned), array literals as
//! arguments and values, local `const` tables, `len()` of arrays, module-level
//! `#[parloop::device] const`s, and parameters of nested array type bound
//! to dats of dim rows x cols (direct, through a map, incremented).
//!
//! The reference is the kernel called directly, element by element, in
//! plain Rust (no parloop); `seq` and `threads` (scalar and lane-wise) must
//! equal it bitwise, the device (emu here, cuda where
//! `PARLOOP_TEST_DEVICE=cuda`) too, the constructs being plain arithmetic.
//! Where NVRTC can be loaded, every kernel's module compiles for sm_90
//! without a warning.

mod support;

#[path = "support/device.rs"]
mod device;

use parloop::{Access, Backend, Runtime};

#[parloop::device]
const GAM: f64 = 1.4;
#[parloop::device]
const GM1: f64 = GAM - 1.0;
/// Nested, reading another device constant.
#[parloop::device]
const TABLE: [[f64; 3]; 2] = [[1.0, -2.0, 0.5], [GM1, 0.25, -0.75]];
#[parloop::device]
const WEIGHTS: [f64; 4] = [0.25; 4];
#[parloop::device]
const PERM: [usize; 3] = [2, 0, 1];

/// A helper that fills an array.
#[parloop::device]
fn basis(xi: f64, out: &mut [f64; 3]) {
    out[0] = 1.0 - xi;
    out[1] = xi * (1.0 - xi);
    out[2] = xi * WEIGHTS[3];
}

/// A helper that fills a nested array.
#[parloop::device]
fn outer(a: &[f64; 3], b: &[f64; 2], m: &mut [[f64; 3]; 2]) {
    for r in 0..2 {
        for c in 0..3 {
            m[r][c] = b[r] * a[c];
        }
    }
}

#[parloop::device]
fn row_sum(row: &[f64; 3]) -> f64 {
    row[0] + row[1] + row[2]
}

/// Every construct at once; `x` and `out` are nested parameters of direct
/// dats of dim 6.
#[parloop::kernel]
fn constructs(x: &[[f64; 2]; 3], out: &mut [[f64; 3]; 2], s: &mut [f64; 4]) {
    let mut k = [[0.0f64; 3]; 3];
    const W: [f64; 3] = [1.0 / 6.0; 3];
    const G: [[f64; 2]; 3] = [[-1.0, -1.0], [1.0, 0.0], [0.0, 1.0]];
    // `len` of arrays: parameters (through `&`), locals, rows.
    for i in 0..k.len() {
        for j in 0..x.len() {
            k[i][j] += W[i] * (G[i][0] * x[j][0] + G[j][1] * x[i][1]);
        }
    }
    let mut n = [0.0; 3];
    basis(x[0][0], &mut n);
    basis(x[1][1], &mut k[2]);
    let row = k[1];
    let mut m = [[0.0; 3]; 2];
    outer(&n, &[x[2][0], TABLE[1][0]], &mut m);
    *out = m;
    for r in 0..2 {
        for c in 0..3 {
            out[r][c] += TABLE[r][c] * row[c] + k[PERM[c]][r];
        }
    }
    s[0] = row_sum(&k[0]) + [1.0, 2.0, 3.0][PERM[0]];
    let copy = k;
    k[2][1] = -1.0;
    s[1] = copy[2][1] * GAM + k[2][1];
    let mut z = [[x[0][1]; 2], [2.0; 2]];
    z = [[z[1][0], 3.0], [4.0, z[0][1]]];
    s[2] = z[0][0] + 10.0 * z[1][1] + 100.0 * z[0][1];
    let mut acc = 0.0;
    for q in 0..s.len() {
        acc += WEIGHTS[q] * x[q % 3][q % x[0].len()];
    }
    s[3] = acc + (out[1].len() * 10) as f64;
}

/// Nested parameters through a map: a READ of the target's 2x2 block and
/// an INC of another node's block.
#[parloop::kernel]
fn blocks(a: &[[f64; 2]; 2], w: &f64, acc: &mut [[f64; 2]; 2]) {
    for r in 0..2 {
        for c in 0..2 {
            acc[r][c] += *w * a[c][r] + TABLE[r][c];
        }
    }
}

/// Deterministic inputs that exercise signs and magnitudes.
fn values(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 11) as f64 / (1u64 << 53) as f64) * 4.0 - 2.0
        })
        .collect()
}

fn as_rows<const C: usize, const R: usize>(v: &[f64], e: usize) -> [[f64; C]; R] {
    std::array::from_fn(|r| std::array::from_fn(|c| v[e * R * C + r * C + c]))
}

/// `constructs` and `blocks` on `backend`: (out, s, acc).
fn run(backend: Backend, simd: bool, n: usize, nodes: usize, map: &[i32]) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let mut rt = Runtime::with_backend(backend).unwrap();
    rt.set_simd(simd);
    let cells = rt.set("cells", n).unwrap();
    let verts = rt.set("verts", nodes).unwrap();
    let m = rt.map("cv", &cells, &verts, 2, map.to_vec()).unwrap();
    let x = rt.dat("x", &cells, 6, values(6 * n, 1)).unwrap();
    let out = rt.dat("out", &cells, 6, vec![0.0; 6 * n]).unwrap();
    let s = rt.dat("s", &cells, 4, vec![0.0; 4 * n]).unwrap();
    rt.par_loop(constructs::KERNEL, &cells, &[x.arg(Access::READ), out.arg(Access::WRITE), s.arg(Access::WRITE)])
        .unwrap();
    let a = rt.dat("a", &verts, 4, values(4 * nodes, 2)).unwrap();
    let w = rt.dat("w", &cells, 1, values(n, 3)).unwrap();
    let acc = rt.dat("acc", &verts, 4, values(4 * nodes, 4)).unwrap();
    rt.par_loop(
        blocks::KERNEL,
        &cells,
        &[a.arg_via(&m, 0, Access::READ), w.arg(Access::READ), acc.arg_via(&m, 1, Access::INC)],
    )
    .unwrap();
    (out.values().unwrap(), s.values().unwrap(), acc.values().unwrap())
}

/// The same in plain Rust: the kernel functions called directly.
fn reference(n: usize, nodes: usize, map: &[i32]) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let x = values(6 * n, 1);
    let (mut out, mut s) = (Vec::new(), Vec::new());
    for e in 0..n {
        let xe: [[f64; 2]; 3] = as_rows(&x, e);
        let mut o = [[0.0; 3]; 2];
        let mut se = [0.0; 4];
        constructs(&xe, &mut o, &mut se);
        out.extend(o.iter().flatten());
        s.extend(se);
    }
    let a = values(4 * nodes, 2);
    let w = values(n, 3);
    let mut acc = values(4 * nodes, 4);
    for e in 0..n {
        let (src, dst) = (map[2 * e] as usize, map[2 * e + 1] as usize);
        let ae: [[f64; 2]; 2] = as_rows(&a, src);
        // INC: the kernel adds to a zeroed block, which is then added.
        let mut inc = [[0.0; 2]; 2];
        blocks(&ae, &w[e], &mut inc);
        for (k, v) in inc.iter().flatten().enumerate() {
            acc[4 * dst + k] += v;
        }
    }
    (out, s, acc)
}

fn mesh(n: usize, nodes: usize) -> Vec<i32> {
    (0..n).flat_map(|e| [((e * 7) % nodes) as i32, ((e * 3 + 1) % nodes) as i32]).collect()
}

#[test]
fn fem_constructs_equal_the_rust_function_on_every_backend() {
    let (n, nodes) = (1037, 101);
    let map = mesh(n, nodes);
    let want = reference(n, nodes, &map);
    // The kernel itself is a lane-wise candidate (its float values never
    // steer control flow); `blocks` is one too.
    assert!(blocks::KERNEL.has_lanes());
    for (backend, simd) in
        [(Backend::Seq, false), (Backend::Seq, true), (Backend::Threads, true), (device::device_backend(), false)]
    {
        let got = run(backend, simd, n, nodes, &map);
        assert_eq!(got.0, want.0, "out on {backend:?} (simd {simd})");
        assert_eq!(got.1, want.1, "s on {backend:?} (simd {simd})");
        // Increments land per element in order on seq; threads and the
        // device may sum one node's contributions in another order.
        for (k, (g, w)) in got.2.iter().zip(&want.2).enumerate() {
            assert!((g - w).abs() <= 1e-13 * w.abs().max(1.0), "acc[{k}] on {backend:?}: {g} vs {w}");
        }
    }
}

#[test]
fn nested_parameters_are_described_as_rows_and_columns() {
    let p = constructs::KERNEL.params();
    assert_eq!((p[0].rows, p[0].cols, p[0].len(), p[0].mutable), (3, 2, 6, false));
    assert_eq!((p[1].rows, p[1].cols, p[1].len(), p[1].mutable), (2, 3, 6, true));
    assert_eq!(p[1].describe(), "&mut [[f64; 3]; 2]");
}

#[test]
fn a_nested_parameter_needs_a_dat_of_rows_times_cols() {
    let rt = Runtime::with_backend(Backend::Seq).unwrap();
    let cells = rt.set("cells", 4).unwrap();
    let x = rt.dat("x", &cells, 5, vec![0.0; 20]).unwrap();
    let out = rt.dat("out", &cells, 6, vec![0.0; 24]).unwrap();
    let s = rt.dat("s", &cells, 4, vec![0.0; 16]).unwrap();
    let err = rt
        .par_loop(constructs::KERNEL, &cells, &[x.arg(Access::READ), out.arg(Access::WRITE), s.arg(Access::WRITE)])
        .unwrap_err()
        .to_string();
    assert!(err.contains("&[[f64; 2]; 3]") && err.contains("6 values") && err.contains("dim 5"), "{err}");
}

#[test]
fn device_constants_are_emitted_once_before_their_readers() {
    let src = constructs::KERNEL.cuda_source().unwrap();
    for def in [
        "__device__ constexpr double pl_c_GAM = 1.4;",
        "__device__ constexpr double pl_c_GM1 = (pl_c_GAM - 1.0);",
        "__device__ constexpr double pl_c_TABLE[2][3] = {{1.0, (-2.0), 0.5}, {pl_c_GM1, 0.25, (-0.75)}};",
        "__device__ constexpr double pl_c_WEIGHTS[4] = {0.25, 0.25, 0.25, 0.25};",
        "__device__ constexpr unsigned long long pl_c_PERM[3] = {2, 0, 1};",
    ] {
        assert_eq!(src.matches(def).count(), 1, "{def}\n{src}");
    }
    let at = |s: &str| src.find(s).unwrap();
    assert!(at("pl_c_GAM =") < at("pl_c_GM1 =") && at("pl_c_GM1 =") < at("pl_c_TABLE["));
    assert!(at("pl_c_WEIGHTS[4] =") < at("pl_fn_basis("));
}

#[test]
fn every_kernel_compiles_with_nvrtc_without_warnings() {
    if !support::nvrtc_available() {
        return;
    }
    for k in [constructs::KERNEL, blocks::KERNEL, weighted::KERNEL, cast_results::KERNEL] {
        support::nvrtc_check(k).unwrap_or_else(|e| panic!("{}: {e}", k.name()));
    }
}

/// A branch whose value is an arithmetic expression starting with a
/// constant: its lane-wise twin once parsed `{ 1.0 } / h` as a block
/// followed by `/` (a compile error in the kernel's expansion).
#[parloop::kernel]
fn branch_values(x: &[[f64; 1]; 2], a: &mut [[f64; 2]; 2]) {
    let h = x[1][0] - x[0][0];
    for i in 0..2 {
        for j in 0..2 {
            let k = if i == j { 1.0 / h } else { -1.0 / h };
            a[i][j] = k + 2.0 * h;
        }
    }
}

#[test]
fn branch_values_starting_with_a_constant_compile_and_match_plain_rust() {
    let xs = [0.0, 0.3, 0.5, 1.25, 2.0];
    let mut want = Vec::new();
    for e in 0..4 {
        let mut a = [[0.0; 2]; 2];
        branch_values(&[[xs[e]], [xs[e + 1]]], &mut a);
        want.extend(a.iter().flatten().copied());
    }
    for backend in [parloop::Backend::Seq, parloop::Backend::Threads] {
        let rt = parloop::Runtime::with_backend(backend).unwrap();
        let nodes = rt.set("nodes", 5).unwrap();
        let edges = rt.set("edges", 4).unwrap();
        let e2n = rt.map("e2n", &edges, &nodes, 2, vec![0, 1, 1, 2, 2, 3, 3, 4]).unwrap();
        let x = rt.dat("x", &nodes, 1, xs.to_vec()).unwrap();
        let a = rt.dat("a", &edges, 4, vec![0.0; 16]).unwrap();
        rt.par_loop(
            branch_values::KERNEL,
            &edges,
            &[x.arg_vec(&e2n, parloop::Access::READ), a.arg(parloop::Access::WRITE)],
        )
        .unwrap();
        assert_eq!(a.values().unwrap(), want, "{backend:?}");
    }
}

/// The path form of the scalar methods (`f64::max(a, b)` for `a.max(b)`),
/// nested, with a literal receiver and an `f32` one: the translator once
/// refused it ("call helpers by their plain name").
#[parloop::kernel]
fn path_calls(x: &f64, y: &mut f64) {
    let r = f64::max(f64::abs(*x), 0.5) + f64::sqrt(f64::abs(*x));
    *y = f64::mul_add(*x, 2.0, r) + f64::min(*x, f64::exp(0.0)) + f32::sqrt(4.0) as f64;
}

#[test]
fn path_form_method_calls_translate_and_match_plain_rust() {
    let xs = [-2.5, -0.25, 0.0, 0.75, 3.0, 16.0];
    let want: Vec<f64> = xs
        .iter()
        .map(|&x| {
            let mut y = 0.0;
            path_calls(&x, &mut y);
            y
        })
        .collect();
    for backend in [Backend::Seq, Backend::Threads, Backend::Emu] {
        let rt = Runtime::with_backend(backend).unwrap();
        let s = rt.set("s", xs.len()).unwrap();
        let x = rt.dat("x", &s, 1, xs.to_vec()).unwrap();
        let y = rt.dat("y", &s, 1, vec![0.0; xs.len()]).unwrap();
        rt.par_loop(path_calls::KERNEL, &s, &[x.arg(Access::READ), y.arg(Access::WRITE)]).unwrap();
        assert_eq!(y.values().unwrap(), want, "{backend:?}");
    }
    assert!(path_calls::KERNEL.cuda_source().unwrap().contains("fmax("), "{:?}", path_calls::KERNEL.cuda_source());
    if support::nvrtc_available() {
        support::nvrtc_check(path_calls::KERNEL).unwrap();
    }
}

/// A user item named `W` (the README's own example name) next to a float
/// kernel with a lane-wise twin: the twin's adapter once named its lane
/// width `W`, which the user's item replaced (a compile error naming
/// neither).
#[parloop::device]
const W: [f64; 2] = [0.5, 0.25];

#[parloop::kernel]
fn weighted(a: &[f64; 2], out: &mut f64) {
    *out = W[0] * a[0] + W[1] * a[1];
}

#[test]
fn a_user_item_named_w_leaves_the_lane_adapter_alone() {
    assert!(weighted::KERNEL.has_lanes(), "weighted runs scalar");
    let n = 37;
    let a: Vec<f64> = (0..2 * n).map(|i| i as f64 * 0.75 - 3.0).collect();
    let want: Vec<f64> = (0..n).map(|e| 0.5 * a[2 * e] + 0.25 * a[2 * e + 1]).collect();
    for backend in [Backend::Seq, Backend::Threads] {
        let rt = Runtime::with_backend(backend).unwrap();
        let s = rt.set("s", n).unwrap();
        let ad = rt.dat("a", &s, 2, a.clone()).unwrap();
        let o = rt.dat("o", &s, 1, vec![0.0; n]).unwrap();
        rt.par_loop(weighted::KERNEL, &s, &[ad.arg(Access::READ), o.arg(Access::WRITE)]).unwrap();
        assert_eq!(o.values().unwrap(), want, "{backend:?}");
    }
}

#[parloop::device]
fn positives(v: &[f64; 3]) -> i32 {
    let mut n = 0;
    for i in 0..3 {
        if v[i] > 0.0 {
            n += 1;
        }
    }
    n
}

#[parloop::device]
fn ratio(v: &[f64; 3]) -> f64 {
    v[0] / v[1]
}

/// Casts of helpers' results, whose types the translation cannot see (it
/// once refused them, suggesting an annotation rustc then rejected): to a
/// float from an integer, and to integers from a float, saturating as
/// Rust does (the inputs give NaN, infinities and values past `i32`).
#[parloop::kernel]
fn cast_results(a: &[f64; 3], f: &mut f64, i: &mut i32, u: &mut u64) {
    *f = positives(a) as f64 + ratio(a) as f32 as f64;
    *i = ratio(a) as i32 - positives(a);
    *u = ratio(a) as u64 + positives(a) as u64;
}

#[test]
fn casts_of_helper_results_follow_rust() {
    let rows: [[f64; 3]; 6] =
        [[1.0, 2.0, -1.0], [-3e12, 1e-3, 4.0], [0.0, 0.0, 1.0], [5.0, 0.0, 0.5], [-5.0, 0.0, 2.0], [7.5, -2.0, 3.0]];
    let n = rows.len();
    let (mut f, mut i, mut u) = (vec![0.0; n], vec![0; n], vec![0u64; n]);
    for e in 0..n {
        cast_results(&rows[e], &mut f[e], &mut i[e], &mut u[e]);
    }
    let a: Vec<f64> = rows.iter().flatten().copied().collect();
    for backend in [Backend::Seq, device::device_backend()] {
        let rt = Runtime::with_backend(backend).unwrap();
        let s = rt.set("s", n).unwrap();
        let ad = rt.dat("a", &s, 3, a.clone()).unwrap();
        let fd = rt.dat("f", &s, 1, vec![0.0; n]).unwrap();
        let id = rt.dat("i", &s, 1, vec![0i32; n]).unwrap();
        let ud = rt.dat("u", &s, 1, vec![0u64; n]).unwrap();
        rt.par_loop(
            cast_results::KERNEL,
            &s,
            &[ad.arg(Access::READ), fd.arg(Access::WRITE), id.arg(Access::WRITE), ud.arg(Access::WRITE)],
        )
        .unwrap();
        // NaN bits (0/0) depend on where the division ran: NaN is NaN.
        let bits = |v: Vec<f64>| v.iter().map(|x| if x.is_nan() { 0 } else { x.to_bits() }).collect::<Vec<_>>();
        assert_eq!(bits(fd.values().unwrap()), bits(f.clone()), "{backend:?}");
        assert_eq!(id.values().unwrap(), i, "{backend:?}");
        assert_eq!(ud.values().unwrap(), u, "{backend:?}");
    }
}

/// A parameter named like its kernel (`fn rms(rms: &mut f64)`, OP2's
/// habit): the host adapter bound the parameters under their own names and
/// then called the kernel by its name, which the parameter shadowed, so
/// the kernel did not compile ("expected function, found `Binder<f64>`").
#[parloop::kernel]
fn rms(q: &f64, rms: &mut f64) {
    *rms += *q * *q;
}

/// The same through a map, and a parameter named like the lane-wise twin
/// (`lanes4`) that the lane adapter called likewise.
#[parloop::kernel]
fn spread_named(w: &f64, spread_named: &mut f64, lanes4: &mut f64) {
    *spread_named += *w;
    *lanes4 -= 0.5 * *w;
}

#[test]
fn a_parameter_named_like_its_kernel_or_twin_is_an_ordinary_parameter() {
    assert!(spread_named::KERNEL.has_lanes());
    let (n, nodes) = (1000, 37);
    let ends: Vec<i32> = (0..2 * n).map(|k| ((k * 13 + k / 2) % nodes) as i32).collect();
    let mut want = vec![0.0; nodes];
    for e in 0..n {
        want[ends[2 * e] as usize] += e as f64;
        want[ends[2 * e + 1] as usize] -= 0.5 * e as f64;
    }
    for (backend, simd) in
        [(Backend::Seq, false), (Backend::Seq, true), (Backend::Threads, true), (Backend::Emu, false)]
    {
        let mut rt = Runtime::with_backend(backend).unwrap();
        rt.set_simd(simd);
        let edges = rt.set("edges", n).unwrap();
        let vertices = rt.set("vertices", nodes).unwrap();
        let pedge = rt.map("pedge", &edges, &vertices, 2, ends.clone()).unwrap();
        let q = rt.dat("q", &edges, 1, (0..n).map(|e| e as f64).collect()).unwrap();
        let sum = rt.global("sum", &[0.0f64]).unwrap();
        rt.par_loop(rms::KERNEL, &edges, &[q.arg(Access::READ), sum.arg(Access::INC)]).unwrap();
        let squares: f64 = (0..n).map(|e| (e * e) as f64).sum();
        assert_eq!(sum.value().unwrap(), squares, "{backend:?}");
        let r = rt.dat("r", &vertices, 1, vec![0.0; nodes]).unwrap();
        let args = [q.arg(Access::READ), r.arg_via(&pedge, 0, Access::INC), r.arg_via(&pedge, 1, Access::INC)];
        rt.par_loop(spread_named::KERNEL, &edges, &args).unwrap();
        // Whole and half numbers: exact in any order.
        assert_eq!(r.values().unwrap(), want, "{backend:?} (simd {simd})");
    }
}
