//! Probes of distributed runs against serial ones, under `mpiexec -n N`,
//! for features `parloop-mpi-check` does not cover: loops over subsets
//! (declared before and after the partition) with indirect INC, direct RW
//! and `Arg::index`; `Arg::index` after partitioning; temporaries written
//! and read across loops; chains of maps (edges -> cells -> vertices) and
//! a vertex -> vertex map; sets no map joins to the primary set; tiny and
//! empty sets; globals of dim > 1 with MIN/MAX/INC on integer and f32
//! types; `gather` of f32/i64/u32 dats of dim > 1; vector operations on
//! f32 and dim > 1 dats; a block (2 x 2) matrix: assembly, `mult`,
//! `to_csr` (rebuilt in the global numbering), `zero_rows`, CG, and the
//! Matrix Market file rank 0 writes (equal to the serial run's; it held
//! spurious zero entries of non-exec halo elements until the sparsity
//! counted executed elements only). `PROBE_KEEP=1` keeps the files.
//! Every program runs serially on every rank and distributed (METIS,
//! block and geometric partitions; seq, threads and emu backends); results are
//! compared on rank 0. Exits non-zero on any mismatch.

#[cfg(not(feature = "mpi"))]
fn main() {
    eprintln!("parloop-mpi-probe needs the `mpi` feature (cargo build --features mpi)");
    std::process::exit(2);
}

#[cfg(feature = "mpi")]
fn main() {
    probe::main();
}

#[cfg(feature = "mpi")]
mod probe {
    use parloop::mpi::{Communicator, CommunicatorCollectives, Partitioner, SystemOperation};
    use parloop::solve::{bicgstab, cg, CgOptions, Preconditioner};
    use parloop::{Access, Arg, Backend, Dat, Runtime};

    // ---------------------------------------------------------------- kernels

    #[parloop::kernel]
    fn k_index(i: &i64, out: &mut f64) {
        *out = *i as f64;
    }

    #[parloop::kernel]
    fn k_cell_inc(i: &i64, a: &mut f64, b: &mut f64, c: &mut f64) {
        let v = *i as f64 + 1.0;
        *a += v;
        *b += 2.0 * v;
        *c += 3.0 * v;
    }

    #[parloop::kernel]
    fn k_sub_cells(i: &i64, w: &mut [f64; 2], a: &mut f64, b: &mut f64, c: &mut f64, count: &mut f64) {
        w[0] += *i as f64;
        w[1] = w[0] * 0.5 + 1.0;
        let v = *i as f64 + 0.5;
        *a += v;
        *b += 10.0 * v;
        *c += 100.0 * v;
        *count += 1.0;
    }

    #[parloop::kernel]
    fn k_sub_verts(x: &[f64; 2], px: &[f64; 2], i: &i64, out: &mut [f64; 2], count: &mut f64) {
        out[0] = px[0] + x[1];
        out[1] = *i as f64 * 0.25 + px[1];
        *count += 1.0;
    }

    #[parloop::kernel]
    fn k_write_one(i: &i64, out: &mut f64) {
        *out = 2.0 * *i as f64 + 1.0;
    }

    #[parloop::kernel]
    fn k_edge_tmp(a: &[f64; 2], b: &[f64; 2], t: &mut [f64; 2]) {
        t[0] = b[0] - a[0];
        t[1] = a[1] * b[1] + 1.0;
    }

    #[parloop::kernel]
    fn k_edge_to_cells(t: &[f64; 2], c0: &mut f64, c1: &mut f64) {
        *c0 += t[0] + t[1];
        *c1 -= 0.5 * t[0];
    }

    #[parloop::kernel]
    fn k_cell_to_verts(c: &f64, a: &mut f64, b: &mut f64, d: &mut f64) {
        *a += *c;
        *b += 2.0 * *c;
        *d += 4.0 * *c;
    }

    #[parloop::kernel]
    fn k_partner(x: &[f64; 2], p: &mut [f64; 2]) {
        p[0] += x[0];
        p[1] += x[1] * 2.0;
    }

    #[parloop::kernel]
    fn k_globals(i: &i64, mn: &mut [i32; 3], mx: &mut [i64; 2], umn: &mut u32, umx: &mut [u64; 2], s: &mut [i64; 2]) {
        let g = *i;
        let a = ((g * 37) % 101) as i32 - 50;
        let b = -(g as i32);
        let c = (g % 7) as i32 + 3;
        if a < mn[0] {
            mn[0] = a;
        }
        if b < mn[1] {
            mn[1] = b;
        }
        if c < mn[2] {
            mn[2] = c;
        }
        let d = (g * 13) % 29;
        if d > mx[0] {
            mx[0] = d;
        }
        if -g > mx[1] {
            mx[1] = -g;
        }
        let e = ((g * 13) % 97) as u32 + 5;
        if e < *umn {
            *umn = e;
        }
        let f = (g as u64) * 3;
        if f > umx[0] {
            umx[0] = f;
        }
        let h = (g as u64) % 5;
        if h > umx[1] {
            umx[1] = h;
        }
        s[0] += g;
        s[1] += g * g;
    }

    #[parloop::kernel]
    fn k_fglobals(i: &i64, f: &mut [f32; 3], lo: &mut [f32; 2], hi: &mut [f64; 3]) {
        let g = *i as f32;
        f[0] += g * 0.5;
        f[1] += 1.0;
        f[2] += g * g;
        let a = (g * 0.37) - 3.0;
        if a < lo[0] {
            lo[0] = a;
        }
        if -a < lo[1] {
            lo[1] = -a;
        }
        let b = *i as f64;
        if b > hi[0] {
            hi[0] = b;
        }
        if -b > hi[1] {
            hi[1] = -b;
        }
        if b * 0.5 > hi[2] {
            hi[2] = b * 0.5;
        }
    }

