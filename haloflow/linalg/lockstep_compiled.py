"""The lockstep BiCGStab of :mod:`.lockstep` as one compiled call: the method
(:func:`.bicgstab.lockstep_iterations`) compiled over this module's operations, its
exchanges (persistent requests started from compiled code) and its fused allreduces made in
numba with MPI called from it (:mod:`..parallel.mpicall`), serially or on thread blocks.

Why: from Python every iteration is a dozen interpreter round trips into small kernels, a
counted reduction and an exchanger call; compiled, the arithmetic is the same operation for
operation, so the iterates equal the Python path's to the bit.
"""

from __future__ import annotations

import sys

import numba as nb
import numpy as np

from ..parallel import mpicall, threads
from ..parallel.reduce import Reducer
from . import blocks as tb
from . import lockstep_kernels as lk
from .bicgstab import lockstep_iterations
from .krylov import SolveInfo
from .targets import for_target


@nb.njit(cache=True)
def _spmv_rows(indptr, indices, data, X, Y, act, m, comps):
    """``Y[d] = A X[d]`` on every row for the active components (three together)."""
    nr = len(indptr) - 1
    if tb.all_three(comps, act):
        lk._rows_three(indptr, indices, data, X, Y, 0, nr)
        return
    for d in comps:
        if act[d] == 1:
            lk._rows_one(indptr, indices, data, X[d], Y[d], 0, nr)


# slots of the int64 control array of the compiled lockstep solve (``LockstepPlan.ctl``)
(C_PAR, C_STARTALL, C_WAITALL, C_ALLREDUCE, C_STATUSES, C_REQS, C_NREQ, C_NN, C_NSEND,
 C_NRECV, C_FIRST, C_NT) = range(12)  # C_NT: thread blocks (1: the serial kernels)


N_C = 12


RBM = 9  # room for one fused sum of the lockstep solve: three scalars per component


@nb.njit(cache=True)
def _many_exchange(ctl, hb, cells, plan, X, comps, count, na):
    """The ghosts of ``X[comps]`` in one message per neighbour (``pack``'s layout for
    ``len(comps)`` fields, every component sent), on the plan's persistent requests; counted
    as an exchange of the ``na`` fields the Python path would send."""
    count[1] += 1
    count[2] += na
    if ctl[C_PAR] == 0 or ctl[C_NREQ] == 0:
        return
    m = len(comps)
    nn = ctl[C_NN]
    ns = m * ctl[C_NSEND]
    for k in range(nn):
        lo = plan[k]
        n = plan[k + 1] - lo
        for j in range(m):
            f = X[comps[j]]
            o = m * lo + j * n
            for i in range(n):
                hb[o + i] = f[cells[lo + i]]
    rc = mpicall.call_ip(ctl[C_STARTALL], ctl[C_NREQ], ctl[C_REQS])
    if rc == 0:
        rc = mpicall.call_ipp(ctl[C_WAITALL], ctl[C_NREQ], ctl[C_REQS], ctl[C_STATUSES])
    if rc != 0:
        raise RuntimeError("MPI error in the compiled momentum solve")
    rp = plan[nn + 1:]
    for k in range(nn):
        lo = rp[k]
        n = rp[k + 1] - lo
        g = ctl[C_FIRST] + lo
        for j in range(m):
            f = X[comps[j]]
            o = ns + m * lo + j * n
            for i in range(n):
                f[g + i] = hb[o + i]


@nb.njit(cache=True)
def _many_reduce(ctl, hnd, rb, k, count):
    """Sum ``rb[:k]`` over the ranks in place: one MPI_Allreduce where the run is parallel,
    counted always."""
    count[0] += 1
    if ctl[C_PAR] == 0:
        return
    a = rb.ctypes.data
    rc = mpicall.call_allreduce(ctl[C_ALLREDUCE], a, a + 8 * RBM, k, hnd[1], hnd[2], hnd[0])
    if rc != 0:
        raise RuntimeError("MPI error in the compiled momentum solve")
    for t in range(k):
        rb[t] = rb[RBM + t]


