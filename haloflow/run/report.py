"""What a run leaves behind: the log, the fields, the post-processors' results, residuals.csv,
profile.json with its table, and summary.json.

The fields are written by every rank for its own cells; everything else by rank 0, after
the collective gathers and reductions every rank takes part in.
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path

import numpy as np

from ..physics.piso import temperature_scheme
from . import memory

SUMMARY_PHASES = ("assemble", "fluxes", "solve_U", "solve_p", "halo", "monitor")


class Log:
    """Rank-0 log: every line goes to log.txt; progress lines also to the terminal."""

    def __init__(self, path: Path | None, quiet: bool = False):
        self.file = open(path, "w", encoding="utf-8") if path else None  # noqa: SIM115
        self.quiet = quiet

    def __call__(self, msg: str, echo: bool = True) -> None:
        if self.file:
            self.file.write(msg + "\n")
            self.file.flush()
        if echo and not self.quiet:
            print(msg, flush=True)

    def close(self) -> None:
        if self.file:
            self.file.close()


def log_setup(run, outdir: Path, log) -> None:
    """Collective: rank 0 logs the case, the partition and the solver settings."""
    from ..parallel.threads import MIN_ROWS

    case, lmesh, solver, comm = run.case, run.lmesh, run.solver, run.comm
    counts = comm.gather((lmesh.n_owned, lmesh.n_ghost, len(lmesh.neighbours)), root=0)
    if comm.rank != 0:
        return
    s = case.solver
    own = np.array([c[0] for c in counts])
    log(f"haloflow: case {case.name} ({case.source}), {lmesh.n_cells_global} cells, "
        f"{comm.size} rank(s) x {run.threads} thread(s), halo {case.parallel.halo} "
        f"({case.parallel.staging} staging), "
        f"decomposition {case.parallel.decomposition}")
    device = getattr(getattr(solver, "pressure", None), "device", None)
    if getattr(solver, "device_step", None) is not None:
        also = " (its refreshes too, on several ranks)" if comm.size > 1 else ""
        log(f"  the whole step runs on {device.describe()}; the AMG's set-up and coarsest "
            f"factors on the host{also}")
    elif device is not None:
        on = "the pressure and momentum solves" if solver.momentum.device is not None else \
            "the pressure solve"
        log(f"  {on} run on {device.describe()}; the rest on the host (the whole step "
            f"on the device lacks {solver.device_step_lacks})")
    log(f"  cells per rank {own.min()}..{own.max()} (imbalance {own.max() / own.mean():.3f}), "
        f"ghosts {sum(c[1] for c in counts)}, neighbours per rank max "
        f"{max(c[2] for c in counts)}")
    if run.threads > 1:
        log(f"  OpenMP wait policy {run.wait_policy} "
            f"(parallel.thread_wait = \"{case.parallel.thread_wait}\")")
    if run.threads > 1 and not run.threaded:
        log(f"  vector and SpMV kernels run on 1 thread: {lmesh.n_owned} rows on rank 0 "
            f"are fewer than the {MIN_ROWS} that pay for a thread pool's launches")
    if solver.algorithm == "simple":
        cap = f" (max_dt {s.relaxation.max_dt:g})" if s.relaxation.max_dt else ""
        log(f"  SIMPLE{'C' if s.consistent else ''}, relaxation U {s.relaxation.U:g}{cap} "
            f"p {s.relaxation.p:g}, residual_tol {s.residual_tol:g}, max_iterations "
            f"{s.max_iterations}, solved velocity components {[int(d) for d in solver.comps]}")
    else:
        log(f"  dt {s.dt:g}, end_time {s.end_time:g}, steady_tol {s.steady_tol:g}, "
            f"solved velocity components {[int(d) for d in solver.comps]}")
    energy = getattr(solver, "energy", None)
    t = "" if energy is None else f" (T: {temperature_scheme(s)})"
    log(f"  convection {s.convection}{t}, gradient {s.gradient}, laplacian {s.laplacian}"
        f"{' (non-orthogonal mesh)' if solver.nonorth else ''}")
    ph = case.physics
    if ph.model == "les":
        used = ("Ck", "Cw") if ph.closure == "wale" else ("Ck", "Ce")
        log(f"  LES closure {ph.closure}, filter width (cell volume)^(1/3), "
            + ", ".join(f"{k} {getattr(ph, k):g}" for k in used))
    log(f"  output: {outdir}")


def cell_data(run) -> dict:
    """The cell arrays a field file holds: U, p (T with heat transfer, the SGS energy k and
    eddy viscosity nut of an LES closure), the owning rank, the global cell id, and what
    post-processors add (time averages)."""
    lmesh, solver = run.lmesh, run.solver
    n = lmesh.n_owned
    data = {"U": solver.U[:, :n].T, "p": solver.p, "rank": np.full(n, float(run.red.rank)),
            "cell_id": lmesh.global_cells[:n].astype(float)}
    if getattr(solver, "energy", None) is not None:
        data["T"] = solver.energy.T
    for name in ("k", "nut"):
        if hasattr(solver.closure, name):
            data[name] = getattr(solver.closure, name)
    for post in run.posts:
        data |= post.cell_fields()
    return data


def write_results(run, outdir: Path) -> dict:
    """Collective, timed as "io": the fields, every post-processor's report and the velocity
    plot.  Returns the post-processors' summary entries by name on rank 0 ({} elsewhere)."""
    from ..io import vtk
    from ..post.fields import gather_velocity

    case, lmesh, solver, red = run.case, run.lmesh, run.solver, run.red
    entries = {}
    with run.timers("io"):
        if case.output.fields:
            vtk.write_fields(str(outdir), case.name, lmesh, cell_data(run), red)
        fields = None
        if case.output.plots or any(post.gathers for post in run.posts):
            fields = gather_velocity(lmesh, solver.bc, solver.U, red)
        for post in run.posts:
            entry = post.report(outdir, fields if post.gathers else None)
            if entry is not None:
                entries[post.name] = entry
        if fields is not None and case.output.plots:
            _velocity_png(case, fields, outdir)
    return entries


