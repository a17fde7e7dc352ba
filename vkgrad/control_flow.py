"""vg.lax's control flow, with JAX's signatures and pytree carries: scan, fori_loop, while_loop,
cond, switch, map and associative_scan (vg.lax re-exports them).

Each traces the user's function ONCE into a closed sub-program and binds one eqn
(vkgrad/primitives/control_flow.py): a 10,000-step scan is one eqn, as a 10-step one is.
Values the function closes over become the loop's constants (extra operands). fori_loop with
Python int bounds is a scan (reverse mode works); with traced bounds it is a while_loop, as in
JAX. associative_scan is composition (log depth, differentiable like any other code).

Bad input is an ArgumentError naming the user's line: a carry whose structure, shape or dtype
changes in the body (by its pytree path, with both types), branches whose outputs differ, a
predicate that is not a scalar, a `length` that disagrees with xs.
"""

from __future__ import annotations

import numpy as np

import vkgrad.numpy as vnp
from vkgrad import primitives as P
from vkgrad.primitives import control_flow as CF
from vkgrad.errors import ArgumentError, ShapeError
from vkgrad.ir.core import TensorType, Var, type_str
from vkgrad.primitives.control_flow import aval, trace_closed
from vkgrad.tracer.core import Tracer, abstract_leaf, user_source
from vkgrad.tracer.pytree import TreeDef, tree_flatten, tree_unflatten
from vkgrad.transforms.tracing import _paths, check_function, fun_name
from vkgrad.transforms.vectorization import vmap


# ----------------------------------------------------------------------------------- helpers

def _leaf_types(leaves, where: str) -> list:
    return [abstract_leaf(x, where) for x in leaves]


def _closed(fun, in_types, name: str, control: str):
    """fun traced into a closed program whose inputs are its captured values first (the
    loop's constants), then in_types: (program, captured values)."""
    prog, captured = trace_closed(fun, in_types, name, control)
    n = len(in_types)
    prog = prog.replace(inputs=prog.inputs[n:] + prog.inputs[:n])
    return prog, captured


def _check_same(what: str, tree: TreeDef, types, want_tree: TreeDef, want_types, base: str,
                got_name: str, want_name: str) -> None:
    """The body's `tree`/`types` must be `want_tree`/`want_types` (say where they differ)."""
    if tree != want_tree:
        raise ArgumentError(f"{what}: {got_name} has structure {tree}, but {want_name} has "
                            f"structure {want_tree}", source=user_source())
    for path, t, w in zip(_paths(want_tree, base), types, want_types):
        if (t.shape, t.dtype) != (w.shape, w.dtype):
            raise ArgumentError(f"{what}: {path} is {type_str(t.shape, t.dtype)} in {got_name} "
                                f"but {type_str(w.shape, w.dtype)} in {want_name}; a loop "
                                "carry keeps its shape and dtype (convert it, e.g. "
                                "x.astype(...), or give the initial value that type)",
                                source=user_source())


def _flat_out(out, what: str):
    leaves, tree = tree_flatten(out)
    return leaves, tree, _leaf_types(leaves, what)


# ----------------------------------------------------------------------------------- scan

