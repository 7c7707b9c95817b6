"""Signed against unsigned entry indices in the CSR row loops (the Gauss-Seidel sweep, the
product, the residual) on a 7-point Laplacian.

numba adds a test for negative values to every signed array index (Python's wraparound);
an index it knows to be unsigned has none.  haloflow's kernels (``linalg/amg.py``: unsigned)
run in turn with copies of them as they were, with signed indices (the same arithmetic in
the same order, so the same bits, checked), in one process; the least time of ``--repeat``
calls of each is kept, which the machine's other jobs disturb least.  Prints the times and
ratios; writes JSON (default benchmarks/results/row_loops.json).

    .venv/bin/python benchmarks/row_loops.py [--cells 64] [--repeat 150]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numba as nb
import numpy as np

from haloflow.linalg import amg


@nb.njit
def gs_signed(ip, ix, a, diag_pos, dinv, b, x, n, forward):
    for i in range(n):
        s = b[i]
        for k in range(ip[i], ip[i + 1]):
            s -= a[k] * x[ix[k]]
        x[i] += s * dinv[i]


@nb.njit
def spmv_signed(ip, ix, a, x, y):
    for i in range(len(ip) - 1):
        s = 0.0
        for k in range(ip[i], ip[i + 1]):
            s += a[k] * x[ix[k]]
        y[i] = s


@nb.njit
def residual_signed(ip, ix, a, x, b, r):
    for i in range(len(ip) - 1):
        s = b[i]
        for k in range(ip[i], ip[i + 1]):
            s -= a[k] * x[ix[k]]
        r[i] = s


def laplacian(m: int):
    """CSR of the 7-point Laplacian on m^3 cells (64-bit row pointers, 32-bit columns, as
    haloflow stores them), columns sorted."""
    n = m ** 3
    idx = np.arange(n).reshape(m, m, m)
    rows, cols = [idx.ravel()], [idx.ravel()]
    for axis in range(3):
        for shift in (-1, 1):
            nb_ = np.roll(idx, shift, axis=axis)
            keep = np.ones_like(idx, dtype=bool)
            sl = [slice(None)] * 3
            sl[axis] = 0 if shift == 1 else m - 1
            keep[tuple(sl)] = False
            rows.append(idx[keep])
            cols.append(nb_[keep])
    r, c = np.concatenate(rows), np.concatenate(cols)
    order = np.lexsort((c, r))
    r, c = r[order], c[order]
    a = np.where(r == c, 6.0, -1.0)
    ip = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(r, minlength=n), out=ip[1:])
    return ip, c.astype(np.int32), a


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", type=int, default=64, help="cells per edge (default 64)")
    ap.add_argument("--repeat", type=int, default=150)
    ap.add_argument("-o", "--output", type=Path, default=Path("benchmarks/results/row_loops.json"))
    a = ap.parse_args()
    ip, ix, data = laplacian(a.cells)
    n = len(ip) - 1
    rng = np.random.default_rng(0)
    b, x = rng.random(n), rng.random(n)
    dinv = 1.0 / np.full(n, 6.0)
    diag = np.zeros(n, dtype=np.int64)  # (the sweep does not read it)
    out = {s: np.zeros(n) for s in ("signed", "unsigned")}
    def sweep(f, o):
        o[:] = x  # every sweep from the same start, so that both give the same bits
        f(ip, ix, data, diag, dinv, b, o, n, True)

    pairs = {
        "Gauss-Seidel sweep": (gs_signed, amg.gs_sweep, sweep),
        "product": (spmv_signed, amg.spmv, lambda f, o: f(ip, ix, data, x, o)),
        "residual": (residual_signed, amg.residual, lambda f, o: f(ip, ix, data, x, b, o)),
    }
    rows = []
    print(f"{a.cells}^3 Laplacian, {n} rows, least of {a.repeat} calls each")
    for name, (signed, unsigned, call) in pairs.items():
        for f, key in ((signed, "signed"), (unsigned, "unsigned")):
            call(f, out[key])  # compiled before timing
        assert np.array_equal(out["signed"], out["unsigned"]), name
        best = {"signed": np.inf, "unsigned": np.inf}
        for _ in range(a.repeat):
            for f, key in ((signed, "signed"), (unsigned, "unsigned")):
                t = time.perf_counter()
                call(f, out[key])
                best[key] = min(best[key], time.perf_counter() - t)
        ratio = best["unsigned"] / best["signed"]
        rows.append({"kernel": name, "signed_ms": 1e3 * best["signed"],
                     "unsigned_ms": 1e3 * best["unsigned"], "ratio": ratio})
        print(f"{name:<20} signed {1e3 * best['signed']:7.3f} ms  unsigned "
              f"{1e3 * best['unsigned']:7.3f} ms  ratio {ratio:.3f}")
    a.output.parent.mkdir(parents=True, exist_ok=True)
    a.output.write_text(json.dumps({"cells": a.cells ** 3, "repeat": a.repeat, "rows": rows},
                                   indent=2) + "\n")
    print(f"written {a.output}")


if __name__ == "__main__":
    main()
