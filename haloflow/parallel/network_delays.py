"""Network emulation: what a message between ranks of different (emulated) nodes must wait
beyond what it took here.

Why: this machine's kernel cannot shape traffic, so a slow network is emulated where the
messages are made.  Every message that crosses nodes (``[parallel] ranks_per_node`` says
which ranks share one) is made as slow as the network's curve says, by waiting after the
transfer for ``t_network - t_local``: both priced by curves (the network's, and the local
transfer's measured at the start of the run), the same arithmetic the model of
``study/model.py`` uses, so a prediction can be checked against an emulated run.  The wait
is a busy loop, as a blocking MPI call that polls is; its seconds land in the halo wait and
allreduce timers and, in total, in ``added_s``.

    exchange   sum over the rank's messages to other nodes, sent one after another
               (``Curve.sequence``): network minus local
    allreduce  one network stage per doubling across nodes: (t_net(b) - t_local(b)) each
    allgather  the same latencies, plus every rank receiving the others' bytes at the
               network's bandwidth instead of the local one

A slower core (``[parallel] emulate_speed``) is emulated by the same hooks: at every
communication point (before a message is posted or waited for, a collective, and the start
and end of every timed phase) a rank of speed ``s`` busy-waits ``(1/s - 1)`` times the
seconds it computed since its last such point returned (numba loading a kernel is not
computing: ``parallel/emulation.py``).  Its messages then leave, and its
phases end, when a core of that speed would have got there, and a smaller part makes it
proportionally faster (a CPU quota or a SIGSTOP companion stalls its neighbours at any
synchronisation falling in a stopped window, whatever its part's size).
"""

from __future__ import annotations

import math
import os
import time
from time import perf_counter

import numpy as np

from ..io.network import Curve

# layout of the shared state array (float64), also read and written by network_delays_c.py:
# SLOW = 1/speed - 1 (0: a full-speed core), LAST = when its compute last resumed
# (CLOCK_MONOTONIC seconds), SLOWED = seconds a slow core waited
ADDED, DELAYED, MATCHED, UNMATCHED, NKEYS, SLOW, LAST, SLOWED = range(8)
HEAD = 8  # then NKEYS (key, delay) pairs: a compiled request group's address and its wait
MAX_KEYS = 4096
SMALL = 64  # allreduce waits for 1..SMALL doubles, then the sizes of allgathers
GATHER_SIZES = 48  # allgather waits at 2**k bytes, k = 0 .. GATHER_SIZES - 1
POLLS_BEFORE_YIELD = 1000  # as MPICH's progress loop (MPIR_CVAR_POLLS_BEFORE_YIELD)


def _stages(n: int) -> int:
    return math.ceil(math.log2(n)) if n > 1 else 0


