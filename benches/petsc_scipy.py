#!/usr/bin/env python3
"""PETSc (petsc4py) and SciPy on the reference problem of benches/benches/linalg.rs.

Not a test: it prints timings to set beside `cargo bench -p parloop-benches
--bench linalg` (docs/PERFORMANCE.md, "Linear algebra"). The problem is the
same: the P1 Laplacian of the unit cube cut into n^3 cubes of six Kuhn
tetrahedra, on the (n-1)^3 interior nodes, 15 stored entries per row (the
7-point values h (6, -1) and explicit zeros on the Kuhn diagonals),
b = M f (consistent mass, f = 3 pi^2 sin sin sin), Jacobi CG to rtol 1e-10,
then Jacobi BiCGStab (right-preconditioned) to the same tolerance.

    python3 benches/petsc_scipy.py [n]              # SciPy and PETSc, one process
    mpiexec -n 2 python3 benches/petsc_scipy.py [n] # PETSc on 2 ranks (SciPy skipped)

Debian: apt-get install python3-petsc4py python3-scipy, and without the
petsc-dev alternatives link, PETSC_DIR=/usr/lib/petscdir/petsc3.18/x86_64-linux-gnu-real.
Either part is skipped, with a note, when its package is missing.
"""

import sys
import time

import numpy as np

OFFSETS = np.array(
    [[0, 0, 0], [-1, 0, 0], [1, 0, 0], [0, -1, 0], [0, 1, 0], [0, 0, -1], [0, 0, 1],
     [1, 1, 0], [-1, -1, 0], [1, 0, 1], [-1, 0, -1], [0, 1, 1], [0, -1, -1], [1, 1, 1], [-1, -1, -1]]
)


