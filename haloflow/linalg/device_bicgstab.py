"""BiCGStab-Jacobi on a device backend: the momentum solve of ``solver.backend = "cuda"``.

Each velocity component is solved as :func:`.krylov.bicgstab` solves it (Jacobi fused into
the vector kernels), kernel for kernel on :mod:`haloflow.backends.cuda_sparse`, so its
iterates are the host's to round-off.  The host's lockstep solve (``lockstep.bicgstab_many``)
runs the components side by side with fused reductions; here they run one after the other,
each with its own reductions, which leaves every component's arithmetic as it is.  The
matrix is copied in once per assembly (the components share it), each component's
right-hand side and first guess in and its answer out; the ghosts of the vectors the
products read are exchanged on the device with the run's halo strategy.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from ..parallel import halo
from .device_solve import Copies
from .krylov import SolveInfo, initial_info

VECTORS = ("x", "r", "r0", "p", "v", "phat", "s", "shat", "t")


class DeviceBiCGStab:
    """``set_matrix(A)`` once per assembly, then ``solve(b, x, ...)`` per component, on
    ``backend``'s device; ``lmesh`` and ``exchanger``: the pattern, strategy and staging of
    the device's halo exchanges (the host exchanger's)."""

    def __init__(self, pattern, lmesh, exchanger, backend):
        self.be, self.k = backend, backend.sparse()
        self.copies = Copies(backend)
        n, ncols = pattern.n_rows, pattern.n_cols
        put = self.copies.put
        self.m = SimpleNamespace(n=n, ip=put(pattern.indptr), ix=put(pattern.indices),
                                 data=backend.empty(max(pattern.nnz, 1)))
        self.v = SimpleNamespace(b=backend.empty(max(n, 1)), invd=backend.empty(max(n, 1)),
                                 **{name: backend.empty(max(ncols, 1)) for name in VECTORS})
        self._invd = np.zeros(max(n, 1))
        aware = exchanger.space.name.startswith("device-aware")  # else MPI on host buffers
        self.ex = halo.make(exchanger.name, lmesh, exchanger.comm,
                            staging="device-aware" if aware else "device", backend=backend)

    def set_matrix(self, A) -> None:
        """The coefficients of ``A`` and its inverse diagonal (Jacobi), copied in."""
        n = self.m.n
        self.copies.upload(self.m.data, A.data)
        np.divide(1.0, A.diag[:n], out=self._invd[:n])
        self.copies.upload(self.v.invd, self._invd[:n])

    def _matvec(self, x, y):
        self.ex.exchange([x])
        self.k.spmv(self.m, x, y)

    def solve(self, b, x, tol, max_iter, red, rel_tol: float = 0.0) -> SolveInfo:
        """``krylov.bicgstab`` without a preconditioner object (Jacobi): ``x`` (host, the
        first guess) improved in place on the owned rows."""
        n = self.m.n
        self.copies.upload(self.v.b, b[:n])
        self.copies.upload(self.v.x, x[:n])
        info = self._iterate(tol, max_iter, red, rel_tol)
        self.copies.download(x[:n], self.v.x)
        return info

    def solve_on_device(self, b, x, tol, max_iter, red, rel_tol: float = 0.0) -> SolveInfo:
        """:meth:`solve` of device arrays ``b`` and ``x``, with the coefficients and the
        inverse diagonal the caller left in ``m.data`` and ``v.invd``."""
        n = self.m.n
        self.k.copy(b, self.v.b, n)
        self.k.copy(x, self.v.x, n)
        info = self._iterate(tol, max_iter, red, rel_tol)
        self.k.copy(self.v.x, x, n)
        return info

    def _iterate(self, tol, max_iter, red, rel_tol) -> SolveInfo:
        k, v, m = self.k, self.v, self.m
        n = m.n
        self.ex.exchange([v.x])
        k.residual(m, v.x, v.b, v.r)
        rr, bb = red.sum(*k.dots(((v.r, v.r), (v.b, v.b)), n))
        info, tol, bnorm = initial_info(rr, bb, tol, rel_tol)
        if info.res0 <= tol:
            return info
        k.copy(v.r, v.r0, n)
        k.fill(v.p, 0.0, n)
        k.fill(v.v, 0.0, n)
        rho = alpha = omega = 1.0
        rho_new = rr
        for it in range(1, max_iter + 1):
            beta = (rho_new / rho) * (alpha / omega)
            rho = rho_new
            k.bicg_p(v.p, v.r, v.v, beta, omega, v.invd, v.phat, n)
            self._matvec(v.phat, v.v)
            (r0v,) = red.sum(*k.dots(((v.r0, v.v),), n))
            if r0v == 0.0:
                break
            alpha = rho / r0v
            k.bicg_s(v.s, v.r, v.v, alpha, v.invd, v.shat, n)
            self._matvec(v.shat, v.t)
            ts, tt, ss = red.sum(*k.dots(((v.t, v.s), (v.t, v.t), (v.s, v.s)), n))
            info.iters = it
            if np.sqrt(ss) / bnorm <= tol or tt == 0.0:
                k.axpy(alpha, v.phat, v.x, n)
                info.res = float(np.sqrt(ss) / bnorm)
                return info
            omega = ts / tt
            rho_new, rr = red.sum(*k.bicg_xr(v.x, v.phat, v.shat, v.r, v.s, v.t, alpha,
                                             omega, v.r0, n))
            info.res = float(np.sqrt(rr) / bnorm)
            if info.res <= tol:
                return info
            if omega == 0.0 or rho_new == 0.0:
                break
        info.converged = bool(info.res <= tol)
        return info

    def profile(self) -> dict:
        """Copies and bytes each way, reductions' read-backs and device halos included."""
        return self.copies.profile(self.k, [self.ex])
