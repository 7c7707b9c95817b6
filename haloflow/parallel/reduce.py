"""Counted global reductions: the only way physics, linear algebra and post-processing talk
to every rank at once (the halo exchangers in :mod:`.halo` are the only way they talk to
neighbours).

Why one class: every allreduce is a latency on the critical path of a parallel step, so the
profile counts them (``stats.calls``, also on one rank, where a run counts the ones it would
make in parallel) and times them (``stats.seconds``, inside MPI only).  Several scalars
reduced together cost one call: ``red.sum(a, b, c)``.  A serial run never calls MPI.

The solver, the AMG levels and the post-processors of one run share one :class:`ReduceStats`.
"""

from __future__ import annotations

from dataclasses import dataclass
from time import perf_counter

import numpy as np
from mpi4py import MPI

from . import emulation


@dataclass
class ReduceStats:
    """Allreduce counters, shared by every Reducer of a run (solver and AMG levels)."""

    calls: int = 0
    seconds: float = 0.0
    compiled: int = 0  # of the calls, those made from compiled code (the pressure solve's)


class Reducer:
    """Fused global sum/max/min of a few scalars with preallocated buffers, logical or,
    array sums and gathers, each counted as one collective in ``stats``."""

    def __init__(self, comm, stats: ReduceStats | None = None):
        self.comm = comm
        self.size = comm.size
        self.rank = comm.rank
        self.parallel = comm.size > 1
        self.stats = ReduceStats() if stats is None else stats
        self._bufs = {}  # n -> (send, receive) buffers, allocated once per size
        self._pending = {}  # n -> PendingSum, its buffers allocated once per size
        self._emu = emulation.on(comm)  # an emulated network's waits, or None

    @property
    def n_calls(self) -> int:
        return self.stats.calls

    def with_stats(self, stats: ReduceStats | None) -> Reducer:
        """A reducer on the same communicator that counts into ``stats`` (None: its own)."""
        return Reducer(self.comm, stats)

    def _scalars(self, vals, op) -> tuple:
        self.stats.calls += 1
        if not self.parallel:
            return tuple(vals)
        bufs = self._bufs.get(len(vals))
        if bufs is None:
            bufs = self._bufs[len(vals)] = (np.zeros(len(vals)), np.zeros(len(vals)))
        buf, out = bufs
        buf[:] = vals
        if self._emu is not None:
            self._emu.settle()
        t0 = perf_counter()
        self.comm.Allreduce(buf, out, op=op)
        if self._emu is not None:
            self._emu.reduce_wait(len(vals))
        self.stats.seconds += perf_counter() - t0
        return tuple(out)

    def sum(self, *vals: float) -> tuple:
        """Global sums of ``vals`` (floats), in one allreduce."""
        return self._scalars(vals, MPI.SUM)

    def max(self, *vals: float) -> tuple:
        return self._scalars(vals, MPI.MAX)

    def min(self, *vals: float) -> tuple:
        return self._scalars(vals, MPI.MIN)

    def any(self, flag: bool) -> bool:
        """True on every rank if ``flag`` is true on some rank."""
        return self.max(1.0 if flag else 0.0)[0] > 0.0

    def all(self, flag: bool) -> bool:
        """True on every rank if ``flag`` is true on all ranks."""
        return self.min(1.0 if flag else 0.0)[0] > 0.0

    def array(self, a: np.ndarray, op: str = "sum") -> np.ndarray:
        """Elementwise global ``op`` ("sum", "max" or "min") of a float64 array."""
        self.stats.calls += 1
        a = np.ascontiguousarray(a, dtype=np.float64)
        if not self.parallel:
            return a.copy()
        out = np.empty_like(a)
        if self._emu is not None:
            self._emu.settle()
        t0 = perf_counter()
        self.comm.Allreduce(a, out, op={"sum": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN}[op])
        if self._emu is not None:
            self._emu.reduce_wait(a.size)
        self.stats.seconds += perf_counter() - t0
        return out

    def allgather(self, obj) -> list:
        """``obj`` of every rank, in rank order, on every rank."""
        self.stats.calls += 1
        if not self.parallel:
            return [obj]
        if self._emu is not None:
            self._emu.settle()
        t0 = perf_counter()
        out = self.comm.allgather(obj)
        if self._emu is not None:
            self._emu.gather_wait(64 * self.size)  # a few pickled values per rank
        self.stats.seconds += perf_counter() - t0
        return out

    def gather(self, obj, root: int = 0) -> list | None:
        """``obj`` of every rank, in rank order, on ``root`` (None elsewhere): results that
        only rank 0 writes.  Not counted: it never sits inside a step's critical path."""
        if not self.parallel:
            return [obj]
        emulation.settle()
        out = self.comm.gather(obj, root=root)
        emulation.resume()
        return out

    def bcast(self, obj, root: int = 0):
        """``obj`` of ``root`` on every rank (a decision made once, on rank 0)."""
        if not self.parallel:
            return obj
        emulation.settle()
        out = self.comm.bcast(obj, root=root)
        emulation.resume()
        return out

    def start_sum(self, *vals: float) -> PendingSum:
        """Start a non-blocking global sum; ``.wait()`` returns the sums.  Work done between
        the two hides the reduction's latency (pipelined Krylov methods).  One sum of each
        length may be in flight at a time: its buffers are kept and reused."""
        self.stats.calls += 1
        pending = self._pending.get(len(vals))
        if pending is None:
            pending = self._pending[len(vals)] = PendingSum(len(vals), self.stats, self._emu)
        pending.start(self.comm if self.parallel else None, vals)
        return pending


class PendingSum:
    """A non-blocking allreduce of ``n`` sums with its own buffers; ``wait`` adds its waiting
    time to the stats."""

    __slots__ = ("_req", "_buf", "_out", "_stats", "_emu", "_t_start")

    def __init__(self, n: int, stats, emu=None):
        self._req, self._stats, self._emu, self._t_start = None, stats, emu, 0.0
        self._buf, self._out = np.zeros(n), np.zeros(n)

    def start(self, comm, vals) -> None:
        """On ``comm`` (None: this rank alone, the sums are the values)."""
        if self._req is not None:
            raise RuntimeError("a non-blocking sum of this length is still in flight")
        self._buf[:] = vals
        if comm is None:
            self._out[:] = self._buf
        else:
            if self._emu is not None:
                self._emu.settle()
            self._req = comm.Iallreduce(self._buf, self._out, op=MPI.SUM)
            if self._emu is not None:
                self._emu.resume()
                self._t_start = perf_counter()

    def wait(self) -> tuple:
        if self._req is not None:
            if self._emu is not None:
                self._emu.settle()
            t0 = perf_counter()
            self._req.Wait()
            if self._emu is not None:  # the network's time, less what the work hid
                self._emu.reduce_wait_after(len(self._buf), self._t_start)
            self._stats.seconds += perf_counter() - t0
            self._req = None
        return tuple(self._out)


def self_reducer(stats: ReduceStats | None = None) -> Reducer:
    """A reducer over this rank alone (serial set-up, tests, gathered coarse levels)."""
    return Reducer(MPI.COMM_SELF, stats)
