"""OpenFOAM tutorials side by side: every tutorial the validation suite knows, haloflow on its
own polyMesh against the OpenFOAM solver's stored fields, cell for cell, with haloflow's
defaults and with OpenFOAM's discretisation (``solver.implicit_convection``,
``solver.ddt_corr``).  Prints the table and writes benchmarks/results/foam_tutorials.json.

    .venv/bin/python benchmarks/foam_tutorials.py

The references and how they were made: tests/data/elbow/README.md and
tests/data/icofoam_cavities/README.md.  No OpenFOAM is needed to run this.
"""

from __future__ import annotations

import json
import sys

from _common import REPO, RESULTS

sys.path.insert(0, str(REPO))  # the validation tests' data and reference helpers

from tests.validation import test_elbow as elbow  # noqa: E402
from tests.validation import test_icofoam_cavities as cavities  # noqa: E402

SETTINGS = {"defaults": (), "OpenFOAM's": cavities.OPENFOAM}


def rows() -> list[dict]:
    out = []
    tutorials = [("elbow", list(elbow.TIMES), lambda steps, *o: elbow.differences(steps, *o))]
    tutorials += [(name, list(times), lambda steps, *o, name=name:
                   cavities.differences(name, steps, *o))
                  for name, times in cavities.TIMES.items()]
    for name, steps_list, diff in tutorials:
        for label, overrides in SETTINGS.items():
            for steps in steps_list:
                du_max, du_rms, dp = diff(steps, *overrides)
                out.append({"tutorial": name, "discretisation": label, "steps": steps,
                            "U_max": du_max, "U_rms": du_rms, "p_max": dp})
    return out


def main() -> None:
    table = rows()
    print(f"{'tutorial':<14} {'discretisation':<15} {'steps':>5} {'max|dU|':>10} "
          f"{'rms|dU|':>10} {'max|dp|':>10}   (over max|U|, p over its range)")
    for r in table:
        print(f"{r['tutorial']:<14} {r['discretisation']:<15} {r['steps']:>5} "
              f"{r['U_max']:>10.2e} {r['U_rms']:>10.2e} {r['p_max']:>10.2e}")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "foam_tutorials.json").write_text(json.dumps(table, indent=1) + "\n")
    print(f"wrote {RESULTS / 'foam_tutorials.json'}")


if __name__ == "__main__":
    main()