def scan(f, init, xs=None, length=None, reverse=False, unroll=1, _split_transpose=False):
    """jax.lax.scan: `carry, y = f(carry, x)` over the leading axis of xs (pytrees), giving the
    final carry and the ys stacked along a new leading axis. `length` is needed when xs is
    None; reverse=True runs from the last index to the first. unroll=k (True: all of them)
    runs k steps per iteration of the loop, as JAX's: a loop of length // k over a body holding
    k copies of f, then the length % k steps left; the results do not depend on it, the
    program's size and the per-step cost of the loop do (on Vulkan each iteration replays the
    body's dispatches and copies its slices: _unrolled)."""
    check_function(f, "lax.scan")
    init_leaves, init_tree = tree_flatten(init)
    xs_leaves, xs_tree = tree_flatten(xs)
    init_types = _leaf_types(init_leaves, "the initial carry of vg.lax.scan")
    x_full = _leaf_types(xs_leaves, "xs of vg.lax.scan")
    length = _scan_length(x_full, xs_tree, length)
    k = length if unroll is True else 1 if unroll is False else int(unroll)
    if k < 1:
        raise ArgumentError(f"vg.lax.scan: unroll must be a positive int or a bool, got "
                            f"{unroll!r}", source=user_source())
    if k > 1 and length > 1:
        return _unrolled(f, init, xs_leaves, xs_tree, length, reverse, min(k, length))
    x_types = [TensorType(t.shape[1:], t.dtype) for t in x_full]
    nk = len(init_leaves)
    y_tree = []

    def body(*a):
        out = f(tree_unflatten(init_tree, list(a[:nk])), tree_unflatten(xs_tree, list(a[nk:])))
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            raise ArgumentError(f"the body of vg.lax.scan ({fun_name(f)}) must return a pair "
                                f"(carry, y), got {type(out).__name__}", source=user_source())
        cl, ct, ctypes = _flat_out(out[0], "the carry the scan body returns")
        _check_same(f"the scan body {fun_name(f)}", ct, ctypes, init_tree, init_types, "carry",
                    "the carry it returns", "the initial carry")
        yl, yt, _ = _flat_out(out[1], "the y the scan body returns")
        y_tree.append(yt)
        return cl + yl

    jaxpr, consts = _closed(body, init_types + x_types, f"scan_{fun_name(f)}",
                            f"the body of vg.lax.scan ({fun_name(f)})")
    fin, ys = CF.scan(jaxpr, consts, init_leaves, xs_leaves, length, reverse, 1)
    return tree_unflatten(init_tree, fin), tree_unflatten(y_tree[0], ys)


def _unrolled(f, init, xs_leaves, xs_tree, length, reverse, k):
    """scan with k steps a loop iteration: the first length - length % k steps (the last ones,
    with reverse) as a scan over blocks of k, the rest as a plain scan after (before, with
    reverse), each keeping the order of the steps; ys concatenated back in index order."""
    n, r = divmod(length, k)
    if reverse:
        main = [x[r:] for x in xs_leaves]
        rest = [x[:r] for x in xs_leaves]
    else:
        main = [x[:n * k] for x in xs_leaves]
        rest = [x[n * k:] for x in xs_leaves]
    blocks = [vnp.reshape(x, (n, k) + tuple(x.shape[1:])) for x in main]

    def body(c, xb):
        ys = []
        for j in (range(k - 1, -1, -1) if reverse else range(k)):
            xj = tree_unflatten(xs_tree, [x[j] for x in tree_flatten(xb)[0]])
            c, y = f(c, xj)
            ys.append(y)
        if reverse:
            ys.reverse()
        leaves = [tree_flatten(y)[0] for y in ys]
        stacked = [vnp.stack([ls[i] for ls in leaves]) for i in range(len(leaves[0]))]
        return c, tree_unflatten(tree_flatten(ys[0])[1], stacked)

    c, yb = scan(body, init, tree_unflatten(xs_tree, blocks), length=n, reverse=reverse)
    yl, ytree = tree_flatten(yb)
    ys = [vnp.reshape(y, (n * k,) + tuple(y.shape[2:])) for y in yl]
    if r:   # a reverse scan ran the blocks first: the rest (indices 0..r-1) comes first in ys
        c, yr = scan(f, c, tree_unflatten(xs_tree, rest), length=r, reverse=reverse)
        ys = [vnp.concatenate([b, a] if reverse else [a, b])
              for a, b in zip(ys, tree_flatten(yr)[0])]
    return c, tree_unflatten(ytree, ys)


