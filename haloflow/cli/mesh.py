"""``haloflow mesh check|convert``: look at a mesh before running a case on it."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from types import SimpleNamespace

from ..mesh import MeshError
from ..mpiutil import one_line

SOURCE_HELP = ("a Gmsh .msh file, an OpenFOAM case or polyMesh directory (or its .foam "
               "file), a case file (.toml) or a built-in case name")

EPILOG = """\
examples:
  haloflow mesh check constant/polyMesh       # or the OpenFOAM case directory
  haloflow mesh check wing.msh                # 2D meshes are extruded one cell thick
  haloflow mesh check my_case.toml            # the mesh the case would run on
  haloflow mesh convert wing.msh wing.vtu     # for ParaView: volume, non-orthogonality, skewness

exit codes: 0 mesh OK (check) or written (convert), 1 the mesh is broken,
2 bad input (no such file, unreadable mesh or case).
"""


def add_parser(sub) -> None:
    p = sub.add_parser(
        "mesh", help="check a mesh like checkMesh, or convert it to .vtu",
        description="Read an OpenFOAM polyMesh, a Gmsh file or a case's mesh; report its "
                    "quality or write it for viewing.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    actions = p.add_subparsers(dest="mesh_action", metavar="ACTION", required=True)
    c = actions.add_parser(
        "check", help="sizes, patches, volumes, non-orthogonality, skewness, open and "
                      "inside-out cells (exit 1 if broken)",
        description="Report a mesh's quality the way OpenFOAM's checkMesh does; exit 1 "
                    "with the reasons when the solver could not trust it.")
    c.add_argument("source", help=SOURCE_HELP)
    v = actions.add_parser(
        "convert", help="write the mesh as one .vtu with per-cell quality",
        description="Write the mesh as a single .vtu (ParaView) with cell_volume, "
                    "non_orthogonality, skewness and openness as cell data.")
    v.add_argument("source", help=SOURCE_HELP)
    v.add_argument("output", type=Path, help="the .vtu file to write")
    v.add_argument("--force", action="store_true", help="overwrite the output if it exists")


def load(source: str):
    """(mesh, the reader's notes, a label) for any source ``haloflow mesh`` accepts."""
    from ..case import builtin_cases, load_case
    from ..mesh import from_case, read_mesh

    path = Path(source)
    notes: list[str] = []
    if path.suffix.lower() == ".toml" or (not path.exists() and source in builtin_cases()):
        case = load_case(source)
        what = case.mesh.file if case.mesh.type == "file" else case.mesh.type
        return from_case(case.mesh, notes), notes, f"case {case.name}: {what}"
    if not path.exists():
        raise MeshError(f"{source}: no such file, directory or built-in case (built-in cases: "
                        f"{', '.join(builtin_cases())})")
    return read_mesh(path, notes), notes, str(path)


def _check(mesh, notes, label) -> int:
    from ..mesh.quality import check

    rep = check(mesh, notes)
    print(f"Mesh {label}")
    for line in rep.lines():
        print(line)
    if not rep.ok:
        sys.stderr.write(one_line(f"haloflow: mesh is broken: {'; '.join(rep.problems)}") + "\n")
        return 1
    return 0


def _convert(mesh, notes, out: Path, force: bool = False) -> int:
    from ..io.vtk import write_vtu
    from ..mesh.quality import cell_fields, topology_problems

    if out.suffix.lower() != ".vtu":
        raise MeshError(f"{out}: the output must be a .vtu file")
    if (out.exists() or out.is_symlink()) and not force:
        raise MeshError(f"{out}: exists; pass --force to overwrite it")
    if out.is_dir():
        raise MeshError(f"{out}: is a directory")
    probs = topology_problems(mesh)
    if probs:
        sys.stderr.write(one_line(f"haloflow: mesh is broken: {'; '.join(probs)}") + "\n")
        return 1
    for n in notes:
        print(f"warning: {n}")
    view = SimpleNamespace(n_owned=mesh.n_cells, points=mesh.points, face_ptr=mesh.face_ptr,
                           face_nodes=mesh.face_nodes, owner=mesh.owner,
                           neighbour=mesh.neighbour, shadow_nodes=mesh.shadow_nodes)
    try:  # written whole or not at all (write_vtu renames a finished temporary file)
        out.parent.mkdir(parents=True, exist_ok=True)
        write_vtu(str(out), view, cell_fields(mesh))
    except OSError as e:
        raise MeshError(f"{out}: cannot write ({e.strerror})") from None
    print(f"wrote {out}: {mesh.n_cells} cells, {len(mesh.points)} points")
    return 0


def main(args) -> int:
    """Entry point of ``haloflow mesh``."""
    from ..case import CaseError

    try:
        mesh, notes, label = load(args.source)
        if args.mesh_action == "check":
            return _check(mesh, notes, label)
        return _convert(mesh, notes, args.output, args.force)
    except (MeshError, CaseError) as e:
        sys.stderr.write(one_line(f"haloflow: error: {e}") + "\n")
        return 2
