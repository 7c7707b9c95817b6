"""One distributed AMG level: its matrix's owned rows and ghost columns, its halo exchanger,
its l1-smoother set-up, and the transfers of aggregates that span ranks (partial
restrictions to the aggregate's owner, its coarse value back; the partial Galerkin rows of
the cells held elsewhere at every refresh).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from ..mpiutil import UserError
from ..parallel import transfer
from .amg_kernels import l1_inverse_rows, split_at_diagonal, spmv
from .galerkin import _scatter_add, _sum_entries
from .matrix import IDX

TAG_ACC, TAG_DIST, TAG_ROWS = 7411, 7412, 7413


class _Transfer:
    """Coarse values of aggregates that have cells on other ranks.

    ``out`` peers hold, at ghost columns ``out_idx[k]``, aggregates owned by ``out_peers[k]``
    that contain some of this rank's cells; ``in_idx[k]`` are this rank's aggregates with cells
    on ``in_peers[k]``.  ``accumulate`` adds the partial restrictions into the owner's entries,
    ``distribute`` copies the owner's value back to the ghost columns."""

    def __init__(self, comm, out_peers, out_idx, in_peers, in_idx):
        self.out_idx, self.in_idx = out_idx, in_idx
        self.out_peers, self.in_peers = list(out_peers), list(in_peers)
        self.out_buf = [np.zeros(len(ix)) for ix in out_idx]
        self.in_buf = [np.zeros(len(ix)) for ix in in_idx]
        out = list(zip(out_peers, self.out_buf, strict=True))
        into = list(zip(in_peers, self.in_buf, strict=True))
        self.to_owners = transfer.PointToPoint(comm, out, into, TAG_ACC)
        self.from_owners = transfer.PointToPoint(comm, into, out, TAG_DIST)

    def accumulate(self, v):
        for ix, b in zip(self.out_idx, self.out_buf, strict=True):
            np.take(v, ix, out=b)
        self.to_owners.run()
        for ix, b in zip(self.in_idx, self.in_buf, strict=True):
            v[ix] += b

    def distribute(self, v):
        for ix, b in zip(self.in_idx, self.in_buf, strict=True):
            np.take(v, ix, out=b)
        self.from_owners.run()
        for ix, b in zip(self.out_idx, self.out_buf, strict=True):
            v[ix] = b


class _RowShare:
    """Galerkin entries computed on one rank for coarse rows owned by another: summed per
    (row, column) into ``send`` (fine entry ``entries[t]`` adds to ``send[slot[t]]``), sent
    to the owner, which adds the values from ``sources[k]`` at its CSR positions
    ``recv_slot[k]``."""

    def __init__(self, comm, entries, slot, dests, bounds, sources, recv_slot):
        self.entries, self.slot = entries, slot
        self.send = np.zeros(int(bounds[-1]))
        sends = [self.send[bounds[k]:bounds[k + 1]] for k in range(len(dests))]
        self.recv_slot = recv_slot
        self.recvs = [np.zeros(len(sl)) for sl in recv_slot]
        self.plan = transfer.PointToPoint(comm, list(zip(dests, sends, strict=True)),
                                          list(zip(sources, self.recvs, strict=True)),
                                          TAG_ROWS)

    def refresh(self, fine, coarse):
        _sum_entries(self.entries, self.slot, fine, self.send)
        self.plan.run()
        for s, b in zip(self.recv_slot, self.recvs, strict=True):
            _scatter_add(s, b, coarse)


def _split(sorted_ids, offsets):
    """Per rank, the slice of ascending global coarse ids that it owns."""
    bounds = np.searchsorted(sorted_ids, offsets)
    return [sorted_ids[bounds[q]:bounds[q + 1]] for q in range(len(offsets) - 1)]


def _share_rows(comm, offsets, rows, cols, entries):
    """Galerkin entries (``rows``, ``cols``: global coarse ids) of this rank's fine entries
    ``entries`` that belong to coarse rows owned elsewhere, summed per (row, column), go to
    the owners.  Returns the send side (None if nothing to send) and, per rank, the
    (row * N + column) keys it sends here."""
    big = int(offsets[-1])
    ukey, inv = np.unique(rows * big + cols, return_inverse=True)
    outbox = _split(ukey, offsets * big)
    inbox = transfer.alltoall(comm, outbox)
    dests = [q for q in range(comm.size) if len(outbox[q])]
    if not dests:
        return None, inbox
    return SimpleNamespace(entries=entries, slot=inv.astype(np.int64), dests=dests,
                           bounds=np.concatenate([[0], np.cumsum([len(outbox[q])
                                                                  for q in dests])])), inbox


