"""Coarse levels on fewer ranks: who leads whom (linalg.agglomerate), and the model's view of
an agglomerated level (study.model.merged, handovers)."""

from __future__ import annotations

import numpy as np

from haloflow.linalg.agglomerate import active_ranks, leaders, plan
from haloflow.study import model as M


def test_active_ranks_keeps_all_until_rows_per_rank_fall_below_the_threshold():
    assert active_ranks(1000, 4, 0) == 4  # off
    assert active_ranks(1000, 4, 250) == 4
    assert active_ranks(1000, 8, 250) == 4
    assert active_ranks(100, 8, 250) == 1


def test_one_node_groups_of_a_power_of_two():
    one = np.zeros(16, dtype=np.int64)
    assert np.array_equal(leaders(one, 16), np.arange(16))
    assert np.array_equal(leaders(one, 3), np.repeat([0, 8], 8))  # 2 of the 3 asked
    assert np.array_equal(leaders(one, 1), np.zeros(16))


def test_fewer_ranks_per_node_first_then_fewer_nodes():
    nodes = np.repeat(np.arange(3), 4)  # 3 nodes of 4 ranks
    assert np.array_equal(leaders(nodes, 6), np.repeat([0, 2, 4, 6, 8, 10], 2))
    assert np.array_equal(leaders(nodes, 3), np.repeat([0, 4, 8], 4))  # one per node
    assert np.array_equal(leaders(nodes, 2), np.repeat([0, 0, 8], 4))  # nodes in pairs
    # ranks placed round robin: a node's ranks are not consecutive
    rr = np.arange(12) % 3
    lead = leaders(rr, 3)
    assert np.array_equal(rr[lead], rr) and len(np.unique(lead)) == 3


def test_plan_nests_and_never_grows():
    nodes = np.repeat(np.arange(4), 12)  # 48 ranks on 4 nodes
    rows = [59582, 14909, 3763, 997]
    levels = plan(rows, nodes, 400)
    counts = [len(np.unique(lead)) for lead in levels]
    assert counts == sorted(counts, reverse=True) and counts[-1] < 48
    above = np.arange(48)
    for lead in levels:
        assert np.array_equal(lead[lead], lead)  # a leader leads itself
        assert np.array_equal(lead[above], lead)  # nested: a rank's leader is its leader's
        above = lead


def test_merged_halo_and_handovers():
    h = M.halo_of_grid(4096, 8, 3)  # 2 x 2 x 2 ranks of 8^3 cells, 64 cells a face
    lead = np.repeat([0, 4], 4)  # two halves of the box
    m = M.merged(h, lead)
    assert sorted(zip(m.src.tolist(), m.dst.tolist(), strict=True)) == [(0, 4), (4, 0)]
    assert m.count.tolist() == [4 * 64, 4 * 64]  # the four faces across the cut
    assert m.cells.tolist() == [2048, 0, 0, 0, 2048, 0, 0, 0]
    assert M.merged(h, np.arange(8)) is h
    # each handing rank sends one message per visit; a leader one back to each of its 3
    assert M.handovers(lead, np.arange(8)).tolist() == [3, 1, 1, 1, 3, 1, 1, 1]
    assert M.handovers(lead, lead).tolist() == [0] * 8  # already there
