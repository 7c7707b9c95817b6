"""Performance model (docs/design.md, section 9): time per step on P ranks from one run's profile.

One run's ``profile.json`` (usually on one rank) tells how much work a step is and how it
communicates: compute seconds, the seconds of the AMG levels that every rank of a parallel run
solves whole (the redundant coarse solve), field exchanges per step on the mesh and on each
distributed AMG level, allreduces per step and the cost of one MPI call from haloflow's
Python layer.  For P ranks the model adds

    compute    (work - fixed) x (largest rank's cells / all cells) + fixed, where fixed is
               the AMG levels every rank solves whole plus the cost of the kernel calls
    halo       per exchange, the busiest rank's messages sent one after another, each priced
               by the network curve of its link (shared memory within a node)
    reductions per allreduce, ceil(log2) stages within the node and across nodes, each one
               small message, plus the Python/MPI call overhead
    gathers    the allgathers that give every rank the coarse AMG problem: its right-hand
               side at every visit, its coefficients at every refresh

and reports time per step, speedup and efficiency against its own 1-rank figure, and what the
busiest rank sends and reduces per step (``counts``: the same exchanges, messages and
message sizes the halo term prices, checked against profiles of real runs).  Networks
are curves (seconds of a one-way transfer vs message size): NetPIPE ``.out`` files, or the
Hockney line ``latency + bytes / bandwidth`` for presets from published measurements, with
LogGP's host overhead o per message and byte (back-to-back messages overlap the latency no
CPU spends; the stack share reports it).  Other machines' cores and memory bandwidth:
``study/node.py``.  The
ranks' halos come from partitioning the real mesh with the case's own method (exact message
sizes and neighbours); where the mesh is not at hand, from a structured process grid.
Assumptions and where the model is known to be wrong: docs/model.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..io.network import PRESETS, Curve, ModelError, network, shm_cache  # noqa: F401

CALLS_PER_OP = 2  # compiled kernel calls per exchange or allreduce in the Krylov loops
REDUCE_BYTES = 24  # a fused allreduce carries a handful of doubles


# -- partitions -------------------------------------------------------------------------------

@dataclass
class Halo:
    """Who sends how many cell values to whom on P ranks (one field, the mesh level)."""

    ranks: int
    cells: np.ndarray  # owned cells per rank
    src: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    dst: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    count: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    exact: bool = True

    @property
    def ghosts(self) -> np.ndarray:
        return np.bincount(self.dst, weights=self.count, minlength=self.ranks)

    @property
    def neighbours(self) -> np.ndarray:
        return np.bincount(self.src, minlength=self.ranks)


def halo_of_partition(owner, neighbour, parts, ranks: int) -> Halo:
    """Exact halos of a partition: ghosts are the distinct cells across cut faces."""
    po, pn = parts[owner], parts[neighbour]
    cut = po != pn
    # (receiving rank, sending rank, cell) for both sides of every cut face
    recv = np.concatenate([po[cut], pn[cut]])
    send = np.concatenate([pn[cut], po[cut]])
    cell = np.concatenate([neighbour[cut], owner[cut]])
    key = np.unique((recv * ranks + send) * (int(parts.size) + 1) + cell)
    pair = key // (int(parts.size) + 1)
    pairs, count = np.unique(pair, return_counts=True)
    return Halo(ranks, np.bincount(parts, minlength=ranks), pairs % ranks, pairs // ranks,
                count.astype(np.int64))


def process_grid(ranks: int, dims: int) -> tuple[int, ...]:
    """The most cubic factorisation of ``ranks`` into ``dims`` factors (like MPI_Dims_create)."""
    best, best_key = None, None

    def rec(left, k, acc):
        nonlocal best, best_key
        if k == 1:
            g = tuple(sorted(acc + [left], reverse=True))
            key = (max(g) / min(g), g)
            if best_key is None or key < best_key:
                best, best_key = g, key
            return
        for f in range(1, left + 1):
            if left % f == 0:
                rec(left // f, k - 1, acc + [f])

    rec(ranks, dims, [])
    return best


def halo_of_grid(cells: int, ranks: int, dims: int) -> Halo:
    """Halos of a cube-like mesh of ``cells`` cut by a structured process grid: the estimate
    used when the real mesh is not at hand."""
    side = cells ** (1.0 / dims)
    grid = process_grid(ranks, dims)
    block = [side / g for g in grid]  # sub-domain extent in cells per direction
    idx = np.indices(grid).reshape(dims, -1).T  # coordinates of every rank
    rank_of = np.arange(ranks).reshape(grid)
    src, dst, cnt = [], [], []
    for d in range(dims):
        face = math.prod(block[e] for e in range(dims) if e != d)
        for step in (-1, 1):
            nb = idx.copy()
            nb[:, d] += step
            ok = (nb[:, d] >= 0) & (nb[:, d] < grid[d])
            src.append(rank_of[tuple(nb[ok].T)])
            dst.append(np.flatnonzero(ok))
            cnt.append(np.full(int(ok.sum()), max(int(round(face)), 1)))
    own = np.full(ranks, cells // ranks) + (np.arange(ranks) < cells % ranks)
    return Halo(ranks, own, np.concatenate(src).astype(np.int64),
                np.concatenate(dst).astype(np.int64), np.concatenate(cnt), exact=False)


def merged(halo: Halo, lead: np.ndarray) -> Halo:
    """The halo of a level whose ranks hand their rows to ``lead`` (each rank's leader,
    :mod:`haloflow.linalg.agglomerate`): the parts of the same leader as one."""
    P = halo.ranks
    if np.array_equal(lead, np.arange(P)):
        return halo
    s, d = lead[halo.src], lead[halo.dst]
    keep = s != d
    pair, inv = np.unique(s[keep] * P + d[keep], return_inverse=True)
    count = np.bincount(inv, weights=halo.count[keep], minlength=len(pair))
    return Halo(P, np.bincount(lead, weights=halo.cells, minlength=P).astype(np.int64),
                pair // P, pair % P, np.rint(count).astype(np.int64), halo.exact)


def level_leaders(w: Workload, P: int, per_node: int) -> list[np.ndarray]:
    """Each distributed coarse level's leaders on ``P`` ranks filling nodes of
    ``per_node`` in order: who holds every rank's rows of it (itself unless the level is
    agglomerated, ``Workload.agglomerate``)."""
    from ..linalg.agglomerate import plan

    return plan([int(r) for r, *_ in w.levels], np.arange(P) // max(per_node, 1),
                w.agglomerate)


def visits_of(level: tuple) -> float:
    """Visits per step of a ``Workload.levels`` entry (rows, exchanges, visits); entries
    without them: a cycle makes about two exchanges a visit."""
    return float(level[2]) if len(level) > 2 else float(level[1]) / 2


def handovers(lead: np.ndarray, above: np.ndarray) -> np.ndarray:
    """Per rank, the messages it sends at each visit to a level of leaders ``lead``
    whose parent level has leaders ``above``: a rank that held rows above and hands them
    to another sends its partial restriction (one), a leader sends each such rank its
    correction back (one each)."""
    P = len(lead)
    child = (above == np.arange(P)) & (lead != np.arange(P))
    return child.astype(np.float64) + np.bincount(lead[child], minlength=P)


# -- the profile, reduced to what the model needs ----------------------------------------------

@dataclass
class Workload:
    """Per-step figures of one case, as if run on one rank (from profile.json)."""

    cells: int
    dims: int
    compute_s: float  # seconds of computation per step on one rank
    serial_s: float  # of which the AMG levels every rank solves whole (redundantly)
    exchanges: float  # halo exchange calls per step on the mesh
    fields_per_exchange: float
    levels: list  # distributed AMG levels: (rows, exchange calls per step, visits per step)
    allreduces: float  # of which compiled_allreduces come from compiled code
    gathers: float  # allgathers of the redundant level's right-hand side per step
    gathered_rows: int  # its rows
    mpi_call_s: float
    floor_s: float = 0.0  # per-step cost of kernel calls themselves, whatever their size
    refreshes: float = 0.0  # allgathers of the redundant level's coefficients per step
    compiled_allreduces: float = 0.0  # allreduces called from compiled code (no Python layer)
    gathered_nnz: int = 0  # its entries
    threads: int = 1
    measured: dict = field(default_factory=dict)  # the profile's own ranks and s/step
    amg_levels: int = 0  # all AMG levels, distributed and replicated (0: no AMG)
    # per step, the pressure and momentum solves' mesh exchanges, field exchanges and
    # allreduces (profile ``counts.phases``), and the iterations they made (``per_step``)
    split: dict = field(default_factory=dict)
    iters: dict = field(default_factory=dict)
    # seconds per step of each distributed coarse level's work (part of compute_s), and the
    # rows per rank below which a coarse level moves onto fewer ranks (linalg.agglomerate)
    level_work: list = field(default_factory=list)
    agglomerate: int = 0

    @classmethod
    def from_profile(cls, prof: dict, path: str = "profile.json") -> Workload:
        try:
            schema = prof["schema"]
            if schema < 2:
                raise ModelError(f"{path}: profile schema {schema} predates the model's "
                                 "counters; re-run the case with this haloflow")
            steps = max(int(prof["steps"]), 1)
            ranks = int(prof["ranks"])
            ph = prof["phases"]
            comp = prof["compute_s"]["mean"] / steps
            old = ph.get("amg_gathered", {"max": 0.0, "calls": [0]})  # its name before
            gathered = ph.get("amg_replicated", old)
            serial = gathered["max"] / steps
            amg = prof.get("amg", {})
            coarse = [lv for lv in amg.get("levels", []) if lv["distributed"] and lv["index"] > 0]
            # visits: older profiles did not count them (a cycle makes about two exchanges)
            levels = [(lv["rows"], lv["exchanges"] / steps,
                       lv.get("visits", lv["exchanges"] / 2) / steps) for lv in coarse]
            ps = prof["per_step"]
            # the per-call floor is Python's: calls made from compiled code do not pay it
            python_calls = (ps["halo_exchanges"] - ps.get("compiled_exchanges", 0.0)
                            + ps["allreduces"] - ps.get("compiled_allreduces", 0.0)
                            + (0.0 if ranks > 1 else sum(
                                lv["exchanges"] - lv.get("compiled_exchanges", 0)
                                for lv in coarse) / steps))
            coarse_calls = sum(lv[1] for lv in levels) * steps
            split = {}
            for name, c in prof.get("counts", {}).get("phases", {}).items():
                # the distributed coarse levels' exchanges (one field each) are the
                # pressure solve's; ``levels`` has them
                lv = coarse_calls / steps if name == "solve_p" and ranks > 1 else 0.0
                split[name] = {"exchanges": float(c["exchanges"]) - lv,
                               "fields": float(c["fields"]) - lv,
                               "allreduces": float(c["allreduces"])}
            halo = prof["halo"]
            calls = halo["calls"]["mean"] - (coarse_calls if ranks > 1 else 0.0)
            fields = halo["fields"]["mean"] - (coarse_calls if ranks > 1 else 0.0)
            return cls(
                cells=int(prof["mesh"]["cells"]), dims=int(prof["mesh"]["dims"]),
                # the work of all ranks on one: every rank repeated the redundant levels
                compute_s=max(comp - serial, 0.0) * ranks + serial,
                serial_s=serial,
                exchanges=calls / steps,
                fields_per_exchange=fields / calls if calls else 1.0,
                levels=levels,
                allreduces=prof["per_step"]["allreduces"],
                gathers=amg.get("allgathers", max(gathered["calls"])) / steps,
                gathered_rows=int(amg.get("gathered_rows", 0)),
                refreshes=amg.get("refreshes", 0) / steps,
                gathered_nnz=int(amg.get("gathered_nnz", 0)),
                mpi_call_s=float(prof["machine"]["mpi_call_s"]),
                floor_s=CALLS_PER_OP * float(prof["machine"]["kernel_call_s"]) * python_calls,
                compiled_allreduces=ps.get("compiled_allreduces", 0.0),
                threads=int(prof.get("case", {}).get("threads", 1)),
                measured={"ranks": ranks, "s_per_step": prof["s_per_step"]},
                amg_levels=len(amg.get("levels", [])), split=split,
                iters={k: float(ps.get(k, 0.0)) for k in ("p_iters", "u_iters")},
                level_work=_level_work(prof, coarse, split, steps, serial),
                agglomerate=int(prof.get("case", {}).get("agglomerate", 0)))
        except (KeyError, TypeError, IndexError) as e:
            raise ModelError(f"{path}: not a haloflow profile (missing {e})") from None


def _level_work(prof: dict, coarse: list, split: dict, steps: int,
                serial: float) -> list[float]:
    """Seconds per step (as on one rank) of each distributed coarse level's work: the
    pressure solve's time shared among its levels by entries times exchanges (a sweep or
    product over a level's entries follows each exchange), the top level counted by the
    solve's mesh exchanges.  Zero where the profile lacks the entry counts."""
    levels = prof.get("amg", {}).get("levels", [])
    solve = max(prof["phases"].get("solve_p", {}).get("mean", 0.0) / steps - serial, 0.0) \
        * int(prof["ranks"])
    if not levels or "nnz" not in levels[0] or not solve:
        return [0.0] * len(coarse)
    units = [lv["nnz"] * lv["exchanges"] / steps for lv in coarse]
    top = levels[0]["nnz"] * split.get("solve_p", {}).get("exchanges", 0.0)
    total = top + sum(units)
    return [solve * u / total if total else 0.0 for u in units]


