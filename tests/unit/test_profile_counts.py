"""profile.json's ``counts``: phases count the communication made inside them, per-step
figures per rank and the busiest rank's, the first step's left out."""

from __future__ import annotations

from types import SimpleNamespace

from haloflow.parallel import profile as P
from haloflow.parallel.halo.base import HaloStats
from haloflow.parallel.reduce import ReduceStats
from haloflow.parallel.timers import Timers


def _record(timers, ex, red):
    lmesh = SimpleNamespace(n_owned=8, n_ghost=2, neighbours=[1])
    return P.rank_record(lmesh, timers, [ex], red, 1.0)


def test_phases_count_what_they_send_and_reduce_after_the_first_record():
    timers, red = Timers(), ReduceStats()
    ex = SimpleNamespace(stats=HaloStats())
    with timers("solve_p"):  # before the first record: not counted
        ex.stats.sent(1, 2, 16)
    first = _record(timers, ex, red)
    assert "counts" not in first["phases"]["solve_p"]
    for _ in range(2):
        with timers("solve_p"):
            ex.stats.sent(1, 2, 16)
            ex.stats.sent(1, 2, 16)
            red.calls += 3
        with timers("solve_U"):
            ex.stats.sent(3, 2, 48)
        ex.stats.sent(1, 2, 16)  # outside both
        red.calls += 1
    rec = P.since(_record(timers, ex, red), first)
    assert rec["phases"]["solve_p"]["counts"] == {
        "exchanges": 4, "fields": 4, "messages": 8, "bytes": 64, "allreduces": 6}
    assert rec["phases"]["solve_U"]["counts"] == {
        "exchanges": 2, "fields": 6, "messages": 4, "bytes": 96, "allreduces": 0}
    assert rec["halo"]["calls"] == 8 and rec["allreduce"]["calls"] == 8
    # a second rank that sent twice as many bytes; two steps, 3 + 1 allgathers
    other = {**rec, "halo": {**rec["halo"], "bytes": 2 * rec["halo"]["bytes"]}}
    c = P.counts([rec, other], 2, {"allgathers": 3, "refreshes": 1})
    assert c["per_rank"]["bytes"] == [96.0, 192.0] and c["busiest"]["bytes"] == 192.0
    assert c["busiest"] == {"exchanges": 4.0, "messages": 8.0, "bytes": 192.0,
                            "allreduces": 4.0, "gathers": 2.0, "transfers": 0.0}
    assert c["phases"]["solve_p"] == {"exchanges": 2.0, "fields": 2.0, "messages": 4.0,
                                      "bytes": 32.0, "allreduces": 3.0}
