"""Transient output: the fields every ``output.write_every`` steps as a time series.

Each write adds ``fields/series/<case>_<step>.pvtu`` (one ``.vtu`` piece per rank) and
rewrites ``fields/<case>.pvd``, the collection ParaView opens as an animation; the
collection is replaced atomically, so it always names only complete files.
"""

from __future__ import annotations

import os
from pathlib import Path

SUBDIR = "series"


class FieldSeries:
    """Collective writer of one run's field series."""

    def __init__(self, run, outdir: Path):
        self.run, self.outdir = run, Path(outdir)
        self.entries = []  # (time, file relative to fields/)

    def write(self, step: int) -> None:
        from ..io import vtk
        from .report import cell_data

        run = self.run
        name = f"{run.case.name}_{step:09d}"
        pvtu = vtk.write_fields(str(self.outdir), name, run.lmesh, cell_data(run), run.red,
                                subdir=os.path.join("fields", SUBDIR))
        if run.red.rank == 0:
            self.entries.append((run.solver.time, f"{SUBDIR}/{os.path.basename(pvtu)}"))
            vtk.write_pvd(self.outdir / "fields" / f"{run.case.name}.pvd", self.entries)
