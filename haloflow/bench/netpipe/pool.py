"""Message buffers: one hot buffer (NetPIPE's default) or a pool larger than the cache.

With ``--nocache`` every message goes to the next slot of a pool at least twice the
last-level cache, and the position carries on across trials and sizes, so no message finds
its data in cache (NetPIPE's ``-I``).  Slots are page-aligned: a new page per small message,
as cold application buffers would be, and no help from the adjacent-line prefetcher.
"""

from __future__ import annotations

import glob
from pathlib import Path

import numpy as np

from .sizes import parse_size

LINE, PAGE = 64, 4096
MIN_POOL, MAX_POOL = 64 << 20, 1 << 30


def _round_up(n: int, a: int) -> int:
    return -(-n // a) * a


def last_level_cache() -> int | None:
    """Size in bytes of the largest CPU cache sysfs reports, or None."""
    sizes = []
    for f in glob.glob("/sys/devices/system/cpu/cpu0/cache/index*/size"):
        try:
            sizes.append(parse_size(Path(f).read_text().strip()))
        except (OSError, ValueError):
            pass
    return max(sizes) if sizes else None


def pool_bytes(max_size: int, nocache: bool, slots: int, requested: int | None = None) -> int:
    """Bytes a rank needs: ``slots`` hot buffers, or a pool of twice the last-level cache.

    The default pool is clamped to [64 MiB, 1 GiB] (some virtual machines report a cache
    of hundreds of MiB); ``requested`` overrides it.  A pool always holds at least four of
    the largest messages.
    """
    if not nocache:
        return slots * _round_up(max_size, LINE)
    if requested is None:
        llc = last_level_cache()
        requested = min(MAX_POOL, max(MIN_POOL, 2 * llc if llc else MIN_POOL))
    return max(int(requested), 4 * _round_up(max_size, PAGE))


class Pool:
    """Slots in ``array`` for a message size, and the running position in it."""

    def __init__(self, array: np.ndarray, nocache: bool, slots: int = 1):
        self.array = array
        self.nocache = nocache
        self.slots = slots
        self.cursor = 0  # byte offset of the next message, across sizes

    def layout(self, n: int) -> tuple[int, int, int]:
        """``(stride, nslots, pos)`` for messages of ``n`` bytes."""
        if not self.nocache:
            return _round_up(n, LINE), self.slots, 0
        stride = _round_up(n, PAGE)
        nslots = len(self.array) // stride
        return stride, nslots, (-(-self.cursor // stride)) % nslots

    def advance(self, n: int, messages: int) -> None:
        """Move past ``messages`` slots of size ``n`` (call after each timed loop)."""
        if self.nocache:
            stride, nslots, pos = self.layout(n)
            self.cursor = ((pos + messages) % nslots) * stride

    def slot(self, n: int, i: int) -> np.ndarray:
        """The ``i``-th slot from the current position, ``n`` bytes long (a view)."""
        stride, nslots, pos = self.layout(n)
        off = ((pos + i) % nslots) * stride
        return self.array[off:off + n]

    def offset(self, n: int, i: int) -> int:
        stride, nslots, pos = self.layout(n)
        return ((pos + i) % nslots) * stride


def allocate(nbytes: int) -> np.ndarray:
    """A byte array with every page touched, so no timed loop pays a first-touch fault."""
    a = np.empty(nbytes, dtype=np.uint8)
    a.fill(0)
    return a
