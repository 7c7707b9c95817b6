"""The MPI side of ``haloflow netpipe``: one pair of ranks, five ways of moving a message.

A transport runs ``reps`` messages of ``n`` bytes and returns this rank's elapsed seconds
(``timed``), turns both ranks' seconds into NetPIPE's time per transfer (``one_way``), and
moves single messages with every byte checked (``checked``).  The timed loops run in compiled
code (:mod:`.loops`) or, for comparison and where the MPI library cannot be opened, as Python
loops over mpi4py with the fewest calls per message.

===========  ==============================================  ===========================
mode         one repetition                                  time per transfer
===========  ==============================================  ===========================
pingpong     first sends, other returns the message          round trip / 2 (first)
bidir        both post Irecv + Isend, then Waitall           repetition (first); bytes x2
stream       first sends, other receives                     repetition (receiver's clock)
put, get     first puts/gets into/from the other's window    epoch incl. sync (first)
             sync=fence: both fence after each access
             sync=lock: first locks, accesses, unlocks alone
===========  ==============================================  ===========================
"""

from __future__ import annotations

import time

import numpy as np

from ...parallel import message_loops as loops
from ...parallel import mpicall
from . import check as pattern
from .pool import Pool

TAG_CTL = 1108


class MpiLink:
    """Control messages between the two ranks of a pair (outside any timed loop)."""

    def __init__(self, comm, peer: int, first: bool):
        self.comm, self.peer, self.first = comm, peer, first
        self._z = np.zeros(1, np.uint8)
        self._z2 = np.zeros(1, np.uint8)

    def sync(self) -> None:
        self.comm.Sendrecv(self._z, self.peer, TAG_CTL, self._z2, self.peer, TAG_CTL)

    def swap(self, obj):
        """Send ``obj`` to the peer, return the peer's."""
        return self.comm.sendrecv(obj, dest=self.peer, sendtag=TAG_CTL, source=self.peer,
                                  recvtag=TAG_CTL)

    def agree(self, obj):
        """The first rank's ``obj``, on both ranks."""
        other = self.swap(obj)
        return obj if self.first else other


def _raise(code: int, what: str) -> None:
    from mpi4py import MPI

    raise RuntimeError(f"{what}: {MPI.Get_error_string(code)}")


