"""SimGrid time-independent traces of one time step, written from the performance model's own
workload and halos: what ``smpirun -replay`` needs to price a rank count no machine here can
run or trace (the 62³ cavity on 3 072 ranks).

Each rank's trace is the step as the analytic model sees it, rank by rank:

- the halo exchanges of the mesh and of every distributed AMG level (``model.exchange_parts``,
  rounded to whole exchanges), each an ``irecv`` from every rank it receives from, an
  ``isend`` to every rank it sends to and a ``waitall``, on that level's real halo with the
  model's byte counts (8 x fields x values, coarse levels' interfaces shrunk as in the model);
- the allreduces (``model.REDUCE_BYTES`` each) and the allgathers of the redundant AMG
  level's right-hand side (``8 x gathered_rows`` bytes in all, an equal piece per rank) and
  of its coefficients at a refresh;
- compute bursts: the rank's own computation (``model.compute_s`` at its cells and its shares
  of the coarse levels), the mesh's share before each mesh exchange, each coarse level's
  before each of its exchanges, the redundant solve and the call floor after each allgather,
  and the Python layer's cost of an MPI call before each allreduce and allgather it makes.

The kinds of operation are spread evenly over the step (the k-th of n at (k + 1/2) / n of
it), all ranks in the same order, as the solver's loops make them.  Where a whole step is
more than SimGrid can replay in minutes (tens of millions of actions at 3 072 ranks),
``write(fraction=)`` writes a sample of every kind of operation and ``sample_scale`` says
what its replayed time is multiplied by.  Agglomerated coarse
levels (``agglomerate`` > 0) are not written: their handovers are not synthesised.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import model as M

TAG = 0
KIND_ORDER = {"mesh": 0, "level": 1, "reduce": 2, "gather": 3, "refresh": 4}


@dataclass
class StepCounts:
    """A step's operations in whole numbers (the profile's per-step means rounded)."""

    mesh: int  # mesh exchanges
    levels: list  # exchanges of each distributed coarse level
    allreduces: int
    python_allreduces: int  # of which made through the Python layer (pay ``mpi_call_s``)
    gathers: int
    refreshes: int


def step_counts(w: M.Workload, ranks: int) -> StepCounts:
    """The model's exchanges, allreduces and allgathers of one step, rounded; one rank has
    none (the model prices its computation only)."""
    if ranks == 1:
        return StepCounts(0, [], 0, 0, 0, 0)
    parts = M.exchange_parts(w)
    reduces = int(round(w.allreduces))
    return StepCounts(int(round(parts[0][1])), [int(round(p[1])) for p in parts[1:]], reduces,
                      max(reduces - int(round(w.compiled_allreduces)), 0),
                      int(round(w.gathers)), int(round(w.refreshes)))


def peers(halo: M.Halo, fields: float, scale: float) -> list[tuple[list, list]]:
    """Per rank, ``(receives, sends)``: the ``(peer, bytes)`` of one exchange on ``halo``,
    each message 8 bytes per value of ``fields`` fields, ``max(values x scale, 1)`` values."""
    nbytes = np.rint(8.0 * fields * np.maximum(halo.count * scale, 1.0)).astype(np.int64)
    out = [([], []) for _ in range(halo.ranks)]
    for s, d, b in zip(halo.src.tolist(), halo.dst.tolist(), nbytes.tolist(), strict=True):
        out[d][0].append((s, b))
        out[s][1].append((d, b))
    return out


def rank_compute(w: M.Workload, halos: list[M.Halo], layout: M.Layout) -> np.ndarray:
    """Seconds per step of each rank's computation by kind, shape (2 + levels, ranks): the
    mesh's share, the fixed part (redundant coarse solve and call floor), then each coarse
    level's.  A rank's total is ``model.compute_s`` at its own cells and coarse shares (the
    model prices the busiest rank's the same way); it is split in the proportions of the
    measured work."""
    P = halos[0].ranks
    cells = halos[0].cells.astype(np.float64)
    fixed = w.serial_s + w.floor_s
    if P == 1:
        out = np.zeros((2, 1))
        out[0, 0] = M.compute_s(w, float(cells[0]), 1, layout)
        return out
    shares = np.array([h.cells / w.cells for h in halos[1:]],
                      dtype=np.float64).reshape(len(halos) - 1, P)
    work = list(w.level_work) + [0.0] * (len(shares) - len(w.level_work))
    raw = np.zeros((2 + len(shares), P))
    raw[0] = (w.compute_s - fixed - sum(w.level_work)) * cells / w.cells
    raw[1] = fixed
    raw[2:] = np.array(work)[:, None] * shares
    total = np.array([M.compute_s(w, float(cells[r]), P, layout, tuple(shares[:, r]))
                      for r in range(P)])
    return raw * (total / np.maximum(raw.sum(axis=0), 1e-300))


def schedule(c: StepCounts) -> list[tuple[str, int]]:
    """The step's operations in order: ``(kind, level)``, every kind spread evenly."""
    ops = []
    for kind, n, lv in [("mesh", c.mesh, 0), *[("level", n, k) for k, n in
                                               enumerate(c.levels)],
                        ("reduce", c.allreduces, 0), ("gather", c.gathers, 0),
                        ("refresh", c.refreshes, 0)]:
        ops += [((k + 0.5) / n, KIND_ORDER[kind], lv, kind) for k in range(n)]
    return [(kind, lv) for _, _, lv, kind in sorted(ops)]


def _exchange(rank: int, recv_send: tuple[list, list]) -> str:
    recv, send = recv_send
    if not recv and not send:
        return ""
    lines = [f"{rank} irecv {p} {TAG} {b}\n" for p, b in recv]
    lines += [f"{rank} isend {p} {TAG} {b}\n" for p, b in send]
    return "".join(lines) + f"{rank} waitall\n"


def _compute(rank: int, seconds: float, speed: float) -> str:
    """A compute burst of ``seconds`` at ``speed`` flop/s (none where it rounds to 0)."""
    flops = int(round(seconds * speed))
    return f"{rank} compute {flops}\n" if flops > 0 else ""


def scaled(c: StepCounts, fraction: float) -> StepCounts:
    """The counts of ``fraction`` of a step, each kind's rounded, at least one of every kind
    the step has (``sample_scale`` weighs what rounding gave too much or too little)."""
    def f(n: int) -> int:
        return max(int(round(n * fraction)), 1) if n else 0

    return StepCounts(f(c.mesh), [f(n) for n in c.levels], f(c.allreduces),
                      int(round(f(c.allreduces) * c.python_allreduces / c.allreduces))
                      if c.allreduces else 0, f(c.gathers), f(c.refreshes))


def write(folder: Path, w: M.Workload, halo: M.Halo, layout: M.Layout,
          speed: float = 1e9, fraction: float = 1.0) -> tuple[Path, StepCounts]:
    """One step of ``w`` on the ranks of ``halo`` as ``folder/rank-R.txt`` (cores of
    ``speed`` flop/s) and the listing ``folder/traces.txt`` that ``smpirun -replay`` takes.
    ``fraction`` < 1 writes about that share of the step instead (``scaled`` counts, every
    operation with its computation as in the whole step): a sample whose replayed time
    times ``sample_scale`` estimates the step's where the whole step would take SimGrid
    too long."""
    if not 0 < fraction <= 1:
        raise M.ModelError(f"fraction {fraction!r} of a step: expected 0 < fraction <= 1")
    P = halo.ranks
    per_node = layout.per_node(w)
    leads = M.level_leaders(w, P, per_node) if P > 1 else []
    if any(not np.array_equal(lead, np.arange(P)) for lead in leads):
        raise M.ModelError(f"agglomerated coarse levels (agglomerate {w.agglomerate}) on "
                           f"{P} ranks: their handovers are not synthesised")
    c = step_counts(w, P)
    parts = M.exchange_parts(w)[: 1 + len(c.levels)]
    halos = [halo] + [M.merged(halo, lead) for lead in leads]
    ex = [peers(h, fields, scale) for (_, _, fields, scale), h in zip(parts, halos,
                                                                         strict=True)]
    comp = rank_compute(w, halos, layout)
    call_s = w.mpi_call_s / (layout.node.cpu_speed if layout.node is not None else 1.0)
    reduce_call = call_s * c.python_allreduces / c.allreduces if c.allreduces else 0.0
    rows_piece = max(int(round(8 * w.gathered_rows / P)), 1)
    nnz_piece = max(int(round(8 * w.gathered_nnz / P)), 1)
    cs = scaled(c, fraction) if fraction < 1 else c
    ops = schedule(cs)
    n_gather = c.gathers + c.refreshes
    folder.mkdir(parents=True, exist_ok=True)
    names = []
    for r in range(P):
        burst = {("mesh", 0): comp[0, r] / max(c.mesh, 1),
                 **{("level", k): comp[2 + k, r] / max(n, 1) for k, n in enumerate(c.levels)}}
        fixed = comp[1, r] / n_gather if n_gather else 0.0
        blocks = {key: _exchange(r, ex[0 if key[0] == "mesh" else 1 + key[1]][r])
                  for key in burst}
        text = [f"{r} init\n"]
        if not ops:  # one rank, or nothing to exchange: all of the computation at once
            text.append(_compute(r, comp[:, r].sum() * fraction, speed))
        for kind, lv in ops:
            if kind in ("mesh", "level"):
                text.append(_compute(r, burst[kind, lv], speed))
                text.append(blocks[kind, lv])
            elif kind == "reduce":
                if reduce_call:
                    text.append(_compute(r, reduce_call, speed))
                text.append(f"{r} allreduce {M.REDUCE_BYTES} 0\n")
            else:
                piece = rows_piece if kind == "gather" else nnz_piece
                text.append(_compute(r, call_s, speed))
                text.append(f"{r} allgather {piece} {piece}\n")
                text.append(_compute(r, fixed, speed))
        if ops and not n_gather:
            text.append(_compute(r, comp[1, r] * fraction, speed))
        text.append(f"{r} finalize\n")
        path = folder / f"rank-{r}.txt"
        path.write_text("".join(text), encoding="ascii")
        names.append(str(path))
    listing = folder / "traces.txt"
    listing.write_text("\n".join(names) + "\n", encoding="ascii")
    return listing, c


def sample_scale(w: M.Workload, halo: M.Halo, layout: M.Layout, net: M.Curve, shm: M.Curve,
                 fraction: float) -> float:
    """What a sample's replayed time is multiplied by to estimate the whole step's: the
    analytic model's time of the step's operations over that of the sample's, kind by kind
    (its busiest rank's exchanges and their computation, allreduces, allgathers with the
    redundant solve).  ``1 / fraction`` where rounding left every kind's share exact; a
    sample that rounded a kind's count up or down is corrected by that kind's weight."""
    P = halo.ranks
    c = step_counts(w, P)
    cs = scaled(c, fraction) if fraction < 1 else c
    if P == 1:
        return 1.0 / fraction
    pred = M.predict(w, halo, net, shm, layout)
    leads = M.level_leaders(w, P, layout.per_node(w))
    comp = rank_compute(w, [halo] + [M.merged(halo, lead) for lead in leads], layout)
    b = int(np.argmax(comp.sum(axis=0)))
    halo_s = [t for _, t in pred.halo_parts]
    kinds = [(c.mesh, cs.mesh, halo_s[0] + comp[0, b])]
    kinds += [(n, m, halo_s[1 + k] + comp[2 + k, b])
              for k, (n, m) in enumerate(zip(c.levels, cs.levels, strict=True))]
    kinds += [(c.allreduces, cs.allreduces, pred.reduce_s),
              (c.gathers + c.refreshes, cs.gathers + cs.refreshes, pred.gather_s + comp[1, b])]
    whole = sum(t for n, _, t in kinds if n)
    sample = sum(t * m / n for n, m, t in kinds if n)
    return whole / sample if sample > 0 else 1.0 / fraction
