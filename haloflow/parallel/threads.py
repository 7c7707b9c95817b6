"""Serial or threaded builds of the vector and SpMV kernels, chosen once per run.

A numba ``parallel=True`` kernel starts its thread pool on every call.  With one thread per
rank, the layout that uses a machine best (docs/design.md, section 11), that costs 3-10 % of a
cavity step against plain compiled loops (128², 1 rank: 0.049 against 0.054 s/step, A/B
runs taking turns); with two threads on a small mesh the launches cost more than the second core
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
# rows of one AMG level (or one lockstep solve) from which a compiled solver that runs
# threaded hands it to its thread blocks.  A Gauss-Seidel sweep over 8 192 rows of a 7-point
# Laplacian takes 65 us on one thread here and a launch a few (a sleeping thread's wake-up
# 10-80 us on this VM), and the coarser levels are visited most often.  Measured in one
# process, the same pressure solves timed with levels switched to serial in turn (64^3
# cavity, 1 rank x 2 threads, levels of 262 144, 65 536, 16 384, 4 096 and 1 024 rows):
# threading the 16 384-row level as well as the two finer ones saved 2-10 % of the solve,
# the 4 096-row level -4 to +6 %, the 1 024-row level nothing or less
# (benchmarks/thread_levels.py; docs/performance.md, "Threads").  Never more than
# MIN_ROWS, so that lowering it for tests reaches the levels too.
LEVEL_MIN_ROWS = min(MIN_ROWS, 8192)

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
    """Whether the threaded builds are bound now (compiled solvers then run their thread
    blocks' kernels, :mod:`haloflow.linalg.blocks`)."""
    return _bound["threaded"]


def blocks() -> int:
    """Thread blocks a compiled solver splits its rows into: numba's threads while the
    threaded builds are bound, else 1 (the serial loops)."""
    return nb.get_num_threads() if _bound["threaded"] else 1


def use_threads(threads: int, rows: int) -> bool:
    """Bind the threaded kernels if ``threads`` > 1 and ``rows`` >= MIN_ROWS, else the
    serial ones; returns whether threaded kernels are now bound."""
    on = threads > 1 and rows >= MIN_ROWS
    _bound["threaded"] = on
    for module, name, serial, threaded in _KERNELS:
        module[name] = threaded if on else serial
    return on


# the phases whose hot loops run on thread blocks when a rank is threaded: the pressure solve
# (the AMG levels under LEVEL_MIN_ROWS rows and the coarsest solve excepted) and the momentum
# solve; assembly and halo exchanges run on one thread, and so does "fluxes" but for the
# pressure equation's Gauss face loops (parallel/faceblocks.py), which this account leaves out
THREADED_PHASES = ("solve_p", "solve_U")


def account(prof: dict, threads: int, on: bool, wait: str | None = None) -> dict:
    """profile.json's "threads": the seconds per step of the phases that use the threads,
    their fraction of the step and the speedup that fraction allows if those phases scaled
    perfectly (Amdahl: an upper bound); and, from CPU times, which a busy machine distorts
    far less than wall time, the process's CPU seconds per step (the work of all threads)
    and those of the thread running the loop (the serial parts plus its own block: the
    critical path where waiting threads sleep).  ``utilisation`` = work / (threads x
    critical path): the share of the threads' time spent working.  The speedup over one
    thread is one thread's work over this critical path: benchmarks/threads.py.  ``wait``:
    the OpenMP wait policy the run's threads had (``active``: spinning threads count their
    waits as CPU time, so the utilisation then overstates the work)."""
    steps = max(prof["steps"], 1)
    step = prof["s_per_step"]
    per = {k: prof["phases"][k]["mean"] / steps for k in THREADED_PHASES if k in prof["phases"]}
    f = min(sum(per.values()) / step, 1.0) if on and step > 0 else 0.0
    work = prof["cpu_s"]["mean"] / steps
    path = prof["main_thread_cpu_s"]["mean"] / steps
    return {"threads": threads, "threaded": on, "min_rows": MIN_ROWS,
            "level_min_rows": LEVEL_MIN_ROWS, "threaded_phases_s_per_step": per,
            "threaded_fraction": f, "bound_speedup": 1.0 / ((1.0 - f) + f / threads),
            "cpu_s_per_step": work, "main_thread_cpu_s_per_step": path,
            "utilisation": work / (threads * path) if path > 0 else 1.0, "wait_policy": wait}
