"""Integrity mode: fill each message with a pattern, verify every byte at the receiver.

The pattern is a multiplicative hash of (offset + seed), so a dropped, duplicated or shifted
byte changes every byte after it, and no two messages of a sweep (the seed mixes size,
repetition and direction) carry the same data: a stale buffer never passes for a new one.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
from numba import njit


@njit(cache=True)
def _byte(i, seed):
    return np.uint8((((i + seed) * 2654435761) & 0xFFFFFFFF) >> 24)


@njit(cache=True)
def fill(buf, seed):
    """Write the pattern of ``seed`` into every byte of ``buf``."""
    for i in range(buf.size):
        buf[i] = _byte(i, seed)


@njit(cache=True)
def first_mismatch(buf, seed):
    """``(offset of the first wrong byte or -1, number of wrong bytes, expected, got)``."""
    first, bad, want, got = -1, 0, 0, 0
    for i in range(buf.size):
        e = _byte(i, seed)
        if buf[i] != e:
            if first < 0:
                first, want, got = i, e, buf[i]
            bad += 1
    return first, bad, want, got


def seed(size: int, rep: int, direction: int) -> int:
    """A different pattern for every message of a sweep."""
    return (size * 1000003 + rep * 7919 + direction * 104729) & 0x7FFFFFFF


@dataclass
class Mismatch:
    size: int
    rep: int
    offset: int
    expected: int
    got: int
    wrong_bytes: int
    sender: int
    receiver: int

    def line(self) -> str:
        return (f"{self.size}-byte message #{self.rep} from rank {self.sender} to rank "
                f"{self.receiver}: byte at offset {self.offset} is 0x{self.got:02x}, expected "
                f"0x{self.expected:02x} ({self.wrong_bytes} byte"
                f"{'' if self.wrong_bytes == 1 else 's'} wrong)")

    def to_dict(self) -> dict:
        return asdict(self)


def verify(buf, s: int, size: int, rep: int, sender: int, receiver: int) -> Mismatch | None:
    """Check a received message against the pattern of seed ``s``."""
    off, bad, want, got = first_mismatch(buf, s)
    if off < 0:
        return None
    return Mismatch(size, rep, int(off), int(want), int(got), int(bad), sender, receiver)


def send_pattern(buf, s: int, size: int, rep: int, corrupt) -> None:
    """Fill an outgoing message; ``corrupt=(size, offset)`` flips one byte of the first
    repetition of that size (the test-only fault injection, not reachable from the CLI)."""
    fill(buf, s)
    if corrupt is not None and rep == 0 and corrupt[0] == size:
        buf[corrupt[1]] ^= 0x5A
