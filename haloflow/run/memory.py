"""A rank's memory: its resident set now and at its peak, for summary.json.

``rss_bytes_per_cell`` is what a run costs per cell beyond the process it starts from: the
peak resident set (``getrusage``'s ``ru_maxrss``) less the resident set sampled just before
the mesh is built (``/proc/self/statm``), over the cells the rank owns; summary.json reports
the largest over the ranks.  The difference holds the mesh, the solver's arrays, the modules
that set-up imports and the compiled kernels it loads, and on rank 0 the global mesh it
builds and partitions, so it is a per-cell figure only on meshes of about 10^5 cells per rank
and more; below that the fixed part dominates.
"""

from __future__ import annotations

import ctypes
import os
import resource

MIB = 1 << 20
M_MMAP_THRESHOLD = -3  # mallopt's parameter number (glibc malloc.h)
MMAP_BYTES = 1 << 20  # blocks from this size get their own mapping


def return_freed_arrays() -> None:
    """Give freed arrays' pages back to the system at once.

    glibc serves blocks from 128 KiB up by ``mmap``, but raises that threshold to the size of
    each such block freed (up to 32 MiB), so after set-up frees its first temporaries, later
    arrays come from the heap, which keeps freed memory resident: at 64^3 the process
    stayed ~70 MB (260 bytes per cell) above its live arrays.  Fixing the threshold at 1 MiB
    keeps every large array in its own mapping; smaller blocks stay on the heap, where the
    few a step makes are reused without page faults (at 128 KiB a 32^3 step took ~360 more
    faults, against ~45 at 1 MiB; set-up's 64^3 peak is the same either way).  No effect
    where the C library has no ``mallopt``."""
    try:
        ctypes.CDLL(None).mallopt(M_MMAP_THRESHOLD, MMAP_BYTES)
    except (OSError, AttributeError):
        pass


def rss_bytes() -> int:
    """The resident set now (0 where /proc is missing)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0


def peak_rss_bytes() -> int:
    """The largest resident set so far (``ru_maxrss`` is in kilobytes on Linux), at least
    the resident set now: the kernel raises its high-water mark from page counters it
    syncs only now and then, so a process at its peak can read a few hundred KB more in
    /proc than in ``ru_maxrss`` (seen in a test worker that had been larger before)."""
    return max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, rss_bytes())


def summary(samples) -> dict:
    """summary.json's entries from every rank's ``(base, peak, owned cells)``; a rank's
    peak is at least its base (the base is a resident set it had: see
    :func:`peak_rss_bytes`)."""
    samples = [(b, max(b, p), n) for b, p, n in samples]
    return {
        "base_rss_mb": max(s[0] for s in samples) / MIB,
        "peak_rss_mb": max(s[1] for s in samples) / MIB,
        "rss_bytes_per_cell": max((s[1] - s[0]) / max(s[2], 1) for s in samples),
    }
