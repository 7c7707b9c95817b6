"""A network's per-message CPU cost (LogGP's o, and its per-byte part) as computation in the
ranks' traces, around the messages that cross between nodes only.

SMPI's own ``smpi/os`` and ``smpi/or`` charge every message, those between two ranks of one
node too, where the analytic model (and an MPI library, whose shared-memory path is not the
network's stack) charges none.  So before a replay each rank's trace is rewritten: a
``compute`` burst of ``o + o_byte x bytes`` before every send to a rank on another node, and
after the receive from one (after its ``recv``; for an ``irecv``, after the ``wait`` or
``waitall`` that completes it).  A collective pays the same for each of its stages that
crosses nodes, each a send and a receive, counted on the algorithm the replay uses:
recursive doubling for ``allreduce`` (MPICH's, with its extra first and last stage on the
ranks beyond the largest power of two), Bruck's for ``allgather``; any other collective as
a dissemination (stage k: a send to rank + 2^k and a receive from rank - 2^k), of its
largest size, in one burst before it.
"""

from __future__ import annotations

from pathlib import Path

from .trace import TraceError

SENDS = ("send", "isend")
NO_DATA = ("init", "finalize", "compute", "barrier", "comm_size", "comm_split", "comm_dup",
           "waitall", "wait", "test", "sleep")


def allreduce_messages(rank: int, ranks: int) -> list[int]:
    """The peer of every message ``rank`` sends or receives in MPICH's recursive-doubling
    allreduce: a send and a receive with each stage's partner; on ``ranks`` not a power of
    two the first 2 x (ranks - 2^k) ranks pair up first, the even one handing its data to
    the odd one and taking the result back, outside the stages."""
    p2 = 1 << (ranks.bit_length() - 1)
    rem = ranks - p2
    if rank < 2 * rem and rank % 2 == 0:
        return [rank + 1, rank + 1]
    new = rank // 2 if rank < 2 * rem else rank - rem
    out = []
    mask = 1
    while mask < p2:
        partner = new ^ mask
        out += [partner * 2 + 1 if partner < rem else partner + rem] * 2
        mask <<= 1
    return [rank - 1, *out, rank - 1] if rank < 2 * rem else out


def _stages(ranks: int) -> int:
    return (ranks - 1).bit_length()


def collective_messages(action: str, args: list[str], rank: int,
                        ranks: int) -> list[tuple[int, int]]:
    """``(peer, bytes)`` of every message ``rank`` sends and of every one it receives in a
    collective of the trace."""
    if ranks < 2:
        return []
    if action == "allreduce":
        nbytes = int(float(args[0]))
        return [(peer, nbytes) for peer in allreduce_messages(rank, ranks)]
    if action == "allgather":
        piece = int(float(args[0]))
        out = []
        for k in range(_stages(ranks)):
            step = 1 << k
            size = min(step, ranks - step) * piece
            out += [((rank - step) % ranks, size), ((rank + step) % ranks, size)]
        return out
    sizes = [int(float(a)) for a in args if _is_number(a)]
    nbytes = max(sizes, default=0)
    out = []
    for k in range(_stages(ranks)):
        step = 1 << k
        out += [((rank + step) % ranks, nbytes), ((rank - step) % ranks, nbytes)]
    return out


def _is_number(token: str) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True


class Rewriter:
    """One rank's trace with the bursts added (``o`` seconds and ``o_byte`` seconds a byte,
    ``speed`` flop/s, ``per_node`` ranks to a node in rank order)."""

    def __init__(self, rank: int, ranks: int, per_node: int, o: float, o_byte: float,
                 speed: float):
        self.rank, self.ranks, self.per_node = rank, ranks, per_node
        self.o, self.o_byte, self.speed = o, o_byte, speed
        self.pending: dict[tuple[int, int], list[float]] = {}  # open irecvs: (src, tag)

    def _off(self, peer: int) -> bool:
        return peer // self.per_node != self.rank // self.per_node

    def _burst(self, seconds: float) -> str:
        flops = int(round(seconds * self.speed))
        return f"{self.rank} compute {flops}\n" if flops > 0 else ""

    def cost(self, nbytes: float) -> float:
        return self.o + self.o_byte * nbytes

    def line(self, tokens: list[str], text: str) -> str:
        """``text`` (the line of ``tokens``) with its bursts."""
        action, args = tokens[1], tokens[2:]
        if action in SENDS:
            peer, nbytes = int(args[0]), float(args[2])
            return (self._burst(self.cost(nbytes)) if self._off(peer) else "") + text
        if action == "recv":
            peer, nbytes = int(args[0]), float(args[2])
            return text + (self._burst(self.cost(nbytes)) if self._off(peer) else "")
        if action == "irecv":
            peer, nbytes = int(args[0]), float(args[2])
            if self._off(peer):
                self.pending.setdefault((peer, int(args[1])), []).append(self.cost(nbytes))
            return text
        if action == "wait":  # wait SRC DST TAG: the request of that message
            src, dst, tag = int(args[0]), int(args[1]), int(args[2])
            costs = self.pending.get((src, tag)) if dst == self.rank else None
            return text + (self._burst(costs.pop(0)) if costs else "")
        if action == "waitall":
            total = sum(sum(c) for c in self.pending.values())
            self.pending.clear()
            return text + self._burst(total)
        if action in NO_DATA:
            return text
        msgs = collective_messages(action, args, self.rank, self.ranks)
        total = sum(self.cost(n) for peer, n in msgs if self._off(peer))
        return self._burst(total) + text


def rewrite(listing: Path, ranks: int, per_node: int, o: float, o_byte: float, speed: float,
            dest: Path) -> Path:
    """Copies of the traces of ``listing`` with a network's o as computation around the
    messages between nodes (see the module docstring), and their listing, in ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    paths = [Path(p) for p in listing.read_text(encoding="utf-8").split()]
    if len(paths) != ranks:
        raise TraceError(f"{listing}: {len(paths)} traces listed for {ranks} ranks")
    names = []
    for rank, src in enumerate(paths):
        rw = Rewriter(rank, ranks, per_node, o, o_byte, speed)
        out = dest / f"rank-{rank}.txt"
        with open(src, encoding="ascii") as f, open(out, "w", encoding="ascii") as g:
            for n, text in enumerate(f, 1):
                tokens = text.split()
                if len(tokens) < 2 or text.startswith("#"):
                    g.write(text)
                    continue
                try:
                    g.write(rw.line(tokens, text if text.endswith("\n") else text + "\n"))
                except (ValueError, IndexError):
                    raise TraceError(f"{src}: line {n}: cannot read {tokens[1]!r}'s "
                                     "arguments") from None
        names.append(str(out.resolve()))
    out_listing = dest / "traces.txt"
    out_listing.write_text("\n".join(names) + "\n", encoding="utf-8")
    return out_listing
