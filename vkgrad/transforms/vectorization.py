"""vmap: a function mapped over an axis of its arguments, as JAX's vmap: traced once per
example shape, then batched as a program (vkgrad.transforms.batching)."""

from __future__ import annotations

import functools
import inspect

import numpy as np

from vkgrad.errors import ArgumentError
from vkgrad.ir.core import type_str
from vkgrad.ir.verifier import checked
from vkgrad.passes import optimize
from vkgrad.primitives.collective import bound_axis
from vkgrad.transforms.batching import batch_program
from vkgrad.transforms.tracing import (check_function, fun_name, is_final, to_user,
                                       trace_function)
from vkgrad.tracer.core import ShapeDtype, abstract_leaf, eval_program, user_source
from vkgrad.tracer.pytree import TreeDef, tree_flatten, tree_unflatten
from vkgrad.traceback_util import api_boundary


def vmap(fun, in_axes=0, out_axes=0, axis_name=None, axis_size=None):
    """`vmap(fun, in_axes=0, out_axes=0, axis_name=None, axis_size=None)(*args)`: fun mapped
    over an axis of its arguments, as JAX's vmap: one program for the whole batch, no
    per-example loop.

    in_axes: an int, None, or a tuple with one entry per positional argument, each an int,
    None, or a pytree prefix of that argument (`{"w": None, "b": 0}`); negative axes count from
    the end. Keyword arguments are mapped over their axis 0. out_axes: the same for the result;
    a result that does not depend on a mapped argument is broadcast along its out axis (as JAX
    does). axis_name: a name for the mapped axis, which vg.lax.psum/pmean/pmax/pmin inside fun
    reduce over (as in JAX). axis_size: the batch size when no argument is mapped."""
    check_function(fun, "vmap")
    name = fun_name(fun)
    _check_axes_spec(in_axes, "in_axes", name)
    _check_axes_spec(out_axes, "out_axes", name)

    @api_boundary
    @functools.wraps(fun)
    def vmapped(*args, **kwargs):
        specs = _in_axes_per_argument(in_axes, len(args), name)
        labels = [_arg_label(fun, i) for i in range(len(args))]
        f = fun
        if kwargs:   # mapped over axis 0, passed as one more (dict) argument
            f = lambda *a: fun(*a[:-1], **a[-1])
            args, specs, labels = args + (kwargs,), specs + (0,), labels + ["keyword arguments"]
        leaves, dims, traced_args, mapped = [], [], [], []
        for arg, spec, label in zip(args, specs, labels):
            ls, tree = tree_flatten(arg)
            paths = _leaf_paths(tree, label)
            axes = _broadcast_prefix(spec, tree, in_axes if isinstance(in_axes, (tuple, list))
                                     else spec, label, name, "in_axes")
            per_example = []
            for x, axis, path in zip(ls, axes, paths):
                ty = abstract_leaf(x, f"{path} of vmap({name})")
                if axis is not None:
                    axis = _normalize_axis(axis, len(ty.shape), f"in_axes {axis} for {path} "
                                           f"({type_str(ty.shape, ty.dtype)})", name,
                                           scalar_hint=True)
                    mapped.append((path, axis, ty.shape[axis]))
                    x_spec = ShapeDtype(ty.shape[:axis] + ty.shape[axis + 1:], ty.dtype)
                else:
                    x_spec = x
                per_example.append(x_spec)
                dims.append(axis)
            leaves += ls
            traced_args.append(tree_unflatten(tree, per_example))
        size = _mapped_size(mapped, axis_size, name)
        with bound_axis(axis_name, size):
            tr = trace_function(f, tuple(traced_args), allow_spec=True)
        outs = tr.program.outputs
        out_specs = _broadcast_prefix(out_axes, tr.out_tree, out_axes, "the result", name,
                                      "out_axes")
        out_names = _leaf_paths(tr.out_tree, "result")
        out_dims = [None if a is None else
                    _normalize_axis(a, len(o.shape) + 1, f"out_axes {a} for {p} "
                                    f"({type_str((size,) + tuple(o.shape), o.dtype)} mapped)",
                                    name)
                    for a, o, p in zip(out_specs, outs, out_names)]
        batched = checked(batch_program(tr.program, dims + [None] * len(tr.captured), out_dims,
                                        size, out_names=out_names, axis_name=axis_name),
                         f"vmap of {name}")
        res = eval_program(optimize(batched, final=is_final()), leaves + list(tr.captured))
        return tree_unflatten(tr.out_tree, [to_user(r) for r in res])

    return vmapped


