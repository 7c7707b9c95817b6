"""The ``haloflow`` command.  Launch parallel runs as ``mpiexec -n N haloflow run ...``."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path

DESCRIPTION = """\
haloflow: a parallel finite-volume CFD solver that measures its own communication.

Run it serially as `haloflow run`, or in parallel with the MPI launcher of the
environment haloflow is installed in: `mpiexec -n 4 haloflow run cavity`.
"""

RUN_EPILOG = """\
examples:
  haloflow run                                   # built-in cavity, Re = 100, 128 x 128
  mpiexec -n 2 haloflow run cavity -o runs/re400 --set physics.nu=0.0025
  haloflow run my_case.toml --set mesh.cells=[64,64,1] --steps 100
  haloflow run cavity -o runs/a --set output.checkpoint_every=100 --steps 1000
  mpiexec -n 4 haloflow run --restart runs/a -o runs/b --steps 2000   # on any rank count
  haloflow decompose cavity -n 4 -o parts/ && mpiexec -n 4 haloflow run cavity --decomposed parts/

Every key of the case file can be overridden with --set SECTION.KEY=VALUE (VALUE is
read as TOML; a bare word is taken as a string). Outputs in OUTDIR: case.toml (resolved),
log.txt, residuals.csv, summary.json, fields/*.pvtu (ParaView), plots/*.png and, for
the cavity, centerline_u.csv / centerline_v.csv compared with Ghia et al. (1982).

SIGTERM or SIGINT (a batch system's preemption, Ctrl-C) finishes the current step, writes a
checkpoint and ends the run, marked interrupted in summary.json; --restart goes on from it.
A second SIGTERM ends it at once (exit 143; 15 from MPICH's mpiexec), a second SIGINT 130.

exit codes: 0 success, 1 internal error, 2 bad input, 3 the solution diverged,
130/143 interrupted by SIGINT/SIGTERM (checkpoint written).
"""


# Sub-commands other than `run`: each module has add_parser(subparsers) and main(args).
COMMANDS = {
    "bench": ".bench.halo",
    "mesh": ".cli.mesh",
    "decompose": ".cli.decompose",
    "foam-case": ".cli.foam_case",
    "netpipe": ".bench.netpipe",
    "scale": ".study.scale",
    "predict": ".study.predict",
    "trace": ".study.trace.command",
}


def _run_parser(sub) -> None:
    from ..backends import BACKENDS
    from ..case import builtin_cases
    from ..parallel.halo import STAGING

    p = sub.add_parser(
        "run", help="run a case (serial, or under mpiexec)",
        description="Run a case to end_time or to steady state.",
        epilog=RUN_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("case", nargs="?",
                   help=f"built-in case name ({', '.join(builtin_cases())}) or path to a TOML "
                        "case file (default: cavity; with --restart, the restarted run's)")
    p.add_argument("-o", "--outdir", type=Path,
                   help="output directory (default: runs/<case>, or runs/<case>-N if taken); "
                        "must be empty or new")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a case key, e.g. physics.nu=0.001 or mesh.cells=[64,64,1] "
                        "(repeatable)")
    p.add_argument("--threads", type=int, metavar="T",
                   help="numba threads per rank (default: parallel.threads of the case, 1)")
    p.add_argument("--steps", type=int, metavar="N",
                   help="stop after N time steps at most, 0: no limit (same as --set "
                        "solver.max_steps=N)")
    p.add_argument("--halo", metavar="NAME",
                   help="halo-exchange strategy: perfield, packed, aggregated, neighbor or "
                        "overlap (same as --set parallel.halo=NAME)")
    p.add_argument("--staging", choices=STAGING,
                   help="fields in host or (emulated) device memory, host<->device copies "
                        "counted; device-aware: MPI reads the device buffers, no copy "
                        "(same as --set parallel.staging=...)")
    p.add_argument("--backend", choices=BACKENDS,
                   help="where the linear solves run: cpu, or cuda (an NVIDIA GPU; numba's "
                        "CUDA simulator with NUMBA_ENABLE_CUDASIM=1); the rest of the step "
                        "stays on the CPU so far (same as --set solver.backend=...)")
    p.add_argument("--emulate-network", metavar="NAME|FILE.out",
                   help="make messages between nodes as slow as this network (a preset of "
                        "`haloflow predict` or a NetPIPE .out file); [parallel] ranks_per_node "
                        "says which ranks share a node (default here: one rank per node)")
    p.add_argument("--force", action="store_true",
                   help="replace a previous haloflow run in OUTDIR: refused where OUTDIR "
                        "holds anything that run did not write (the file is named)")
    p.add_argument("--quiet", action="store_true", help="no progress on the terminal")
    p.add_argument("--decomposed", type=Path, metavar="DIR",
                   help="read each rank's part of the mesh from DIR, written by `haloflow "
                        "decompose` for this case and rank count (no rank builds the whole "
                        "mesh)")
    p.add_argument("--restart", metavar="RUN_DIR",
                   help="go on from the latest checkpoint of the run in RUN_DIR (or from a "
                        "checkpoint file), on any rank count and halo strategy; --steps "
                        "counts from the original run's start")


class _Parser(argparse.ArgumentParser):
    """Usage errors in one line, like every other haloflow error (exit code 2)."""

    def error(self, message):
        self.exit(2, f"haloflow: error: {message} (see `{self.prog} --help`)\n")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or of ``command`` alone: each rank of a run parses its
    command line, and importing the other commands' modules would cost each a third of a
    second."""
    parser = _Parser(
        prog="haloflow", description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    if command in (None, "run"):
        _run_parser(sub)
    for name, module in COMMANDS.items():
        if command in (None, name):
            importlib.import_module(module, "haloflow").add_parser(sub)
    return parser


def cmd_run(args) -> int:
    from ..case import CaseError, load_case
    from ..mpiutil import UserError, fail_fast, get_comm

    comm = get_comm()
    with fail_fast(comm, collective_errors=(UserError, CaseError)):
        overrides = list(args.overrides)
        if args.steps is not None:
            if args.steps < 0:
                raise UserError(f"--steps {args.steps}: expected a number of steps, 0 for no "
                                "limit")
            overrides.append(f"solver.max_steps={args.steps}")
        overrides += [f"parallel.{k}={v}" for k, v in (("halo", args.halo),
                                                       ("staging", args.staging)) if v]
        if args.backend:
            overrides.append(f"solver.backend={args.backend}")
        if args.emulate_network:
            overrides.append(f"parallel.emulate_network={json.dumps(args.emulate_network)}")
        restart = None
        if args.restart is not None:
            restart, case = _restart_case(args, overrides, comm)
        else:
            case = load_case(args.case or "cavity", overrides)
        threads = args.threads if args.threads is not None else case.parallel.threads
        if threads < 1:
            raise UserError(f"--threads {threads}: expected at least 1")
        outdir = args.outdir
        if outdir is None:
            from ..run.outdir import default_outdir

            outdir = comm.bcast(default_outdir(case.name) if comm.rank == 0 else None, root=0)

        from ..run import run_case

        run_case(case, outdir, comm, threads=threads, force=args.force, quiet=args.quiet,
                 restart=restart, decomposed=args.decomposed)
    return 0


def _restart_case(args, overrides, comm):
    """``(checkpoint path, case)`` of ``--restart``: the newest checkpoint of the run folder
    (or the file given) and the case the run wrote, with ``--set`` applied."""
    from ..case import load_case
    from ..io.checkpoint import read_metadata
    from ..mpiutil import UserError
    from ..run.checkpointing import latest

    src = Path(args.restart)
    if args.case is not None:
        raise UserError(f"--restart {src}: the case comes from the run folder; give no "
                        f"case ({args.case})")
    found = None
    if comm.rank == 0:  # one rank reads, every rank raises the same error
        try:
            path = str(src) if src.is_file() else latest(src)
            found = (path, read_metadata(path).case_name)
        except UserError as e:
            found = str(e)
    found = comm.bcast(found, root=0)
    if isinstance(found, str):
        raise UserError(found)
    path, name = found
    run_dir = src.parent.parent if src.is_file() else src
    out = args.outdir
    if out is not None and Path(path).resolve().is_relative_to(out.resolve()):
        raise UserError(f"--restart {src}: -o {out} holds the checkpoint it restarts from "
                        f"({path}); a restart writes into another folder: choose another -o")
    case = load_case(run_dir / "case.toml", overrides)
    case.name = name
    return path, case


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    command = argv[0] if argv and (argv[0] == "run" or argv[0] in COMMANDS) else None
    parser = build_parser(command)
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    if args.command == "run":
        return cmd_run(args)
    if args.command in COMMANDS:
        return importlib.import_module(COMMANDS[args.command], "haloflow").main(args)
    parser.error(f"unknown command {args.command}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
