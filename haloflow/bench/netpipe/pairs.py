"""``haloflow netpipe --pairs``: latency and bandwidth between every pair of ranks.

Each pair is measured twice: alone (the other ranks wait without spinning, so that they
take no CPU or memory bandwidth from it), then in rounds of disjoint pairs that all run at
once (a round-robin tournament: P - 1 rounds of P / 2 pairs), which shows what contention
for the node's memory system or the network does to each link.  Latency is the ping-pong
time at ``--min`` bytes, bandwidth the throughput at ``--max`` bytes.  Ranks are grouped
by node (MPI_COMM_TYPE_SHARED) in the printed table and in the heat maps.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

from ...io.netpipe_file import mbps
from ...mpiutil import UserError
from .sizes import format_size


def round_robin(ranks) -> list[list[tuple[int, int]]]:
    """P - 1 rounds of P / 2 disjoint pairs covering every pair once (circle method)."""
    r = list(ranks)
    rounds = []
    for _ in range(len(r) - 1):
        rounds.append([tuple(sorted((r[i], r[-1 - i]))) for i in range(len(r) // 2)])
        r = [r[0], r[-1], *r[1:-1]]
    return rounds


def _polite_barrier(comm) -> None:
    """A barrier that sleeps while it waits, so idle ranks leave the cores to the pair."""
    req = comm.Ibarrier()
    while not req.Test():
        time.sleep(2e-4)


def node_groups(comm) -> tuple[list[int], list[str]]:
    """Node index of every rank (by shared-memory split, numbered by lowest rank) and hosts."""
    from mpi4py import MPI

    shm = comm.Split_type(MPI.COMM_TYPE_SHARED)
    leader = shm.allreduce(comm.rank, op=MPI.MIN)
    shm.Free()
    leaders = comm.allgather(leader)
    index = {ld: k for k, ld in enumerate(sorted(set(leaders)))}
    return [index[ld] for ld in leaders], comm.allgather(MPI.Get_processor_name())


def run_pairs(opts, comm) -> int:
    from mpi4py import MPI

    from .mpi import MpiLink, MpiTransport
    from .pool import Pool, allocate, pool_bytes
    from .sweep import measure

    size = comm.size
    if size < 2 or size % 2:
        raise UserError(f"--pairs needs an even number of ranks (at least 2), got {size}")
    comm = comm.Dup()
    me = comm.rank
    nodes, hosts = node_groups(comm)
    order = sorted(range(size), key=lambda r: (nodes[r], r))
    pool = Pool(allocate(pool_bytes(opts.hi, opts.nocache, 1, opts.pool)), opts.nocache, 1)
    transports: dict[int, MpiTransport] = {}

    def transport(peer):
        if peer not in transports:
            transports[peer] = MpiTransport(comm, peer, me < peer, "pingpong", pool,
                                            engine=opts.engine)
        return transports[peer]

    if me == 0:
        transport(1).warm()
    comm.Barrier()
    if me != 0:
        transport(0).warm()

    def pair_figures(peer, before_trial=None):
        link, tr = MpiLink(comm, peer, me < peer), transport(peer)
        lat = measure(link, tr, opts.lo, opts.trial_time, opts.trials, None, before_trial)
        bw = measure(link, tr, opts.hi, opts.trial_time, opts.trials, None, before_trial)
        return lat.seconds, bw.seconds

    mine = {"alone": {}, "concurrent": {}}
    comm.Barrier()
    for i, j in ((a, b) for k, a in enumerate(order) for b in order[k + 1:]):
        if me in (i, j):
            peer = j if me == i else i
            mine["alone"][peer] = pair_figures(peer)
        _polite_barrier(comm)
    rounds = round_robin(order)
    for pairs in rounds:
        peer = next(b if a == me else a for a, b in pairs if me in (a, b))
        mine["concurrent"][peer] = pair_figures(peer, comm.Barrier)
    everything = comm.gather(mine, root=0)
    comm.Free()
    if me != 0:
        return 0

    mats = {}
    for kind in ("alone", "concurrent"):
        lat = np.full((size, size), np.nan)
        bw = np.full((size, size), np.nan)
        for r, d in enumerate(everything):
            for peer, (t_lat, t_bw) in d[kind].items():
                lat[r, peer] = t_lat * 1e6
                bw[r, peer] = float(mbps(opts.hi, t_bw))
        mats[kind] = (lat, bw)
    _report(opts, size, nodes, hosts, order, mats, len(rounds),
            MPI.Get_library_version().strip().splitlines()[0])
    return 0


def _stats(m, mask) -> dict | None:
    v = m[mask & np.isfinite(m)]
    if v.size == 0:
        return None
    return {"min": float(v.min()), "median": float(np.median(v)), "max": float(v.max())}


def _report(opts, size, nodes, hosts, order, mats, nrounds, library) -> None:
    from .mpi import thread_level
    from .plot import pairs_png

    nodes_a = np.asarray(nodes)
    same = nodes_a[:, None] == nodes_a[None, :]
    off = ~np.eye(size, dtype=bool)
    groups = {"intra_node": same & off, "inter_node": ~same}
    summary = {}
    for g, mask in groups.items():
        summary[g] = {f"{what}_{kind}": _stats(mats[kind][k], mask)
                      for kind in ("alone", "concurrent")
                      for k, what in enumerate(("latency_us", "bandwidth_mbps"))}
    by_node = {}
    for r in order:
        by_node.setdefault(nodes[r], {"host": hosts[r], "ranks": []})["ranks"].append(r)
    doc = {
        "tool": "haloflow netpipe --pairs", "ranks": size, "mpi_library": library,
        "latency_bytes": opts.lo, "bandwidth_bytes": opts.hi, "engine": opts.engine,
        "trial_time_s": opts.trial_time, "trials": opts.trials, "nocache": opts.nocache,
        "nodes": list(by_node.values()), "node_of_rank": nodes, "hosts": hosts,
        "order": order, "concurrent_rounds": nrounds, "command": sys.argv,
        "thread_level": thread_level(),
        "latency_us": {k: _nan_to_none(v[0]) for k, v in mats.items()},
        "bandwidth_mbps": {k: _nan_to_none(v[1]) for k, v in mats.items()},
        "summary": summary,
    }
    out = opts.output if opts.output is not None else Path("pairs.json")
    paths = {"json": out.with_suffix(".json"), "png": out.with_suffix(".png")}
    paths["json"].parent.mkdir(parents=True, exist_ok=True)
    paths["json"].write_text(json.dumps(doc, indent=1) + "\n")
    lat_label = f"latency [us] at {format_size(opts.lo)}"
    bw_label = f"Mbps at {format_size(opts.hi)}"
    pairs_png(paths["png"], order, nodes, {
        "latency, pair alone": (mats["alone"][0], lat_label),
        "latency, all pairs at once": (mats["concurrent"][0], lat_label),
        "bandwidth, pair alone": (mats["alone"][1], bw_label),
        "bandwidth, all pairs at once": (mats["concurrent"][1], bw_label),
    }, title=f"haloflow netpipe --pairs, {size} ranks on {len(by_node)} node(s)")

    if not opts.quiet:
        print(f"haloflow netpipe --pairs: {size} ranks, {library}", flush=True)
        for k, node in sorted(by_node.items()):
            print(f"  node {k} ({node['host']}): ranks {' '.join(map(str, node['ranks']))}")
        if size <= 16:
            print(f"  {'pair':>9}  {'node':>5}  {'latency us':>21}  {'bandwidth Mbps':>21}")
            print(f"  {'':>9}  {'':>5}  {'alone':>10} {'together':>10}  "
                  f"{'alone':>10} {'together':>10}")
            for a, i in enumerate(order):
                for j in order[a + 1:]:
                    (la, ba), (lc, bc) = ((mats[k][0][i, j], mats[k][1][i, j])
                                          for k in ("alone", "concurrent"))
                    print(f"  {i:>4}-{j:<4}  {'same' if nodes[i] == nodes[j] else 'other':>5}"
                          f"  {la:10.3f} {lc:10.3f}  {ba:10.0f} {bc:10.0f}")
    for g, s in summary.items():
        la, lc = s["latency_us_alone"], s["latency_us_concurrent"]
        ba, bc = s["bandwidth_mbps_alone"], s["bandwidth_mbps_concurrent"]
        if la is None:
            continue
        print(f"{g.replace('_', '-')}: latency median {la['median']:.3f} us alone, "
              f"{lc['median']:.3f} us all pairs at once; bandwidth median {ba['median']:.0f} "
              f"Mbps alone, {bc['median']:.0f} Mbps at once", flush=True)
    if not opts.quiet:
        print(f"wrote {paths['json']}, {paths['png']}", flush=True)


def _nan_to_none(m) -> list:
    return [[None if not np.isfinite(x) else float(x) for x in row] for row in m]