    #[parloop::kernel]
    fn k_fill_typed(i: &i64, f: &mut [f32; 3], l: &mut [i64; 2], u: &mut u32) {
        let g = *i;
        f[0] = g as f32 * 0.25;
        f[1] = (g % 5) as f32 - 2.0;
        f[2] = 1.0 / (g as f32 + 1.0);
        l[0] = g * 1000003;
        l[1] = -g;
        *u = (g as u32) * 7 + 1;
    }

    #[parloop::kernel]
    fn k_fill2(i: &i64, x: &mut [f64; 2]) {
        let g = *i;
        x[0] = ((g * 7919) % 1000) as f64 / 1000.0;
        x[1] = ((g * 104729) % 997) as f64 / 997.0 - 0.5;
    }

    #[parloop::kernel]
    fn k_ab(w: &f64, b0: &mut f64, b1: &mut f64, a: &mut f64, s: &mut f64) {
        *b0 += *w;
        *b1 += 2.0 * *w;
        *a = *a * 0.5 + *w;
        *s += *w;
    }

    #[parloop::kernel]
    fn k_ab_back(b: &[[f64; 1]; 2], a: &mut f64) {
        *a += b[0][0] - 0.25 * b[1][0];
    }

    #[parloop::kernel]
    fn k_tiny(i: &i64, x: &f64, mx: &mut f64, s: &mut f64) {
        if *x + *i as f64 > *mx {
            *mx = *x + *i as f64;
        }
        *s += *x;
    }

    #[parloop::kernel]
    fn k_count(c: &mut f64) {
        *c += 1.0;
    }

    /// A symmetric positive definite element matrix of 2 x 2 blocks:
    /// w (2.3 I - 0.3 J) with w > 0 from the coordinates.
    #[parloop::kernel]
    fn k_mat(x: &[[f64; 2]; 3], i: &i64, m: &mut [[f64; 6]; 6]) {
        let w = 1.0 + x[0][0] + x[1][1] + 0.1 * ((*i % 3) as f64);
        for r in 0..6 {
            for c in 0..6 {
                let d = if r == c { 2.0 } else { 0.0 };
                m[r][c] += w * (d - 0.3);
            }
        }
    }

    /// `k_mat` plus a skew part: not symmetric (its symmetric part is
    /// `k_mat`'s), for BiCGStab.
    #[parloop::kernel]
    fn k_mat_skew(x: &[[f64; 2]; 3], i: &i64, m: &mut [[f64; 6]; 6]) {
        let w = 1.0 + x[0][0] + x[1][1] + 0.1 * ((*i % 3) as f64);
        for r in 0..6 {
            for c in 0..6 {
                let d = if r == c { 2.0 } else { 0.0 };
                m[r][c] += w * (d - 0.3) + 0.05 * w * (r as f64 - c as f64);
            }
        }
    }

    // ---------------------------------------------------------------- helpers

    type Outcome = Vec<(String, Option<Vec<f64>>)>;

    fn push(out: &mut Outcome, name: &str, v: Option<Vec<f64>>) {
        out.push((name.to_owned(), v));
    }

    fn g64(d: &Dat<f64>) -> parloop::Result<Option<Vec<f64>>> {
        d.gather(0)
    }

    /// The mesh's unique edges (sorted vertex pairs) and each edge's cells
    /// (one twice on the boundary).
    fn edges_of(mesh: &parloop_mesh::Mesh) -> (Vec<i32>, Vec<i32>) {
        let mut m: std::collections::BTreeMap<(u32, u32), Vec<i32>> = Default::default();
        for (c, tri) in mesh.cells.chunks(3).enumerate() {
            for (a, b) in [(tri[0], tri[1]), (tri[1], tri[2]), (tri[2], tri[0])] {
                m.entry((a.min(b), a.max(b))).or_default().push(c as i32);
            }
        }
        let mut ev = Vec::new();
        let mut ec = Vec::new();
        for ((a, b), cs) in m {
            ev.extend([a as i32, b as i32]);
            ec.extend([cs[0], *cs.last().unwrap()]);
        }
        (ev, ec)
    }

    #[derive(Clone, Copy, Debug, PartialEq)]
    enum Part {
        Serial,
        Metis,
        Block,
        Geometric,
    }