@nb.njit(cache=True)
def _many_start(indptr, indices, data, diag, invd, X, W, comps, rb):
    """``D^-1``, the residuals and the partial sums ``rb[2j], rb[2j+1] = r.r, b.b`` of
    component ``comps[j]``; ``r0 = r``, ``p = v = 0`` (as :func:`bicgstab_many`)."""
    n = len(diag)
    B, R, R0, P, V = W[0], W[1], W[2], W[3], W[4]
    for i in range(n):
        invd[i] = 1.0 / diag[i]
    for j in range(len(comps)):
        d = comps[j]
        x, b, r = X[d], B[d], R[d]
        for i in range(n):
            s = b[i]
            for k in range(indptr[i], indptr[i + 1]):
                s -= data[k] * x[indices[k]]
            r[i] = s
    lk._bicg3_start(R, B, R0, P, V, comps, n, rb)


# -- the operations :func:`.bicgstab.lockstep_iterations` runs on here: the context is
# (indptr, indices, data, diag, invd, ctl, hnd, hb, cells, plan, count, part), each phase
# serial or one parallel region on ``ctl[C_NT]`` thread blocks (:mod:`.blocks`), a product
# fused with the dot products that follow it there


@nb.njit(cache=True)
def many_start(ctx, X, W, comps, rb):
    indptr, indices, data, diag, invd, ctl = ctx[0], ctx[1], ctx[2], ctx[3], ctx[4], ctx[5]
    if ctl[C_NT] > 1:
        tb.many_start(indptr, indices, data, diag, invd, X, W, comps, ctl[C_NT], ctx[11], rb)
    else:
        _many_start(indptr, indices, data, diag, invd, X, W, comps, rb)


@nb.njit(cache=True)
def many_reduce(ctx, rb, k):
    _many_reduce(ctx[5], ctx[6], rb, k, ctx[10])


@nb.njit(cache=True)
def many_p(ctx, P, R, V, sc, PH, comps, act):
    invd, ctl = ctx[4], ctx[5]
    n = len(ctx[3])
    if ctl[C_NT] > 1:
        tb.many_p(P, R, V, sc[1], sc[2], invd, PH, comps, act, n, ctl[C_NT])
    else:
        lk._bicg3_p(P, R, V, sc[1], sc[2], invd, PH, comps, act, n)


@nb.njit(cache=True)
def many_product_r0v(ctx, PH, V, R0, comps, act, na, rb):
    indptr, indices, data, ctl = ctx[0], ctx[1], ctx[2], ctx[5]
    _many_exchange(ctl, ctx[7], ctx[8], ctx[9], PH, comps, ctx[10], na)
    if ctl[C_NT] > 1:
        tb.many_product_r0v(indptr, indices, data, PH, V, R0, comps, act, ctl[C_NT], ctx[11],
                            rb)
    else:
        _spmv_rows(indptr, indices, data, PH, V, act, len(comps), comps)
        lk._bicg3_r0v(R0, V, comps, act, len(ctx[3]), rb)


@nb.njit(cache=True)
def many_s(ctx, R, V, sc, SH, comps, act):
    invd, ctl = ctx[4], ctx[5]
    n = len(ctx[3])
    if ctl[C_NT] > 1:
        tb.many_s(R, V, sc[0], invd, SH, comps, act, n, ctl[C_NT])
    else:
        lk._bicg3_s(R, R, V, sc[0], invd, SH, comps, act, n)


@nb.njit(cache=True)
def many_product_dot3(ctx, SH, T, R, comps, act, na, rb):
    indptr, indices, data, ctl = ctx[0], ctx[1], ctx[2], ctx[5]
    _many_exchange(ctl, ctx[7], ctx[8], ctx[9], SH, comps, ctx[10], na)
    if ctl[C_NT] > 1:
        tb.many_product_dot3(indptr, indices, data, SH, T, R, comps, act, ctl[C_NT], ctx[11],
                             rb)
    else:
        _spmv_rows(indptr, indices, data, SH, T, act, len(comps), comps)
        lk._bicg3_dot3(T, R, comps, act, len(ctx[3]), rb)