def _coarse_halo(comm, offsets, ghost):
    """Halo pattern of a coarse level: every ghost column (ascending global ids, hence
    grouped by owner) from its owner; neighbours are the ranks either way."""
    requests = _split(ghost, offsets)
    asked = transfer.alltoall(comm, requests)
    off = offsets[comm.rank]
    nbrs = [q for q in range(comm.size) if q != comm.rank and (len(requests[q]) or len(asked[q]))]

    def ptr(lists):
        return np.concatenate([[0], np.cumsum([len(lists[q]) for q in nbrs])])

    return SimpleNamespace(
        n_owned=int(offsets[comm.rank + 1] - off), n_ghost=len(ghost),
        neighbours=np.asarray(nbrs, dtype=np.int64), send_ptr=ptr(asked).astype(np.int64),
        send_cells=(np.concatenate([asked[q] - off for q in nbrs]) if nbrs
                    else np.zeros(0)).astype(np.int64),
        recv_ptr=ptr(requests).astype(np.int64))


def _transfers(comm, offsets, members_elsewhere, local_col):
    """The _Transfer of a coarse level: this rank's cells in aggregates owned elsewhere
    (``members_elsewhere``: their ascending global ids) and this rank's aggregates with
    cells elsewhere.  None if neither."""
    out = _split(members_elsewhere, offsets)
    got = transfer.alltoall(comm, out)
    out_peers = [q for q in range(comm.size) if len(out[q])]
    in_peers = [q for q in range(comm.size) if len(got[q])]
    if not out_peers and not in_peers:
        return None
    return _Transfer(comm, out_peers, [local_col(out[q]) for q in out_peers],
                     in_peers, [got[q] - offsets[comm.rank] for q in in_peers])


VECTORS = ("b", "x", "r", "c", "d", "v", "w", "r2")  # a level's work vectors
B, X, R, C, D, V, W, R2 = range(len(VECTORS))  # their indices (the cycles' vectors by number)
PLAIN, K_LEVEL, AMLI_LEVEL = 0, 1, 2  # a level's kind: one plain cycle, the K-cycle, AMLI


def level_kind(cycle_kind: str, krylov: bool) -> int:
    """The kind of a level of an AMG whose ``cycle_kind`` is "K", "A" or "V": its Krylov
    steps (``Level.krylov``) are the K-cycle's or AMLI's, else one plain cycle."""
    return (K_LEVEL if cycle_kind == "K" else AMLI_LEVEL if cycle_kind == "A" else PLAIN) \
        if krylov else PLAIN


class Level:
    """One level: a matrix on owned rows (+ ghost columns), its smoother and work vectors."""

    def __init__(self, indptr, indices, data, diag_pos, n, ncols, ex, red):
        self.indptr, self.indices, self.data, self.diag_pos = indptr, indices, data, diag_pos
        self.n, self.ncols, self.ex, self.red = n, ncols, ex, red
        self.next = None  # SimpleNamespace(agg, nc, ncols, slot, share, xfer, redundant)
        self.rows = n  # global rows (set by the hierarchy for distributed levels)
        self.calls = 0  # halo exchanges made (or, serially, that a parallel run would make)
        self.compiled_calls = 0  # of those, made from compiled code
        self.visits = 0  # cycles entering this level (restrictions into it)
        self.active = 0  # distributed coarse levels: the ranks holding rows of it
        self.key = None  # visiting order of the matching (serial order of the rows) if not 0..n
        self.lu = None  # coarsest level: LU factors as CSC arrays for lu_solve
        self.dense = None  # coarsest level: the dense LU's fixed index arrays and work
        self.chol = None  # coarsest level: its Cholesky set-up (False: not SPD, LU instead)
        self.pinned = -1
        # work vectors (VECTORS), made by ``AMG._vectors`` once the hierarchy is known
        self.b = self.x = self.r = self.c = self.d = self.v = self.w = self.r2 = None
        self.dinv = np.zeros(max(n, 1))  # the smoother's inverse l1 diagonal
        self.split = None  # the pattern splits at the diagonal (split_at_diagonal)
        self.ghost_rows = None  # the rows with ghost columns (the pattern's: found once)
        self.cut = None  # rows with ghost columns, swept again after an exchange (RESWEEP)
        self.krylov = True  # K-cycle: solved by two Krylov steps (else one plain cycle)

    def smoother_setup(self):
        if self.ghost_rows is None:  # the pattern is fixed: found once
            rows = np.repeat(np.arange(self.n), np.diff(self.indptr).astype(np.int64))
            self.ghost_rows = np.unique(rows[self.indices >= self.n]).astype(IDX)
        try:
            l1_inverse_rows(self.indptr, self.indices, self.data, self.diag_pos,
                            self.ghost_rows, self.n, self.dinv)
        except ZeroDivisionError:
            raise UserError("the pressure matrix lost a diagonal entry to round-off on an AMG "
                            "level: are the mesh's cells stretched beyond what double "
                            "precision can hold (aspect ratios of 1e12)?") from None
        if self.split is None:  # the pattern is fixed: checked once
            self.split = bool(split_at_diagonal(self.indptr, self.indices, self.diag_pos,
                                                self.n))

    def exchange(self, x):
        self.calls += 1
        if self.ex is not None:
            self.ex.exchange([x])

    def matvec(self, x, y):
        """y = A x on owned rows, refreshing the ghost values of x first."""
        self.exchange(x)
        spmv(self.indptr, self.indices, self.data, x, y)