class MpiTransport:
    """One of MODES between ``comm`` ranks ``me`` and ``peer`` over a buffer pool."""

    def __init__(self, comm, peer: int, first: bool, mode: str, pool: Pool, sync: str = "fence",
                 engine: str = "native", win=None):
        from mpi4py import MPI

        self.MPI = MPI
        self.comm, self.peer, self.first, self.mode = comm, peer, first, mode
        self.pool, self.sync, self.win = pool, sync, win
        self.me = comm.Get_rank()
        self.fns = loops.functions() if engine == "native" else None
        self.engine = "native" if self.fns is not None else "python"
        if self.fns is not None:
            self.comm_h = mpicall.handle(comm)
            self.byte_h = mpicall.handle(MPI.BYTE)
            self.win_h = mpicall.handle(win if win is not None else MPI.WIN_NULL)
            self.reqs = np.zeros(2, dtype=mpicall.request_dtype())
            self.status = np.zeros(2 * mpicall.status_bytes(), np.uint8)
            self.st = self.status.ctypes.data

    # ---- timing ----------------------------------------------------------------------
    def messages_per_rep(self) -> int:
        return 2 if self.mode in ("pingpong", "bidir") else 1

    def out_bytes(self, n: int) -> int:
        """Bytes per transfer as NetPIPE reports them (both directions for bidir)."""
        return 2 * n if self.mode == "bidir" else n

    def one_way(self, e_first: float, e_other: float, reps: int) -> float:
        if self.mode == "pingpong":
            return e_first / (2 * reps)
        if self.mode == "stream":
            return e_other / reps
        return e_first / reps

    def warm(self) -> None:
        """Compile (or load from cache) this mode's kernel: a zero-repetition call."""
        if self.fns is not None:
            self._native(1, 0)

    def timed(self, n: int, reps: int) -> float:
        """Run ``reps`` repetitions of ``n``-byte messages; this rank's elapsed seconds."""
        if self.fns is not None:
            t0 = time.perf_counter()
            self._native(n, reps)
            e = time.perf_counter() - t0
        else:
            e = self._python(n, reps)
        self.pool.advance(n, reps * self.messages_per_rep())
        return e

    def _native(self, n: int, reps: int) -> None:
        fns, p = self.fns, self.pool
        stride, nslots, pos = p.layout(n)
        a = p.array
        if self.mode == "pingpong":
            e = loops.pingpong(fns, a, n, stride, nslots, pos, reps, self.first, self.peer,
                               self.byte_h, self.comm_h, self.st)
        elif self.mode == "stream":
            e = loops.stream(fns, a, n, stride, nslots, pos, reps, self.first, self.peer,
                             self.byte_h, self.comm_h, self.st)
        elif self.mode == "bidir":
            e = loops.bidir(fns, a, n, stride, nslots, pos, reps, self.peer, self.byte_h,
                            self.comm_h, self.reqs, self.st)
        else:
            op = loops.PUT if self.mode == "put" else loops.GET
            if self.sync == "fence":
                e = loops.rma_fence(fns, op, a, n, stride, nslots, pos, reps, self.first,
                                    self.peer, self.byte_h, self.win_h)
            elif self.first:
                e = loops.rma_lock(fns, op, a, n, stride, nslots, pos, reps, self.peer,
                                   self.byte_h, self.win_h, self.MPI.LOCK_EXCLUSIVE)
            else:
                e = 0
        if e != 0:
            _raise(e, f"{self.mode} of {n} bytes")

    def _python(self, n: int, reps: int) -> float:
        """The same loops through mpi4py, one Python call per MPI call at most."""
        MPI, comm, peer, p = self.MPI, self.comm, self.peer, self.pool
        tag = loops.TAG
        stride, nslots, pos = p.layout(n)
        views = [[p.slot(n, i), MPI.BYTE] for i in range(min(nslots, 2))]
        hot = nslots <= 2

        def view(i):
            return views[i % nslots] if hot else [p.slot(n, i), MPI.BYTE]

        if self.mode == "pingpong" and hot:  # persistent requests: the fewest Python calls
            out, back = (view(0), view(1)) if self.first else (view(1), view(0))
            s_req, r_req = comm.Send_init(out, peer, tag), comm.Recv_init(back, peer, tag)
            one, two = (s_req, r_req) if self.first else (r_req, s_req)
            start1, wait1, start2, wait2 = one.Start, one.Wait, two.Start, two.Wait
            t0 = time.perf_counter()
            for _ in range(reps):
                start1()
                wait1()
                start2()
                wait2()
            e = time.perf_counter() - t0
            s_req.Free()
            r_req.Free()
            return e
        t0 = time.perf_counter()
        if self.mode == "pingpong":
            send, recv = comm.Send, comm.Recv
            for j in range(reps):
                a, b = view(2 * j), view(2 * j + 1)
                if self.first:
                    send(a, peer, tag)
                    recv(b, peer, tag)
                else:
                    recv(a, peer, tag)
                    send(b, peer, tag)
        elif self.mode == "stream":
            op = comm.Send if self.first else comm.Recv
            a = view(0)
            for j in range(reps):
                op(a if hot else view(j), peer, tag)
        elif self.mode == "bidir":
            waitall = MPI.Request.Waitall
            for j in range(reps):
                a, b = view(2 * j), view(2 * j + 1)
                waitall([comm.Irecv(a, peer, tag), comm.Isend(b, peer, tag)])
        else:
            win = self.win
            op = win.Put if self.mode == "put" else win.Get
            for j in range(reps):
                a = view(j)
                target = [p.offset(n, j), n, MPI.BYTE]
                if self.sync == "fence":
                    if self.first:
                        op(a, peer, target)
                    win.Fence()
                elif self.first:
                    win.Lock(peer, MPI.LOCK_EXCLUSIVE)
                    op(a, peer, target)
                    win.Unlock(peer)
        return time.perf_counter() - t0

    # ---- integrity -------------------------------------------------------------------
    def checked(self, n: int, rep: int, corrupt=None) -> list[pattern.Mismatch]:
        """Move one repetition with patterned data; the mismatches this rank received."""
        MPI, comm, peer, p, me = self.MPI, self.comm, self.peer, self.pool, self.me
        tag = loops.TAG
        a, b = p.slot(n, 0), p.slot(n, 1)
        s_first, s_other = pattern.seed(n, rep, 0), pattern.seed(n, rep, 1)
        bad = []

        def check(buf, s):
            m = pattern.verify(buf, s, n, rep, peer, me)
            if m is not None:
                bad.append(m)

        if self.mode == "pingpong":
            if self.first:
                pattern.send_pattern(a, s_first, n, rep, corrupt)
                comm.Send([a, MPI.BYTE], peer, tag)
                comm.Recv([b, MPI.BYTE], peer, tag)
                check(b, s_other)
            else:
                comm.Recv([a, MPI.BYTE], peer, tag)
                check(a, s_first)
                pattern.send_pattern(b, s_other, n, rep, None)
                comm.Send([b, MPI.BYTE], peer, tag)
        elif self.mode == "stream":
            if self.first:
                pattern.send_pattern(a, s_first, n, rep, corrupt)
                comm.Send([a, MPI.BYTE], peer, tag)
            else:
                comm.Recv([a, MPI.BYTE], peer, tag)
                check(a, s_first)
        elif self.mode == "bidir":
            mine, theirs = (s_first, s_other) if self.first else (s_other, s_first)
            pattern.send_pattern(b, mine, n, rep, corrupt if self.first else None)
            MPI.Request.Waitall([comm.Irecv([a, MPI.BYTE], peer, tag),
                                 comm.Isend([b, MPI.BYTE], peer, tag)])
            check(a, theirs)
        else:
            self._checked_rma(n, rep, a, s_first, corrupt, check)
        p.advance(n, 2)
        return bad

    def _checked_rma(self, n, rep, a, s, corrupt, check) -> None:
        """Put: the origin's data lands in the target's slot; get: the reverse.  The slot
        that receives is first poisoned, so an access that moved nothing is caught.  Local
        stores to window memory are made inside a lock of our own window (lock mode), which
        is what keeps them ordered with the peer's accesses in MPI's separate memory model."""
        MPI, win, peer, me = self.MPI, self.win, self.peer, self.me
        put = self.mode == "put"
        sender = self.first if put else not self.first
        target = [self.pool.offset(n, 0), n, MPI.BYTE]
        fence = self.sync == "fence"
        if not fence:
            win.Lock(me, MPI.LOCK_EXCLUSIVE)
        if sender:
            pattern.send_pattern(a, s, n, rep, corrupt)
        else:
            pattern.fill(a, s ^ 0x55AA)
        if fence:
            win.Fence()
            if self.first:
                (win.Put if put else win.Get)([a, MPI.BYTE], peer, target)
            win.Fence()
        else:
            win.Unlock(me)
            self.comm.Barrier()
            if self.first:
                win.Lock(peer, MPI.LOCK_EXCLUSIVE)
                (win.Put if put else win.Get)([a, MPI.BYTE], peer, target)
                win.Unlock(peer)
            self.comm.Barrier()
        if not sender:
            if not fence:
                win.Lock(me, MPI.LOCK_EXCLUSIVE)
            check(a, s)
            if not fence:
                win.Unlock(me)


def thread_level() -> str:
    from mpi4py import MPI

    return {MPI.THREAD_SINGLE: "single", MPI.THREAD_FUNNELED: "funneled",
            MPI.THREAD_SERIALIZED: "serialized", MPI.THREAD_MULTIPLE: "multiple"}.get(
        MPI.Query_thread(), "unknown")
