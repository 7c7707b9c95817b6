"""The one-line errors of the commands that write files (``decompose``, ``foam-case``)."""

from __future__ import annotations

import sys
from pathlib import Path

from ..mpiutil import one_line


def bad_input(run, written: Path):
    """``run()``'s result, or None after a one-line error on stderr for bad input (a case,
    mesh or usage error) or a file that cannot be written (``written``: the path to name
    where the error names none); the caller exits 2 on None."""
    from ..case import CaseError
    from ..mpiutil import UserError

    try:
        return run()
    except (UserError, CaseError) as e:
        sys.stderr.write(one_line(f"haloflow: error: {e}") + "\n")
    except OSError as e:
        sys.stderr.write(one_line(f"haloflow: error: {e.filename or written}: cannot write "
                                  f"({e.strerror})") + "\n")
    return None
