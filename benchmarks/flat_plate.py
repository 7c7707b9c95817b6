"""Flat plate, Spalart-Allmaras: skin friction against the NASA Turbulence Modeling Resource.

Runs the built-in ``flat_plate`` case (haloflow/cases/flat_plate.toml: TMR's 2D zero-pressure-
gradient plate, Re 5 million per unit length, 120 x 80 cells, SIMPLEC to every initial
residual below 1e-6), or a finer mesh with ``--cells``, and prints cf at TMR's stations next
to the published SA results of CFL3D and FUN3D on their 545 x 385 grid
(haloflow/data/tmr_flatplate_sa_cf.csv), with the largest relative difference over the
turbulent part of the plate (x = 0.1 to 1.95, see haloflow/post/flat_plate.py).

    .venv/bin/python benchmarks/flat_plate.py               # the default case, 1 rank
    .venv/bin/python benchmarks/flat_plate.py --ranks 2
    .venv/bin/python benchmarks/flat_plate.py --cells 48 192 160   # symmetry, plate, wall-normal

Writes benchmarks/results/flat_plate.json (or ``--json``).  Takes a few minutes on one core.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from _common import BIN, REPO

MESH = REPO / "haloflow" / "cases" / "flat_plate" / "blockMeshDict"
STATIONS = (0.01, 0.05, 0.1, 0.25, 0.5, 0.97, 1.5, 1.9)


def ratio(n: int, length: float, first: float) -> float:
    """blockMesh's last/first cell ratio of ``n`` geometric cells over ``length`` whose first
    is ``first`` long (bisection on the per-cell expansion)."""
    lo, hi = 1.0 + 1e-12, 2.0
    for _ in range(200):
        r = 0.5 * (lo + hi)
        if first * (r**n - 1.0) / (r - 1.0) > length:
            hi = r
        else:
            lo = r
    return r ** (n - 1)


def mesh_with(cells, work: Path) -> Path:
    """The case's blockMeshDict with other cell counts and the same first cells (2 mm at the
    leading edge, 5e-6 at the wall)."""
    up, plate, y = cells
    text = MESH.read_text()
    for key, value in (("xUp", up), ("xPlate", plate), ("yCells", y),
                       ("gUp", 1.0 / ratio(up, 1.0 / 3.0, 0.002)),
                       ("gPlate", ratio(plate, 2.0, 0.002)), ("gY", ratio(y, 1.0, 5e-6))):
        lines = text.splitlines()
        for i, line in enumerate(lines):
            if line.startswith(key + " "):
                lines[i] = f"{key:<9}{value:.6g};" if isinstance(value, float) else \
                    f"{key:<9}{value};"
        text = "\n".join(lines) + "\n"
    path = work / "blockMeshDict"
    path.write_text(text)
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=1)
    ap.add_argument("--cells", type=int, nargs=3, metavar=("UP", "PLATE", "Y"),
                    help="cells along the symmetry stretch, along the plate, wall-normal")
    ap.add_argument("--json", type=Path, default=REPO / "benchmarks" / "results" /
                    "flat_plate.json")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        extra = [] if args.cells is None else ["--set", f"mesh.file={mesh_with(args.cells, work)}"]
        out = work / "run"
        cmd = [str(BIN / "mpiexec"), "-n", str(args.ranks), str(BIN / "haloflow"), "run",
               "flat_plate", "-o", str(out), "--quiet", "--set", "output.fields=false", *extra]
        subprocess.run(cmd, check=True)
        summary = json.loads((out / "summary.json").read_text())
        cf = np.loadtxt(out / "cf.csv", delimiter=",", skiprows=1, ndmin=2)
    fp = summary["flat_plate"]
    rows = []
    print(f"flat plate, SA, Re {fp['re_per_length']:.3g}/length, {summary['cells']} cells, "
          f"{summary['ranks']} rank(s), {summary['steps']} iterations, "
          f"{summary['loop_s']:.1f} s (converged: {summary['converged']})")
    print(f"{'x':>6} {'haloflow':>10} {'CFL3D':>10} {'FUN3D':>10} {'diff':>8}")
    for x in STATIONS:
        ours, c3, f3 = (float(np.interp(x, cf[:, 0], cf[:, k])) for k in (1, 2, 3))
        rows.append({"x": x, "cf": ours, "cf_cfl3d": c3, "cf_fun3d": f3})
        print(f"{x:6.3f} {ours:10.6f} {c3:10.6f} {f3:10.6f} {100 * (ours / c3 - 1):+7.2f}%")
    print(f"largest |cf / cf_CFL3D - 1| over x = {fp['turbulent_x'][0]}..{fp['turbulent_x'][1]}:"
          f" {100 * fp['max_rel_error']:.2f} % (at x = {fp['max_rel_error_x']:.3f})")
    result = {"case": "flat_plate", "cells": summary["cells"], "ranks": summary["ranks"],
              "mesh_cells": args.cells, "iterations": summary["steps"],
              "final_residual": summary.get("final_residual"),
              "loop_s": summary["loop_s"], "converged": summary["converged"],
              "flat_plate": fp, "stations": rows,
              "host": platform.node(), "python": sys.version.split()[0]}
    assert all(math.isfinite(r["cf"]) for r in rows)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
