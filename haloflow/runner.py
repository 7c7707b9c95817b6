"""One run, from a validated Case to the files in its output directory.

Rank 0 builds and partitions the global mesh and scatters the LocalMeshes; every rank then
steps the solver; rank 0 alone logs, shows progress and writes the run-level files, while
the field files are written by every rank for its own cells.
"""

from __future__ import annotations

import json
import math
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

from .mpiutil import UserError

SUMMARY_PHASES = ("assemble", "fluxes", "solve_U", "solve_p", "halo", "monitor")


class RunError(UserError):
    """The run cannot start or go on (bad output directory, too many threads)."""


class DivergedError(UserError):
    """The solution blew up; every rank detects it in the same allreduce."""

    exit_code = 3


def prepare_outdir(outdir: Path, force: bool) -> None:
    """Create ``outdir``; never write into a non-empty folder unless ``force`` is given and
    the folder is a previous haloflow run (so ``--force`` cannot wipe unrelated data)."""
    if outdir.exists() and not outdir.is_dir():
        raise RunError(f"output path {outdir} exists and is not a directory")
    if outdir.is_dir() and any(outdir.iterdir()):
        if not force:
            raise RunError(f"output directory {outdir} is not empty; pass another -o or --force "
                           "to overwrite a previous run there")
        if not (outdir / "summary.json").exists() and not (outdir / "case.toml").exists():
            raise RunError(f"--force refused: {outdir} does not look like a haloflow run "
                           "(no case.toml or summary.json)")
    (outdir / "plots").mkdir(parents=True, exist_ok=True)


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


class ProgressBar:
    """Rank 0's live progress line on a terminal (rich): simulated time against end_time, the
    steady-state measure and the ETA.  Off when output goes to a file or a pipe, where the
    periodic log lines are the progress."""

    def __init__(self, end_time: float, enabled: bool):
        self.enabled = enabled
        if not enabled:
            return
        from rich.progress import BarColumn, Progress, TextColumn

        self.bar = Progress(TextColumn("t {task.completed:9.4f} / {task.total:g}"), BarColumn(),
                            TextColumn("{task.description}"), transient=True)
        self.task = self.bar.add_task("", total=end_time)
        self.bar.start()

    def update(self, t: float, text: str) -> None:
        if self.enabled:
            self.bar.update(self.task, completed=t, description=text)

    def stop(self) -> None:
        if self.enabled:
            self.bar.stop()


def _eta(step_s: float, t: float, end_time: float, dt: float, history, tol: float) -> float:
    """Seconds left: to end_time, or sooner if the steady measure keeps decaying as it has."""
    left = max(0.0, (end_time - t) / dt) * step_s
    if tol > 0.0 and len(history) >= 2 and history[-1][1] > tol:
        (s0, c0), (s1, c1) = history[0], history[-1]
        if 0.0 < c1 < c0 and s1 > s0:
            rate = math.log(c0 / c1) / (s1 - s0)  # per step
            left = min(left, math.log(c1 / tol) / rate * step_s)
    return left


def _fmt_s(s: float) -> str:
    return f"{s:.0f} s" if s < 120 else f"{s / 60:.1f} min"


def _amg(solver):
    return getattr(solver, "p_amg", None)


def _exchangers(solver, ex) -> list:
    """The solver's exchanger and those of the AMG's distributed coarse levels."""
    amg = _amg(solver)
    return [ex] + (amg.coarse_exchangers() if amg else [])


