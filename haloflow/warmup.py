"""Compile every numba kernel once into the on-disk cache, on up to two cores.

Run before launching many ranks (``python -m haloflow.warmup``): otherwise each rank compiles
the same kernels at the same time, which costs seconds per rank and races on the cache files.
The warm cases are shared out between ``--jobs`` processes (default: 2, or 1 on one core).
Each compiles a kernel only while holding that kernel's lock file, so a kernel two of them
need is compiled once: the second waits, then loads it from the cache.  The cache of other
versions of the sources beside this one's is removed first (:mod:`.kernel_cache`).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from . import kernel_cache

# AMG with a K-cycle level; overlapped SpMVs; PISO, BDF2 and SIMPLE; inlets, outlets,
# periodic pairs; momentum by symmetric Gauss-Seidel sweeps; LES closures, inflow
# fluctuations, van Driest
CASES = [
    ("cavity", ["mesh.cells=[80,80,1]", "solver.max_steps=2", "parallel.halo=packed"]),
    ("cavity", ["mesh.cells=[6,6,1]", "solver.max_steps=2", "parallel.halo=overlap"]),
    ("cavity", ["mesh.cells=[6,6,1]", "solver.max_steps=2", "solver.momentum.method=sgs"]),
    ("channel", ["mesh.cells=[12,4,1]", "solver.max_iterations=2"]),
    ("channel", ["mesh.cells=[12,4,1]", "solver.algorithm=piso", "solver.max_steps=2"]),
    ("taylor_green", ["mesh.cells=[6,6,1]", "solver.max_steps=3"]),  # periodic, BDF2
    *(("taylor_green_3d", ["mesh.cells=[4,4,4]", "solver.max_steps=2",
                           f'physics.closure="{c}"', "postprocess.averaging=true"])
      for c in ("smagorinsky", "wale", "kEqn", "dynamicSmagorinsky")),
    ("channel", ["mesh.cells=[12,4,1]", "solver.algorithm=piso", "solver.max_steps=2",
                 'physics.model="les"', 'physics.closure="kEqn"', "physics.van_driest=true",
                 "boundary.left.fluctuation=[0.02,0.01,0.0]"]),
    # the first case with Gauss-Seidel sweeps for the momentum: its pressure solve comes at
    # once (PARTS)
    ("cavity", ["mesh.cells=[80,80,1]", "solver.max_steps=2", "parallel.halo=packed",
                "solver.momentum.method=sgs"]),
    # the other built-in cases' kernels and the other pressure solvers: temperature (a
    # limited scheme), checkpoints and OpenFOAM's residual measure; non-orthogonal
    # corrections and wall forces; Spalart-Allmaras and linear-upwind; least-squares
    # gradients and OpenFOAM's transpose stress; Jacobi-preconditioned CG, single-reduction
    # and pipelined CG, also AMG-preconditioned
    ("heated_cavity", ["mesh.cells=[8,8,1]", "solver.max_iterations=2",
                       "solver.convection_T=van-leer", "output.checkpoint_every=1",
                       "solver.pressure.method=cg-jacobi", "solver.residual_norm=normalised"]),
    ("cylinder", ["mesh.cells_around=16", "solver.max_iterations=2",
                  "solver.pressure.method=cg-jacobi"]),
    ("flat_plate", ["solver.max_iterations=2", "solver.pressure.method=cg-jacobi"]),
    ("channel", ["mesh.cells=[12,4,1]", "solver.max_iterations=2",
                 "solver.gradient=least-squares", "solver.pressure.method=cg1-jacobi",
                 "solver.transpose_stress=true"]),
    ("channel", ["mesh.cells=[12,4,1]", "solver.algorithm=piso", "solver.max_steps=2",
                 "solver.convection=linear-upwind", "solver.pressure.method=pipecg-jacobi"]),
    ("cavity", ["mesh.cells=[8,8,1]", "solver.max_steps=2", "solver.pressure.method=amg-cg1"]),
    ("cavity", ["mesh.cells=[8,8,1]", "solver.max_steps=2",
                "solver.pressure.method=amg-pipecg"]),
]
# The cases of each of two processes.  Nearly all the compile time goes to two kernels met in
# the first step of a case: the compiled pressure solve with the AMG (FCG, about half of it)
# and the momentum solve (BiCGStab, about a sixth).  The second process starts with the case
# above that reaches the former first (the first case's mesh, so the same AMG hierarchy,
# without BiCGStab), while the first compiles the halo kernels, the momentum solve and the
# kernels of the cases whose pressure solves need no AMG; the other cases, shared out,
# mostly load what these compiled from the cache.
PARTS = [[12, 13, 14, 15, 16, 17, 0, 1, 2, 3, 4, 5], [11, 6, 7, 8, 9, 10, 18]]


def warm(cases: list[int] | None = None, halo_kernels: bool = True) -> None:
    """Run the warm cases (indices into ``CASES``; default: all) and the halo kernels."""
    from mpi4py import MPI

    from .case import load_case
    from .parallel import halo
    from .run import balance, run_case

    if halo_kernels:
        halo.warm()
        balance.warm()
    for i in range(len(CASES)) if cases is None else cases:
        name, overrides = CASES[i]
        case = load_case(name, overrides + ["output.plots=false", "output.fields=false"])
        with tempfile.TemporaryDirectory(prefix="haloflow-warmup-") as tmp:
            run_case(case, Path(tmp) / "run", MPI.COMM_SELF, quiet=True)


def warm_case(source: str, overrides: list[str], jobs: int) -> int:
    """Compile what one case needs (``make run``): its first two steps or iterations on one
    rank, and the halo kernels its ranks add, so that they load every kernel instead of
    compiling it each at once.  With two jobs the second process runs the case with
    Gauss-Seidel sweeps for the momentum, so that it compiles the pressure solve (about
    half of all the compile time) while the first compiles the momentum solve."""
    from .case import load_case

    t0 = time.perf_counter()
    load_case(source, overrides)  # a bad case: its one-line error before any process starts
    print(f"compiling the kernels {source} needs into {os.environ['NUMBA_CACHE_DIR']} "
          "(once for these sources: about 3 minutes on two cores)", flush=True)
    with _heartbeat(t0):
        if jobs <= 1:
            _warm_case_part(source, overrides, 0)
        else:
            sets = [x for o in overrides for x in ("--set", o)]
            with tempfile.TemporaryDirectory(prefix="haloflow-warmup-locks-") as locks:
                procs = [subprocess.Popen([sys.executable, "-m", "haloflow.warmup", "--case",
                                           source, *sets, "--part", str(i), "--locks", locks])
                         for i in range(2)]
                code = next((c for c in [proc.wait() for proc in procs] if c), 0)
            if code:  # the process said why
                return code
    print(f"kernels ready ({time.perf_counter() - t0:.0f} s)", flush=True)
    return 0


@contextlib.contextmanager
def _heartbeat(t0: float, every: float = 30.0):
    """A line every ``every`` seconds while the kernels compile (numba says nothing until
    it is done), so that a first ``make run`` is not minutes of silence."""
    stop = threading.Event()

    def beat():
        while not stop.wait(every):
            print(f"  still compiling ({time.perf_counter() - t0:.0f} s)", flush=True)

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def _warm_case_part(source: str, overrides: list[str], part: int) -> None:
    """Part 0: the halo kernels and the case; part 1: the case with sweeps for the
    momentum (the same pressure solve, reached without compiling BiCGStab first)."""
    from mpi4py import MPI

    from .case import CaseError, load_case
    from .parallel import halo
    from .run import run_case

    if part == 0:
        halo.warm()
    case = load_case(source, overrides)
    extra = ["solver.max_iterations=2" if case.solver.algorithm == "simple" else
             "solver.max_steps=2", "output.plots=false", "output.fields=false"]
    if part == 1:
        extra.append("solver.momentum.method=sgs")
    try:
        case = load_case(source, [*overrides, *extra])
    except CaseError:  # the sweeps do not apply to this case: the case as it is
        case = load_case(source, [*overrides, *extra[:-1]])
    with tempfile.TemporaryDirectory(prefix="haloflow-warmup-") as tmp:
        run_case(case, Path(tmp) / "run", MPI.COMM_SELF, quiet=True)


def lock_file(lock_dir: str, fn) -> Path:
    """The lock file of a kernel's Python function."""
    code = fn.__code__
    name = f"{code.co_filename}:{code.co_firstlineno}:{fn.__qualname__}"
    return Path(lock_dir, hashlib.sha1(name.encode()).hexdigest())


