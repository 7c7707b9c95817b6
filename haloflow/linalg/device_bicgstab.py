"""BiCGStab-Jacobi on a device backend: the momentum solve of ``solver.backend = "cuda"``.

Each velocity component is solved by the one BiCGStab (:func:`.bicgstab.bicgstab_iterations`,
Jacobi fused into the vector kernels) over the device's operations, kernel for kernel on
:mod:`haloflow.backends.cuda_sparse`, so its iterates are the host's to round-off.  The
host's lockstep solve (``lockstep.bicgstab_many``) runs the components side by side with
fused reductions; here they run one after the other, each with its own reductions, which
leaves every component's arithmetic as it is.  The matrix is copied in once per assembly
(the components share it), each component's right-hand side and first guess in and its
answer out; the ghosts of the vectors the products read are exchanged on the device with the
run's halo strategy.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from ..parallel import halo
from .bicgstab import bicgstab_iterations
from .device_solve import Copies
from .krylov import SolveInfo
from .targets import for_target, solve_info

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
        self.out = np.zeros(4)  # a solve's (iterations, initial and final residual, converged)
        self.red = None  # the reducer of the solve in progress
        aware = exchanger.space.name.startswith("device-aware")  # else MPI on host buffers
        self.ex = halo.make(exchanger.name, lmesh, exchanger.comm,
                            staging="device-aware" if aware else "device", backend=backend)

    def set_matrix(self, A) -> None:
        """The coefficients of ``A`` and its inverse diagonal (Jacobi), copied in."""
        n = self.m.n
        self.copies.upload(self.m.data, A.data)
        np.divide(1.0, A.diag[:n], out=self._invd[:n])
        self.copies.upload(self.v.invd, self._invd[:n])

    def solve(self, b, x, tol, max_iter, red, rel_tol: float = 0.0) -> SolveInfo:
        """``bicgstab.bicgstab`` without a preconditioner object (Jacobi): ``x`` (host, the
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
        v = self.v
        self.red = red
        _BICGSTAB(self, v.b, v.x, tol, max_iter, rel_tol, v.r, v.r0, v.p, v.v, v.phat, v.s,
                  v.shat, v.t, self.out)
        return solve_info(self.out)

    def profile(self) -> dict:
        """Copies and bytes each way, reductions' read-backs and device halos included."""
        return self.copies.profile(self.k, [self.ex])


class DeviceBiCGStabOps:
    """The device's operations for :func:`.bicgstab.bicgstab_iterations`, each a kernel
    launch (or an exchange, or a reduction of the scalars read back); the context is the
    :class:`DeviceBiCGStab`, Jacobi fused into the direction updates."""

    @staticmethod
    def residual(d, x, b, r):
        d.ex.exchange([x])
        d.k.residual(d.m, x, b, r)

    @staticmethod
    def matvec(d, x, y):
        d.ex.exchange([x])
        d.k.spmv(d.m, x, y)

    @staticmethod
    def copy(d, src, dst):
        d.k.copy(src, dst, d.m.n)

    @staticmethod
    def zero(d, a):
        d.k.fill(a, 0.0, d.m.n)

    @staticmethod
    def dot(d, a, b):
        return d.k.dots(((a, b),), d.m.n)[0]

    @staticmethod
    def dot2(d, a, b, e, f):
        return d.k.dots(((a, b), (e, f)), d.m.n)

    @staticmethod
    def dot3(d, t, s):
        return d.k.dots(((t, s), (t, t), (s, s)), d.m.n)

    @staticmethod
    def sum1(d, a):
        return d.red.sum(a)[0]

    @staticmethod
    def sum2(d, a, b):
        return d.red.sum(a, b)

    @staticmethod
    def sum3(d, a, b, e):
        return d.red.sum(a, b, e)

    @staticmethod
    def axpy(d, alpha, a, y):
        d.k.axpy(alpha, a, y, d.m.n)

    @staticmethod
    def bicg_p(d, p, r, v, beta, omega, phat):
        d.k.bicg_p(p, r, v, beta, omega, d.v.invd, phat, d.m.n)

    @staticmethod
    def bicg_s(d, s, r, v, alpha, shat):
        d.k.bicg_s(s, r, v, alpha, d.v.invd, shat, d.m.n)

    @staticmethod
    def bicg_xr(d, x, phat, shat, r, s, t, alpha, omega, r0):
        return d.k.bicg_xr(x, phat, shat, r, s, t, alpha, omega, r0, d.m.n)


_BICGSTAB = for_target(bicgstab_iterations, DeviceBiCGStabOps, "device", compiled=False)
