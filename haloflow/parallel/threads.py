"""Serial or threaded builds of the vector and SpMV kernels, chosen once per run.

A numba ``parallel=True`` kernel starts its thread pool on every call.  With one thread per
rank, the layout that uses a machine best (DESIGN.md section 8), that costs 3-10 % of a
cavity step against plain compiled loops (128², 1 rank: 0.049 against 0.054 s/step, A/B
in one session); with two threads on a small mesh the launches cost more than the second core
brings (128²: 0.11-0.15 s/step).  So every such
kernel is compiled both ways, the serial build is bound by default, and ``use_threads``
binds the threaded builds only when a rank has threads to spare and rows enough to share.
Callers look the kernels up as module globals at call time, so rebinding the module names is
all it takes; kernels must not call one another from compiled code.
"""

from __future__ import annotations

import os
import types

import numba as nb

# rows per rank below which threads cost more than they bring: cavity, 1 rank, 1 vs 2
# threads: 65 536 rows 0.30 vs 0.29-0.31 s/step, 262 144 rows 1.37 vs 1.15 s/step.
# HALOFLOW_THREAD_MIN_ROWS overrides it, so that tests can run the threaded builds on a small
# mesh (it changes speed only, never results beyond the order of threaded sums).
MIN_ROWS = int(os.environ.get("HALOFLOW_THREAD_MIN_ROWS", 100_000))

_KERNELS: list[tuple[dict, str, object, object]] = []
_bound = {"threaded": False}  # what use_threads bound last: a kernel imported later follows


def kernel(fn):
    """Compile ``fn`` serially and threaded; the build ``use_threads`` chose last is bound
    (serial until it is called), also for kernels whose module is imported after it."""
    threaded = nb.njit(cache=True, parallel=True)(fn)
    twin = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__,
                              fn.__closure__)
    twin.__qualname__ = f"{fn.__qualname__}_serial"  # its own entry in numba's cache
    twin.__module__, twin.__doc__ = fn.__module__, fn.__doc__
    serial = nb.njit(cache=True)(twin)
    _KERNELS.append((fn.__globals__, fn.__name__, serial, threaded))
    return threaded if _bound["threaded"] else serial


def threaded() -> bool:
    """Whether the threaded builds are bound now (compiled solvers that loop serially step
    aside then)."""
    return _bound["threaded"]


def use_threads(threads: int, rows: int) -> bool:
    """Bind the threaded kernels if ``threads`` > 1 and ``rows`` >= MIN_ROWS, else the
    serial ones; returns whether threaded kernels are now bound."""
    on = threads > 1 and rows >= MIN_ROWS
    _bound["threaded"] = on
    for module, name, serial, threaded in _KERNELS:
        module[name] = threaded if on else serial
    return on