# -- the prediction -----------------------------------------------------------------------------

@dataclass
class Prediction:
    network: str
    ranks: int
    nodes: int
    cells_per_rank: float
    compute_s: float
    halo_s: float
    reduce_s: float
    gather_s: float
    stack_s: float = 0.0  # of the communication, host CPU spent in the network's stack
    # halo_s by level: ("mesh" or a coarse level's global rows, seconds); and how many
    # messages the busiest rank sends per exchange
    halo_parts: tuple = ()
    messages: int = 0
    counts: dict = field(default_factory=dict)  # the busiest rank's, per step (``counts``)

    @property
    def step_s(self) -> float:
        return self.compute_s + self.halo_s + self.reduce_s + self.gather_s

    @property
    def comm_fraction(self) -> float:
        return (self.halo_s + self.reduce_s + self.gather_s) / self.step_s


# -- what a step sends and reduces ----------------------------------------------------------------

COUNTED = {"p_iters": "solve_p", "u_iters": "solve_U"}  # iterations -> the phase they scale


def _ratios(w: Workload, iters: dict | None) -> dict:
    """Each solve's iterations ``iters`` against the profile's (1 where either is unknown)."""
    out = {}
    for k, phase in COUNTED.items():
        have, want = w.iters.get(k, 0.0), (iters or {}).get(k)
        out[phase] = want / have if want is not None and have > 0 and phase in w.split else 1.0
    return out


