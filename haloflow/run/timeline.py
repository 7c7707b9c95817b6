"""A run's timeline (``output.timeline``): every rank records its timed blocks of the first
``output.timeline_steps`` steps (:class:`haloflow.parallel.timers.Timeline`), each step with
the halo wait and allreduce seconds it spent; rank 0 gathers them and writes
``timeline.json`` (:mod:`haloflow.io.timeline`).

The ranks' clocks start together: each takes its zero after a barrier at the start of the
loop, so a block that starts late on one rank shows where it waited for another.
"""

from __future__ import annotations

from pathlib import Path
from time import perf_counter

FILE = "timeline.json"


class RunTimeline:
    """One rank's recorder: ``next`` at the top of each loop iteration, ``close`` after."""

    def __init__(self, run):
        from ..parallel.timers import Timeline
        from .setup import sync

        self.run = run
        self.tl = Timeline(run.timers, run.case.output.timeline_steps)
        self.open: tuple | None = None  # the step under way: (step, start, waits)
        sync(run.comm)
        self.tl.start(perf_counter())

    def _waits(self) -> tuple[float, float]:
        run = self.run
        return (sum(ex.stats.wait_s for ex in run.exchangers()),
                run.solver.red.stats.seconds)

    def next(self, step: int) -> None:
        """Step ``step`` + 1 starts now (and ends the one before)."""
        self.close()
        if self.tl.recording:
            self.open = (step + 1, perf_counter(), self._waits())

    def close(self) -> None:
        """The step under way ends now."""
        if self.open is None:
            return
        end = perf_counter()
        step, start, (halo0, red0) = self.open
        halo1, red1 = self._waits()
        self.open = None
        self.tl.step_done(step, start, end, {"halo_wait_s": halo1 - halo0,
                                             "allreduce_s": red1 - red0})

    def write(self, outdir: Path) -> None:
        """Collective: rank 0 writes every rank's blocks to ``outdir``/timeline.json."""
        from ..io import timeline

        self.close()
        self.tl.stop()
        run = self.run
        ranks = run.red.gather(self.tl.rows())
        if ranks is None:
            return
        with run.timers("io"):
            timeline.write(outdir / FILE, timeline.run_events(ranks, f"haloflow {run.case.name}"),
                           {"case": run.case.name, "ranks": len(ranks),
                            "steps": max((len(r["steps"]) for r in ranks), default=0),
                            "timeline_steps": run.case.output.timeline_steps})


def begin(run) -> RunTimeline | None:
    """Collective where the case asks for a timeline: its recorder, started now."""
    return RunTimeline(run) if run.case.output.timeline else None