    /// The whole probe program on `rt`.
    fn program(
        rt: &Runtime,
        world: &parloop::mpi::SimpleCommunicator,
        part: Part,
        root_only: bool,
    ) -> parloop::Result<Outcome> {
        let mut out = Outcome::new();
        let full = parloop_mesh::unit_square(9, 7).expect("mesh");
        let nv_global = full.vertices();
        // Declared on rank 0 alone: the others declare everything empty.
        let empty_here = root_only && world.rank() != 0;
        let mesh = if empty_here {
            parloop_mesh::Mesh {
                dim: 2,
                coords: vec![],
                cells: vec![],
                facets: vec![],
                facet_cells: vec![],
                groups: full.groups.iter().map(|g| parloop_mesh::Group { entities: vec![], ..g.clone() }).collect(),
            }
        } else {
            full.clone()
        };
        let nv = mesh.vertices();
        let nc = mesh.num_cells();
        let m = mesh.declare(rt, "m")?;
        let (ev, ec) = edges_of(&mesh);
        let ne = ev.len() / 2;
        let edges = rt.set("edges", ne)?;
        let edge_vertices = rt.map("edge_vertices", &edges, &m.vertices, 2, ev)?;
        let edge_cells = rt.map("edge_cells", &edges, &m.cells, 2, ec)?;
        let partner_values: Vec<i32> = (0..nv).map(|v| ((v * 7 + 3) % nv) as i32).collect();
        let partner = rt.map("partner", &m.vertices, &m.vertices, 1, partner_values)?;
        // Sets no map joins to the mesh.
        let (na, nb) = if empty_here { (0, 0) } else { (37, 23) };
        let aset = rt.set("aset", na)?;
        let bset = rt.set("bset", nb)?;
        let ab_values: Vec<i32> =
            (0..na).flat_map(|a| [(a % nb.max(1)) as i32, ((a * 5 + 2) % nb.max(1)) as i32]).collect();
        let ab = rt.map("ab", &aset, &bset, 2, ab_values)?;
        let aw = rt.dat("aw", &aset, 1, (0..na).map(|a| a as f64 * 0.5 + 1.0).collect())?;
        let aa = rt.dat("aa", &aset, 1, (0..na).map(|a| a as f64).collect())?;
        let bb = rt.dat("bb", &bset, 1, vec![0.0; nb])?;
        // Tiny and empty sets.
        let tiny = rt.set("tiny", if empty_here { 0 } else { 3 })?;
        let tx = rt.dat("tx", &tiny, 1, if empty_here { vec![] } else { vec![1.5, -2.0, 4.25] })?;
        let nothing = rt.set("nothing", 0)?;
        // Dats.
        let vidx = rt.dat("vidx", &m.vertices, 1, vec![-1.0; nv])?;
        let cidx = rt.dat("cidx", &m.cells, 1, vec![-1.0; nc])?;
        let vsum = rt.dat("vsum", &m.vertices, 1, vec![0.0; nv])?;
        let vsub = rt.dat("vsub", &m.vertices, 1, vec![0.0; nv])?;
        let csub = rt.dat("csub", &m.cells, 2, (0..2 * nc).map(|k| k as f64).collect())?;
        let vx = rt.dat("vx", &m.vertices, 2, vec![0.0; 2 * nv])?;
        let vout = rt.dat("vout", &m.vertices, 2, vec![7.0; 2 * nv])?;
        let vpart = rt.dat("vpart", &m.vertices, 2, vec![0.0; 2 * nv])?;
        let cacc = rt.dat("cacc", &m.cells, 1, vec![0.0; nc])?;
        let vchain = rt.dat("vchain", &m.vertices, 1, vec![0.0; nv])?;
        let f3 = rt.dat("f3", &m.vertices, 3, vec![0.0f32; 3 * nv])?;
        let l2 = rt.dat("l2", &m.vertices, 2, vec![0i64; 2 * nv])?;
        let u1 = rt.dat("u1", &m.vertices, 1, vec![0u32; nv])?;
        let fy = rt.dat("fy", &m.vertices, 3, vec![1.0f32; 3 * nv])?;
        let vwone = rt.dat("vwone", &m.vertices, 1, vec![0.0; nv])?;
        // Subsets declared before the partition (global numbering).
        let sub_cells = rt.subset("sub_cells", &m.cells, (0..nc).filter(|c| c % 3 == 1 || *c < 4).collect())?;
        let sub_verts = rt.subset("sub_verts", &m.vertices, (0..nv).filter(|v| v % 4 == 2).collect())?;
        let one_cell = rt.subset("one_cell", &m.cells, if nc > 0 { vec![nc / 2] } else { vec![] })?;
        let no_cells = rt.subset("no_cells", &m.cells, vec![])?;
        let dirichlet = rt.subset("dirichlet", &m.vertices, (0..nv).filter(|v| v % 9 == 0 || v % 9 == 8).collect())?;
        // Globals.
        let mn = rt.global("mn", &[i32::MAX; 3])?;
        let mx = rt.global("mx", &[i64::MIN; 2])?;
        let umn = rt.global("umn", &[u32::MAX])?;
        let umx = rt.global("umx", &[0u64, 1])?;
        let isum = rt.global("isum", &[10i64, -3])?;
        let fsum = rt.global("fsum", &[0.0f32; 3])?;
        let flo = rt.global("flo", &[f32::MAX; 2])?;
        let fhi = rt.global("fhi", &[f64::MIN; 3])?;
        let count = rt.global("count", &[0.0])?;
        let count2 = rt.global("count2", &[0.0])?;
        let abs = rt.global("abs", &[0.0])?;
        let tmax = rt.global("tmax", &[f64::MIN])?;
        let tsum = rt.global("tsum", &[0.0])?;
        let ncount = rt.global("ncount", &[5.0])?;
        let c1 = rt.global("c1", &[0.0])?;
        let c0 = rt.global("c0", &[0.0])?;

        let dist = part != Part::Serial;
        match part {
            Part::Serial => {}
            Part::Metis => drop(rt.partition(&m.cells, &m.cell_vertices, Partitioner::Metis)?),
            Part::Block => drop(rt.partition(&m.cells, &m.cell_vertices, Partitioner::Block)?),
            Part::Geometric => drop(rt.partition(&m.cells, &m.cell_vertices, Partitioner::Geometric(&m.coords))?),
        }
        // A temporary declared after the partition.
        let etmp = rt.temporary::<f64>("etmp", &edges, 2)?;

        // 1. Arg::index on vertices and cells.
        rt.par_loop(k_index::KERNEL, &m.vertices, &[Arg::index(), vidx.arg(Access::WRITE)])?;
        rt.par_loop(k_index::KERNEL, &m.cells, &[Arg::index(), cidx.arg(Access::WRITE)])?;
        push(&mut out, "Arg::index on vertices", g64(&vidx)?);
        push(&mut out, "Arg::index on cells", g64(&cidx)?);
        // 1b. A dat declared after the partition, its halo values a guess
        // (-1e9) rather than the owners': the first loop reading the halo
        // exchanges it (the guess reached the sums before).
        let owned_vertices = m.vertices.size();
        let late_values: Vec<f64> =
            vidx.values()?.iter().enumerate().map(|(k, &g)| if k < owned_vertices { g } else { -1e9 }).collect();
        let late = rt.dat("late", &m.vertices, 1, late_values)?;
        let late_sums = rt.dat("late_sums", &m.cells, 1, vec![0.0; m.cells.total()])?;
        rt.par_loop(
            k_sum3::KERNEL,
            &m.cells,
            &[
                late.arg_via(&m.cell_vertices, 0, Access::READ),
                late.arg_via(&m.cell_vertices, 1, Access::READ),
                late.arg_via(&m.cell_vertices, 2, Access::READ),
                late_sums.arg(Access::WRITE),
            ],
        )?;
        push(&mut out, "a dat declared after the partition, read through a map", g64(&late_sums)?);
        // 2. Arg::index in an INC loop (the exec halo runs).
        let cv = &m.cell_vertices;
        rt.par_loop(
            k_cell_inc::KERNEL,
            &m.cells,
            &[
                Arg::index(),
                vsum.arg_via(cv, 0, Access::INC),
                vsum.arg_via(cv, 1, Access::INC),
                vsum.arg_via(cv, 2, Access::INC),
            ],
        )?;
        push(&mut out, "Arg::index in an indirect INC loop", g64(&vsum)?);
        // 3. A loop over a subset of cells: Arg::index, direct RW, indirect INC, global.
        for _ in 0..2 {
            rt.par_loop(
                k_sub_cells::KERNEL,
                &sub_cells,
                &[
                    Arg::index(),
                    csub.arg(Access::RW),
                    vsub.arg_via(cv, 0, Access::INC),
                    vsub.arg_via(cv, 1, Access::INC),
                    vsub.arg_via(cv, 2, Access::INC),
                    count.arg(Access::INC),
                ],
            )?;
        }
        push(&mut out, "subset of cells: direct RW", g64(&csub)?);
        push(&mut out, "subset of cells: indirect INC", g64(&vsub)?);
        push(&mut out, "subset of cells: global INC", Some(vec![count.value()?]));
        // A one-cell subset (empty on most ranks) and an empty one.
        rt.par_loop(
            k_sub_cells::KERNEL,
            &one_cell,
            &[
                Arg::index(),
                csub.arg(Access::RW),
                vsub.arg_via(cv, 0, Access::INC),
                vsub.arg_via(cv, 1, Access::INC),
                vsub.arg_via(cv, 2, Access::INC),
                c1.arg(Access::INC),
            ],
        )?;
        rt.par_loop(k_count::KERNEL, &no_cells, &[c0.arg(Access::INC)])?;
        push(&mut out, "one-cell subset: vsub", g64(&vsub)?);
        push(&mut out, "one-cell subset: csub", g64(&csub)?);
        push(&mut out, "one-cell / empty subset: counts", Some(vec![c1.value()?, c0.value()?]));
        // 4. A subset of vertices reading through the vertex -> vertex map.
        rt.par_loop(k_fill2::KERNEL, &m.vertices, &[Arg::index(), vx.arg(Access::WRITE)])?;
        rt.par_loop(
            k_sub_verts::KERNEL,
            &sub_verts,
            &[
                vx.arg(Access::READ),
                vx.arg_via(&partner, 0, Access::READ),
                Arg::index(),
                vout.arg(Access::WRITE),
                count2.arg(Access::INC),
            ],
        )?;
        push(&mut out, "subset of vertices via partner map: vout", g64(&vout)?);
        push(&mut out, "subset of vertices: count", Some(vec![count2.value()?]));
        // INC through the vertex -> vertex map (after vx was written directly: stale halo).
        rt.par_loop(k_partner::KERNEL, &m.vertices, &[vx.arg(Access::READ), vpart.arg_via(&partner, 0, Access::INC)])?;
        rt.par_loop(
            k_partner::KERNEL,
            &m.vertices,
            &[vout.arg(Access::READ), vpart.arg_via(&partner, 0, Access::INC)],
        )?;
        push(&mut out, "INC through the vertex -> vertex map", g64(&vpart)?);
        // 5. A temporary on edges (declared after the partition), edges ->
        // cells -> vertices.
        for step in 0..2 {
            rt.par_loop(
                k_edge_tmp::KERNEL,
                &edges,
                &[
                    m.coords.arg_via(&edge_vertices, 0, Access::READ),
                    vx.arg_via(&edge_vertices, 1, Access::READ),
                    etmp.arg(Access::WRITE),
                ],
            )?;
            rt.par_loop(
                k_edge_to_cells::KERNEL,
                &edges,
                &[
                    etmp.arg(Access::READ),
                    cacc.arg_via(&edge_cells, 0, Access::INC),
                    cacc.arg_via(&edge_cells, 1, Access::INC),
                ],
            )?;
            rt.par_loop(
                k_cell_to_verts::KERNEL,
                &m.cells,
                &[
                    cacc.arg(Access::READ),
                    vchain.arg_via(cv, 0, Access::INC),
                    vchain.arg_via(cv, 1, Access::INC),
                    vchain.arg_via(cv, 2, Access::INC),
                ],
            )?;
            // vx changes between the steps (direct RW): its halo goes stale.
            if step == 0 {
                rt.scale(1.5, &vx)?;
            }
        }
        push(&mut out, "chain: cacc (cells)", g64(&cacc)?);
        push(&mut out, "chain: vchain (vertices)", g64(&vchain)?);
        // 6. Globals of dim > 1, integer MIN/MAX/INC, f32.
        rt.par_loop(
            k_globals::KERNEL,
            &m.vertices,
            &[
                Arg::index(),
                mn.arg(Access::MIN),
                mx.arg(Access::MAX),
                umn.arg(Access::MIN),
                umx.arg(Access::MAX),
                isum.arg(Access::INC),
            ],
        )?;
        let f = |v: Vec<i64>| Some(v.into_iter().map(|x| x as f64).collect::<Vec<f64>>());
        push(&mut out, "i32 MIN dim 3", f(mn.values()?.into_iter().map(i64::from).collect()));
        push(&mut out, "i64 MAX dim 2", f(mx.values()?));
        push(&mut out, "u32 MIN", f(umn.values()?.into_iter().map(i64::from).collect()));
        push(&mut out, "u64 MAX dim 2", f(umx.values()?.into_iter().map(|x| x as i64).collect()));
        push(&mut out, "i64 INC dim 2", f(isum.values()?));
        // Same globals again over the cells (initial values carried).
        rt.par_loop(
            k_globals::KERNEL,
            &m.cells,
            &[
                Arg::index(),
                mn.arg(Access::MIN),
                mx.arg(Access::MAX),
                umn.arg(Access::MIN),
                umx.arg(Access::MAX),
                isum.arg(Access::INC),
            ],
        )?;
        push(&mut out, "integer globals, second loop", {
            let mut v: Vec<f64> = mn.values()?.into_iter().map(f64::from).collect();
            v.extend(mx.values()?.into_iter().map(|x| x as f64));
            v.push(umn.value()? as f64);
            v.extend(umx.values()?.into_iter().map(|x| x as f64));
            v.extend(isum.values()?.into_iter().map(|x| x as f64));
            Some(v)
        });
        rt.par_loop(
            k_fglobals::KERNEL,
            &m.vertices,
            &[Arg::index(), fsum.arg(Access::INC), flo.arg(Access::MIN), fhi.arg(Access::MAX)],
        )?;
        push(&mut out, "f32 INC dim 3", Some(fsum.values()?.into_iter().map(f64::from).collect()));
        push(&mut out, "f32 MIN dim 2", Some(flo.values()?.into_iter().map(f64::from).collect()));
        push(&mut out, "f64 MAX dim 3", Some(fhi.values()?));
        // 7. gather of f32/i64/u32 dats of dim > 1.
        rt.par_loop(
            k_fill_typed::KERNEL,
            &m.vertices,
            &[Arg::index(), f3.arg(Access::WRITE), l2.arg(Access::WRITE), u1.arg(Access::WRITE)],
        )?;
        push(&mut out, "gather f32 dim 3", f3.gather(0)?.map(|v| v.into_iter().map(f64::from).collect()));
        push(&mut out, "gather i64 dim 2", l2.gather(0)?.map(|v| v.into_iter().map(|x| x as f64).collect()));
        push(&mut out, "gather u32 dim 1", u1.gather(0)?.map(|v| v.into_iter().map(f64::from).collect()));
        // 8. Vector operations on f32 dim 3 and f64 dim 2.
        rt.axpy(0.5f32, &f3, &fy)?;
        let d32 = rt.dot(&f3, &fy)?;
        let n32 = rt.norm2(&fy)?;
        rt.axpby(2.0f32, &f3, -1.0, &fy)?;
        push(&mut out, "f32 dim 3 axpy/axpby", fy.gather(0)?.map(|v| v.into_iter().map(f64::from).collect()));
        push(&mut out, "f32 dim 3 dot, norm2", Some(vec![d32 as f64, n32 as f64]));
        let d64 = rt.dot(&vx, &vout)?;
        let n64 = rt.norm2(&vpart)?;
        push(&mut out, "f64 dim 2 dot, norm2", Some(vec![d64, n64]));
        // 9. Sets no map joins to the mesh.
        rt.par_loop(
            k_ab::KERNEL,
            &aset,
            &[
                aw.arg(Access::READ),
                bb.arg_via(&ab, 0, Access::INC),
                bb.arg_via(&ab, 1, Access::INC),
                aa.arg(Access::RW),
                abs.arg(Access::INC),
            ],
        )?;
        rt.par_loop(k_ab_back::KERNEL, &aset, &[bb.arg_vec(&ab, Access::READ), aa.arg(Access::RW)])?;
        push(&mut out, "unjoined sets: bb", g64(&bb)?);
        push(&mut out, "unjoined sets: aa", g64(&aa)?);
        push(&mut out, "unjoined sets: global", Some(vec![abs.value()?]));
        // 10. Tiny and empty sets.
        rt.par_loop(
            k_tiny::KERNEL,
            &tiny,
            &[Arg::index(), tx.arg(Access::READ), tmax.arg(Access::MAX), tsum.arg(Access::INC)],
        )?;
        rt.par_loop(k_count::KERNEL, &nothing, &[ncount.arg(Access::INC)])?;
        push(&mut out, "tiny set globals", Some(vec![tmax.value()?, tsum.value()?]));
        push(&mut out, "empty set global", Some(vec![ncount.value()?]));
        // 11. A subset declared after the partition, in the local numbering:
        // every local vertex (halo included) with an even global number, the
        // global numbers from Arg::index (vidx's halo refreshed by a loop
        // reading it through the map).
        rt.par_loop(
            k_cell_to_verts::KERNEL,
            &m.cells,
            &[
                cidx.arg(Access::READ),
                vwone.arg_via(cv, 0, Access::INC),
                vwone.arg_via(cv, 1, Access::INC),
                vwone.arg_via(cv, 2, Access::INC),
            ],
        )?;
        let gv = global_numbers_vertices(rt, &m.cells, cv, &vidx)?;
        let late: Vec<usize> = (0..gv.len()).filter(|&k| (gv[k] as usize) & 1 == 0).collect();
        let late_sub = rt.subset("late_verts", &m.vertices, late)?;
        let lw = rt.dat("lw", &m.vertices, 1, vec![0.0; m.vertices.total()])?;
        rt.par_loop(k_write_one::KERNEL, &late_sub, &[Arg::index(), lw.arg(Access::WRITE)])?;
        push(&mut out, "subset declared after the partition: direct WRITE", g64(&lw)?);
        // The same vertices listed in declared numbers, every rank the same
        // list (`subset_global`): the same loop writes the same values.
        let even: Vec<usize> = (0..nv_global).filter(|v| v & 1 == 0).collect();
        let declared_sub = rt.subset_global("declared_verts", &m.vertices, even)?;
        let dw = rt.dat("dw", &m.vertices, 1, vec![0.0; m.vertices.total()])?;
        rt.par_loop(k_write_one::KERNEL, &declared_sub, &[Arg::index(), dw.arg(Access::WRITE)])?;
        push(&mut out, "subset in declared numbers after the partition: direct WRITE", g64(&dw)?);
        // Cells, after the partition: global numbers of every local cell.
        let gc = global_numbers_cells(rt, &m.cells, cv, &cidx, &vwone)?;
        // Every third cell (`% 3 == 0` written so that clippy does not ask for
        // `is_multiple_of`, newer than the workspace's rust-version).
        let late_c: Vec<usize> =
            (0..gc.len()).filter(|&k| (gc[k] as usize) % 3 != 1 && (gc[k] as usize) % 3 != 2).collect();
        let late_csub = rt.subset("late_cells", &m.cells, late_c)?;
        let lv = rt.dat("lv", &m.vertices, 1, vec![0.0; m.vertices.total()])?;
        rt.par_loop(
            k_cell_inc::KERNEL,
            &late_csub,
            &[
                Arg::index(),
                lv.arg_via(cv, 0, Access::INC),
                lv.arg_via(cv, 1, Access::INC),
                lv.arg_via(cv, 2, Access::INC),
            ],
        )?;
        push(&mut out, "cell subset declared after the partition: indirect INC", g64(&lv)?);
        // 12. A block (2 x 2) matrix.
        let sp = rt.sparsity("block", &[(cv, cv)], (2, 2))?;
        let a = rt.mat::<f64>("A", &sp)?;
        rt.par_loop(
            k_mat::KERNEL,
            &m.cells,
            &[m.coords.arg_vec(cv, Access::READ), Arg::index(), a.arg(cv, cv, Access::INC)],
        )?;
        let y = rt.dat("y", &m.vertices, 2, vec![0.0; 2 * m.vertices.total()])?;
        rt.mult(&a, &vx, &y)?;
        push(&mut out, "block matrix: A x", g64(&y)?);
        push(&mut out, "block matrix: dense (to_csr in global numbering)", dense(world, &a, &gv, 2 * nv_global, dist)?);
        // CG on the block system A u = y.
        let u = rt.dat("u", &m.vertices, 2, vec![0.0; 2 * m.vertices.total()])?;
        let opts = CgOptions { rtol: 1e-12, preconditioner: Preconditioner::Jacobi, ..CgOptions::default() };
        let report = cg(rt, &a, &y, &u, &opts)?;
        push(&mut out, "block CG solution (should be x)", g64(&u)?);
        push(&mut out, "block CG iterations", Some(vec![report.iterations as f64]));
        // BiCGStab on a nonsymmetric block system B w = z, z = B x.
        let skew = rt.mat::<f64>("B", &sp)?;
        rt.par_loop(
            k_mat_skew::KERNEL,
            &m.cells,
            &[m.coords.arg_vec(cv, Access::READ), Arg::index(), skew.arg(cv, cv, Access::INC)],
        )?;
        let z = rt.dat("z", &m.vertices, 2, vec![0.0; 2 * m.vertices.total()])?;
        rt.mult(&skew, &vx, &z)?;
        let w = rt.dat("w", &m.vertices, 2, vec![0.0; 2 * m.vertices.total()])?;
        let report = bicgstab(rt, &skew, &z, &w, &opts)?;
        push(&mut out, "block BiCGStab solution (should be x)", g64(&w)?);
        push(&mut out, "block BiCGStab iterations", Some(vec![report.iterations as f64]));
        // zero_rows with a subset, then the product again.
        a.zero_rows(&dirichlet, 1.0)?;
        rt.mult(&a, &vx, &y)?;
        push(&mut out, "block matrix after zero_rows: A x", g64(&y)?);
        push(&mut out, "block matrix after zero_rows: dense", dense(world, &a, &gv, 2 * nv_global, dist)?);
        // Matrix Market output: rank 0 writes the whole matrix in the
        // global numbering (each rank wrote its own rows with local columns).
        let path = std::env::temp_dir().join(format!(
            "parloop-probe-{}-{part:?}-{}-{dist}.mtx",
            std::process::id(),
            world.rank()
        ));
        a.write_matrix_market(&path)?;
        if world.rank() == 0 {
            let text = std::fs::read_to_string(&path)
                .map_err(|e| parloop::Error::Io { path: path.display().to_string(), source: e })?;
            if std::env::var_os("PROBE_KEEP").is_none() {
                std::fs::remove_file(&path).ok();
            }
            let numbers: Vec<f64> = text
                .lines()
                .filter(|l| !l.starts_with('%'))
                .flat_map(|l| l.split_whitespace().map(|t| t.parse::<f64>().unwrap_or(f64::NAN)))
                .collect();
            push(&mut out, "block matrix: Matrix Market file", Some(numbers));
        } else {
            push(&mut out, "block matrix: Matrix Market file", None);
        }
        Ok(out)
    }

