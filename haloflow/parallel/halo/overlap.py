"""``overlap``: another strategy's start/finish, with a promise that callers fill the gap.

It moves the same messages as the strategy it wraps (``aggregated`` by default, or
``packed``) and only sets ``overlaps``, which tells the callers that support it to compute
what needs no ghost value between ``start`` and ``finish`` (Devito's ``overlap`` mode).  So
far that is the SpMV (``linalg.matrix``): interior rows while the messages fly, rows that
touch ghosts after.  Other callers simply exchange, so results never depend on the choice.
"""

from __future__ import annotations

from .aggregated import AggregatedExchanger
from .base import Exchanger
from .packed import PackedExchanger

INNER = {"aggregated": AggregatedExchanger, "packed": PackedExchanger}


class OverlapExchanger(Exchanger):
    name = "overlap"
    overlaps = True

    def __init__(self, lmesh, comm, staging="host", backend=None, inner="aggregated"):
        try:
            cls = INNER[inner]
        except KeyError:
            raise ValueError(f"overlap cannot wrap {inner!r} (expected one of "
                             f"{', '.join(INNER)})") from None
        self.inner = cls(lmesh, comm, staging, backend)
        for a in ("comm", "space", "n_owned", "neighbours", "send_ptr", "recv_ptr",
                  "send_cells", "send_counts", "recv_counts", "n_send", "n_recv"):
            setattr(self, a, getattr(self.inner, a))
        self.start = self.inner.start
        self.finish = self.inner.finish
        self.exchange = self.inner.exchange

    @property
    def stats(self):
        return self.inner.stats

    def close(self) -> None:
        self.inner.close()
