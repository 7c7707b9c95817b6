"""DFG cylinder benchmark (Schäfer & Turek 1996) under mesh refinement: Re 20 and Re 100.

    .venv/bin/python benchmarks/cylinder.py                          # the default study
    .venv/bin/python benchmarks/cylinder.py --cells 64,88 --re100-cells 64 --end-time 6

Re 20 (test 2D-1, the built-in ``cylinder`` case, SIMPLE to convergence) on two families of
meshes: ``--cells`` cells around the cylinder on the uniform O-grid with Gauss gradients
(64, 88, 128: each about twice the cells of the one before; where simpleFoam was compared),
and ``--wake-cells`` with the case's own mesh and gradients (the wake refined 2x,
least squares; 128 is the case as shipped); Re 100 (test 2D-2, ``cylinder_re100``, PISO
with the case's time scheme) on ``--re100-cells`` from rest to ``--end-time``, dt scaled
with the cell size (0.002 at 64, a Courant number about 0.7).  Each run is a serial
``haloflow run`` (fields and plots off); the coefficients come from its summary.json.
Prints a table against the published ranges and writes benchmarks/results/cylinder.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import BIN

RE20 = ("cd_final", "cl_final", "dp_final", "la")
RE100 = ("st", "cd_max", "cl_max", "dp_half_period")
UNIFORM = ["mesh.wake_refinement=1", "solver.gradient=gauss"]  # the docs' uniform family


def run(case: str, sets: list[str], workdir: Path) -> dict:
    out = Path(tempfile.mkdtemp(dir=workdir)) / "run"
    cmd = [str(BIN / "haloflow"), "run", case, "-o", str(out), "--quiet",
           "--set", "output.fields=false", "--set", "output.plots=false"]
    for s in sets:
        cmd += ["--set", s]
    subprocess.run(cmd, check=True, env={**os.environ, "NUMBA_NUM_THREADS": "1"})
    s = json.loads((out / "summary.json").read_text())
    c = s["cylinder"]
    row = {"cells_around": None, "cells": s["cells"], "steps": s["steps"],
           "loop_s": round(s["loop_s"], 2), "converged": s["converged"],
           "reference": c["reference"]}
    row.update({k: c[k] for k in RE20 + RE100 + ("cd_cell_p", "periods", "cd_mean")
                if k in c})
    return row


def fmt(v, w=9, p=5):
    return f"{'-':>{w}}" if v is None else f"{v:>{w}.{p}f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", default="64,88,128",
                    help="cells around the cylinder, Re 20, uniform mesh, Gauss gradients")
    ap.add_argument("--wake-cells", default="64,96,128",
                    help="the same with the case's wake refinement and gradients")
    ap.add_argument("--re100-cells", default="64,88", help="the same for Re 100 ('' for none)")
    ap.add_argument("--end-time", type=float, default=7.0, help="Re 100: simulated seconds")
    ap.add_argument("-o", "--output", type=Path,
                    default=Path("benchmarks/results/cylinder.json"))
    a = ap.parse_args()
    subprocess.run([sys.executable, "-m", "haloflow.warmup"], check=True)
    old = json.loads(a.output.read_text()) if a.output.exists() else {}
    result = {"host": platform.node(), "re20": [], "re100": [],
              "source": "Schäfer & Turek 1996, Notes Numer. Fluid Mech. 52, 547-566"}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        print("Re 20 (2D-1, SIMPLE)")
        print(f"{'mesh':>6} {'around':>6} {'cells':>7} {'iters':>6} {'c_D':>9} {'c_L':>9} "
              f"{'dp':>9} {'L_a':>9} {'c_D cellp':>9} {'s':>7}")
        family = [("uniform", int(x), UNIFORM) for x in a.cells.split(",") if x]
        family += [("wake", int(x), []) for x in a.wake_cells.split(",") if x]
        for mesh, n, sets in family:
            r = run("cylinder", [f"mesh.cells_around={n}", *sets], work)
            r.update(cells_around=n, mesh=mesh)
            result["re20"].append(r)
            print(f"{mesh:>6} {n:>6} {r['cells']:>7} {r['steps']:>6} {fmt(r['cd_final'])} "
                  f"{fmt(r['cl_final'])} {fmt(r['dp_final'])} {fmt(r['la'])} "
                  f"{fmt(r['cd_cell_p'])} {r['loop_s']:>7.1f}", flush=True)
        ref = result["re20"][0]["reference"] if result["re20"] else None
        if ref:
            print(f"{'Schäfer & Turek 1996':>35} {ref['cd'][0]}-{ref['cd'][1]}  "
                  f"{ref['cl'][0]}-{ref['cl'][1]}  {ref['dp'][0]}-{ref['dp'][1]}  "
                  f"{ref['la'][0]}-{ref['la'][1]}")
        cells100 = [int(x) for x in a.re100_cells.split(",") if x]
        if cells100:
            print(f"\nRe 100 (2D-2, PISO, t = 0 .. {a.end_time:g})")
            print(f"{'around':>6} {'cells':>7} {'dt':>8} {'St':>9} {'c_D,max':>9} "
                  f"{'c_L,max':>9} {'dp(1/2f)':>9} {'periods':>7} {'s':>7}")
        for n in cells100:
            dt = 0.002 * 64 / n
            r = run("cylinder_re100", [f"mesh.cells_around={n}", f"solver.dt={dt!r}",
                                       f"solver.end_time={a.end_time!r}"], work)
            r.update(cells_around=n, dt=dt)
            result["re100"].append(r)
            print(f"{n:>6} {r['cells']:>7} {dt:>8.5f} {fmt(r['st'])} {fmt(r['cd_max'])} "
                  f"{fmt(r['cl_max'])} {fmt(r['dp_half_period'])} {r['periods']:>7} "
                  f"{r['loop_s']:>7.1f}", flush=True)
        if result["re100"]:
            ref = result["re100"][0]["reference"]
            print(f"{'Schäfer & Turek 1996':>23} {ref['st'][0]}-{ref['st'][1]}  "
                  f"{ref['cd_max'][0]}-{ref['cd_max'][1]}  {ref['cl_max'][0]}-"
                  f"{ref['cl_max'][1]}  {ref['dp_half_period'][0]}-"
                  f"{ref['dp_half_period'][1]}")
    for key in ("re20", "re100"):  # a study of one Reynolds number keeps the other's rows
        if not result[key] and old.get(key):
            result[key] = old[key]
    a.output.parent.mkdir(parents=True, exist_ok=True)
    a.output.write_text(json.dumps(result, indent=2) + "\n")
    print(f"-> {a.output}")


if __name__ == "__main__":
    sys.exit(main())