    /// The global number of every local vertex (halo included): `vidx`
    /// holds them on the owned vertices; a loop reading it through the map
    /// refreshes its halo.
    fn global_numbers_vertices(
        rt: &Runtime,
        cells: &parloop::Set,
        cv: &parloop::Map,
        vidx: &Dat<f64>,
    ) -> parloop::Result<Vec<f64>> {
        let sink = rt.dat(&format!("sink_{}", cells.name()), cells, 1, vec![0.0; cells.total()])?;
        rt.par_loop(
            k_sum3::KERNEL,
            cells,
            &[
                vidx.arg_via(cv, 0, Access::READ),
                vidx.arg_via(cv, 1, Access::READ),
                vidx.arg_via(cv, 2, Access::READ),
                sink.arg(Access::WRITE),
            ],
        )?;
        vidx.values()
    }

    #[parloop::kernel]
    fn k_sum3(a: &f64, b: &f64, c: &f64, s: &mut f64) {
        *s = *a + *b + *c;
    }

    /// The global number of every local cell (halo included): `cidx` holds
    /// them on the owned cells; a loop running the exec halo (indirect INC)
    /// reading it directly refreshes the halo.
    fn global_numbers_cells(
        rt: &Runtime,
        cells: &parloop::Set,
        cv: &parloop::Map,
        cidx: &Dat<f64>,
        scratch: &Dat<f64>,
    ) -> parloop::Result<Vec<f64>> {
        rt.par_loop(
            k_cell_to_verts::KERNEL,
            cells,
            &[
                cidx.arg(Access::READ),
                scratch.arg_via(cv, 0, Access::INC),
                scratch.arg_via(cv, 1, Access::INC),
                scratch.arg_via(cv, 2, Access::INC),
            ],
        )?;
        cidx.values()
    }

