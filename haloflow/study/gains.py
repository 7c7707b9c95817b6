"""What time balancing, node-aware placement and threads would gain on the target machine,
priced by the same model as the prediction (``study/model.py``).

Each is a change a user can make without new hardware, so ``predict`` states it beside the
curve:

- **balancing**: the busiest rank sets the step.  A partition's largest part is priced
  against one of the mean size (what ``[parallel] balance = "time"`` reaches on equal
  cores); a profile of a multi-rank run whose ranks computed at different speeds (a slow
  or shared core) also says what evening out its measured compute times would save there.
- **placement**: ranks fill nodes in order, and a plain partition puts neighbouring parts
  on different nodes as often as not.  The two-level decomposition (``[parallel]
  placement = "nodes"``: one piece per node, then its ranks) is priced on the same mesh;
  only the messages between nodes cross the network.
- **decomposition**: on a structured block whose planes of cells do not divide evenly into
  the parts, RCB's exact cuts run through planes and form staircases, so parts touch more
  neighbours and every exchange sends more messages; ``grid`` (a process grid cut between
  planes, the same cuts across the mesh: at most 6 neighbours on a box, parts up to a
  plane larger per axis) is priced on the same mesh.
- **agglomeration**: coarse AMG levels with few rows per rank moved onto fewer ranks
  (``[solver.pressure] agglomerate``, ``linalg/agglomerate.py``): fewer messages per
  exchange on those levels, against the leaders' larger share of their work and the
  handovers; every threshold of ``AGGLOMERATE`` is priced and the best one named.
- **solver choices**: profiles of the same case run other ways (another
  ``solver.pressure.cycle``, method or tolerance, ``predict --alternative``) priced on the
  same partitions: a cheaper cycle on one rank can lose at many ranks to one that visits
  its coarse levels less often, and the fastest is named at every rank count.
- **threads**: the same cores as fewer ranks of more threads each: fewer, larger messages
  and fewer stages in every reduction, at the threads' efficiency (the profiled run's
  utilisation when it ran threads; else the value given, ideal by default, and the output
  says which).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from . import model as M

THREADS = (1, 2, 4, 8, 16, 32)
AGGLOMERATE = (0, 50, 100, 200, 400, 800, 1600, 3200)  # rows per rank (0: off)


def one_thread(w: M.Workload, efficiency: float) -> M.Workload:
    """The workload as one thread would compute it: a threaded profile's distributed
    compute times its threads and their efficiency."""
    if w.threads <= 1:
        return w
    fixed = w.serial_s + w.floor_s
    work = (w.compute_s - fixed) * w.threads * efficiency
    return replace(w, compute_s=fixed + work, threads=1)


def threaded(w1: M.Workload, threads: int, efficiency: float) -> M.Workload:
    """One-thread workload ``w1`` on ``threads`` threads of the given efficiency (the model
    divides the distributed compute by the thread count; the efficiency stretches it)."""
    if threads <= 1:
        return w1
    fixed = w1.serial_s + w1.floor_s
    return replace(w1, compute_s=fixed + (w1.compute_s - fixed) / efficiency)


def balanced(halo: M.Halo) -> M.Halo:
    """The same halos with every rank holding the mean number of cells."""
    return replace(halo, cells=np.full(halo.ranks, halo.cells.sum() / halo.ranks))


def cross_node_cells(halo: M.Halo, per_node: int) -> int:
    """Halo cell values per exchange that cross nodes (ranks fill nodes in order)."""
    return int(halo.count[(halo.src // per_node) != (halo.dst // per_node)].sum())


def placed_halos(mesh, method: str, hs: dict, per_node: int) -> dict:
    """``{ranks: (block, nodes)}``: halos of a METIS partition placed in blocks (the run's
    own when it used METIS) and of the two-level METIS decomposition, at every rank count
    that spans more than one node (both by METIS, so that only the placement differs)."""
    from ..parallel.decompose import decompose
    from ..parallel.topology import metis_split, two_level

    ni = mesh.n_internal
    owner, nbr = mesh.owner[:ni], mesh.neighbour
    out = {}
    for p in sorted(hs):
        if p <= per_node or p > mesh.n_cells:
            continue
        block = hs[p] if method == "metis" else M.halo_of_partition(
            owner, nbr, decompose(mesh, p, "metis"), p)
        parts = two_level(mesh, np.arange(p) // per_node, metis_split)
        out[p] = (block, M.halo_of_partition(owner, nbr, parts, p))
    return out


ALTERNATIVE = "grid"  # the decomposition priced beside the run's own


def alternative_halos(mesh, method: str, hs: dict, other: str = ALTERNATIVE) -> dict:
    """``{ranks: halo}`` of decomposition ``other`` at every rank count of the sweep (none
    where the run used it: its own halos are these)."""
    from ..parallel.decompose import decompose

    if method == other:
        return {}
    ni = mesh.n_internal
    return {p: M.halo_of_partition(mesh.owner[:ni], mesh.neighbour,
                                   decompose(mesh, p, other), p)
            for p in sorted(hs) if 1 < p <= mesh.n_cells}


def gains(w: M.Workload, hs: dict, placed: dict, net: M.Curve, shm: M.Curve, lay: M.Layout,
          thread_efficiency: float, grid: dict | None = None) -> list[dict]:
    """Per rank count of the sweep: the predicted step as it is, with balanced parts, with
    two-level placement (where it spans nodes and the mesh is at hand), cut by the
    ``grid`` decomposition (``grid``: its halos, where the mesh is at hand and the run used
    another) and with the same cores as ranks of other thread counts."""
    t0 = lay.threads_of(w)
    w1 = one_thread(w, thread_efficiency)
    rows = []
    for p in sorted(hs):
        if p < 2:
            continue
        base = M.predict(w, hs[p], net, shm, lay)
        row = {"ranks": p, "nodes": base.nodes, "threads": t0, "step_s": base.step_s,
               "balanced_step_s": M.predict(w, balanced(hs[p]), net, shm, lay).step_s,
               "cell_imbalance": float(hs[p].cells.max() / hs[p].cells.mean())}
        if grid and p in grid:
            row["grid_step_s"] = M.predict(w, grid[p], net, shm, lay).step_s
            row["grid_neighbours"] = int(grid[p].neighbours.max())
            row["neighbours"] = int(hs[p].neighbours.max())
        if p in placed:
            block, nodes = placed[p]
            per_node = lay.per_node(w)
            row["metis_block_step_s"] = M.predict(w, block, net, shm, lay).step_s
            row["placed_step_s"] = M.predict(w, nodes, net, shm, lay).step_s
            row["cross_node_cells"] = cross_node_cells(block, per_node)
            row["placed_cross_node_cells"] = cross_node_cells(nodes, per_node)
        cores = p * t0
        options = {}
        for t in THREADS:
            r = cores // t
            if t > lay.cores_per_node or cores % t or r not in hs:
                continue
            lt = replace(lay, threads=t)
            options[t] = M.predict(threaded(w1, t, thread_efficiency), hs[r], net, shm,
                                   lt).step_s
        row["threads_step_s"] = options
        row["agglomerate"] = w.agglomerate
        row["agglomerate_step_s"] = {
            a: M.predict(replace(w, agglomerate=a), hs[p], net, shm, lay).step_s
            for a in AGGLOMERATE} if w.levels else {}
        rows.append(row)
    return rows


def measured_imbalance(prof: dict) -> dict | None:
    """A multi-rank profile's compute imbalance (max over mean of the ranks' compute
    seconds) and what evening it out would save per step there."""
    c, steps = prof.get("compute_s", {}), max(int(prof.get("steps", 1)), 1)
    if int(prof.get("ranks", 1)) < 2 or not c.get("mean"):
        return None
    return {"ranks": int(prof["ranks"]), "imbalance": c["max"] / c["mean"],
            "saving_s_per_step": (c["max"] - c["mean"]) / steps,
            "s_per_step": prof["s_per_step"]}


def _pct(new: float, old: float) -> str:
    return f"{100.0 * (new / old - 1.0):+6.1f}%"


def best_agglomerate(row: dict) -> int | None:
    """The agglomeration threshold with the smallest predicted step in a ``gains`` row."""
    opts = row.get("agglomerate_step_s") or {}
    return min(opts, key=lambda a: (opts[a], a)) if opts else None


def _agglomerate(row: dict) -> str:
    a = best_agglomerate(row)
    if a is None:
        return "-"
    return f"{a}: {_pct(row['agglomerate_step_s'][a], row['step_s'])}"


def table(rows: list[dict], network: str, efficiency_note: str) -> list[str]:
    """What would pay, per rank count: the changes in the predicted step (placement: the
    two-level decomposition against METIS placed in blocks, both by METIS)."""
    lines = [f"what would pay on {network} (same cores; threads: {efficiency_note})",
             f"{'ranks':>6} {'nodes':>5} {'s/step':>10} {'balanced':>9} {'placement':>9} "
             f"{'cross-node cells':>17} {'grid':>11} {'best threads':>13} "
             f"{'agglomerate':>15}"]
    for r in rows:
        place = cross = "-"
        grid = _pct(r["grid_step_s"], r["step_s"]) if "grid_step_s" in r else "-"
        if "placed_step_s" in r:
            place = _pct(r["placed_step_s"], r["metis_block_step_s"])
            cross = f"{r['cross_node_cells']} -> {r['placed_cross_node_cells']}"
        opts = r["threads_step_s"]
        best = min(opts, key=opts.get) if opts else r["threads"]
        thr = f"{best}: {_pct(opts[best], r['step_s'])}" if opts else "-"
        lines.append(f"{r['ranks']:6d} {r['nodes']:5d} {r['step_s']:10.4g} "
                     f"{_pct(r['balanced_step_s'], r['step_s']):>9} {place:>9} {cross:>17} "
                     f"{grid:>11} {thr:>13} {_agglomerate(r):>15}")
    return lines


def choices(alternatives: list, hs: dict, net: M.Curve, shm: M.Curve, lay: M.Layout) -> dict:
    """``alternatives``: ``(label, Workload)`` of the same case run different ways.  Their
    predicted s/step at every rank count of ``hs`` and, per rank count, the fastest."""
    labels = [label for label, _ in alternatives]
    rows = []
    for p in sorted(hs):
        times = [M.predict(w, hs[p], net, shm, lay).step_s for _, w in alternatives]
        rows.append({"ranks": p, "step_s": dict(zip(labels, times, strict=True)),
                     "best": labels[int(np.argmin(times))]})
    return {"labels": labels, "rows": rows}


def choices_table(c: dict, network: str) -> list[str]:
    """The choices as a table, then one line: which to take from which rank count on."""
    labels = c["labels"]
    width = max(10, *(len(x) for x in labels))
    lines = [f"\nsolver choices on {network}: predicted s/step",
             f"{'ranks':>7} " + " ".join(f"{x:>{width}}" for x in labels) + "  fastest"]
    for r in c["rows"]:
        lines.append(f"{r['ranks']:>7} " + " ".join(
            f"{r['step_s'][x]:>{width}.4g}" for x in labels) + f"  {r['best']}")
    spans, last = [], None
    for r in c["rows"]:
        if r["best"] != last:
            spans.append(f"{r['best']} from {r['ranks']} ranks")
            last = r["best"]
    lines.append(f"take {', then '.join(spans)} ({network})")
    return lines