def _scan_length(x_types, xs_tree, length) -> int:
    for path, t in zip(_paths(xs_tree, "xs"), x_types):
        if not t.shape:
            raise ArgumentError(f"vg.lax.scan: {path} is a scalar {type_str(t.shape, t.dtype)}; "
                                "every leaf of xs needs a leading axis to scan over",
                                source=user_source())
    sizes = sorted({t.shape[0] for t in x_types})
    if length is not None:
        if isinstance(length, Tracer) or not isinstance(length, (int, np.integer)) \
                or isinstance(length, bool) or length < 0:
            raise ArgumentError(f"vg.lax.scan: length must be a non-negative Python int, got "
                                f"{length!r}", source=user_source())
        if sizes and sizes != [int(length)]:
            raise ShapeError(f"vg.lax.scan got length={length}, which disagrees with the "
                             f"leading axis sizes of xs: {sizes}", source=user_source())
        return int(length)
    if not sizes:
        raise ArgumentError("vg.lax.scan got no xs to scan over and no length; pass length=",
                            source=user_source())
    if len(sizes) > 1:
        shown = ", ".join(f"{p} {type_str(t.shape, t.dtype)}"
                          for p, t in zip(_paths(xs_tree, "xs"), x_types))
        raise ShapeError(f"vg.lax.scan: the leaves of xs have different leading axis sizes "
                         f"{sizes}: {shown}", source=user_source())
    return sizes[0]


