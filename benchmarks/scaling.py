"""Strong scaling of the 3D lid-driven cavity: what does not shrink, and what the model predicts.

Runs the cavity (all six faces walls, lid +x, dt 0.008 as in issue 13) on 1 and 2 ranks,
taking turns, REPEAT times; from the median 1-rank run's profile.json it reports

- the serial fraction: seconds per step that more ranks do not shrink (the AMG levels every
  rank solves alone or redundantly, ``serial_s``, and the per-call floor of the kernels and
  MPI calls, ``floor_s``), over the 1-rank s/step;
- halo exchanges and allreduces per step, pressure iterations per solve;
- measured s/step on 1 and 2 ranks (medians) and the speedup;
- the predicted curve (``haloflow predict``'s model) on ``infiniband-fdr`` and ``gige-tcp``
  with 12 cores per node, its peak, and whether compute per rank still shrinks at about
  2 000 cells per rank;
- what bounds that peak: the same prediction with the terms a change of the pressure solve
  could remove taken away one after another (the coarse levels' exchanges, then the
  redundant coarse solve's fixed cost and allgathers, then every allreduce), on the case's
  own partition, on the ``grid`` and ``rcb`` decompositions of its mesh, and on an ideal
  process grid (equal parts, six neighbours).  No change to the terms a row has taken away
  can take the peak past that row.

    .venv/bin/python benchmarks/scaling.py [--cells 62] [--repeat 3] [--steps 10]

Writes benchmarks/results/scaling.json and scaling.png.  Run on idle cores: each run waits
until the machine is quiet (``--busy``) and records the load it found.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np
from _common import REPO, wait_quiet

from haloflow.study import gains as G
from haloflow.study import model as M
from haloflow.study.predict import (
    load_profile,
    parse_ranks,
    partition_halos,
    run_mesh,
    shm_curve,
)

NETWORKS = ("infiniband-fdr", "infiniband-sdr", "gige-lowlatency", "gige-tcp")
BOUND_NETWORKS = NETWORKS[:3]  # the bounds tables
AGGLOMERATED = "(coarse levels agglomerated: best per rank count)"  # a bounds row
COMPARED = ("grid", "rcb")  # the case's mesh cut by these too, in the bounds tables
CORES_PER_NODE = 12
PREDICT_RANKS = "12..3072"
# what the bounds take away, one after another (each row keeps the previous rows' changes)
BOUNDS = (
    ("nothing", {}),
    ("coarse levels' exchanges", {"levels": []}),
    ("+ redundant solve's fixed cost, allgathers",
     {"serial_s": 0.0, "gathers": 0.0, "refreshes": 0.0}),
    ("+ every allreduce", {"allreduces": 0.0, "compiled_allreduces": 0.0}),
)


def case_sets(n: int, steps: int, extra: list[str]) -> list[str]:
    keys = [f"mesh.cells=[{n},{n},{n}]", "boundary.front.type=wall",
            "boundary.back.type=wall", "solver.dt=0.008", "solver.steady_tol=0",
            f"solver.end_time={0.008 * (steps + 10)!r}", "output.fields=false",
            "output.plots=false", "postprocess.cavity=false", *extra]
    return [x for k in keys for x in ("--set", k)]


def run(n: int, ranks: int, steps: int, out: Path, extra: list[str], quiet: tuple) -> dict:
    exe = Path(sys.executable).parent
    load = wait_quiet(*quiet)
    cmd = [str(exe / "mpiexec"), "-n", str(ranks), str(exe / "haloflow"), "run", "cavity",
           "-o", str(out), "--quiet", "--steps", str(steps), *case_sets(n, steps, extra)]
    subprocess.run(cmd, check=True, env={**os.environ, "NUMBA_NUM_THREADS": "1"},
                   stdout=subprocess.DEVNULL)
    prof = json.loads((out / "profile.json").read_text())
    summ = json.loads((out / "summary.json").read_text())
    return {"s_per_step": (summ["loop_s"] - summ["first_step_s"]) / max(summ["steps"] - 1, 1),
            "p_iters_mean": summ["p_iters_mean"], "per_step": prof["per_step"],
            "busy_before": load, "out": out}


def serial_fraction(prof_path: Path, s_per_step: float) -> dict:
    _, w = load_profile(prof_path)
    return {"serial_s": w.serial_s, "floor_s": w.floor_s,
            "serial_fraction": (w.serial_s + w.floor_s) / s_per_step,
            "coarse_fraction": w.serial_s / s_per_step}


def agglomerated_sweep(w: M.Workload, hs: dict, net: M.Curve, shm: M.Curve) -> list:
    """The prediction at each rank count with the coarse levels agglomerated at the
    threshold (``gains.AGGLOMERATE``, rows per rank) the model prices best there: what
    ``[solver.pressure] agglomerate`` chosen per rank count gives."""
    out = []
    for p in sorted(hs):
        opts = [M.predict(replace(w, agglomerate=a), hs[p], net, shm, CORES_PER_NODE)
                for a in G.AGGLOMERATE]
        best = min(range(len(opts)), key=lambda k: opts[k].step_s)
        opts[best].counts["agglomerate"] = G.AGGLOMERATE[best]
        out.append(opts[best])
    return out


def predicted(w: M.Workload, hs: dict, shm: M.Curve) -> dict:
    """The predicted curve on each network from the workload and halos by rank count, as
    the run is and (``agglomerated``) with the best agglomeration at each rank count."""
    out = {}
    for name in NETWORKS:
        net = M.network(name)
        s = M.summary(M.sweep(w, hs, net, shm, CORES_PER_NODE))
        s["agglomerated"] = M.summary(agglomerated_sweep(w, hs, net, shm))
        rows = s["rows"]
        near = min(rows[1:], key=lambda r: abs(np.log(r["cells_per_rank"] / 2000)))
        before = rows[rows.index(near) - 1]
        s["compute_shrinks_at_2000"] = {
            "ranks": near["ranks"], "cells_per_rank": near["cells_per_rank"],
            "compute_s": near["compute_s"], "previous_compute_s": before["compute_s"],
            "shrinks": bool(near["compute_s"] < before["compute_s"])}
        out[name] = s
    return out


def bounds(w: M.Workload, partitions: dict, net: M.Curve, shm: M.Curve) -> list[dict]:
    """The predicted peak with the ``BOUNDS`` terms taken away in turn, for each partition
    (name -> halos by rank count), after the run as it is and with the best agglomeration
    at each rank count.  A coarse level free of exchanges still computes (its work shrinks
    with the ranks); a redundant solve without its fixed cost is work that shrinks like
    the rest.  Speedups are against the same 1-rank step in every row."""
    rows = []
    for part, hs in partitions.items():
        changes = {}
        steps = [(label, change) for label, change in BOUNDS]
        steps.insert(1, (AGGLOMERATED, None))
        for label, change in steps:
            if change is None:
                s = M.summary(agglomerated_sweep(w, hs, net, shm))
            else:
                changes.update(change)
                s = M.summary(M.sweep(replace(w, **changes), hs, net, shm, CORES_PER_NODE))
            r = next(row for row in s["rows"] if row["ranks"] == s["peak"]["ranks"])
            rows.append({"network": net.name, "partition": part, "removed": label,
                         "peak_speedup": r["speedup"], "agglomerate": r.get("agglomerate", 0),
                         "messages_per_step": r["messages_per_step"],
                         "ranks": r["ranks"], "step_s": r["step_s"],
                         "compute_s": r["compute_s"], "halo_s": r["halo_s"],
                         "reduce_s": r["reduce_s"], "gather_s": r["gather_s"],
                         "messages_per_exchange": r["messages_per_exchange"],
                         "curve": [[row["ranks"], row["speedup"]] for row in s["rows"]]})
    return rows


def bounds_of(w: M.Workload, hs: dict, shm: M.Curve, others: dict) -> list[dict]:
    """``bounds`` on each of ``BOUND_NETWORKS``: the case's own partition (``hs``), other
    decompositions of its mesh (``others``: name -> halos, where the mesh is at hand) and
    an ideal process grid (equal parts, six neighbours) at the same rank counts."""
    grid = {p: M.halo_of_grid(w.cells, p, w.dims) for p in hs}
    parts = {"case": hs, **others, "ideal grid": grid}
    return [row for name in BOUND_NETWORKS
            for row in bounds(w, parts, M.network(name), shm)]


def bounds_table(rows: list[dict]) -> list[str]:
    """``bounds`` rows as the printed tables, one per network, one line each."""
    out = []
    for r in rows:
        if not out or r["network"] != out[-1][0]:
            out.append((r["network"], [
                f"what bounds the {r['network']} peak (terms taken away in turn):",
                f"  {'partition':<11} {'taken away':<46} {'peak':>7} {'ranks':>6} "
                f"{'ms/step':>8} {'compute':>8} {'halo':>6} {'reduce':>7} {'gather':>7} "
                f"{'msgs':>5} {'msgs/step':>9}"]))
        out[-1][1].append(f"  {r['partition']:<11} {r['removed']:<46} {r['peak_speedup']:6.1f}x "
                   f"{r['ranks']:>6} {1e3 * r['step_s']:8.2f} {1e3 * r['compute_s']:8.2f} "
                   f"{1e3 * r['halo_s']:6.2f} {1e3 * r['reduce_s']:7.2f} "
                   f"{1e3 * r['gather_s']:7.2f} {r['messages_per_exchange']:>5} "
                   f"{r['messages_per_step']:9.0f}")
    return [line for _, lines in out for line in lines]


def peak_breakdown(s: dict) -> str:
    """Where the predicted step goes at the peak: compute, reductions, gathers, and the
    halo exchanges of the mesh and of each distributed AMG level (busiest rank)."""
    r = next(row for row in s["rows"] if row["ranks"] == s["peak"]["ranks"])
    halo = ", ".join(f"{'mesh' if k == 'mesh' else f'{k} rows'} {1e3 * t:.2f}"
                     for k, t in r["halo_parts"])
    return (f"{'':17}at the peak, ms a step: {1e3 * r['step_s']:.2f} = compute "
            f"{1e3 * r['compute_s']:.2f} + reductions {1e3 * r['reduce_s']:.2f} + gathers "
            f"{1e3 * r['gather_s']:.2f} + halo {1e3 * r['halo_s']:.2f} ({halo}; "
            f"{r['messages_per_exchange']} messages an exchange)")


def plot(pred: dict, bound: list[dict], path: Path) -> None:
    """The predicted curves, and dashed the bounds on the case's own partition."""
    from haloflow.io.figure import figure, save

    fig = figure()
    ax = fig.add_subplot()
    for name, s in pred.items():
        r = np.array([row["ranks"] for row in s["rows"]])
        ax.loglog(r, [row["speedup"] for row in s["rows"]], "o-", label=name)
    for b in bound[1:]:
        if b["partition"] == "case" and b["network"] == NETWORKS[0]:
            x, y = np.array(b["curve"]).T
            what = b["removed"]
            what = f"also without {what[2:]}" if what.startswith("+ ") else f"without {what}"
            what = "agglomerated" if what == f"without {AGGLOMERATED}" else what
            ax.loglog(x, y, "--", lw=1, label=f"{NETWORKS[0]} {what}")
    ax.loglog(r, r, "k:", label="ideal")
    ax.set_xlabel("ranks (12 per node)")
    ax.set_ylabel("predicted speedup over 1 rank")
    ax.legend(fontsize="small")
    ax.grid(True, which="both", alpha=0.3)
    save(fig, path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cells", type=int, default=62, help="cells per edge (default 62)")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="extra case override for every run")
    ap.add_argument("--busy", type=float, default=0.1,
                    help="wait until the cores are at most this busy before a run")
    ap.add_argument("--wait", type=float, default=120.0, help="longest wait for quiet (s)")
    ap.add_argument("-o", default=str(REPO / "benchmarks/results/scaling.json"))
    a = ap.parse_args()
    n = a.cells
    with tempfile.TemporaryDirectory() as tmp:
        runs = {1: [], 2: []}
        for k in range(a.repeat):
            for p in (1, 2):
                r = run(n, p, a.steps, Path(tmp) / f"r{p}-{k}", a.set, (a.busy, a.wait))
                runs[p].append(r)
                print(f"repeat {k + 1}/{a.repeat}, {p} rank(s): {r['s_per_step']:.4f} s/step, "
                      f"{r['per_step']['halo_exchanges']:.1f} exchanges, "
                      f"{r['per_step']['allreduces']:.1f} allreduces per step", flush=True)
        med = {p: float(np.median([r["s_per_step"] for r in runs[p]])) for p in runs}
        calib = sorted(runs[1], key=lambda r: r["s_per_step"])[len(runs[1]) // 2]
        prof = calib["out"] / "profile.json"
        frac = serial_fraction(prof, calib["s_per_step"])
        _, w = load_profile(prof)
        built = run_mesh(prof, w, lambda *a: None)
        hs = partition_halos(built, w, [1, *parse_ranks(PREDICT_RANKS)], lambda *a: None)
        others = {} if built is None else {
            m: {**G.alternative_halos(*built, hs, m), 1: hs[1]}
            for m in COMPARED if m != built[1]}
        shm = shm_curve(None)
        pred = predicted(w, hs, shm)
        bound = bounds_of(w, hs, shm, others)
    doc = {"cells": n ** 3, "steps": a.steps, "repeat": a.repeat, "overrides": a.set,
           "machine": os.uname().nodename, "cpus": os.cpu_count(),
           "measured": {str(p): {"s_per_step_median": med[p],
                                 "s_per_step": [r["s_per_step"] for r in runs[p]],
                                 "busy_before": [r["busy_before"] for r in runs[p]],
                                 "per_step": runs[p][0]["per_step"],
                                 "p_iters_mean": runs[p][0]["p_iters_mean"]} for p in runs},
           "speedup_2": med[1] / med[2], **frac, "predicted": pred,
           "bounds": bound}
    Path(a.o).write_text(json.dumps(doc, indent=1))
    plot(pred, bound, Path(a.o).with_suffix(".png"))
    per = runs[1][0]["per_step"]
    print(f"\n{n}^3 cavity: 1 rank {med[1]:.4f} s/step, 2 ranks {med[2]:.4f} s/step "
          f"(speedup {med[1] / med[2]:.2f}); per step {per['halo_exchanges']:.1f}"
          f" halo exchanges, {per['allreduces']:.1f} allreduces")
    print(f"serial fraction {100 * frac['serial_fraction']:.2f} % of a 1-rank step "
          f"(coarse levels {1e3 * frac['serial_s']:.2f} ms, "
          f"call floor {1e3 * frac['floor_s']:.2f} ms)")
    for name, s in pred.items():
        c = s["compute_shrinks_at_2000"]
        print(f"{name:>15}: peak speedup {s['peak']['speedup']:.1f}x at {s['peak']['ranks']} ranks "
              f"({s['peak']['cells_per_rank']:.0f} cells/rank); compute per rank at "
              f"{c['cells_per_rank']:.0f} cells/rank {'still shrinks' if c['shrinks'] else 'flat'}")
        print(peak_breakdown(s))
        agg = s["agglomerated"]
        print(f"{'':17}agglomerated (best threshold per rank count): peak "
              f"{agg['peak']['speedup']:.1f}x at {agg['peak']['ranks']} ranks")
    print("\n".join(bounds_table(bound)))
    print(f"wrote {a.o}")


if __name__ == "__main__":
    main()
