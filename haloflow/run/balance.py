"""Time-based dynamic load balancing: measure each rank's speed, repartition, migrate.

A rank on a slow or shared node makes every other rank wait at each exchange.  Cell counts
cannot see that; time can.  After every step each rank notes the seconds its pure compute
phase took ("fluxes": its face loops, no message and no wait inside) per owned cell, and
every ``balance_every`` steps the ranks compare the medians of their last three windows'
steps (a step the machine's other jobs slowed moves a median little; the windows span
migrations, as a rank's speed does not depend on its part): a rank's load is that cost per
cell times its cells.  The step after the run's start and after each migration is left out
(loading compiled kernels, new plans).  When the largest load exceeds the mean by more than
``max_imbalance`` and the time the remaining steps would save
exceeds what the last migration cost (before the first: the set-up's seconds on what a
migration redoes, the mesh, its parts and the solver, less numba's loading of kernels, which
a migration finds done; after one, two checks in a row must say so), the mesh is cut
again into parts of weights in proportion to each rank's speed, moving few cells (the old
parts' borders shifted; a new METIS cut where that cuts far more faces), and the run
migrates: every field the solver would write to a checkpoint (old time levels, the
AMG's basis, closure and energy fields) goes through the same global-order redistribution
as a checkpoint (:mod:`.checkpointing`), and the LocalMesh, halo exchanger, solver (with its
AMG) and post-processors are rebuilt on the new parts.

``[parallel] emulate_speed = {1 = 0.5}`` makes rank 1 compute at half speed (a slow core
emulated at every communication point: :mod:`haloflow.parallel.network_delays`), so a balancer (and
a user) can be tested on one machine.
"""

from __future__ import annotations

import itertools
import statistics
import time

import numba as nb
import numpy as np

# the phase with no message and no wait in it (measured: "assemble" holds some exchanges'
# waits, so a fast rank's assemble time grows with a slow neighbour): a clean cost per cell
COMPUTE = ("fluxes",)
WINDOWS = 3  # the median runs over the last this many windows' steps
ORDERS_UP_TO = 4  # METIS asked with the weights in every order up to this many ranks
CUT_SLACK = 1.5  # the old borders, moved, unless they then cut this many times the faces


class Retired:
    """The counters of an exchanger a migration replaced, kept for the run's profile."""

    def __init__(self, stats: dict):
        self._stats = stats
        self.stats = self

    def as_dict(self) -> dict:
        return self._stats

    def close(self) -> None:
        """Closed when it was retired."""


class Balancer:
    """Collective: after every step, :meth:`after_step` may rebalance the run."""

    def __init__(self, run, log, start: int = 0):
        p = run.case.parallel
        self.run, self.log = run, log
        self.every, self.limit = int(p.balance_every), float(p.max_imbalance)
        self.events = []  # one dict per rebalance
        self.migration_s = None  # the last migration's seconds
        self.cost = []  # seconds of compute per owned cell, per step measured
        self.first_cost = None  # what the first migration is priced at (every rank's max)
        self.checks = []  # every decision's numbers, taken or not
        self.over = False  # whether the last check found the run worth rebalancing
        self._restart(start)

    def _restart(self, step: int) -> None:
        """Leave out the step after ``step``; the next decision after ``every`` more."""
        self.warm = step + 1
        self.wall = []  # seconds per step on the current parts
        self.seen = 0
        self._prev = None

    def _now(self) -> tuple:
        ph = self.run.timers.phases
        return sum(ph[k].seconds for k in COMPUTE if k in ph), time.perf_counter()

    def after_step(self, step: int, n_target: int) -> bool:
        """Whether the run was rebalanced after ``step`` (of ``n_target``)."""
        if self.run.comm.size == 1 or step < self.warm:
            return False
        now = self._now()
        if self._prev is not None:
            # a rank's speed does not change with its part: its cost per cell is kept
            # across migrations, so noise after one does not undo it
            self.cost.append((now[0] - self._prev[0]) / max(self.run.lmesh.n_owned, 1))
            self.wall.append(now[1] - self._prev[1])
            self.seen += 1
        self._prev = now
        if self.seen == 0 or self.seen % self.every:
            return False
        keep = WINDOWS * self.every
        self.cost, self.wall = self.cost[-keep:], self.wall[-keep:]
        return self._decide(step, n_target)

    def _decide(self, step: int, n_target: int) -> bool:
        from ..parallel.transfer import allgather

        run, comm = self.run, self.run.comm
        got = np.array(allgather(comm, (statistics.median(self.cost),
                                        statistics.median(self.wall), run.lmesh.n_owned,
                                        run.remake_mesh_s, run.remake_solver_s)))
        per_cell, wall, cells = got[:, 0], float(got[:, 1].max()), got[:, 2]
        load = per_cell * cells
        imbalance = float(load.max() / max(load.mean(), 1e-300))
        saving = wall * (1.0 - 1.0 / imbalance) * max(n_target - step, 0)
        # every rank decides on the same numbers: rank 0's mesh and parts, then the slowest
        # rank's solver
        self.first_cost = float(got[0, 3] + got[:, 4].max())
        cost = self.migration_s if self.migration_s is not None else self.first_cost
        self.checks.append({"step": step, "imbalance": imbalance, "saving_s": saving,
                            "cost_s": cost})
        over = imbalance > self.limit and saving > cost
        # after a migration, one noisy window must not undo it: two checks in a row
        confirmed = over and (not self.events or self.over)
        self.over = over
        if not confirmed:
            return False
        speed = 1.0 / np.maximum(per_cell, 1e-300)  # cells per second of compute
        fractions = speed / speed.sum()
        t0 = time.perf_counter()
        moved = migrate(run, fractions, self.log)
        self.migration_s = max(allgather(comm, time.perf_counter() - t0))
        event = {"step": step, "imbalance": imbalance, "compute_s_per_cell": per_cell.tolist(),
                 "fractions": fractions.tolist(), "cells_before": cells.astype(int).tolist(),
                 "cells_after": allgather(comm, run.lmesh.n_owned), "cells_moved": moved,
                 "migration_s": self.migration_s, "s_per_step_before": wall,
                 "predicted_saving_s": saving}
        self.events.append(event)
        self.over = False
        self.log(f"rebalanced after step {step}: compute imbalance {imbalance:.2f}, cells "
                 f"{event['cells_before']} -> {event['cells_after']} ({moved} moved), "
                 f"migration {self.migration_s:.3f} s (predicted saving {saving:.2f} s)")
        self._restart(step)
        return True

    def summary(self) -> dict:
        return {"balance": self.run.case.parallel.balance, "rebalances": len(self.events),
                "migration_s": sum(e["migration_s"] for e in self.events),
                "first_cost_s": self.first_cost, "checks": self.checks, "events": self.events}


