"""Per-phase wall-clock timers and call counters (docs/design.md, section 9).

``with timers("solve_p"): ...`` adds the elapsed seconds to that phase.  Phase objects are
cached, so a timed block costs two ``perf_counter`` calls and no allocation.  Phases given a
counter (``count_with``) also add up what the counter's figures grew by inside them (the
profile's communication per phase: what a pressure or momentum iteration costs).  Under an
emulated slow core (:mod:`.emulation`) a phase's start and end are points where it pays its
compute's extra time, so each phase's seconds are those a slower core would take.
"""

from __future__ import annotations

from time import perf_counter

from . import emulation


class _Phase:
    __slots__ = ("seconds", "calls", "_t0", "counter", "counts", "_c0")

    def __init__(self):
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


class Timers:
    """A named set of phases; nested phases are allowed (they overlap in the totals)."""

    def __init__(self):
        self.phases: dict[str, _Phase] = {}

    def __call__(self, name: str) -> _Phase:
        ph = self.phases.get(name)
        if ph is None:
            ph = self.phases[name] = _Phase()
        return ph

    def count_with(self, counter, names) -> None:
        """Phases ``names`` add up what ``counter()`` (a dict of numbers) grows by inside
        them from now on; not for phases that nest in themselves."""
        for name in names:
            self(name).counter = counter

    def as_dict(self) -> dict:
        return {k: {"seconds": v.seconds, "calls": v.calls,
                    **({"counts": dict(v.counts)} if v.counts is not None else {})}
                for k, v in self.phases.items()}


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
