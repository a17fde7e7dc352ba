"""vg.scipy.linalg: jax.scipy.linalg's Cholesky family: cholesky, cho_factor, cho_solve,
solve_triangular (vkgrad/numpy/linalg.py computes them; the other factorizations, LU, QR, SVD,
eigen, sqrtm, are not supported: docs/numpy.md)."""

from __future__ import annotations

import vkgrad.numpy as vnp
from vkgrad.errors import ArgumentError
from vkgrad.numpy.linalg import cholesky_lower, solve_triangular as _solve
from vkgrad.tracer.core import user_source

__all__ = ["cho_factor", "cho_solve", "cholesky", "solve_triangular"]


def cholesky(a, lower=False, overwrite_a=False, check_finite=True):
    """scipy's cholesky: the upper-triangular U with U^T U = a (lower=True: L with L L^T = a)."""
    c = cholesky_lower(a)
    return c if lower else vnp.swapaxes(c, -1, -2)


def cho_factor(a, lower=False, overwrite_a=False, check_finite=True):
    """(c, lower): cholesky(a, lower) and which triangle it is, for cho_solve."""
    return cholesky(a, lower), lower


def cho_solve(c_and_lower, b, overwrite_b=False, check_finite=True):
    """x with a x = b, from a's cho_factor: two triangular solves."""
    c, lower = c_and_lower
    lo = c if lower else vnp.swapaxes(c, -1, -2)      # L with L L^T = a
    return _solve(vnp.swapaxes(lo, -1, -2), _solve(lo, b, lower=True), lower=False)


def solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False,
                     debug=None, check_finite=True):
    """scipy's solve_triangular: x with a x = b (trans 0 or 'N'), a^T x = b (1, 'T' or 'C'),
    reading only a's lower (lower=True) or upper triangle."""
    if trans not in (0, 1, 2, "N", "T", "C"):
        raise ArgumentError(f"solve_triangular: trans is 0, 1, 2, 'N', 'T' or 'C', not {trans!r}",
                            source=user_source())
    if trans not in (0, "N"):
        a, lower = vnp.swapaxes(vnp.asarray(a), -1, -2), not lower
    return _solve(a, b, lower=lower, unit_diagonal=unit_diagonal)
