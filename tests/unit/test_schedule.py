"""When a checkpoint is due by wall-clock time (``output.checkpoint_every_s``): rank 0's
clock decides, since the last checkpoint written, and every rank follows its verdict."""

from __future__ import annotations

from types import SimpleNamespace

from haloflow.run.schedule import Schedule


class Clock:
    """A wall clock the test sets; counts its readings."""

    def __init__(self):
        self.t, self.reads = 0.0, 0

    def __call__(self) -> float:
        self.reads += 1
        return self.t


class Red:
    """One rank of ``size``; ``max`` combines its values with those the other ranks give."""

    def __init__(self, rank: int, size: int = 1, others=(0.0, 0.0)):
        self.rank, self.size, self.others = rank, size, others

    def max(self, *values):
        return tuple(max(a, b) for a, b in zip(values, self.others, strict=True))


def _output(every_s: float, every: int = 0):
    return SimpleNamespace(checkpoint_every=every, checkpoint_every_s=every_s, write_every=0)


def test_a_checkpoint_is_due_once_the_seconds_since_the_last_one_have_passed():
    clock = Clock()
    s = Schedule(_output(10.0), Red(0), clock=clock)
    try:
        due = []
        for step, t in enumerate((4.0, 9.99, 10.0, 12.0), start=1):
            clock.t = t
            due.append(s.after_step(step))
        assert due == [(False, False), (False, False), (False, True), (False, True)]
        s.wrote_checkpoint(4)  # at t = 12: the next one 10 s later, not 10 s after t = 0
        for step, (t, want) in enumerate(((21.9, False), (22.0, True)), start=5):
            clock.t = t
            assert s.after_step(step) == (False, want)
        assert s.final_checkpoint(6) and not s.final_checkpoint(4)
    finally:
        s.restore_signals()


def test_only_rank_0_reads_the_clock_and_every_rank_follows_it():
    clock = Clock()
    clock.t = 1e9  # far past any interval: a rank that read its own clock would checkpoint
    s = Schedule(_output(10.0), Red(1, 2, others=(0.0, 0.0)), clock=clock)
    try:
        reads = clock.reads
        assert s.after_step(1) == (False, False)
        assert clock.reads == reads  # rank 1 never asks its clock whether one is due
        s.red.others = (0.0, 1.0)  # rank 0's clock says one is due
        assert s.after_step(2) == (False, True)
    finally:
        s.restore_signals()
    off = Schedule(_output(0.0, every=3), Red(0), clock=clock)  # 0: the clock is off
    try:
        clock.t += 1e9
        assert [off.after_step(k)[1] for k in (1, 2, 3)] == [False, False, True]
    finally:
        off.restore_signals()
