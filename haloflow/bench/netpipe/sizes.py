"""Which message sizes a NetPIPE-style sweep visits, and how many repetitions each gets.

The spacing is NetPIPE's (3.x): 1, 2, 3, 4, 6, 8, 12, 16, 24, ... (powers of two and the
points halfway between them), each also tested ``perturb`` bytes below and above once the
step is large enough, because message sizes just off a power of two often expose protocol
switch points and alignment effects that the round sizes hide.
"""

from __future__ import annotations

import math
import re

INT_MAX = 2**31 - 1  # an MPI count is a C int
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
_SIZE = re.compile(r"^\s*(\d+)\s*([kmg]?)(i?b)?\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """``"8M"`` -> 8388608.  K, M and G are binary (1K = 1024), as NetPIPE's sizes are."""
    m = _SIZE.match(str(text))
    if not m:
        raise ValueError(f"{text!r}: expected a size in bytes such as 4096, 64K or 8M")
    return int(m.group(1)) * _UNITS[m.group(2).lower()]


def format_size(n: float) -> str:
    """Bytes for people: 512 B, 64 KiB, 8 MiB (one decimal where it is not whole)."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            v = n / scale
            return f"{v:.0f} {unit}" if abs(v - round(v)) < 0.05 else f"{v:.1f} {unit}"
    return f"{n:.0f} B"


def schedule(lo: int, hi: int, perturb: int = 3) -> list[int]:
    """Message sizes from ``lo`` to ``hi`` bytes, increasing, as NetPIPE visits them.

    The base sizes grow by an increment that doubles every second step (so the ratio between
    neighbours is about sqrt 2); each base size ``s`` whose increment exceeds ``perturb + 1``
    is also tested at ``s - perturb`` and ``s + perturb``.  ``hi`` itself is always included,
    so a sweep ends at the size that was asked for.
    """
    if lo < 1 or hi < lo:
        raise ValueError(f"need 1 <= min <= max, got min {lo}, max {hi}")
    perturb = max(0, int(perturb))
    inc = lo // 2 if lo > 1 else 1
    nq = 1 if lo > 1 else 0
    out: set[int] = set()
    size = lo
    while size <= hi:
        if nq > 2 and nq % 2:
            inc += inc
        step = perturb if perturb and inc > perturb + 1 else 0
        for s in ((size - step, size, size + step) if step else (size,)):
            if lo <= s <= hi:
                out.add(s)
        size += inc
        nq += 1
    out.add(hi)
    return sorted(out)


def repetitions(trial_time: float, rep_seconds: float | None, floor: int = 3,
                ceiling: int = 10**8) -> int:
    """Repetitions that make one trial last about ``trial_time`` s.

    ``rep_seconds`` is the measured (or extrapolated) time of one repetition; without an
    estimate a short probe of 10 repetitions is used.  NetPIPE's floor of 3 keeps very large
    messages from being timed once.
    """
    if rep_seconds is None or not rep_seconds > 0.0 or not math.isfinite(rep_seconds):
        return 10
    return int(max(floor, min(ceiling, round(trial_time / rep_seconds))))
