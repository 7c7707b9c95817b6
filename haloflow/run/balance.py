"""Time-based dynamic load balancing: measure each rank's speed, repartition, migrate.

A rank on a slow or shared node makes every other rank wait at each exchange.  Cell counts
cannot see that; time can.  Every ``balance_every`` steps each rank reports the seconds its
pure compute phase took per owned cell ("fluxes": its face loops, no message and no wait
inside), which is its cost per cell; the load of a rank is its cells times that cost.  When
the largest load exceeds the mean by more than ``max_imbalance`` and the time the
remaining steps would save exceeds what the last migration cost (the set-up's time before
the first), the mesh is cut again with METIS into parts of weights in proportion to each
rank's speed (parts of ranks of equal speed are matched to the ranks holding most of their
cells, so that few cells move), and the run migrates: every field the solver would write to
a checkpoint (old time levels, the AMG's basis, closure and energy fields) goes through the
same global-order redistribution as a checkpoint (:mod:`.checkpointing`), and the LocalMesh,
halo exchanger, solver (with its AMG) and post-processors are rebuilt on the new parts.

``[parallel] emulate_speed = {1 = 0.5}`` makes rank 1 compute at half speed: each of its
compute phases waits as long again as it took, so a balancer (and a user) can be tested on
one machine.
"""

from __future__ import annotations

import time

import numpy as np

# the phase with no message and no wait in it (measured: "assemble" holds some exchanges'
# waits, so a fast rank's assemble time grows with a slow neighbour): a clean cost per cell
COMPUTE = ("fluxes",)


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

    def __init__(self, run, log):
        p = run.case.parallel
        self.run, self.log = run, log
        self.every, self.limit = int(p.balance_every), float(p.max_imbalance)
        self.events = []  # one dict per rebalance
        self.migration_s = None  # the last migration's seconds
        self._mark(0)

    def _mark(self, step: int) -> None:
        ph = self.run.timers.phases
        self.t_compute = sum(ph[k].seconds for k in COMPUTE if k in ph)
        self.t_wall = time.perf_counter()
        self.step0 = step

    def after_step(self, step: int, n_target: int) -> bool:
        """Whether the run was rebalanced after ``step`` (of ``n_target``)."""
        if self.run.comm.size == 1 or (step - self.step0) < self.every:
            return False
        run, comm = self.run, self.run.comm
        ph = run.timers.phases
        compute = sum(ph[k].seconds for k in COMPUTE if k in ph) - self.t_compute
        steps = step - self.step0
        wall = (time.perf_counter() - self.t_wall) / steps
        loads = np.array(comm.allgather((compute / steps, run.lmesh.n_owned)))
        load, cells = loads[:, 0], loads[:, 1]
        imbalance = float(load.max() / max(load.mean(), 1e-300))
        self._mark(step)
        saving = wall * (1.0 - 1.0 / imbalance) * max(n_target - step, 0)
        cost = self.migration_s if self.migration_s is not None else \
            run.timers.phases["setup"].seconds
        if imbalance <= self.limit or saving <= cost:
            return False
        speed = cells / np.maximum(load, 1e-300)  # cells per second of compute
        t0 = time.perf_counter()
        migrate(run, speed / speed.sum(), self.log)
        self.migration_s = comm.allreduce(time.perf_counter() - t0, op=_max())
        event = {"step": step, "imbalance": imbalance, "cells_before": cells.astype(int).tolist(),
                 "cells_after": comm.allgather(run.lmesh.n_owned),
                 "migration_s": self.migration_s, "predicted_saving_s": saving}
        self.events.append(event)
        self.log(f"rebalanced after step {step}: compute imbalance {imbalance:.2f}, cells "
                 f"{event['cells_before']} -> {event['cells_after']}, migration "
                 f"{self.migration_s:.3f} s (predicted saving {saving:.2f} s)")
        self._mark(step)
        return True

    def summary(self) -> dict:
        return {"balance": self.run.case.parallel.balance, "rebalances": len(self.events),
                "events": self.events}


def _max():
    from mpi4py import MPI

    return MPI.MAX


def new_parts(case, comm, fractions, old_ids: np.ndarray) -> tuple:
    """Rank 0: ``(mesh, parts)``: the case's mesh rebuilt and cut into parts of the given
    weight fractions, parts of (nearly) equal fractions matched to the ranks that hold most
    of their cells.  ``old_ids``: every rank's owned global cells, gathered."""
    from scipy.optimize import linear_sum_assignment

    from ..mesh import from_case
    from ..mesh.core import cell_adjacency
    from ..parallel.topology import metis_split

    mesh = from_case(case.mesh)
    mesh.compact_indices()
    xadj, adjncy = cell_adjacency(mesh)
    parts = metis_split(xadj, adjncy, comm.size, fractions)
    old = np.empty(mesh.n_cells, dtype=np.int64)
    for r, ids in enumerate(old_ids):
        old[ids] = r
    fr = np.asarray(fractions)
    # the ranks whose fractions agree to 2 %: their parts may trade places
    order = np.argsort(fr)
    groups, start = [], 0
    for i in range(1, len(fr) + 1):
        if i == len(fr) or fr[order[i]] > fr[order[start]] * 1.02:
            groups.append(order[start:i])
            start = i
    relabel = np.arange(comm.size)
    for g in groups:
        if len(g) < 2:
            continue
        overlap = np.zeros((len(g), len(g)))
        for a, pa in enumerate(g):
            mine = old[parts == pa]
            for b, rb in enumerate(g):
                overlap[a, b] = np.count_nonzero(mine == rb)
        rows, cols = linear_sum_assignment(-overlap)
        relabel[g[rows]] = g[cols]
    return mesh, relabel[parts]


def migrate(run, fractions, log) -> None:
    """Collective: the run's state onto new parts of the given weight fractions."""
    from ..parallel.local import distribute
    from .checkpointing import given, read_plans, write_plans
    from .setup import solver_on

    case, comm = run.case, run.comm
    old_lm, old_solver = run.lmesh, run.solver
    arrays, extra = old_solver.checkpoint_state()
    plans = write_plans(comm, old_lm)
    blocks = {name: (plans[kind].to_block(given(a, kind, old_lm)), kind)
              for name, (a, kind) in arrays.items()}
    ids = comm.gather(np.asarray(old_lm.global_cells[: old_lm.n_owned]), root=0)
    mesh = parts = None
    if comm.rank == 0:
        mesh, parts = new_parts(case, comm, fractions, ids)
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
