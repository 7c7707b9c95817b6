"""Aggregation AMG: a K-cycle preconditioner for the pressure equation.

Why this design (numbers from `benchmarks/poisson.py` and docs/performance.md; FCG to 1e-6 on
the all-Neumann finite-volume Laplacian):

- *Plain aggregation* by double pairwise matching (aggregates of about four cells, chosen by
  strongest negative coupling, as in Notay's AGMG).  The prolongation is piecewise constant,
  so the Galerkin coarse matrix is a sum of fine coefficients: the structure is computed once
  and every time step refreshes the coefficients with one scatter-add per level.  Smoothed
  aggregation converges faster per cycle but needs the prolongator's rows from neighbouring
  ranks and a distributed sparse triple product at every refresh.
- Plain aggregation alone is not scalable in a V-cycle (iterations grow with the mesh), so
  coarse levels are solved by the *K-cycle*: two steps of a Krylov method, preconditioned by
  the next level, on every coarse level.  That restores mesh-independent convergence at the
  price of a few fused reductions per level visit.
- The matching is greedy, so the aggregates depend on the order rows are visited and on how
  ties are broken.  Couplings within a relative ``TIE`` are equal and go to the earliest row:
  before, the 1e-16 noise of the face coefficients decided, and a 2D box took 14-18
  iterations instead of 9 whenever n was not a power of two (63^2 .. 255^2; now 9-10).
  ``TIE`` is 5 %, not a rounding margin: the pressure matrix's couplings carry 1/a_P, which
  the first step's velocity field modulates smoothly by 1-2 % from face to face (the
  Taylor-Green vortex), and within 1e-6 that modulation chose every partner: pairs pointed
  every way, their pairs took random shapes that the quality test refused, and the periodic
  cube coarsened 32^3 to 11020, 6019, 3646 and stalled at 2417 rows (64^3: 98506, then
  68601, left to the sparse LU), against 8192, 2048, 512, 128 now (64^3 down to 153 rows).
  The modulation grows on coarse levels (coarse neighbours lie further apart): 3 % left
  32^3 with 640 rows after three levels and 64^3 with 6098 after three.  The 32^3 cube
  cavity keeps its level sizes and iterations (from 4 % a few of its third-level
  aggregates change; from 7 % its sizes, 2055 -> 2048); graded and unstructured meshes
  change by a few rows per level under any wider tie (pitzDaily, the cylinder) for the
  same pressure iterations (3.8 and 19.5 per solve over 30 steps).
  Every tentative pair also passes AGMG's two-grid quality test (Napov & Notay 2012),
  mu(G) = max_v v'D(I - 1 1'D/1'D1)v / v'A_G v <= ``KAPPA``: it turns the worst shapes
  (four cells in a row, S and L shapes: mu = 6.8 for the 5-point stencil, 2 for a 2 x 2
  square) into pairs; 255^2 11 -> 9 iterations, no change where the squares tile the box.
- *The aggregates do not depend on the partition.*  Rank-local matching, the obvious
  parallel choice, restarts at every rank boundary: along a jagged METIS interface the rows
  of a structured mesh start at different parities, the 2 x 2 squares of neighbouring rows
  slip against each other and the dislocations run through the whole subdomain.  2D METIS
  runs on 2-4 ranks took 12-18 iterations (serial 9); other visiting orders, the quality
  test, claiming cells across the cut, merging fragments or gathering coarse levels earlier
  only reached 11-15.  So each distributed level sends its graph (rows, global columns,
  coefficients) to rank 0, which runs the serial matching with rows visited in the serial
  order (the mesh's global ids, then each aggregate's first cell); an aggregate belongs to
  the rank of its first cell and may hold cells of other ranks.  The hierarchy is then the
  serial one, level by level: 9-10 iterations on 2-4 ranks for 64^2 .. 1024^2 and 10-11
  for 32^3 .. 128^3.  The price is set-up time on rank 0 (O(nnz) matching and gathers:
  1024^2 on 2 ranks 0.39 s against 0.31 s serially); ``aggregation="local"`` keeps the
  rank-local matching (11-15 iterations) for runs where that matters more.
- Aggregates that span ranks cost two small point-to-point messages per level visit
  (partial restrictions to the owner, the owner's coarse value back; into the redundant
  level only the first) and, per refresh, the
  partial Galerkin rows of the cells held elsewhere.  Coarse levels keep owned rows and
  ghost columns and exchange through the same halo interface as the solver.
- *The coarse problem is solved redundantly.*  Once a level has fewer than ``GATHER_BELOW``
  global rows, every rank receives all of it (structure once, coefficients at every refresh:
  one allgather) and holds the same serial hierarchy below it, coarsened while it has more
  than ``COARSEST`` rows and ended by a sparse Cholesky (:mod:`.cholesky`: refactored once
  an entry has moved by 1 %; solved by a compiled kernel that streams L alone).  A visit is
  one allgather of the restricted right-hand side (rank by rank: the level's global row
  order), the same solve on every rank, and each rank reads its own and its ghost entries
  of the correction: no scatter, no rank waiting for another.
  Before, the level was gathered on rank 0, which solved it while the others waited, with a
  gather and a scatter per visit.  The redundant work does not shrink with more ranks (the
  performance model's serial part), so it is kept small: 62^3 cavity on 1 rank, 10.7
  pressure iterations per step either way, its share of a step 11-12 % with the gather below
  4000 rows (K-cycle on 3993 rows, LU on 1092) and about 1 % below 300 (a dense LU on 109
  rows; most of it the Python calls, 3-5 us per visit; compiled about 0.4 %).  Replicating
  below 100 (LU on 46 rows) measured 0.4-0.5 %, but on 1000-row problems cg1 and pipecg then
  took 2 iterations more in parallel than serially.  The price is more distributed levels,
  whose exchanges and reductions the model prices; on a slow network pass a larger
  ``gather_below`` (the hierarchy and the iterations stay the same).
  On 2D problems (``dims``, the solved directions) both thresholds are ``COARSEST_2D`` = 1000:
  a 2D level's Cholesky fills in little, and the small levels' cycles cost more than their
  rows say.  pitzDaily's 984-row level solved directly instead of cycled on down to 196
  rows: 0.80x the time per pressure iteration, a refresh 0.23 -> 0.45 ms, 3.90 -> 3.86
  iterations per solve; on 2 ranks 172 -> 69 exchanges per SIMPLE iteration.  In 3D
  (32^3 cavity) the same threshold took 5.26 iterations instead of 5.0 and a refresh
  0.8 -> 1.3 ms (docs/performance.md, ninth pass).
- *Small levels get one plain cycle.*  Below ``KRYLOV_ABOVE`` global rows a level is not
  solved by the K-cycle's two Krylov steps but by one cycle: without it the visits, and the
  reductions, double at every level (62^3: 64 reductions per application against 33), for
  the same iterations (62^3, 32^3: 10; 63^2, 255^2: 10).  Not much higher: with 1500, 63^2
  took 18 iterations instead of 10.  Only the first ``KRYLOV_LEVELS`` = 2 coarse levels
  keep the K-cycle: every further K-level doubles the visits below it, and with the
  replicated level at 300 rows the 62^3 cavity had 4 of them (584 allreduces per step,
  counted as 2 ranks would make them).  With 2: 217 per step for 10.95 pressure
  iterations per solve against 10.55; 32^3 291 -> 201 (10.2 -> 10.25), 255^2 743 -> 540
  (12.5 -> 13.4), 63^2 unchanged; with 1, 255^2 took 21.5.
- Smoother: l1 hybrid Gauss-Seidel, rank-local (Jacobi across the cut, the l1 diagonal
  keeping it convergent), forward before and backward after the coarse correction.  On
  distributed levels the rows next to the cut are swept once more after an exchange
  (``RESWEEP``), which takes back most of what the Jacobi coupling across the cut costs:
  1024^2 on 2 ranks 11 -> 10 iterations, 64^3 11 -> 10, per-iteration time within noise.
  Not on levels under ``RESWEEP_ABOVE`` rows, where its two exchanges per visit bought
  nothing (256^2 and 40^3 on 3 ranks: 10 iterations with or without, 103 -> 71 and
  110 -> 77 coarse exchanges per application).  Nor on any coarse level now
  (``RESWEEP_COARSE``): on 2 ranks 48^3 and 256^2 took the same iterations with it on levels
  of 2000 rows and more or on none (K-cycle 10 and 10, AMLI 11 and 12), for 506 -> 374
  coarse exchanges per solve (48^3, K-cycle) and 516 -> 372 (AMLI).
  The pre-smoothing starts from zero, so where a level's rows hold their lower columns
  before the diagonal and the higher ones after it (every level here: sorted CSR, ghost
  columns numbered last) the sweep reads only the lower half of each row and the residual
  it leaves is the upper half times x (``gs_from_zero``, ``upper_residual_restrict``);
  on a level without ghost columns both run in one pass, a row's residual taken once the
  sweep is a bandwidth past it, straight into the coarse right-hand side
  (``gs_from_zero_restrict``).  Sweeps keep the inverse l1 diagonal and sum each row
  without a branch.  64^3 Neumann Laplacian, 1 rank: 74 -> 56 ns per cell per FCG
  iteration, the same iterations (docs/performance.md, fifth pass).
- *AMLI instead of the K-cycle* (``cycle="A"``; the default ``"auto"`` takes it where the
  top level has more than ``AMLI_COUPLINGS`` = 5 off-diagonal entries per row, 3D
  stencils, and keeps the K-cycle, ``"K"``, on 2D ones, where AMLI cost iterations):
  the Krylov levels take two Richardson steps with the fixed lengths of the degree-2 AMLI
  polynomial (``amli_steps``, ``AMLI_LMIN`` = 0.3) instead of two flexible-CG steps, so the
  coarse levels make no reduction and one exchange less per visit.  Poisson to 1e-6,
  serial: 32^3 and 48^3 10 iterations either way; 256^2 9 -> 11, 63^2 9 -> 9.  The 32^3
  cavity on 2 ranks: 9.83 -> 9.89 pressure iterations per solve, 190.6 -> 64.3 allreduces
  and 927 -> 890 exchanges per step.  ``AMLI_LMIN`` 0.2 cost 3D one iteration, 0.1 four;
  the plain scaled Chebyshev polynomial (which dips below zero) diverged in 3D.
"""

