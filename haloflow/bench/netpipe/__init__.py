"""``haloflow netpipe``: NetPIPE's network benchmark, built in so its results feed ``predict``.

Before anyone blames the solver, they measure the network.  This sub-command runs NetPIPE's
method (sizes, perturbations, adaptive repetitions, minimum over trials) between exactly two
MPI ranks in five modes, over raw TCP (``--tcp``, no MPI, like NPtcp), or between every pair
of ranks (``--pairs``), and writes NetPIPE's ``.out`` format, a JSON summary and a PNG.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ...mpiutil import UserError
from .config import MODES, IntegrityError, Options
from .sizes import INT_MAX, parse_size

__all__ = ["IntegrityError", "Options", "add_parser", "main", "options"]

EPILOG = """\
examples:
  mpiexec -n 2 haloflow netpipe                       # ping-pong 1 B .. 8 MiB -> np.out
                                                      # (np-2.out, ... if np.out is taken)
  mpiexec -n 2 haloflow netpipe --mode bidir -o bidir.out
  mpiexec -n 2 haloflow netpipe --mode put --sync lock --max 1M
  mpiexec -n 2 haloflow netpipe --integrity --nocache # verify every byte, cold buffers
  haloflow netpipe --tcp --listen 5002                # on host B, then on host A:
  haloflow netpipe --tcp --connect hostB:5002 -o tcp.out
  mpiexec -n 8 haloflow netpipe --pairs -o pairs.json # every pair, alone and concurrently
  mpiexec -n 2 haloflow netpipe --cpu --overlap       # + CPU per message, overlap per size

Modes: pingpong (time = half a round trip), bidir (both directions at once; bytes and
throughput are the sum of both directions, as NetPIPE's -2), stream (one way, timed by the
receiver, as NetPIPE's -s), put and get (MPI one-sided from rank 0 into/from rank 1's
window; --sync fence: both ranks fence after every access; --sync lock: rank 0 locks,
accesses and unlocks alone).  Sizes take K, M, G (binary: 1K = 1024).

Outputs (rank 0, or the --connect side): FILE.out with NetPIPE's columns (bytes, Mbps with
1 Mb = 2^20 bits, seconds per transfer), FILE.json with the same plus latency, peak, n1/2 and
a Hockney fit, FILE.png.  With --integrity only FILE.json (no timings are taken).
--cpu adds each side's user and system CPU time per message (sent or received) and its
busy fraction to FILE.json, a fit cpu = o + n x per-byte per side, and FILE-cpu.png;
--overlap adds, per size, the time of a non-blocking exchange, of a computation as long,
of both with the computation between posting and waiting, and the overlap fraction
(t_exchange + t_compute - t_both) / min(t_exchange, t_compute) in [0, 1], to FILE.json
and FILE-overlap.png.  The .out file keeps NetPIPE's three columns.

