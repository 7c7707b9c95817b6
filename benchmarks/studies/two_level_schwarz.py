"""Would a communication-lean pressure method beat the AMG at scale?  (Issue 48, item 3.)

The candidate is the one the issue names: two-level Schwarz in a flexible CG.  Each rank
applies one cycle of the AMG to its own rows (its diagonal block: no messages), and one
coarse unknown per rank corrects the constant on each part (a coarse matrix of the ranks'
couplings, replicated, whose right-hand side, one sum per rank, is allgathered).  Two ways
to combine them are measured: ``additive`` (local + coarse: an exchange and an allgather
an iteration) and ``balancing`` (coarse, then local on what is left, then coarse again:
two of each).

1. Iterations, measured: the model pressure problem (``linalg.poisson.laplacian``,
   all-Neumann as the cavity's pressure) on an N^3 box, zero-mean smooth-plus-noise
   right-hand side, FCG from zero to a residual reduction of ``--tol``, with the run's AMG
   on the whole mesh and with each Schwarz variant on the ideal process grid of P parts
   (the parts simulated in one process; their diagonal blocks are the global matrix's).
2. Time per step, priced by ``haloflow predict``'s model from a 1-rank profile of the
   N^3 cavity (the ``benchmarks/scaling.py`` case): the pressure solve's iterations scaled
   by the measured ratio, with every benefit of the doubt given to Schwarz: an iteration
   computes no more than an AMG iteration, allreduces as FCG does, and exchanges and
   allgathers as above; no coarse levels, no replicated AMG level.  Each coarse solve
   allgathers P values and streams the replicated sparse factor once.

    .venv/bin/python benchmarks/studies/two_level_schwarz.py [--cells 62] [--profile RUN]

Without ``--profile`` it runs the 1-rank calibration itself (10 steps).  Writes
benchmarks/results/two_level_schwarz.json and prints the table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from haloflow.linalg import flexible
from haloflow.linalg.amg import AMG
from haloflow.linalg.krylov import Workspace
from haloflow.linalg.matrix import DistMatrix, Pattern
from haloflow.linalg.poisson import laplacian
from haloflow.mesh.blocks import box
from haloflow.mesh.fv import face_coeffs
from haloflow.parallel import halo
from haloflow.parallel.local import build_local
from haloflow.parallel.reduce import self_reducer
from haloflow.study import model as M
from haloflow.study.predict import load_profile, shm_curve

REPO = Path(__file__).resolve().parents[2]
RANKS = (12, 24, 48, 96, 192, 384, 768, 1536, 3072)
NETWORKS = ("infiniband-fdr", "infiniband-sdr", "gige-lowlatency")
CORES_PER_NODE = 12
TRIAD_BYTES_PER_S = 15.7e9  # numba triad, one core: what streaming a factor costs


def self_mesh(cells, n: int):
    """A box of ``cells`` at spacing 1 / n, on one rank."""
    m = box(cells, lengths=tuple(c / n for c in cells))
    return build_local(m, np.zeros(m.n_cells, dtype=np.int64), 0)


def cell_index(lm, n: int) -> np.ndarray:
    """Each owned cell's (i, j, k) on a box of spacing 1 / n."""
    return np.floor(lm.geometry.cell_centres[: lm.n_owned] * n).astype(np.int64)


MAX_ITER = 600


def fcg_iterations(A, lm, b, precond, tol: float) -> int:
    """The project's FCG(1) (``linalg.flexible.fcg``) from zero to ``||r|| <= tol ||b||``
    with ``precond(r)`` on the owned rows: its iterations."""
    n = lm.n_owned
    rhs = np.zeros(lm.n_cells)
    rhs[:n] = b

    def apply(r, z):
        z[:n] = precond(r[:n])

    info = flexible.fcg(A, rhs, np.zeros(lm.n_cells), tol, MAX_ITER, self_reducer(),
                        Workspace(lm.n_cells, n, flexible.FCG_VECTORS), apply)
    return info.iters