from __future__ import annotations

from types import SimpleNamespace

import numba as nb
import numpy as np

from ..parallel import halo, transfer
from ..parallel.reduce import Reducer, self_reducer
from ..parallel.timers import NULL_TIMERS
from .cholesky import Cholesky
from .matrix import IDX

NULL_PHASE = NULL_TIMERS("")  # an untimed block

GATHER_BELOW = 300  # every rank holds the whole coarse problem once it has fewer rows
COARSEST = 300  # solve directly (LU) at or below this many unknowns
COARSEST_2D = 1000  # both, on 2D problems (AMG's ``dims``)
MIN_RATIO = 1.4  # stop coarsening if a level shrinks by less than this factor
STRENGTH = 0.25  # pair only with couplings at least this fraction of the row's strongest
TIE = 0.05  # couplings within this relative difference are equally strong (docstring)
KAPPA = 4.5  # refuse tentative aggregates whose two-grid quality mu(G) exceeds this
KCYCLE_T = 0.25  # K-cycle: skip the second Krylov step if the residual fell by this factor
CYCLE = "auto"  # the coarse solve on Krylov levels: "K" (K-cycle), "A" (AMLI), "V" (one
# cycle), "auto": AMLI where the top level couples a row to more than AMLI_COUPLINGS others
AMLI_COUPLINGS = 5.0  # on average (3D stencils 6, 2D 4: AMLI cost 2D 1-2 iterations)
AMLI_LMIN = 0.3  # AMLI: the smallest eigenvalue of a level's one-cycle preconditioned matrix
CHOLESKY = True  # the coarsest level by sparse Cholesky where it is positive definite
DENSE_LU = 200  # else: a coarsest level of at most this many rows gets a dense LU
REFACTOR_ABOVE = 0.01  # the Cholesky factors kept until an entry moves by more (cholesky.py)
KRYLOV_ABOVE = 500  # K-cycle: levels with fewer global rows get one plain cycle per visit
KRYLOV_LEVELS = 2  # ... and so do levels below the first KRYLOV_LEVELS coarse ones
RESWEEP = 1  # distributed levels: sweep the rows next to the cut again with fresh ghosts
RESWEEP_ABOVE = 2000  # ... on coarse levels of at least this many global rows (serial: counted)
RESWEEP_COARSE = False  # ... if at all: the top level only (see the module docstring)
AGGREGATION = "global"  # "global": partition-independent aggregates; "local": per rank


# -- kernels ------------------------------------------------------------------------------------

@nb.njit(cache=True)
def _abs_offdiag(indptr, indices, data, diag_pos, n):
    """Sum of |a_ij| over each row's off-diagonal entries (ghost columns included)."""
    out = np.zeros(n)
    for i in range(n):
        s = 0.0
        for k in range(indptr[i], indptr[i + 1]):
            if k != diag_pos[i]:
                s += abs(data[k])
        out[i] = s
    return out


@nb.njit(cache=True)
def _coupling(indptr, indices, data, i, j):
    for k in range(indptr[i], indptr[i + 1]):
        if indices[k] == j:
            return data[k]
    return 0.0


@nb.njit(cache=True)
def _quality_ok(indptr, indices, data, diag_pos, absrow, g, m, kappa, w, dg):
    """Is mu(G) <= kappa for the rows g[:m]?  mu(G) = max v'D(I - P)v / v'A_G v, with D the
    diagonal, P the D-orthogonal projection on constants and A_G the aggregate's block with
    its couplings to the outside moved onto the diagonal (Napov & Notay 2012).  Equivalent
    to A_G - D/kappa + (D1)(D1)'/(kappa 1'D1) being positive semi-definite, checked by
    Gaussian elimination; when A_G has zero row sums its last pivot is zero by construction.
    ``w`` and ``dg`` are scratch arrays (at least m x m and m)."""
    zero_rowsum = True
    for p in range(m):
        i = g[p]
        dg[p] = data[diag_pos[i]]
        inner = 0.0
        for q in range(m):
            if q != p:
                a = 0.5 * (_coupling(indptr, indices, data, i, g[q])
                           + _coupling(indptr, indices, data, g[q], i))
                w[p, q] = a
                inner += abs(a)
        w[p, p] = dg[p] - (absrow[i] - inner)
        s = 0.0
        for q in range(m):
            s += w[p, q]
        if abs(s) > 1e-10 * dg[p]:
            zero_rowsum = False
    tot = 0.0
    scale = 0.0
    for p in range(m):
        tot += dg[p]
        scale = max(scale, dg[p])
    for p in range(m):
        for q in range(m):
            w[p, q] += dg[p] * dg[q] / (kappa * tot)
        w[p, p] -= dg[p] / kappa
    last = m - 1 if zero_rowsum else m
    for c in range(last):
        piv = w[c, c]
        if piv <= 1e-12 * scale:
            return False
        for r in range(c + 1, m):
            f = w[r, c] / piv
            for s in range(c + 1, m):
                w[r, s] -= f * w[c, s]
    return not (zero_rowsum and w[m - 1, m - 1] < -1e-8 * scale)


@nb.njit(cache=True)
def _match(ip, ix, d, dp, n, order, key, mptr, mem, fip, fix, fd, fdp, absrow, beta, tie,
           kappa):
    """Greedy pairwise matching of the n rows of (ip, ix, d), visited in ``order``.

    Each unmatched row is paired with its strongest unmatched negative coupling (at least
    ``beta`` times its strongest; couplings within ``tie`` of each other count as equal and
    the smallest ``key`` wins) whose union passes the quality test, else the next strongest.
    Row I stands for the fine rows mem[mptr[I]:mptr[I+1]] of (fip, fix, fd), on which the
    test is made.  Columns >= n (ghosts) count for the strongest coupling, never as partners.
    Aggregates are numbered in the order they are created."""
    agg = np.full(n, -1, dtype=np.int64)
    nagg = 0
    g = np.zeros(16, dtype=np.int64)
    w = np.zeros((16, 16))
    dg = np.zeros(16)
    tried = np.zeros(64, dtype=np.int64)
    for t in range(n):
        i = order[t]
        if agg[i] >= 0:
            continue
        amax = 0.0
        for k in range(ip[i], ip[i + 1]):
            if k != dp[i] and -d[k] > amax:
                amax = -d[k]
        best = -1
        ntried = 0
        while amax > 0.0 and ntried < 64:
            umax = 0.0
            for k in range(ip[i], ip[i + 1]):
                j = ix[k]
                if j < n and k != dp[i] and agg[j] < 0 and -d[k] > umax:
                    free = True
                    for s in range(ntried):
                        if tried[s] == j:
                            free = False
                    if free:
                        umax = -d[k]
            if umax <= 0.0 or umax < beta * amax:
                break
            cand = -1
            for k in range(ip[i], ip[i + 1]):
                j = ix[k]
                if j < n and k != dp[i] and agg[j] < 0 and -d[k] >= umax * (1.0 - tie):
                    free = True
                    for s in range(ntried):
                        if tried[s] == j:
                            free = False
                    if free and (cand < 0 or key[j] < key[cand]):
                        cand = j
            m = 0
            for s in range(mptr[i], mptr[i + 1]):
                g[m] = mem[s]
                m += 1
            for s in range(mptr[cand], mptr[cand + 1]):
                g[m] = mem[s]
                m += 1
            if _quality_ok(fip, fix, fd, fdp, absrow, g, m, kappa, w, dg):
                best = cand
                break
            tried[ntried] = cand
            ntried += 1
        agg[i] = nagg
        if best >= 0:
            agg[best] = nagg
        nagg += 1
    return agg, nagg


