"""Pressure-solver benchmark: AMG-FCG vs Jacobi-CG vs pyamg on finite-volume Poisson problems.

    .venv/bin/python benchmarks/poisson.py                       # serial, default sizes
    .venv/bin/mpiexec -n 2 .venv/bin/python benchmarks/poisson.py --no-pyamg
    .venv/bin/python benchmarks/poisson.py --sizes2d 64,128 --sizes3d 16,32
    .venv/bin/mpiexec -n 2 .venv/bin/python benchmarks/poisson.py --aggregation local -o x.json

Problems: the finite-volume Laplacian (|S|^2/(S.d) couplings) of a 2D box (n x n x 1) and a
3D box (n^3), all-Neumann like the cavity's pressure equation (singular; consistent
right-hand side), plus the cavity's own pressure matrix (128^2, after 20 steps).  For each:
iterations to 1e-6 relative residual, set-up and solve seconds, ns per unknown per
iteration.  pyamg (serial only) runs smoothed aggregation + CG on the same matrix
(``pip install pyamg``).  Meshes are cut by METIS (``--decomposition``); the global row counts
of the AMG levels are recorded too.  Results go to JSON (default
benchmarks/results/poisson_<ranks>rank.json), with the load average before and after: the
timings are only as good as the machine was quiet.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numba
import numpy as np
from mpi4py import MPI

from haloflow.linalg import amg as amg_module
from haloflow.linalg import flexible
from haloflow.linalg import krylov as K
from haloflow.linalg.amg import AMG
from haloflow.linalg.poisson import laplacian, smooth_rhs
from haloflow.mesh.blocks import box
from haloflow.parallel import halo
from haloflow.parallel.decompose import decompose
from haloflow.parallel.local import distribute
from haloflow.parallel.reduce import Reducer

TOL = 1e-6
DECOMPOSITION = "metis"
AGGREGATION = amg_module.AGGREGATION


def local_mesh(cells, comm):
    mesh = box(cells) if comm.rank == 0 else None
    parts = decompose(mesh, comm.size, DECOMPOSITION) if comm.rank == 0 else None
    return distribute(mesh, parts, comm), mesh


def cavity_pressure(n, comm):
    """The cavity's pressure matrix and right-hand side after 20 steps from rest."""
    from haloflow.case import load_case
    from haloflow.physics import solver_from_case

    case = load_case("cavity", [f"mesh.cells=[{n},{n},1]"])
    lm, _ = local_mesh(case.mesh.cells, comm)
    solver = solver_from_case(lm, case, halo.make("packed", lm, comm), comm)
    for _ in range(20):
        solver.step()
    return lm, solver.pressure.P, solver.pressure.rhs.copy()


def run_ours(lm, A, b, comm, method):
    red = Reducer(comm)
    ws = K.Workspace(lm.n_cells, lm.n_owned, 8)
    x = np.zeros(lm.n_cells)
    comm.Barrier()
    t0 = time.perf_counter()
    if method == "amg-cg":
        amg = AMG(A, lm, red, aggregation=AGGREGATION)
        t1 = time.perf_counter()
        info = flexible.fcg(A, b, x, TOL, 500, red, ws, amg.apply)
    else:
        t1 = time.perf_counter()
        info = K.pcg(A, b, x, TOL, 100000, red, ws)
    t2 = time.perf_counter()
    setup, solve = comm.allreduce(t1 - t0, op=MPI.MAX), comm.allreduce(t2 - t1, op=MPI.MAX)
    levels = [lev.n for lev in amg.levels] if method == "amg-cg" else []
    rows = [int(lev.rows) for lev in amg.levels] if method == "amg-cg" else []
    return {"method": method, "iters": info.iters, "setup_s": setup, "solve_s": solve,
            "ns_per_unknown_iter": solve / max(info.iters, 1) / lm.n_cells_global * 1e9,
            "levels_rank0": levels, "levels_global_rank0": rows,
            "converged": bool(info.converged)}


