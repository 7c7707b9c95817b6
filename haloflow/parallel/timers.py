"""Per-phase wall-clock timers and call counters (docs/design.md, section 9).

``with timers("solve_p"): ...`` adds the elapsed seconds to that phase.  Phase objects are
cached, so a timed block costs two ``perf_counter`` calls and no allocation.  Phases given a
counter (``count_with``) also add up what the counter's figures grew by inside them (the
profile's communication per phase: what a pressure or momentum iteration costs).  Under an
emulated slow core (:mod:`.emulation`) a phase's start and end are points where it pays its
compute's extra time, so each phase's seconds are those a slower core would take.

A :class:`Timeline` (``output.timeline``) also keeps each timed block's start and end for the
first steps: while it records, the phases are :class:`_RecordingPhase` objects (the same
objects, their class swapped), so a run without one times its blocks exactly as before.
"""

from __future__ import annotations

from time import perf_counter

from . import emulation


class _Phase:
    __slots__ = ("seconds", "calls", "_t0", "counter", "counts", "_c0", "name", "log")

    def __init__(self, name: str = ""):
        self.name = name
        self.log: list | None = None  # a recording phase's (name, start, end) list
        self.seconds = 0.0
        self.calls = 0
        self._t0 = 0.0
        self.counter = None  # a function returning a dict of counts, or None
        self.counts: dict | None = None  # what they grew by inside this phase
        self._c0 = None

    def __enter__(self):
        if emulation.ACTIVE is not None:
            emulation.ACTIVE.settle()
        if self.counter is not None:
            self._c0 = self.counter()
        self._t0 = perf_counter()
        return self

    def __exit__(self, *exc):
        if emulation.ACTIVE is not None:
            emulation.ACTIVE.settle()
        self.seconds += perf_counter() - self._t0
        self.calls += 1
        if self.counter is not None and self._c0 is not None:
            c1, c0 = self.counter(), self._c0
            old = self.counts or {}
            self.counts = {k: old.get(k, 0) + c1[k] - c0[k] for k in c1}
            self._c0 = None
        return False


class _RecordingPhase(_Phase):
    """A phase that also appends ``(name, start, end)`` (perf_counter seconds) to its log;
    end - start is exactly what the block added to ``seconds``."""

    __slots__ = ()

    def __exit__(self, *exc):
        t0, s0 = self._t0, self.seconds
        _Phase.__exit__(self, *exc)
        self.log.append((self.name, t0, t0 + (self.seconds - s0)))
        return False


class Timers:
    """A named set of phases; nested phases are allowed (they overlap in the totals)."""

    def __init__(self):
        self.phases: dict[str, _Phase] = {}
        self._log: list | None = None  # while a Timeline records: its event list

    def __call__(self, name: str) -> _Phase:
        ph = self.phases.get(name)
        if ph is None:
            ph = self.phases[name] = _Phase(name)
            if self._log is not None:
                ph.log, ph.__class__ = self._log, _RecordingPhase
        return ph

    def record(self, log: list | None) -> None:
        """Every phase, those made later too, appends its blocks to ``log`` (None: stop)."""
        self._log = log
        for ph in self.phases.values():
            ph.log, ph.__class__ = log, (_Phase if log is None else _RecordingPhase)

    def count_with(self, counter, names) -> None:
        """Phases ``names`` add up what ``counter()`` (a dict of numbers) grows by inside
        them from now on; not for phases that nest in themselves."""
        for name in names:
            self(name).counter = counter

    def as_dict(self) -> dict:
        return {k: {"seconds": v.seconds, "calls": v.calls,
                    **({"counts": dict(v.counts)} if v.counts is not None else {})}
                for k, v in self.phases.items()}


MAX_EVENTS = 100_000  # a timeline stops recording after the step that passes this many


class Timeline:
    """The timed blocks of each of the first ``steps`` steps of one rank: ``events``
    ``(name, start, end)`` and ``marks`` ``(step, start, end, events before its end, args)``,
    in perf_counter seconds.  Recording stops after ``steps`` steps, or after the step that
    took the events past ``MAX_EVENTS``."""

    def __init__(self, timers: Timers, steps: int):
        self.timers, self.steps = timers, steps
        self.events: list[tuple] = []
        self.marks: list[tuple] = []
        self.recording = False
        self.t0 = 0.0

    def start(self, t0: float) -> None:
        """Record from now on; times are kept relative to ``t0`` when read."""
        self.t0, self.recording = t0, True
        self.timers.record(self.events)

    def step_done(self, step: int, start: float, end: float, args: dict) -> None:
        """Step ``step`` ran from ``start`` to ``end``; the last one recorded may stop it."""
        if not self.recording:
            return
        self.marks.append((step, start, end, len(self.events), args))
        if len(self.marks) >= self.steps or len(self.events) >= MAX_EVENTS:
            self.stop()

    def stop(self) -> None:
        if self.recording:
            self.recording = False
            self.timers.record(None)

    def rows(self) -> dict:
        """Plain lists to gather: ``steps`` ``[step, start, end, args]`` and ``events``
        ``[name, start, end, step]``, in seconds from ``t0``; blocks after the last step
        recorded (the end of the loop) are left out."""
        t0, steps, events, k = self.t0, [], [], 0
        for step, start, end, n, args in self.marks:
            steps.append([step, start - t0, end - t0, args])
            events.extend([name, a - t0, b - t0, step] for name, a, b in self.events[k:n])
            k = n
        return {"steps": steps, "events": events}


class _NullPhase:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class _NullTimers:
    _phase = _NullPhase()

    def __call__(self, name):
        return self._phase


NULL_TIMERS = _NullTimers()