@nb.njit(cache=True)
def _entries_by_owner(indptr, indices, foreign_row, ncols):
    """Columns used by the rows whose aggregate is owned here; the entries (and their rows)
    of the rows whose aggregate is owned elsewhere."""
    used = np.zeros(ncols, dtype=np.bool_)
    m = 0
    for i in range(len(foreign_row)):
        if foreign_row[i]:
            m += indptr[i + 1] - indptr[i]
    rows = np.empty(m, dtype=np.int64)
    entries = np.empty(m, dtype=np.int64)
    m = 0
    for i in range(len(foreign_row)):
        for k in range(indptr[i], indptr[i + 1]):
            if foreign_row[i]:
                rows[m] = i
                entries[m] = k
                m += 1
            else:
                used[indices[k]] = True
    return used, rows, entries


@nb.njit(cache=True)
def _members(agg, nc):
    """Rows of each aggregate as CSR (pointer, rows ascending; rows with a negative
    aggregate left out): a counting sort."""
    ptr = np.zeros(nc + 1, dtype=np.int64)
    for i in range(len(agg)):
        if agg[i] >= 0:
            ptr[agg[i] + 1] += 1
    for a in range(nc):
        ptr[a + 1] += ptr[a]
    fill = ptr[:-1].copy()
    mem = np.empty(ptr[nc], dtype=np.int64)
    for i in range(len(agg)):
        if agg[i] >= 0:
            mem[fill[agg[i]]] = i
            fill[agg[i]] += 1
    return ptr, mem


@nb.njit(cache=True)
def _find_diagonal(indptr, indices, n):
    pos = np.full(n, -1, dtype=np.int64)
    for i in range(n):
        for k in range(indptr[i], indptr[i + 1]):
            if indices[k] == i:
                pos[i] = k
    return pos


@nb.njit(cache=True)
def _first_rows(agg, order, nc):
    """Each aggregate's first row in visiting order (the row that created it)."""
    seed = np.full(nc, -1, dtype=np.int64)
    for t in range(len(order)):
        i = order[t]
        if seed[agg[i]] < 0:
            seed[agg[i]] = i
    return seed


@nb.njit(cache=True)
def _galerkin_structure(indptr, indices, mptr, mem, cagg, nc, ncols):
    """CSR structure of P^T A P (columns ascending in each row) for the aggregates
    mem[mptr[I]:mptr[I+1]], walking each aggregate's rows in turn; column j of A goes to
    coarse column cagg[j] (dropped if negative).  slot[k]: the coarse position of entry k."""
    marker = np.full(ncols, -1, dtype=np.int64)
    cip = np.zeros(nc + 1, dtype=np.int64)
    cix = np.empty(indptr[len(indptr) - 1], dtype=np.int32)  # 32-bit: a rank's entries
    slot = np.full(indptr[len(indptr) - 1], -1, dtype=np.int32)  # (kept for every refresh)
    pos = 0
    for a in range(nc):
        first = pos
        for t in range(mptr[a], mptr[a + 1]):
            i = mem[t]
            for k in range(indptr[i], indptr[i + 1]):
                c = cagg[indices[k]]
                if c >= 0 and marker[c] < first:
                    marker[c] = pos
                    cix[pos] = c
                    pos += 1
        for t in range(first + 1, pos):  # insertion sort: rows are short
            c = cix[t]
            u = t - 1
            while u >= first and cix[u] > c:
                cix[u + 1] = cix[u]
                u -= 1
            cix[u + 1] = c
        for t in range(first, pos):
            marker[cix[t]] = t
        for t in range(mptr[a], mptr[a + 1]):
            i = mem[t]
            for k in range(indptr[i], indptr[i + 1]):
                c = cagg[indices[k]]
                if c >= 0:
                    slot[k] = marker[c]
        cip[a + 1] = pos
    return cip, cix[:pos].copy(), slot


@nb.njit(cache=True)
def galerkin_refresh(slot, fine, coarse):
    """Coarse coefficients of a piecewise-constant prolongation: sums of fine ones."""
    coarse[:] = 0.0
    for k in range(len(slot)):
        if slot[k] >= 0:
            coarse[slot[k]] += fine[k]


@nb.njit(cache=True)
def _sum_entries(entries, slot, fine, out):
    """out[slot[t]] = sum of fine[entries[t]] (out zeroed first)."""
    out[:] = 0.0
    for t in range(len(entries)):
        out[slot[t]] += fine[entries[t]]


@nb.njit(cache=True)
def _scatter_add(slot, vals, out):
    for k in range(len(slot)):
        out[slot[k]] += vals[k]


@nb.njit(cache=True)
def l1_inverse(indptr, indices, data, diag_pos, n, out):
    """1 / (a_ii + sum of |a_ij| over ghost columns): the inverse l1 hybrid Gauss-Seidel
    diagonal (Baker, Falgout, Kolev & Yang 2011), which keeps the rank-local smoother
    convergent however the mesh is cut; 1 / a_ii on one rank.  Kept inverted so that no
    division lies on the chain from one row of a sweep to the next."""
    for i in range(n):
        s = data[diag_pos[i]]
        for k in range(indptr[i], indptr[i + 1]):
            if indices[k] >= n:
                s += abs(data[k])
        out[i] = 1.0 / s


@nb.njit(cache=True)
def l1_inverse_rows(indptr, indices, data, diag_pos, rows, n, out):
    """:func:`l1_inverse` reading each row's diagonal entry alone, and whole rows only where
    they have ghost columns (``rows``, sorted): the same values at half the memory traffic
    (a 64^3 Laplacian's rows: 1.6-1.9 -> 0.8-0.9 ms)."""
    for i in range(n):
        out[i] = 1.0 / data[diag_pos[i]]
    for t in range(len(rows)):
        i = rows[t]
        s = data[diag_pos[i]]
        for k in range(indptr[i], indptr[i + 1]):
            if indices[k] >= n:
                s += abs(data[k])
        out[i] = 1.0 / s


@nb.njit(cache=True)
def split_at_diagonal(indptr, indices, diag_pos, n):
    """True if every row's columns before its diagonal are lower rows and those after it
    higher ones (ghost columns, numbered after the owned rows, among them): what the
    half-row kernels :func:`gs_from_zero` and :func:`upper_residual_restrict` rely on."""
    for i in range(n):
        for k in range(indptr[i], diag_pos[i]):
            if indices[k] >= i:
                return False
        for k in range(diag_pos[i] + 1, indptr[i + 1]):
            if indices[k] <= i:
                return False
    return True


@nb.njit(cache=True, inline="always")
def _gs_row(indptr, indices, data, dinv, b, x, i):
    """x_i += (b - A x)_i / l1_i, the row's sum over every column, the diagonal's included:
    no branch in the loop and no division on the chain from one row to the next (a
    quarter to a third faster per sweep than skipping the diagonal and dividing)."""
    s = b[i]
    for k in range(indptr[i], indptr[i + 1]):
        s -= data[k] * x[indices[k]]
    x[i] += s * dinv[i]


@nb.njit(cache=True)
def gs_sweep(indptr, indices, data, diag_pos, dinv, b, x, n, forward):
    """One Gauss-Seidel sweep over the owned rows (ghost values of x are held fixed)."""
    for t in range(n):
        _gs_row(indptr, indices, data, dinv, b, x, t if forward else n - 1 - t)


@nb.njit(cache=True)
def gs_rows(indptr, indices, data, diag_pos, dinv, b, x, rows, forward):
    """Gauss-Seidel on the listed rows only (the rows with ghost columns)."""
    m = len(rows)
    for t in range(m):
        _gs_row(indptr, indices, data, dinv, b, x, rows[t] if forward else rows[m - 1 - t])


@nb.njit(cache=True)
def gs_from_zero(indptr, indices, data, diag_pos, dinv, b, x, n):
    """A forward sweep from x = 0 (the cycle's pre-smoothing): the higher columns multiply
    zeros, so only the lower half of each row is read, (L + D_l1) x = b.  Needs
    :func:`split_at_diagonal`."""
    xp = 0.0
    for i in range(n):
        xp = _from_zero_row(indptr, indices, data, diag_pos, dinv, b, x, i, xp)
        x[i] = xp