def run_case(case, outdir: Path, comm, threads: int = 1, force: bool = False,
             quiet: bool = False) -> dict:
    """Run ``case`` on ``comm``; returns the summary dict on rank 0 ({} elsewhere)."""
    import numba

    from .io import cavity as cavity_post
    from .io import channel as channel_post
    from .io import cylinder as cylinder_post
    from .io import plots, vtk
    from .io import step as step_post
    from .io import taylor_green as tg_post
    from .mesh import MeshError, from_case
    from .parallel import halo
    from .parallel import profile as profiling
    from .parallel.decompose import decompose
    from .parallel.local import distribute
    from .parallel.threads import MIN_ROWS, use_threads
    from .parallel.timers import Timers
    from .physics import DivergenceError, make_solver

    t_start = time.perf_counter()
    root = comm.rank == 0
    if threads > numba.config.NUMBA_NUM_THREADS:
        raise RunError(f"--threads {threads} exceeds the {numba.config.NUMBA_NUM_THREADS} "
                       "threads numba may use here (NUMBA_NUM_THREADS)")
    numba.set_num_threads(threads)

    err = None
    if root:
        try:
            prepare_outdir(outdir, force)
        except RunError as e:
            err = str(e)
    err = comm.bcast(err, root=0)
    if err:
        raise RunError(err)
    log = Log(outdir / "log.txt" if root else None, quiet=quiet or not root)
    if root:
        (outdir / "case.toml").write_text(case.to_toml(), encoding="utf-8")

    # mesh, partition, local meshes
    timers = Timers()
    with timers("setup"):
        mesh = parts = None
        err = None
        if root:
            notes: list[str] = []
            try:
                mesh = from_case(case.mesh, notes)
            except MeshError as e:  # read on rank 0 only: every rank must stop with it
                err = str(e)
            for n in notes:
                log(f"mesh: {n}")
            if err is None:
                parts = decompose(mesh, comm.size, case.parallel.decomposition)
        err = comm.bcast(err, root=0)
        if err:
            raise RunError(err)
        lmesh = distribute(mesh, parts, comm)
        threaded = use_threads(threads, lmesh.n_owned)  # serial kernels unless they pay
        del mesh
        # the solver's fields are numpy arrays: device staging is emulated, copies counted
        ex = halo.make(case.parallel.halo, lmesh, comm, staging=case.parallel.staging, gpu=False)
        from .parallel.reduce import Reducer

        solver = make_solver(lmesh, ex, Reducer(comm), timers, solver=case.solver,
                             physics=case.physics, boundary=case.boundary,
                             initial=case.initial, mesh=case.mesh, halo=case.parallel.halo)
        monitor = (cylinder_post.Monitor(lmesh, case, solver, comm)  # per-step forces
                   if case.postprocess.cylinder else None)
    counts = comm.gather((lmesh.n_owned, lmesh.n_ghost, len(lmesh.neighbours)), root=0)
    s = case.solver
    if root:
        own = np.array([c[0] for c in counts])
        log(f"haloflow: case {case.name} ({case.source}), {lmesh.n_cells_global} cells, "
            f"{comm.size} rank(s) x {threads} thread(s), halo {case.parallel.halo} "
            f"({case.parallel.staging} staging), "
            f"decomposition {case.parallel.decomposition}")
        log(f"  cells per rank {own.min()}..{own.max()} (imbalance {own.max() / own.mean():.3f}), "
            f"ghosts {sum(c[1] for c in counts)}, neighbours per rank max "
            f"{max(c[2] for c in counts)}")
        if threads > 1 and not threaded:
            log(f"  vector and SpMV kernels run on 1 thread: {lmesh.n_owned} rows on rank 0 "
                f"are fewer than the {MIN_ROWS} that pay for a thread pool's launches")
        if solver.algorithm == "simple":
            log(f"  SIMPLE{'C' if s.consistent else ''}, relaxation U {s.relaxation.U:g} "
                f"p {s.relaxation.p:g}, residual_tol {s.residual_tol:g}, max_iterations "
                f"{s.max_iterations}, solved velocity components {[int(d) for d in solver.comps]}")
        else:
            log(f"  dt {s.dt:g}, end_time {s.end_time:g}, steady_tol {s.steady_tol:g}, "
                f"solved velocity components {[int(d) for d in solver.comps]}")
        log(f"  convection {s.convection}, gradient {s.gradient}, laplacian {s.laplacian}"
            f"{' (non-orthogonal mesh)' if solver.nonorth else ''}")
        log(f"  output: {outdir}")

    # time loop
    rows, history = [], []
    first_s, first_record, first_amg = 0.0, None, None
    converged = False
    step = 0
    t_loop = time.perf_counter()
    max_steps = s.max_steps or None
    dt, end_time, tol = solver.dt, solver.end_time, solver.steady_tol  # SIMPLE: 1, iterations
    n_target = int(math.ceil(end_time / dt - 1e-9))
    bar = ProgressBar(end_time, enabled=root and not quiet and sys.stdout.isatty())
    try:
        while step < n_target and (max_steps is None or step < max_steps):
            info = solver.step()
            step += 1
            if monitor is not None:  # collective: one allreduce
                with timers("monitor"):
                    monitor.sample(solver)
            if step == 1:  # one-time costs (AMG set-up, loading kernels) stay out of profiles
                first_s = time.perf_counter() - t_loop
                first_record = profiling.rank_record(lmesh, timers, _exchangers(solver, ex),
                                                     solver.red.stats, first_s)
                first_amg = _amg(solver).profile() if _amg(solver) else None
            ui = [i.iters for i in info.u_solves]
            pi = [i.iters for i in info.p_solves]
            rows.append((step, solver.time, *(i.res0 for i in info.u_solves), sum(ui),
                         info.p_solves[0].res0, sum(pi), info.continuity, info.change))
            converged = solver.converged(info)
            if root:
                if step % 10 == 1 or not history:
                    history.append((step, solver.steady_measure(info)))
                    history[:] = history[-20:]
                if bar.enabled or step % case.output.log_every == 0 or converged or step == 1:
                    el = time.perf_counter() - t_loop
                    eta = _eta(el / step, solver.time, end_time, dt, history, tol)
                    bar.update(solver.time, f"dU/dt {info.change:8.2e}  p {sum(pi):3d} it  "
                                            f"{el / step * 1e3:6.1f} ms/step  ETA {_fmt_s(eta)}")
                if step % case.output.log_every == 0 or converged or step == 1:
                    log(f"step {step:6d}  t {solver.time:9.4f}  dU/dt {info.change:9.3e}  "
                        f"U res {max(i.res0 for i in info.u_solves):8.2e} ({max(ui):3d} it)  "
                        f"p res {info.p_solves[0].res0:8.2e} ({sum(pi):4d} it)  "
                        f"cont {info.continuity:8.2e}  {el / step * 1e3:7.1f} ms/step  "
                        f"ETA {_fmt_s(eta)}")
            if converged:
                break
    except DivergenceError as e:
        raise DivergedError(str(e)) from None
    finally:
        bar.stop()
    loop_s = time.perf_counter() - t_loop
    if root:
        simple = solver.algorithm == "simple"
        why = ("converged: residuals below residual_tol" if simple else "steady state reached") \
            if converged else ("max_steps reached" if max_steps and step >= max_steps else
                               "max_iterations reached" if simple else "end_time reached")
        if simple:
            log(f"SIMPLE {why} after {step} iterations, {loop_s:.2f} s "
                f"({loop_s / max(step, 1) * 1e3:.2f} ms/iteration)")
        else:
            log(f"{why} after {step} steps, t = {solver.time:.6g}, {loop_s:.2f} s "
                f"({loop_s / max(step, 1) * 1e3:.2f} ms/step)")

    # outputs
    with timers("io"):
        if case.output.fields:
            U = solver.U[:, : lmesh.n_owned].T
            data = {"U": U, "p": solver.p, "rank": np.full(lmesh.n_owned, float(comm.rank)),
                    "cell_id": lmesh.global_cells[: lmesh.n_owned].astype(float)}
            vtk.write_fields(str(outdir), case.name, lmesh, data, comm)
        post = {}
        if (case.postprocess.cavity or case.postprocess.channel or case.postprocess.backward_step
                or case.postprocess.cylinder or case.output.plots):
            gathered = cavity_post.gather_velocity(lmesh, solver.bc, solver.U, comm)
        if root and case.postprocess.cavity:
            post = cavity_post.postprocess(str(outdir), case, gathered, case.output.plots)
        channel = None
        if root and case.postprocess.channel:
            channel = channel_post.postprocess(str(outdir), case, gathered[0], gathered[1],
                                               case.output.plots)
        tg = None
        if case.postprocess.taylor_green:  # collective: every rank holds its part
            tg = tg_post.errors(lmesh, solver.U, solver.p, solver.time, case, comm)
        cyl = None
        if root and monitor is not None:
            cyl = monitor.report(str(outdir), *gathered, case.output.plots)
        bstep = None
        if root and case.postprocess.backward_step:
            bstep = step_post.postprocess(str(outdir), case, gathered[0], gathered[1],
                                          case.output.plots)
        if root and case.output.plots:
            cc, uc, bxy, bu = gathered
            if case.mesh.type == "box":
                (x0, y0, _), (lx, ly, _) = case.mesh.origin, case.mesh.lengths
                bounds = (x0, x0 + lx, y0, y0 + ly)
            else:  # a mesh file: the extent of its walls, inlets and outlets
                lo, hi = (bxy.min(axis=0), bxy.max(axis=0)) if len(bxy) else \
                    (cc.min(axis=0), cc.max(axis=0))
                bounds = (lo[0], hi[0], lo[1], hi[1])
            plots.velocity_png(outdir / "plots" / "velocity.png", cc, uc,
                               bounds, title=f"{case.name}: |U|",
                               boundary_xy=bxy, boundary_U=bu)

    mesh_dims = len(solver.comps)  # 2 for one-cell-thick cases with empty front and back
    mpi_call_s = profiling.mpi_call_seconds() if root else None
    kernel_call_s = profiling.kernel_call_seconds() if root else None
    amg_info = _amg(solver).profile() if _amg(solver) else None
    exchangers = _exchangers(solver, ex)
    record = profiling.rank_record(lmesh, timers, exchangers, solver.red.stats, loop_s)
    prof_steps, first = step, 0  # profiles count the steps after the first
    if step > 1:
        record = profiling.since(record, first_record)
        amg_info = profiling.amg_since(amg_info, first_amg)
        prof_steps, first = step - 1, 1
    records = comm.gather(record, root=0)
    halo_stats = comm.gather(ex.stats.as_dict(), root=0)
    for e in exchangers:
        e.close()
    if not root:
        return {}
    arr = np.array(rows) if rows else np.zeros((0, 8))
    ncomp = len(solver.comps)
    names = ["step", "time"] + [f"U{'xyz'[d]}_res" for d in solver.comps] + [
        "U_iters", "p_res", "p_iters", "continuity", "dU_dt"]
    np.savetxt(outdir / "residuals.csv", arr, delimiter=",", header=",".join(names),
               comments="", fmt="%.10g")
    if case.output.plots and len(arr):
        cols = {names[2 + k]: arr[:, 2 + k] for k in range(ncomp)}
        cols |= {"p": arr[:, 3 + ncomp], "dU/dt": arr[:, -1]}
        plots.residuals_png(outdir / "plots" / "residuals.png", arr[:, 0], cols,
                            title=f"{case.name}: initial residuals and steady measure")
    u_it = arr[:, 2 + ncomp] / max(ncomp, 1) if len(arr) else np.zeros(1)
    p_it = arr[:, 4 + ncomp] / solver.n_corr if len(arr) else np.zeros(1)
    prof = profiling.summarise(records, prof_steps, {
        "p_iters": float(np.mean(arr[first:, 4 + ncomp])) if len(arr) else 0.0,
        "u_iters": float(np.mean(arr[first:, 2 + ncomp])) if len(arr) else 0.0}, {
        "first_step_s": first_s if step else 0.0,
        "case": {"name": case.name, "threads": threads, "halo": case.parallel.halo,
                 "decomposition": case.parallel.decomposition},
        "mesh": {"cells": int(lmesh.n_cells_global), "dims": mesh_dims},
        "machine": {**profiling.machine(), "mpi_call_s": mpi_call_s,
                    "kernel_call_s": kernel_call_s},
        **({"amg": amg_info} if amg_info else {})})
    profiling.write(outdir / "profile.json", prof)
    for line in profiling.table(prof):
        log(line)
    wall_s = time.perf_counter() - t_start
    summary = {
        "case": case.name,
        "cells": int(lmesh.n_cells_global),
        "ranks": comm.size,
        "threads": threads,
        "steps": step,
        "algorithm": solver.algorithm,
        "iterations": step if solver.algorithm == "simple" else None,
        "sim_time": solver.time,
        "dt": s.dt,
        "converged": bool(converged),
        "final_dU_dt": float(arr[-1, -1]) if len(arr) else None,
        "final_residual": float(max(arr[-1, 2:2 + ncomp].max(initial=0.0), arr[-1, 3 + ncomp]))
        if len(arr) else None,
        "wall_s": wall_s,
        "loop_s": loop_s,
        "first_step_s": first_s,
        "s_per_step": loop_s / max(step, 1),
        "ns_per_cell_step": loop_s / max(step, 1) / lmesh.n_cells_global * 1e9,
        "p_solver": case.solver.pressure.method,
        "p_iters_mean": float(np.mean(p_it)),
        "p_iters_max": int(np.max(arr[:, 4 + ncomp])) if len(arr) else 0,
        "u_solver": case.solver.momentum.method,
        "u_iters_mean": float(np.mean(u_it)),
        "halo": case.parallel.halo,
        "staging": case.parallel.staging,
        "decomposition": case.parallel.decomposition,
        "phases_s": {k: prof["phases"][k]["per_rank"] if k in prof["phases"] else
                     [0.0] * comm.size for k in ("setup",) + SUMMARY_PHASES + ("io",)},
        "imbalance": prof["imbalance"],
        "comm_fraction": prof["comm_fraction"],
        "halo_stats": halo_stats,
        "host": platform.node(),
    }
    if post:
        summary["cavity"] = post
        if "max_dev" in post:
            log(f"Ghia et al. (1982), Re = {post['re']:g}: max |du| {post['max_du']:.4f}, "
                f"max |dv| {post['max_dv']:.4f}")
    if channel:
        summary["channel"] = channel
        log(f"channel, Re = {channel['re']:g}: profile at x = {channel['x']:.4g} against "
            f"Poiseuille flow: max |u - u_exact| / u_max = {channel['max_rel_error']:.5f}")
    if tg:
        summary["taylor_green"] = tg
        log(f"Taylor-Green vortices at t = {tg['time']:.6g}: velocity error L2 "
            f"{tg['u_l2_error']:.4e} max {tg['u_max_error']:.4e}, pressure error L2 "
            f"{tg['p_l2_error']:.4e} (relative to the exact peak), kinetic energy "
            f"{tg['kinetic_energy_ratio']:.6f} of exact")
    if bstep:
        summary["backward_step"] = bstep
        xr = bstep["xr_over_S"]
        log(f"backward-facing step, Re = {bstep['re']:g} (U 2h / nu): reattachment "
            + (f"x_r / S = {xr:.4f}" if xr is not None else
               "not found (no recirculation behind the step yet: not converged?)") + (
                f" (Armaly et al. 1983: {bstep['xr_over_S_armaly']:.2f})"
                if bstep.get("xr_over_S_armaly") is not None else ""))
    if cyl:
        summary["cylinder"] = cyl
        log(cylinder_post.log_line(cyl))
    with open(outdir / "summary.json", "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=2)
    log(f"results in {os.path.abspath(outdir)} (summary.json, profile.json, log.txt, "
        f"residuals.csv, fields/, plots/)")
    log.close()
    return summary