def csr_rows(n, lo, hi):
    """CSR (indptr, indices, data) of rows lo..hi, columns sorted."""
    m = n - 1
    h = 1.0 / n
    r = np.arange(lo, hi, dtype=np.int64)
    ijk = np.stack([r // (m * m), (r // m) % m, r % m], axis=1)
    nb = ijk[:, None, :] + OFFSETS[None, :, :]
    inside = np.all((nb >= 0) & (nb < m), axis=2)
    cols = (nb[:, :, 0] * m + nb[:, :, 1]) * m + nb[:, :, 2]
    vals = np.zeros(inside.shape)
    vals[:, 0] = 6.0 * h
    vals[:, 1:7] = -h
    vals = np.where(inside, vals, 0.0)
    cols = np.where(inside, cols, -1)
    order = np.argsort(cols, axis=1, kind="stable")
    cols = np.take_along_axis(cols, order, axis=1)
    vals = np.take_along_axis(vals, order, axis=1)
    keep = cols >= 0
    counts = keep.sum(axis=1)
    indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    return indptr, cols[keep].astype(np.int32), vals[keep]


def consistent_load(n):
    """b = M f on the interior nodes, tetrahedron by tetrahedron (vectorised per Kuhn permutation)."""
    m = n - 1
    h = 1.0 / n
    g = np.arange(n + 1) * h
    F = 3 * np.pi ** 2 * np.sin(np.pi * g)[:, None, None] * np.sin(np.pi * g)[None, :, None] * np.sin(np.pi * g)[None, None, :]
    B = np.zeros((n + 1, n + 1, n + 1))
    vol = h ** 3 / 6.0
    for perm in [(0, 1, 2), (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0)]:
        corners = [np.zeros(3, dtype=int)]
        for ax in perm:
            c = corners[-1].copy()
            c[ax] += 1
            corners.append(c)
        fv = [F[c[0]:c[0] + n, c[1]:c[1] + n, c[2]:c[2] + n] for c in corners]
        s = fv[0] + fv[1] + fv[2] + fv[3]
        for c, f in zip(corners, fv):
            B[c[0]:c[0] + n, c[1]:c[1] + n, c[2]:c[2] + n] += vol / 20.0 * (f + s)
    return B[1:n, 1:n, 1:n].reshape(m ** 3).copy()


def median(reps, f):
    f()
    t = []
    for _ in range(reps):
        s = time.perf_counter()
        f()
        t.append(time.perf_counter() - s)
    return sorted(t)[reps // 2]


def stream_copy():
    src = np.ones(1 << 25)
    dst = np.zeros_like(src)
    t = median(10, lambda: np.copyto(dst, src))
    return 2 * src.nbytes / t / 1e9


def spmv_bytes(rows, nnz, index_bytes):
    return nnz * (8 + index_bytes) + (rows + 1) * index_bytes + 2 * rows * 8


def scipy_part(n, b):
    try:
        import scipy.sparse as sp
    except ImportError:
        print("scipy: not installed (apt-get install python3-scipy)")
        return
    m = n - 1
    rows = m ** 3
    indptr, indices, data = csr_rows(n, 0, rows)
    a = sp.csr_matrix((data, indices, indptr), shape=(rows, rows))
    x = np.ones(rows)
    t = median(10, lambda: a @ x)
    gbs = spmv_bytes(rows, a.nnz, 4) / t / 1e9
    print(f"scipy {sp.__name__} spmv: {t * 1e3:.2f} ms, {gbs:.2f} GB/s")
    # Jacobi CG written out (scipy.sparse.linalg.cg checks a different residual).
    dinv = 1.0 / a.diagonal()
    xs = np.zeros(rows)
    r = b - a @ xs
    z = dinv * r
    p = z.copy()
    rz = r @ z
    tol = 1e-10 * np.linalg.norm(b)
    it = 0
    s = time.perf_counter()
    while np.linalg.norm(r) > tol and it < 10000:
        q = a @ p
        alpha = rz / (p @ q)
        xs += alpha * p
        r -= alpha * q
        z = dinv * r
        rz_new = r @ z
        p = z + (rz_new / rz) * p
        rz = rz_new
        it += 1
    t = time.perf_counter() - s
    res = np.linalg.norm(b - a @ xs) / np.linalg.norm(b)
    print(f"scipy jacobi-cg: {it} iterations, {t:.2f} s, {t / it * 1e3:.2f} ms/iteration, relative residual {res:.2e}")


def petsc_part(n, b):
    try:
        from petsc4py import PETSc
    except ImportError:
        print("petsc: petsc4py not installed (apt-get install python3-petsc4py)")
        return
    comm = PETSc.COMM_WORLD
    m = n - 1
    rows = m ** 3
    a = PETSc.Mat().create(comm=comm)
    a.setSizes([[PETSc.DECIDE, rows], [PETSc.DECIDE, rows]])
    a.setType("aij")
    a.setUp()
    lo, hi = a.getOwnershipRange()
    indptr, indices, data = csr_rows(n, lo, hi)
    a.setPreallocationCSR((indptr, indices))
    a.setValuesCSR(indptr, indices, data)
    a.assemble()
    x, y = a.createVecs()
    x.set(1.0)
    t = median(10, lambda: a.mult(x, y))
    info = a.getInfo(PETSc.Mat.InfoType.GLOBAL_SUM)
    nnz = int(info["nz_used"])
    gbs = spmv_bytes(rows, nnz, 4) / t / 1e9
    bv = a.createVecLeft()
    bv.setArray(b[lo:hi])
    xv = a.createVecRight()
    ksp = PETSc.KSP().create(comm=comm)
    ksp.setOperators(a)
    ksp.setType("cg")
    ksp.getPC().setType("jacobi")
    ksp.setTolerances(rtol=1e-10, atol=0.0, max_it=10000)
    ksp.setNormType(PETSc.KSP.NormType.UNPRECONDITIONED)
    ksp.setUp()
    s = time.perf_counter()
    ksp.solve(bv, xv)
    t_cg = time.perf_counter() - s
    it = ksp.getIterationNumber()
    r = bv.duplicate()
    a.mult(xv, r)
    r.aypx(-1.0, bv)
    res = r.norm() / bv.norm()
    if comm.getRank() == 0:
        print(f"petsc {PETSc.Sys.getVersion()} on {comm.getSize()} rank(s) spmv: {t * 1e3:.2f} ms, {gbs:.2f} GB/s")
        print(f"petsc jacobi-cg: {it} iterations, {t_cg:.2f} s, {t_cg / it * 1e3:.2f} ms/iteration, "
              f"relative residual {res:.2e} ({ksp.getConvergedReason()})")
    # BiCGStab, right-preconditioned so that its norm is the true residual's
    # (as parloop's `solve::bicgstab`), from x = 0.
    ksp = PETSc.KSP().create(comm=comm)
    ksp.setOperators(a)
    ksp.setType("bcgs")
    ksp.getPC().setType("jacobi")
    ksp.setPCSide(PETSc.PC.Side.RIGHT)
    ksp.setTolerances(rtol=1e-10, atol=0.0, max_it=10000)
    ksp.setNormType(PETSc.KSP.NormType.UNPRECONDITIONED)
    ksp.setUp()
    xv.set(0.0)
    s = time.perf_counter()
    ksp.solve(bv, xv)
    t_bcgs = time.perf_counter() - s
    it = ksp.getIterationNumber()
    a.mult(xv, r)
    r.aypx(-1.0, bv)
    res = r.norm() / bv.norm()
    if comm.getRank() == 0:
        print(f"petsc jacobi-bcgs: {it} iterations, {t_bcgs:.2f} s, {t_bcgs / it * 1e3:.2f} ms/iteration, "
              f"relative residual {res:.2e} ({ksp.getConvergedReason()})")


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 125
    ranks = 1
    try:
        from petsc4py import PETSc
        ranks = PETSc.COMM_WORLD.getSize()
    except ImportError:
        pass
    s = time.perf_counter()
    b = consistent_load(n)
    if ranks == 1:
        print(f"n = {n}: {(n - 1) ** 3} rows; load built in {time.perf_counter() - s:.1f} s")
        print(f"numpy stream-like copy: {stream_copy():.2f} GB/s")
        scipy_part(n, b)
    petsc_part(n, b)


if __name__ == "__main__":
    main()
