"""vg.test_util: JAX's jax.test_util.check_grads, which also takes autograd's curried form.

    vg.test_util.check_grads(f, (x,), order=2, modes=("fwd", "rev"))     # JAX's
    vg.test_util.check_grads(f, argnum=0, modes=["rev"])(x, y)           # autograd's
    vg.test_util.combo_check(f, (0,))([x1, x2], axis=[None, 0])          # autograd's

autograd's form is told apart by its second argument: an argnum (an int, or a tuple or list of ints) or
nothing, where JAX's is the tuple of arguments (whose floats are differentiated: a tuple of
ints cannot be). scalar_close and check_equivalent are autograd's value comparisons.
"""

from __future__ import annotations

from itertools import product
from typing import Callable

import numpy as np

from vkgrad.transforms import check_grads as _check_grads
from vkgrad.tree_util import tree_leaves, tree_map, tree_structure

TOL = RTOL = 1e-6   # autograd's scalar_close tolerances
EPS = 1e-6         # autograd's finite-difference step


def check_grads(f: Callable, args=None, order: int | None = None, modes=("fwd", "rev"),
                atol=None, rtol=None, eps=None, *, argnum=None):
    """f's derivatives up to `order` against central finite differences, in float64, in the
    given modes ("fwd": jvp, "rev": vjp); raises GradientCheckError on a mismatch. atol, rtol,
    eps None: vkgrad's defaults (1e-5, 1e-4, 1e-4; eps 1e-6 in autograd's form).

    With `args` a tuple of arguments it checks now (JAX's form). With `args` an argnum, or
    left out, it returns a checker to call with the arguments (autograd's form: the argument(s)
    at argnum, 0 by default, are differentiated; order defaults to 2)."""
    kw = {k: v for k, v in (("atol", atol), ("rtol", rtol), ("eps", eps)) if v is not None}
    if args is None or _is_argnum(args):
        nums = args if argnum is None else argnum
        # autograd's finite-difference step, 1e-6: its tests' data has values 2e-5 apart
        # (sort and min of numpy's seed-42 draws), which vkgrad's 1e-4 would step across
        return _checker(f, 0 if nums is None else nums, 2 if order is None else order,
                        tuple(modes), {"eps": EPS, **kw})
    if order is None:
        raise TypeError("check_grads(f, args, order): order is required with args "
                        "(JAX's signature)")
    _check_grads(f, tuple(args), order=order, modes=tuple(modes), **kw)


def _is_argnum(a) -> bool:
    is_int = lambda v: isinstance(v, (int, np.integer)) and not isinstance(v, bool)
    return is_int(a) or (isinstance(a, (tuple, list)) and len(a) > 0 and all(map(is_int, a)))


def _checker(f, argnum, order, modes, kw):
    nums = tuple(argnum) if isinstance(argnum, (tuple, list)) else (int(argnum),)

    def check(*args, **kwargs):
        # the arguments held fixed are float64 too (the check is in float64): a Python float
        # would be float32 (vkgrad's policy), and a gradient with respect to it float32
        args = tuple(a if k in nums else tree_map(_f64, a) for k, a in enumerate(args))

        def at(*xs):
            full = list(args)
            for k, x in zip(nums, xs):
                full[k] = x
            return f(*full, **kwargs)
        at.__name__ = getattr(f, "__name__", "f")
        _check_grads(at, tuple(args[k] for k in nums), order=order, modes=modes, **kw)
    return check


def _f64(a):
    if isinstance(a, float) or (isinstance(a, (np.ndarray, np.generic)) and a.dtype.kind == "f"):
        return np.asarray(a, np.float64)
    return a


def combo_check(fun: Callable, *args, **kwargs):
    """autograd's: check_grads(fun, *args, **kwargs) on every combination of the values given,
    `combo_check(f, (0,))([x1, x2], axis=[None, 0])`."""
    def run(*arg_lists, **kwarg_lists):
        kv = [[(k, v) for v in vs] for k, vs in kwarg_lists.items()]
        for a in product(*arg_lists):
            for k in product(*kv):
                check_grads(fun, *args, **kwargs)(*a, **dict(k))
    return run


def scalar_close(a, b) -> bool:
    """autograd's: |a - b| < 1e-6, absolutely or relative to |a + b|."""
    d = abs(float(a) - float(b))
    return d < TOL or d / abs(float(a) + float(b)) < RTOL


def check_equivalent(x, y) -> None:
    """autograd's: x and y have the same structure, shapes and (to 1e-6) values."""
    assert tree_structure(x) == tree_structure(y), f"structure mismatch:\nx: {x}\ny: {y}"
    for a, b in zip(tree_leaves(x), tree_leaves(y)):
        a, b = np.asarray(a), np.asarray(b)
        assert a.shape == b.shape, f"shape mismatch: {a.shape} vs {b.shape}"
        assert np.allclose(a, b, rtol=RTOL, atol=TOL), f"value mismatch:\nx: {a}\ny: {b}"


__all__ = ["check_grads", "combo_check", "scalar_close", "check_equivalent"]
