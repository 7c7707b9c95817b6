"""Where a run's steps go, kernel by kernel: every compiled function Python calls, timed.

Sets a case up on one rank (``haloflow run``'s own set-up), takes ``--warmup`` steps, then
wraps every numba dispatcher that haloflow's modules hold (and the compiled Krylov solve and
its refresh, which run as one call each: ``SOLVE``, ``REFRESH``) in a timer and takes
``--steps`` more.  Prints per kernel the microseconds per step, calls per step, the mean and
the least time per call; the least is what the machine's other jobs disturb least, so two
builds compare best by it (run each in turn).  Kernels that compiled code calls from
compiled code are inside their caller's time.

    .venv/bin/python benchmarks/kernel_times.py cavity --steps 20 --set mesh.cells=[48,48,48]

``--threads 2`` (with ``NUMBA_NUM_THREADS=2``) times a threaded rank's kernels the same way.
"""

from __future__ import annotations

import argparse
import collections
import importlib
import pkgutil
import time

from mpi4py import MPI
from numba.core.registry import CPUDispatcher

import haloflow
from haloflow.case import load_case

SKIP = (".cuda", "gpu", "__main__")  # modules that need a device or run a command


def import_all() -> None:
    for m in pkgutil.walk_packages(haloflow.__path__, "haloflow."):
        if not any(s in m.name for s in SKIP):
            importlib.import_module(m.name)


class Clock:
    """Seconds, calls and the least call of every wrapped function."""

    def __init__(self):
        self.total = collections.defaultdict(float)
        self.calls = collections.Counter()
        self.least = {}

    def wrap(self, fn, key):
        def timed(*a, **k):
            t0 = time.perf_counter()
            out = fn(*a, **k)
            dt = time.perf_counter() - t0
            self.total[key] += dt
            self.calls[key] += 1
            self.least[key] = min(self.least.get(key, dt), dt)
            return out

        return timed

    def clear(self) -> None:
        self.total.clear()
        self.calls.clear()
        self.least.clear()


def instrument(clock: Clock) -> None:
    """Every numba dispatcher a haloflow module holds, and the compiled solve's two calls."""
    import sys

    from haloflow.linalg import kcycle

    for name, mod in list(sys.modules.items()):
        if not name.startswith("haloflow"):
            continue
        for attr, obj in list(vars(mod).items()):
            if isinstance(obj, CPUDispatcher):
                key = f"{obj.__module__.replace('haloflow.', '')}.{obj.__name__}"
                setattr(mod, attr, clock.wrap(obj, key))
    kcycle.CompiledSolve.solve = clock.wrap(kcycle.CompiledSolve.solve, "SOLVE")
    kcycle.CompiledSolve.refresh = clock.wrap(kcycle.CompiledSolve.refresh, "REFRESH")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("case")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=8)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--threads", type=int, default=1,
                    help="threads of the rank (set NUMBA_NUM_THREADS to match)")
    a = ap.parse_args()
    from haloflow.run.setup import setup

    import_all()
    run = setup(load_case(a.case, a.set), MPI.COMM_SELF, a.threads, lambda *x, **k: None)
    for _ in range(a.warmup):
        run.solver.step()
    clock = Clock()
    instrument(clock)
    t0 = time.perf_counter()
    for _ in range(a.steps):
        run.solver.step()
    step = (time.perf_counter() - t0) / a.steps
    print(f"{1e3 * step:.3f} ms per step over {a.steps} steps")
    print(f"{'us/step':>10} {'calls':>6} {'us/call':>10} {'least':>10}  kernel")
    for key, s in sorted(clock.total.items(), key=lambda kv: -kv[1])[:a.top]:
        n = clock.calls[key]
        print(f"{1e6 * s / a.steps:10.1f} {n / a.steps:6.1f} {1e6 * s / n:10.1f} "
              f"{1e6 * clock.least[key]:10.1f}  {key}")


if __name__ == "__main__":
    main()
