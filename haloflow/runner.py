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

SUMMARY_PHASES = ("assemble", "solve_U", "solve_p", "halo", "monitor")


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


def run_case(case, outdir: Path, comm, threads: int = 1, force: bool = False,
             quiet: bool = False) -> dict:
    """Run ``case`` on ``comm``; returns the summary dict on rank 0 ({} elsewhere)."""
    import numba

    from .io import cavity as cavity_post
    from .io import plots, vtk
    from .mesh.blocks import box
    from .parallel import halo
    from .parallel import profile as profiling
    from .parallel.decompose import decompose
    from .parallel.local import distribute
    from .parallel.timers import Timers
    from .physics.incompressible import DivergenceError, PisoSolver

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
        if root:
            m = case.mesh
            mesh = box(m.cells, m.lengths, m.origin, m.grading)
            parts = decompose(mesh, comm.size, case.parallel.decomposition)
        lmesh = distribute(mesh, parts, comm)
        del mesh
        # the solver's fields are numpy arrays: device staging is emulated, copies counted
        ex = halo.make(case.parallel.halo, lmesh, comm, staging=case.parallel.staging, gpu=False)
        solver = PisoSolver(lmesh, case, comm, ex, timers)
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
        log(f"  dt {s.dt:g}, end_time {s.end_time:g}, steady_tol {s.steady_tol:g}, "
            f"solved velocity components {[int(d) for d in solver.comps]}")
        log(f"  output: {outdir}")

    # time loop
    rows, history = [], []
    converged = False
    step = 0
    t_loop = time.perf_counter()
    max_steps = s.max_steps or None
    n_target = int(math.ceil(s.end_time / s.dt - 1e-9))
    bar = ProgressBar(s.end_time, enabled=root and not quiet and sys.stdout.isatty())
    try:
        while step < n_target and (max_steps is None or step < max_steps):
            info = solver.step()
            step += 1
            ui = [i.iters for i in info.u_solves]
            pi = [i.iters for i in info.p_solves]
            rows.append((step, solver.time, *(i.res0 for i in info.u_solves), sum(ui),
                         info.p_solves[0].res0, sum(pi), info.continuity, info.change))
            converged = s.steady_tol > 0.0 and info.change < s.steady_tol
            if root:
                if step % 10 == 1 or not history:
                    history.append((step, info.change))
                    history[:] = history[-20:]
                if bar.enabled or step % case.output.log_every == 0 or converged or step == 1:
                    el = time.perf_counter() - t_loop
                    eta = _eta(el / step, solver.time, s.end_time, s.dt, history, s.steady_tol)
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
        why = "steady state reached" if converged else (
            "max_steps reached" if max_steps and step >= max_steps else "end_time reached")
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
        if case.postprocess.cavity or case.output.plots:
            gathered = cavity_post.gather_velocity(lmesh, solver.bc, solver.U, comm)
        if root and case.postprocess.cavity:
            post = cavity_post.postprocess(str(outdir), case, gathered, case.output.plots)
        if root and case.output.plots:
            cc, uc, bxy, bu = gathered
            (x0, y0, _), (lx, ly, _) = case.mesh.origin, case.mesh.lengths
            plots.velocity_png(outdir / "plots" / "velocity.png", cc, uc,
                               (x0, x0 + lx, y0, y0 + ly), title=f"{case.name}: |U|",
                               boundary_xy=bxy, boundary_U=bu)

    exchangers = [ex] + (solver.p_amg.coarse_exchangers() if solver.p_amg else [])
    records = comm.gather(profiling.rank_record(lmesh, timers, exchangers, solver.red.stats,
                                                loop_s), root=0)
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
    p_it = arr[:, 4 + ncomp] / s.n_correctors if len(arr) else np.zeros(1)
    prof = profiling.summarise(records, step, {
        "p_iters": float(np.mean(arr[:, 4 + ncomp])) if len(arr) else 0.0,
        "u_iters": float(np.mean(arr[:, 2 + ncomp])) if len(arr) else 0.0})
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
        "sim_time": solver.time,
        "dt": s.dt,
        "converged": bool(converged),
        "final_dU_dt": float(arr[-1, -1]) if len(arr) else None,
        "wall_s": wall_s,
        "loop_s": loop_s,
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
    with open(outdir / "summary.json", "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=2)
    log(f"results in {os.path.abspath(outdir)} (summary.json, profile.json, log.txt, "
        f"residuals.csv, fields/, plots/)")
    log.close()
    return summary