def lock_compiles(lock_dir: str) -> None:
    """From now on this process compiles a kernel only while holding its lock file in
    ``lock_dir`` (an exclusive ``flock``), which other processes calling this take too.

    One lock per Python function, whatever its signatures or builds (they share the cache's
    index file).  numba looks in the cache before compiling, so the process that waited loads
    what the other compiled.  A function compiled while compiling itself (recursion) keeps
    the lock it holds."""
    import fcntl

    from numba.core.dispatcher import Dispatcher

    compile_ = Dispatcher.compile
    held: set[Path] = set()

    def compile_locked(self, sig):
        path = lock_file(lock_dir, self.py_func)
        if path in held:
            return compile_(self, sig)
        with open(path, "w") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            held.add(path)
            try:
                return compile_(self, sig)
            finally:
                held.discard(path)

    Dispatcher.compile = compile_locked


def _default_jobs() -> int:
    from .run.setup import usable_cores

    return max(1, min(len(PARTS), usable_cores()))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m haloflow.warmup", description=__doc__)
    p.add_argument("--jobs", type=int, default=_default_jobs(),
                   help=f"processes: 1, or {len(PARTS)} sharing the cases (default "
                        f"{_default_jobs()}: the cores this process may use, at most "
                        f"{len(PARTS)})")
    p.add_argument("--case", metavar="CASE",
                   help="only what this case (a built-in name or a TOML file) needs, with "
                        "--set overrides: what `make run` compiles")
    p.add_argument("--set", dest="overrides", action="append", default=[],
                   metavar="KEY=VALUE", help="with --case: an override, as for `haloflow run`")
    p.add_argument("--part", type=int, help=argparse.SUPPRESS)  # one process's share
    p.add_argument("--locks", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.part is not None:
        lock_compiles(args.locks)
        if args.case is not None:
            _warm_case_part(args.case, args.overrides, args.part)
        else:
            warm(PARTS[args.part], halo_kernels=args.part == 0)
        return 0
    # the kernels of other sources would never load again (kernel_cache.py)
    kernel_cache.prune(Path(os.environ["NUMBA_CACHE_DIR"]))
    if args.case is not None:
        from .case import CaseError
        from .mpiutil import UserError

        try:
            return warm_case(args.case, args.overrides, args.jobs)
        except (CaseError, UserError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    if args.jobs <= 1:
        warm()
        return 0
    with tempfile.TemporaryDirectory(prefix="haloflow-warmup-locks-") as locks:
        procs = [subprocess.Popen([sys.executable, "-m", "haloflow.warmup", "--part", str(i),
                                   "--locks", locks]) for i in range(len(PARTS))]
        codes = [proc.wait() for proc in procs]
    return next((c for c in codes if c), 0)


if __name__ == "__main__":
    sys.exit(main())
