"""The 62³ cavity from 12 to 3 072 ranks on ``infiniband-fdr``, 12 cores per node: the analytic
model (``haloflow predict``) and SimGrid's replay of the same step side by side.

The calibration is benchmarks/scaling.py's: the cavity on one rank (its case, ``--repeat``
runs, the median), or a 1-rank ``--profile`` of that case. At every rank count the run's
mesh is partitioned as the case does (``grid``) and ``study/synth_trace.py`` writes each
rank's step from what the model itself uses: the rank's own computation, the halo exchanges
of the mesh and of every distributed AMG level on their real neighbours and byte counts, the
allreduces and allgathers. ``smpirun -replay`` prices it on the platform ``predict --engine
simgrid`` builds (``study/predict_simgrid.platform``: 12-core nodes, each node's one NIC
shared by its ranks' messages, a non-blocking switch, the preset's per-message CPU overhead
as computation around the messages between nodes). Where a whole step has more than
``--budget`` actions, a sample of the step (every kind of operation in proportion,
``synth_trace.write(fraction=)``) is replayed and its time scaled; at the first rank count
sampled the whole step is replayed too, to check the sample, and ``--check RANKS:ACTIONS``
replays a larger sample at other rank counts (3 072 ranks: a whole step of 66 million
actions would take SimGrid hours).

    .venv/bin/python benchmarks/simgrid_scaling.py [--profile RUN/profile.json]
        [--ranks 12,24,...,3072] [--budget 1500000] [--timeout 600] [--check 3072:2e6]

Prints the table and writes benchmarks/results/simgrid_scaling.json and .png.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import numpy as np
from _common import REPO
from scaling import CORES_PER_NODE
from scaling import run as run_case

from haloflow.study import model as M
from haloflow.study import predict_simgrid as S
from haloflow.study.predict import load_profile, partition_halos, run_mesh, shm_curve
from haloflow.study.trace import TraceError

NETWORK = "infiniband-fdr"
RANKS = "12,24,48,96,192,384,768,1536,3072"


def calibrate(a, tmp: Path) -> Path:
    """The 1-rank profile: given, or the median of ``--repeat`` runs of scaling.py's case."""
    if a.profile is not None:
        return a.profile / "profile.json" if a.profile.is_dir() else a.profile
    runs = [run_case(a.cells, 1, a.steps, tmp / f"r1-{k}", a.set, (a.busy, a.wait))
            for k in range(a.repeat)]
    for r in runs:
        print(f"1 rank: {r['s_per_step']:.4f} s/step", flush=True)
    return sorted(runs, key=lambda r: r["s_per_step"])[len(runs) // 2]["out"] / "profile.json"


def actions(w: M.Workload, halo: M.Halo, cores: int) -> float:
    """About how many actions the trace of a whole step has on the ranks of ``halo``."""
    return S.step_actions(w, halo, cores)


def simulate(w, halo, net, shm, fraction: float, work: Path, a) -> tuple:
    """SimGrid's seconds per step (the sample's, scaled by ``synth_trace.sample_scale``) and
    the replay's wall seconds."""
    t0 = time.perf_counter()
    step = S.replay_step(w, halo, M.Layout(a.cores), net, shm, fraction, work,
                         SimpleNamespace(backbone=None, fat_tree=None), a.timeout)
    return step, time.perf_counter() - t0


def check(w, halo, net, shm, frac: float, sim: float, budget: float | None, tmp: Path,
          a) -> dict:
    """The sample's scaled time against a larger sample's (``budget`` actions) or, without a
    budget, the whole step's; a check that runs past ``--timeout`` says so instead."""
    big = 1.0 if budget is None else min(1.0, budget / actions(w, halo, a.cores))
    out = {"ranks": halo.ranks, "fraction": frac, "sample_s": sim, "check_fraction": big}
    try:
        ref, wall = simulate(w, halo, net, shm, big, tmp / f"c{halo.ranks}", a)
    except TraceError as e:
        if "ran past" not in str(e):
            raise
        return {**out, "skipped": f"replay past {a.timeout:g} s"}
    print(f"sample check at {halo.ranks} ranks: {frac:.4f} of the step gives {sim:.5f} s/step, "
          f"{big:.4f} of it {ref:.5f} ({100 * (sim / ref - 1):+.2f} %, {wall:.0f} s)", flush=True)
    return {**out, "check_s": ref, "difference": sim / ref - 1, "check_wall_s": wall}


def sweep(a, w, hs, net, shm, tmp: Path) -> tuple[list[dict], dict]:
    """Analytic and SimGrid per rank count; stops at the first replay past ``--timeout``."""
    model = {p.ranks: p for p in M.sweep(w, hs, net, shm, a.cores)}
    t1_model = model[1].step_s
    t1_sim, _ = simulate(w, hs[1], net, shm, 1.0, tmp / "p1", a)
    rows, checks = [], []
    for P in sorted(p for p in hs if p > 1):
        m = model[P]
        total = actions(w, hs[P], a.cores)
        frac = min(1.0, a.budget / total)
        try:
            sim, wall = simulate(w, hs[P], net, shm, frac, tmp / f"p{P}", a)
        except TraceError as e:
            if "ran past" not in str(e):
                raise
            print(f"{P} ranks: {e}; larger rank counts left out", flush=True)
            rows.append({"ranks": P, "skipped": f"replay past {a.timeout:g} s",
                         "actions": total, "fraction": frac})
            break
        rows.append({
            "ranks": P, "nodes": m.nodes, "cells_per_rank": m.cells_per_rank,
            "analytic_s": m.step_s, "simgrid_s": sim, "ratio": sim / m.step_s,
            "analytic_speedup": t1_model / m.step_s, "simgrid_speedup": t1_sim / sim,
            "compute_s": m.compute_s, "halo_s": m.halo_s, "reduce_s": m.reduce_s,
            "gather_s": m.gather_s, "messages_per_exchange": m.messages,
            "actions": total, "fraction": frac, "replay_wall_s": wall})
        print(line(rows[-1]), flush=True)
        first = frac < 1 and not any(r["fraction"] < 1 for r in rows[:-1])
        if frac < 1 and (P in a.check or first):
            checks.append(check(w, hs[P], net, shm, frac, sim, a.check.get(P), tmp, a))
    return rows, {"model_1rank_s": t1_model, "simgrid_1rank_s": t1_sim,
                  "sample_checks": checks}


HEAD = (f"{'ranks':>6} {'nodes':>5} {'cells/rank':>10} {'analytic s':>11} {'SimGrid s':>10} "
        f"{'ratio':>6} {'speedup A':>9} {'speedup S':>9} {'compute ms':>10} {'comm A ms':>9} "
        f"{'comm S ms':>9} {'sample':>7} {'replay':>7}")


def line(r: dict) -> str:
    return (f"{r['ranks']:6d} {r['nodes']:5d} {r['cells_per_rank']:10.0f} "
            f"{r['analytic_s']:11.5f} {r['simgrid_s']:10.5f} {r['ratio']:6.3f} "
            f"{r['analytic_speedup']:9.1f} {r['simgrid_speedup']:9.1f} "
            f"{1e3 * r['compute_s']:10.2f} {1e3 * (r['analytic_s'] - r['compute_s']):9.2f} "
            f"{1e3 * (r['simgrid_s'] - r['compute_s']):9.2f} "
            f"{r['fraction']:7.3f} {r['replay_wall_s']:6.0f}s")


def plot(rows: list[dict], path: Path, cores: int) -> None:
    from haloflow.io.figure import figure, save

    done = [r for r in rows if "simgrid_s" in r]
    x = np.array([r["ranks"] for r in done])
    fig = figure()
    ax = fig.add_subplot()
    ax.loglog(x, [r["analytic_speedup"] for r in done], "o-", label="analytic model")
    ax.loglog(x, [r["simgrid_speedup"] for r in done], "s--", label="SimGrid replay")
    ax.loglog(x, x, "k:", label="ideal")
    ax.set_xlabel(f"ranks ({cores} per node)")
    ax.set_ylabel("speedup over 1 rank")
    ax.set_title(f"62³ cavity on {NETWORK}")
    ax.legend(fontsize="small")
    ax.grid(True, which="both", alpha=0.3)
    save(fig, path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", type=Path, help="a 1-rank profile.json of scaling.py's case "
                    "(case.toml beside it); default: run the case here")
    ap.add_argument("--cells", type=int, default=62, help="cells per edge (default 62)")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--busy", type=float, default=0.1)
    ap.add_argument("--wait", type=float, default=120.0)
    ap.add_argument("--ranks", default=RANKS, help=f"rank counts (default {RANKS})")
    ap.add_argument("--budget", type=float, default=1.5e6,
                    help="most actions replayed per rank count (default 1.5e6)")
    ap.add_argument("--cores-per-node", dest="cores", type=int, default=CORES_PER_NODE,
                    help=f"ranks per node (default {CORES_PER_NODE}; 1: every rank its own "
                    "NIC, a check of what sharing a node's NIC costs)")
    ap.add_argument("--timeout", type=float, default=600.0, help="longest replay (s)")
    ap.add_argument("--check", default="", metavar="RANKS:ACTIONS,..",
                    help="rank counts whose sample is checked against a larger one of that "
                    "many actions (besides the first sampled, checked against the whole step)")
    ap.add_argument("-o", default=str(REPO / "benchmarks/results/simgrid_scaling.json"))
    a = ap.parse_args()
    ranks = [int(x) for x in a.ranks.split(",")]
    a.check = {int(r): float(b) for r, b in (x.split(":") for x in a.check.split(",") if x)}
    with tempfile.TemporaryDirectory(prefix="simgrid-scaling-") as tmp:
        prof = calibrate(a, Path(tmp))
        _, w = load_profile(prof)
        built = run_mesh(prof, w, print)
        if built is None:
            raise SystemExit(f"{prof}: no case.toml beside it to rebuild the mesh")
        hs = partition_halos(built, w, [1, *ranks], print)
        net, shm = M.network(NETWORK), shm_curve(None)
        print(HEAD, flush=True)
        rows, ref = sweep(a, w, hs, net, shm, Path(tmp))
    doc = {"date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"), "network": NETWORK,
           "cores_per_node": a.cores, "cells": w.cells,
           "calibration_s_per_step": w.measured["s_per_step"], "profile": str(prof),
           "budget_actions": a.budget, **ref, "rows": rows}
    Path(a.o).write_text(json.dumps(doc, indent=1))
    plot(rows, Path(a.o).with_suffix(".png"), a.cores)
    print(f"wrote {a.o}")


if __name__ == "__main__":
    main()