def _is_axis(a) -> bool:
    return a is None or (isinstance(a, (int, np.integer)) and not isinstance(a, bool))


def _check_axes_spec(spec, what, name):
    bad = [a for a in tree_flatten(spec)[0] if not _is_axis(a)]
    if bad:
        raise ArgumentError(f"vmap of {name}: {what}={spec!r}: its entries must be ints or "
                            f"None, got {bad[0]!r}", source=user_source())


def _in_axes_per_argument(in_axes, nargs, name) -> tuple:
    if _is_axis(in_axes):
        return (in_axes,) * nargs
    if not isinstance(in_axes, (tuple, list)):
        raise ArgumentError(f"vmap of {name}: in_axes must be an int, None, or a tuple with one "
                            f"entry per positional argument, got {in_axes!r} (to give one "
                            "argument a pytree of axes, wrap it: in_axes=(spec,))",
                            source=user_source())
    if len(in_axes) != nargs:
        raise ArgumentError(f"vmap of {name}: in_axes has {len(in_axes)} entries "
                            f"({in_axes!r}), but {name} was called with {nargs} positional "
                            "argument(s)", source=user_source())
    return tuple(in_axes)


def _arg_label(fun, i) -> str:
    """'argument 1 (x)': the i-th positional argument, by its parameter name when known."""
    try:
        params = list(inspect.signature(fun).parameters.values())
    except (TypeError, ValueError):
        return f"argument {i}"
    pos = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return f"argument {i} ({pos[i].name})" if i < len(pos) else f"argument {i}"


def _leaf_paths(tree: TreeDef, label: str) -> list:
    """A name per leaf: the label, then the keys down to it (`argument 0 (params)['w']`)."""
    if tree.kind == "leaf":
        return [label]
    if tree.kind == "none":
        return []
    keys = tree.meta if tree.kind == "dict" else range(len(tree.children))
    return [p for k, c in zip(keys, tree.children) for p in _leaf_paths(c, f"{label}[{k!r}]")]


def _broadcast_prefix(spec, tree: TreeDef, whole, label, name, what) -> list:
    """One axis per leaf of `tree` from `spec`, a pytree prefix of it (an int or None stands
    for a whole subtree)."""
    if _is_axis(spec):
        return [spec] * tree.num_leaves
    s_leaves, s_tree = tree_flatten(spec)
    kinds = {"tuple", "list", "namedtuple"}
    same = (s_tree.kind == tree.kind or {s_tree.kind, tree.kind} <= kinds) and \
        len(s_tree.children) == len(tree.children) and \
        (tree.kind != "dict" or s_tree.meta == tree.meta)
    if not same:
        raise ArgumentError(f"vmap of {name}: {what} entry {spec!r} for {label} does not match "
                            f"its structure {tree} ({what}={whole!r}); an entry is an int, None, "
                            "or a pytree prefix of its argument", source=user_source())
    children = [spec[k] for k in tree.meta] if tree.kind == "dict" else list(spec)
    keys = tree.meta if tree.kind == "dict" else range(len(children))
    return [a for k, s, c in zip(keys, children, tree.children)
            for a in _broadcast_prefix(s, c, whole, f"{label}[{k!r}]", name, what)]


def _normalize_axis(axis, ndim, what, name, scalar_hint=False) -> int:
    if not -ndim <= axis < ndim:
        hint = (": a scalar has no axis to map over; give it in_axes None" if ndim == 0 and
                scalar_hint else f" (axes {-ndim}..{ndim - 1})")
        raise ArgumentError(f"vmap of {name}: {what} is out of range{hint}",
                            source=user_source())
    return int(axis) % ndim


def _mapped_size(mapped, axis_size, name) -> int:
    sizes = {s for _, _, s in mapped}
    if axis_size is not None:
        sizes.add(int(axis_size))
    if not sizes:
        raise ArgumentError(f"vmap of {name}: no argument is mapped (in_axes is None for "
                            "every one); pass axis_size to say how many examples",
                            source=user_source())
    if len(sizes) > 1:
        parts = [f"{p} has size {s} along axis {a}" for p, a, s in mapped]
        if axis_size is not None:
            parts.insert(0, f"axis_size is {axis_size}")
        raise ArgumentError(f"vmap of {name}: the mapped axes have different sizes: "
                            + "; ".join(parts), source=user_source())
    return sizes.pop()
