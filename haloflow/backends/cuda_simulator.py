"""numba's CUDA simulator without a Python thread per simulated thread.

The simulator runs every thread of a block as a Python thread, so that ``syncthreads`` can
stop it until the block's other threads arrive; starting, switching and joining those
threads is most of a simulated launch.  A kernel that never synchronises (no
``syncthreads`` and no shared array, in it or in a device function it calls) cannot depend
on the order its threads run in, on a GPU or here: its block runs here one thread after
another on the caller's thread, which gives the same values.  Kernels that do synchronise,
and debug launches, run as numba runs them.  :func:`install` does nothing where numba's
simulator is not laid out as this module expects.
"""

from __future__ import annotations

import threading
import types

import numpy as np

SYNCHRONISING = frozenset({"syncthreads", "syncthreads_count", "syncthreads_and",
                           "syncthreads_or", "shared"})


def _names(code: types.CodeType) -> set[str]:
    """Every global and attribute name ``code`` and the functions defined in it use."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names(const)
    return names


def _callees(fn, names: set[str], kernel_type) -> list:
    """The simulated device functions ``fn`` can reach by those names: its globals, its
    closure, and attributes of the modules among them."""
    closure = [c.cell_contents for c in fn.__closure__ or () if _filled(c)]
    values = [fn.__globals__.get(n) for n in names] + closure
    modules = [v for v in values if isinstance(v, types.ModuleType)]
    values += [getattr(m, n, None) for m in modules for n in names]
    return [v.fn for v in values if isinstance(v, kernel_type)]


def _filled(cell) -> bool:
    try:
        _ = cell.cell_contents
    except ValueError:  # a closure variable not assigned yet
        return False
    return True


def synchronises(fn, kernel_type, seen: set | None = None) -> bool:
    """Whether the kernel ``fn`` or a device function it calls synchronises its block."""
    seen = set() if seen is None else seen
    if id(fn) in seen:
        return False
    seen.add(id(fn))
    names = _names(fn.__code__)
    return bool(names & SYNCHRONISING) or any(
        synchronises(callee, kernel_type, seen) for callee in _callees(fn, names, kernel_type))


def install() -> bool:
    """Run the blocks of kernels that never synchronise on the calling thread; ``False``
    where the simulator is not the one this module knows (it is then left as it is)."""
    try:
        from numba.cuda.simulator import kernel as sim
    except ImportError:
        return False
    manager = getattr(sim, "BlockManager", None)
    if manager is None or not hasattr(sim, "FakeCUDAKernel") or not hasattr(sim, "Dim3"):
        return False
    if getattr(manager.run, "sequential", False):
        return True
    threaded = manager.run
    verdicts: dict[int, bool] = {}  # id(kernel function) -> synchronises

    def run(self, grid_point, *args):
        f = self._f
        sync = verdicts.get(id(f))
        if sync is None:
            sync = verdicts[id(f)] = synchronises(f, sim.FakeCUDAKernel)
        if sync or self._debug:
            return threaded(self, grid_point, *args)
        return _run_in_order(sim, self, grid_point, args)

    run.sequential = True
    manager.run = run
    return True


def _run_in_order(sim, block, grid_point, args) -> None:
    """The block's threads one after another on this thread, which poses as each in turn
    (the simulator's ``cuda.threadIdx`` and ``cuda.grid`` read the current thread)."""
    me = threading.current_thread()
    saved = {k: me.__dict__[k] for k in ("blockIdx", "threadIdx", "thread_id")
             if k in me.__dict__}
    dx, dy = block._block_dim[0], block._block_dim[1]
    me.blockIdx = sim.Dim3(*grid_point)
    try:
        for point in np.ndindex(*block._block_dim):
            me.threadIdx = sim.Dim3(*point)
            me.thread_id = point[0] + dx * (point[1] + dy * point[2])
            try:
                block._f(*args)
            except Exception as e:
                raise type(e)(f"tid={list(point)} ctaid={list(grid_point)}: {e}") from e
    finally:
        for k in ("blockIdx", "threadIdx", "thread_id"):
            me.__dict__.pop(k, None)
        me.__dict__.update(saved)
