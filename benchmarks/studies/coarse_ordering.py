"""The coarsest AMG level's elimination order: our minimum degree against SuperLU's.

For each case, one step builds the pressure hierarchy; on its coarsest level this prints the
entries of the Cholesky factor L under ``linalg.cholesky.minimum_degree`` (what runs use up
to ``MAX_OWN_ORDER`` rows) and under SuperLU's multiple minimum degree on A + A' (what they
used before), and the time each ordering takes.  Fewer entries: a cheaper factorisation and
coarse solve.  Writes JSON (default benchmarks/results/coarse_ordering.json).

    .venv/bin/python benchmarks/studies/coarse_ordering.py
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from mpi4py import MPI

from haloflow.case import load_case
from haloflow.linalg import cholesky
from haloflow.run.setup import setup

WALLS = ["boundary.front.type=wall", "boundary.back.type=wall"]
CASES = {
    "pitzdaily": ("pitzdaily", []),
    "cavity 256^2": ("cavity", ["mesh.cells=[256,256,1]"]),
    "cavity 32^3": ("cavity", ["mesh.cells=[32,32,32]", *WALLS]),
    "cavity 64^3": ("cavity", ["mesh.cells=[64,64,64]", *WALLS]),
}


def timed(fn, *args):
    t = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - t


def row(name: str, source: str, sets: list[str]) -> dict:
    run = setup(load_case(source, [*sets, "output.fields=false"]), MPI.COMM_SELF, 1,
                lambda s: None)
    run.solver.step()  # the hierarchy is built from the first pressure matrix
    lev = run.solver.p_amg.levels[-1]
    ip, ix, n = lev.indptr, lev.indices, lev.n
    cholesky.minimum_degree(ip, ix, n)  # compiled (or loaded) before it is timed
    own, t_own = timed(cholesky.minimum_degree, ip, ix, n)
    mmd, t_mmd = timed(cholesky.superlu_order, ip, ix, n)
    nnz = {k: len(cholesky.symbolic(ip, ix, n, o)[2]) for k, o in (("own", own), ("mmd", mmd))}
    return {"case": name, "rows": n, "nnz_A": len(ix), "nnz_L_own": nnz["own"],
            "nnz_L_superlu": nnz["mmd"], "ratio": nnz["own"] / nnz["mmd"],
            "order_s_own": t_own, "order_s_superlu": t_mmd}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", type=Path,
                    default=Path("benchmarks/results/coarse_ordering.json"))
    a = ap.parse_args()
    rows = [row(name, *spec) for name, spec in CASES.items()]
    print(f"{'case':<14} {'rows':>6} {'nnz(A)':>7} {'nnz(L) own':>11} {'SuperLU':>8} "
          f"{'ratio':>6} {'own ms':>7} {'SuperLU ms':>10}")
    for r in rows:
        print(f"{r['case']:<14} {r['rows']:>6} {r['nnz_A']:>7} {r['nnz_L_own']:>11} "
              f"{r['nnz_L_superlu']:>8} {r['ratio']:>6.3f} {1e3 * r['order_s_own']:>7.2f} "
              f"{1e3 * r['order_s_superlu']:>10.2f}")
    a.output.parent.mkdir(parents=True, exist_ok=True)
    a.output.write_text(json.dumps({"rows": rows}, indent=2) + "\n")
    print(f"written {a.output}")


if __name__ == "__main__":
    main()