def _velocity_png(case, fields, outdir: Path) -> None:
    """|U| and streamlines over the box, or over the extent of a mesh's non-empty patches."""
    from ..io import plots

    cc, uc, bxy, bu = fields
    if case.mesh.type == "box":
        (x0, y0, _), (lx, ly, _) = case.mesh.origin, case.mesh.lengths
        bounds = (x0, x0 + lx, y0, y0 + ly)
    else:  # a mesh file: the extent of its walls, inlets and outlets
        lo, hi = (bxy.min(axis=0), bxy.max(axis=0)) if len(bxy) else \
            (cc.min(axis=0), cc.max(axis=0))
        bounds = (lo[0], hi[0], lo[1], hi[1])
    plots.velocity_png(outdir / "plots" / "velocity.png", cc, uc, bounds,
                       title=f"{case.name}: |U|", boundary_xy=bxy, boundary_U=bu)


def _device_profile(solver) -> dict | None:
    """profile.json's ``device``: which device, and each linear solve's copies and bytes
    each way over the whole run (the set-up's included); None on the host."""
    pressure, momentum = getattr(solver, "pressure", None), getattr(solver, "momentum", None)
    if pressure is None or pressure.device is None:
        return None
    out = {"device": pressure.device.describe(), "pressure": pressure.device_profile()}
    if momentum is not None and momentum.device is not None:
        out["momentum"] = momentum.device.profile()
    if getattr(solver, "device_step", None) is not None:
        out["step"] = solver.device_step.profile()
    return out


