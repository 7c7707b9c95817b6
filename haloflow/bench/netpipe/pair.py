"""``haloflow netpipe`` between two MPI ranks: one transport, a timed or checked sweep."""

from __future__ import annotations

import sys

from ...mpiutil import UserError
from .config import Options
from .report import (
    integrity_failure,
    integrity_ok_line,
    integrity_report,
    progress_line,
    say,
    write_integrity,
    write_results,
)
from .sizes import format_size


def run_pair(opts: Options, comm, corrupt=None) -> int:
    """The benchmark between ranks 0 and 1 of ``comm`` (exactly two ranks).

    ``corrupt=(size, offset)`` is the test-only fault injection of ``--integrity``: the
    sending rank flips that byte of the first message of that size after filling it.
    """
    import numpy as np
    from mpi4py import MPI

    from .mpi import MpiLink, MpiTransport, thread_level
    from .pool import Pool, allocate, pool_bytes
    from .sweep import sweep

    if comm.size != 2:
        raise UserError(f"haloflow netpipe needs exactly 2 MPI ranks, got {comm.size}: run "
                        "`mpiexec -n 2 haloflow netpipe` (--pairs for more ranks, --tcp "
                        "without MPI)")
    pair = comm.Dup()
    me = pair.rank
    first, peer = me == 0, 1 - me
    sizes = opts.sizes()
    rma = opts.mode in ("put", "get")
    slots = 2 if opts.mode == "bidir" else 1
    nbytes = pool_bytes(opts.hi, opts.nocache, slots, opts.pool)
    win = None
    if rma:
        win = MPI.Win.Allocate(nbytes, 1, comm=pair)
        array = np.frombuffer(win.tomemory(), np.uint8)
        array.fill(0)
    else:
        array = allocate(nbytes)
    pool = Pool(array, opts.nocache, slots)
    tr = MpiTransport(pair, peer, first, opts.mode, pool, opts.sync, opts.engine, win)
    link = MpiLink(pair, peer, first)
    hosts = pair.allgather(MPI.Get_processor_name())
    meta = {
        "tool": "haloflow netpipe", "mode": opts.mode,
        "sync": opts.sync if rma else None, "engine": tr.engine,
        "integrity": opts.integrity, "nocache": opts.nocache, "pool_bytes": nbytes,
        "trial_time_s": opts.trial_time, "trials": opts.trials, "perturb": opts.perturb,
        "min_bytes": opts.lo, "max_bytes": opts.hi, "transport": "mpi",
        "mpi_library": MPI.Get_library_version().strip().splitlines()[0],
        "hosts": hosts, "same_node": hosts[0] == hosts[1], "command": sys.argv,
        "thread_level": thread_level(),
        "label": f"haloflow netpipe {opts.mode} ({tr.engine})",
    }
    quiet = opts.quiet or not first
    buffers = (f"pool of {format_size(nbytes)} (--nocache)" if opts.nocache
               else "hot buffer")
    say(quiet, f"haloflow netpipe: {opts.mode}"
         f"{' (' + opts.sync + ')' if rma else ''}, {len(sizes)} sizes "
         f"{format_size(sizes[0])} .. {format_size(sizes[-1])}, {buffers}, "
         + ("integrity check" if opts.integrity else
            f"{opts.trials} trials x ~{opts.trial_time:g} s, {tr.engine} loop"))
    say(quiet, f"{meta['mpi_library']}; ranks 0 ({hosts[0]}) <-> 1 ({hosts[1]})")
    if opts.engine == "native" and tr.engine != "native" and first:
        print("note: MPI functions not found in the loaded library; Python loops used",
              flush=True)
    # compile once on rank 0, then rank 1 loads the kernel from numba's cache
    for r in (0, 1):
        if me == r:
            tr.warm()
            if opts.integrity:
                from .check import fill, first_mismatch

                fill(array[:1], 0)
                first_mismatch(array[:1], 0)
        pair.Barrier()
    if rma and opts.sync == "fence":
        win.Fence()
    paths = opts.paths("np.out")
    if opts.integrity:
        _integrity(opts, link, tr, sizes, paths, meta, corrupt, quiet)
    else:
        count = iter(range(len(sizes)))
        points = sweep(link, tr, sizes, opts.trial_time, opts.trials,
                       lambda pt: say(quiet, progress_line(next(count), pt)), cpu=opts.cpu)
        title = (f"haloflow netpipe {opts.mode}{' ' + opts.sync if rma else ''}, "
                 f"{hosts[0]}{' (same node)' if meta['same_node'] else ' <-> ' + hosts[1]}")
        if opts.overlap:
            meta["overlap"] = _overlap(opts, link, tr, sizes, paths, title, quiet)
        if first:
            doc = write_results(paths, meta, points, title)
            print(doc["summary_line"], flush=True)
            if opts.cpu:
                print(doc["cpu"]["line"], flush=True)
            say(quiet, f"wrote {paths['out']}, {paths['json']}, {paths['png']}")
    # collective clean-up only on success: after an error on one rank, fail_fast aborts
    if win is not None:
        if opts.sync == "fence":
            win.Fence()
        del array, pool, tr
        win.Free()
    pair.Free()
    return 0


def _overlap(opts, link, tr, sizes, paths, title: str, quiet: bool) -> list:
    """The overlap sweep (compiled loops only) over the sizes without perturbations."""
    import numpy as np

    from .overlap import overlap_sweep

    if tr.engine != "native":
        from ...mpiutil import UserError

        raise UserError("--overlap needs the compiled loops (MPI functions not found in the "
                        "loaded library)")
    plain = [n for n in sizes if n & (n - 1) == 0] or sizes
    say(quiet, f"overlap: {len(plain)} sizes, computation as long as the exchange")
    rows = overlap_sweep(link, tr, plain, opts.trial_time, opts.trials, lambda r: say(
        quiet, f"{r['message_bytes']:9d} bytes: exchange {r['exchange_s'] * 1e6:9.2f} us, "
               f"compute {r['compute_s'] * 1e6:9.2f} us, both {r['both_s'] * 1e6:9.2f} us "
               f"--> overlap {r['overlap']:.2f}"))
    if link.first:
        from .plot import overlap_png

        paths["overlap_png"].parent.mkdir(parents=True, exist_ok=True)
        overlap_png(paths["overlap_png"], rows, f"{title}: overlap")
        big = [r["overlap"] for r in rows if r["message_bytes"] >= 65536]
        small = [r["overlap"] for r in rows if r["message_bytes"] <= 1024]
        print(f"overlap: {np.mean(small) if small else float('nan'):.2f} for messages up to "
              f"1 KiB, {np.mean(big) if big else float('nan'):.2f} from 64 KiB "
              f"(wrote {paths['overlap_png']})", flush=True)
    return rows


def _integrity(opts, link, tr, sizes, paths, meta, corrupt, quiet) -> None:
    """Every size, ``opts.trials`` messages, every byte checked; IntegrityError if any
    was wrong (raised on both ranks, so that the job ends cleanly with exit code 3)."""
    from .sweep import integrity_sweep

    results, failures = integrity_sweep(link, tr, sizes, opts.trials, corrupt,
                                        integrity_report(quiet))
    if link.first:
        write_integrity(paths, meta, results, failures)
    if failures:
        raise integrity_failure(failures, len(sizes))
    if link.first:
        print(integrity_ok_line(opts, sizes, results, paths), flush=True)
