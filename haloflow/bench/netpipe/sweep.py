"""The NetPIPE method, independent of the transport (MPI pair or TCP socket).

For every size: repetitions chosen so one trial lasts about ``trial_time`` seconds
(extrapolated from the previous size, then refined from each trial), ``trials`` trials each
started together by a handshake, and the minimum over trials kept: on a machine with other
work the minimum is the figure that other work did not disturb.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .sizes import repetitions


@dataclass
class Point:
    size: int                  # message bytes (one direction)
    bytes: int                 # bytes per transfer, as NetPIPE reports them
    seconds: float             # minimum over trials of the time per transfer
    reps: int                  # repetitions of the last trial
    trials: list[float] = field(default_factory=list)
    rep_seconds: float = 0.0   # time of one repetition (for the next size's estimate)

    def to_dict(self) -> dict:
        from .file import mbps

        return {"message_bytes": self.size, "bytes": self.bytes, "seconds": self.seconds,
                "mbps": float(mbps(self.bytes, self.seconds)), "repetitions": self.reps,
                "trial_seconds": self.trials}


def measure(link, tr, n: int, trial_time: float, trials: int, rep_s: float | None,
            before_trial=None) -> Point:
    """Time ``n``-byte messages over ``tr``; both ranks return the same Point."""
    if rep_s is None:
        rep_s = _calibrate(link, tr, n, trial_time)
    times, reps, best = [], 0, float("inf")
    for _ in range(trials):
        reps = link.agree(repetitions(trial_time, rep_s))  # a handshake: both start now
        if before_trial is not None:
            before_trial()
            link.sync()
        e = tr.timed(n, reps)
        e_other = link.swap(e)
        e_first, e_second = (e, e_other) if link.first else (e_other, e)
        times.append(tr.one_way(e_first, e_second, reps))
        # the fastest repetition seen sizes the next trial: one trial that was descheduled
        # must not shrink every trial after it to a few repetitions
        best = min(best, max(e, e_other) / reps)
        rep_s = best
    return Point(n, tr.out_bytes(n), min(times), reps, times, rep_s)


def _calibrate(link, tr, n: int, trial_time: float) -> float:
    """Seconds per repetition from untimed probes, 4x longer each until one lasts a tenth
    of a trial; at least three probes, the fastest kept (a probe can be descheduled)."""
    reps, best, probes = 1, float("inf"), 0
    link.sync()
    while True:  # each swap below is also the handshake that starts the next probe
        e = tr.timed(n, reps)
        e = max(e, link.swap(e))  # the same number on both ranks: the same decisions
        best, probes = min(best, e / reps), probes + 1
        long_enough = e >= trial_time / 10 or reps >= 1 << 24
        if probes >= 3 and long_enough:
            return best
        if not long_enough:
            reps *= 4


def sweep(link, tr, sizes, trial_time: float, trials: int, progress=None) -> list[Point]:
    """Measure every size in order; ``progress(point)`` after each (on both ranks)."""
    points, rep_s, prev = [], None, None
    for n in sizes:
        est = None if rep_s is None else rep_s * max(1.0, n / prev)
        pt = measure(link, tr, n, trial_time, trials, est)
        points.append(pt)
        rep_s, prev = pt.rep_seconds, n
        if progress is not None:
            progress(pt)
    return points


def integrity_sweep(link, tr, sizes, messages: int, corrupt=None, progress=None):
    """Send ``messages`` patterned messages per size; every mismatch of either rank.

    Returns ``(results, mismatches)``: per size ``{"message_bytes", "messages", "ok"}`` and
    the list of mismatches, identical on both ranks.
    """
    results, failures = [], []
    for n in sizes:
        mine = []
        for rep in range(messages):
            mine += tr.checked(n, rep, corrupt)
        theirs = link.swap([m.to_dict() for m in mine])
        both = [m.to_dict() for m in mine] + theirs if link.first else \
            theirs + [m.to_dict() for m in mine]
        failures += both
        results.append({"message_bytes": n, "messages": messages, "ok": not both})
        if progress is not None:
            progress(results[-1], both)
    return results, failures
