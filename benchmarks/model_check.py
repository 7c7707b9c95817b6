"""How well `haloflow predict` does on this machine: predicted vs measured time per step, on
shared memory and on emulated networks.

Runs the cavity at CELLS² on each rank count REPEAT times (rank counts and networks taking
turns, so a change of machine load hits them alike), calibrates the model from the median
1-rank run's profile.json only, and prints predicted vs the median measured time per step:
on this machine's shared-memory curve (network ``shm``, plain runs), and for every other
network of --networks on runs with ``--emulate-network NAME`` and RANKS_PER_NODE ranks per
emulated node (the model told the same layout).

    .venv/bin/python benchmarks/model_check.py [--cells 256] [--ranks 1,2] [--repeat 5]
    .venv/bin/python benchmarks/model_check.py --dims 3 --cells 48 \\
        -o benchmarks/results/model_check_3d.json
    .venv/bin/python benchmarks/model_check.py --cells 128 --ranks 1,2 \\
        --networks gige-tcp,infiniband-sdr,tcp.out -o benchmarks/results/model_check_net.json
    .venv/bin/python benchmarks/model_check.py --ranks 1,2,3,4 --networks shm,gige-tcp \\
        --extrap --extrap-cmd /tmp/extrap/bin/extrap   # Extra-P beside it (optional)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from _common import REPO

from haloflow.study import model as M
from haloflow.study.predict import halos, load_profile, shm_curve


def geometry(cells: int, dims: int) -> list[str]:
    """The 2D cavity at lid Courant number 6.4 (12.8 stalls at 256^2: the run stops with
    exit 3) or the 3D one with all six faces walls (dt 0.008 at 62^3, the same lid Courant
    number at other sizes)."""
    if dims == 2:
        return ["--set", f"mesh.cells=[{cells},{cells},1]", "--set", f"solver.dt={6.4 / cells!r}"]
    return ["--set", f"mesh.cells=[{cells},{cells},{cells}]", "--set", "boundary.front.type=wall",
            "--set", "boundary.back.type=wall", "--set", f"solver.dt={0.008 * 62 / cells!r}"]


def run(cells: int, ranks: int, steps: int, out: Path, dims: int = 2, network: str = "shm",
        per_node: int = 1) -> dict:
    exe = Path(sys.executable).parent
    emulate = [] if network == "shm" or ranks == 1 else [
        "--emulate-network", network, "--set", f"parallel.ranks_per_node={per_node}"]
    cmd = [str(exe / "mpiexec"), "-n", str(ranks), str(exe / "haloflow"), "run", "cavity", *emulate,
           "-o", str(out), "--quiet", "--steps", str(steps), *geometry(cells, dims),
           "--set", "solver.steady_tol=0",
           "--set", "output.fields=false", "--set", "output.plots=false",
           "--set", "postprocess.cavity=false"]
    subprocess.run(cmd, check=True, env={**os.environ, "NUMBA_NUM_THREADS": "1"},
                   stdout=subprocess.DEVNULL)
    return json.loads((out / "profile.json").read_text())


def measure(a, ranks: list[int], nets: list[str], tmp: str) -> dict:
    """``{(network, ranks): [(s_per_step, run directory), ...]}``; one rank runs once per
    repeat (networks do not apply), every other count once per network."""
    runs = {}
    for k in range(a.repeat):
        for p in ranks:
            for net in (["shm"] if p == 1 else nets):
                out = Path(tmp) / f"r{p}-{Path(net).stem}-{k}"
                prof = run(a.cells, p, a.steps, out, a.dims, net, a.ranks_per_node)
                runs.setdefault((net, p), []).append((prof["s_per_step"], out))
                print(f"repeat {k + 1}/{a.repeat}, {p} rank(s), {net}: "
                      f"{prof['s_per_step']:.4f} s/step", flush=True)
    return runs


def compare(a, runs, w, hs, shm) -> list[dict]:
    """Predicted against the median measured time per step of every (network, ranks)."""
    cores = os.cpu_count() or 1
    rows = []
    for (name, p), got in sorted(runs.items(), key=lambda kv: (kv[0][0] != "shm", kv[0])):
        added = None
        if name == "shm":
            pred = M.predict(w, hs[p], shm, shm, cores)
        else:
            lay = M.Layout(a.ranks_per_node)
            pred = M.predict(w, hs[p], M.network(name), shm, lay)
            here = M.predict(w, hs[p], shm, shm, lay)
            median_run = sorted(got)[len(got) // 2][1]
            em = json.loads((median_run / "profile.json").read_text()).get("emulation", {})
            # what emulation added against what the model says the network adds: a check
            # of the accounting that load on the machine does not blur
            added = {"emulated_s": em.get("added_s_per_step"),
                     "predicted_s": pred.step_s - here.step_s,
                     "compiled_unmatched": em.get("compiled_unmatched")}
        meas = np.array([s for s, _ in got])
        err = 100 * (pred.step_s / np.median(meas) - 1)
        rows.append({"network": name, "ranks": p, "ranks_per_node": a.ranks_per_node,
                     "measured_median_s": float(np.median(meas)), "measured_s": meas.tolist(),
                     "predicted_s": pred.step_s, "error_percent": err,
                     "compute_s": pred.compute_s, "halo_s": pred.halo_s,
                     "reduce_s": pred.reduce_s, "gather_s": pred.gather_s, "added": added})
        print(f"{name}, {p} rank(s): measured {np.median(meas):.4f} s/step (median of "
              f"{len(meas)}, {meas.min():.4f}..{meas.max():.4f}), predicted {pred.step_s:.4f} "
              f"({err:+.1f} %): compute {pred.compute_s:.4f}, halo {pred.halo_s:.4f}, "
              f"reductions {pred.reduce_s:.4f}, gathers {pred.gather_s:.4f}" + (
                  f"; network time added per step: emulated {added['emulated_s']:.4f}, "
                  f"predicted {added['predicted_s']:.4f}" if added else ""))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cells", type=int, default=256)
    ap.add_argument("--dims", type=int, choices=(2, 3), default=2)
    ap.add_argument("--ranks", default="1,2")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--networks", default="shm",
                    help="shm (plain runs) and/or networks to emulate: presets or .out files")
    ap.add_argument("--ranks-per-node", type=int, default=1,
                    help="ranks per emulated node (default 1)")
    ap.add_argument("--extrap", action="store_true",
                    help="also fit Extra-P to the measurements (benchmarks/extrap_fit.py; "
                         "skipped when its extrap command is absent)")
    ap.add_argument("--extrap-cmd", help="Extra-P's extrap command (default: on PATH)")
    ap.add_argument("--shm", type=Path, help="shared-memory NetPIPE curve (default: cached)")
    ap.add_argument("-o", default=str(REPO / "benchmarks/results/model_check.json"))
    a = ap.parse_args()
    ranks = sorted({1} | {int(x) for x in a.ranks.split(",")})
    nets = [n.strip() for n in a.networks.split(",") if n.strip()]
    with tempfile.TemporaryDirectory() as tmp:
        runs = measure(a, ranks, nets, tmp)
        ones = sorted(runs[("shm", 1)])
        calib = ones[len(ones) // 2][1] / "profile.json"
        _, w = load_profile(calib)
        shm = shm_curve(a.shm)
        hs = halos(calib, w, ranks, print)
        rows = compare(a, runs, w, hs, shm)
    doc = {"cells": a.cells ** a.dims, "dims": a.dims, "steps": a.steps, "repeat": a.repeat,
           "calibration": "median 1-rank run", "machine": os.uname().nodename,
           "cpus": os.cpu_count(), "rows": rows}
    if a.extrap:
        import extrap_fit  # beside this script

        exe = extrap_fit.find(a.extrap_cmd)
        if exe is None:
            print("Extra-P's extrap command not found (pip install extrap in a separate "
                  "environment, then --extrap-cmd PATH): skipped")
        else:
            doc["extrap"] = extrap_fit.compare(exe, rows)
    Path(a.o).write_text(json.dumps(doc, indent=1))
    print(f"wrote {a.o}")


if __name__ == "__main__":
    main()