    /// The matrix as a dense `n x n` array in the global numbering, from
    /// every rank's CSR copy (its owned rows; local columns mapped through
    /// the vertices' global numbers `gv`), summed over the ranks. Entries
    /// of a row held by two ranks would add up: a count of rows is checked.
    fn dense(
        world: &parloop::mpi::SimpleCommunicator,
        a: &parloop::Mat<f64>,
        gv: &[f64],
        n: usize,
        dist: bool,
    ) -> parloop::Result<Option<Vec<f64>>> {
        let csr = a.to_csr()?;
        let rows = csr.row_ptr.len() - 1;
        let mut local = vec![0.0; n * n + n];
        let g = |k: usize| gv[k / 2] as usize * 2 + k % 2;
        for r in 0..rows {
            let gr = if dist { g(r) } else { r };
            local[n * n + gr] += 1.0;
            for k in csr.row_ptr[r]..csr.row_ptr[r + 1] {
                let gc = if dist { g(csr.cols[k]) } else { csr.cols[k] };
                local[gr * n + gc] += csr.vals[k];
            }
        }
        if !dist {
            return Ok(Some(local));
        }
        let mut all = vec![0.0; local.len()];
        world.all_reduce_into(&local[..], &mut all[..], SystemOperation::sum());
        Ok(if world.rank() == 0 { Some(all) } else { None })
    }

