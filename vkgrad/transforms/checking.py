"""check_grads: a function's derivatives, both modes and any order, against central finite
differences in float64."""

from __future__ import annotations

import numpy as np

from vkgrad.config import enable_x64
from vkgrad.errors import GradientCheckError
from vkgrad.transforms.differentiation import jvp, vjp
from vkgrad.transforms.tracing import check_function, fun_name
from vkgrad.tracer.array import Array
from vkgrad.tracer.pytree import flatten_up_to, tree_flatten, tree_map, tree_unflatten
from vkgrad.traceback_util import api_boundary


@api_boundary
def check_grads(fun, args, order=1, modes=("fwd", "rev"), atol=1e-5, rtol=1e-4, eps=1e-4,
                seed=0):
    """Check fun's derivatives against central finite differences, in float64.

    Float leaves of `args` are converted to float64 (integer leaves are held fixed). For a
    random unit tangent u and unit cotangent v, <v, (f(x+eps u) - f(x-eps u)) / 2eps> must match
    <vjp(v), u> ("rev") and <v, jvp(u)> ("fwd") within atol + rtol * scale. order=2 also checks
    the derivatives of x -> vjp(fun, x)(v), and so on. Raises GradientCheckError on mismatch.
    x64 is on while it runs (vg.enable_x64), so float64 arguments stay float64."""
    check_function(fun, "check_grads")
    with enable_x64(True):   # the check is in float64, whatever the x64 switch says
        _check_grads(fun, tuple(args), order, modes, atol, rtol, eps, seed)


def _check_grads(fun, args, order, modes, atol, rtol, eps, seed):
    x = tree_map(_to_f64, args)
    rng = np.random.default_rng(seed)
    leaves, tree = tree_flatten(x)
    fl = [k for k, a in enumerate(leaves) if np.asarray(a).dtype.kind == "f"]
    u = _unit([rng.standard_normal(np.shape(leaves[k])) for k in fl])

    def f_at(t):
        moved = list(leaves)
        for k, d in zip(fl, u):
            # an array (numpy makes 0-d arithmetic a NumPy scalar, which is weakly typed)
            moved[k] = np.asarray(leaves[k] + t * d)
        out = fun(*tree_unflatten(tree, moved))
        return tree_flatten(out)

    out_leaves, out_tree = f_at(0.0)
    ofl = [j for j, o in enumerate(out_leaves) if np.asarray(o).dtype.kind == "f"]
    v = _unit([rng.standard_normal(np.shape(out_leaves[j])) for j in ofl])
    plus, minus = f_at(eps)[0], f_at(-eps)[0]
    fd = sum(float(np.vdot(vj, np.subtract(plus[j], minus[j], dtype=np.float64))) / (2 * eps)
             for j, vj in zip(ofl, v))
    v_full = [np.zeros(np.shape(o), np.asarray(o).dtype) for o in out_leaves]
    for j, vj in zip(ofl, v):
        v_full[j] = vj
    v_tree = tree_unflatten(out_tree, v_full)
    name = fun_name(fun)

    def compare(mode, got):
        scale = max(abs(fd), abs(got), 1.0)
        if not abs(got - fd) <= atol + rtol * scale:
            raise GradientCheckError(
                f"check_grads({name}, order={order}): {mode}-mode directional derivative "
                f"{got!r} differs from finite differences {fd!r} (|diff| {abs(got - fd):.3g} > "
                f"atol {atol} + rtol {rtol} * {scale:.3g})")

    if "rev" in modes:
        _, vjp_fn = vjp(fun, *x)
        cts = _ct_leaves(x, vjp_fn(v_tree))   # aligned with `leaves`; None for int leaves
        compare("reverse", sum(float(np.vdot(np.asarray(cts[k], np.float64), d))
                               for k, d in zip(fl, u)))
    if "fwd" in modes:
        tangents = [np.zeros(np.shape(a), np.asarray(a).dtype) for a in leaves]
        for k, d in zip(fl, u):
            tangents[k] = d
        _, t_out = jvp(fun, x, tree_unflatten(tree, tangents))
        t_leaves = tree_flatten(t_out)[0]
        compare("forward", sum(float(np.vdot(vj, np.asarray(t_leaves[j], np.float64)))
                               for j, vj in zip(ofl, v)))
    if order > 1:
        def vjp_of_fun(*xs):
            return vjp(fun, *xs)[1](v_tree)
        vjp_of_fun.__name__ = f"vjp_{name}"
        _check_grads(vjp_of_fun, x, order - 1, modes, atol, rtol, eps, seed + 1)


def _ct_leaves(primal, ct) -> list:
    """The leaves of `ct` at the leaf positions of `primal` (ct holds None for int leaves, which
    a plain flatten would drop)."""
    return flatten_up_to(tree_flatten(primal)[1], ct)


def _unit(vs):
    norm = np.sqrt(sum(float(np.sum(np.square(v))) for v in vs)) or 1.0
    return [np.asarray(v / norm, np.float64) for v in vs]


def _to_f64(a):
    # vg.Arrays too: an eager result (float32) as an argument is checked in float64 as well
    if isinstance(a, float) or (isinstance(a, (np.ndarray, np.generic, Array))
                                and np.dtype(a.dtype).kind == "f"):
        return np.asarray(a, np.float64)
    return a
