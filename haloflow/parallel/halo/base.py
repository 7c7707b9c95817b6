"""The one interface every halo-exchange strategy implements (DESIGN.md section 4)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from time import perf_counter

import numpy as np


@dataclass
class HaloStats:
    """Counters kept by every exchanger; cheap enough to leave on in production runs."""

    calls: int = 0
    messages: int = 0  # messages sent
    bytes: int = 0  # bytes sent
    pack_s: float = 0.0
    wait_s: float = 0.0
    unpack_s: float = 0.0

    def as_dict(self) -> dict:
        return asdict(self)


class Exchanger:
    """Fills the ghost cells of cell fields with their owners' values.

    ``exchange(fields)`` is blocking; ``h = start(fields)`` ... ``finish(h)`` lets the caller
    compute on owned cells while messages are in flight.  Fields are float64 arrays of length
    ``lmesh.n_cells`` (owned + ghost).
    """

    name = "base"

    def __init__(self, lmesh, comm):
        self.lmesh = lmesh
        self.comm = comm
        self.stats = HaloStats()
        self.neighbours = [int(q) for q in lmesh.neighbours]
        self.send_counts = np.diff(lmesh.send_ptr)
        self.recv_counts = np.diff(lmesh.recv_ptr)

    def exchange(self, fields) -> None:
        self.finish(self.start(fields))

    def start(self, fields):
        raise NotImplementedError

    def finish(self, handle) -> None:
        raise NotImplementedError

    @staticmethod
    def _clock() -> float:
        return perf_counter()
