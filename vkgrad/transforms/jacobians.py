"""vg.jacfwd, vg.jacrev, vg.hessian (JAX's API): whole Jacobians, one row or column at a time.

jacrev pulls back one basis cotangent per output element (one vjp, then one backward
evaluation each); jacfwd pushes forward one basis tangent per input element (a jvp each). These
are Python loops over the basis (not yet vmap over it); the results are stacked with the lax layer,
so they also trace (hessian = jacfwd(jacrev(f)), a Jacobian inside a jitted function).

The result's structure, as JAX's: the output pytree, each leaf replaced by the pytree of the
differentiated argument(s) (a tuple of them when argnums is a tuple), each leaf of shape
out_leaf.shape + arg_leaf.shape.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from vkgrad.errors import ArgumentError
from vkgrad.ir.core import np_dtype
from vkgrad import primitives as P
from vkgrad.tracer.core import ArrayOps, user_source
from vkgrad.tracer.pytree import flatten_up_to, tree_flatten, tree_unflatten
from vkgrad.transforms.differentiation import jvp, vjp
from vkgrad.transforms.tracing import normalize_argnums
from vkgrad.traceback_util import api_boundary


def _shape(x) -> tuple:
    return tuple(x.shape) if isinstance(x, ArrayOps) else np.shape(x)


def _dtype(x):
    return x.dtype if isinstance(x, ArrayOps) else np.asarray(x).dtype


def _basis(shape, dtype):
    """The unit arrays of `shape`, one per element, in row-major order."""
    n = math.prod(shape)
    eye = np.eye(n, dtype=dtype)
    return [eye[i].reshape(shape) for i in range(n)]


def _stack(pieces, lead_shape, tail_shape):
    """pieces[i] (shape tail_shape) stacked along new leading dims lead_shape."""
    dt = "f32" if not pieces else None
    if not pieces:
        return np.zeros(tuple(lead_shape) + tuple(tail_shape), np_dtype(dt))
    rows = [P.reshape(p, (1,) + tuple(tail_shape)) for p in pieces]
    return P.reshape(P.concatenate(rows, 0), tuple(lead_shape) + tuple(tail_shape))


def _move_lead_to_tail(x, n_lead, n_tail):
    """x of shape lead + tail -> tail + lead."""
    perm = tuple(range(n_lead, n_lead + n_tail)) + tuple(range(n_lead))
    return P.transpose(x, perm) if n_lead and n_tail else x


def _split_args(fun, args, argnums):
    nums = normalize_argnums(argnums, len(args))

    def partial(*dyn):
        full = list(args)
        for i, d in zip(nums, dyn):
            full[i] = d
        return fun(*full)
    return nums, partial, [args[i] for i in nums]


def _check_float(leaves, name):
    for x in leaves:
        if np.dtype(_dtype(x)).kind != "f":
            raise ArgumentError(f"{name} differentiates float arguments only; got one of dtype "
                                f"{np.dtype(_dtype(x))} (leave it out of argnums)",
                                source=user_source())


def jacrev(fun, argnums=0, has_aux=False):
    """The Jacobian of fun with respect to args[argnums], by reverse mode (one vjp)."""
    @api_boundary
    @functools.wraps(fun)
    def jac(*args):
        nums, partial, dyn = _split_args(fun, args, argnums)
        _check_float(tree_flatten(dyn)[0], "jacrev")
        res = vjp(partial, *dyn, has_aux=has_aux)
        out, vjp_fn = res[0], res[1]
        out_leaves, out_tree = tree_flatten(out)
        in_trees = [tree_flatten(d)[1] for d in dyn]
        in_leaves = [tree_flatten(d)[0] for d in dyn]
        per_out = []
        for j, o in enumerate(out_leaves):
            rows = []   # per basis cotangent of output leaf j: the cotangents of every arg leaf
            for e in _basis(_shape(o), np.dtype(_dtype(o))):
                ct = [np.zeros(_shape(x), np.dtype(_dtype(x))) for x in out_leaves]
                ct[j] = e
                cts = vjp_fn(tree_unflatten(out_tree, ct))
                rows.append([leaf for tree, c in zip(in_trees, cts)
                             for leaf in flatten_up_to(tree, c)])
            blocks, k = [], 0
            for i, leaves in enumerate(in_leaves):
                mats = [_stack([r[k + m] for r in rows], _shape(o), _shape(x))
                        for m, x in enumerate(leaves)]
                k += len(leaves)
                blocks.append(tree_unflatten(in_trees[i], mats))
            per_out.append(tuple(blocks) if isinstance(argnums, (tuple, list)) else blocks[0])
        result = tree_unflatten(out_tree, per_out)
        return (result, res[2]) if has_aux else result
    return jac


def jacfwd(fun, argnums=0, has_aux=False):
    """The Jacobian of fun with respect to args[argnums], by forward mode (a jvp per input
    element)."""
    @api_boundary
    @functools.wraps(fun)
    def jac(*args):
        nums, partial, dyn = _split_args(fun, args, argnums)
        flat_in, in_tree = tree_flatten(tuple(dyn))
        _check_float(flat_in, "jacfwd")
        f = (lambda *d: partial(*d)[0]) if has_aux else partial
        columns, out_leaves, out_tree = [], None, None   # per input leaf: per element: t_out
        for m, x in enumerate(flat_in):
            cols = []
            for e in _basis(_shape(x), np.dtype(_dtype(x))):
                tangents = [np.zeros(_shape(y), np.dtype(_dtype(y))) for y in flat_in]
                tangents[m] = e
                out, t_out = jvp(f, tuple(dyn), tree_unflatten(in_tree, tangents))
                t_leaves, out_tree = tree_flatten(t_out)
                out_leaves = tree_flatten(out)[0]
                cols.append(t_leaves)
            columns.append(cols)
        if out_tree is None:   # every argument is empty: evaluate once for the structure
            out = f(*dyn)
            out_leaves, out_tree = tree_flatten(out)
        in_trees = [tree_flatten(d)[1] for d in dyn]
        per_out = []
        for j, o in enumerate(out_leaves):
            mats = []
            for m, x in enumerate(flat_in):
                stacked = _stack([c[j] for c in columns[m]], _shape(x), _shape(o))
                mats.append(_move_lead_to_tail(stacked, len(_shape(x)), len(_shape(o))))
            blocks, k = [], 0
            for tree in in_trees:
                blocks.append(tree_unflatten(tree, mats[k:k + tree.num_leaves]))
                k += tree.num_leaves
            per_out.append(tuple(blocks) if isinstance(argnums, (tuple, list)) else blocks[0])
        result = tree_unflatten(out_tree, per_out)
        return (result, partial(*dyn)[1]) if has_aux else result
    return jac


def hessian(fun, argnums=0, has_aux=False):
    """jacfwd(jacrev(fun)): the matrix of second derivatives of a scalar function."""
    return jacfwd(jacrev(fun, argnums, has_aux), argnums, has_aux)
