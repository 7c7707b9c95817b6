"""Peak RSS of haloflow runs on the race's 3D cavity, by both definitions of bytes per cell.

Runs ``haloflow run`` with ``benchmarks/race.py``'s settings (its ``haloflow_sets``) under
GNU time, one file per rank (race.py's ``rank_wrapper``), and prints one JSON line per run:
summary.json's ``base_rss_mb``, ``peak_rss_mb`` and ``rss_bytes_per_cell`` (peak less the RSS
before the mesh is built, over one rank's owned cells, the worst rank) beside every rank's
peak from GNU time and their sum per cell.  race.py's "above the base" figure is that sum less
ranks x the peak of a 2^3 run (``2x1``), over the cells.  The peak is reached in the first
step (the AMG and the compiled K-cycle are built there), so a few steps suffice.

    PYTHONPATH=. .venv/bin/python benchmarks/memory_peaks.py 2x1 32x1 32x2 64x1 64x2 [--steps 5]

``--fields`` runs each twice, writing no field files and writing them at the end, and adds
the ratio of the two peaks (the field writer's cost).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import race  # the race's own settings and GNU time wrapper


def one(n: int, ranks: int, steps: int, fields: bool = False) -> dict:
    out = Path(tempfile.mkdtemp())
    cmd = [str(race.BIN / "mpiexec"), "-n", str(ranks), *race.rank_wrapper(out / "rank"),
           str(race.BIN / "haloflow"), "run", "cavity", "-o", str(out / "run"), "--quiet",
           "--force", "--steps", str(steps), *race.haloflow_sets(n, steps, False, fields)]
    try:
        subprocess.run(cmd, check=True, env={**os.environ, "NUMBA_NUM_THREADS": "1"})
        s = json.loads((out / "run" / "summary.json").read_text())
        kb = sorted(int(f.read_text().split()[-1]) for f in out.glob("rank.rss.*"))
    finally:
        shutil.rmtree(out)
    return {"n": n, "ranks": ranks, "fields": fields, "summary_base_mb": round(s["base_rss_mb"], 1),
            "summary_peak_mb": round(s["peak_rss_mb"], 1),
            "summary_bytes_per_cell": round(s["rss_bytes_per_cell"]),
            "rank_peak_mb": [round(k / 1024, 1) for k in kb],
            "total_bytes_per_cell": round(sum(kb) * 1024 / n**3) if kb else None,
            "s_per_step": (s["loop_s"] - s["first_step_s"]) / max(s["steps"] - 1, 1)}


def fail(msg: str) -> None:
    print(msg, file=sys.stderr)
    sys.exit(2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", metavar="NxR", help="cells per side x ranks, e.g. 64x2")
    ap.add_argument("--steps", type=int, default=5, help="steps per run (default 5)")
    ap.add_argument("--fields", action="store_true",
                    help="each run also with field output, and the ratio of the peaks")
    a = ap.parse_args()
    if not Path(race.GNU_TIME).is_file():
        fail(f"no {race.GNU_TIME} (apt-get install time): peak RSS per rank not measured")
    for spec in a.runs:
        try:
            n, ranks = (int(x) for x in spec.split("x"))
        except ValueError:
            fail(f"{spec}: expected NxR, e.g. 64x2")
        without = one(n, ranks, a.steps)
        print(json.dumps(without), flush=True)
        if a.fields:
            with_fields = one(n, ranks, a.steps, fields=True)
            worst = max(with_fields["rank_peak_mb"]) / max(without["rank_peak_mb"])
            print(json.dumps(with_fields | {"peak_over_no_fields": round(worst, 3)}), flush=True)


if __name__ == "__main__":
    main()