def map(f, xs, *, batch_size=None):  # noqa: A001 - JAX's name
    """jax.lax.map: f applied to each slice of xs along its leading axis (a scan with no
    carry); batch_size: that many slices at a time, through vg.vmap."""
    check_function(f, "lax.map")
    if batch_size is None:
        return scan(lambda c, x: ((), f(x)), (), xs)[1]
    from_vmap = vmap
    leaves, tree = tree_flatten(xs)
    n = leaves[0].shape[0] if leaves else 0
    b, rest = int(batch_size), n % int(batch_size)
    head = [x[:n - rest].reshape((n // b, b) + tuple(x.shape[1:])) for x in leaves]
    ys = scan(lambda c, x: ((), from_vmap(f)(x)), (), tree_unflatten(tree, head))[1]
    y_leaves, y_tree = tree_flatten(ys)
    y_leaves = [y.reshape((-1,) + tuple(y.shape[2:])) for y in y_leaves]
    if rest:
        tail = from_vmap(f)(tree_unflatten(tree, [x[n - rest:] for x in leaves]))
        y_leaves = [P.concatenate([y, t], 0) for y, t in zip(y_leaves, tree_flatten(tail)[0])]
    return tree_unflatten(y_tree, y_leaves)


# ----------------------------------------------------------------------------------- loops

def _concrete_int(x):
    """x as a Python int if it is known now (not traced), else None."""
    if isinstance(x, Tracer):
        return None
    if isinstance(x, (bool, np.bool_)):
        return None
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, np.ndarray) and x.shape == () and x.dtype.kind in "iu":
        return int(x)
    return None


def fori_loop(lower, upper, body_fun, init_val, *, unroll=None):
    """jax.lax.fori_loop: `val = body_fun(i, val)` for i in [lower, upper). Python int
    bounds make it a scan (differentiable in reverse mode); traced bounds a while_loop."""
    check_function(body_fun, "lax.fori_loop")
    lo, hi = _concrete_int(lower), _concrete_int(upper)
    if lo is not None and hi is not None:
        def step(carry, _):
            i, val = carry
            return (i + 1, body_fun(i, val)), ()
        (_, val), _ = scan(step, (np.int32(lo), init_val), None, length=max(hi - lo, 0),
                           unroll=1 if unroll is None else unroll)
        return val

    def cond_fun(carry):
        return carry[0] < carry[1]

    def body(carry):
        i, n, val = carry
        return i + 1, n, body_fun(i, val)

    lower = P.convert(lower, "i32") if isinstance(lower, Tracer) else np.int32(lower)
    upper = P.convert(upper, "i32") if isinstance(upper, Tracer) else np.int32(upper)
    return while_loop(cond_fun, body, (lower, upper, init_val))[2]


def while_loop(cond_fun, body_fun, init_val):
    """jax.lax.while_loop: `while cond_fun(val): val = body_fun(val)`. No reverse mode (as
    JAX: it needs a trip count known when the backward is built)."""
    check_function(cond_fun, "lax.while_loop")
    check_function(body_fun, "lax.while_loop")
    leaves, tree = tree_flatten(init_val)
    types = _leaf_types(leaves, "the initial value of vg.lax.while_loop")

    def cond(*a):
        pred = cond_fun(tree_unflatten(tree, list(a)))
        t = abstract_leaf(pred, "the result of the while_loop's cond_fun")
        if t.shape != () or t.dtype != "bool":
            raise ArgumentError(f"the cond_fun of vg.lax.while_loop ({fun_name(cond_fun)}) "
                                f"must return a bool scalar, got {type_str(t.shape, t.dtype)}",
                                source=user_source())
        return [pred]

    def body(*a):
        out, ot, otypes = _flat_out(body_fun(tree_unflatten(tree, list(a))),
                                    "the value the while_loop body returns")
        _check_same(f"the while_loop body {fun_name(body_fun)}", ot, otypes, tree, types,
                    "val", "the value it returns", "the initial value")
        return out

    what = f"vg.lax.while_loop ({fun_name(body_fun)})"
    cj, cc = _closed(cond, types, "while_cond", f"the cond_fun of {what}")
    bj, bc = _closed(body, types, "while_body", f"the body of {what}")
    return tree_unflatten(tree, CF.while_loop(cj, bj, cc, bc, leaves))


# ----------------------------------------------------------------------------------- cond

def switch(index, branches, *operands):
    """jax.lax.switch: branches[index](*operands), index clamped into [0, len(branches) - 1].
    Every branch is traced; all must return the same structure and types."""
    branches = list(branches)
    if not branches:
        raise ArgumentError("vg.lax.switch needs at least one branch", source=user_source())
    for b in branches:
        check_function(b, "lax.switch")
    t = abstract_leaf(index, "the index of vg.lax.switch")
    if t.shape != () or t.dtype not in ("i32", "bool"):
        raise ArgumentError(f"the index of vg.lax.switch must be an integer scalar, got "
                            f"{type_str(t.shape, t.dtype)}", source=user_source())
    index = P.minimum(P.maximum(P.convert(index, "i32"), 0), len(branches) - 1)
    return _cond(index, branches, operands, "vg.lax.switch", [f"branch {k}" for k in
                                                               range(len(branches))])


def cond(pred, true_fun, false_fun, *operands, **kwargs):
    """jax.lax.cond: true_fun(*operands) if pred else false_fun(*operands); pred a bool (or
    integer: nonzero is true) scalar. Both branches are traced and must return the same
    structure and types. Under vmap with a batched pred both run, and each example selects."""
    if kwargs:
        raise ArgumentError(f"vg.lax.cond takes its operands positionally, got keyword "
                            f"arguments {sorted(kwargs)}", source=user_source())
    check_function(true_fun, "lax.cond")
    check_function(false_fun, "lax.cond")
    t = abstract_leaf(pred, "the predicate of vg.lax.cond")
    if t.shape != ():
        raise ArgumentError(f"the predicate of vg.lax.cond must be a scalar, got "
                            f"{type_str(t.shape, t.dtype)} (reduce it, e.g. with .any() or "
                            ".all(), or use vnp.where for an elementwise choice)",
                            source=user_source())
    if t.dtype not in ("bool", "i32"):
        raise ArgumentError(f"the predicate of vg.lax.cond must be a bool or integer scalar, "
                            f"got {type_str(t.shape, t.dtype)}", source=user_source())
    index = P.convert(P.ne(pred, 0) if t.dtype != "bool" else pred, "i32")
    return _cond(index, [false_fun, true_fun], operands, "vg.lax.cond",
                 ["false_fun", "true_fun"])


def _cond(index, funs, operands, what, names):
    leaves, tree = tree_flatten(tuple(operands))
    types = _leaf_types(leaves, f"the operands of {what}")
    outs = []

    def branch(fun):
        def run(*a):
            ol, ot, otypes = _flat_out(fun(*tree_unflatten(tree, list(a))),
                                       f"the result of a branch of {what}")
            outs.append((ot, otypes))
            return ol
        return run

    traced = [_closed(branch(f), types, f"branch_{fun_name(f)}",
                      f"a branch of {what} ({fun_name(f)})") for f in funs]
    (t0, ty0) = outs[-1]
    for (ot, oty), name in zip(outs, names):
        _check_same(f"{what}: the branches must return the same types", ot, oty, t0, ty0,
                    "result", name, names[-1])
    # the branches' captured values, gathered: every branch takes all of them, then operands
    allc, slots = [], {}
    for _, captured in traced:
        for c in captured:
            if id(c) not in slots:
                slots[id(c)] = len(allc)
                allc.append(c)
    progs = []
    for prog, captured in traced:
        own = dict(zip((id(c) for c in captured), prog.inputs[:len(captured)]))
        ins = [own.get(id(c)) or Var(aval(c).shape, aval(c).dtype) for c in allc]
        progs.append(prog.replace(inputs=tuple(ins) + prog.inputs[len(captured):]))
    return tree_unflatten(t0, CF.cond(index, progs, allc + leaves))


# ----------------------------------------------------------------------------------- associative

def associative_scan(fn, elems, reverse=False, axis=0):
    """jax.lax.associative_scan: the inclusive scan of an associative `fn` along `axis` of
    the pytree elems, in O(log n) depth (the odd/even recursion of Blelloch's scan, as JAX
    writes it): each level combines pairs with one call of fn on whole slices."""
    leaves, tree = tree_flatten(elems)
    if not leaves:
        return elems
    nd = len(leaves[0].shape)
    axis = axis + nd if axis < 0 else axis
    n = leaves[0].shape[axis] if nd else None
    if n is None or any(len(x.shape) <= axis or x.shape[axis] != n for x in leaves):
        raise ShapeError(f"vg.lax.associative_scan: every leaf of elems needs axis {axis} of "
                         "one size, got " + ", ".join(type_str(tuple(x.shape), aval(x).dtype)
                                                     for x in leaves), source=user_source())
    if reverse:
        leaves = [_rev(x, axis) for x in leaves]

    def combine(a, b):
        out = fn(tree_unflatten(tree, a), tree_unflatten(tree, b))
        return tree_flatten(out)[0]

    out = _assoc(combine, leaves, axis)
    if reverse:
        out = [_rev(x, axis) for x in out]
    return tree_unflatten(tree, out)


def _sl(x, start, stop, step, axis):
    shape = tuple(x.shape)
    stop = shape[axis] if stop is None else stop % (shape[axis] + 1) if stop < 0 else stop
    lo, hi, st = [0] * len(shape), list(shape), [1] * len(shape)
    lo[axis], hi[axis], st[axis] = start, max(start, stop), step
    return P.slice_(x, lo, hi, st)


def _rev(x, axis):
    return vnp.flip(x, axis)


def _assoc(combine, elems, axis):
    n = elems[0].shape[axis]
    if n < 2:
        return elems
    reduced = combine([_sl(e, 0, n - 1, 2, axis) for e in elems],
                      [_sl(e, 1, None, 2, axis) for e in elems])
    odd = _assoc(combine, reduced, axis)
    if n % 2 == 0:
        even = combine([_sl(e, 0, e.shape[axis] - 1, 1, axis) for e in odd],
                       [_sl(e, 2, None, 2, axis) for e in elems])
    else:
        even = combine(odd, [_sl(e, 2, None, 2, axis) for e in elems])
    even = [P.concatenate([_sl(e, 0, 1, 1, axis), r], axis) for e, r in zip(elems, even)]
    return [_interleave(a, b, axis) for a, b in zip(even, odd)]


def _interleave(a, b, axis):
    """[a0, b0, a1, b1, ...] along axis (a has as many entries as b, or one more)."""
    nd = len(a.shape)
    same = a.shape[axis] == b.shape[axis]
    lo_a, hi_a, in_a = [0] * nd, [0] * nd, [0] * nd
    lo_b, hi_b, in_b = [0] * nd, [0] * nd, [0] * nd
    hi_a[axis], in_a[axis] = (1 if same else 0), 1
    lo_b[axis], hi_b[axis], in_b[axis] = 1, (0 if same else 1), 1
    pa, pb = P.pad(a, lo_a, hi_a, in_a), P.pad(b, lo_b, hi_b, in_b)
    if aval(a).dtype == "bool":
        return P.select(pa, pa, pb)
    return P.add(pa, pb)


__all__ = ["scan", "fori_loop", "while_loop", "cond", "switch", "map", "associative_scan"]
