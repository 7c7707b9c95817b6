"""A rank on a slower (or shared) core, emulated on one machine: ``[parallel] emulate_speed``.

The rank is pinned to one core and busy processes are pinned beside it, so the kernel's
scheduler gives the rank only its share of that core, for everything it does: its kernels,
its Python, its waits (as on a node shared with another job).  ``k`` always-busy companions
leave the rank ``1/(k+1)`` of the core; a speed ``s`` between ``1/(k+2)`` and ``1/(k+1)``
adds one companion busy a fraction ``d`` of every 10 ms, with ``s = d/(k+2) + (1-d)/(k+1)``
(fair sharing while it runs).  Companions end with the run, and on their own if the rank
dies.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys

# a companion: pin, then spin (busy `duty` of every 10 ms) until the parent is gone
_COMPANION = """
import os, sys, time
core, duty, parent = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
os.sched_setaffinity(0, {core})
while os.getppid() == parent:
    end = time.perf_counter() + 0.01 * duty
    while time.perf_counter() < end:
        pass
    if duty < 1.0:
        time.sleep(0.01 * (1.0 - duty))
"""


class SlowCore:
    """This process at ``speed`` (0 < speed <= 1) of a core while the object lives."""

    def __init__(self, speed: float, rank: int):
        self.procs = []
        if speed >= 1.0:
            return
        allowed = sorted(os.sched_getaffinity(0))
        self.core = allowed[rank % len(allowed)]
        os.sched_setaffinity(0, {self.core})
        full = math.floor(1.0 / speed - 1.0 + 1e-9)
        a, b = 1.0 / (full + 1), 1.0 / (full + 2)
        duty = (a - speed) / (a - b)  # of one more companion (see the module docstring)
        duties = [1.0] * full + ([duty] if duty > 0.01 else [])
        for duty in duties:
            self.procs.append(subprocess.Popen(
                [sys.executable, "-c", _COMPANION, str(self.core), repr(duty), str(os.getpid())],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))

    def close(self) -> None:
        for p in self.procs:
            p.kill()
        for p in self.procs:
            p.wait()
        self.procs = []
