"""Where a rank's bytes per cell go: the live numpy arrays of a set-up run, grouped by owner.

Sets up the race's 3D cavity (1 rank) in this process, takes one step, and walks every array
reachable from the run (each buffer counted once, under the first path that reaches it),
printing bytes per owned cell by group and, with ``--detail``, per array; the resident set
against the live arrays shows what the arrays do not explain (numba's target and kernels,
modules, freed memory not returned).  Each figure comes twice: the arrays' size and the part
of it resident (``mincore``): pages of ``np.zeros`` that nothing has written yet cost
nothing, so an array sized for more than is used may cost less than its size says.

    .venv/bin/python benchmarks/memory_inventory.py 64 [--detail]
"""

from __future__ import annotations

import argparse
import ctypes
import mmap
import re
import types
from collections import defaultdict

import numpy as np

GROUPS = [  # first match wins: (group, path pattern)
    ("LocalMesh geometry", r"\.geometry\.|\.sf$"),
    ("LocalMesh topology and ids", r"\.(lm|topo)\.|gradient\._args\[[01]\]"),
    ("face coefficients", r"\.fc\.|gradient\._args\[[24]\]"),
    ("matrices (data, pattern)",
     r"\.(M|P|A)\.|pattern|levels\[0\]\.(data|indices|indptr|diag_pos)"),
    ("AMG hierarchy", r"amg"),
    ("Krylov workspace", r"\.ws\."),
    ("scratch", r"\.(work|rhs|diag|lower|upper)$"),
    ("fields and solver state", r""),
]


def cavity(n: int):
    from haloflow.case import load_case

    sets = [f"mesh.cells=[{n},{n},{n}]", "boundary.front.type=wall", "boundary.back.type=wall",
            "physics.nu=0.0025", f"solver.dt={0.5 / n}", "solver.end_time=100",
            "solver.steady_tol=0", "solver.time_scheme=euler", "solver.convection=linear",
            "solver.n_correctors=2", "solver.n_nonorth_correctors=0",
            "solver.pressure.tol=1e-6", "solver.pressure.rel_tol=0.01",
            "solver.pressure.final_rel_tol=0", 'solver.momentum.method="sgs"',
            "solver.momentum.tol=1e-5",
            "solver.momentum.rel_tol=0", "postprocess.cavity=false", "output.plots=false",
            "output.fields=false"]
    return load_case("cavity", sets)


def arrays(root) -> dict:
    """id of each base buffer -> (first path, bytes, array) over everything ``root`` holds."""
    seen, visited, stack = {}, set(), [(root, "run")]
    leaves = (int, float, str, bytes, bool, type, types.ModuleType, types.FunctionType)
    while stack:
        o, path = stack.pop()
        if isinstance(o, np.ndarray):
            b = o
            while isinstance(b.base, np.ndarray):
                b = b.base
            seen.setdefault(id(b), (path, b.nbytes, b))
            continue
        if o is None or isinstance(o, leaves) or id(o) in visited \
                or type(o).__module__.startswith(("numba", "mpi4py", "llvmlite")):
            continue
        visited.add(id(o))
        if isinstance(o, dict):
            stack += [(v, f"{path}[{k!r}]") for k, v in o.items()]
        elif isinstance(o, (list, tuple, set)):
            stack += [(v, f"{path}[{i}]") for i, v in enumerate(o)]
        else:
            d = getattr(o, "__dict__", None)
            if isinstance(d, dict):
                stack += [(v, f"{path}.{k}") for k, v in d.items()]
    return seen


def resident(a: np.ndarray) -> int:
    """Bytes of ``a``'s pages resident now (its size where ``mincore`` is missing)."""
    try:
        mincore = ctypes.CDLL(None).mincore
    except (OSError, AttributeError):
        return a.nbytes
    mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    start = a.ctypes.data // mmap.PAGESIZE * mmap.PAGESIZE
    length = a.ctypes.data + a.nbytes - start
    vec = np.zeros(max((length + mmap.PAGESIZE - 1) // mmap.PAGESIZE, 1), np.uint8)
    if a.nbytes == 0 or mincore(start, length, vec.ctypes.data) != 0:
        return a.nbytes
    return min(int((vec & 1).sum()) * mmap.PAGESIZE, a.nbytes)


def report(run, cells: int, tag: str, detail: bool, base: int) -> None:
    from haloflow.run.memory import MIB, peak_rss_bytes, rss_bytes

    seen = arrays(run)
    groups, res = defaultdict(int), defaultdict(int)
    for path, nbytes, a in seen.values():
        g = next(g for g, pat in GROUPS if re.search(pat, path))
        groups[g] += nbytes
        res[g] += resident(a)
    live, live_res = sum(groups.values()), sum(res.values())
    print(f"== {tag}: resident {rss_bytes() / MIB:.1f} MB (peak {peak_rss_bytes() / MIB:.1f}), "
          f"{(rss_bytes() - base) / cells:.0f} B/cell above the base; live arrays "
          f"{live / cells:.0f} B/cell, of which resident {live_res / cells:.0f}")
    print("  B/cell (resident)")
    for g, b in sorted(groups.items(), key=lambda x: -x[1]):
        print(f"  {b / cells:7.1f} ({res[g] / cells:6.1f})  {g}")
    if detail:
        for path, nbytes, a in sorted(seen.values(), key=lambda x: -x[1]):
            if nbytes / cells >= 2:
                print(f"     {nbytes / cells:7.1f} ({resident(a) / cells:6.1f}) {a.dtype} "
                      f"{a.shape} {path}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("n", type=int, nargs="?", default=64, help="cells per side (default 64)")
    ap.add_argument("--detail", action="store_true", help="list every array of 2 B/cell up")
    a = ap.parse_args()
    from mpi4py import MPI

    from haloflow.run.memory import MIB, return_freed_arrays, rss_bytes
    from haloflow.run.setup import set_threads, setup

    case = cavity(a.n)
    return_freed_arrays()
    set_threads(1)
    base = rss_bytes()
    print(f"base {base / MIB:.1f} MB")
    run = setup(case, MPI.COMM_SELF, 1, lambda s: None)
    cells = run.lmesh.n_owned
    report(run, cells, "after set-up", a.detail, base)
    run.solver.step()
    report(run, cells, "after step 1", a.detail, base)


if __name__ == "__main__":
    main()
