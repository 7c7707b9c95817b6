"""A run's pressure solves one by one: seconds against iterations, fitted as a + b x iters.

Runs ``haloflow run`` in this process (under ``mpiexec`` on every rank) with every call of
the compiled pressure solve and of its refresh timed, then fits the solves' seconds as a
fixed part ``a`` per solve plus ``b`` per iteration (least squares, the first ``--skip``
solves left out: numba loading, the first steps' many iterations).  ``a`` is what a solve
costs besides its iterations: a residual, the sums, and whatever else runs once per solve;
it is where a solve's own overhead shows.  Default case: the race's 3D cavity
(``benchmarks/race.py``'s settings) at ``--cells``; ``--case`` and ``--set`` take another.

    .venv/bin/python benchmarks/solve_times.py --cells 64
    .venv/bin/mpiexec -n 2 .venv/bin/python benchmarks/solve_times.py --cells 64

Prints one line (rank 0) and writes JSON with ``-o``.  Run it from outside the checkout to
time a worktree on ``PYTHONPATH``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import race  # the race's settings
from mpi4py import MPI

from haloflow.cli import main as haloflow_main
from haloflow.linalg import kcycle


def timed(record: list, fn):
    """``fn`` with each call's seconds (and its SolveInfo's iterations and initial
    residual) appended."""

    def wrapper(*args, **kwargs):
        t0 = time.perf_counter()
        out = fn(*args, **kwargs)
        record.append((time.perf_counter() - t0, getattr(out, "iters", 0),
                       getattr(out, "res0", 0.0)))
        return out

    return wrapper


def fit(solves: list) -> dict:
    s = np.asarray(solves, dtype=float)[:, :2]
    a, b = np.linalg.lstsq(np.vstack([np.ones(len(s)), s[:, 1]]).T, s[:, 0], rcond=None)[0]
    return {"solves": len(s), "mean_ms": 1e3 * s[:, 0].mean(), "iters_mean": s[:, 1].mean(),
            "fixed_ms": 1e3 * a, "per_iteration_ms": 1e3 * b}


def by_corrector(solves: list, skip: int, k: int) -> tuple[list, list]:
    """Mean iterations and median initial residual of each of a step's ``k`` pressure
    solves (PISO's correctors: the first ones stop at rel_tol, the last at tol), the first
    ``skip`` solves left out."""
    s = solves[skip - skip % k:]
    return ([float(np.mean([x[1] for x in s[j::k]])) for j in range(k)],
            [float(np.median([x[2] for x in s[j::k]])) for j in range(k)])


def correctors_of(keys: list) -> int:
    """The pressure solves a step makes: the last ``solver.n_correctors`` of the ``--set``
    keys, else the case default of 2 (non-orthogonal repeats not counted)."""
    n = [int(k.split("=", 1)[1]) for k in keys if k.startswith("solver.n_correctors=")]
    return n[-1] if n else 2


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--case", default="cavity")
    ap.add_argument("--cells", type=int, default=64, help="the race's cavity, cells per edge")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--skip", type=int, default=4, help="first solves left out of the fit")
    ap.add_argument("--correctors", type=int, default=None,
                    help="pressure solves per step, for the iterations by corrector "
                         "(default: the run's solver.n_correctors as --set or the race sets "
                         "it, else 2)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("-o", "--output", type=Path, default=None)
    a = ap.parse_args()
    comm = MPI.COMM_WORLD
    solves, refreshes = [], []
    kcycle.CompiledSolve.solve = timed(solves, kcycle.CompiledSolve.solve)
    kcycle.CompiledSolve.refresh = timed(refreshes, kcycle.CompiledSolve.refresh)
    keys = race.haloflow_sets(a.cells, a.steps, False, False) if a.case == "cavity" else []
    keys += [x for kv in a.set for x in ("--set", kv)]
    out = comm.bcast(tempfile.mkdtemp() if comm.rank == 0 else None)
    rc = haloflow_main(["run", a.case, "-o", os.path.join(out, "run"), "--quiet", "--force",
                        "--steps", str(a.steps), *keys])
    if rc:
        sys.exit(rc)
    comm.Barrier()
    if comm.rank == 0:
        shutil.rmtree(out, ignore_errors=True)
    if len(solves) <= a.skip + 1:
        sys.exit("too few compiled pressure solves to fit (is the solve compiled here?)")
    res = {"case": a.case, "cells": a.cells, "ranks": comm.size, **fit(solves[a.skip:]),
           "refresh_ms": 1e3 * float(np.median([t for t, *_ in refreshes] or [0.0]))}
    res["iters_by_corrector"], res["res0_by_corrector"] = by_corrector(
        solves, a.skip, a.correctors or correctors_of(keys))
    if comm.rank == 0:
        print(f"{comm.size} rank(s): {res['solves']} solves, {res['mean_ms']:.1f} ms each, "
              f"{res['iters_mean']:.2f} iterations; fit {res['fixed_ms']:.2f} ms + "
              f"{res['per_iteration_ms']:.2f} ms per iteration; refresh "
              f"{res['refresh_ms']:.2f} ms; iterations by corrector "
              + ", ".join(f"{x:.2f}" for x in res["iters_by_corrector"])
              + " (initial residuals " + ", ".join(f"{x:.2g}" for x in res["res0_by_corrector"])
              + ")")
        if a.output:
            a.output.write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
