"""What every post-processor is: fed each step, reported at the end (what it needs of a
case is checked when the case is read: haloflow.case.postprocess)."""

from __future__ import annotations


class PostProcessor:
    """One post-processor of a run, built on every rank once the solver exists.

    ``name`` is its ``[postprocess]`` key and its entry in ``summary.json``.  ``samples``
    says that :meth:`sample` records something (the loop times those calls as "monitor");
    ``gathers`` that :meth:`report` reads the final velocity gathered on rank 0.
    """

    name = ""
    samples = False
    gathers = False

    def __init__(self, lmesh, case, solver, red):
        """On every rank: ``red`` is the run's :class:`~haloflow.parallel.reduce.Reducer`,
        the one way a post-processor reduces or gathers over the ranks."""
        self.lmesh, self.case, self.solver, self.red = lmesh, case, solver, red

    def sample(self, solver) -> None:
        """After every step, on every rank (collective where it reduces)."""

    def cell_fields(self) -> dict:
        """Cell arrays (rows: owned cells first) the field files add: none."""
        return {}

    def adopt(self, old) -> None:
        """After a rebalance, on the new post-processor: take over what ``old`` (the same
        post-processor on the old parts) has recorded so far."""

    def report(self, outdir, fields) -> dict | None:
        """Collective, after the last step: files and plots in ``outdir``; the summary entry
        on rank 0, None elsewhere.  ``fields`` (:class:`~haloflow.post.fields.Fields`) is the
        gathered final velocity on rank 0 where ``gathers``, None elsewhere."""
        return None

    def log_line(self, entry: dict) -> str | None:
        """The run log's line for the summary entry ``entry`` (None: no line)."""
        return None


class OfFinalVelocity(PostProcessor):
    """A post-processor of the final velocity alone (a profile, a reattachment length),
    gathered on rank 0: :meth:`analyse` writes its files and returns the summary entry."""

    gathers = True

    def analyse(self, outdir, cc, uc) -> dict:
        raise NotImplementedError

    def report(self, outdir, fields) -> dict | None:
        return None if fields is None else self.analyse(outdir, fields.cc, fields.uc)
