"""What every post-processor is: checked with the case, fed each step, reported at the end."""

from __future__ import annotations


def needs_mesh(name: str, case, kind: str, why: str) -> None:
    """Refuse a case whose ``mesh.type`` is not ``kind``: post-processor ``name`` reads
    ``why``."""
    from ..case import KeyProblem

    if case.mesh.type != kind:
        raise KeyProblem(("postprocess", name), f'postprocess.{name}: needs mesh.type = '
                         f'"{kind}" ({why})', also=[("mesh", "type")])


def needs_inlet_patch(name: str, case, why: str) -> None:
    """Refuse a case whose patch ``inlet`` is not of type inlet (its U is the mean velocity
    ``name`` scales by)."""
    from ..case import KeyProblem

    if case.boundary["inlet"].type != "inlet":
        raise KeyProblem(("postprocess", name), f"postprocess.{name}: needs "
                         f'boundary.inlet.type = "inlet" ({why})',
                         also=[("boundary", "inlet", "type")])


class PostProcessor:
    """One post-processor of a run, built on every rank once the solver exists.

    ``name`` is its ``[postprocess]`` key and its entry in ``summary.json``.  ``samples``
    says that :meth:`sample` records something (the loop times those calls as "monitor");
    ``gathers`` that :meth:`report` reads the final velocity gathered on rank 0.
    """

    name = ""
    samples = False
    gathers = False

    @staticmethod
    def validate(case) -> None:
        """Raise :class:`haloflow.case.KeyProblem` if ``case`` (its validated sections) cannot
        be post-processed this way."""

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