def exchange_parts(w: Workload, iters: dict | None = None) -> list[tuple]:
    """Per step, ``(label, exchanges, fields per exchange, message-size scale)`` of the mesh
    and of every distributed AMG level: the exchanges the halo term prices and ``counts``
    counts.  ``iters`` (``p_iters``, ``u_iters`` per step) scales the pressure and momentum
    solves' share of them from the profile's iterations to these: their exchanges are made
    per iteration, the rest (assembly, fluxes, a solve's first residual) per step, and the
    coarse levels are the pressure solve's."""
    r = _ratios(w, iters)
    calls, fields = w.exchanges, w.exchanges * w.fields_per_exchange
    for phase, k in r.items():
        part = w.split.get(phase, {})
        calls += (k - 1.0) * part.get("exchanges", 0.0)
        fields += (k - 1.0) * part.get("fields", 0.0)
    parts = [("mesh", calls, fields / calls if calls else 1.0, 1.0)]
    for rows, c, *_ in w.levels:  # coarse levels: aggregates shrink the interfaces too
        parts.append((int(rows), c * r["solve_p"], 1.0,
                      (rows / w.cells) ** ((w.dims - 1) / w.dims)))
    return parts


def counts(w: Workload, halo: Halo, iters: dict | None = None,
           per_node: int | None = None) -> dict:
    """What the busiest rank sends and reduces per step on the ranks of ``halo`` (nodes of
    ``per_node`` ranks; None: one node): halo exchanges (the mesh's and, on more than one
    rank, the distributed AMG levels'), messages (one per neighbour and exchange, on each
    level's own halo), bytes (8 per value of every field exchanged, coarse levels' messages
    shrunk as in the halo term), allreduces and allgathers (the redundant AMG level's
    right-hand side per visit, its coefficients per refresh); each the most over the ranks.
    ``handovers_per_step``: the messages that move agglomerated levels' rows to their
    leaders and back (``handovers``).  At the profile's iterations, or at ``iters`` (see
    ``exchange_parts``).  ``level_ranks``: the ranks holding rows of each AMG level (every
    rank holds the replicated ones whole)."""
    P = halo.ranks
    r = _ratios(w, iters)
    parts = exchange_parts(w, iters)[: 1 if P == 1 else None]  # one rank: no coarse halos
    leads = level_leaders(w, P, per_node or P) if P > 1 else []
    halos = [halo] + [merged(halo, lead) for lead in leads]
    msgs, nbytes, hand = np.zeros(P), np.zeros(P), np.zeros(P)
    for (_, calls, fields, scale), h in zip(parts, halos, strict=True):
        msgs += calls * np.bincount(h.src, minlength=P)
        nbytes += calls * np.bincount(h.src, weights=8.0 * fields * np.maximum(
            h.count * scale, 1.0), minlength=P)
    above = np.arange(P)
    for lead, level in zip(leads, w.levels, strict=False):
        hand += visits_of(level) * r["solve_p"] * handovers(lead, above)
        above = lead
    reduces = w.allreduces + sum((k - 1.0) * w.split.get(ph, {}).get("allreduces", 0.0)
                                 for ph, k in r.items())
    held = [P] + [int(len(np.unique(lead))) for lead in leads]
    return {"exchanges_per_step": float(sum(p[1] for p in parts)),
            "messages_per_step": float(msgs.max()), "bytes_per_step": float(nbytes.max()),
            "allreduces_per_step": float(reduces),
            "gathers_per_step": float(w.gathers * r["solve_p"] + w.refreshes),
            "handovers_per_step": float(hand.max()),
            "level_ranks": (held + [P] * w.amg_levels)[: w.amg_levels]}