@nb.njit(cache=True, inline="always")
def _from_zero_row(indptr, indices, data, diag_pos, dinv, b, x, i, xp):
    """Row i of :func:`gs_from_zero` given row i - 1's new value ``xp``.  The row's last
    lower column, row i - 1 on a banded ordering, is read from that register instead of
    the memory just written: the same sums, without a store and a reload on the chain from
    one row to the next (per sweep 0.73x on pitzDaily's top level, 0.89x on the 64^3
    cavity's, where memory shares the bill; docs/performance.md, ninth pass)."""
    d = diag_pos[i]
    k0 = indptr[i]
    s = b[i]
    for k in range(k0, d - 1):
        s -= data[k] * x[indices[k]]
    # the last lower column (a row without one: its diagonal times zero), as selects: a
    # branch here makes numba count references to every array, per row (6x the time)
    q = d - 1 if d > k0 else d
    j = indices[q]
    v = xp if j == i - 1 or d == k0 else x[j]  # (never x_i: not swept yet, maybe NaN)
    a = data[q] if d > k0 else 0.0
    return (s - a * v) * dinv[i]


@nb.njit(cache=True)
def upper_residual_restrict(indptr, indices, data, diag_pos, dinv, x, n, agg, rc, nc):
    """rc = R (b - A x) right after :func:`gs_from_zero` (and the exchange of x): there
    b - (L + D_l1) x = 0, so b - A x = (D_l1 - D) x - U x reads the upper half of each row
    (ghost columns included) and no residual vector is written."""
    for i in range(nc):
        rc[i] = 0.0
    for i in range(n):
        d = diag_pos[i]
        s = (1.0 / dinv[i] - data[d]) * x[i]
        for k in range(d + 1, indptr[i + 1]):
            s -= data[k] * x[indices[k]]
        rc[agg[i]] += s


@nb.njit(cache=True)
def gs_from_zero_restrict(indptr, indices, data, diag_pos, dinv, b, x, n, agg, rc, nc):
    """:func:`gs_from_zero` and :func:`upper_residual_restrict` in one pass, for a level
    without ghost columns (l1_i = a_ii, so b - A x = -U x): a row's residual is taken as
    soon as the sweep has passed its last column, a bandwidth behind (a 64^3 cube's 4 096
    rows: its rows are still in the core's cache), so the matrix streams in once."""
    for i in range(nc):
        rc[i] = 0.0
    j = 0  # the next row whose residual is due
    xp = 0.0
    for i in range(n):
        xp = _from_zero_row(indptr, indices, data, diag_pos, dinv, b, x, i, xp)
        x[i] = xp
        while j <= i and indices[indptr[j + 1] - 1] <= i:
            s = 0.0
            for k in range(diag_pos[j] + 1, indptr[j + 1]):
                s -= data[k] * x[indices[k]]
            rc[agg[j]] += s
            j += 1


@nb.njit(cache=True)
def residual_restrict(indptr, indices, data, x, b, n, agg, rc, nc):
    """rc = R (b - A x) without writing the residual."""
    for i in range(nc):
        rc[i] = 0.0
    for i in range(n):
        s = b[i]
        for k in range(indptr[i], indptr[i + 1]):
            s -= data[k] * x[indices[k]]
        rc[agg[i]] += s


@nb.njit(cache=True)
def spmv(indptr, indices, data, x, y):
    """Serial y = A x: coarse levels are too small to amortise a threaded launch."""
    for i in range(len(indptr) - 1):
        s = 0.0
        for k in range(indptr[i], indptr[i + 1]):
            s += data[k] * x[indices[k]]
        y[i] = s


@nb.njit(cache=True)
def residual(indptr, indices, data, x, b, r):
    for i in range(len(indptr) - 1):
        s = b[i]
        for k in range(indptr[i], indptr[i + 1]):
            s -= data[k] * x[indices[k]]
        r[i] = s


@nb.njit(cache=True)
def restrict(agg, r, n, rc, nc):
    for i in range(nc):
        rc[i] = 0.0
    for i in range(n):
        rc[agg[i]] += r[i]


@nb.njit(cache=True)
def prolong_add(agg, e, n, x):
    for i in range(n):
        x[i] += e[agg[i]]


@nb.njit(cache=True)
def lu_solve(perm_r, perm_c, lp, li, lx, up, ui, ux, ud, pinned, b, x, y):
    """x = A^-1 b from SuperLU's factors of the coarsest level, Pr A Pc = L U (L unit lower,
    U upper, both CSC; ``ud`` U's diagonal); ``y`` scratch of n.  The pinned unknown of a
    singular matrix (its row and column replaced by the identity) is set to zero.  Without
    U (``up`` empty: a Cholesky's, :mod:`.cholesky`) U = diag(ud) L', read from L."""
    if len(up) == 0:
        _symmetric_solve(perm_r, lp, li, lx, ud, pinned, b, x, y)
        return
    n = len(perm_r)
    for i in range(n):
        y[perm_r[i]] = b[i]
    for j in range(n):
        yj = y[j]
        for k in range(lp[j], lp[j + 1]):
            if li[k] > j:
                y[li[k]] -= lx[k] * yj
    for j in range(n - 1, -1, -1):
        yj = y[j] / ud[j]
        y[j] = yj
        for k in range(up[j], up[j + 1]):
            if ui[k] < j:
                y[ui[k]] -= ux[k] * yj
    for i in range(n):
        x[i] = y[perm_c[i]]
    if pinned >= 0:
        x[pinned] = 0.0


@nb.njit(cache=True)
def _symmetric_solve(perm, lp, li, lx, ud, pinned, b, x, y):
    """``lu_solve`` for P A P' = L D L' (L unit lower, CSC with each column's diagonal
    first; D = ``ud``): the backward solve with U = D L' reads L's columns as U's rows, so
    a visit streams one factor, not two (the 62^3 cavity's 257-row level: 32 against
    54 us from a cold cache)."""
    n = len(perm)
    for i in range(n):
        y[perm[i]] = b[i]
    for j in range(n):
        yj = y[j]
        for k in range(lp[j] + 1, lp[j + 1]):
            y[li[k]] -= lx[k] * yj
    for j in range(n - 1, -1, -1):
        s = y[j] / ud[j]
        for k in range(lp[j] + 1, lp[j + 1]):
            s -= lx[k] * y[li[k]]
        y[j] = s
    for i in range(n):
        x[i] = y[perm[i]]
    if pinned >= 0:
        x[pinned] = 0.0


@nb.njit(cache=True)
def _perm_of_swaps(piv, perm_r):
    """LAPACK's row interchanges (row i swapped with piv[i], in turn) as ``lu_solve``'s
    perm_r: the row of P A that row i of A becomes."""
    n = len(piv)
    rowof = np.arange(n)  # rowof[k]: the row of A now at position k
    for i in range(n):
        p = piv[i]
        t = rowof[i]
        rowof[i] = rowof[p]
        rowof[p] = t
    for k in range(n):
        perm_r[rowof[k]] = k


@nb.njit(cache=True)
def _kdots1(c, v, b, n):
    """c.v, c.b, b.b, v.v, b.v for the first K-cycle step."""
    s = np.zeros(5)
    for i in range(n):
        s[0] += c[i] * v[i]
        s[1] += c[i] * b[i]
        s[2] += b[i] * b[i]
        s[3] += v[i] * v[i]
        s[4] += b[i] * v[i]
    return s


@nb.njit(cache=True)
def _kdots2(d, v, w, r2, n):
    s = np.zeros(3)
    for i in range(n):
        s[0] += d[i] * v[i]
        s[1] += d[i] * w[i]
        s[2] += d[i] * r2[i]
    return s


@nb.njit(cache=True)
def _axpy_into(out, b, a, v, n):
    for i in range(n):
        out[i] = b[i] - a * v[i]


@nb.njit(cache=True)
def _combine(x, a, c, b, d, n):
    for i in range(n):
        x[i] = a * c[i] + b * d[i]


@nb.njit(cache=True)
def _scale_into(x, a, c, n):
    for i in range(n):
        x[i] = a * c[i]


# -- structure ----------------------------------------------------------------------------------

def galerkin_pattern(indptr, indices, n_rows, ragg, cagg, nc_rows, nc_cols):
    """CSR structure of P^T A P for piecewise-constant P, and each fine entry's coarse slot.

    ``cagg[j] < 0`` drops column j (used to build a rank's owned block only).
    """
    mptr, mem = _members(np.asarray(ragg, dtype=np.int64)[:n_rows], int(nc_rows))
    cip, cix, slot = _galerkin_structure(indptr, indices, mptr, mem,
                                         np.asarray(cagg, dtype=np.int64), int(nc_rows),
                                         int(nc_cols))
    return (cip.astype(IDX), cix.astype(IDX), _diagonal_positions(cip, cix, nc_rows), slot)


def _diagonal_positions(indptr, indices, n):
    diag_pos = _find_diagonal(indptr, indices, n)
    if n and diag_pos.min() < 0:
        raise RuntimeError("AMG: a coarse row lost its diagonal")
    return diag_pos


def pairwise(indptr, indices, data, diag_pos, n, beta=STRENGTH, key=None, kappa=KAPPA):
    """One pass of pairwise matching (see ``_match``), rows visited in ``key`` order."""
    order = np.arange(n) if key is None else np.argsort(key, kind="stable")
    key = np.arange(n) if key is None else np.asarray(key, dtype=np.int64)
    ident = np.arange(n + 1, dtype=np.int64)
    absrow = _abs_offdiag(indptr, indices, data, diag_pos, n)
    return _match(indptr, indices, data, diag_pos, n, order, key, ident, ident, indptr,
                  indices, data, diag_pos, absrow, beta, TIE, kappa)