def run_pyamg(A_scipy, b):
    import pyamg

    t0 = time.perf_counter()
    ml = pyamg.smoothed_aggregation_solver(A_scipy, symmetry="symmetric")
    t1 = time.perf_counter()
    res = []
    ml.solve(b, tol=TOL, accel="cg", residuals=res, maxiter=500)
    t2 = time.perf_counter()
    its = len(res) - 1
    return {"method": "pyamg-sa-cg", "iters": its, "setup_s": t1 - t0, "solve_s": t2 - t1,
            "ns_per_unknown_iter": (t2 - t1) / max(its, 1) / len(b) * 1e9,
            "levels_rank0": [lev.A.shape[0] for lev in ml.levels],
            "converged": bool(res[-1] <= TOL * res[0])}


def main() -> None:
    global DECOMPOSITION, AGGREGATION
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes2d", default="64,128,256,512,1024")
    ap.add_argument("--sizes3d", default="32,64,128")
    ap.add_argument("--jacobi-max", type=int, default=300_000,
                    help="skip Jacobi-CG above this many unknowns (it needs O(n) iterations)")
    ap.add_argument("--cavity", type=int, default=128,
                    help="also the cavity's pressure matrix on this mesh (0: skip)")
    ap.add_argument("--threads", type=int, default=1, help="numba threads per rank")
    ap.add_argument("--no-pyamg", action="store_true")
    ap.add_argument("--decomposition", default=DECOMPOSITION, help="how the meshes are cut")
    ap.add_argument("--aggregation", default=AGGREGATION, choices=("global", "local"),
                    help="AMG aggregates decided on rank 0 for the whole level (global, "
                         "partition-independent) or per rank (local)")
    ap.add_argument("-o", "--output", type=Path, default=None)
    a = ap.parse_args()
    numba.set_num_threads(a.threads)
    DECOMPOSITION, AGGREGATION = a.decomposition, a.aggregation
    load0 = os.getloadavg()
    comm = MPI.COMM_WORLD
    root = comm.rank == 0
    problems = [(f"2D {n}^2", (n, n, 1)) for n in map(int, a.sizes2d.split(",") if a.sizes2d
                                                       else [])]
    problems += [(f"3D {n}^3", (n, n, n)) for n in map(int, a.sizes3d.split(",") if a.sizes3d
                                                     else [])]
    rows = []
    if root:
        print(f"ranks {comm.size} ({DECOMPOSITION}, {AGGREGATION} aggregation); tolerance "
              f"{TOL:g} relative residual; load average {load0[0]:.2f}")
        print(f"{'problem':>12} {'unknowns':>9} {'method':>12} {'iters':>5} {'setup s':>8} "
              f"{'solve s':>8} {'ns/unk/it':>9}", flush=True)
    if a.cavity:
        problems.append((f"cavity {a.cavity}^2", a.cavity))
    for name, cells in problems:
        if isinstance(cells, int):
            lm, A, b = cavity_pressure(cells, comm)
        else:
            lm, _ = local_mesh(cells, comm)
            A = laplacian(lm, comm)
            b = smooth_rhs(lm, Reducer(comm), zero_mean=True)
        n = lm.n_cells_global
        results = [run_ours(lm, A, b, comm, "amg-cg")]
        if n <= a.jacobi_max:
            results.append(run_ours(lm, A, b, comm, "cg-jacobi"))
        if root and comm.size == 1 and not a.no_pyamg:
            try:
                results.append(run_pyamg(A.to_scipy().tocsr(), b[: lm.n_owned].copy()))
            except ImportError:
                print("  (pyamg not installed: pip install pyamg)")
        if root:
            for r in results:
                r.update(problem=name, unknowns=n, ranks=comm.size)
                rows.append(r)
                print(f"{name:>12} {n:>9} {r['method']:>12} {r['iters']:>5} "
                      f"{r['setup_s']:>8.3f} {r['solve_s']:>8.3f} "
                      f"{r['ns_per_unknown_iter']:>9.1f}", flush=True)
    if root:
        out = a.output or Path(f"benchmarks/results/poisson_{comm.size}rank.json")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"machine": platform.node(), "ranks": comm.size,
                                   "python": sys.version.split()[0], "tol": TOL,
                                   "decomposition": DECOMPOSITION, "aggregation": AGGREGATION,
                                   "load_average_before_after": [load0[0], os.getloadavg()[0]],
                                   "results": rows}, indent=2))
        print(f"wrote {out}")


if __name__ == "__main__":
    main()
