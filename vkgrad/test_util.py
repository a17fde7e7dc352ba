"""vg.test_util: JAX's jax.test_util.check_grads.

    vg.test_util.check_grads(f, (x,), order=2, modes=("fwd", "rev"))
"""

from __future__ import annotations

from typing import Callable, Sequence

from vkgrad.transforms import check_grads as _check_grads


def check_grads(f: Callable, args: Sequence, order: int, modes=("fwd", "rev"), atol=None,
                rtol=None, eps=None) -> None:
    """f's derivatives up to `order` against central finite differences, in float64, in the
    given modes ("fwd": jvp, "rev": vjp); raises GradientCheckError on a mismatch. atol, rtol,
    eps None: vkgrad's defaults (1e-5, 1e-4, 1e-4)."""
    kw = {k: v for k, v in (("atol", atol), ("rtol", rtol), ("eps", eps)) if v is not None}
    _check_grads(f, tuple(args), order=order, modes=tuple(modes), **kw)


__all__ = ["check_grads"]
