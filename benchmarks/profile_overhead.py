"""What profiling costs a run: timed events per step x the measured cost of one event.

Every run times its phases (two ``perf_counter`` calls per timed block), its allreduces (two
more per call) and its halo exchanges (four clock reads each, in compiled code for the
default ``aggregated`` strategy).  A run's profile.json counts all of these per step; this
script measures what one event of each kind costs on this machine, in a tight loop, and
reports the sum as a share of the measured time per step.  That resolves well below the
1-2 % that comparing timed and untimed runs could on a shared 2-core machine.

    .venv/bin/python benchmarks/profile_overhead.py [--cells 128,256] [--ranks 1,2]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from time import perf_counter

import numba as nb
import numpy as np
from _common import REPO
from model_check import run as cavity_run

from haloflow.parallel import mpicall
from haloflow.parallel.halo import aggregated
from haloflow.parallel.timers import Timers


def best_of(fn, repeat=20000, trials=5) -> float:
    best = float("inf")
    for _ in range(trials):
        t0 = perf_counter()
        fn(repeat)
        best = min(best, (perf_counter() - t0) / repeat)
    return best


def phase_cost() -> float:
    """One ``with timers(name):`` block, empty, minus the bare loop."""
    timers = Timers()

    def timed(n):
        for _ in range(n):
            with timers("x"):
                pass

    def bare(n):
        for _ in range(n):
            pass

    return best_of(timed) - best_of(bare)


def perf_counter_pair() -> float:
    """What the Reducer adds per allreduce: two perf_counter calls and an add."""
    acc = [0.0]

    def timed(n):
        for _ in range(n):
            t0 = perf_counter()
            acc[0] += perf_counter() - t0

    def bare(n):
        for _ in range(n):
            acc[0] += 0.0

    return best_of(timed) - best_of(bare)


@nb.njit(cache=False)
def _clock_loop(ctl, n):
    s = 0
    for _ in range(n):
        s += aggregated._now(ctl)
    return s


def compiled_clock() -> float:
    """One clock read inside the compiled exchange (four per exchange)."""
    addr = mpicall.addresses()
    if addr is None:
        return perf_counter_pair() / 2
    ctl = np.zeros(aggregated.N_CTL, dtype=np.int64)
    ctl[aggregated.CLOCK], ctl[aggregated.CLOCK_ID] = addr["clock"], mpicall.CLOCK_MONOTONIC
    ctl[aggregated.TS_ADDR] = ctl.ctypes.data + 8 * aggregated.TS
    _clock_loop(ctl, 10)
    return best_of(lambda n: _clock_loop(ctl, n), repeat=200000)


def run(cells: int, ranks: int, steps: int, workdir: Path) -> dict:
    """One cavity run's profile.json (the same runs as model_check.py)."""
    return cavity_run(cells, ranks, steps, Path(tempfile.mkdtemp(dir=workdir)) / "run")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cells", default="128,256")
    ap.add_argument("--ranks", default="1,2")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("-o", default=str(REPO / "benchmarks/results/profile_overhead.json"))
    a = ap.parse_args()
    cost = {"phase_s": phase_cost(), "allreduce_timing_s": perf_counter_pair(),
            "exchange_clocks_s": 4 * compiled_clock()}
    print("cost per event: " + ", ".join(f"{k} {v * 1e9:.0f} ns" for k, v in cost.items()))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(x) for x in a.cells.split(",")):
            for p in (int(x) for x in a.ranks.split(",")):
                prof = run(n, p, a.steps, Path(tmp))
                steps = prof["steps"]
                phases = sum(max(v["calls"]) for v in prof["phases"].values()) / steps
                per = prof["per_step"]
                ev = {"phase_s": phases, "allreduce_timing_s": per["allreduces"],
                      "exchange_clocks_s": per["halo_exchanges"]}
                over = sum(ev[k] * cost[k] for k in cost)
                row = {"cells": n * n, "ranks": p, "s_per_step": prof["s_per_step"],
                       "events_per_step": ev, "overhead_s_per_step": over,
                       "overhead_percent": 100 * over / prof["s_per_step"]}
                rows.append(row)
                print(f"{n}x{n} on {p} rank(s): {prof['s_per_step'] * 1e3:8.2f} ms/step, "
                      f"{phases:6.0f} timed blocks, {per['allreduces']:6.0f} allreduces, "
                      f"{per['halo_exchanges']:6.0f} exchanges per step -> profiling "
                      f"{over * 1e6:7.1f} us/step = {row['overhead_percent']:.3f} %")
    Path(a.o).write_text(json.dumps({"cost_per_event_s": cost, "runs": rows}, indent=1))
    print(f"wrote {a.o}")


if __name__ == "__main__":
    main()