def _aggregate(indptr, indices, data, diag_pos, n, key=None, order=None):
    """Double pairwise aggregation of the owned block: aggregates of up to four rows, visited
    in ``key`` order (row order if None; ``order``: the argsort of ``key`` if known),
    numbered in the order they are created."""
    absrow = _abs_offdiag(indptr, indices, data, diag_pos, n)
    if key is None:
        key = order = np.arange(n)
    elif order is None:
        order = np.argsort(key, kind="stable")
    ident = np.arange(n + 1, dtype=np.int64)
    agg1, n1 = _match(indptr, indices, data, diag_pos, n, order, np.asarray(key, np.int64),
                      ident, ident, indptr, indices, data, diag_pos, absrow, STRENGTH, TIE,
                      KAPPA)
    del ident
    ncols = int(indices.max(initial=0)) + 1 if len(indices) else 1
    cagg = agg1  # no ghost columns (a whole level on rank 0): the aggregates as they are
    if ncols > n:
        cagg = np.full(ncols, -1, dtype=np.int64)
        cagg[:n] = agg1  # ghost columns dropped: pairs are made of owned rows
    mptr, mem = _members(agg1, n1)
    ip1, ix1, slot1 = _galerkin_structure(indptr, indices, mptr, mem, cagg, n1, n1)
    del cagg
    dp1 = _diagonal_positions(ip1, ix1, n1)
    d1 = np.zeros(len(ix1))
    galerkin_refresh(slot1, data, d1)
    del slot1  # (pass 1's coarse values are made once)
    seq = np.arange(n1)  # pass-1 aggregates were created in key order
    agg2, n2 = _match(ip1.astype(IDX), ix1.astype(IDX), d1, dp1, n1, seq, seq, mptr, mem,
                      indptr, indices, data, diag_pos, absrow, STRENGTH, TIE, KAPPA)
    return agg2[agg1], n2


# -- aggregates spanning ranks ------------------------------------------------------------------

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


class Level:
    """One level: a matrix on owned rows (+ ghost columns), its smoother and work vectors."""

    def __init__(self, indptr, indices, data, diag_pos, n, ncols, ex, red):
        self.indptr, self.indices, self.data, self.diag_pos = indptr, indices, data, diag_pos
        self.n, self.ncols, self.ex, self.red = n, ncols, ex, red
        self.next = None  # SimpleNamespace(agg, nc, ncols, slot, share, xfer, redundant)
        self.rows = n  # global rows (set by the hierarchy for distributed levels)
        self.calls = 0  # halo exchanges made (or, serially, that a parallel run would make)
        self.compiled_calls = 0  # of those, made from compiled code
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
        l1_inverse_rows(self.indptr, self.indices, self.data, self.diag_pos, self.ghost_rows,
                        self.n, self.dinv)
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


