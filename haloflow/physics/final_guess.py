"""Where a PISO step's last pressure solve starts: the pressure the correction before it
left, moved along the change the previous step's last solve made, by the step that is best
in the energy norm of the pressure matrix.

Why: the last correction is solved to an absolute tolerance (OpenFOAM's ``pFinal``), the
earlier ones only to ``rel_tol`` times their initial residual.  Started where the
correction before it stopped, the last solve's initial residual is mostly the change that
correction makes, and that change moves little from one step to the next.  So the start
is ``p + theta d``, with ``d`` the previous step's last change and ``theta = d.r / d.Ad``
(``r = b - A p``): of all starts along ``d`` the one nearest the solution in the A-norm,
which CG's convergence is measured in (Fischer's projection onto earlier solutions, with
one vector; P. F. Fischer, Comput. Methods Appl. Mech. Engrg. 163 (1998) 193-204).  It is
never farther than the plain start (``theta = 0``), also when the flow changes abruptly (an
impulsive start, where the previous change points elsewhere and ``theta`` falls towards
0).  On the 64^3 cavity at ``benchmarks/race.py``'s settings (30 steps) the last solve's
initial residual falls 14-fold (median 3.3e-3 -> 2.3e-4 of its right-hand side) and its
iterations from 7.0 to 4.8 a step; it still stops at the same tolerance.  The earlier
corrections gain nothing from a better start (their target moves down with their initial
residual), so they keep theirs.

Cost per step: one pass over the matrix for ``b - A p`` and ``A d`` together, one global
sum of two numbers and two passes over two vectors; no message of its own (``d``'s ghost
values are the differences of ``p``'s, which every correction exchanges) and 8 bytes a
cell for ``d`` (which during the solve holds the start it is measured from).
``solver.pressure.guess = "previous"`` starts where the correction before stopped, as
OpenFOAM does.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from ..linalg.matrix import row_products

STATE = "p_last_change"  # its name in a checkpoint


@nb.njit(cache=True)
def projection_sums(indptr, indices, data, p, d, b, n):
    """``(d . (b - A p), d . A d)`` over the first ``n`` rows, the matrix read once (the
    ghost values of ``p`` and ``d`` current)."""
    dr = 0.0
    dq = 0.0
    for i in range(n):
        ap, ad = row_products(indptr, indices, data, p, d, i)
        dr += d[i] * (b[i] - ap)
        dq += d[i] * ad
    return dr, dq


@nb.njit(cache=True)
def move_on(p, d, theta, n):
    """``p += theta d`` on the first ``n`` rows (the owned ones), and ``d = p`` as it was
    on every row (the ghosts' p as the neighbours started from)."""
    for i in range(n):
        t = p[i]
        p[i] = t + theta * d[i]
        d[i] = t
    for i in range(n, len(p)):
        d[i] = p[i]


@nb.njit(cache=True)
def change_since(p, d):
    """``d = p - d``: what the last solve changed, from where it began, on every row."""
    for i in range(len(p)):
        d[i] = p[i] - d[i]


def step_length(dr: float, dq: float) -> float:
    """``theta`` from the two global sums; 0 where ``d`` has no energy (no change yet, or
    a constant, which an all-Neumann matrix does not see)."""
    return dr / dq if dq > 0.0 else 0.0


class FinalGuess:
    """The change a step's last pressure solve made (none until there is one), along which
    the next step's last solve starts (:mod:`~haloflow.physics.final_guess`)."""

    def __init__(self, n_cells: int, n_owned: int):
        self.n = n_owned
        self.change = np.zeros(n_cells)  # ghosts too: its product needs them
        self.known = False  # a last solve has been made (a checkpoint then saves it)
        self.theta = 0.0  # the latest step along the change

    def start(self, A, b, p, red) -> None:
        """Before the last solve of ``A p = b`` (``p``'s ghosts current): ``p`` moved on
        along the last change, on the owned rows (the solve refreshes the ghosts)."""
        theta = 0.0
        if self.known:
            pat = A.pattern
            theta = step_length(*red.sum(*projection_sums(
                pat.indptr, pat.indices, A.data, p, self.change, b, self.n)))
        move_on(p, self.change, theta, self.n)
        self.theta = theta

    def finish(self, p) -> None:
        """After the last solve and the exchange of ``p`` that follows it: keep what it
        changed, ghosts included (each the difference of two values its owner had)."""
        change_since(p, self.change)
        self.known = True

    def state(self) -> tuple[dict, dict]:
        """For a restart: the last change, once there is one (a checkpoint without it
        restarts with a plain start for the next step's last solve)."""
        return ({STATE: (self.change, "cell")} if self.known else {}), {}

    def restore(self, values: dict, extra: dict) -> None:
        if STATE in values:
            v = values[STATE].reshape(-1)
            self.change[: len(v)] = v
            self.known = True
