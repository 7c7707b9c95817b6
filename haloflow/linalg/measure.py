"""OpenFOAM's normalised residual: the measure simpleFoam's ``residualControl`` stops on.

haloflow's own initial residual is ``||b - A x|| / ||b||`` (2-norms).  OpenFOAM divides the
1-norm of ``b - A x`` by a normalisation factor that does not vanish when ``b`` does and does
not grow with a constant offset of ``x``::

    sum |b - A x|  /  (sum |A x - xbar A 1| + sum |b - xbar A 1|)

with ``xbar`` the mean of ``x`` over all cells and ``A 1`` the row sums (coupled columns
included).  A steady run set to stop on this measure (``solver.residual_norm =
"normalised"``) stops where simpleFoam with the same ``residualControl`` would, so the two
codes' iteration counts and times to converge compare like with like.
"""

from __future__ import annotations

import numba as nb
import numpy as np

TINY = 1e-20  # a zero system (no source, nothing to solve) has a zero residual


@nb.njit(cache=True)
def residual_sums(indptr, indices, data, X, B, axes, xbar, n, out):
    """``out[2j], out[2j+1] = sum |b - A x|, sum |A x - xbar A 1| + sum |b - xbar A 1|`` of
    each component ``d = axes[j]`` (``x = X[d]``, ``b = B[d]``, ``xbar[d]``) over the ``n``
    owned rows (ghost values of ``X`` current).  A pass over the matrix per component: the
    rows of one component taken from views made once, not per row."""
    for j in range(len(axes)):
        d = axes[j]
        x, b, xb = X[d], B[d], xbar[d]
        res = 0.0
        norm = 0.0
        for i in range(n):
            ax = 0.0
            a1 = 0.0
            for k in range(indptr[i], indptr[i + 1]):
                a = data[k]
                ax += a * x[indices[k]]
                a1 += a
            m = xb * a1
            res += abs(b[i] - ax)
            norm += abs(ax - m) + abs(b[i] - m)
        out[2 * j] = res
        out[2 * j + 1] = norm


class NormalisedResidual:
    """The normalised initial residuals of one matrix's components ``axes``, in two global
    sums whatever their number; buffers sized once."""

    def __init__(self, M, axes: tuple, n_owned: int, n_global: int, red):
        self.M, self.axes, self.n, self.n_global, self.red = M, axes, n_owned, n_global, red
        self.xbar = np.zeros(max(axes) + 1)
        self.out = np.zeros(2 * len(axes))

    def __call__(self, X, B) -> list:
        """``X[d]``, ``B[d]``: the solution (ghosts current) and right-hand side of component
        ``d``; returns one residual per component of ``axes``."""
        n, axes, red = self.n, self.axes, self.red
        sums = red.sum(*[float(X[d, :n].sum()) for d in axes])
        for d, s in zip(axes, sums, strict=True):
            self.xbar[d] = s / self.n_global
        p = self.M.pattern
        residual_sums(p.indptr, p.indices, self.M.data, X, B, axes, self.xbar, n, self.out)
        s = red.sum(*self.out)
        return [s[2 * j] / (s[2 * j + 1] + TINY) for j in range(len(axes))]