@nb.njit(cache=True)
def many_xr(ctx, X, PH, SH, R, T, R0, sc, comps, act, rb):
    ctl = ctx[5]
    n = len(ctx[3])
    if ctl[C_NT] > 1:
        tb.many_xr(X, PH, SH, R, T, sc[0], sc[2], R0, comps, act, n, ctl[C_NT], ctx[11], rb)
    else:
        lk._bicg3_xr(X, PH, SH, R, R, T, sc[0], sc[2], R0, comps, act, n, rb)


_LOCKSTEP = for_target(lockstep_iterations, sys.modules[__name__], "compiled", compiled=True)


@nb.njit(cache=True)
def _bicgstab_many_c(indptr, indices, data, diag, invd, X, W, comps, tol, rel_tol, max_iter,
                     act, sc, out, count, ctl, hnd, hb, cells, plan, rb, part, exchange_x,
                     exchange_after):
    """:func:`bicgstab_many` as one compiled call: the same operations in the same order
    (so the same iterates to the bit), its exchanges and fused sums made from here
    (``ctl[C_PAR]``) or only counted (one rank without neighbours).  ``sc[0..8, d]``:
    alpha, beta, omega, rho, rho_new, tolerance, ||b||, residual, initial residual;
    ``out[d]``: iterations, ``out[3 + d]``: converged; ``count``: allreduces, exchanges and
    exchanged fields.  ``exchange_after``: the solution's ghosts exchanged at the end.
    ``ctl[C_NT] > 1``: on that many thread blocks (``part``: their partial sums)."""
    m = len(comps)
    if exchange_x:
        _many_exchange(ctl, hb, cells, plan, X, comps, count, m)
    ctx = (indptr, indices, data, diag, invd, ctl, hnd, hb, cells, plan, count, part)
    _LOCKSTEP(ctx, X, W, comps, tol, rel_tol, max_iter, act, sc, out, rb)
    if exchange_after:
        _many_exchange(ctl, hb, cells, plan, X, comps, count, m)


TAG_MANY = 7441


class LockstepPlan:
    """What :func:`_bicgstab_many_c` sends: the exchanger's pack layout for ``m`` fields on
    persistent requests of our own over one buffer, the collective handles, and the control
    array with the MPI function addresses.  A serial plan only counts."""

    def __init__(self, A, m: int, comm=None, addresses=None):
        self.ctl = np.zeros(N_C, dtype=np.int64)
        self.rb = np.zeros(2 * RBM)
        nt = threads.blocks() if A.pattern.n_rows >= threads.LEVEL_MIN_ROWS else 1
        self.ctl[C_NT] = nt
        self.part = np.zeros((nt, RBM))  # the thread blocks' partial sums
        self.messages = self.nbytes = 0
        self._reqs = None
        if comm is None:
            self.hb = np.zeros(1)
            self.cells = np.zeros(1, dtype=A.pattern.indices.dtype)
            self.plan = np.zeros(2, dtype=np.int64)
            self.hnd = _self_handles_or_zeros()
            return
        from ..parallel import cplan

        ex = A.ex
        sp, rp = ex.send_ptr, ex.recv_ptr
        nn = len(ex.neighbours)
        ns = m * ex.n_send
        self.hb = np.zeros(max(1, ns + m * ex.n_recv))
        self.cells = np.asarray(ex.send_cells)
        self.plan = np.concatenate([sp, rp]).astype(np.int64)
        self.hnd = cplan.collective_handles(comm)
        reqs = cplan.Requests(comm)
        hb = self.hb
        first, nreq = reqs.add(
            [(q, hb[m * sp[k]:m * sp[k + 1]]) for k, q in enumerate(ex.neighbours)],
            [(q, hb[ns + m * rp[k]:ns + m * rp[k + 1]]) for k, q in enumerate(ex.neighbours)],
            TAG_MANY)
        reqs.close()
        self._reqs = reqs
        c = self.ctl
        c[C_PAR] = 1
        for name, slot in (("startall", C_STARTALL), ("waitall", C_WAITALL),
                           ("allreduce", C_ALLREDUCE)):
            c[slot] = addresses[name]
        c[C_STATUSES], c[C_REQS], c[C_NREQ] = reqs.status_address, reqs.address(first), nreq
        c[C_NN], c[C_NSEND], c[C_NRECV], c[C_FIRST] = nn, ex.n_send, ex.n_recv, ex.n_owned
        self.messages, self.nbytes = nn, 8 * ns