Exactly 2 ranks (more: use --pairs).  exit codes: 0 success, 1 internal error, 2 bad input,
3 integrity check failed.
"""


def add_parser(sub) -> None:
    p = sub.add_parser(
        "netpipe", help="NetPIPE-style network benchmark (2 ranks, TCP, or every pair)",
        description="NetPIPE's method (message sizes with perturbations, adaptive\n"
                    "repetitions, the fastest of several trials) between two MPI ranks, over\n"
                    "raw TCP, or between every pair of ranks.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-o", "--output", type=Path, metavar="FILE.out",
                   help="NetPIPE-format results; FILE.json and FILE.png go beside it "
                        "(default: np.out, or np-2.out, np-3.out, ... where taken; "
                        "pairs.json, pairs-2.json, ... with --pairs)")
    p.add_argument("--min", default="1", metavar="SIZE", help="smallest message (default 1)")
    p.add_argument("--max", default="8M", metavar="SIZE", help="largest message (default 8M)")
    p.add_argument("--perturb", type=int, default=3, metavar="N",
                   help="also test N bytes below and above each size (default 3; 0: none)")
    p.add_argument("--mode", default="pingpong", choices=MODES, metavar="MODE",
                   help=f"{', '.join(MODES)} (default pingpong)")
    p.add_argument("--sync", choices=("fence", "lock"), metavar="SYNC",
                   help="put/get synchronisation: fence (default) or lock")
    p.add_argument("--integrity", action="store_true",
                   help="fill messages with a pattern and verify every byte instead of timing")
    p.add_argument("--nocache", action="store_true",
                   help="each message in a new slot of a pool larger than the last-level "
                        "cache (NetPIPE -I)")
    p.add_argument("--pool", metavar="SIZE",
                   help="pool size per rank for --nocache (default: 2 x last-level cache, "
                        "64M..1G)")
    p.add_argument("--trial-time", type=float, default=0.1, metavar="S",
                   help="seconds per trial; repetitions adapt to it (default 0.1; NetPIPE "
                        "uses 0.25)")
    p.add_argument("--trials", type=int, default=3, metavar="N",
                   help="trials per size, the fastest is kept; with --integrity, messages "
                        "per size (default 3)")
    p.add_argument("--engine", default="native", choices=("native", "python"),
                   metavar="ENGINE", help="timed loops in compiled code (native, default) "
                                          "or in Python over mpi4py (for comparison)")
    p.add_argument("--quiet", action="store_true", help="only the summary line")
    p.add_argument("--force", action="store_true",
                   help="overwrite the -o file (and its .json and .png) if it exists")
    p.add_argument("--timeout", type=float, default=60.0, metavar="S",
                   help="--tcp: give up when the other side does not answer within S seconds "
                        "(connecting, waiting for it to connect, or waiting for data; "
                        "default 60)")
    p.add_argument("--cpu", action="store_true",
                   help="also the CPU time (user, system) each side spends per message, and "
                        "a fit per message and per byte (the LogGP overhead o)")
    p.add_argument("--overlap", action="store_true",
                   help="MPI: also how much computation a non-blocking exchange of each size "
                        "lets through (0: none, the transfer waits for the next MPI call; "
                        "1: all)")
    p.add_argument("--tcp", action="store_true", help="raw TCP sockets instead of MPI")
    p.add_argument("--listen", metavar="[HOST:]PORT",
                   help="TCP: wait for the other side on PORT (0: any free port); implies --tcp")
    p.add_argument("--connect", metavar="HOST:PORT",
                   help="TCP: connect to a listening side and measure; implies --tcp")
    p.add_argument("--pairs", action="store_true",
                   help="latency and bandwidth between every pair of an even number of ranks")

    def one_line_error(message):  # argparse's usage + error would be several lines
        sys.stderr.write(f"haloflow netpipe: error: {message}\n")
        sys.exit(2)

    p.error = one_line_error


def options(args) -> Options:
    """Check the arguments together; a UserError names the option at fault."""
    def size(flag, text):
        try:
            n = parse_size(text)
        except ValueError as e:
            raise UserError(f"{flag} {e}") from None
        if not 1 <= n <= INT_MAX:
            raise UserError(f"{flag} {text}: expected 1 byte to 2G - 1 (an MPI count)")
        return n

    lo, hi = size("--min", args.min), size("--max", args.max)
    if hi < lo:
        raise UserError(f"--max {args.max} is smaller than --min {args.min}")
    if args.perturb < 0:
        raise UserError(f"--perturb {args.perturb}: expected 0 or more bytes")
    if not 0.0 < args.trial_time <= 60.0:
        raise UserError(f"--trial-time {args.trial_time}: expected 0 < S <= 60 seconds")
    if not 1 <= args.trials <= 1000:
        raise UserError(f"--trials {args.trials}: expected 1 to 1000")
    if args.sync is not None and args.mode not in ("put", "get"):
        raise UserError(f"--sync applies to --mode put and get, not {args.mode}")
    pool = None
    if args.pool is not None:
        if not args.nocache:
            raise UserError("--pool sets the --nocache pool; add --nocache")
        pool = size("--pool", args.pool)
    tcp = bool(args.tcp or args.listen or args.connect)
    if tcp:
        if args.pairs:
            raise UserError("--pairs measures MPI ranks; it does not combine with --tcp")
        if (args.listen is None) == (args.connect is None):
            raise UserError("--tcp needs exactly one of --listen [HOST:]PORT or "
                            "--connect HOST:PORT")
        if args.mode not in ("pingpong", "stream"):
            raise UserError(f"--tcp measures pingpong and stream, not --mode {args.mode}")
    if args.overlap and (tcp or args.pairs or args.integrity):
        raise UserError("--overlap measures one MPI pair; it does not combine with --tcp, "
                        "--pairs or --integrity")
    if args.cpu and (args.pairs or args.integrity):
        raise UserError("--cpu times a sweep of one pair; it does not combine with --pairs or "
                        "--integrity")
    if args.pairs:
        if args.mode != "pingpong":
            raise UserError(f"--pairs measures ping-pong, not --mode {args.mode}")
        if args.integrity:
            raise UserError("--integrity checks one pair; run it without --pairs")
    if args.output is not None and args.output.suffix in (".json", ".png") and not args.pairs:
        raise UserError(f"-o {args.output}: name the .out file; .json and .png go beside it")
    if not 0.0 < args.timeout <= 86400.0:
        raise UserError(f"--timeout {args.timeout}: expected 0 < S <= 86400 seconds")
    output = args.output
    if output is not None and not args.force:
        taken = [p for p in (output, output.with_suffix(".json"), output.with_suffix(".png"))
                 if p.exists() or p.is_symlink()]
        if taken:
            raise UserError(f"-o {output}: {taken[0]} exists; pass --force to overwrite it")
    if output is None and not args.listen:  # the listening side writes nothing
        output = default_output(args.pairs)
    return Options(output, lo, hi, args.perturb, args.mode, args.sync or "fence",
                   args.integrity, args.nocache, pool, args.trial_time, args.trials,
                   args.engine, args.quiet, tcp, args.listen, args.connect, args.pairs,
                   args.timeout, args.cpu, args.overlap)


def default_output(pairs: bool) -> Path:
    """``np.out`` (``pairs.json`` with ``--pairs``), or ``np-N.out`` with the first N whose
    files (.out, .json, .png and the -cpu and -overlap plots) are none of them there."""
    from ...run.outdir import next_free

    def taken(out: Path) -> bool:
        names = [out.with_suffix(s) for s in (".out", ".json", ".png")]
        names += [out.with_name(out.stem + s) for s in ("-cpu.png", "-overlap.png")]
        return any(p.exists() or p.is_symlink() for p in names)

    return next_free(Path("pairs" if pairs else "np"), taken,
                     ".json" if pairs else ".out")


def main(args) -> int:
    """Entry point of the sub-command (``haloflow netpipe ...``)."""
    if args.tcp or args.listen or args.connect:  # no MPI at all on this path
        from ...mpiutil import one_line
        from .tcp import run_tcp

        try:
            return run_tcp(options(args))
        except UserError as e:
            sys.stderr.write(one_line(f"haloflow: error: {e}") + "\n")
            return e.exit_code
    from ...mpiutil import fail_fast, get_comm

    _single_threaded_mpi()
    comm = get_comm()
    with fail_fast(comm, collective_errors=(UserError,)):
        opts = options(args)
        if opts.pairs:
            from .pairs import run_pairs

            return run_pairs(opts, comm)
        from .pair import run_pair

        return run_pair(opts, comm)


def _single_threaded_mpi() -> None:
    """Initialise MPI as NetPIPE's MPI_Init does, not at THREAD_MULTIPLE (mpi4py's default).

    Only the main thread calls MPI here; at THREAD_MULTIPLE MPICH guards every call, which
    measured 0.01-0.09 us per message on this machine: small, but not part of the network.
    MPI4PY_RC_THREAD_LEVEL in the environment still wins (to measure that cost).
    """
    import os

    import mpi4py

    if "mpi4py.MPI" not in sys.modules and "MPI4PY_RC_THREAD_LEVEL" not in os.environ:
        mpi4py.rc.thread_level = "funneled"
