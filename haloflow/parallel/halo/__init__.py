"""Halo-exchange strategies behind one interface: ``make(name, lmesh, comm)``."""

from .base import Exchanger, HaloStats
from .packed import PackedExchanger

STRATEGIES = {"packed": PackedExchanger}


def make(name: str, lmesh, comm) -> Exchanger:
    """Create the exchanger called ``name`` for this rank's LocalMesh."""
    try:
        cls = STRATEGIES[name]
    except KeyError:
        raise ValueError(f"unknown halo strategy {name!r} (expected one of {sorted(STRATEGIES)})") \
            from None
    return cls(lmesh, comm)


__all__ = ["Exchanger", "HaloStats", "STRATEGIES", "make"]
