"""The lockstep BiCGStab of :mod:`.lockstep` as one compiled call: the iteration, its
exchanges (persistent requests started from compiled code) and its fused allreduces run in
numba with MPI called from it (:mod:`..parallel.mpicall`), serially or on thread blocks.

Why: from Python every iteration is a dozen interpreter round trips into small kernels, a
counted reduction and an exchanger call; compiled, the arithmetic is the same operation for
operation, so the iterates equal the Python path's to the bit.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from ..parallel import mpicall, threads
from ..parallel.reduce import Reducer
from . import blocks as tb
from . import lockstep_kernels as lk
from .krylov import SolveInfo


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


@nb.njit(cache=True)
def _many_tolerances(comps, tol, rel_tol, act, sc, out, rb):
    """Each component's initial residual and stopping tolerance from the summed ``rb``, as
    :func:`initial_info` sets them."""
    for j in range(len(comps)):
        d = comps[j]
        rr, bb = rb[2 * j], rb[2 * j + 1]
        bnorm = np.sqrt(bb) if bb > 0.0 else 1.0
        res0 = np.sqrt(rr) / bnorm
        sc[8, d] = res0
        sc[7, d] = res0
        sc[6, d] = bnorm
        sc[5, d] = max(tol, rel_tol * res0)
        act[d] = 1 if res0 > sc[5, d] else 0
        sc[0, d] = sc[2, d] = sc[3, d] = 1.0
        sc[4, d] = rr
        out[d] = 0
        out[3 + d] = 1


@nb.njit(cache=True)
def _many_beta(comps, act, sc):
    """beta of each active component; returns the active count."""
    na = 0
    for d in comps:
        if act[d]:
            na += 1
            sc[1, d] = (sc[4, d] / sc[3, d]) * (sc[0, d] / sc[2, d])
            sc[3, d] = sc[4, d]
    return na


@nb.njit(cache=True)
def _many_p(R, P, V, PH, invd, comps, act, sc, n):
    """beta, ``p = r + beta (p - omega v)``, ``phat = D^-1 p``; returns the active count."""
    na = _many_beta(comps, act, sc)
    lk._bicg3_p(P, R, V, sc[1], sc[2], invd, PH, comps, act, n)
    return na


@nb.njit(cache=True)
def _many_r0v(R0, V, comps, act, rb, n):
    lk._bicg3_r0v(R0, V, comps, act, n, rb)


@nb.njit(cache=True)
def _many_alpha(comps, act, sc, out, rb):
    """alpha from the summed ``r0.v`` (a component with ``r0.v = 0`` stops); returns the
    active count."""
    na = 0
    for j in range(len(comps)):
        d = comps[j]
        if act[d]:
            if rb[j] == 0.0:
                act[d] = 0
                out[3 + d] = 1 if sc[7, d] <= sc[5, d] else 0
            else:
                sc[0, d] = sc[3, d] / rb[j]
                na += 1
    return na


@nb.njit(cache=True)
def _many_s(R, V, SH, invd, comps, act, sc, n):
    """``s = r - alpha v`` (over ``r``), ``shat = D^-1 s``."""
    lk._bicg3_s(R, R, V, sc[0], invd, SH, comps, act, n)


@nb.njit(cache=True)
def _many_dot3(T, R, comps, act, rb, n):
    lk._bicg3_dot3(T, R, comps, act, n, rb)


@nb.njit(cache=True)
def _many_omega(comps, act, sc, out, rb, it):
    """omega from the summed (t.s, t.t, s.s); a component converged at ``s`` gets
    ``act = 2``."""
    for j in range(len(comps)):
        d = comps[j]
        if act[d]:
            s1, s2, s3 = rb[3 * j], rb[3 * j + 1], rb[3 * j + 2]
            out[d] = it
            if np.sqrt(s3) / sc[6, d] <= sc[5, d] or s2 == 0.0:
                act[d] = 2
                sc[7, d] = np.sqrt(s3) / sc[6, d]
            else:
                sc[2, d] = s1 / s2


@nb.njit(cache=True)
def _many_xr(X, PH, SH, R, T, R0, comps, act, sc, rb, n):
    """``x += alpha phat + omega shat; r = s - omega t`` with partial (r0.r, r.r) in
    ``rb``; ``x += alpha phat`` only for ``act == 2``.  Returns whether any goes on."""
    lk._bicg3_xr(X, PH, SH, R, R, T, sc[0], sc[2], R0, comps, act, n, rb)
    return _many_more(comps, act)


@nb.njit(cache=True)
def _many_more(comps, act):
    """Components converged at ``s`` (``act == 2``) stop; returns whether any goes on."""
    more = False
    for d in comps:
        if act[d] == 2:  # converged at s: done
            act[d] = 0
        elif act[d] == 1:
            more = True
    return more


@nb.njit(cache=True)
def _many_update(comps, act, sc, out, rb):
    for j in range(len(comps)):
        d = comps[j]
        if act[d] == 1:
            w = sc[2, d]
            sc[4, d] = rb[2 * j]
            sc[7, d] = np.sqrt(rb[2 * j + 1]) / sc[6, d]
            if sc[7, d] <= sc[5, d]:
                act[d] = 0
            elif w == 0.0 or rb[2 * j] == 0.0:
                act[d] = 0
                out[3 + d] = 0


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
    if ctl[C_NT] > 1:
        _many_iterate_blocks(indptr, indices, data, diag, invd, X, W, comps, tol, rel_tol,
                             max_iter, act, sc, out, count, ctl, hnd, hb, cells, plan, rb, part)
    else:
        _many_iterate(indptr, indices, data, diag, invd, X, W, comps, tol, rel_tol, max_iter,
                      act, sc, out, count, ctl, hnd, hb, cells, plan, rb)
    if exchange_after:
        _many_exchange(ctl, hb, cells, plan, X, comps, count, m)


@nb.njit(cache=True)
def _many_iterate(indptr, indices, data, diag, invd, X, W, comps, tol, rel_tol, max_iter,
                  act, sc, out, count, ctl, hnd, hb, cells, plan, rb):
    """The iterations of :func:`_bicgstab_many_c` (ghosts of ``X`` current)."""
    n = len(diag)
    m = len(comps)
    R, R0, P, V, PH, SH = W[1], W[2], W[3], W[4], W[5], W[6]
    T = W[0]  # the right-hand side is not read after the residual
    _many_start(indptr, indices, data, diag, invd, X, W, comps, rb)
    _many_reduce(ctl, hnd, rb, 2 * m, count)
    _many_tolerances(comps, tol, rel_tol, act, sc, out, rb)
    for it in range(1, max_iter + 1):
        na = _many_p(R, P, V, PH, invd, comps, act, sc, n)
        if na == 0:
            return
        _many_exchange(ctl, hb, cells, plan, PH, comps, count, na)
        _spmv_rows(indptr, indices, data, PH, V, act, m, comps)
        _many_r0v(R0, V, comps, act, rb, n)
        _many_reduce(ctl, hnd, rb, m, count)
        na = _many_alpha(comps, act, sc, out, rb)
        _many_s(R, V, SH, invd, comps, act, sc, n)
        _many_exchange(ctl, hb, cells, plan, SH, comps, count, na)
        _spmv_rows(indptr, indices, data, SH, T, act, m, comps)
        _many_dot3(T, R, comps, act, rb, n)
        _many_reduce(ctl, hnd, rb, 3 * m, count)
        _many_omega(comps, act, sc, out, rb, it)
        if _many_xr(X, PH, SH, R, T, R0, comps, act, sc, rb, n):
            _many_reduce(ctl, hnd, rb, 2 * m, count)
            _many_update(comps, act, sc, out, rb)
    for d in comps:
        if act[d]:
            out[3 + d] = 1 if sc[7, d] <= sc[5, d] else 0


@nb.njit(cache=True)
def _many_iterate_blocks(indptr, indices, data, diag, invd, X, W, comps, tol, rel_tol, max_iter,
                         act, sc, out, count, ctl, hnd, hb, cells, plan, rb, part):
    """:func:`_many_iterate` on ``ctl[C_NT]`` thread blocks (:mod:`.blocks`): the same
    phases, each one parallel region for every active component, a product fused with the
    dot products that follow it."""
    n = len(diag)
    m = len(comps)
    nt = ctl[C_NT]
    R, R0, P, V, PH, SH = W[1], W[2], W[3], W[4], W[5], W[6]
    T = W[0]
    tb.many_start(indptr, indices, data, diag, invd, X, W, comps, nt, part, rb)
    _many_reduce(ctl, hnd, rb, 2 * m, count)
    _many_tolerances(comps, tol, rel_tol, act, sc, out, rb)
    for it in range(1, max_iter + 1):
        na = _many_beta(comps, act, sc)
        if na == 0:
            return
        tb.many_p(P, R, V, sc[1], sc[2], invd, PH, comps, act, n, nt)
        _many_exchange(ctl, hb, cells, plan, PH, comps, count, na)
        tb.many_product_r0v(indptr, indices, data, PH, V, R0, comps, act, nt, part, rb)
        _many_reduce(ctl, hnd, rb, m, count)
        na = _many_alpha(comps, act, sc, out, rb)
        tb.many_s(R, V, sc[0], invd, SH, comps, act, n, nt)
        _many_exchange(ctl, hb, cells, plan, SH, comps, count, na)
        tb.many_product_dot3(indptr, indices, data, SH, T, R, comps, act, nt, part, rb)
        _many_reduce(ctl, hnd, rb, 3 * m, count)
        _many_omega(comps, act, sc, out, rb, it)
        tb.many_xr(X, PH, SH, R, T, sc[0], sc[2], R0, comps, act, n, nt, part, rb)
        if _many_more(comps, act):
            _many_reduce(ctl, hnd, rb, 2 * m, count)
            _many_update(comps, act, sc, out, rb)
    for d in comps:
        if act[d]:
            out[3 + d] = 1 if sc[7, d] <= sc[5, d] else 0


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
    sc, out = mws.sc, mws.out
    return [SolveInfo(iters=int(out[d]), res0=float(sc[8, d]), res=float(sc[7, d]),
                      converged=bool(out[3 + d])) for d in comps]
