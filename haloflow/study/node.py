"""The target node's computation: how fast its cores are, and how much memory bandwidth the
ranks on one node share.

Why: a profile's compute seconds were measured on the calibration machine.  On another
machine they scale two ways.  The arithmetic part scales with the core's speed (``cpu_speed``,
the target's per-core speed relative to the calibration machine: 0.5 halves it).  The part
spent streaming memory scales with the bandwidth one rank gets, and the ranks of a node share
its memory channels: two ranks on one node can each run slower per cell than one alone, as
the seeds' tables show for memory-bound CFD.  The model splits a step's computation into

    compute = cpu / cpu_speed + bytes / rank_bandwidth
    cpu     = measured compute - bytes / calib_bandwidth   (never below zero)

with ``bytes`` the memory traffic of the step (``bytes_per_cell`` x cells, or, when not
given, all of the measured compute spent at the calibration core's bandwidth: the
memory-bound bound) and ``rank_bandwidth = min(node_bandwidth / (ranks x threads on the
node), calib_bandwidth x cpu_speed)``: a node's bandwidth split between its busy cores, and
no core streaming faster than the calibration core scaled by its speed.  How to find these
numbers: docs/model.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

TRIAD_N = 1 << 24  # three 128 MiB arrays: beyond the cache (32 MiB arrays still hit a VM host's)


@dataclass
class Node:
    """The target node, against the calibration machine."""

    cpu_speed: float = 1.0  # per-core compute speed, target / calibration machine
    node_bandwidth: float | None = None  # bytes/s of one target node (None: not limiting)
    calib_bandwidth: float | None = None  # bytes/s one core of the calibration machine streams
    bytes_per_cell: float | None = None  # memory traffic per cell per step (None: bound)

    def compute_s(self, seconds: float, cells: float, busy_cores: int) -> float:
        """Seconds of a computation measured as ``seconds`` on the calibration machine, over
        ``cells`` cells, on a target core whose node has ``busy_cores`` cores working."""
        if self.node_bandwidth is None or self.calib_bandwidth is None:
            return seconds / self.cpu_speed
        moved = (self.bytes_per_cell * cells if self.bytes_per_cell is not None
                 else seconds * self.calib_bandwidth)
        memory = moved / self.calib_bandwidth
        cpu = max(seconds - memory, 0.0)
        rank_bw = min(self.node_bandwidth / max(busy_cores, 1),
                      self.calib_bandwidth * self.cpu_speed)
        return cpu / self.cpu_speed + moved / rank_bw


def triad_bandwidth(repeat: int = 5) -> float:
    """Bytes/s one core streams here: the best of ``repeat`` STREAM triads ``a = b + s c``
    over arrays larger than the cache, counting 24 bytes per element as STREAM does."""
    from time import perf_counter

    from .kernels_triad import triad

    b = np.ones(TRIAD_N)
    c = np.full(TRIAD_N, 2.0)
    a = np.empty(TRIAD_N)
    triad(a, b, c, 3.0)  # compile (or load) and touch the pages
    best = np.inf
    for _ in range(repeat):
        t0 = perf_counter()
        triad(a, b, c, 3.0)
        best = min(best, perf_counter() - t0)
    return 24.0 * TRIAD_N / best
