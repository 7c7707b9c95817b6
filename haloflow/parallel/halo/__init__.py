"""Halo-exchange strategies behind one interface: ``make(name, lmesh, comm)``.

Every strategy fills every ghost with its owner's value, bit for bit, so the choice changes
speed and never results.  ``staging="device"`` keeps fields in (possibly emulated) device
memory and counts the host<->device copies each strategy needs (see :mod:`.staging`).
"""

from .aggregated import AggregatedExchanger
from .base import Exchanger, HaloStats
from .neighbor import NeighborExchanger
from .overlap import OverlapExchanger
from .packed import PackedExchanger
from .perfield import PerFieldExchanger
from .staging import KINDS as STAGING

STRATEGIES = {
    "perfield": PerFieldExchanger,
    "packed": PackedExchanger,
    "aggregated": AggregatedExchanger,
    "neighbor": NeighborExchanger,
    "overlap": OverlapExchanger,
}


def make(name: str, lmesh, comm, staging: str = "host", gpu: bool | None = None) -> Exchanger:
    """Create the exchanger called ``name`` for this rank's LocalMesh (or any object with
    ``n_owned``, ``neighbours``, ``send_ptr``, ``send_cells`` and ``recv_ptr``).

    ``gpu=None`` puts device-staged fields on a GPU where CuPy finds one, ``False`` emulates.
    ``neighbor`` is collective: every rank of ``comm`` must create it.
    """
    try:
        cls = STRATEGIES[name]
    except KeyError:
        raise ValueError(f"unknown halo strategy {name!r} (expected one of "
                         f"{', '.join(STRATEGIES)})") from None
    return cls(lmesh, comm, staging, gpu)


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
    for cls in STRATEGIES.values():
        ex = cls(self_loop, MPI.COMM_SELF)
        for m in range(1, max_fields + 1):
            fields = [np.zeros(3) for _ in range(m)]
            ex.exchange(fields)
            ex.finish(ex.start(fields))
        ex.close()


__all__ = ["Exchanger", "HaloStats", "STAGING", "STRATEGIES", "make", "warm"]
