"""Cavity cost: seconds per step and ns per cell-step, 1 and 2 ranks; time to steady state.

The fixed-step runs start from rest with the lid Courant number of the default case (12.8)
up to 128^2 and half of it on finer meshes (at 256^2, 12.8 stalls and the run stops with exit
3), so the first steps are the expensive ones a real run also pays.

    .venv/bin/python benchmarks/cavity.py                 # 128^2 and 256^2, 1 and 2 ranks
    .venv/bin/python benchmarks/cavity.py --steady        # also: time to the steady answer

Each configuration runs ``haloflow run`` under the venv's own ``mpiexec`` for a fixed number
of steps, after a warm-up that fills numba's cache; the figure kept is the median of
``--repeat`` runs of the solver's time-loop seconds (summary.json ``loop_s``).  Results are
printed as a table and written as JSON (default benchmarks/results/cavity.json).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import BIN


def run(ranks: int, args: list[str], workdir: Path) -> dict:
    out = Path(tempfile.mkdtemp(dir=workdir))
    cmd = [str(BIN / "mpiexec"), "-n", str(ranks), str(BIN / "haloflow"), "run", "cavity",
           "-o", str(out / "run"), "--quiet", "--force", "--set", "output.fields=false",
           "--set", "output.plots=false", "--set", "postprocess.cavity=false", *args]
    subprocess.run(cmd, check=True, env={**os.environ, "NUMBA_NUM_THREADS": "1"})
    return json.loads((out / "run" / "summary.json").read_text())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="128,256")
    ap.add_argument("--ranks", default="1,2")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--pressure", default="amg-cg,cg-jacobi",
                    help="pressure solvers to compare, measured in the same run")
    ap.add_argument("--steady", action="store_true", help="also time 128^2, Re 100 to steady")
    ap.add_argument("-o", "--output", type=Path, default=Path("benchmarks/results/cavity.json"))
    a = ap.parse_args()

    subprocess.run([sys.executable, "-m", "haloflow.warmup"], check=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        print(f"{'cells':>10} {'ranks':>5} {'pressure':>10} {'s/step':>9} {'ns/cell-step':>13} "
              f"{'p it/solve':>10} {'spread %':>8}")
        for n, r, method in ((int(n), int(r), m) for n in a.sizes.split(",")
                             for r in a.ranks.split(",") for m in a.pressure.split(",")):
            # the default case's lid Courant number (12.8, dt = 0.1 at 128^2), halved above
            courant = 12.8 if n <= 128 else 6.4
            args = ["--set", f"mesh.cells=[{n},{n},1]", "--set", f"solver.dt={courant / n!r}",
                    "--steps", str(a.steps), "--set", f"solver.pressure.method={method}"]
            runs = [run(r, args, work) for _ in range(a.repeat)]
            sps = [s["s_per_step"] for s in runs]
            med = statistics.median(sps)
            row = {"cells": n * n, "mesh": f"{n}x{n}", "ranks": r, "steps": a.steps,
                   "pressure": method, "u_iters_mean": runs[0]["u_iters_mean"],
                   "s_per_step": med, "ns_per_cell_step": med / (n * n) * 1e9,
                   "spread": (max(sps) - min(sps)) / med, "all_s_per_step": sps,
                   "p_iters_mean": runs[0]["p_iters_mean"]}
            rows.append(row)
            print(f"{n * n:>10} {r:>5} {method:>10} {med:>9.4f} "
                  f"{row['ns_per_cell_step']:>13.0f} {row['p_iters_mean']:>10.1f} "
                  f"{100 * row['spread']:>8.1f}", flush=True)
        steady = []
        if a.steady:
            for r in (int(s) for s in a.ranks.split(",")):
                s = run(r, ["--set", "mesh.cells=[128,128,1]", "--set", "postprocess.cavity=true"],
                        work)
                steady.append({"ranks": r, "steps": s["steps"], "sim_time": s["sim_time"],
                               "wall_s": s["wall_s"], "loop_s": s["loop_s"],
                               "converged": s["converged"]})
                print(f"128x128 Re 100 to steady on {r} rank(s): {s['steps']} steps, "
                      f"t = {s['sim_time']:.1f}, wall {s['wall_s']:.1f} s", flush=True)
    a.output.parent.mkdir(parents=True, exist_ok=True)
    a.output.write_text(json.dumps({"machine": platform.node(), "cpu": platform.processor(),
                                    "python": sys.version.split()[0], "fixed_steps": rows,
                                    "to_steady": steady}, indent=2))
    print(f"wrote {a.output}")


if __name__ == "__main__":
    main()
