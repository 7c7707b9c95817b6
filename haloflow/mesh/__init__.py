"""Global meshes: the data model, the box generator, file readers and quality checks.

The readers are imported on demand, so ``import haloflow.mesh`` stays cheap for the case
validator, which asks a mesh file for its patch names and nothing else.
"""

from __future__ import annotations

import warnings
from pathlib import Path

__all__ = ["MeshError", "from_case", "mesh_format", "patch_names", "read_mesh"]


class MeshError(ValueError):
    """A mesh file cannot be read; the message names the file and, where it can, the line."""


def mesh_format(path: str | Path) -> str:
    """``"foam"``, ``"gmsh"`` or ``"blockmesh"``: the reader for ``path``, told by suffix and
    directory layout (a case with a blockMeshDict but no polyMesh yet is ``"blockmesh"``)."""
    p = Path(path)
    if p.suffix.lower() == ".msh":
        return "gmsh"
    from .blockmesh import find_blockmeshdict

    if find_blockmeshdict(p) is not None:
        return "blockmesh"
    if p.is_dir() or p.suffix.lower() == ".foam":
        return "foam"
    if p.is_file() and ((p.parent / "owner").exists() or (p.parent / "owner.gz").exists()):
        return "foam"  # one of the polyMesh files themselves
    raise MeshError(f"{path}: not a mesh this reader knows (expected a Gmsh .msh file, an "
                    "OpenFOAM case or polyMesh directory, or a blockMeshDict)")


def read_mesh(path: str | Path, notes: list[str] | None = None):
    """Read an OpenFOAM polyMesh or a Gmsh file into a :class:`~haloflow.mesh.core.Mesh`.

    What the reader had to decide for the user (unassigned faces, reordered faces, patch types
    it cannot honour) goes to ``notes``, or becomes a warning when no list is given.
    """
    sink: list[str] = [] if notes is None else notes
    fmt = mesh_format(path)
    if fmt == "gmsh":
        from .gmsh import read_gmsh

        mesh = read_gmsh(path, notes=sink)
    elif fmt == "blockmesh":
        from .blockmesh import read_blockmesh

        mesh = read_blockmesh(path, notes=sink)
    else:
        from .foam import read_foam

        mesh = read_foam(path, notes=sink)
    if notes is None:
        for n in sink:
            warnings.warn(f"{path}: {n}", stacklevel=2)
    return mesh


def patch_names(path: str | Path) -> list[str]:
    """The patch names ``read_mesh(path)`` will produce, read as cheaply as the format allows."""
    fmt = mesh_format(path)
    if fmt == "gmsh":
        from .gmsh import gmsh_patch_names

        return gmsh_patch_names(path)
    if fmt == "blockmesh":
        from .blockmesh import blockmesh_patch_names

        return blockmesh_patch_names(path)
    from .foam import foam_patch_names

    return foam_patch_names(path)


# what a generated mesh's cell costs while it is built and partitioned on rank 0, a floor:
# a box past the memory left is refused before its arrays are allocated
BYTES_PER_CELL = 400


def from_case(m, notes: list[str] | None = None):
    """The global mesh a case's ``[mesh]`` section describes (``case.mesh``), with its
    ``periodic`` patch pairs joined."""
    from ..limits import generated_cells, too_big

    n = generated_cells(m)
    why = too_big(n * BYTES_PER_CELL)
    if why:
        keys = {"box": "cells", "step": "cells_x, mesh.cells_y"}.get(m.type, "cells_around")
        raise MeshError(f"mesh.{keys}: {n} cells {why}")
    mesh = _unjoined(m, notes)
    if getattr(m, "periodic", ()):
        from .periodic import stitch

        mesh = stitch(mesh, m.periodic)
    return mesh


def _unjoined(m, notes):
    if m.type == "file":
        return read_mesh(m.file, notes)
    if m.type == "step":
        from .blocks import step

        return step(m.inlet_height, m.step_height, m.upstream_length, m.downstream_length,
                    m.cells_x, m.cells_y, m.grading)
    if m.type == "cylinder":
        from .cylinder import cylinder

        return cylinder(m.cells_around, m.grading, m.thickness, m.wake_refinement)
    from .blocks import box

    return box(m.cells, m.lengths, m.origin, m.grading)
