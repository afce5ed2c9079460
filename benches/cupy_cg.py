#!/usr/bin/env python3
"""CuPy (cuSPARSE SpMV, cuBLAS dots) on the reference problem of
benches/benches/linalg.rs: the GPU peer of `poisson --dim 3 --mesh-size N
--backend cuda`.

Not a test: it prints timings to set beside parloop's on the same GPU
(docs/PERFORMANCE.md). The matrix and right-hand side are petsc_scipy.py's
(the P1 Laplacian of the unit cube cut into n^3 cubes of six Kuhn
tetrahedra on the (n-1)^3 interior nodes, 15 stored entries per row, b = M f,
f = 3 pi^2 sin sin sin); CG is Jacobi-preconditioned to rtol 1e-10, written
out as parloop's is (one SpMV, two dots, three vector updates per
iteration, the residual norm read back each iteration).

    python3 benches/cupy_cg.py [n]      # default n = 125

ci/gpu puts it in the GPU bundle beside petsc_scipy.py; bundle/run.sh's
demos step runs it when CuPy imports.
"""

import sys
import time

import numpy as np

from petsc_scipy import consistent_load, csr_rows, spmv_bytes

try:
    import cupy as cp
    import cupyx.scipy.sparse as csp
except ImportError:
    print("cupy: not installed")
    sys.exit(0)


def timed(reps, f):
    """Median seconds of `reps` calls of f after one warm-up, synchronised."""
    f()
    cp.cuda.Device().synchronize()
    t = []
    for _ in range(reps):
        s = time.perf_counter()
        f()
        cp.cuda.Device().synchronize()
        t.append(time.perf_counter() - s)
    return sorted(t)[reps // 2]


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 125
    m = n - 1
    rows = m**3
    indptr, indices, data = csr_rows(n, 0, rows)
    b_host = consistent_load(n)
    a = csp.csr_matrix(
        (cp.asarray(data), cp.asarray(indices), cp.asarray(indptr)), shape=(rows, rows)
    )
    print(f"cupy {cp.__version__} on {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}: "
          f"n = {n}, {rows} unknowns, {a.nnz} nonzeros")

    src = cp.ones(1 << 28)
    dst = cp.empty_like(src)
    t = timed(10, lambda: cp.copyto(dst, src))
    print(f"cupy copy: {2 * src.nbytes / t / 1e9:.0f} GB/s ({src.nbytes >> 20} MiB, read + written)")
    del src, dst

    x = cp.ones(rows)
    t = timed(20, lambda: a @ x)
    gbs = spmv_bytes(rows, a.nnz, 4) / t / 1e9
    print(f"cupy spmv (cuSPARSE): {t * 1e3:.3f} ms, {gbs:.0f} GB/s at the CSR minimum bytes")

    b = cp.asarray(b_host)
    dinv = 1.0 / a.diagonal()
    cp.cuda.Device().synchronize()
    s = time.perf_counter()
    xs = cp.zeros(rows)
    r = b - a @ xs
    z = dinv * r
    p = z.copy()
    rz = cp.dot(r, z)
    tol = 1e-10 * float(cp.linalg.norm(b))
    it = 0
    while float(cp.linalg.norm(r)) > tol and it < 10000:
        q = a @ p
        alpha = rz / cp.dot(p, q)
        xs += alpha * p
        r -= alpha * q
        z = dinv * r
        rz_new = cp.dot(r, z)
        p = z + (rz_new / rz) * p
        rz = rz_new
        it += 1
    cp.cuda.Device().synchronize()
    t = time.perf_counter() - s
    rel = float(cp.linalg.norm(b - a @ xs)) / float(cp.linalg.norm(b))
    print(f"cupy cg: {it} iterations, {t:.3f} s, {t * 1e3 / max(it, 1):.3f} ms per iteration, "
          f"relative residual {rel:.2e}")


if __name__ == "__main__":
    main()
