"""The compiled pressure solve alone: ns per cell per FCG iteration on a 3D Neumann Laplacian.

Builds the finite-volume Laplacian of an n^3 box (all-Neumann, as the cavity's pressure
equation; consistent smooth right-hand side), the AMG and its compiled solve
(``kcycle.compiled_solver`` with FCG, the cycle the case would choose), then solves from zero
``--repeat`` times and keeps the least CPU time (this process alone: a shared machine
slows it less than wall time).  Prints iterations, final residual, ms per solve and ns per
cell per iteration; to compare two checkouts, run it from each in turn
(``PYTHONPATH=<checkout>``), interleaved.

    .venv/bin/python benchmarks/compiled_solve.py [--cells 64] [--repeat 7] [--tol 1e-8]

Writes benchmarks/results/compiled_solve.json (with the load average before and after).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
from mpi4py import MPI

from haloflow.linalg import flexible, kcycle
from haloflow.linalg import krylov as K
from haloflow.linalg import lowsync as L
from haloflow.linalg.amg import AMG
from haloflow.linalg.poisson import laplacian, smooth_rhs
from haloflow.mesh.blocks import box
from haloflow.parallel.local import build_local
from haloflow.parallel.reduce import Reducer


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", type=int, default=64, help="cells per edge of the cube")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--tol", type=float, default=1e-8)
    ap.add_argument("-o", "--output", default="benchmarks/results/compiled_solve.json")
    a = ap.parse_args()
    comm = MPI.COMM_SELF
    load0 = os.getloadavg()[0]
    mesh = box((a.cells,) * 3)
    lm = build_local(mesh, np.zeros(mesh.n_cells, dtype=np.int64), 0)
    A = laplacian(lm, comm)
    b = smooth_rhs(lm, Reducer(comm), zero_mean=True)
    ws = K.Workspace(lm.n_cells, lm.n_owned, 8)
    ws.reserve(L.PIPECG_VECTORS)
    amg = AMG(A, lm, Reducer(comm))
    fast = kcycle.compiled_solver(amg, flexible.fcg)
    if fast is None:
        raise SystemExit("compiled_solve.py: no compiled solve here (no C MPI functions)")
    x = np.zeros(lm.n_cells)
    fast.solve(b, x, a.tol, 200, ws)  # compile or load
    best, info = np.inf, None
    for _ in range(a.repeat):
        x[:] = 0.0
        t0 = time.process_time()
        info = fast.solve(b, x, a.tol, 200, ws)
        best = min(best, time.process_time() - t0)
    ns = best / info.iters / lm.n_owned * 1e9
    res = {"cells": lm.n_owned, "levels": [lev.n for lev in amg.levels], "cycle": amg.cycle_kind,
           "iters": info.iters, "residual": info.res, "solve_ms": best * 1e3,
           "ns_per_cell_iter": ns, "load_before": load0, "load_after": os.getloadavg()[0]}
    print(f"{a.cells}^3: {info.iters} iterations to {info.res:.3e}, {best * 1e3:.1f} ms, "
          f"{ns:.1f} ns per cell per iteration (load {load0:.2f})")
    out = Path(a.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
