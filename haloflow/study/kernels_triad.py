"""STREAM's triad in numba: the memory bandwidth one core of this machine sustains, the
calibration figure of ``study.node``."""

from numba import njit


@njit(cache=True)
def triad(a, b, c, s):
    for i in range(a.shape[0]):
        a[i] = b[i] + s * c[i]
