"""Dynamic load balancing against a slow rank: issue 21's acceptance case.

The 2D cavity 192² on 2 ranks, rank 1 on an emulated half-speed core
(``parallel.emulate_speed = {1 = 0.5}``: at every communication point it waits as long
again as it computed since the last), 60 steps, with ``parallel.balance`` "off" and "time"
alternating (``--repeat`` pairs, each run started once the cores are idle or
``--quiet-wait`` has passed).  The table gives the median s/step after the first step, its
ratio (target <= 0.78; ideal 0.67), the rebalances, and each migration's cost in steps
(its seconds over that run's s/step).

    python benchmarks/balance.py --repeat 3
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


def one_run(balance: str, a, work: Path) -> dict:
    out = Path(tempfile.mkdtemp(dir=work)) / "run"
    load = wait_quiet(a.quiet_below, a.quiet_wait)
    subprocess.run([str(BIN / "mpiexec"), "-n", "2", str(BIN / "haloflow"), "run", "cavity",
                    "-o", str(out), "--quiet", "--steps", str(a.steps),
                    "--set", f"mesh.cells=[{a.cells},{a.cells},1]",
                    "--set", f"parallel.emulate_speed={{1={a.speed}}}",
                    "--set", f"parallel.balance={balance}", "--set", "output.plots=false",
                    "--set", "output.fields=false"],
                   check=True, env={**os.environ, "NUMBA_NUM_THREADS": "1"})
    s = json.loads((out / "summary.json").read_text())
    step_s = (s["loop_s"] - s["first_step_s"]) / max(s["steps"] - 1, 1)
    bal = s.get("balance") or {"rebalances": 0, "events": []}
    shutil.rmtree(out.parent)
    return {"s_per_step": step_s, "rebalances": bal["rebalances"],
            "migration_s": [e["migration_s"] for e in bal["events"]],
            "migration_steps": [e["migration_s"] / step_s for e in bal["events"]],
            "cells_moved": [e.get("cells_moved") for e in bal["events"]],
            "first_cost_s": bal.get("first_cost_s"), "checks": bal.get("checks", []),
            "cells_after": bal["events"][-1]["cells_after"] if bal["events"] else None,
            "busy_before": load}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", type=int, default=192)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--speed", type=float, default=0.5)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quiet-below", type=float, default=0.15)
    ap.add_argument("--quiet-wait", type=float, default=120.0)
    ap.add_argument("--out", type=Path, default=RESULTS / "balance.json")
    a = ap.parse_args()
    runs = {"off": [], "time": []}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(a.repeat):
            for b in runs:
                runs[b].append(one_run(b, a, Path(tmp)))
    off = statistics.median(r["s_per_step"] for r in runs["off"])
    on = statistics.median(r["s_per_step"] for r in runs["time"])
    mig = [m for r in runs["time"] for m in r["migration_steps"]]
    row = {"s_per_step_off": off, "s_per_step_time": on, "ratio": on / off,
           "rebalances": [r["rebalances"] for r in runs["time"]],
           "migration_in_steps": max(mig) if mig else None,
           "cells_after": [r["cells_after"] for r in runs["time"]]}
    print(f"cavity {a.cells}², 2 ranks, rank 1 at speed {a.speed}, {a.steps} steps "
          f"(medians of {a.repeat})")
    for b, rs in runs.items():
        for r in rs:
            busy = "?" if r["busy_before"] is None else f"{r['busy_before']:.2f}"
            print(f"  {b:4s} run: {r['s_per_step']:.4f} s/step, rebalances {r['rebalances']}, "
                  f"migration {[round(m, 1) for m in r['migration_steps']]} steps, cores busy "
                  f"before {busy}")
    print(f"  balance off : {off:.4f} s/step")
    print(f"  balance time: {on:.4f} s/step  ratio {on / off:.2f}  rebalances "
          f"{row['rebalances']}  migration <= {row['migration_in_steps'] or 0:.1f} steps  "
          f"cells {row['cells_after']}")
    a.out.parent.mkdir(exist_ok=True)
    a.out.write_text(json.dumps({"args": {k: str(v) for k, v in vars(a).items()},
                                 "result": row, "runs": runs}, indent=2))
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
