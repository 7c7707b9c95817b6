"""``haloflow foam-case DIR``: an OpenFOAM case directory written as a haloflow case file,
its mesh read in place, with one line for each setting that does not map."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from ..mpiutil import one_line

EPILOG = """\
examples:
  haloflow foam-case $FOAM_TUTORIALS/incompressible/icoFoam/cavity/cavity -o cavity.toml
  haloflow run cavity.toml

Reads system/controlDict, fvSchemes, fvSolution, constant/transportProperties and the 0/U
and 0/p boundary conditions (docs/case-reference.md, "OpenFOAM cases").  The file names the
mesh by its path relative to the case file.

exit codes: 0 written, 2 bad input (a file that cannot be read or mapped, or an output
file that exists: nothing is overwritten).
"""


def add_parser(sub) -> None:
    p = sub.add_parser(
        "foam-case", help="write an OpenFOAM case directory as a haloflow case file",
        description="Map an OpenFOAM case (icoFoam, pisoFoam, pimpleFoam, simpleFoam; "
                    "laminar) onto a haloflow case file.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("folder", type=Path, metavar="DIR", help="the OpenFOAM case directory")
    p.add_argument("-o", "--output", type=Path, metavar="FILE",
                   help="the case file to write (default: DIR/haloflow.toml; never "
                        "overwritten)")


def write_case(folder: Path, output: Path) -> list[str]:
    """Write ``output`` from OpenFOAM case ``folder`` (checked by loading it back first);
    returns the notes on what did not map."""
    import tomli_w

    from ..case import load_case
    from ..case.foam_case import read_foam_case
    from ..mpiutil import UserError

    if output.exists():
        raise UserError(f"{output}: exists (nothing is overwritten): choose another -o")
    case, notes = read_foam_case(folder, output.parent)
    head = [f"# OpenFOAM case {folder}, mapped by `haloflow foam-case`."]
    head += [f"# not mapped: {n}" for n in notes]
    text = "\n".join(head) + "\n\n" + tomli_w.dumps(case)
    tmp = output.with_name(f".{output.stem}.{os.getpid()}.tmp{output.suffix}")
    try:
        tmp.write_text(text)
        load_case(tmp)  # the case must load as written, or nothing is left behind
        os.link(tmp, output)  # fails where output appeared meanwhile: never overwritten
    finally:
        tmp.unlink(missing_ok=True)
    return notes


def main(args) -> int:
    """Entry point of ``haloflow foam-case``."""
    from .errors import bad_input

    output = args.output or args.folder / "haloflow.toml"
    notes = bad_input(lambda: write_case(args.folder, output), output)
    if notes is None:
        return 2
    for n in notes:
        print(one_line(f"not mapped: {n}"))
    print(f"wrote {output}")
    return 0