def finish(run, loop, entries: dict, outdir: Path, log, t_start: float,
           restart: str | None = None) -> dict:
    """Collective: the profile over the steps after the first; then rank 0 writes
    residuals.csv, profile.json and summary.json and returns the summary ({} elsewhere)."""
    from ..parallel import profile as profiling
    from ..parallel import threads

    comm, solver = run.comm, run.solver
    root = comm.rank == 0
    mpi_call_s = profiling.mpi_call_seconds() if root else None
    kernel_call_s = profiling.kernel_call_seconds() if root else None
    amg_info = run.amg.profile() if run.amg else None
    device = _device_profile(solver)
    exchangers = run.exchangers()
    record = profiling.rank_record(run.lmesh, run.timers, exchangers, solver.red.stats,
                                   loop.seconds)
    prof_steps, first = loop.steps, 0  # profiles count the steps after the first
    if loop.steps > 1:
        record = profiling.since(record, loop.first_record)
        amg_info = profiling.amg_since(amg_info, loop.first_amg)
        prof_steps, first = loop.steps - 1, 1
    # messages of the AMG's transfers (aggregates spanning ranks, agglomerated levels)
    own = run.amg.rank_profile() if run.amg else None
    if own is not None:
        sent = [lv["visits"] * k for lv, k in zip(amg_info["levels"], own["transfer_peers"],
                                                   strict=True)]
        record["transfers"] = sum(sent)
        for lv, nnz, k in zip(amg_info["levels"], own["nnz"], sent, strict=True):
            lv["nnz"], lv["transfer_messages"] = nnz, k  # (rank 0's, in profile.json)
    records = comm.gather(record, root=0)
    halo_stats = comm.gather(run.ex.stats.as_dict(), root=0)
    rss = comm.gather((run.rss_base, memory.peak_rss_bytes(), run.lmesh.n_owned), root=0)
    splits = comm.gather(_halo_split(run.lmesh), root=0)
    emulated = _emulation(comm, loop.steps)
    for e in exchangers:
        e.close()
    if not root:
        return {}
    arr = _residuals(run, loop, outdir)
    ncomp = len(solver.comps)
    case = run.case
    prof = profiling.summarise(records, prof_steps, {
        "p_iters": float(np.mean(arr[first:, 4 + ncomp])) if len(arr) else 0.0,
        "u_iters": float(np.mean(arr[first:, 2 + ncomp])) if len(arr) else 0.0}, {
        "first_step_s": loop.first_s if loop.steps else 0.0,
        "case": {"name": case.name, "threads": run.threads, "halo": case.parallel.halo,
                 "decomposition": case.parallel.decomposition,
                 "agglomerate": case.solver.pressure.agglomerate},
        "mesh": {"cells": int(run.lmesh.n_cells_global),
                 "dims": ncomp},  # 2 for one-cell-thick cases with empty front and back
        "machine": {**profiling.machine(), "mpi_call_s": mpi_call_s,
                    "kernel_call_s": kernel_call_s},
        **({"balance": loop.balance} if loop.balance is not None else {}),
        **({"emulation": emulated} if emulated else {}),
        **({"amg": amg_info} if amg_info else {}),
        **({"device": device} if device else {})})
    prof["threads"] = threads.account(prof, run.threads, run.threaded, run.wait_policy)
    profiling.write(outdir / "profile.json", prof)
    for line in profiling.table(prof):
        log(line)
    summary = _summary(run, loop, arr, prof, halo_stats, time.perf_counter() - t_start)
    summary |= _survival(loop, restart)
    summary["placement"] = _placement(run.case, splits)
    if loop.balance is not None:
        summary["balance"] = loop.balance
    summary |= memory.summary(rss)
    for post in run.posts:
        entry = entries.get(post.name)
        if entry:
            summary[post.name] = entry
            line = post.log_line(entry)
            if line:
                log(line)
    with open(outdir / "summary.json", "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=2)
    log(f"results in {os.path.abspath(outdir)} (summary.json, profile.json, log.txt, "
        f"residuals.csv, fields/, plots/)")
    log.close()
    return summary


def _emulation(comm, steps: int) -> dict | None:
    """Collective: what an emulated network added (rank 0; None elsewhere or without one):
    seconds over the whole run, the busiest rank's per step, waits of compiled code; and
    what emulated slow cores waited (``slowed_s``, per rank)."""
    from ..parallel import emulation

    em = emulation.ACTIVE
    if em is None:
        return None
    recs = comm.gather(em.record(), root=0)
    if comm.rank != 0:
        return None
    added = [r["added_s"] for r in recs]
    return {"network": em.net.name if em.net is not None else None, "nodes": em.node_count,
            "added_s": added, "added_s_per_step": max(added) / max(steps, 1),
            "slowed_s": [r["slowed_s"] for r in recs],
            "delayed": sum(r["delayed"] for r in recs),
            "compiled_waits": sum(r["compiled_waits"] for r in recs),
            "compiled_unmatched": sum(r["compiled_unmatched"] for r in recs)}


def _halo_split(lmesh) -> dict | None:
    from ..parallel.topology import halo_split

    return None if lmesh.nodes is None else halo_split(lmesh, lmesh.nodes)


def _placement(case, splits: list) -> dict:
    """Which node each rank ran on and how much of the fine level's halo crossed nodes."""
    if not splits or splits[0] is None:
        return {}
    same = sum(s["halo_cells_same_node"] for s in splits)
    other = sum(s["halo_cells_other_nodes"] for s in splits)
    return {"placement": case.parallel.placement,
            "ranks_per_node": case.parallel.ranks_per_node or None,
            "nodes": len({s["node"] for s in splits}),
            "node_of_rank": [s["node"] for s in splits],
            "halo_cells_other_nodes": other, "halo_cells_same_node": same,
            "cross_node_fraction": other / max(same + other, 1),
            "neighbours_other_nodes": [s["neighbours_other_nodes"] for s in splits]}


def _survival(loop, restart: str | None) -> dict:
    """How the run ended and what it can be restarted from."""
    return {"status": loop.status, "signal": loop.signal or None,
            "restarted_from": restart, "start_step": loop.start,
            "steps_this_run": loop.steps, "last_checkpoint": loop.checkpoint,
            "checkpoints_written": loop.checkpoints,
            "checkpoint_s": loop.checkpoint_s / max(loop.checkpoints, 1)}


def _residuals(run, loop, outdir: Path) -> np.ndarray:
    """Rank 0: residuals.csv (and its plot); the rows as an array."""
    solver, case = run.solver, run.case
    arr = np.array(loop.rows) if loop.rows else np.zeros((0, 8))
    ncomp = len(solver.comps)
    names = ["step", "time"] + [f"U{'xyz'[d]}_res" for d in solver.comps] + [
        "U_iters", "p_res", "p_iters", "continuity", "dU_dt"]
    np.savetxt(outdir / "residuals.csv", arr, delimiter=",", header=",".join(names),
               comments="", fmt="%.10g")
    if case.output.plots and len(arr):
        from ..io import plots

        cols = {names[2 + k]: arr[:, 2 + k] for k in range(ncomp)}
        cols |= {"p": arr[:, 3 + ncomp], "dU/dt": arr[:, -1]}
        plots.residuals_png(outdir / "plots" / "residuals.png", arr[:, 0], cols,
                            title=f"{case.name}: initial residuals and steady measure")
    return arr


def _summary(run, loop, arr, prof, halo_stats, wall_s: float) -> dict:
    """summary.json's run-level entries (the post-processors add theirs)."""
    case, solver, comm, cells = run.case, run.solver, run.comm, run.lmesh.n_cells_global
    step, loop_s = loop.steps, loop.seconds
    ncomp = len(solver.comps)
    u_it = arr[:, 2 + ncomp] / max(ncomp, 1) if len(arr) else np.zeros(1)
    p_it = arr[:, 4 + ncomp] / solver.n_corr if len(arr) else np.zeros(1)
    return {
        "case": case.name,
        "cells": int(cells),
        "ranks": comm.size,
        "threads": run.threads,
        "steps": loop.last_step,
        "algorithm": solver.algorithm,
        "iterations": loop.last_step if solver.algorithm == "simple" else None,
        "sim_time": solver.time,
        "dt": case.solver.dt,
        "converged": bool(loop.converged),
        "final_dU_dt": float(arr[-1, -1]) if len(arr) else None,
        "final_residual": float(max(arr[-1, 2:2 + ncomp].max(initial=0.0), arr[-1, 3 + ncomp]))
        if len(arr) else None,
        "wall_s": wall_s,
        "loop_s": loop_s,
        "first_step_s": loop.first_s,
        "s_per_step": loop_s / max(step, 1),
        "ns_per_cell_step": loop_s / max(step, 1) / cells * 1e9,
        "p_solver": case.solver.pressure.method,
        "p_iters_mean": float(np.mean(p_it)),
        "p_iters_max": int(np.max(arr[:, 4 + ncomp])) if len(arr) else 0,
        "u_solver": case.solver.momentum.method,
        "u_iters_mean": float(np.mean(u_it)),
        "halo": case.parallel.halo,
        "staging": case.parallel.staging,
        "backend": case.solver.backend,
        "decomposition": case.parallel.decomposition,
        "phases_s": {k: prof["phases"][k]["per_rank"] if k in prof["phases"] else
                     [0.0] * comm.size for k in ("setup",) + SUMMARY_PHASES + ("io",)},
        "imbalance": prof["imbalance"],
        "comm_fraction": prof["comm_fraction"],
        "halo_stats": halo_stats,
        "host": platform.node(),
    }