    // ---------------------------------------------------------------- main

    fn compare(label: &str, got: &Outcome, want: &Outcome, rank: usize, failures: &mut Vec<String>) -> usize {
        let mut compared = 0;
        for ((name, g), (_, w)) in got.iter().zip(want) {
            let (Some(g), Some(w)) = (g, w) else { continue };
            compared += 1;
            if name.contains("iterations") {
                if (g[0] - w[0]).abs() > 2.0 {
                    failures.push(format!("{label}: {name}: {} vs serial {}", g[0], w[0]));
                }
                continue;
            }
            let tol = if name.contains("f32") {
                1e-5
            } else if name.contains("CG") {
                1e-8
            } else {
                1e-12
            };
            if g.len() != w.len() {
                failures.push(format!("{label}: {name}: {} values vs serial {}", g.len(), w.len()));
                continue;
            }
            let scale = w.iter().fold(0.0f64, |m, v| m.max(v.abs())).max(1e-300);
            let mut bad = Vec::new();
            for (k, (a, b)) in g.iter().zip(w).enumerate() {
                let close = (a - b).abs() <= tol * scale || (a.is_nan() && b.is_nan());
                if !close {
                    bad.push((k, *a, *b));
                }
            }
            if !bad.is_empty() {
                let first: Vec<String> = bad.iter().take(6).map(|(k, a, b)| format!("[{k}] {a} vs {b}")).collect();
                failures.push(format!(
                    "{label}: {name}: {} of {} values differ (rank {rank}): {}",
                    bad.len(),
                    g.len(),
                    first.join(", ")
                ));
            }
        }
        if got.len() != want.len() {
            failures.push(format!("{label}: {} results vs serial {}", got.len(), want.len()));
        }
        compared
    }

