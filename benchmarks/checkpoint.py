"""What a checkpoint costs against a time step: the 3D lid-driven cavity of the race
(benchmarks/race.py: 64³, Re 400, lid Courant number 0.5, PISO with 2 correctors).

For each rank count, runs without and with checkpoints alternate (``--repeat`` pairs); the
table gives the median seconds per step of the plain runs, the median seconds per
checkpoint (summary.json ``checkpoint_s``: gathering to global order, MPI-IO writing,
fsync and rename), their ratio (issue 16's target: at most 1), the file size and the
write rate.  Every run waits for idle cores first and records how busy they were.

    python benchmarks/checkpoint.py --cells 64 --ranks 1,2 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path

from _common import BIN, RESULTS, wait_quiet
from race import haloflow_sets


def one_run(n: int, ranks: int, steps: int, every: int, work: Path, quiet: tuple) -> dict:
    out = Path(tempfile.mkdtemp(dir=work)) / "run"
    sets = haloflow_sets(n, steps, tight=False, fields=False)
    if every:
        sets += ["--set", f"output.checkpoint_every={every}", "--set",
                 "output.checkpoint_keep=1"]
    load = wait_quiet(*quiet)
    subprocess.run([str(BIN / "mpiexec"), "-n", str(ranks), str(BIN / "haloflow"), "run",
                    "cavity", "-o", str(out), "--quiet", "--steps", str(steps), *sets],
                   check=True, env={**os.environ, "NUMBA_NUM_THREADS": "1"})
    s = json.loads((out / "summary.json").read_text())
    res = {"s_per_step": (s["loop_s"] - s["first_step_s"]) / max(s["steps"] - 1, 1),
           "busy_before": load}
    if every:
        files = sorted((out / "checkpoint").glob("*.ckpt"))
        res |= {"checkpoint_s": s["checkpoint_s"], "checkpoints": s["checkpoints_written"],
                "file_mb": files[-1].stat().st_size / 1e6}
    shutil.rmtree(out.parent)
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", type=int, default=64, help="cells per side of the cube")
    ap.add_argument("--ranks", default="1,2")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--every", type=int, default=2, help="steps between checkpoints")
    ap.add_argument("--quiet-below", type=float, default=0.15)
    ap.add_argument("--quiet-wait", type=float, default=120.0)
    ap.add_argument("--out", type=Path, default=RESULTS / "checkpoint.json")
    a = ap.parse_args()
    quiet = (a.quiet_below, a.quiet_wait)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for ranks in [int(r) for r in a.ranks.split(",")]:
            plain, saved = [], []
            for _ in range(a.repeat):
                plain.append(one_run(a.cells, ranks, a.steps, 0, Path(tmp), quiet))
                saved.append(one_run(a.cells, ranks, a.steps, a.every, Path(tmp), quiet))
            step_s = statistics.median(r["s_per_step"] for r in plain)
            ck_s = statistics.median(r["checkpoint_s"] for r in saved)
            mb = saved[-1]["file_mb"]
            rows.append({"cells": a.cells ** 3, "ranks": ranks, "s_per_step": step_s,
                         "checkpoint_s": ck_s, "ratio": ck_s / step_s, "file_mb": mb,
                         "write_mb_s": mb / ck_s, "plain": plain, "with_checkpoints": saved})
    print(f"{'cube':>6} {'ranks':>5} {'s/step':>9} {'s/checkpoint':>13} {'ratio':>6} "
          f"{'MB':>7} {'MB/s':>7}")
    for r in rows:
        print(f"{a.cells:>5}³ {r['ranks']:>5} {r['s_per_step']:9.4f} {r['checkpoint_s']:13.4f} "
              f"{r['ratio']:6.2f} {r['file_mb']:7.1f} {r['write_mb_s']:7.0f}")
    a.out.parent.mkdir(exist_ok=True)
    a.out.write_text(json.dumps({"args": vars(a) | {"out": str(a.out)}, "rows": rows},
                                indent=2))
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
