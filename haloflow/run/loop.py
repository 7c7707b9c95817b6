"""The time (or SIMPLE iteration) loop: step the solver, let every sampling post-processor
look at the new fields, and tell rank 0's user how far the run is and how long it will take.

The first step carries one-time costs (AMG set-up, loading kernels); every rank records its
profile after it, so the run's profile can count the steps after the first.  After each step
the :class:`~.schedule.Schedule` says whether a checkpoint or a field series file is due and
whether a signal asks the run to stop; a restarted run starts from its checkpoint's step.
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass

from . import DivergedError
from . import timeline as run_timeline


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
    start: int = 0  # the step this run started from (a restart's checkpoint)
    status: str = "completed"  # or "interrupted" (a signal)
    signal: str = ""  # the signal that interrupted it
    checkpoint: str | None = None  # the last checkpoint written
    checkpoints: int = 0  # written by this run
    checkpoint_s: float = 0.0  # their seconds
    balance: dict | None = None  # the balancer's rebalances
    timeline: object = None  # the run's RunTimeline (output.timeline), or None

    @property
    def last_step(self) -> int:
        return self.start + self.steps


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


def run_loop(run, log, quiet: bool, outdir=None, start: int = 0) -> Loop:
    """Collective: step to end_time, steady state or max_steps (counted from the original
    run's start), writing checkpoints and field series into ``outdir`` as the case asks;
    rank 0 logs progress.  ``start``: the step a restarted run goes on from."""
    from ..physics import DivergenceError
    from .schedule import Schedule

    case, solver = run.case, run.solver
    root = run.comm.rank == 0
    lp = Loop(0, False, [], 0.0, 0.0, None, None, start=start)
    history = []
    max_steps = case.solver.max_steps or None
    dt, end_time = solver.dt, solver.end_time  # SIMPLE: 1, iterations
    n_target = int(math.ceil(end_time / dt - 1e-9))
    bar = ProgressBar(end_time, enabled=root and not quiet and sys.stdout.isatty())
    sched = Schedule(case.output, run.red, start)
    saver = series = None
    if outdir is not None:
        from .checkpointing import Checkpointer
        from .series import FieldSeries

        saver = Checkpointer(run, outdir, case.output.checkpoint_keep)
        series = FieldSeries(run, outdir)
    balancer = None
    if case.parallel.balance == "time" and run.comm.size > 1:
        from .balance import Balancer

        balancer = Balancer(run, log if root else (lambda *a, **k: None), start)
    samplers = [post for post in run.posts if post.samples]  # rebuilt by a rebalance
    step = start
    tl = run_timeline.begin(run)
    lp.timeline = tl
    t_loop = time.perf_counter()
    try:
        while step < n_target and (max_steps is None or step < max_steps):
            if tl is not None:
                tl.next(step)
            solver = run.solver  # a rebalance builds a new one
            info = solver.step()
            step += 1
            lp.steps = step - start
            _record(run, lp, info, t_loop, samplers)
            lp.converged = solver.converged(info)
            if root:
                _progress(case, solver, lp, info, history, bar, log, t_loop)
            if lp.converged:
                break
            stop, ckpt = sched.after_step(step)
            if saver is not None:
                _write_due(run, saver, series, sched, lp, ckpt, sched.series_due(step))
            if stop:
                lp.status, lp.signal = "interrupted", sched.signal_name
                break
            if balancer is not None:
                with run.timers("balance"):
                    if balancer.after_step(step, n_target if max_steps is None else
                                           min(n_target, max_steps)):
                        samplers = [post for post in run.posts if post.samples]
        if tl is not None:
            tl.close()
        if saver is not None and lp.steps and lp.status == "completed":
            # the end of the run: a last checkpoint and series file, unless just written
            last = sched.final_checkpoint(step)
            more = sched.write_every > 0 and (lp.converged or not sched.series_due(step))
            if last or more:
                _write_due(run, saver, series, sched, lp, last, more)
    except DivergenceError as e:
        raise DivergedError(str(e)) from None
    finally:
        bar.stop()
        sched.restore_signals()
    lp.seconds = time.perf_counter() - t_loop
    lp.balance = balancer.summary() if balancer is not None else None
    solver = run.solver
    solver.to_host()  # the fields the report and its files read
    if saver is not None:
        lp.checkpoints, lp.checkpoint_s = saver.written, saver.seconds
    if root:
        log(_ending(lp, solver.algorithm == "simple", max_steps, solver.time))
    return lp


def _record(run, lp: Loop, info, t_loop: float, samplers: list) -> None:
    """The step's row of residuals.csv; after a run's first step, the profiles that later
    exclude its one-time costs (AMG set-up, loading kernels)."""
    from ..parallel import profile as profiling

    solver, timers = run.solver, run.timers
    if samplers:  # collective: one allreduce each
        solver.to_host()
        with timers("monitor"):
            for post in samplers:
                post.sample(solver)
    if lp.steps == 1:
        lp.first_s = time.perf_counter() - t_loop
        lp.first_record = profiling.rank_record(run.lmesh, timers, run.exchangers(),
                                                solver.red.stats, lp.first_s)
        lp.first_amg = run.amg.profile() if run.amg else None
    ui = [i.iters for i in info.u_solves]
    pi = [i.iters for i in info.p_solves]
    lp.rows.append((lp.last_step, solver.time, *(i.res0 for i in info.u_solves), sum(ui),
                    info.p_solves[0].res0, sum(pi), info.continuity, info.change))


def _progress(case, solver, lp: Loop, info, history, bar, log, t_loop) -> None:
    """Rank 0: the progress bar and, every ``log_every`` steps, a log line."""
    step = lp.last_step
    pi = [i.iters for i in info.p_solves]
    ui = [i.iters for i in info.u_solves]
    if lp.steps % 10 == 1 or not history:
        history.append((lp.steps, solver.steady_measure(info)))
        history[:] = history[-20:]
    every = step % case.output.log_every == 0 or lp.converged or lp.steps == 1
    if not (bar.enabled or every):
        return
    el = time.perf_counter() - t_loop
    eta = _eta(el / lp.steps, solver.time, solver.end_time, solver.dt, history,
               solver.steady_tol)
    bar.update(solver.time, f"dU/dt {info.change:8.2e}  p {sum(pi):3d} it  "
                            f"{el / lp.steps * 1e3:6.1f} ms/step  ETA {_fmt_s(eta)}")
    if every:
        log(f"step {step:6d}  t {solver.time:9.4f}  dU/dt {info.change:9.3e}  "
            f"U res {max(i.res0 for i in info.u_solves):8.2e} ({max(ui):3d} it)  "
            f"p res {info.p_solves[0].res0:8.2e} ({sum(pi):4d} it)  "
            f"cont {info.continuity:8.2e}  {el / lp.steps * 1e3:7.1f} ms/step  "
            f"ETA {_fmt_s(eta)}")


def _write_due(run, saver, series, sched, lp: Loop, checkpoint: bool, fields: bool) -> None:
    """Collective, timed as "io": the checkpoint and the field series file due now."""
    step = lp.last_step
    with run.timers("io"):
        run.solver.to_host()
        if checkpoint:
            lp.checkpoint = saver.write(step, run.solver.time)
            sched.wrote_checkpoint(step)
        if fields:
            series.write(step)


def _ending(loop: Loop, simple: bool, max_steps: int | None, t: float) -> str:
    """The log line that says why and when the loop stopped."""
    step, loop_s = loop.last_step, loop.seconds
    if loop.status == "interrupted":
        return (f"interrupted by {loop.signal} after step {step}, t = {t:.6g}; checkpoint "
                f"{loop.checkpoint}")
    why = ("converged: residuals below residual_tol" if simple else "steady state reached") \
        if loop.converged else ("max_steps reached" if max_steps and step >= max_steps else
                                "max_iterations reached" if simple else "end_time reached")
    if simple:
        return (f"SIMPLE {why} after {step} iterations, {loop_s:.2f} s "
                f"({loop_s / max(loop.steps, 1) * 1e3:.2f} ms/iteration)")
    return (f"{why} after {step} steps, t = {t:.6g}, {loop_s:.2f} s "
            f"({loop_s / max(loop.steps, 1) * 1e3:.2f} ms/step)")
