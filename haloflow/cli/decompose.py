"""``haloflow decompose CASE -n N -o DIR``: cut a case's mesh for N ranks once, on one process,
so that ``mpiexec -n N haloflow run CASE --decomposed DIR`` has every rank read its own part
(no rank builds or holds the whole mesh), as OpenFOAM's ``decomposePar`` does."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..mpiutil import UserError

EPILOG = """\
examples:
  haloflow decompose cavity -n 4 -o parts --set mesh.cells=[256,256,1]
  mpiexec -n 4 haloflow run cavity -o runs/a --decomposed parts --set mesh.cells=[256,256,1]

The parts follow the case's [parallel] decomposition and placement; node-aware placement
takes the nodes from [parallel] ranks_per_node (0: all ranks on one node).  A run refuses
the folder if its rank count, mesh section, mesh file or those keys differ.

exit codes: 0 written, 2 bad input (case, mesh, rank count, or an OUTDIR that is not empty).
"""


def add_parser(sub) -> None:
    p = sub.add_parser(
        "decompose", help="cut a case's mesh for N ranks into one file per rank",
        description="Partition a case's mesh for N ranks and write each rank's part, for "
                    "`haloflow run --decomposed`.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("case", help="built-in case name or path to a TOML case file")
    p.add_argument("-n", "--ranks", type=int, required=True, metavar="N",
                   help="the rank count of the runs that will read the parts")
    p.add_argument("-o", "--outdir", type=Path, required=True, metavar="DIR",
                   help="where to write (created; must be new or empty)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a case key, as for `haloflow run` (repeatable)")


def decompose(case, ranks: int, outdir: Path, log=print) -> dict:
    """Write ``outdir``'s parts and decomposition.json (last: a folder without it is no
    decomposition); returns the index written."""
    import numpy as np

    from ..parallel.decomposed import FORMAT, case_digest, write_part
    from ..parallel.local import build_local
    from ..run.setup import cut_mesh

    if ranks < 1:
        raise UserError(f"-n {ranks}: expected at least 1 rank")
    if outdir.exists() and (not outdir.is_dir() or any(outdir.iterdir())):
        raise UserError(f"{outdir}: exists and is not an empty folder (nothing is "
                        "overwritten): choose a new -o")
    pp = case.parallel.ranks_per_node
    nodes = np.arange(ranks) // pp if pp > 0 else np.zeros(ranks, np.int64)
    mesh, parts = cut_mesh(case, ranks, nodes, log)
    outdir.mkdir(parents=True, exist_ok=True)
    index = {"format": FORMAT, "case": case_digest(case), "ranks": ranks,
             "n_cells": int(mesh.n_cells), "n_faces": int(mesh.n_faces), "parts": []}
    for r in range(ranks):
        index["parts"].append(write_part(outdir, build_local(mesh, parts, r)))
    (outdir / "decomposition.json").write_text(json.dumps(index, indent=1) + "\n")
    sizes = np.bincount(parts, minlength=ranks)
    log(f"wrote {outdir}: {mesh.n_cells} cells on {ranks} ranks "
        f"({sizes.min()}-{sizes.max()} cells each)")
    return index


def main(args) -> int:
    """Entry point of ``haloflow decompose``."""
    from ..case import load_case
    from .errors import bad_input

    done = bad_input(lambda: decompose(load_case(args.case, list(args.overrides)), args.ranks,
                                       args.outdir), args.outdir)
    return 2 if done is None else 0
