"""``haloflow scale``: one case run on every nodes x ranks x threads x halo configuration.

Each configuration is an ordinary ``haloflow run`` started through a launcher (the venv's own
mpiexec by default, or a template such as srun's), so the sweep measures exactly what a user
would get.  Nothing is timed here: each run's profile.json and summary.json are read back
(docs/design.md, section 9) into one row of ``scale.csv``, from which report.py draws the plots.
A failed configuration is recorded and the sweep goes on.
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import shlex
import signal
import string
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from .report import PHASES, add_speedup, write_csv, write_report

DEFAULT_LAUNCHER = "{mpiexec} -n {ranks}"
PLACEHOLDERS = ("mpiexec", "ranks", "nodes", "ranks_per_node", "threads")

EPILOG = """\
examples:
  haloflow scale cavity --ranks 1,2 --threads 1,2 --halo packed,aggregated --steps 20
  haloflow scale cavity --ranks 1,2,4 --set mesh.cells=[256,256,1] -o runs/scale-256
  haloflow scale my.toml --nodes 1,2 --ranks 8,16 --cores-per-node 8 \\
      --launcher "srun -N {nodes} --ntasks-per-node {ranks_per_node} -c {threads}"
  haloflow scale cavity --ranks 1,2,4 --dry-run        # print the commands only

Configurations are named FlowVision-style, nodes x ranks per node x threads (1x2x1), then
the halo strategy.  --ranks counts all ranks; with --nodes, ranks per node = ranks / nodes
(combinations that do not divide are skipped).  Launcher placeholders: {mpiexec} (the
mpiexec next to this Python, never a system one), {ranks}, {nodes}, {ranks_per_node},
{threads}.  Each run is `<launcher> python -m haloflow run CASE -o DIR/runs/<config>
--steps N --threads T --halo H --quiet --set output.fields=false --set output.plots=false
[--set ...]` with NUMBA_NUM_THREADS=T and OMP_NUM_THREADS=T.

