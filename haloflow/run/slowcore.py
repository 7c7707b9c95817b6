"""A rank on a slower (or shared) core, emulated on one machine: ``[parallel] emulate_speed``.

A companion process stops the rank (SIGSTOP) for ``1 - speed`` of every 10 ms and lets it
go on (SIGCONT) for the rest, as a CPU quota would: the rank gets ``speed`` of the wall
clock for everything it does (its kernels, its Python, its waits), however it waits.  Sharing
a core with a busy process instead does not give a fixed share here: a rank waiting for a
message yields its core (MPICH's progress loop), and the busy process then takes far more
than half.  The rank's own timers see the stopped time, as they would a slower core's.  The
companion lets the rank go on when told to end, and ends by itself when the rank is gone.
"""

from __future__ import annotations

import os
import subprocess
import sys

PERIOD = 0.01  # seconds: far below a step, far above the scheduler's tick

# the companion: pid, speed, period; SIGTERM: let the rank go on, then end
_COMPANION = """
import os, signal, sys, time
pid, speed, period = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
def end(*_):
    os.kill(pid, signal.SIGCONT)
    sys.exit(0)
signal.signal(signal.SIGTERM, end)
try:
    while os.getppid() == pid:
        time.sleep(speed * period)
        os.kill(pid, signal.SIGSTOP)
        time.sleep((1.0 - speed) * period)
        os.kill(pid, signal.SIGCONT)
except ProcessLookupError:
    pass
"""


class SlowCore:
    """This process at ``speed`` (0 < speed <= 1) of the wall clock while the object lives."""

    def __init__(self, speed: float):
        self.proc = None
        if speed >= 1.0:
            return
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _COMPANION, str(os.getpid()), repr(float(speed)),
             repr(PERIOD)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)

    def close(self) -> None:
        if self.proc is not None:
            self.proc.terminate()  # it lets this process go on first
            self.proc.wait()
            self.proc = None