def new_parts(case, comm, fractions, old_ids: np.ndarray) -> tuple:
    """Rank 0: ``(mesh, parts, moved)``: the case's mesh rebuilt and cut into parts of the
    given weight fractions (of every rank), and how many cells change rank.  The old parts'
    borders are moved layer by layer from ranks over their weight to neighbours under it
    (few cells move); where that cannot reach the weights or cuts more than ``CUT_SLACK``
    times the faces the old parts cut, a new METIS cut (each part on the rank of its weight
    holding most of its cells).  ``old_ids``: every rank's owned global cells, gathered."""
    from ..mesh import from_case
    from ..mesh.core import cell_adjacency
    from ..parallel.topology import metis_split

    mesh = from_case(case.mesh)
    mesh.compact_indices()
    xadj, adjncy = cell_adjacency(mesh)
    adjncy = np.asarray(adjncy)
    old = np.empty(mesh.n_cells, dtype=np.int64)
    for r, ids in enumerate(old_ids):
        old[ids] = r
    fr = np.asarray(fractions, dtype=float)
    src = np.repeat(np.arange(mesh.n_cells), np.diff(xadj))
    shifted = _shift(xadj, adjncy, old, fr)
    if shifted is not None and _cut(src, adjncy, shifted) <= CUT_SLACK * _cut(src, adjncy, old):
        return mesh, shifted, int(np.count_nonzero(shifted != old))
    groups = _equal_groups(fr)
    best = None
    for order in _orders(fr):  # part j weighs fr[order[j]] and goes to rank order[j]
        parts = np.asarray(order)[metis_split(xadj, adjncy, comm.size, fr[list(order)])]
        parts = _match(parts, old, groups, comm.size)
        moved = int(np.count_nonzero(parts != old))
        if best is None or moved < best[0]:
            best = (moved, parts)
    return mesh, best[1], best[0]


def _cut(src, dst, parts) -> int:
    return int(np.count_nonzero(parts[src] != parts[dst]))


def _shift(xadj, adjncy, old: np.ndarray, fr: np.ndarray) -> np.ndarray | None:
    """The old parts with their borders moved toward the weights ``fr``: the rank most over
    its weight gives its cells next to its most under-weight neighbour rank, a layer at a
    time (part of one where less is due).  None where a rank over its weight has no
    neighbour under it (METIS's cut then)."""
    k, n = len(fr), len(old)
    parts = old.astype(np.int64)
    count = np.bincount(parts, minlength=k).astype(float)
    target = fr / fr.sum() * n
    tol = max(1.0, 0.005 * n / k)
    ok = _shift_layers(np.asarray(xadj, dtype=np.int64), np.asarray(adjncy, dtype=np.int64),
                       parts, count, target, tol)
    return parts if ok else None


