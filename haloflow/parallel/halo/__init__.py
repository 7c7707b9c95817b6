"""Halo-exchange strategies behind one interface: ``make(name, lmesh, comm)``.

Every strategy fills every ghost with its owner's value, bit for bit, so the choice changes
speed and never results.  ``staging="device"`` keeps fields in (possibly emulated) device
memory and counts the host<->device copies each strategy needs; ``"device-aware"`` hands
device buffers to a GPU-aware MPI (see :mod:`.staging`).

The registry names each strategy's class as ``"module:Class"``, imported when first made:
reading the names (the case file's schema, command-line choices) costs no numba or MPI
import.
"""

from importlib import import_module

STRATEGIES = {
    "perfield": "perfield:PerFieldExchanger",
    "packed": "packed:PackedExchanger",
    "aggregated": "aggregated:AggregatedExchanger",
    "neighbor": "neighbor:NeighborExchanger",
    "overlap": "overlap:OverlapExchanger",
}
STAGING = ("host", "device", "device-aware")  # where fields live, what MPI reads (.staging)

_LAZY = {"Exchanger": "base:Exchanger", "HaloStats": "base:HaloStats"}


def _resolve(target: str):
    module, name = target.split(":")
    return getattr(import_module(f"{__name__}.{module}"), name)


def strategy(name: str) -> type:
    """The exchanger class called ``name``."""
    try:
        target = STRATEGIES[name]
    except KeyError:
        raise ValueError(f"unknown halo strategy {name!r} (expected one of "
                         f"{', '.join(STRATEGIES)})") from None
    return _resolve(target)


def make(name: str, lmesh, comm, staging: str = "host", backend=None):
    """Create the exchanger called ``name`` for this rank's LocalMesh (or any object with
    ``n_owned``, ``neighbours``, ``send_ptr``, ``send_cells`` and ``recv_ptr``).

    ``backend`` (a name or object of :mod:`haloflow.backends`) holds the device of
    ``device`` and ``device-aware`` staging: ``cpu`` (the default) emulates one, ``cuda``
    is a GPU (or numba's CUDA simulator).
    ``neighbor`` is collective: every rank of ``comm`` must create it.
    """
    return strategy(name)(lmesh, comm, staging, backend)


def warm(max_fields: int = 5) -> None:
    """Compile (or load from cache) every strategy's kernels for 1..max_fields fields.

    Numba specialises the pack kernels on the field count; warming them once, serially,
    spares every rank of a parallel job from compiling them at the same time.
    """
    from types import SimpleNamespace

    import numpy as np
    from mpi4py import MPI

    self_loop = SimpleNamespace(n_owned=2, neighbours=np.array([0]), send_ptr=np.array([0, 1]),
                                send_cells=np.array([1]), recv_ptr=np.array([0, 1]))
    for name in STRATEGIES:
        ex = strategy(name)(self_loop, MPI.COMM_SELF)
        for m in range(1, max_fields + 1):
            fields = [np.zeros(3) for _ in range(m)]
            ex.exchange(fields)
            ex.finish(ex.start(fields))
        ex.close()


def __getattr__(name: str):
    if name in _LAZY:
        return _resolve(_LAZY[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Exchanger", "HaloStats", "STAGING", "STRATEGIES", "make", "strategy", "warm"]
