"""The device step against the host step: the GPU issue's check over halo strategies and ranks.

For each rank count and halo strategy, ``haloflow run cavity --backend cuda`` and the same
with ``--backend cpu`` (METIS's jagged cut, a few steps of a small cavity); the table gives
the largest difference of U and p over their largest values, and the device run's copies
per halo exchange.  ``--simulator`` runs the device in numba's CUDA simulator (no GPU
needed: this is how CI-sized machines check it); without it a GPU must be present.

    python benchmarks/device_check.py --simulator --ranks 2,3 -o /tmp/device_check.json
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
from _common import REPO, read_fields

STRATEGIES = ("aggregated", "packed", "perfield", "overlap", "neighbor")


def _run(mpiexec, ranks, backend, strategy, a, out: Path, simulate: bool) -> None:
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1" if simulate and backend == "cuda" else "0"}
    cmd = [mpiexec, "-n", str(ranks), sys.executable, "-m", "haloflow", "run", "cavity",
           "--backend", backend, "--steps", str(a.steps), "--quiet", "-o", str(out),
           "--set", f"mesh.cells=[{a.cells},{a.cells},1]",
           "--set", 'parallel.decomposition="metis"', "--set", f'parallel.halo="{strategy}"']
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO)
    if res.returncode != 0:
        raise RuntimeError((res.stderr.strip() or "?").splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", default="2,3")
    p.add_argument("--cells", type=int, default=16)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--simulator", action="store_true")
    p.add_argument("--mpiexec", default=str(Path(sys.executable).parent / "mpiexec"))
    p.add_argument("-o", "--output", type=Path, default=REPO / "benchmarks" / "results" /
                   "device_check.json")
    a = p.parse_args()
    rows = []
    print(f"cavity {a.cells}^2, {a.steps} steps, METIS; device "
          f"{'simulated' if a.simulator else 'a GPU'}")
    print(f"{'ranks':>5} {'strategy':<11} {'U':>9} {'p':>9} {'copies/exchange':>16}")
    with tempfile.TemporaryDirectory() as tmp:
        for ranks in (int(r) for r in a.ranks.split(",")):
            for strategy in STRATEGIES:
                out = {b: Path(tmp) / f"{ranks}-{strategy}-{b}" for b in ("cpu", "cuda")}
                row = {"ranks": ranks, "strategy": strategy}
                try:
                    for backend, folder in out.items():
                        _run(a.mpiexec, ranks, backend, strategy, a, folder, a.simulator)
                except RuntimeError as e:
                    row["error"] = str(e)
                    print(f"{ranks:>5} {strategy:<11} not run: {e}", flush=True)
                    rows.append(row)
                    continue
                host, dev = read_fields(out["cpu"]), read_fields(out["cuda"])
                for name in ("U", "p"):
                    row[name] = float(np.abs(host[name] - dev[name]).max()
                                      / np.abs(host[name]).max())
                step = json.loads((out["cuda"] / "profile.json").read_text())["device"]["step"]
                row["copies_per_exchange"] = step["halo_copies"] / max(step["halo_exchanges"], 1)
                rows.append(row)
                print(f"{ranks:>5} {strategy:<11} {row['U']:>9.1e} {row['p']:>9.1e} "
                      f"{row['copies_per_exchange']:>16.1f}", flush=True)
    a.output.parent.mkdir(parents=True, exist_ok=True)
    a.output.write_text(json.dumps({"cells": a.cells, "steps": a.steps,
                                    "simulator": a.simulator, "rows": rows}, indent=2))
    print(f"wrote {a.output}")


if __name__ == "__main__":
    main()