def _self_handles_or_zeros() -> np.ndarray:
    """Handles a serial plan passes on and never uses (without MPI: zeros)."""
    try:
        from ..parallel import cplan
    except ImportError:
        return np.zeros(3, dtype=np.int64)
    return cplan.self_handles()


def lockstep_plan(A, m: int, red: Reducer) -> LockstepPlan | None:
    """The compiled lockstep solve's plan for matrix ``A`` and ``m`` components, or None
    where the Python path must run: no C MPI functions, device-resident
    fields or an exchanger without a pack layout.  Every rank of a parallel run decides the
    same (one set-up collective)."""
    if not red.parallel and not A.ex.neighbours:
        return LockstepPlan(A, m)
    ex = A.ex
    ok = (hasattr(ex, "send_cells")
          and not getattr(getattr(ex, "space", None), "on_device", False))
    addr = mpicall.addresses() if ok else None
    ok = addr is not None and red.parallel
    if red.parallel:
        from ..parallel import transfer

        ok = transfer.total(red.comm, 0 if ok else 1) == 0
    return LockstepPlan(A, m, red.comm, addr) if ok else None


def _compiled_many(A, X, comps, tol, max_iter, red, mws, rel_tol, ghosts_current, plan,
                   exchange_after):
    """:func:`bicgstab_many` as one compiled call, then the Python path's counters: at 512
    cells the Python loop cost more than its arithmetic, and on parallel runs each of its
    phases paid Python-side MPI calls."""
    p = A.pattern
    c = mws.count
    c[:] = 0
    _bicgstab_many_c(p.indptr, p.indices, A.data, A.diag, mws.invd, X, mws.w, comps,
                     tol, rel_tol, max_iter, mws.act, mws.sc, mws.out, c, plan.ctl, plan.hnd,
                     plan.hb, plan.cells, plan.plan, plan.rb, plan.part, not ghosts_current,
                     exchange_after)
    return lockstep_results(A, red, mws, plan, comps)


def lockstep_results(A, red, mws: lk.ManyWorkspace, plan: LockstepPlan, comps) -> list[SolveInfo]:
    """After a compiled lockstep solve: its reductions and exchanges (``mws.count``) added
    to the counters the Python path keeps, and one :class:`SolveInfo` per component."""
    c = mws.count
    st = red.stats
    st.calls += int(c[0])
    st = A.ex.stats
    st.calls += int(c[1])
    st.fields += int(c[2])
    if plan.ctl[C_PAR]:
        red.stats.compiled += int(c[0])
        st.compiled += int(c[1])
        st.messages += int(c[1]) * plan.messages
        st.bytes += int(c[1]) * plan.nbytes
        ph = A.timers("halo_solve")
        if hasattr(ph, "calls"):  # (untimed: a null phase)
            ph.calls += int(c[1])
    return solve_infos(mws, comps)


def solve_infos(mws: lk.ManyWorkspace, comps) -> list[SolveInfo]:
    """One :class:`SolveInfo` per component of a lockstep solve's ``mws.sc`` and
    ``mws.out``."""
    sc, out = mws.sc, mws.out
    return [SolveInfo(iters=int(out[d]), res0=float(sc[8, d]), res=float(sc[7, d]),
                      converged=bool(out[3 + d])) for d in comps]