def warm() -> None:
    """Compile ``_shift_layers`` into the cache (warm-up runs one rank: none migrates)."""
    _shift(np.array([0, 1, 2]), np.array([1, 0]), np.array([0, 0]), np.array([1.0, 1.0]))


@nb.njit(cache=True)
def _shift_layers(xadj, adjncy, parts, count, target, tol):
    """``_shift``'s layers in place; False where a rank over its weight has no neighbour
    under it.  Each layer: the rank ``r`` most over, its neighbour rank ``q`` most under
    (the first met, cells and their neighbours in order), and of ``r``'s cells next to
    ``q`` the lowest-numbered, as many as ``r`` and ``q`` allow (at least one)."""
    n, k = len(parts), len(count)
    over = np.empty(k)
    cells = np.empty(n, dtype=np.int64)
    for _ in range(n):
        r = 0
        for i in range(k):
            over[i] = count[i] - target[i]
            if over[i] > over[r]:
                r = i
        if over[r] <= tol:
            return True
        q = -1
        for c in range(n):
            if parts[c] == r:
                for e in range(xadj[c], xadj[c + 1]):
                    p = parts[adjncy[e]]
                    if over[p] < 0.0 and (q < 0 or over[p] < over[q]):
                        q = p
        if q < 0:
            return False
        m = 0
        for c in range(n):
            if parts[c] == r:
                for e in range(xadj[c], xadj[c + 1]):
                    if parts[adjncy[e]] == q:
                        cells[m] = c
                        m += 1
                        break
        take = max(1, int(min(float(m), over[r], -over[q])))
        for t in range(take):
            parts[cells[t]] = q
        count[r] -= take
        count[q] += take
    return True


def _equal_groups(fr: np.ndarray) -> list:
    """The ranks whose fractions agree to 2 %: their parts may trade places."""
    order = np.argsort(fr)
    groups, start = [], 0
    for i in range(1, len(fr) + 1):
        if i == len(fr) or fr[order[i]] > fr[order[start]] * 1.02:
            groups.append(order[start:i])
            start = i
    return [g for g in groups if len(g) > 1]


def _orders(fr: np.ndarray) -> list:
    """Rank orders to ask METIS for: every order of distinct weights for a few ranks (the
    cut's layout depends on which part weighs what), else the ranks' own order."""
    n = len(fr)
    if n > ORDERS_UP_TO:
        return [tuple(range(n))]
    seen, out = set(), []
    for order in itertools.permutations(range(n)):
        key = tuple(np.round(fr[list(order)], 12))
        if key not in seen:
            seen.add(key)
            out.append(order)
    return out


def _match(parts: np.ndarray, old: np.ndarray, groups: list, n: int) -> np.ndarray:
    """``parts`` relabelled within each group of equal weights so that each part goes to
    the rank holding most of its cells."""
    relabel = np.arange(n)
    for g in groups:
        from scipy.optimize import linear_sum_assignment

        overlap = np.zeros((len(g), len(g)))
        for a, pa in enumerate(g):
            mine = old[parts == pa]
            for b, rb in enumerate(g):
                overlap[a, b] = np.count_nonzero(mine == rb)
        rows, cols = linear_sum_assignment(-overlap)
        relabel[g[rows]] = g[cols]
    return relabel[parts]


def migrate(run, fractions, log) -> int:
    """Collective: the run's state onto new parts of the given weight fractions; returns
    how many cells changed rank."""
    from ..parallel.local import distribute
    from .checkpointing import given, read_plans, write_plans
    from .setup import solver_on

    case, comm = run.case, run.comm
    old_lm, old_solver = run.lmesh, run.solver
    arrays, extra = old_solver.checkpoint_state()
    plans = write_plans(comm, old_lm)
    blocks = {name: (plans[kind].to_block(given(a, kind, old_lm)), kind)
              for name, (a, kind) in arrays.items()}
    ids = run.red.gather(np.asarray(old_lm.global_cells[: old_lm.n_owned]), root=0)
    mesh = parts = None
    moved = 0
    if comm.rank == 0:
        mesh, parts, moved = new_parts(case, comm, fractions, ids)
    moved = run.red.bcast(moved)
    lm = distribute(mesh, parts, comm)
    del mesh
    lm.nodes = old_lm.nodes
    live = run.live_exchangers()
    run.retired.extend(Retired(e.stats.as_dict()) for e in live)
    for e in live:
        e.close()
    ex, solver, posts = solver_on(case, lm, comm, run.red, run.timers)
    new = read_plans(comm, lm)
    values = {name: new[kind].from_block(block) for name, (block, kind) in blocks.items()}
    solver.restore_state(values, extra)
    for post, old in zip(posts, run.posts, strict=True):  # both in registry order
        post.adopt(old)
    run.lmesh, run.ex, run.solver, run.posts = lm, ex, solver, posts
    return moved