class Schwarz:
    """Two-level Schwarz on the ideal process grid of ``P`` parts of an ``n``^3 box."""

    def __init__(self, As, ijk, n: int, P: int):
        g = M.process_grid(P, 3)
        cut = [(ijk[:, d] * g[d]) // n for d in range(3)]
        part = (cut[0] * g[1] + cut[1]) * g[2] + cut[2]
        self.As, self.P = As, P
        self.blocks = []
        cache = {}
        for p in range(P):
            ids = np.flatnonzero(part == p)
            lo, hi = ijk[ids].min(axis=0), ijk[ids].max(axis=0)
            shape = tuple(int(s) for s in hi - lo + 1)
            Ab = As[ids][:, ids].tocsr()
            key = (shape, np.round(Ab.diagonal(), 12).tobytes())
            if key not in cache:
                cache[key] = self._local_amg(shape, Ab, ijk[ids] - lo, n)
            lm, amg, loc_of = cache[key]
            loc = loc_of[tuple((ijk[ids] - lo).T)]
            self.blocks.append((ids, loc, lm, amg))
        Z = sp.csr_matrix((np.ones(len(part)), (np.arange(len(part)), part)),
                          shape=(len(part), P))
        E = (Z.T @ As @ Z).tolil()
        E[0, 0] *= 2.0  # all-Neumann: pin the constant (the right-hand sides are consistent)
        self.Z = Z
        self.E = spla.splu(E.tocsc(), permc_spec="MMD_AT_PLUS_A")
        self.factor_nnz = int(self.E.L.nnz + self.E.U.nnz)

    @staticmethod
    def _local_amg(shape, Ab, ijk_local, n: int):
        """The run's AMG on a box of ``shape`` cells at the global spacing, whose matrix is
        the diagonal block ``Ab`` (its couplings to other parts stay on the diagonal, as
        in the global matrix); checked entry for entry against ``Ab``."""
        lm = self_mesh(shape, n)
        loc_of = np.empty(shape, dtype=np.int64)
        loc_of[tuple(cell_index(lm, n).T)] = np.arange(lm.n_owned)
        order = loc_of[tuple(ijk_local.T)]
        diag = np.zeros(lm.n_cells)
        diag[order] = Ab.diagonal()
        g = face_coeffs(lm).gdiff[: lm.n_internal]
        A = DistMatrix(Pattern(lm), halo.make("packed", lm, self_reducer().comm))
        A.fill(diag, -g, -g)
        perm = sp.csr_matrix((np.ones(len(order)), (order, np.arange(len(order)))),
                             shape=Ab.shape)
        want = (perm @ Ab @ perm.T).tocsr()
        got = A.to_scipy().tocsr()[: lm.n_owned, : lm.n_owned]
        if abs(want - got).max() > 1e-12 * abs(want).max():
            raise AssertionError(f"a {shape} part's matrix is not the global block")
        amg = AMG(A, lm, self_reducer())
        amg.refresh()
        return lm, amg, loc_of

    def local(self, r):
        z = np.empty_like(r)
        for ids, loc, lm, amg in self.blocks:
            rl = np.zeros(lm.n_cells)
            rl[loc] = r[ids]
            zl = np.zeros(lm.n_cells)
            amg.apply(rl, zl)
            z[ids] = zl[loc]
        return z

    def coarse(self, r):
        return self.Z @ self.E.solve(self.Z.T @ r)

    def additive(self, r):
        return self.local(r) + self.coarse(r)

    def balancing(self, r):
        q = self.coarse(r)
        w = self.local(r - self.As @ q)
        return q + w - self.coarse(self.As @ w)


def iterations(n: int, ranks, tol: float, log) -> dict:
    lm = self_mesh((n, n, n), n)
    A = laplacian(lm, self_reducer().comm)
    As = A.to_scipy().tocsr()[: lm.n_owned, : lm.n_owned]
    c = lm.geometry.cell_centres[: lm.n_owned]
    rng = np.random.default_rng(1)
    b = np.cos(np.pi * c[:, 0]) * np.cos(2 * np.pi * c[:, 1]) * np.cos(np.pi * c[:, 2]) \
        + 0.3 * rng.standard_normal(lm.n_owned)
    b -= b.mean()
    amg = AMG(A, lm, self_reducer())
    amg.refresh()

    def amg_apply(r):
        z = np.zeros(lm.n_cells)
        rr = np.zeros(lm.n_cells)
        rr[: lm.n_owned] = r
        amg.apply(rr, z)
        return z[: lm.n_owned]

    out = {"amg": fcg_iterations(A, lm, b, amg_apply, tol), "cycle": amg.cycle_kind,
           "parts": {}}
    log(f"AMG ({amg.cycle_kind}-cycle) on the whole mesh: {out['amg']} iterations")
    ijk = cell_index(lm, n)
    for P in ranks:
        t = time.perf_counter()
        s = Schwarz(As, ijk, n, P)
        row = {"additive": fcg_iterations(A, lm, b, s.additive, tol),
               "balancing": fcg_iterations(A, lm, b, s.balancing, tol),
               "factor_nnz": s.factor_nnz}
        out["parts"][P] = row
        log(f"{P:5d} parts ({n ** 3 // P} cells each): additive {row['additive']}, "
            f"balancing {row['balancing']} iterations ({time.perf_counter() - t:.0f} s)")
    return out


def calibrate(n: int, tmp: Path) -> Path:
    out = tmp / "p1"
    sets = [f"mesh.cells=[{n},{n},{n}]", "boundary.front.type=wall", "boundary.back.type=wall",
            "solver.dt=0.008", "solver.steady_tol=0", "solver.end_time=1.0",
            "output.fields=false", "output.plots=false", "postprocess.cavity=false"]
    cmd = [str(Path(sys.executable).parent / "haloflow"), "run", "cavity", "-o", str(out),
           "--quiet", "--steps", "10", *[x for s in sets for x in ("--set", s)]]
    subprocess.run(cmd, check=True, env={"NUMBA_NUM_THREADS": "1", **os.environ})
    return out / "profile.json"


def schwarz_workload(w: M.Workload, prof: dict, ratio: float, per_iter: float, P: int,
                     factor_nnz: int) -> M.Workload:
    """The 1-rank workload ``w`` with its pressure solve replaced by Schwarz at ``ratio``
    times the AMG's iterations (see the module docstring for what is assumed)."""
    steps = max(int(prof["steps"]), 1)
    p = w.split["solve_p"]
    iters = w.iters["p_iters"]  # per step
    solve_s = prof["phases"]["solve_p"]["mean"] / steps - w.serial_s
    new_iters = iters * ratio
    exchanges = w.exchanges - p["exchanges"] + per_iter * new_iters
    fields = w.exchanges * w.fields_per_exchange - p["fields"] + per_iter * new_iters
    allreduces = w.allreduces + p["allreduces"] * (ratio - 1.0)
    # each coarse solve: an allgather of the P sums, then a forward and a back substitution
    # through the replicated factor (12 bytes an entry read)
    coarse_s = per_iter * new_iters * 12.0 * factor_nnz / TRIAD_BYTES_PER_S
    return replace(w, compute_s=w.compute_s - w.serial_s + solve_s * (ratio - 1.0) + coarse_s,
                   serial_s=coarse_s, exchanges=exchanges,
                   fields_per_exchange=fields / exchanges, levels=[], level_work=[],
                   allreduces=allreduces,
                   compiled_allreduces=w.compiled_allreduces + p["allreduces"] * (ratio - 1.0),
                   gathers=per_iter * new_iters, gathered_rows=P, refreshes=0.0, gathered_nnz=0,
                   amg_levels=0, split={}, iters={})


def price(w: M.Workload, prof: dict, its: dict, net_name: str) -> list[dict]:
    net, shm = M.network(net_name), shm_curve(None)
    one = M.predict(w, M.halo_of_grid(w.cells, 1, 3), net, shm, CORES_PER_NODE).step_s
    rows = []
    for P, row in its["parts"].items():
        h = M.halo_of_grid(w.cells, P, 3)
        r = {"ranks": P, "cells_per_rank": w.cells / P,
             "amg": one / M.predict(w, h, net, shm, CORES_PER_NODE).step_s}
        for kind, per_iter in (("additive", 1.0), ("balancing", 2.0)):
            ws = schwarz_workload(w, prof, row[kind] / its["amg"], per_iter, P,
                                  row["factor_nnz"])
            pred = M.predict(ws, h, net, shm, CORES_PER_NODE)
            r[kind] = one / pred.step_s
            r[f"{kind}_parts"] = {"compute_s": pred.compute_s, "halo_s": pred.halo_s,
                                  "reduce_s": pred.reduce_s, "gather_s": pred.gather_s}
        rows.append(r)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cells", type=int, default=62)
    ap.add_argument("--tol", type=float, default=1e-6, help="residual reduction (1e-6)")
    ap.add_argument("--ranks", default=",".join(map(str, RANKS)))
    ap.add_argument("--profile", type=Path, help="a 1-rank profile.json of the N^3 cavity")
    ap.add_argument("-o", default=str(REPO / "benchmarks/results/two_level_schwarz.json"))
    a = ap.parse_args()
    ranks = [int(x) for x in a.ranks.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        path = a.profile or calibrate(a.cells, Path(tmp))
        prof, w = load_profile(path)
    if w.cells != a.cells ** 3 or w.measured["ranks"] != 1:
        sys.exit(f"{path}: a {w.measured['ranks']}-rank profile of {w.cells} cells; expected "
                 f"1 rank of the {a.cells}^3 cavity (--cells)")
    its = iterations(a.cells, ranks, a.tol, lambda s: print(s, flush=True))
    doc = {"cells": a.cells ** 3, "tol": a.tol, "iterations": its,
           "calibration_s_per_step": w.measured["s_per_step"],
           "p_iters_per_step": w.iters["p_iters"], "predicted": {}}
    print(f"1-rank calibration: {w.measured['s_per_step']:.4f} s/step, "
          f"{w.iters['p_iters']:.1f} pressure iterations per step")
    for name in NETWORKS:
        rows = price(w, prof, its, name)
        doc["predicted"][name] = rows
        print(f"\n{name}, {CORES_PER_NODE} cores per node: speedup against the AMG's 1-rank step")
        print(f"{'ranks':>6} {'cells/rank':>10} {'AMG':>7} {'additive':>9} {'balancing':>10}")
        for r in rows:
            print(f"{r['ranks']:6d} {r['cells_per_rank']:10.0f} {r['amg']:6.1f}x "
                  f"{r['additive']:8.1f}x {r['balancing']:9.1f}x")
        for k in ("amg", "additive", "balancing"):
            best = max(rows, key=lambda r: r[k])
            print(f"  peak {k}: {best[k]:.1f}x at {best['ranks']} ranks")
    Path(a.o).write_text(json.dumps(doc, indent=1))
    print(f"wrote {a.o}")


if __name__ == "__main__":
    main()