class AMG:
    """Aggregation AMG preconditioner for a DistMatrix; ``setup`` once, ``refresh`` per step.

    ``aggregation="global"`` makes the aggregates those of a serial run whatever the
    partition (decided on rank 0, see the module docstring); ``"local"`` aggregates each
    rank's rows on their own (no rank-0 step, aggregates never span ranks, more iterations
    on jagged partitions).

    ``red`` is the run's Reducer: the distributed levels reduce on its communicator and
    every level counts into its ``stats`` the reductions a parallel run makes (see
    ``_serial_next``).  ``dims``: the problem's dimensions, 2 for a one-cell-thick mesh
    (the coarse levels then end at ``COARSEST_2D`` rows); None: judged from the stencil."""

    def __init__(self, A, lmesh, red: Reducer, strategy: str = "packed", cycle: str | None = None,
                 timers=NULL_TIMERS, aggregation: str = AGGREGATION,
                 gather_below: int | None = None, work: np.ndarray | None = None,
                 dims: int | None = None):
        if aggregation not in ("global", "local"):
            raise ValueError(f"unknown AMG aggregation {aggregation!r} (global or local)")
        self.A = A
        self.lmesh = lmesh
        self.red = red
        self.timers = timers  # "amg_gathered": the levels every rank of a parallel run repeats
        self.first_redundant = None  # index of the first such level
        self.allgathers = 0  # visits to it: one allgather of its right-hand side each
        self.refreshes = 0
        self.comm = red.comm  # handed to the transfer plans of the distributed levels
        self.cycle_kind = CYCLE if cycle is None else cycle
        if self.cycle_kind not in ("K", "A", "V", "auto"):
            raise ValueError(f"unknown AMG cycle {cycle!r} (K, A, V or auto)")
        self.amli = amli_steps(AMLI_LMIN)
        self.aggregation = aggregation
        couplings = self._couplings()
        # a 2D problem (the mesh's solved directions; without them, a 2D stencil's couplings:
        # a tetrahedral mesh's 4 would pass for 2D there)
        planar = dims <= 2 if dims is not None else couplings <= AMLI_COUPLINGS
        self.coarsest = COARSEST_2D if planar else COARSEST
        # replicate below this many global rows: the network decides where that pays (a
        # slow one makes a distributed level's exchanges dearer than the whole level's work)
        if gather_below is None:
            gather_below = COARSEST_2D if planar else GATHER_BELOW
        self.gather_below = int(gather_below)
        self._halo = lambda topo, c: halo.make(strategy, topo, c)
        self.levels: list[Level] = []
        self.root = red.rank == 0
        self._setup()
        self.block = self._vectors(work)
        if self.cycle_kind == "auto":
            self.cycle_kind = "A" if couplings > AMLI_COUPLINGS else "K"

    def _couplings(self) -> float:
        """Off-diagonal entries per row of the top level, over all ranks."""
        p = self.A.pattern
        nnz, rows = len(p.indices), p.n_rows
        if self.red.parallel:
            nnz, rows = transfer.total(self.comm, nnz), transfer.total(self.comm, rows)
        return nnz / max(rows, 1) - 1.0

    # -- set-up ---------------------------------------------------------------------------------
    def _setup(self):
        A = self.A
        p = A.pattern
        top = Level(p.indptr, p.indices, A.data, p.diag_pos, p.n_rows, p.n_cols, A.ex,
                    self.red)
        top.topo = self.lmesh
        if self.red.parallel:  # global ids of the columns; the serial order is the mesh's
            top.global_cols = np.asarray(self.lmesh.global_cells, dtype=np.int64)
            top.key = top.global_cols[: p.n_rows]
        self.levels = [top]
        lev = top
        while True:
            distributed = lev.red.parallel
            n_global = transfer.total(self.comm, lev.n) if distributed else lev.n
            lev.rows = n_global
            # the top level is always coarsened once, as a distributed one must be, so that
            # small problems get the same hierarchy on any number of ranks; levels a parallel
            # run distributes are coarsened however small (GATHER_BELOW below COARSEST)
            if not distributed and n_global <= self.coarsest and self.first_redundant is not None:
                break
            if distributed:  # a distributed level always hands over to a coarser one
                plan = self._plan(lev)
                last = (plan.nc_global < self.gather_below
                        or plan.nc_global * MIN_RATIO > n_global)
                nxt = self._distributed_next(lev, plan, halo=not last)
                if last:  # every rank gets the whole coarse level from here on
                    self.first_redundant = len(self.levels)
                    nxt = self._replicate(nxt)
            else:
                agg, nc = _aggregate(lev.indptr, lev.indices, lev.data, lev.diag_pos, lev.n,
                                     lev.key)
                if nc * MIN_RATIO > n_global:  # stalled
                    break
                nxt = self._serial_next(lev, agg, nc)
            self.levels.append(nxt)
            lev = nxt
        self._finish()

    def _serial_next(self, lev, agg, nc):
        cagg = agg.astype(np.int64)
        ip, ix, dp, slot = galerkin_pattern(lev.indptr, lev.indices, lev.n, agg, cagg, nc, nc)
        # a serial run counts the reductions a parallel run would make on this level
        serial_run = not self.red.parallel
        would_distribute = (serial_run and self.first_redundant is None
                            and nc >= self.gather_below)
        if serial_run and not would_distribute and self.first_redundant is None:
            self.first_redundant = len(self.levels)
        nxt = Level(ip, ix, np.zeros(len(ix)), dp, nc, nc, None,
                    self_reducer(self.red.stats if would_distribute else None))
        lev.next = SimpleNamespace(agg=agg, nc=nc, ncols=nc, slot=slot, share=None, xfer=None,
                                   redundant=None)
        galerkin_refresh(slot, lev.data, nxt.data)
        return nxt

    def _plan(self, lev):
        """Aggregates of a distributed level: for each owned row, the global id of its
        aggregate (aggregates numbered rank by rank, ``offsets``), and each owned
        aggregate's key (its first row's key: the serial order on the next level)."""
        comm, red = self.comm, self.red
        size, me = red.size, red.rank
        if self.aggregation == "local":
            agg, nc = _aggregate(lev.indptr, lev.indices, lev.data, lev.diag_pos, lev.n)
            offsets = np.concatenate([[0], np.cumsum(transfer.allgather(comm, nc))]
                                     ).astype(np.int64)
            return SimpleNamespace(cgid=offsets[me] + agg, offsets=offsets, ckeys=None,
                                   nc_global=int(offsets[-1]))
        # global: rank 0 matches the whole level's graph in the serial order
        n = lev.n
        nrows = np.asarray(transfer.allgather(comm, n), dtype=np.int64)
        nnz = red.gather(len(lev.indices), root=0)
        gid = lev.global_cols[:n]
        key = gid if lev.key is None else np.asarray(lev.key, dtype=np.int64)
        total = int(nrows.sum())
        # rank 0 holds the whole level, one of its memory peaks on several ranks: the
        # entries' global columns travel as 32-bit ids where they fit and become gathered
        # rows at once, before the values arrive; row lengths and each diagonal's place in
        # its row as 32-bit; every gathered array is dropped once it is used
        col_t = IDX if total <= np.iinfo(IDX).max else np.int64
        grc, goff, grow, gkey = (transfer.gatherv(comm, a, nrows) for a in (
            np.diff(lev.indptr).astype(np.int32),
            (lev.diag_pos - lev.indptr[:n]).astype(np.int32), gid, key))
        gcols = transfer.gatherv(comm, np.take(lev.global_cols.astype(col_t), lev.indices),
                                 nnz)
        cg_rows = ckey = ix = order = ip = gdp = None
        if self.root:
            row = np.empty(total, dtype=np.int64)  # global id -> gathered row
            row[grow] = np.arange(total)
            ix = row.astype(IDX)[gcols]
            order = row if np.array_equal(gkey, grow) else np.argsort(gkey, kind="stable")
            del row, grow
            ip = np.zeros(total + 1, dtype=np.int64)
            np.cumsum(grc, out=ip[1:])
            gdp = ip[:-1] + goff  # the diagonals' places among all entries
            ip = ip.astype(IDX)
            del grc, goff
        del gcols
        gdata = transfer.gatherv(comm, lev.data, nnz)
        if self.root:
            agg, nc = _aggregate(ip, ix, gdata, gdp, total, gkey, order)
            del ip, ix, gdata, gdp
            seed = _first_rows(agg, order, nc)  # an aggregate belongs to its first row's rank
            owner = np.repeat(np.arange(size), nrows)[seed]
            offsets = np.concatenate([[0], np.cumsum(np.bincount(owner, minlength=size))])
            by_owner = np.argsort(owner, kind="stable")
            cgid = np.empty(nc, dtype=np.int64)
            cgid[by_owner] = np.arange(nc)  # rank by rank, in creation order within a rank
            cg_rows = cgid[agg]
            ckey = np.empty(nc, dtype=np.int64)
            ckey[cgid] = gkey[seed]
        offsets = np.asarray(red.bcast(offsets if self.root else None, root=0), np.int64)
        counts = np.diff(offsets)
        cgid = np.empty(n, dtype=np.int64)
        transfer.RootPieces(comm, nrows).scatter(cg_rows, cgid)
        my_keys = np.empty(int(counts[me]), dtype=np.int64)
        transfer.RootPieces(comm, counts).scatter(ckey, my_keys)
        return SimpleNamespace(cgid=cgid, offsets=offsets, ckeys=my_keys,
                               nc_global=int(offsets[-1]))

    def _distributed_next(self, lev, plan, halo=True):
        """Coarse level of a distributed level from its plan: owned aggregates (rows), the
        ghost aggregates its rows couple to or that hold some of this rank's cells, the
        partial Galerkin rows sent to the owners of the latter, and the halo pattern (not if
        ``halo`` is false: a level about to be replicated never exchanges)."""
        comm, me = self.comm, self.red.rank
        n = lev.n
        offsets = plan.offsets
        off = int(offsets[me])
        nc = int(offsets[me + 1]) - off
        cg = np.zeros(max(lev.ncols, 1))  # global coarse id of every local fine column
        cg[:n] = plan.cgid
        lev.exchange(cg)
        cg = cg[: lev.ncols].astype(np.int64)
        foreign = (cg < off) | (cg >= off + nc)
        used, their_rows, their_entries = _entries_by_owner(lev.indptr, lev.indices,
                                                            foreign[:n], lev.ncols)
        sent, inbox = _share_rows(comm, offsets, cg[their_rows],
                                  cg[lev.indices[their_entries]], their_entries)
        received = np.concatenate(inbox)
        rrow, rcol = received // offsets[-1], received % offsets[-1]
        members_elsewhere = np.unique(cg[:n][foreign[:n]])
        ghost = np.unique(np.concatenate([cg[used & foreign],
                                          rcol[(rcol < off) | (rcol >= off + nc)],
                                          members_elsewhere]))

        def local_col(g):
            return np.where((g >= off) & (g < off + nc), g - off,
                            nc + np.searchsorted(ghost, g))

        ncols = nc + len(ghost)
        col = local_col(cg)
        # owned rows' entries, then one pseudo-row per received entry (pseudo-column
        # lev.ncols + t standing for its coarse column)
        nnz, nr = len(lev.indices), len(received)
        mptr, mem = _members(np.concatenate([np.where(foreign[:n], -1, cg[:n] - off),
                                             rrow - off]), nc)
        ip, ix, slot = _galerkin_structure(
            np.concatenate([lev.indptr.astype(np.int64), nnz + np.arange(1, nr + 1)]),
            np.concatenate([lev.indices.astype(np.int64), lev.ncols + np.arange(nr)]),
            mptr, mem, np.concatenate([col, local_col(rcol)]), nc, ncols)
        per_rank = np.split(slot[nnz:], np.cumsum([len(b) for b in inbox])[:-1])
        sources = [q for q in range(self.red.size) if len(inbox[q])]
        share = None
        if sent is not None or sources:
            none = np.zeros(0, dtype=np.int64)
            share = _RowShare(comm, sent.entries if sent else none, sent.slot if sent else none,
                              sent.dests if sent else [], sent.bounds if sent else [0],
                              sources, [per_rank[q] for q in sources])
        nxt = Level(ip.astype(IDX), ix.astype(IDX), np.zeros(len(ix)),
                    _diagonal_positions(ip, ix, nc), nc, ncols,
                    None, self.red)
        if halo:
            nxt.topo = _coarse_halo(comm, offsets, ghost)
            nxt.ex = self._halo(nxt.topo, comm)
        nxt.offset = off
        nxt.global_cols = np.concatenate([off + np.arange(nc), ghost]).astype(np.int64)
        nxt.key = plan.ckeys
        lev.next = SimpleNamespace(agg=col[:n], nc=nc, ncols=ncols, slot=slot[:nnz],
                                   share=share,
                                   xfer=_transfers(comm, offsets, members_elsewhere, local_col),
                                   redundant=None)
        self._galerkin(lev.next, lev.data, nxt.data)
        return nxt

    @staticmethod
    def _galerkin(nx, fine, coarse):
        galerkin_refresh(nx.slot, fine, coarse)
        if nx.share is not None:
            nx.share.refresh(fine, coarse)

    def _replicate(self, dist):
        """The whole of a distributed level on every rank, as one serial level with rows in
        global order (rank by rank), and the plans that keep it up to date: its coefficients
        at each refresh and its right-hand side at each visit, one allgather each."""
        comm = self.comm
        cols = dist.global_cols[dist.indices.astype(np.int64)]
        rows = np.repeat(np.arange(dist.n), np.diff(dist.indptr).astype(np.int64))
        perm = np.lexsort((cols, rows))  # each row's entries by global column
        nnz = np.asarray(transfer.allgather(comm, len(cols)), dtype=np.int64)
        nrows = np.asarray(transfer.allgather(comm, dist.n), dtype=np.int64)
        gcols = transfer.allgatherv(comm, cols[perm], nnz)
        rc = transfer.allgatherv(comm, np.diff(dist.indptr).astype(np.int64), nrows)
        keyed = all(transfer.allgather(comm, dist.key is not None))
        n = int(nrows.sum())
        ip = np.concatenate([[0], np.cumsum(rc)]).astype(IDX)
        dp = np.flatnonzero(gcols == np.repeat(np.arange(n), rc)).astype(np.int64)
        lev = Level(ip, gcols.astype(IDX), np.zeros(len(gcols)), dp, n, n, None,
                    self_reducer())
        if keyed:  # go on coarsening in the serial order
            lev.key = transfer.allgatherv(comm, np.asarray(dist.key, np.int64), nrows)
        offset = int(np.sum(nrows[: self.red.rank]))
        self.levels[-1].next.redundant = SimpleNamespace(
            rhs=transfer.AllPieces(comm, nrows), offset=offset, n=dist.n,
            cols=dist.global_cols.astype(np.int64), rc=np.zeros(max(dist.ncols, 1)),
            coefs=transfer.AllPieces(comm, nnz), local=dist, perm=perm,
            buf=np.zeros(len(cols)))
        self._replicate_data(self.levels[-1].next.redundant, lev)
        return lev

    @staticmethod
    def _replicate_data(rd, target):
        """This rank's rows of the replicated level (refreshed in ``rd.local``) to all."""
        np.take(rd.local.data, rd.perm, out=rd.buf)
        rd.coefs.allgather(rd.buf, target.data)

    def _finish(self):
        """Smoother diagonals on every level; the coarsest level's factorisation.  The work on
        the redundant levels is timed as "amg_gathered": every rank repeats it."""
        fr = self._redundant_from()
        for i, lev in enumerate(self.levels):
            lev.krylov = lev.rows >= KRYLOV_ABOVE and i <= KRYLOV_LEVELS
        for i, lev in enumerate(self.levels[:fr]):
            lev.smoother_setup()
            if RESWEEP and lev.cut is None and (i == 0 or RESWEEP_COARSE
                                                and lev.rows >= RESWEEP_ABOVE):
                lev.cut = lev.ghost_rows
        with self.timers("amg_gathered") if fr < len(self.levels) else NULL_PHASE:
            for lev in self.levels[fr:]:
                lev.smoother_setup()
            self._factor_coarsest()

    def _vectors(self, work):
        """The levels' work vectors: the top level's residual alone (its right-hand side
        and iterate are the caller's; ``solve`` makes the K-cycle's others if it needs
        them), every coarser level's eight as slices of the rows of one (8, L) block,
        returned (the compiled solve uses it as it is).  They live in ``work`` where they
        fit: scratch that nothing else touches while a solve runs (the momentum solver's
        workspace), since every cycle writes a vector before it reads it."""
        top = max(self.levels[0].ncols, 1)
        sizes = [max(lev.ncols, 1) for lev in self.levels[1:]]
        need = top + len(VECTORS) * sum(sizes)
        buf = work[:need] if work is not None and len(work) >= need else np.zeros(need)
        self.levels[0].r = buf[:top]
        block = buf[top:].reshape(len(VECTORS), sum(sizes))
        off = 0
        for lev, m in zip(self.levels[1:], sizes, strict=True):
            for k, name in enumerate(VECTORS):
                setattr(lev, name, block[k, off:off + m])
            off += m
        return block

    def _redundant_from(self):
        """Index of the first level every rank holds whole (len(levels) if none)."""
        return len(self.levels) if self.first_redundant is None else self.first_redundant

    def _factor_coarsest(self):
        """Factors of the coarsest level, as arrays for ``lu_solve``, made at a refresh (a
        Cholesky's once an entry has moved by ``REFACTOR_ABOVE`` since they were made); a
        singular (all-Neumann) matrix gets its last unknown pinned.  A sparse Cholesky
        (:mod:`.cholesky`) where the level is positive definite, as it is for a pressure
        Laplacian; else an LU: up to ``DENSE_LU`` rows a dense LU (LAPACK): 46 rows in 3D,
        40 us against 370 us for the sparse path, whose set-up is mostly Python; above,
        sparse (1000 rows in 2D: 1.6 ms to factorise, 50 us to solve, where a K-cycle below
        that level cost 175 us per visit)."""
        lev = self.levels[-1]
        if CHOLESKY and lev.chol is not False:
            if lev.chol is None:
                lev.chol = Cholesky(lev)
            if lev.chol.factor(lev, REFACTOR_ABOVE):
                return
            lev.chol = False  # not positive definite after all: an LU from now on
        if lev.n <= DENSE_LU:
            self._factor_dense(lev)
            return
        n = lev.n
        rows = np.repeat(np.arange(n), np.diff(lev.indptr).astype(np.int64))
        cols = lev.indices.astype(np.int64)
        data = lev.data.copy()
        diag = np.zeros(n)
        np.add.at(diag, rows[rows == cols], data[rows == cols])
        rowsum = np.abs(np.bincount(rows, weights=data, minlength=n)).max()
        lev.pinned = -1
        if rowsum <= 1e-10 * np.abs(diag).max():  # singular: pin the last unknown
            lev.pinned = n - 1
            data[(rows == lev.pinned) | (cols == lev.pinned)] = 0.0
            rows = np.append(rows, lev.pinned)
            cols = np.append(cols, lev.pinned)
            data = np.append(data, 1.0)
        import scipy.sparse as sp  # here only: a run without AMG never loads scipy.sparse
        import scipy.sparse.linalg as spla

        A = sp.csc_matrix((data, (rows, cols)), shape=(n, n))
        f = spla.splu(A, permc_spec="COLAMD")
        L, U = f.L.tocsc(), f.U.tocsc()
        lev.lu = SimpleNamespace(
            perm_r=f.perm_r.astype(np.int64), perm_c=f.perm_c.astype(np.int64),
            lp=L.indptr.astype(np.int64), li=L.indices.astype(IDX), lx=L.data,
            up=U.indptr.astype(np.int64), ui=U.indices.astype(IDX), ux=U.data,
            ud=U.diagonal(), y=np.zeros(n))

    @staticmethod
    def _factor_dense(lev):
        n = lev.n
        if lev.dense is None:  # the fixed pattern, once
            rows = np.repeat(np.arange(n), np.diff(lev.indptr).astype(np.int64))
            lc, lr = np.triu_indices(n)  # L by columns: rows j..n-1 of column j
            uc, ur = np.tril_indices(n)  # U by columns: rows 0..j of column j
            lev.dense = SimpleNamespace(
                rows=rows, cols=lev.indices.astype(np.int64), m=np.zeros((n, n)),
                lr=lr, lc=lc, ur=ur, uc=uc,
                lu=SimpleNamespace(
                    perm_r=np.zeros(n, dtype=np.int64), perm_c=np.arange(n, dtype=np.int64),
                    lp=np.concatenate([[0], np.cumsum(n - np.arange(n))]).astype(np.int64),
                    li=lr.astype(IDX), lx=np.zeros(len(lr)),
                    up=np.concatenate([[0], np.cumsum(np.arange(1, n + 1))]).astype(np.int64),
                    ui=ur.astype(IDX), ux=np.zeros(len(ur)), ud=np.zeros(n), y=np.zeros(n)))
        d = lev.dense
        m = d.m
        m[:] = 0.0
        m[d.rows, d.cols] = lev.data
        lev.pinned = -1
        if np.abs(m.sum(axis=1)).max() <= 1e-10 * np.abs(np.diagonal(m)).max():
            lev.pinned = n - 1
            m[n - 1, :] = 0.0
            m[:, n - 1] = 0.0
            m[n - 1, n - 1] = 1.0
        from scipy.linalg import lu_factor  # here only: runs without AMG never load it

        lu, piv = lu_factor(m, overwrite_a=True, check_finite=False)
        f = d.lu
        _perm_of_swaps(piv, f.perm_r)
        np.take(lu.ravel(), d.lr * n + d.lc, out=f.lx)  # (diagonal entries unused: unit L)
        np.take(lu.ravel(), d.ur * n + d.uc, out=f.ux)
        f.ud[:] = np.diagonal(lu)
        lev.lu = f

    def profile(self) -> dict:
        """Levels, their global rows and exchanges, for profile.json (the performance model
        prices the exchanges of distributed levels; serial runs count those they would
        make), the rows and entries of the redundant level with its allgathers (one per
        visit) and refreshes (one allgather of its entries each).  The same on every rank."""
        fr = self._redundant_from()
        rd = self.levels[fr] if fr < len(self.levels) else None
        return {"levels": [{"index": i, "rows": int(lev.rows), "distributed": i < fr,
                            "exchanges": int(lev.calls),
                            "compiled_exchanges": int(lev.compiled_calls)}
                           for i, lev in enumerate(self.levels)],
                "gathered_rows": int(rd.rows) if rd is not None else 0,
                "gathered_nnz": int(len(rd.indices)) if rd is not None else 0,
                "allgathers": int(self.allgathers), "refreshes": int(self.refreshes),
                "factors_reused": int(self._chol().reused) if self._chol() else 0}

    def _chol(self):
        """The coarsest level's Cholesky, or None (not yet made, or an LU instead)."""
        return self.levels[-1].chol or None

    def refactor_next(self) -> None:
        """Factor the coarsest level afresh at the next refresh, as a restart from a
        checkpoint taken now will (so that the two runs go on alike)."""
        if self._chol():
            self._chol().refactor_next()

    def coarse_exchangers(self):
        """The halo exchangers of the distributed coarse levels (their counters count too)."""
        return [lev.ex for lev in self.levels[1:] if lev.ex is not None]

    # -- refresh ------------------------------------------------------------------------------
    def refresh(self):
        """New fine coefficients, same pattern: recompute coarse ones (the redundant level's
        by one allgather of its entries), refactor the coarsest."""
        levels = self.levels
        fr = self._redundant_from()
        self.refreshes += 1
        for i, lev in enumerate(levels[:fr]):
            nx = lev.next
            if nx is None:
                break
            if nx.redundant is None:
                self._galerkin(nx, lev.data, levels[i + 1].data)
            else:
                self._galerkin(nx, lev.data, nx.redundant.local.data)
                self._replicate_data(nx.redundant, levels[i + 1])
        with self.timers("amg_gathered") if fr < len(levels) else NULL_PHASE:
            for lev, nxt in zip(levels[fr:-1], levels[fr + 1:], strict=True):
                self._galerkin(lev.next, lev.data, nxt.data)
        self._finish()

    # -- cycles -------------------------------------------------------------------------------
    def apply(self, r, z):
        """z = M r (owned entries; z's ghost entries are scratch)."""
        if self.levels[0].next is None:  # the whole problem is the coarsest level
            self._solve(0, r, z)
        else:
            self._cycle(0, r, z)
        return z

    def solve(self, b, x, tol, max_iter, ws=None):
        """Standalone AMG: x += K(b - A x), K a K-cycle from the top level, until
        ||b - A x|| <= tol ||b||.  Usually slower than ``krylov.fcg`` with ``apply`` as
        preconditioner; there for comparison and for callers without a Krylov method."""
        from .krylov import SolveInfo, _axpy, _dot2

        A, n = self.A, self.A.pattern.n_rows
        red = self.levels[0].red
        r = np.zeros(A.pattern.n_cols) if ws is None else ws[0]
        z = np.zeros(A.pattern.n_cols) if ws is None else ws[1]
        top = self.levels[0]
        if top.c is None:  # the top level's K-cycle vectors (a preconditioner needs none)
            top.c, top.d, top.v, top.w, top.r2 = (np.zeros(len(top.r)) for _ in range(5))
        info = SolveInfo()
        for it in range(max_iter + 1):
            A.residual(x, b, r)
            rr, bb = red.sum(*_dot2(r, r, b, b, n))
            res = np.sqrt(rr / bb) if bb > 0.0 else np.sqrt(rr)
            if it == 0:
                info.res0 = res
            info.res, info.iters = res, it
            if res <= tol:
                return info
            if it < max_iter:  # a K-cycle on the top level too: its own Krylov steps
                self._solve(0, r, z)
                _axpy(1.0, z, x, n)
        info.converged = False
        return info

    def _coarse(self, i, lev):
        """Solve for the next level's correction; returns it as a local coarse array (owned
        and ghost entries).  Into the redundant level: one allgather of the restricted
        right-hand side, the same solve on every rank, each rank reads its own entries."""
        nx = lev.next
        nxt = self.levels[i + 1]
        if i + 1 != self.first_redundant:
            self._solve(i + 1, nxt.b, nxt.x)
            return nxt.x
        self.allgathers += 1  # (serial runs: counted, as a parallel run would make it)
        rd = nx.redundant
        if rd is not None:
            rd.rhs.allgather(rd.rc[: rd.n], nxt.b)
        with self.timers("amg_gathered"):
            self._solve(i + 1, nxt.b, nxt.x)
        if rd is None:
            return nxt.x
        np.take(nxt.x, rd.cols, out=rd.rc[: len(rd.cols)])
        return rd.rc

    def _solve(self, i, b, x):
        """Approximate A_i x = b: direct on the coarsest level, else a K- or V-cycle."""
        lev = self.levels[i]
        if lev.lu is not None and lev.next is None:
            f = lev.lu
            lu_solve(f.perm_r, f.perm_c, f.lp, f.li, f.lx, f.up, f.ui, f.ux, f.ud, lev.pinned,
                     b, x, f.y)
        elif self.cycle_kind == "K" and lev.krylov:
            self._kcycle(i, b, x)
        elif self.cycle_kind == "A" and lev.krylov:
            self._amli(i, b, x)
        else:
            self._cycle(i, b, x)

    @staticmethod
    def _presmooth_restrict(lev, b, x, nx, rc):
        """Forward sweep from x = 0, then rc = R (b - A x): half rows where the pattern
        splits at the diagonal (without ghost columns in one pass), else whole rows."""
        n = lev.n
        args = (lev.indptr, lev.indices, lev.data)
        if lev.split and lev.ncols == n:
            gs_from_zero_restrict(*args, lev.diag_pos, lev.dinv, b, x, n, nx.agg, rc, nx.ncols)
            lev.exchange(x)
            return
        if lev.split:
            x[n:] = 0.0
            gs_from_zero(*args, lev.diag_pos, lev.dinv, b, x, n)
        else:
            x[:] = 0.0
            gs_sweep(*args, lev.diag_pos, lev.dinv, b, x, n, True)
        lev.exchange(x)
        if lev.cut is not None:
            gs_rows(*args, lev.diag_pos, lev.dinv, b, x, lev.cut, True)
            lev.exchange(x)
        if lev.split and lev.cut is None:
            upper_residual_restrict(*args, lev.diag_pos, lev.dinv, x, n, nx.agg, rc, nx.ncols)
        else:
            residual_restrict(*args, x, b, n, nx.agg, rc, nx.ncols)

    def _cycle(self, i, b, x):
        lev = self.levels[i]
        n = lev.n
        nx = lev.next
        rc = self.levels[i + 1].b if nx.redundant is None else nx.redundant.rc
        self._presmooth_restrict(lev, b, x, nx, rc)
        if nx.xfer is not None:  # partial sums of aggregates spanning ranks to their owners
            nx.xfer.accumulate(rc)
        e = self._coarse(i, lev)
        if nx.xfer is not None and nx.redundant is None:  # (replicated: all values at hand)
            nx.xfer.distribute(e)
        prolong_add(nx.agg, e, n, x)
        lev.exchange(x)
        gs_sweep(lev.indptr, lev.indices, lev.data, lev.diag_pos, lev.dinv, b, x, n, False)
        if lev.cut is not None:
            lev.exchange(x)
            gs_rows(lev.indptr, lev.indices, lev.data, lev.diag_pos, lev.dinv, b, x, lev.cut,
                    False)

    def _kcycle(self, i, b, x):
        """Two Krylov (flexible CG) steps on level i, each preconditioned by one cycle."""
        lev = self.levels[i]
        n = lev.n
        c, d, v, w, r2 = lev.c, lev.d, lev.v, lev.w, lev.r2
        self._cycle(i, b, c)
        lev.matvec(c, v)
        rho1, alpha1, bb, vv, bv = lev.red.sum(*_kdots1(c, v, b, n))
        if rho1 <= 0.0:
            x[:n] = c[:n]
            return
        a1 = alpha1 / rho1
        if bb - 2.0 * a1 * bv + a1 * a1 * vv <= KCYCLE_T * KCYCLE_T * bb:
            _scale_into(x, a1, c, n)
            return
        _axpy_into(r2, b, a1, v, n)
        self._cycle(i, r2, d)
        lev.matvec(d, w)
        gamma, beta, alpha2 = lev.red.sum(*_kdots2(d, v, w, r2, n))
        rho2 = beta - gamma * gamma / rho1
        if rho2 <= 0.0:
            _scale_into(x, a1, c, n)
            return
        _combine(x, a1 - gamma * alpha2 / (rho1 * rho2), c, alpha2 / rho2, d, n)


    def _amli(self, i, b, x):
        """Two Richardson steps on level i, each preconditioned by one cycle, with the fixed
        step lengths ``amli_steps``: the K-cycle's exchanges less one and no reduction."""
        lev = self.levels[i]
        n = lev.n
        a1, a2 = self.amli
        self._cycle(i, b, lev.c)
        lev.matvec(lev.c, lev.v)
        _axpy_into(lev.r2, b, a1, lev.v, n)
        self._cycle(i, lev.r2, lev.d)
        _combine(x, a1, lev.c, a2, lev.d, n)


def amli_steps(lmin: float) -> tuple[float, float]:
    """Step lengths of the degree-2 AMLI polynomial: x = a1 c + a2 M(b - a1 A c), c = M b,
    leaves the error p(M A) e with p(t) = (1 + T2(z(t))) / (1 + T2(z(0))), z mapping
    [lmin, 1] onto [1, -1] (Vassilevski): p = (1 - 2t / (1 + lmin))^2, two equal steps.
    p stays in [0, 1] on the spectrum of a symmetric cycle, so the level above sees a
    coarse solve that never overshoots; the scaled T2 itself dips below zero there, and
    with it 3D Poisson problems (32^3, 48^3) diverged for lmin <= 0.1."""
    step = 2.0 / (1.0 + lmin)
    return step, step
