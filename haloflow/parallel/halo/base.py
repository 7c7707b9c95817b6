"""The one interface every halo-exchange strategy implements (docs/design.md, section 5).

An exchanger needs only five attributes of the mesh object it is given: ``n_owned``,
``neighbours``, ``send_ptr``, ``send_cells`` and ``recv_ptr`` (see ``parallel/local.py``), so
the AMG coarse levels can build exchangers from a small object holding just those.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from time import perf_counter

import numpy as np

from .. import emulation
from . import staging as _staging

IDX = np.uint32  # unsigned cell indices: no negative-index checks in the pack loops


@dataclass
class HaloStats:
    """Counters kept by every exchanger; cheap enough to leave on in production runs.

    ``copies``/``copy_bytes``/``copy_s`` count host<->device staging copies (zero with host
    staging); their seconds are part of ``pack_s`` and ``unpack_s``.
    """

    calls: int = 0
    fields: int = 0  # field exchanges: calls x fields per call (what ghosts cost per step)
    messages: int = 0  # messages sent
    bytes: int = 0  # bytes sent
    pack_s: float = 0.0
    wait_s: float = 0.0
    unpack_s: float = 0.0
    compiled: int = 0  # calls made from compiled code (no Python call around them)
    copies: int = 0
    copy_bytes: int = 0
    copy_s: float = 0.0

    def sent(self, fields: int, messages: int, nbytes: int) -> None:
        """Count one exchange of ``fields`` fields in ``messages`` messages."""
        self.calls += 1
        self.fields += fields
        self.messages += messages
        self.bytes += nbytes

    def as_dict(self) -> dict:
        return asdict(self)


class Exchanger:
    """Fills the ghost cells of cell fields with their owners' values.

    ``exchange(fields)`` is blocking; ``h = start(fields)`` ... ``finish(h)`` lets the caller
    compute on owned cells while messages are in flight, provided it neither writes the
    fields nor reads their ghosts in between.  Fields are 1-D contiguous float64 arrays of
    length ``n_owned + n_ghost``, living in ``self.space`` (host memory, or the device
    memory of ``staging="device"`` and ``"device-aware"``: see :mod:`.staging`).
    ``overlaps`` tells callers whether they should put interior work between ``start`` and
    ``finish``: only the ``overlap`` strategy says yes.
    """

    name = "base"
    overlaps = False
    buffers_class = None  # per-field-count buffers of a strategy: ``buffers_class(self, m)``

    def __init__(self, lmesh, comm, staging="host", backend=None):
        self.comm = comm
        self._stats = HaloStats()
        self.space = _staging.make(staging, self._stats, backend)
        self.n_owned = int(lmesh.n_owned)
        self.neighbours = [int(q) for q in lmesh.neighbours]
        self.send_ptr = np.asarray(lmesh.send_ptr, dtype=np.int64)
        self.recv_ptr = np.asarray(lmesh.recv_ptr, dtype=np.int64)
        self.send_cells = np.asarray(lmesh.send_cells).astype(IDX)
        self._check()
        self.send_counts = np.diff(self.send_ptr)
        self.recv_counts = np.diff(self.recv_ptr)
        self.n_send = int(self.send_ptr[-1])  # S2: boundary values sent per field
        self.n_recv = int(self.recv_ptr[-1])  # ghosts filled per field
        self._bufs: dict = {}
        self._emu = emulation.on(comm)  # an emulated network's waits (None: a real one)
        self._emu_delay: dict = {}

    def _emulate(self, m: int) -> None:
        """Wait as long as the emulated network adds to an exchange of ``m`` fields."""
        d = self._emu_delay.get(m)
        if d is None:
            d = self._emu_delay[m] = self._emu.exchange_delay(self.neighbours,
                                                               8 * m * self.send_counts)
        self._emu.wait(d, len(self.neighbours))

    def _buffers(self, m: int):
        """The strategy's buffers for ``m`` fields, created on first use and then reused."""
        b = self._bufs.get(m)
        if b is None:
            b = self._bufs[m] = self.buffers_class(self, m)
        return b

    def _pack_contiguous(self, fields, b) -> None:
        """Every neighbour's outgoing values into ``b.send`` (through ``b.dsend`` and one
        device->host copy when staged; on the device, finished before MPI reads it)."""
        sp = self.space
        if sp.staged:
            sp.pack(fields, self.send_cells, self.send_ptr, b.dsend)
            if self.neighbours:
                sp.copy(b.send, b.dsend)
        else:  # host memory, or device memory MPI reads once the pack is done
            sp.pack(fields, self.send_cells, self.send_ptr, b.send)
            sp.ready()

    def _wait_unpack(self, fields, b, wait) -> None:
        """Complete a contiguous exchange: ``wait()`` for its messages (and what an emulated
        network adds), then unpack ``b.recv`` into the ghosts, each timed."""
        st = self._stats
        if self._emu is not None:
            self._emu.settle()
        t0 = self._clock()
        wait()
        if self._emu is not None:
            self._emulate(len(fields))
        t1 = self._clock()
        self._unpack_contiguous(fields, b)
        st.wait_s += t1 - t0
        st.unpack_s += self._clock() - t1

    def _unpack_contiguous(self, fields, b) -> None:
        """``b.recv`` into the ghost cells (through one host->device copy when staged)."""
        sp = self.space
        if sp.staged:
            if self.neighbours:
                sp.copy(b.drecv, b.recv)
            sp.unpack(b.drecv, self.recv_ptr, self.n_owned, fields)
        else:
            sp.unpack(b.recv, self.recv_ptr, self.n_owned, fields)

    def _check(self) -> None:
        n = len(self.neighbours)
        if len(self.send_ptr) != n + 1 or len(self.recv_ptr) != n + 1:
            raise ValueError(f"send_ptr/recv_ptr need {n + 1} entries for {n} neighbours, got "
                             f"{len(self.send_ptr)}/{len(self.recv_ptr)}")
        if len(self.send_cells) and int(self.send_cells.max()) >= self.n_owned:
            raise ValueError("send_cells holds a cell that is not owned")

    @property
    def stats(self) -> HaloStats:
        self._sync()
        return self._stats

    def _sync(self) -> None:
        """Fold counters kept in compiled code into ``_stats`` (strategies that keep any)."""

    def exchange(self, fields) -> None:
        self.finish(self.start(fields))

    def start(self, fields):
        raise NotImplementedError

    def finish(self, handle) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Free MPI objects held by the exchanger (persistent requests, communicators)."""

    @staticmethod
    def _clock() -> float:
        return perf_counter()