def _stages(n: int) -> int:
    return math.ceil(math.log2(n)) if n > 1 else 0


def allgather_s(nbytes: float, P: int, nodes: int, per_node: int, net: Curve, shm: Curve,
                mpi_call_s: float) -> float:
    """One allgather of ``nbytes`` in all (each rank's piece ``nbytes / P``) on ``P`` ranks:
    recursive doubling, one latency per stage (within the node on shared memory, across nodes
    on the network), plus every rank receiving the others' ``nbytes (P - 1) / P`` at the
    slowest link's bandwidth, plus one call through the Python layer."""
    if P <= 1:
        return 0.0
    link = net if nodes > 1 else shm
    received = nbytes * (P - 1) / P
    return (shm.latency * _stages(min(P, per_node)) + net.latency * _stages(nodes) + mpi_call_s
            + float(link.time(received)) - link.latency)


def reduce_one_s(P: int, nodes: int, per_node: int, net: Curve, shm: Curve) -> float:
    """One small allreduce by recursive doubling: stages within the node, then across."""
    return float(shm.time(REDUCE_BYTES)) * _stages(min(P, per_node)) + \
        float(net.time(REDUCE_BYTES)) * _stages(nodes)


@dataclass
class Layout:
    """How the target's ranks sit on its nodes, and how fast its cores are."""

    cores_per_node: int
    threads: int | None = None  # per rank (None: the profiled run's)
    node: object = None  # study.node.Node (None: the calibration machine's cores)

    def per_node(self, w: Workload) -> int:
        return max(self.cores_per_node // self.threads_of(w), 1)

    def threads_of(self, w: Workload) -> int:
        return max(self.threads or w.threads, 1)


def compute_s(w: Workload, largest: float, P: int, layout: Layout,
              coarse: tuple = ()) -> float:
    """The busiest rank's computation: its share of the work (threads beyond the profiled
    run's dividing it ideally), the part every rank repeats, on the target's cores.
    ``coarse``: per distributed coarse level, the largest share of its rows one rank holds
    (agglomerated levels sit on fewer ranks; else ``largest / cells``)."""
    from .node import Node

    node = layout.node or Node()
    per_node = layout.per_node(w)
    threads = layout.threads_of(w)
    fixed = w.serial_s + w.floor_s  # what more ranks do not shrink
    levels = list(w.level_work) if coarse else []
    spread = sum(levels)
    share = (w.compute_s - fixed - spread) * largest / w.cells * w.threads / threads
    share += sum(t * f for t, f in zip(levels, coarse, strict=False)) * w.threads / threads
    busy = min(P, per_node) * threads  # cores of the fullest node at work
    return node.compute_s(share, largest, busy) + node.compute_s(fixed, 0.0, busy)


def predict(w: Workload, halo: Halo, net: Curve, shm: Curve, cores_per_node) -> Prediction:
    """Time per step of workload ``w`` on the ranks of ``halo``; ranks fill nodes in order
    (rank r on node r // ranks per node).  ``cores_per_node``: an int (the calibration
    machine's cores and the profile's threads) or a :class:`Layout`."""
    layout = cores_per_node if isinstance(cores_per_node, Layout) else Layout(cores_per_node)
    P = halo.ranks
    per_node = layout.per_node(w)
    nodes = -(-P // per_node)
    speed = layout.node.cpu_speed if layout.node is not None else 1.0
    if P == 1:
        return Prediction(net.name, 1, 1, w.cells, compute_s(w, w.cells, 1, layout), 0.0,
                          0.0, 0.0, counts=counts(w, halo))
    leads = level_leaders(w, P, per_node)
    halos = [halo] + [merged(halo, lead) for lead in leads]
    coarse = tuple(float(h.cells.max()) / w.cells for h in halos[1:])
    compute = compute_s(w, float(halo.cells.max()), P, layout, coarse)
    call_s = w.mpi_call_s / speed  # the Python layer's cost of an MPI call runs on the CPU

    def exchange_s(h: Halo, scale: float, fields: float) -> tuple[float, float]:
        """One exchange: every rank sends its messages one after another; the slowest
        rank counts."""
        same = (h.src // per_node) == (h.dst // per_node)
        nbytes = 8.0 * fields * np.maximum(h.count * scale, 1.0)
        t = np.zeros(P)
        for link, sel in ((shm, same), (net, ~same)):
            src = h.src[sel]
            k = np.bincount(src, minlength=P)
            t += np.bincount(src, weights=link.time(nbytes[sel]), minlength=P) \
                - np.maximum(k - 1, 0) * link.pipelined
        cpu = np.where(same, shm.cpu(nbytes), net.cpu(nbytes))
        busiest = int(np.argmax(t))
        return float(t[busiest]), float(cpu[h.src == busiest].sum())

    halo_s = stack_s = 0.0
    parts = []
    for (label, calls, fields, scale), h in zip(exchange_parts(w), halos, strict=True):
        t, c = exchange_s(h, scale, fields)
        halo_s, stack_s = halo_s + calls * t, stack_s + calls * c
        parts.append((label, calls * t))
    hand = handover_s(w, leads, halo.cells, per_node, net, shm)
    if hand:
        halo_s += hand
        parts.append(("handovers", hand))

    reduce_s = w.allreduces * reduce_one_s(P, nodes, per_node, net, shm) \
        + (w.allreduces - w.compiled_allreduces) * call_s
    stack_s += w.allreduces * (float(shm.cpu(REDUCE_BYTES)) * _stages(min(P, per_node))
                               + float(net.cpu(REDUCE_BYTES)) * _stages(nodes))
    gather_s = w.gathers * allgather_s(8 * w.gathered_rows, P, nodes, per_node, net, shm,
                                       call_s) \
        + w.refreshes * allgather_s(8 * w.gathered_nnz, P, nodes, per_node, net, shm, call_s)
    messages = int(np.bincount(halo.src, minlength=P).max()) if len(halo.src) else 0
    return Prediction(net.name, P, nodes, w.cells / P, compute, halo_s, reduce_s, gather_s,
                      stack_s, tuple(parts), messages, counts(w, halo, per_node=per_node))


def handover_s(w: Workload, leads: list, cells: np.ndarray, per_node: int, net: Curve,
               shm: Curve) -> float:
    """Seconds per step the busiest leader spends taking its ranks' partial restrictions
    into an agglomerated level and sending their corrections back, at every visit: one
    message each way per rank handing over (its share of the level's rows), within the
    node on shared memory; a leader's messages on one link overlap as an exchange's do."""
    P, total = len(cells), float(cells.sum())
    above, out = np.arange(P), 0.0
    for lead, level in zip(leads, w.levels, strict=False):
        rows, visits = level[0], visits_of(level)
        child = np.flatnonzero((above == np.arange(P)) & (lead != np.arange(P)))
        if len(child):
            group = np.bincount(above, weights=cells, minlength=P)  # cells behind each
            nbytes = 8.0 * rows * group[child] / total
            same = child // per_node == lead[child] // per_node
            t = np.zeros(P)
            for link, sel in ((shm, same), (net, ~same)):
                k = np.bincount(lead[child[sel]], minlength=P)
                t += np.bincount(lead[child[sel]], weights=link.time(nbytes[sel]),
                                 minlength=P) - np.maximum(k - 1, 0) * link.pipelined
            out += visits * 2.0 * float(t.max())
        above = lead
    return out


def sweep(w: Workload, halos: dict, net: Curve, shm: Curve, cores_per_node) -> list:
    return [predict(w, halos[p], net, shm, cores_per_node) for p in sorted(halos)]


def summary(preds: list[Prediction]) -> dict:
    """Speedup and efficiency against the 1-rank prediction; where speedup peaks and where
    efficiency first falls below 50 %."""
    t1 = preds[0].step_s * preds[0].ranks
    rows = []
    for p in preds:
        s = t1 / p.step_s
        rows.append({"ranks": p.ranks, "nodes": p.nodes, "cells_per_rank": p.cells_per_rank,
                     "step_s": p.step_s, "speedup": s, "efficiency": s / p.ranks,
                     "compute_s": p.compute_s, "halo_s": p.halo_s, "reduce_s": p.reduce_s,
                     "gather_s": p.gather_s, "comm_fraction": p.comm_fraction,
                     "stack_s": p.stack_s, "stack_fraction": p.stack_s / p.step_s,
                     "halo_parts": [list(x) for x in p.halo_parts],
                     "messages_per_exchange": p.messages, **p.counts})
    peak = max(rows, key=lambda r: r["speedup"])
    below = next((r for r in rows if r["efficiency"] < 0.5), None)
    return {"network": preds[0].network, "rows": rows,
            "peak": {"ranks": peak["ranks"], "speedup": peak["speedup"],
                     "cells_per_rank": peak["cells_per_rank"]},
            "half_efficiency": None if below is None else {
                "ranks": below["ranks"], "cells_per_rank": below["cells_per_rank"]}}
