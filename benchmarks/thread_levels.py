"""Which AMG levels pay for their thread blocks: the same pressure solves, timed in one process
with the threaded levels switched to serial from each level down.

A threaded rank (``--threads``) hands an AMG level to its thread blocks from
``threads.LEVEL_MIN_ROWS`` rows (``HALOFLOW_THREAD_MIN_ROWS`` lowers it).  Every parallel
region costs a wake-up of the sleeping threads, and the coarse levels are visited most often,
so where the threshold should lie is a measurement.  Wall times of separate runs on a shared
machine move by 30-50 % from one run to the next; here each pressure solve of the run is
repeated under every configuration, in rotating order, from the same initial guess, and the
ratios are taken solve by solve: what the host does to one solve it does to its neighbours.

Configurations: ``threaded`` (the levels from the threshold up), ``serial`` (no level on the
blocks; the Krylov vectors still are) and ``from Lk serial`` (levels k and coarser serial).
Iteration counts are printed too: they differ between configurations only by the hybrid
Gauss-Seidel's order.

    NUMBA_NUM_THREADS=2 .venv/bin/python benchmarks/thread_levels.py [--cells 64] \\
        [--steps 5] [--threads 2]

Run with ``HALOFLOW_THREAD_MIN_ROWS=1000`` to thread every level of at least 1 000 rows and
see what each adds; ``OMP_WAIT_POLICY`` says how the threads wait.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
from mpi4py import MPI
from scaling import case_sets

from haloflow.case import load_case
from haloflow.linalg import cycle, kcycle
from haloflow.run.setup import setup


def configurations(base: np.ndarray) -> dict:
    """The levels' thread settings to compare (``kcycle``'s per-level bandwidths; -1:
    serial): as built, none, and serial from each threaded level below the first down."""
    cfgs = {"threaded": base.copy(), "serial": np.full_like(base, -1)}
    for k in range(1, len(base)):
        if base[k] >= 0:
            c = base.copy()
            c[k:] = -1
            cfgs[f"from L{k} serial"] = c
    return cfgs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cells", type=int, default=64, help="cells per edge (default 64)")
    ap.add_argument("--steps", type=int, default=5, help="steps timed (after 2 untimed)")
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    sets = [s for s in case_sets(a.cells, a.steps + 2, []) if s != "--set"]
    run = setup(load_case("cavity", sets), MPI.COMM_SELF, a.threads, lambda *x, **k: None)
    if not run.threaded:
        sys.exit("the run is not threaded: more cells, or HALOFLOW_THREAD_MIN_ROWS lower")
    for _ in range(2):
        run.solver.step()
    solve = kcycle.CompiledSolve.solve
    times: dict[str, list] = {}
    iters: dict[str, list] = {}
    turn = [0]

    def timed(self, b, x, tol, max_iter, ws, rel_tol=0.0):
        thr = self.h[cycle.H_THR]
        base = thr.copy()
        cfgs = configurations(base)
        names = list(cfgs)
        k = turn[0] % len(names)
        turn[0] += 1
        x0 = x.copy()
        for name in names[k:] + names[:k]:
            thr[:] = cfgs[name]
            x[:] = x0
            t0 = time.perf_counter()
            info = solve(self, b, x, tol, max_iter, ws, rel_tol)
            times.setdefault(name, []).append(time.perf_counter() - t0)
            iters.setdefault(name, []).append(info.iters)
        thr[:] = base
        x[:] = x0
        return solve(self, b, x, tol, max_iter, ws, rel_tol)

    kcycle.CompiledSolve.solve = timed
    levels = [lev.n for lev in run.solver.pressure.amg.levels]
    for _ in range(a.steps):
        run.solver.step()
    ref = np.array(times["threaded"])
    print(f"{a.cells}^3 cavity, {a.threads} threads, levels {levels}, threaded from "
          f"{kcycle.threads.LEVEL_MIN_ROWS} rows; {len(ref)} solves")
    print(f"{'configuration':>18} {'least ms':>9} {'median ms':>10} {'x threaded':>11} iters")
    for name, v in times.items():
        v = np.array(v)
        print(f"{name:>18} {1e3 * v.min():9.1f} {1e3 * np.median(v):10.1f} "
              f"{np.median(v / ref):11.3f} {np.mean(iters[name]):.2f}")


if __name__ == "__main__":
    main()
