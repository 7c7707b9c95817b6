"""Two source trees of haloflow, side by side: seconds per step on the same cases, interleaved.

Measures "before and after" of a change as ratios taken in one run: both trees run the same
command in turn (A B A B ...), each with its own numba cache (warmed first), and the figure
kept is the median of ``--repeat`` runs of summary.json's ``s_per_step`` after the first step
(loop seconds less the first step's set-up of the AMG and kernels).  The machine's load
average is recorded before each pair, so a noisy run shows.

    .venv/bin/python benchmarks/revisions.py --before ../base          # this tree vs ../base
    .venv/bin/python benchmarks/revisions.py --before ../base --cases "race 64^3" --ranks 2
    git worktree add ../base <commit>  # a tree of the revision to compare against

Cases: the 2D cavity at 128^2 (Re 100, lid Courant 12.8, the default case) and the 3D cavity
at 32^3 with all six faces walls (lid Courant 0.5), both 40 steps from rest on 1 rank, no
field output; on request ``pitzdaily`` (the shipped steady case, 40 SIMPLE iterations).
Printed as a table, written as JSON (default benchmarks/results/revisions.json).
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

from _common import BIN, REPO

QUIET = ["--quiet", "--force", "--set", "output.fields=false", "--set", "output.plots=false"]
NO_CAVITY_POST = ["--set", "postprocess.cavity=false"]
CASES = {  # name: (built-in case, its settings)
    "cavity 128^2": ("cavity", [*NO_CAVITY_POST, "--set", "mesh.cells=[128,128,1]"]),
    "cavity3d 32^3": ("cavity", [*NO_CAVITY_POST, "--set", "mesh.cells=[32,32,32]", "--set",
                                 "boundary.front.type=wall", "--set", "boundary.back.type=wall",
                                 "--set", f"solver.dt={0.5 / 32!r}"]),
    "pitzdaily": ("pitzdaily", []),  # as shipped: SIMPLE iterations, the pressure AMG
}


RACE = "race 64^3"


def race_args(steps: int) -> list[str]:
    """The 64^3 cavity as benchmarks/race.py runs haloflow (lid Courant 0.5, its tolerances)."""
    from race import haloflow_sets

    return haloflow_sets(64, steps, False, False)


def env_for(tree: Path) -> dict:
    return {**os.environ, "PYTHONPATH": str(tree), "NUMBA_NUM_THREADS": "1",
            "NUMBA_CACHE_DIR": str(tree / ".numba_cache")}


def run_once(tree: Path, ranks: int, case: str, args: list[str], steps: int,
             work: Path) -> float:
    """s/step of the steps after the first."""
    out = Path(tempfile.mkdtemp(dir=work)) / "run"
    cmd = [str(BIN / "mpiexec"), "-n", str(ranks), sys.executable, "-m", "haloflow", "run",
           case, "-o", str(out), "--steps", str(steps), *QUIET, *args]
    subprocess.run(cmd, check=True, env=env_for(tree), cwd=tree, stdout=subprocess.DEVNULL)
    s = json.loads((out / "summary.json").read_text())
    return (s["loop_s"] - s["first_step_s"]) / max(s["steps"] - 1, 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", type=Path, required=True, help="source tree to compare against")
    ap.add_argument("--after", type=Path, default=REPO, help="source tree measured (this one)")
    ap.add_argument("--ranks", type=int, default=1)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--cases", default=",".join(CASES), metavar="NAME[,NAME]",
                    help=f"cases to run: {', '.join(CASES)}, or {RACE!r} (benchmarks/race.py's "
                    "64^3 cavity at its tolerances)")
    ap.add_argument("-o", "--output", type=Path,
                    default=REPO / "benchmarks" / "results" / "revisions.json")
    a = ap.parse_args()
    trees = {"before": a.before.resolve(), "after": a.after.resolve()}
    for tree in trees.values():
        if not (tree / "haloflow" / "__init__.py").exists():
            sys.exit(f"revisions.py: error: {tree} is not a haloflow source tree")
        subprocess.run([sys.executable, "-m", "haloflow.warmup"], check=True, cwd=tree,
                       env=env_for(tree), stdout=subprocess.DEVNULL)
    rows = []
    print(f"{'case':>14} {'before s/step':>14} {'after s/step':>13} {'after/before':>13} "
          f"{'load':>5}")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for name in [c.strip() for c in a.cases.split(",") if c.strip()]:
            case, args = ("cavity", race_args(a.steps)) if name == RACE else CASES.get(
                name, (None, None))
            if args is None:
                sys.exit(f"revisions.py: error: --cases: unknown case {name!r}")
            times: dict[str, list[float]] = {"before": [], "after": []}
            ratios, loads = [], []
            for _ in range(a.repeat):
                loads.append(os.getloadavg()[0])
                pair = {k: run_once(t, a.ranks, case, args, a.steps, work)
                        for k, t in trees.items()}
                for k, v in pair.items():
                    times[k].append(v)
                ratios.append(pair["after"] / pair["before"])
            row = {"case": name, "ranks": a.ranks, "steps": a.steps,
                   "before_s_per_step": statistics.median(times["before"]),
                   "after_s_per_step": statistics.median(times["after"]),
                   "ratio_median": statistics.median(ratios), "ratios": ratios,
                   "all": times, "load_avg": loads}
            rows.append(row)
            print(f"{name:>14} {row['before_s_per_step']:>14.4f} {row['after_s_per_step']:>13.4f} "
                  f"{row['ratio_median']:>13.3f} {max(loads):>5.2f}", flush=True)
    a.output.parent.mkdir(parents=True, exist_ok=True)
    a.output.write_text(json.dumps({"machine": platform.node(), "cpu": platform.processor(),
                                    "cores": os.cpu_count(), "before": str(trees["before"]),
                                    "after": str(trees["after"]), "rows": rows}, indent=2))
    print(f"wrote {a.output}")


if __name__ == "__main__":
    main()
