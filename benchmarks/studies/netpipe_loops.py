"""What the timing loop costs: 1-byte ping-pong latency with the loop in compiled code and
in Python, on the same ranks, interleaved.

    .venv/bin/mpiexec -n 2 .venv/bin/python benchmarks/studies/netpipe_loops.py [--rounds 7]

Loops (each a round trip of 1 byte between ranks 0 and 1, one buffer, hot in cache):

  native       haloflow netpipe's kernel: MPI_Send/MPI_Recv through function pointers
               from numba (what `haloflow netpipe` runs by default)
  send-recv    Python loop, comm.Send / comm.Recv with a prebuilt buffer spec
               (`--engine python`)
  persistent   Python loop, persistent requests: Start + Wait for the send, then the receive
  sendrecv     Python loop, one comm.Sendrecv per direction-change (the receive of one leg
               posted with the send of the next)

Each figure is the minimum over rounds of the mean one-way time of a ~0.2 s trial; rank 0
prints a table and writes JSON (default benchmarks/results/netpipe_loops.json).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from mpi4py import MPI

from haloflow.parallel import message_loops as kernels
from haloflow.parallel import mpicall

REPO = Path(__file__).resolve().parents[2]

TAG = 9


def loops(comm, buf):
    me, peer = comm.rank, 1 - comm.rank
    first = me == 0
    spec = [buf, MPI.BYTE]
    fns = kernels.functions()
    st = np.zeros(64, np.uint8)
    ch, bh = mpicall.handle(comm), mpicall.handle(MPI.BYTE)

    def native(reps):
        kernels.pingpong(fns, buf, 1, 64, 1, 0, reps, first, peer, bh, ch, st.ctypes.data)

    def send_recv(reps):
        send, recv = comm.Send, comm.Recv
        for _ in range(reps):
            if first:
                send(spec, peer, TAG)
                recv(spec, peer, TAG)
            else:
                recv(spec, peer, TAG)
                send(spec, peer, TAG)

    s_req, r_req = comm.Send_init(spec, peer, TAG), comm.Recv_init(spec, peer, TAG)

    def persistent(reps):
        s_start, s_wait, r_start, r_wait = s_req.Start, s_req.Wait, r_req.Start, r_req.Wait
        for _ in range(reps):
            if first:
                s_start()
                s_wait()
                r_start()
                r_wait()
            else:
                r_start()
                r_wait()
                s_start()
                s_wait()

    other = np.zeros_like(buf)
    ospec = [other, MPI.BYTE]

    def sendrecv(reps):
        # rank 0: Send, then (Sendrecv: recv reply + send next ping) ...; rank 1 mirrors
        sr = comm.Sendrecv
        if first:
            comm.Send(spec, peer, TAG)
            for _ in range(reps - 1):
                sr(spec, peer, TAG, ospec, peer, TAG)
            comm.Recv(ospec, peer, TAG)
        else:
            for _ in range(reps):
                comm.Recv(ospec, peer, TAG)
                comm.Send(spec, peer, TAG)

    return {"native": native, "send-recv": send_recv, "persistent": persistent,
            "sendrecv": sendrecv}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--trial-time", type=float, default=0.2)
    ap.add_argument("-o", "--output", type=Path,
                    default=REPO / "benchmarks/results/netpipe_loops.json")
    a = ap.parse_args()
    comm = MPI.COMM_WORLD.Dup()
    if comm.size != 2:
        sys.exit("run on exactly 2 ranks")
    buf = np.zeros(64, np.uint8)
    fns = loops(comm, buf)
    for f in fns.values():  # warm up (compiles the native kernel, connects the ranks)
        comm.Barrier()
        f(1000)
    best = {k: float("inf") for k in fns}
    for _ in range(a.rounds):
        for name, f in fns.items():
            comm.Barrier()
            t0 = time.perf_counter()
            f(1000)
            per = (time.perf_counter() - t0) / 1000
            reps = comm.bcast(max(1000, int(a.trial_time / per)), root=0)
            comm.Barrier()
            t0 = time.perf_counter()
            f(reps)
            t = (time.perf_counter() - t0) / (2 * reps)
            t = comm.bcast(t, root=0)
            best[name] = min(best[name], t)
    if comm.rank == 0:
        print(f"1-byte ping-pong, one-way time, min over {a.rounds} rounds "
              f"({MPI.Get_library_version().splitlines()[0]})")
        for name, t in best.items():
            print(f"  {name:11s} {t * 1e6:7.3f} us  (+{(t - best['native']) * 1e6:.3f} us "
                  f"over native)")
        a.output.parent.mkdir(parents=True, exist_ok=True)
        a.output.write_text(json.dumps({"one_way_us": {k: v * 1e6 for k, v in best.items()},
                                        "rounds": a.rounds}, indent=1) + "\n")


if __name__ == "__main__":
    main()
