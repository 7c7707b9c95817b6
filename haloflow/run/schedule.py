"""When a run writes checkpoints and field series, and when it stops early.

A checkpoint is due every ``output.checkpoint_every`` steps, every
``output.checkpoint_every_s`` seconds of wall-clock time, and when SIGTERM or SIGINT arrives
(a batch system's preemption or wall-clock limit, a Ctrl-C): the current step finishes, a
checkpoint is written and the run ends, marked interrupted.  A signal reaches the ranks at
different moments (or only some of them), and the wall clock is read on rank 0, so the
ranks agree on both after every step with one small allreduce; a rank that acted alone would
leave the others waiting in a collective.  A second signal ends the run at once.
"""

from __future__ import annotations

import signal
import threading
import time

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Schedule:
    """Per-step decisions, the same on every rank: :meth:`after_step` is collective."""

    def __init__(self, output, red, start_step: int = 0, clock=time.perf_counter):
        """``clock``: seconds of wall-clock time, read on rank 0 only."""
        self.every = int(output.checkpoint_every)
        self.every_s = float(output.checkpoint_every_s)
        self.write_every = int(output.write_every)
        self.red = red
        self.root = red.rank == 0
        self.clock = clock
        self.last_ckpt_t = clock()
        self.last_ckpt_step = start_step
        self.caught = 0  # the signal number, once one arrives
        self._old = {}
        if threading.current_thread() is threading.main_thread():
            for s in SIGNALS:
                self._old[s] = signal.signal(s, self._catch)

    def _catch(self, signum, frame) -> None:
        if self.caught:  # the second one: stop now, as the signal's own handler would
            self.restore_signals()
            signal.raise_signal(signum)  # SIGTERM's default: killed (exit 143 in a shell)
            return
        self.caught = signum

    def restore_signals(self) -> None:
        for s, old in self._old.items():
            signal.signal(s, old)
        self._old = {}

    def after_step(self, step: int) -> tuple[bool, bool]:
        """``(stop, checkpoint)`` after ``step``: whether a signal asks the run to end, and
        whether a checkpoint is due (always, when it does)."""
        due = self.every > 0 and step % self.every == 0
        timed = 0.0
        if self.every_s > 0.0 and self.root:
            timed = float(self.clock() - self.last_ckpt_t >= self.every_s)
        flag = float(self.caught)
        flag, timed = self.red.max(flag, timed)  # (one rank: counted, no MPI)
        stop = flag > 0.0
        if stop and not self.caught:
            self.caught = int(flag)
        return stop, due or timed > 0.0 or stop

    def wrote_checkpoint(self, step: int) -> None:
        self.last_ckpt_t = self.clock()
        self.last_ckpt_step = step

    def final_checkpoint(self, step: int) -> bool:
        """A run that checkpoints ends with one, unless its last step wrote it."""
        return (self.every > 0 or self.every_s > 0.0) and self.last_ckpt_step != step

    def series_due(self, step: int) -> bool:
        return self.write_every > 0 and step % self.write_every == 0

    @property
    def signal_name(self) -> str:
        return signal.Signals(self.caught).name if self.caught else ""