    /// Ranks out of step on purpose: rank 1 skips a loop that exchanges a
    /// halo, so rank 0 waits in the exchange and rank 1 in the gather after
    /// it. `ci/test` runs it with `PARLOOP_MPI_TIMEOUT=3` and checks that
    /// the job ends saying where it waited, instead of hanging.
    fn out_of_step(world: &parloop::mpi::SimpleCommunicator) {
        let rt = Runtime::with_communicator(Backend::Seq, world).unwrap_or_else(|e| panic!("runtime: {e}"));
        let run = || -> parloop::Result<()> {
            let m = parloop_mesh::unit_square(6, 6).expect("mesh").declare(&rt, "m")?;
            drop(rt.partition(&m.cells, &m.cell_vertices, Partitioner::Metis)?);
            // Declared after the partition: its halo is exchanged when a
            // loop first reads it.
            let x = rt.dat("x", &m.vertices, 1, vec![1.0; m.vertices.total()])?;
            let sums = rt.dat("sums", &m.cells, 1, vec![0.0; m.cells.total()])?;
            if world.rank() != 1 {
                let cv = &m.cell_vertices;
                rt.par_loop(
                    k_sum3::KERNEL,
                    &m.cells,
                    &[
                        x.arg_via(cv, 0, Access::READ),
                        x.arg_via(cv, 1, Access::READ),
                        x.arg_via(cv, 2, Access::READ),
                        sums.arg(Access::WRITE),
                    ],
                )?;
            }
            sums.gather(0)?;
            Ok(())
        };
        match run() {
            Ok(()) => println!("parloop-mpi-probe out-of-step: finished, which ranks out of step cannot"),
            Err(e) => eprintln!("parloop-mpi-probe out-of-step: {e}"),
        }
    }

