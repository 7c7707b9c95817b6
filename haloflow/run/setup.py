"""A run's set-up on every rank: mesh -> partition -> LocalMesh -> exchanger -> solver, and the
post-processors the case switches on.

Rank 0 alone builds and partitions the global mesh (a mesh file is read once) and scatters
the LocalMeshes; ``haloflow bench halo`` starts from the same :func:`local_mesh`, so it
times the solver's own messages.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from . import RunError
from .memory import rss_bytes


@dataclass
class Run:
    """What every rank holds once a run is set up."""

    case: object
    comm: object
    threads: int
    threaded: bool  # vector and SpMV kernels on a thread pool (too few rows: not)
    lmesh: object
    ex: object  # the solver's halo exchanger
    red: object  # the run's Reducer: every global sum, max and gather
    solver: object
    timers: object
    posts: list  # the enabled post-processors, in registry order
    rss_base: int  # bytes resident before the mesh was built (memory.rss_bytes)
    retired: list = field(default_factory=list)  # exchangers a rebalance replaced: counters
    # set-up seconds on what a migration redoes, less loading kernels (it finds them loaded):
    # the global mesh and its parts (rank 0's count: the others wait for it), the solver
    remake_mesh_s: float = 0.0
    remake_solver_s: float = 0.0
    wait_policy: str | None = None  # the threads' OpenMP wait policy (set_threads)

    @property
    def amg(self):
        """The pressure AMG, or None."""
        return getattr(self.solver, "p_amg", None)

    def exchangers(self) -> list:
        """The solver's exchanger and those of the AMG's distributed coarse levels."""
        return self.live_exchangers() + self.retired

    def live_exchangers(self) -> list:
        return [self.ex] + (self.amg.coarse_exchangers() if self.amg else [])


WAIT_POLICY = {"sleep": "passive", "spin": "active"}  # OpenMP's OMP_WAIT_POLICY


def set_threads(threads: int, wait: str = "auto", comm=None) -> str | None:
    """Numba threads per rank, at most the ``NUMBA_NUM_THREADS`` numba may use here, and
    what OpenMP's threads do while they wait at a region's end (``parallel.thread_wait``)
    unless the environment's ``OMP_WAIT_POLICY`` says; returns the policy in effect
    (``passive``, ``active``, ``default``: the OpenMP runtime's own) or None on one thread.

    ``auto`` (the default): the runtime's own policy (GNU OpenMP spins about 300 000 times,
    a fraction of a millisecond, then sleeps: it spans the gaps between a solve's regions and
    sleeps through the serial phases) where this node's ranks times threads fit the cores
    this process may run on, else ``sleep``, as MPI libraries stop spinning when
    oversubscribed.  ``sleep`` (passive): a thread that waits sleeps and every region wakes
    it, which costs the 64^3 cavity on 1 rank x 2 threads 1.36x the step of ``auto`` here
    (docs/performance.md, "Threads"); it is for cores that other jobs share, whose load
    ``auto`` does not see.  ``spin`` (active): for cores of the run's own; under load a
    spinning thread holds the core its partner needs (22.8 s/step against 2.9-4.8 sleeping
    on this 2-core machine at loads of 11-16).  Set before numba starts its threads, which is
    when OpenMP reads it.  Collective where ``wait`` is ``auto`` (the node's ranks)."""
    import os

    import numba

    if threads > numba.config.NUMBA_NUM_THREADS:
        raise RunError(f"--threads {threads} exceeds the {numba.config.NUMBA_NUM_THREADS} "
                       "threads numba may use here (NUMBA_NUM_THREADS)")
    policy = None
    if wait == "auto" and comm is not None and threads > 1:
        fits = threads * node_ranks(comm) <= usable_cores()
        wait = "auto" if fits else "sleep"
    if threads > 1:
        if wait != "auto" and not _openmp_started():  # else too late: what it took stays
            os.environ.setdefault("OMP_WAIT_POLICY", WAIT_POLICY[wait])
        policy = os.environ.get("OMP_WAIT_POLICY", "default")
    numba.set_num_threads(threads)
    return policy


def _openmp_started() -> bool:
    """Whether numba's thread pool (and with it OpenMP, which reads its environment once)
    has started in this process: a program that imported the solvers before a run did."""
    from numba.np.ufunc import parallel

    return bool(getattr(parallel, "_is_initialized", False))


def node_ranks(comm) -> int:
    """Collective: how many of ``comm``'s ranks share this rank's node (its memory)."""
    from ..parallel.topology import rank_nodes

    nodes = rank_nodes(comm)
    return int((nodes == nodes[comm.rank]).sum())


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask where the OS has one)."""
    import os

    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def local_mesh(case, comm, log=None, decomposed=None):
    """Collective: this rank's LocalMesh of the case's mesh.  Rank 0 builds (or reads) and
    partitions the global mesh; a mesh error there stops every rank with it.  What a reader
    had to decide goes to ``log`` on rank 0 (None: warnings).  ``decomposed``: the folder of
    ``haloflow decompose``, from which every rank reads its own part instead."""
    from ..parallel.local import distribute
    from ..parallel.topology import rank_nodes

    nodes = rank_nodes(comm, case.parallel.ranks_per_node)
    if decomposed is not None:
        lmesh = read_decomposed(case, comm, decomposed)
        lmesh.nodes = nodes
        return lmesh
    mesh = parts = None
    err = None
    if comm.rank == 0:
        try:
            mesh, parts = cut_mesh(case, comm.size, nodes, log)
        except RunError as e:  # read on rank 0 only: every rank must stop with it
            err = str(e)
    err = comm.bcast(err, root=0)
    if err:
        raise RunError(err)
    lmesh = distribute(mesh, parts, comm)
    lmesh.nodes = nodes
    return lmesh


def cut_mesh(case, nparts: int, nodes, log=None) -> tuple:
    """One process: the case's mesh, checked, and the rank of each of its cells for
    ``nparts`` ranks on ``nodes`` (the node of every rank); a mesh error is a RunError."""
    from ..limits import generated_cells
    from ..mesh import MeshError, from_case
    from ..parallel.topology import place

    notes = [] if log else None
    try:
        where = case.mesh.file if case.mesh.type == "file" else f"the {case.mesh.type} mesh"
        key = {"box": "mesh.cells", "step": "mesh.cells_x, mesh.cells_y",
               "cylinder": "mesh.cells_around"}.get(case.mesh.type, where)
        fits(generated_cells(case.mesh), key)
        mesh = from_case(case.mesh, notes)
        fits(mesh.n_cells, where)
        mesh.compact_indices()  # before the check: it holds the geometry beside the lists
        refuse_broken(mesh, where)
    except MeshError as e:
        raise RunError(str(e)) from None
    finally:
        for n in notes or ():
            log(f"mesh: {n}")
    parts = place(mesh, nparts, case.parallel.decomposition, case.parallel.placement, nodes)
    return mesh, parts


def read_decomposed(case, comm, folder) -> object:
    """Collective: this rank's part of a decomposed case, every part checked on its rank and
    the parts against each other (what one rank sends another expects); any rank's problem
    stops every rank with it."""
    from pathlib import Path

    from ..parallel.decomposed import DecomposedError, case_digest, read_index, read_part

    lm, err = None, None
    try:
        index = read_index(Path(folder), comm.size, case_digest(case))
        lm = read_part(Path(folder), comm.rank, index)
    except (DecomposedError, OSError) as e:
        err = str(e)
    errors = [e for e in comm.allgather(err) if e]
    if errors:
        raise RunError(errors[0])
    sends = np.zeros(comm.size, np.int64)
    sends[lm.neighbours] = np.diff(lm.send_ptr)
    expected = np.zeros(comm.size, np.int64)
    expected[lm.neighbours] = np.diff(lm.recv_ptr)
    got = np.array(comm.alltoall(sends.tolist()))
    owned = comm.allreduce(lm.n_owned)
    if comm.allreduce(int(not np.array_equal(got, expected))) or owned != lm.n_cells_global:
        raise RunError(f"{folder}: the parts do not fit together (the cells one rank sends "
                       "another are not those it expects, or the owned cells do not add up "
                       "to the mesh): decompose again")
    return lm


def fits(n_cells: int, where: str) -> None:
    """A run of ``n_cells`` fits in the memory left, by the per-cell floor of a run."""
    from ..limits import RUN_BYTES_PER_CELL, too_big
    from ..mesh import MeshError

    why = too_big(n_cells * RUN_BYTES_PER_CELL)
    if why:
        raise MeshError(f"{where}: a run on {n_cells} cells {why}")


def refuse_broken(mesh, where: str) -> None:
    """The checks of ``haloflow mesh check``: a mesh it calls broken (open or inside-out
    cells, bad topology) is refused before any rank steps on it.  The geometry the check
    computes is dropped again: rank 0 keeps only what partitioning needs."""
    from ..mesh import MeshError
    from ..mesh.quality import check

    had = mesh.geometry is not None
    rep = check(mesh)
    if not had:
        mesh.geometry = None
    if not rep.ok:
        raise MeshError(f"{where}: the mesh is broken: {'; '.join(rep.problems)} (haloflow "
                        "mesh check shows the details)")


def release_centres(lmesh, case, posts) -> None:
    """Free the centres nothing reads once set-up is over: linear-upwind convection and van
    Driest damping (the wall's y+ each step) read face and cell centres every step, the
    velocity gathered at the end for plots and post-processors reads both, and
    post-processors read the cell centres."""
    if case.solver.convection == "linear-upwind" or case.output.plots or \
            getattr(case.physics, "van_driest", False):
        return
    lmesh.release_centres(faces=not any(post.gathers for post in posts), cells=not posts)


def solver_on(case, lmesh, comm, red, timers) -> tuple:
    """Collective: the halo exchanger, solver and post-processors of ``case`` on ``lmesh``
    (at set-up, and on a rebalance's new parts), then the mesh data nothing reads any more
    freed."""
    from ..parallel import halo
    from ..physics import make_solver
    from ..post import enabled

    # the solver's fields are numpy arrays: device staging is emulated, copies counted
    ex = halo.make(case.parallel.halo, lmesh, comm, staging=case.parallel.staging)
    solver = make_solver(lmesh, ex, red, timers, solver=case.solver, physics=case.physics,
                         boundary=case.boundary, initial=case.initial, mesh=case.mesh,
                         halo=case.parallel.halo)
    posts = [post(lmesh, case, solver, red) for post in enabled(case)]
    if not (case.output.fields or case.output.write_every):  # no writer reads them
        lmesh.release_topology()
    release_centres(lmesh, case, posts)
    return ex, solver, posts


def check_ranks(case, size: int) -> None:
    """The ranks the case names (``[parallel] emulate_speed``) are ranks of this run of
    ``size``: known only once it runs."""
    for r in sorted(case.parallel.emulate_speed, key=int):
        if int(r) >= size:
            raise RunError(f"parallel.emulate_speed: rank {r} is not one of this run's {size} "
                           f"rank{'s' if size > 1 else ''} (0 to {size - 1})")


def emulate(case, comm, lmesh, log) -> None:
    """Collective: the case's emulated network between its nodes (without ``ranks_per_node``
    every rank is a node of its own: on one machine all would share one) and its slow
    cores (``emulate_speed``)."""
    import numpy as np

    from ..parallel import emulation

    p = case.parallel
    nodes = lmesh.nodes if p.ranks_per_node else np.arange(comm.size)
    speed = float(p.emulate_speed.get(str(comm.rank), 1.0))
    em = emulation.install(comm, p.emulate_network or None, nodes, speed)
    if em.net is not None:
        log(f"emulating {em.net.name} between {em.node_count} node(s): local one-way "
            f"{em.local.latency * 1e6:.2f} us, network {em.net.latency * 1e6:.2f} us, "
            f"{em.net.bandwidth / 1e6:.0f} MB/s")
    if p.emulate_speed:
        slow = ", ".join(f"rank {r} at {s:g}" for r, s in sorted(p.emulate_speed.items()))
        log(f"emulating slower cores: {slow} (each waits its compute's extra time at every "
            f"communication point)")


def sync(comm) -> None:
    """Collective: a barrier, which a slow core's emulation sees as the set-up's others."""
    from ..parallel import emulation

    emulation.settle()
    comm.Barrier()
    emulation.resume()


class KernelLoading:
    """Seconds numba spends loading (or compiling) kernels while this context is open: a
    process's first call of each kernel.  The set-up pays it; a migration, which redoes
    the set-up on new parts, finds every kernel loaded and does not."""

    def __enter__(self):
        from numba.core import event

        self._timer = event.TimingListener()
        event.register("numba:compiler_lock", self._timer)
        return self

    def __exit__(self, *exc) -> None:
        from numba.core import event

        event.unregister("numba:compiler_lock", self._timer)

    @property
    def seconds(self) -> float:
        return self._timer.duration if self._timer.done else 0.0


def setup(case, comm, threads: int, log, decomposed=None) -> Run:
    """Collective: everything a run steps, timed as the "setup" phase (the mesh from the
    ``decomposed`` folder's parts where given)."""
    from ..backends import numba_loading
    from ..parallel.reduce import Reducer
    from ..parallel.threads import use_threads
    from ..parallel.timers import Timers

    numba_loading.install()
    timers = Timers()
    rss_base = rss_bytes()
    with timers("setup"), KernelLoading() as loading:
        t0 = time.perf_counter()
        lmesh = local_mesh(case, comm, log, decomposed)
        mesh_s = time.perf_counter() - t0 - loading.seconds
        if case.parallel.emulate_network or (case.parallel.emulate_speed and comm.size > 1):
            emulate(case, comm, lmesh, log)
        red = Reducer(comm)
        sync(comm)  # the solver's seconds, not a wait for another rank's set-up before it
        t0, loaded = time.perf_counter(), loading.seconds
        ex, solver, posts = solver_on(case, lmesh, comm, red, timers)
        solver_s = time.perf_counter() - t0 - (loading.seconds - loaded)
        # serial kernels unless they pay; bound once every kernel module is imported
        threaded = use_threads(threads, lmesh.n_owned)
    return Run(case, comm, threads, threaded, lmesh, ex, red, solver, timers, posts, rss_base,
               remake_mesh_s=max(mesh_s, 0.0), remake_solver_s=max(solver_s, 0.0))