class Emulation:
    """The waits of one rank, with counters shared with the compiled wrappers."""

    def __init__(self, net: Curve | None, local: Curve | None, nodes, rank: int,
                 speed: float = 1.0):
        """``net`` None: no network delays (a slow core only); ``speed``: this rank's core's
        speed relative to a real one (1: not slowed)."""
        self.net, self.local = net, local
        self.nodes = np.asarray(nodes, dtype=np.int64)
        self.rank = rank
        self.node_count = int(len(np.unique(self.nodes)))
        self.state = np.zeros(HEAD + 2 * MAX_KEYS)
        self.ts = np.zeros(2, dtype=np.int64)  # a timespec for the compiled wrappers' clock
        self.speed = float(speed)
        self.state[SLOW] = 1.0 / self.speed - 1.0
        self.state[LAST] = _now()
        ladder = 8.0 * np.arange(1, SMALL + 1)
        self.reduce_table = np.array([self.allreduce_delay(b) for b in ladder])
        self.gather_table = np.array([self.allgather_delay(2.0 ** k)
                                      for k in range(GATHER_SIZES)])

    # -- the arithmetic ------------------------------------------------------------------
    def exchange_delay(self, peers, nbytes) -> float:
        """Seconds one exchange of messages of ``nbytes`` to ``peers`` must wait."""
        peers = np.asarray(peers, dtype=np.int64)
        if peers.size == 0 or self.net is None:
            return 0.0
        far = self.nodes[peers] != self.nodes[self.rank]
        if not far.any():
            return 0.0
        b = np.asarray(nbytes, dtype=np.float64)[far]
        return max(self.net.sequence(b) - self.local.sequence(b), 0.0)

    def allreduce_delay(self, nbytes: float) -> float:
        if self.net is None:
            return 0.0
        d = float(self.net.time(nbytes)) - float(self.local.time(nbytes))
        return _stages(self.node_count) * max(d, 0.0)

    def allgather_delay(self, total_bytes: float) -> float:
        """An allgather of ``total_bytes`` in all, over every rank."""
        if self.node_count < 2 or self.net is None:
            return 0.0
        p = len(self.nodes)
        got = total_bytes * (p - 1) / p
        lat = _stages(self.node_count) * (self.net.latency - self.local.latency)
        bulk = (float(self.net.time(got)) - self.net.latency) - \
            (float(self.local.time(got)) - self.local.latency)
        return max(lat + bulk, 0.0)

    # -- waiting -------------------------------------------------------------------------
    def wait(self, seconds: float, messages: int = 1) -> float:
        """Wait ``seconds`` polling, as MPICH waits (a busy loop that yields the core every
        ``POLLS_BEFORE_YIELD`` polls), after a message or collective completed; returns them
        (for the caller's timer).  The rank computes again from here (:meth:`resume`)."""
        if seconds > 0.0:
            _spin(seconds)
            self.state[ADDED] += seconds
            self.state[DELAYED] += messages
        self.state[LAST] = _now()
        return max(seconds, 0.0)

    # -- a slow core ---------------------------------------------------------------------
    def settle(self) -> None:
        """A communication point (or a phase's start or end): a slow core waits what its
        compute since it last resumed would have taken longer."""
        s = self.state
        if s[SLOW] > 0.0:
            d = s[SLOW] * (_now() - s[LAST])
            if d > 0.0:  # computing: a busy core that never yields
                end = perf_counter() + d
                while perf_counter() < end:
                    pass
                s[SLOWED] += d
            s[LAST] = _now()

    def skip(self, seconds: float) -> None:
        """The last ``seconds`` were not computing (numba loading a kernel): not slowed."""
        self.state[LAST] += seconds

    def resume(self) -> None:
        """A communication call returned: the rank computes again."""
        self.state[LAST] = _now()

    def reduce_wait(self, ndoubles: int) -> float:
        return self.wait(float(self.reduce_table[min(max(ndoubles, 1), SMALL) - 1]))

    def reduce_wait_after(self, ndoubles: int, started: float) -> float:
        """A non-blocking allreduce started at ``started``: wait what of its delay the work
        since then has not covered."""
        d = float(self.reduce_table[min(max(ndoubles, 1), SMALL) - 1])
        return self.wait(min(started + d - perf_counter(), d))

    def gather_wait(self, total_bytes: float) -> float:
        return self.wait(gather_delay(self.gather_table, total_bytes))

    # -- compiled request groups -----------------------------------------------------------
    def register(self, address: int, delay: float) -> None:
        """A compiled request group (its first handle's address) and the wait that follows
        each of its MPI_Waitall calls."""
        n = int(self.state[NKEYS])
        if n == MAX_KEYS:
            return
        self.state[HEAD + 2 * n], self.state[HEAD + 2 * n + 1] = float(address), delay
        self.state[NKEYS] = n + 1

    def record(self) -> dict:
        """What the profile keeps: seconds added and messages or calls delayed."""
        s = self.state
        return {"added_s": float(s[ADDED]), "slowed_s": float(s[SLOWED]),
                "delayed": int(s[DELAYED]),
                "compiled_waits": int(s[MATCHED]), "compiled_unmatched": int(s[UNMATCHED])}


def _now() -> float:
    """CLOCK_MONOTONIC, the clock the compiled wrappers read (they share ``LAST``)."""
    return time.clock_gettime(time.CLOCK_MONOTONIC)


def _spin(seconds: float) -> None:
    """Busy-wait ``seconds``, yielding the core every ``POLLS_BEFORE_YIELD`` polls."""
    end = perf_counter() + seconds
    polls = 0
    while perf_counter() < end:
        polls += 1
        if polls == POLLS_BEFORE_YIELD:
            os.sched_yield()
            polls = 0


def gather_delay(table, total_bytes: float) -> float:
    """The allgather wait for ``total_bytes``, linear between the powers of two of
    ``table`` (as the compiled wrapper computes it)."""
    b = max(total_bytes, 1.0)
    x = math.floor(math.log2(b))
    k = min(x, len(table) - 2)
    f = min(b / 2.0 ** x - 1.0 + (x - k), 1.0)
    return float(table[k] + f * (table[k + 1] - table[k]))
