"""Timelines as Chrome trace-event JSON, which Perfetto and chrome://tracing open: one track
(thread ``tid``) per rank, each timed block a complete event ("X") with its start ``ts`` and
duration ``dur`` in microseconds.

Why: per-phase totals say where a rank's time went, a timeline shows which rank waits for
which, step by step.  A run's ``timeline.json`` (``output.timeline``) and a SimGrid replay's
(:mod:`haloflow.study.trace.timeline`) are written here.
"""

from __future__ import annotations

import json
from pathlib import Path


def us(t: float) -> float:
    """Seconds as microseconds, to the nanosecond."""
    return round(t * 1e6, 3)


def track(pid: int, rank: int) -> list[dict]:
    """The metadata events naming rank ``rank``'s track "rank R" and sorting it by rank."""
    return [{"ph": "M", "name": "thread_name", "pid": pid, "tid": rank,
             "args": {"name": f"rank {rank}"}},
            {"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": rank,
             "args": {"sort_index": rank}}]


def run_events(ranks: list[dict], label: str) -> list[dict]:
    """A run's events (process 0, called ``label``) from each rank's timeline rows
    (:meth:`haloflow.parallel.timers.Timeline.rows`, seconds from the rank's start): each
    step a "step" event with its rows' ``args``, each timed block a "phase" event whose args
    name its step.  Each track is ordered by start, an enclosing block before those in it."""
    out: list[dict] = [{"ph": "M", "name": "process_name", "pid": 0, "args": {"name": label}}]
    for rank, rows in enumerate(ranks):
        out.extend(track(0, rank))
        evs = []
        for step, a, b, args in rows["steps"]:
            ts = us(a)
            evs.append({"ph": "X", "name": f"step {step}", "cat": "step", "pid": 0,
                        "tid": rank, "ts": ts, "dur": round(us(b) - ts, 3), "args": args})
        for name, a, b, step in rows["events"]:
            ts = us(a)
            evs.append({"ph": "X", "name": name, "cat": "phase", "pid": 0, "tid": rank,
                        "ts": ts, "dur": round(us(b) - ts, 3), "args": {"step": step}})
        evs.sort(key=lambda e: (e["ts"], -e["dur"]))
        out.extend(evs)
    return out


def write(path: Path, events: list[dict], other: dict) -> None:
    """The timeline file: ``events``, times in microseconds shown as ms, and ``other`` as
    the file's ``otherData``."""
    doc = {"traceEvents": events, "displayTimeUnit": "ms", "otherData": other}
    path.write_text(json.dumps(doc, separators=(",", ":")), encoding="utf-8")
