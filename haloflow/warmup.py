"""Compile every numba kernel once, serially, into the on-disk cache.

Run before launching many ranks (``python -m haloflow.warmup``): otherwise each rank compiles
the same kernels at the same time, which costs seconds per rank and races on the cache files.
"""

from __future__ import annotations

import tempfile
from pathlib import Path


def warm() -> None:
    from mpi4py import MPI

    from .case import load_case
    from .parallel import halo
    from .run import run_case

    halo.warm()
    small = [  # AMG with a K-cycle level; overlapped SpMVs; PISO, BDF2 and SIMPLE; inlets,
        # outlets, periodic pairs; momentum by symmetric Gauss-Seidel sweeps
        ("cavity", ["mesh.cells=[80,80,1]", "solver.max_steps=2", "parallel.halo=packed"]),
        ("cavity", ["mesh.cells=[6,6,1]", "solver.max_steps=2", "parallel.halo=overlap"]),
        ("cavity", ["mesh.cells=[6,6,1]", "solver.max_steps=2", "solver.momentum.method=sgs"]),
        ("channel", ["mesh.cells=[12,4,1]", "solver.max_iterations=2"]),
        ("channel", ["mesh.cells=[12,4,1]", "solver.algorithm=piso", "solver.max_steps=2"]),
        ("taylor_green", ["mesh.cells=[6,6,1]", "solver.max_steps=3"]),  # periodic, BDF2
        *(("taylor_green_3d", ["mesh.cells=[4,4,4]", "solver.max_steps=2",  # LES closures
                               f'physics.closure="{c}"', "postprocess.averaging=true"])
          for c in ("smagorinsky", "wale", "kEqn")),
        ("channel", ["mesh.cells=[12,4,1]", "solver.algorithm=piso", "solver.max_steps=2",
                     'physics.model="les"', 'physics.closure="kEqn"', "physics.van_driest=true",
                     "boundary.left.fluctuation=[0.02,0.01,0.0]"]),  # inflow, van Driest
    ]
    for name, overrides in small:
        case = load_case(name, overrides + ["output.plots=false", "output.fields=false"])
        with tempfile.TemporaryDirectory(prefix="haloflow-warmup-") as tmp:
            run_case(case, Path(tmp) / "run", MPI.COMM_SELF, quiet=True)


if __name__ == "__main__":
    warm()
