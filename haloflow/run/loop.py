"""The time (or SIMPLE iteration) loop: step the solver, let every sampling post-processor
look at the new fields, and tell rank 0's user how far the run is and how long it will take.

The first step carries one-time costs (AMG set-up, loading kernels); every rank records its
profile after it, so the run's profile can count the steps after the first.
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass

from . import DivergedError


@dataclass
class Loop:
    """What the loop leaves for the report."""

    steps: int
    converged: bool
    rows: list  # per step: step, time, U residuals, U iterations, p residual, p iterations,
    # continuity, dU/dt (the columns of residuals.csv)
    seconds: float
    first_s: float  # the first step's seconds
    first_record: dict | None  # this rank's profile record after the first step
    first_amg: dict | None  # the AMG's profile after the first step


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


def run_loop(run, log, quiet: bool) -> Loop:
    """Collective: step to end_time, steady state or max_steps; rank 0 logs progress."""
    from ..parallel import profile as profiling
    from ..physics import DivergenceError

    case, solver, timers = run.case, run.solver, run.timers
    root = run.comm.rank == 0
    samplers = [post for post in run.posts if post.samples]
    rows, history = [], []
    first_s, first_record, first_amg = 0.0, None, None
    converged = False
    step = 0
    t_loop = time.perf_counter()
    max_steps = case.solver.max_steps or None
    dt, end_time, tol = solver.dt, solver.end_time, solver.steady_tol  # SIMPLE: 1, iterations
    n_target = int(math.ceil(end_time / dt - 1e-9))
    bar = ProgressBar(end_time, enabled=root and not quiet and sys.stdout.isatty())
    try:
        while step < n_target and (max_steps is None or step < max_steps):
            info = solver.step()
            step += 1
            if samplers:  # collective: one allreduce each
                with timers("monitor"):
                    for post in samplers:
                        post.sample(solver)
            if step == 1:  # one-time costs (AMG set-up, loading kernels) stay out of profiles
                first_s = time.perf_counter() - t_loop
                first_record = profiling.rank_record(run.lmesh, timers, run.exchangers(),
                                                     solver.red.stats, first_s)
                first_amg = run.amg.profile() if run.amg else None
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
    loop = Loop(step, converged, rows, time.perf_counter() - t_loop, first_s, first_record,
                first_amg)
    if root:
        log(_ending(loop, solver.algorithm == "simple", max_steps, solver.time))
    return loop


def _ending(loop: Loop, simple: bool, max_steps: int | None, t: float) -> str:
    """The log line that says why and when the loop stopped."""
    step, loop_s = loop.steps, loop.seconds
    why = ("converged: residuals below residual_tol" if simple else "steady state reached") \
        if loop.converged else ("max_steps reached" if max_steps and step >= max_steps else
                                "max_iterations reached" if simple else "end_time reached")
    if simple:
        return (f"SIMPLE {why} after {step} iterations, {loop_s:.2f} s "
                f"({loop_s / max(step, 1) * 1e3:.2f} ms/iteration)")
    return (f"{why} after {step} steps, t = {t:.6g}, {loop_s:.2f} s "
            f"({loop_s / max(step, 1) * 1e3:.2f} ms/step)")
