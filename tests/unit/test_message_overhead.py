"""A network's per-message CPU cost (o) in a SimGrid replay: computation around the messages
between nodes only (``study/message_overhead.py``), on the collectives' own algorithms."""

from __future__ import annotations

import pytest

from haloflow.study.message_overhead import (
    Rewriter,
    allreduce_messages,
    collective_messages,
    rewrite,
)
from haloflow.study.simgrid import ENVELOPE, Platform, replay
from haloflow.study.trace import TraceError
from tests.simgrid_traces import require_smpirun
from tests.unit.test_simgrid import BW, LAT, LOOP_BW, LOOP_LAT, SPEED, write_traces

O, O_BYTE = 20e-6, 1e-9


@pytest.mark.parametrize("ranks", [2, 3, 4, 5, 6, 8, 12])
def test_recursive_doubling_pairs_every_message(ranks):
    """Each rank's sends and receives have a partner that counts the same messages back;
    on a power of two every rank has log2(P) partners, a send and a receive each; beyond
    the largest power of two the extra even ranks only hand their data over and back."""
    msgs = [allreduce_messages(r, ranks) for r in range(ranks)]
    for r in range(ranks):
        for peer in set(msgs[r]):
            assert msgs[r].count(peer) == msgs[peer].count(r), (r, peer)
    p2 = 1 << (ranks.bit_length() - 1)
    stages = p2.bit_length() - 1
    for r in range(ranks):
        extra_even = r < 2 * (ranks - p2) and r % 2 == 0
        extra_odd = r < 2 * (ranks - p2) and r % 2 == 1
        assert len(msgs[r]) == (2 if extra_even else 2 * stages + 2 * extra_odd), (r, msgs[r])


def test_bruck_allgather_sizes():
    """Bruck on 5 ranks, 8 bytes each: stages of 1, 2 and 1 pieces (the last the rest)."""
    got = collective_messages("allgather", ["8", "8"], 0, 5)
    assert got == [(4, 8), (1, 8), (3, 16), (2, 16), (1, 8), (4, 8)]


def test_bursts_go_around_the_messages_between_nodes():
    """Rank 1 of 4, two to a node: the send to rank 0 (its node) costs nothing, the send to
    rank 2 o + o_byte x bytes before it; the irecv from rank 3 its cost after the waitall;
    an allreduce its off-node stage (rank 3: a send and a receive) before it."""
    rw = Rewriter(1, 4, 2, O, O_BYTE, SPEED)

    def run(line):
        return rw.line(line.split(), line + "\n")

    assert run("1 isend 0 0 1000") == "1 isend 0 0 1000\n"
    burst = int(round((O + O_BYTE * 1000) * SPEED))
    assert run("1 isend 2 0 1000") == f"1 compute {burst}\n1 isend 2 0 1000\n"
    assert run("1 irecv 3 0 1000") == "1 irecv 3 0 1000\n"
    assert run("1 irecv 0 0 1000") == "1 irecv 0 0 1000\n"
    assert run("1 waitall") == f"1 waitall\n1 compute {burst}\n"
    assert run("1 waitall") == "1 waitall\n"  # nothing left open
    small = int(round((O + 10 * O_BYTE) * SPEED))
    assert run("1 recv 2 5 10") == f"1 recv 2 5 10\n1 compute {small}\n"
    assert allreduce_messages(1, 4) == [0, 0, 3, 3]
    two = int(round(2 * (O + 8 * O_BYTE) * SPEED))
    assert run("1 allreduce 8 0") == f"1 compute {two}\n1 allreduce 8 0\n"
    # a wait for one request: the irecv it completes
    assert run("1 irecv 2 7 100") == "1 irecv 2 7 100\n"
    assert run("1 wait 1 2 7") == "1 wait 1 2 7\n"  # the isend's request: no cost
    hundred = int(round((O + 100 * O_BYTE) * SPEED))
    assert run("1 wait 2 1 7") == f"1 wait 2 1 7\n1 compute {hundred}\n"


def test_rewrite_refuses_a_listing_of_another_rank_count(tmp_path):
    listing = write_traces(tmp_path, {0: ["compute 10"]})
    with pytest.raises(TraceError, match="1 traces listed for 2 ranks"):
        rewrite(listing, 2, 1, O, 0.0, SPEED, tmp_path / "out")


def test_replay_charges_o_between_nodes_and_not_within_one(tmp_path):
    """One message of S bytes: between two nodes latency + (S + 16) / bandwidth plus o on
    each side (LogGP); between two cores of one node the loopback alone."""
    require_smpirun()
    size = 100_000
    listing = write_traces(tmp_path, {0: [f"send 1 3 {size}"], 1: [f"recv 0 3 {size}"]})
    two = Platform(2, 1, SPEED, LAT, BW, LOOP_LAT, LOOP_BW, o=O, o_byte=O_BYTE)
    t = replay(listing, 2, two, tmp_path / "two")
    assert t == pytest.approx(LAT + (size + ENVELOPE) / BW + 2 * (O + O_BYTE * size),
                              rel=1e-4)
    one = Platform(1, 2, SPEED, LAT, BW, LOOP_LAT, LOOP_BW, o=O, o_byte=O_BYTE)
    t = replay(listing, 2, one, tmp_path / "one")
    assert t == pytest.approx(LOOP_LAT + (size + ENVELOPE) / LOOP_BW, rel=1e-5)