    /// Ranks that declare different meshes on purpose (`what`: a set's
    /// size, a dat's values, or the number of dats): the partition's error
    /// names what differs, on every rank; exits 1 with it (`ci/test`).
    fn mismatch(world: &parloop::mpi::SimpleCommunicator, what: &str) {
        let rt = Runtime::with_communicator(Backend::Seq, world).unwrap_or_else(|e| panic!("runtime: {e}"));
        let rank = world.rank() as usize;
        let run = || -> parloop::Result<()> {
            let m = parloop_mesh::unit_square(4, 4).expect("mesh").declare(&rt, "m")?;
            let n = m.vertices.total();
            let _extra = rt.set("extra", if what == "set" { 3 + rank } else { 3 })?;
            let _u = rt.dat("u", &m.vertices, 1, vec![if what == "dat" { rank as f64 } else { 0.0 }; n])?;
            let _v = if what == "count" && rank == 1 { Some(rt.dat("v", &m.vertices, 1, vec![0.0; n])?) } else { None };
            drop(rt.partition(&m.cells, &m.cell_vertices, Partitioner::Metis)?);
            Ok(())
        };
        if let Err(e) = run() {
            eprintln!("parloop-mpi-probe mismatch-{what}: rank {rank}: {e}");
            std::process::exit(1);
        }
    }

    pub fn main() {
        let universe = parloop::mpi::initialize().expect("MPI initialises once");
        let world = universe.world();
        let (rank, size) = (world.rank() as usize, world.size() as usize);
        let mut failures = Vec::new();
        let only: Option<String> = std::env::args().nth(1);
        if only.as_deref() == Some("out-of-step") {
            return out_of_step(&world);
        }
        if let Some(what) = only.as_deref().and_then(|o| o.strip_prefix("mismatch-")) {
            return mismatch(&world, what);
        }
        for backend in [Backend::Seq, Backend::Threads, Backend::Emu] {
            let serial_rt = Runtime::with_backend(backend).expect("serial runtime");
            let want = program(&serial_rt, &world, Part::Serial, false).unwrap_or_else(|e| panic!("serial: {e}"));
            for (part, root_only) in [
                (Part::Metis, false),
                (Part::Block, false),
                (Part::Geometric, false),
                (Part::Metis, true),
                (Part::Block, true),
            ] {
                if only.as_deref().is_some_and(|o| !format!("{part:?}").eq_ignore_ascii_case(o)) {
                    continue;
                }
                let rt = Runtime::with_communicator(backend, &world).expect("runtime");
                let label =
                    format!("{backend:?}/{part:?}{}/{size} ranks", if root_only { " declared on rank 0" } else { "" });
                match program(&rt, &world, part, root_only) {
                    Ok(got) => {
                        let compared = compare(&label, &got, &want, rank, &mut failures);
                        if rank == 0 {
                            println!("{label}: {compared} results compared");
                        }
                    }
                    Err(e) => failures.push(format!("{label}: error: {e}")),
                }
            }
        }
        let bad = failures.len() as u64;
        let mut any = 0u64;
        world.all_reduce_into(&bad, &mut any, SystemOperation::max());
        for f in &failures {
            eprintln!("rank {rank}: MISMATCH {f}");
        }
        if any > 0 {
            if rank == 0 {
                eprintln!("parloop-mpi-probe: FAILED on {size} ranks");
            }
            drop(universe);
            std::process::exit(1);
        }
        if rank == 0 {
            println!("parloop-mpi-probe: all probes match serial on {size} ranks");
        }
    }
}
