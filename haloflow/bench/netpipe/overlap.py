"""``haloflow netpipe --overlap``: how much computation a non-blocking exchange lets through.

NetPIPE times messages with nothing else to do; a solver posts its halo messages, computes
its interior, then waits (the ``overlap`` halo strategy).  That pays only if the MPI moves
the data while the rank computes and calls no MPI: small messages are usually copied out at
once (eager), large ones may wait for the receiver's next MPI call (rendezvous) unless the
library has a progress thread or the network offloads them.  Per size, both ranks time
(compiled loops, as the sweep does):

- ``exchange_s``: Irecv + Isend + Waitall (``bidir``), nothing between;
- ``compute_s``: a computation calibrated to last as long, alone;
- ``both_s``: Irecv + Isend, the computation, Waitall;

and the overlap fraction is ``(exchange_s + compute_s - both_s) / min(exchange_s,
compute_s)`` (``overlap_unclipped``), clipped to [0, 1] (``overlap``): 1 when the slower of the
two hides the other, 0 when they add up.
"""

from __future__ import annotations

import time

import numpy as np

from ...parallel import message_loops as loops
from .sweep import measure


class _SpinClock:
    """Seconds per :func:`loops.spin` iteration on this core (the fastest of a few runs)."""

    def __init__(self):
        self.sink = np.ones(1)
        loops.spin(10, self.sink)
        best = float("inf")
        for _ in range(5):
            t0 = time.perf_counter()
            loops.spin(2_000_000, self.sink)
            best = min(best, (time.perf_counter() - t0) / 2_000_000)
        self.s_per_iter = best

    def iters_for(self, seconds: float) -> int:
        return max(1, int(round(seconds / self.s_per_iter)))


class OverlapTransport:
    """``bidir`` with ``iters`` of computation between posting and waiting, for
    :func:`~.sweep.measure` (the same interface as the MPI transport)."""

    def __init__(self, tr, clock: _SpinClock):
        self.tr, self.clock, self.iters = tr, clock, 0

    def messages_per_rep(self) -> int:
        return 2

    def out_bytes(self, n: int) -> int:
        return 2 * n

    def one_way(self, e_first: float, e_other: float, reps: int) -> float:
        return max(e_first, e_other) / reps  # a repetition, as the slower rank saw it

    def timed(self, n: int, reps: int) -> float:
        tr, p = self.tr, self.tr.pool
        stride, nslots, pos = p.layout(n)
        t0 = time.perf_counter()
        e = loops.overlap(tr.fns, p.array, n, stride, nslots, pos, reps, tr.peer, tr.byte_h,
                          tr.comm_h, tr.reqs, tr.st, self.iters, self.clock.sink)
        el = time.perf_counter() - t0
        if e != 0:
            raise RuntimeError(f"overlap exchange of {n} bytes failed (MPI error {e})")
        p.advance(n, 2 * reps)
        return el


def overlap_sweep(link, tr, sizes, trial_time: float, trials: int, progress=None) -> list:
    """Per size the three times and the overlap fraction (same on both ranks).  ``tr``: the
    pair's compiled MPI transport (its pool holds two slots of the largest size)."""
    clock = _SpinClock()
    otr = OverlapTransport(tr, clock)
    otr.timed(1, 0)  # compile or load the kernel before anything is timed
    rows = []
    for n in sizes:
        otr.iters = 0
        exch = measure(link, otr, n, trial_time, trials, None).seconds
        otr.iters = link.agree(clock.iters_for(exch))
        compute = link.agree(otr.iters * clock.s_per_iter)
        both = measure(link, otr, n, trial_time, trials, None).seconds
        frac = (exch + compute - both) / min(exch, compute)
        rows.append({"message_bytes": n, "exchange_s": exch, "compute_s": compute,
                     "both_s": both, "spin_iterations": otr.iters,
                     "overlap_unclipped": float(frac),
                     "overlap": float(min(1.0, max(0.0, frac)))})
        if progress is not None:
            progress(rows[-1])
    return rows