Outputs in DIR: scale.csv (one row per configuration: time per step, speedup, parallel
efficiency, communication fraction, imbalance, phases per step, status), report.md with
plots/*.png, commands.txt, runs/<config>/ (each run's files) and logs/<config>.log.
`python -m haloflow.study.report DIR` re-makes the report from scale.csv.

exit codes: 0 every configuration succeeded, 1 some failed (the sweep goes on and reports
them), 2 bad input.
"""


class ScaleError(Exception):
    """Bad input, reported in one line (exit code 2)."""


@dataclass(frozen=True)
class Config:
    nodes: int
    ranks_per_node: int
    threads: int
    halo: str

    @property
    def ranks(self) -> int:
        return self.nodes * self.ranks_per_node

    @property
    def cores(self) -> int:
        return self.ranks * self.threads

    @property
    def layout(self) -> str:
        return f"{self.nodes}x{self.ranks_per_node}x{self.threads}"

    @property
    def name(self) -> str:
        return f"{self.layout}-{self.halo}"


# -- arguments ---------------------------------------------------------------------------------

def _int_list(text: str) -> list[int]:
    """``"1,2,4"`` -> [1, 2, 4]; an argparse type, so bad lists are one-line usage errors."""
    try:
        vals = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        vals = []
    if not vals or min(vals) < 1:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected positive integers separated by commas, e.g. 1,2,4")
    return list(dict.fromkeys(vals))


def _positive(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        v = 0
    if v < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a positive integer")
    return v


def _halo_list(text: str) -> list[str]:
    from ..parallel.halo import STRATEGIES

    names = list(dict.fromkeys(s.strip() for s in text.split(",") if s.strip()))
    bad = [s for s in names if s not in STRATEGIES]
    if bad or not names:
        raise argparse.ArgumentTypeError(
            f"{text!r}: unknown strategy {', '.join(bad) or '(empty list)'} (expected some of "
            f"{', '.join(STRATEGIES)})")
    return names


def _launcher(template: str) -> str:
    """Check a launcher template: shell words whose {placeholders} are all known."""
    try:
        words = shlex.split(template)
        fields = [f for w in words for _, f, _, _ in string.Formatter().parse(w)
                  if f is not None]
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"{template!r}: {e}") from None
    unknown = [f"{{{f}}}" for f in fields if f not in PLACEHOLDERS]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"{template!r}: unknown placeholder {', '.join(unknown)} (known: "
            f"{', '.join('{' + p + '}' for p in PLACEHOLDERS)})")
    if not words:
        raise argparse.ArgumentTypeError("empty launcher")
    try:
        launcher_words(template, Config(1, 1, 1, "packed"))
    except (ValueError, IndexError, KeyError) as e:  # a bad format spec such as {ranks:q}
        raise argparse.ArgumentTypeError(f"{template!r}: {e}") from None
    return template


def add_parser(sub) -> None:
    """Register ``haloflow scale`` on the top-level sub-parsers."""
    p = sub.add_parser(
        "scale", help="run a case on every ranks x threads x halo configuration and report",
        description=__doc__.split("\n\n", 1)[1], epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("case", help="built-in case name (e.g. cavity) or TOML case file")
    p.add_argument("--ranks", type=_int_list, default=[1], metavar="LIST",
                   help="total MPI ranks, comma-separated (default 1)")
    p.add_argument("--threads", type=_int_list, default=[1], metavar="LIST",
                   help="numba threads per rank, comma-separated (default 1)")
    p.add_argument("--halo", type=_halo_list, default=["aggregated"], metavar="LIST",
                   help="halo-exchange strategies, comma-separated (default aggregated)")
    p.add_argument("--nodes", type=_int_list, default=[1], metavar="LIST",
                   help="nodes, comma-separated (default 1); ranks per node = ranks / nodes")
    p.add_argument("--cores-per-node", type=_positive, metavar="C",
                   help="skip configurations with ranks per node x threads > C")
    p.add_argument("--steps", type=_positive, default=20, metavar="N",
                   help="time steps per run (default 20)")
    p.add_argument("--launcher", type=_launcher, default=DEFAULT_LAUNCHER, metavar="TEMPLATE",
                   help=f"command that starts the ranks (default '{DEFAULT_LAUNCHER}')")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a case key in every run, e.g. mesh.cells=[256,256,1] "
                        "(repeatable)")
    p.add_argument("-o", "--outdir", type=Path, metavar="DIR",
                   help="sweep directory, new or empty (default runs/scale-<case>[-N])")
    p.add_argument("--timeout", type=_positive, metavar="S",
                   help="give up on a configuration after S seconds (default: no limit)")
    p.add_argument("--no-warmup", dest="warmup", action="store_false",
                   help="do not compile the numba kernels into the cache before the sweep")
    p.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")


# -- the plan ----------------------------------------------------------------------------------

def configurations(nodes, ranks, threads, halos, cores_per_node=None):
    """Every (nodes, ranks, threads, halo) combination that can be laid out, and a note for
    each one that cannot (ranks not a multiple of nodes, a node oversubscribed)."""
    configs, notes = [], []
    for n, r, t, h in itertools.product(nodes, ranks, threads, halos):
        if r % n:
            notes.append(f"skipped {r} ranks on {n} nodes (not a multiple)")
        elif cores_per_node and r // n * t > cores_per_node:
            notes.append(f"skipped {n}x{r // n}x{t}: {r // n * t} cores per node > "
                         f"--cores-per-node {cores_per_node}")
        else:
            configs.append(Config(n, r // n, t, h))
    return configs, list(dict.fromkeys(notes))


def mpiexec() -> Path:
    """The MPI launcher of haloflow's own environment (a system one may run 1-rank jobs)."""
    return Path(sys.executable).parent / "mpiexec"


def launcher_words(template: str, cfg: Config) -> list[str]:
    values = {"mpiexec": str(mpiexec()), "ranks": cfg.ranks, "nodes": cfg.nodes,
              "ranks_per_node": cfg.ranks_per_node, "threads": cfg.threads}
    return [w.format(**values) for w in shlex.split(template)]


def command(cfg: Config, case: str, steps: int, overrides, outdir: Path,
            template: str) -> list[str]:
    """The full command line of one configuration's run."""
    return [*launcher_words(template, cfg), sys.executable, "-m", "haloflow", "run", case,
            "-o", str(outdir / "runs" / cfg.name), "--steps", str(steps),
            "--threads", str(cfg.threads), "--halo", cfg.halo, "--quiet",
            "--set", "output.fields=false", "--set", "output.plots=false",
            *(a for o in overrides for a in ("--set", o))]


def _check_outdir(outdir: Path) -> None:
    """Like ``haloflow run``: a new or empty folder only, so no file is ever overwritten."""
    if outdir.exists() and not outdir.is_dir():
        raise ScaleError(f"output path {outdir} exists and is not a directory")
    if outdir.is_dir() and any(outdir.iterdir()):
        raise ScaleError(f"output directory {outdir} is not empty; pass a new or empty -o DIR")


def _plan(args):
    from ..case import CaseError, load_case

    try:
        case = load_case(args.case, args.overrides)
    except CaseError as e:
        raise ScaleError(str(e)) from None
    configs, notes = configurations(args.nodes, args.ranks, args.threads, args.halo,
                                    args.cores_per_node)
    if not configs:
        raise ScaleError("no configuration left: " + "; ".join(notes))
    if "{mpiexec}" in args.launcher and not mpiexec().is_file():
        raise ScaleError(f"no mpiexec next to {sys.executable}; install the mpich wheel in "
                         "this environment or pass --launcher")
    outdir = args.outdir
    if outdir is None:
        from ..run.outdir import default_outdir

        outdir = default_outdir(f"scale-{case.name}")
    _check_outdir(outdir)
    return case, configs, notes, outdir


# -- running -----------------------------------------------------------------------------------

def read_run(run_dir: Path | str) -> dict:
    """One scale.csv row from a run directory's profile.json and summary.json.

    Times are per step: the loop's slowest rank for ``s_per_step``, the mean over ranks for
    phases, halo wait and allreduce.  A lone run knows nothing of nodes, so it is taken as
    one node; the sweep fills in its own layout.
    """
    import json

    run_dir = Path(run_dir)
    prof = json.loads((run_dir / "profile.json").read_text(encoding="utf-8"))
    summ = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    steps = max(int(prof["steps"]), 1)
    ranks, threads, cells = int(prof["ranks"]), int(summ["threads"]), int(summ["cells"])
    row = {
        "config": run_dir.name, "case": summ.get("case", ""), "nodes": 1,
        "ranks_per_node": ranks, "ranks": ranks, "threads": threads, "cores": ranks * threads,
        "halo": summ.get("halo", ""), "cells": cells, "cells_per_core": cells / (ranks * threads),
        "steps": int(prof["steps"]), "s_per_step": float(prof["s_per_step"]),
        "comm_fraction": float(prof["comm_fraction"]), "imbalance": float(prof["imbalance"]),
        "halo_wait_s_per_step": prof["halo"]["wait_s"]["mean"] / steps,
        "allreduce_s_per_step": prof["allreduce"]["seconds"]["mean"] / steps,
        "p_iters_per_step": prof["per_step"].get("p_iters"), "status": "ok", "error": "",
    }
    for p in PHASES:  # a phase this run did not time stays empty, not zero
        mean = prof["phases"].get(p, {}).get("mean")
        row[f"{p}_s_per_step"] = None if mean is None else mean / steps
    return row


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def _thread_env(threads: int) -> dict[str, str]:
    """Each rank's threads: numba's pool (and OpenMP/BLAS) sized to --threads, no more."""
    return {"NUMBA_NUM_THREADS": str(threads), "OMP_NUM_THREADS": str(threads)}


def _env_words(threads: int) -> str:
    return " ".join(f"{k}={v}" for k, v in _thread_env(threads).items())


def _end(proc: subprocess.Popen) -> tuple[str, str]:
    """End a launched job: its own process group (mpiexec and every rank), TERM then KILL."""
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, None)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            return proc.communicate(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
    return "", ""


def run_one(cmd: list[str], threads: int, log: Path, timeout: int | None) -> tuple[int, str]:
    """Run one configuration; (exit code, last line of its stderr).  Output goes to ``log``.

    The job runs in its own process group, so that a time-out or Ctrl-C ends all its ranks.
    """
    env = os.environ | _thread_env(threads)
    try:
        proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)
    except OSError as e:
        log.write_text(f"$ {shlex.join(cmd)}\n{e}\n", encoding="utf-8")
        return 127, f"cannot start {cmd[0]}: {e.strerror or e}"
    try:
        out, err = proc.communicate(timeout=timeout)
        code, why = proc.returncode, _last_line(err)
    except subprocess.TimeoutExpired:
        out, err = _end(proc)
        code, why = 124, f"timed out after {timeout} s"
    except BaseException:
        _end(proc)
        raise
    log.write_text(f"$ {shlex.join(cmd)}\n{out}{err}", encoding="utf-8")
    return code, why


def _warm(log: Path) -> None:
    """Compile the kernels once, serially, so that no run's loop time includes compiling
    and ranks do not all compile at once (a no-op, about 2 s, when the cache is warm)."""
    code, why = run_one([sys.executable, "-m", "haloflow.warmup"], 1, log, None)
    if code:
        print(f"warning: numba warm-up failed (exit {code}): {why}; going on", flush=True)


class _Progress:
    """A rich bar across the sweep on a terminal; finished-configuration lines above it."""

    def __init__(self, total: int):
        self.bar = None
        if sys.stdout.isatty():
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            self.bar = Progress(TextColumn("scale {task.completed}/{task.total}"), BarColumn(),
                                TextColumn("{task.description}"), TimeElapsedColumn(),
                                transient=True)
            self.task = self.bar.add_task("", total=total)
            self.bar.start()

    def running(self, text: str) -> None:
        if self.bar:
            self.bar.update(self.task, description=text)

    def done(self, line: str) -> None:
        if self.bar:
            self.bar.console.print(line, markup=False, highlight=False)
            self.bar.advance(self.task)
        else:
            print(line, flush=True)

    def stop(self) -> None:
        if self.bar:
            self.bar.stop()


def _summary_table(rows: list[dict]) -> list[str]:
    out = [f"{'config':<10} {'halo':<11} {'cores':>5} {'cells/core':>10} {'ms/step':>9} "
           f"{'speedup':>7} {'eff.':>5} {'comm':>6}  status"]
    for r in rows:
        if r["status"] != "ok":
            out.append(f"{r['config'].split('-')[0]:<10} {r['halo']:<11} {r['cores']:>5} "
                       f"{'':>10} {'':>9} {'':>7} {'':>5} {'':>6}  FAILED")
            continue
        out.append(f"{r['config'].split('-')[0]:<10} {r['halo']:<11} {r['cores']:>5} "
                   f"{r['cells_per_core']:>10.0f} {r['s_per_step'] * 1e3:>9.2f} "
                   f"{r['speedup']:>7.2f} {r['efficiency']:>5.2f} "
                   f"{r['comm_fraction'] * 100:>5.1f}%  ok")
    return out


def sweep(case, configs: list[Config], args, outdir: Path) -> int:
    """Run every configuration, collect scale.csv row by row, then write the report."""
    cmds = [command(c, args.case, args.steps, args.overrides, outdir, args.launcher)
            for c in configs]
    for d in ("runs", "logs"):
        (outdir / d).mkdir(parents=True, exist_ok=True)
    (outdir / "commands.txt").write_text(
        "".join(f"{_env_words(c.threads)} {shlex.join(cmd)}\n"
                for c, cmd in zip(configs, cmds, strict=True)), encoding="utf-8")
    if args.warmup:
        _warm(outdir / "logs" / "warmup.log")
    cells = _cells(case)
    rows: list[dict] = []
    bar = _Progress(len(configs))
    try:
        for k, (cfg, cmd) in enumerate(zip(configs, cmds, strict=True), 1):
            bar.running(f"{cfg.name} ({cfg.ranks} ranks x {cfg.threads} threads)")
            t0 = time.perf_counter()
            code, why = run_one(cmd, cfg.threads, outdir / "logs" / f"{cfg.name}.log",
                                args.timeout)
            wall = time.perf_counter() - t0
            row = _collect(cfg, outdir / "runs" / cfg.name, code, why, cells, args.steps)
            rows.append(row)
            add_speedup(rows)
            write_csv(rows, outdir / "scale.csv")
            head = f"[{k}/{len(configs)}] {cfg.layout} {cfg.halo:<10}"
            if row["status"] == "ok":
                bar.done(f"{head} {row['s_per_step'] * 1e3:9.2f} ms/step  comm "
                         f"{row['comm_fraction'] * 100:5.1f}%  ({wall:.1f} s)")
            else:
                bar.done(f"{head} FAILED: {row['error']}")
    except KeyboardInterrupt:
        bar.stop()
        print(f"haloflow: interrupted; {len(rows)} of {len(configs)} configurations in "
              f"{outdir / 'scale.csv'}", file=sys.stderr)
        if rows:
            write_report(outdir)
        return 130
    bar.stop()
    print("\n".join(["", *_summary_table(rows)]))
    report = write_report(outdir)
    failed = sum(r["status"] != "ok" for r in rows)
    print(f"\n{len(rows) - failed} of {len(rows)} configurations ok"
          f"{f', {failed} FAILED (see logs/)' if failed else ''}; "
          f"scale.csv, {report.name} and plots/ in {outdir}")
    return 1 if failed else 0


def _collect(cfg: Config, run_dir: Path, code: int, why: str, cells: int, steps: int) -> dict:
    """The configuration's row: read back from its run, or a failed row with the reason."""
    error = ""
    if code == 0:
        try:
            row = read_run(run_dir)
        except (OSError, ValueError, KeyError, TypeError) as e:
            error = f"run ended but its results are unreadable ({type(e).__name__}: {e})"
        else:
            if row["ranks"] != cfg.ranks:
                error = (f"the run had {row['ranks']} rank(s), not {cfg.ranks}: the launcher "
                         "started independent serial runs (wrong mpiexec?)")
            else:
                row.update(config=cfg.name, nodes=cfg.nodes, ranks_per_node=cfg.ranks_per_node)
                return row
    else:
        error = f"exit {code}: {why or 'no message on stderr'}"
    return {"config": cfg.name, "nodes": cfg.nodes, "ranks_per_node": cfg.ranks_per_node,
            "ranks": cfg.ranks, "threads": cfg.threads, "cores": cfg.cores, "halo": cfg.halo,
            "cells": cells, "cells_per_core": cells / cfg.cores, "steps": steps,
            "status": "failed", "error": error}


def _cells(case) -> int:
    """Cells of the case's mesh: counted from a box's sizes, else built (step, file)."""
    if case.mesh.type == "box":
        return math.prod(case.mesh.cells)
    from ..mesh import from_case

    return from_case(case.mesh).n_cells


def main(args) -> int:
    try:
        case, configs, notes, outdir = _plan(args)
    except ScaleError as e:
        sys.stderr.write(f"haloflow: error: {e}\n")
        return 2
    cells = _cells(case)
    print(f"haloflow scale: {case.name}, {cells} cells, {len(configs)} configurations "
          f"(nodes x ranks per node x threads), {args.steps} steps each"
          f"{', dry run' if args.dry_run else ''} -> {outdir}")
    for n in notes:
        print(f"  {n}")
    if args.dry_run:
        for c in configs:
            cmd = command(c, args.case, args.steps, args.overrides, outdir, args.launcher)
            print(f"{_env_words(c.threads)} {shlex.join(cmd)}")
        return 0
    try:
        outdir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        sys.stderr.write(f"haloflow: error: cannot create {outdir}: {e.strerror or e}\n")
        return 2
    return sweep(case, configs, args, outdir)
