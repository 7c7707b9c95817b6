"""The NetPIPE method, independent of the transport (MPI pair or TCP socket).

For every size: repetitions chosen so one trial lasts about ``trial_time`` seconds
(extrapolated from the previous size, then refined from each trial), ``trials`` trials each
started together by a handshake, and the minimum over trials kept: on a machine with other
work the minimum is the figure that other work did not disturb.
"""

from __future__ import annotations

import resource
from dataclasses import dataclass, field

from .sizes import repetitions


def cpu_seconds() -> tuple[float, float]:
    """This thread's user and system CPU seconds so far (the kernel's TCP work on its
    behalf counts as system time; a rank polling for a message counts as user time)."""
    r = resource.getrusage(resource.RUSAGE_THREAD)
    return r.ru_utime, r.ru_stime


@dataclass
class CpuShare:
    """What one side's CPU did during the timed trials of a size: user and system seconds
    per message it handled (sent or received) and its busy fraction (CPU over wall)."""

    user_s: float
    sys_s: float
    busy: float

    def to_dict(self) -> dict:
        return {"user_us": self.user_s * 1e6, "sys_us": self.sys_s * 1e6,
                "cpu_us": (self.user_s + self.sys_s) * 1e6, "busy": self.busy}


@dataclass
class Point:
    size: int                  # message bytes (one direction)
    bytes: int                 # bytes per transfer, as NetPIPE reports them
    seconds: float             # minimum over trials of the time per transfer
    reps: int                  # repetitions of the last trial
    trials: list[float] = field(default_factory=list)
    rep_seconds: float = 0.0   # time of one repetition (for the next size's estimate)
    cpu: tuple | None = None   # (first side's CpuShare, other side's), with --cpu

    def to_dict(self) -> dict:
        from ...io.netpipe_file import mbps

        d = {"message_bytes": self.size, "bytes": self.bytes, "seconds": self.seconds,
             "mbps": float(mbps(self.bytes, self.seconds)), "repetitions": self.reps,
             "trial_seconds": self.trials}
        if self.cpu is not None:
            d["cpu"] = {"first": self.cpu[0].to_dict(), "other": self.cpu[1].to_dict()}
        return d


def measure(link, tr, n: int, trial_time: float, trials: int, rep_s: float | None,
            before_trial=None, cpu: bool = False) -> Point:
    """Time ``n``-byte messages over ``tr``; both ranks return the same Point.  ``cpu``:
    also what each side's CPU spent (over all trials, so the clock tick of the kernel's
    accounting is a small part of it)."""
    if rep_s is None:
        rep_s = _calibrate(link, tr, n, trial_time)
    times, reps, best = [], 0, float("inf")
    used = [0.0, 0.0, 0.0, 0]  # user s, system s, wall s, repetitions
    for _ in range(trials):
        reps = link.agree(repetitions(trial_time, rep_s))  # a handshake: both start now
        if before_trial is not None:
            before_trial()
            link.sync()
        c0 = cpu_seconds() if cpu else None
        e = tr.timed(n, reps)
        if cpu:
            c1 = cpu_seconds()
            used = [used[0] + c1[0] - c0[0], used[1] + c1[1] - c0[1], used[2] + e,
                    used[3] + reps]
        e_other = link.swap(e)
        e_first, e_second = (e, e_other) if link.first else (e_other, e)
        times.append(tr.one_way(e_first, e_second, reps))
        # the fastest repetition seen sizes the next trial: one trial that was descheduled
        # must not shrink every trial after it to a few repetitions
        best = min(best, max(e, e_other) / reps)
        rep_s = best
    pt = Point(n, tr.out_bytes(n), min(times), reps, times, rep_s)
    if cpu:
        msgs = max(used[3] * tr.messages_per_rep(), 1)
        mine = [used[0] / msgs, used[1] / msgs, (used[0] + used[1]) / max(used[2], 1e-12)]
        other = link.swap(mine)  # plain numbers: a TCP link carries JSON
        if not (isinstance(other, list) and len(other) == 3 and all(
                isinstance(v, int | float) and 0 <= v < 1e9 for v in other)):
            from ...mpiutil import UserError

            raise UserError("the other side sent CPU figures haloflow netpipe does not send")
        sides = (mine, other) if link.first else (other, mine)
        pt.cpu = tuple(CpuShare(*map(float, side)) for side in sides)
    return pt


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


def sweep(link, tr, sizes, trial_time: float, trials: int, progress=None,
          cpu: bool = False) -> list[Point]:
    """Measure every size in order; ``progress(point)`` after each (on both ranks)."""
    points, rep_s, prev = [], None, None
    for n in sizes:
        est = None if rep_s is None else rep_s * max(1.0, n / prev)
        pt = measure(link, tr, n, trial_time, trials, est, cpu=cpu)
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
