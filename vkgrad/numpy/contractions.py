"""Contractions: matmul, tensordot, dot, vdot, inner, outer and einsum. They lower to
transposes, reshapes and ONE matmul per pair of operands (the kernel the GPU is fast at), with
reductions for indices only one operand has. convolve and correlate (1-D) are one
conv_general_dilated each; cov and corrcoef one matmul of the centred samples."""

from __future__ import annotations

import builtins
import math

import numpy as _np

from vkgrad import primitives as P
from vkgrad.dtypes import HALF_DTYPES, dtype_name
from vkgrad.errors import ArgumentError, DTypeError, ShapeError
from vkgrad.ir.core import is_float
from vkgrad.numpy.creation import zeros
from vkgrad.numpy.dtypes import (as_float, asarray, astype, dtype_of, no_out, promote,
                                 promoted_dtype)
from vkgrad.numpy.linalg import diagonal
from vkgrad.numpy.reductions import average, sum
from vkgrad.numpy.shapes import (atleast_2d, broadcast_arrays, broadcast_to, concatenate,
                                 expand_dims, flip, moveaxis, ravel, reshape, squeeze, stack,
                                 transpose)
from vkgrad.numpy.ufuncs import absolute, clip, divide, multiply, sqrt, subtract
from vkgrad.numpy.util import is_int, normalize_axes, type_string
from vkgrad.tracer.core import user_source

__all__ = ["matmul", "tensordot", "dot", "vdot", "inner", "outer", "einsum", "convolve",
           "correlate", "cov", "corrcoef", "kron", "cross"]


def _operands(a, b, preferred_element_type):
    """(a, b, pet): a and b as arrays, converted to preferred_element_type when given (JAX's
    keyword: the result's dtype; converting the operands first makes a bf16 product's float32
    result keep the float32 accumulator's bits), pet None; except two float16 (or two
    bfloat16) operands with float32 preferred, which stay as they are with pet "f32": the
    matmul primitive's own preferred_element_type, the f32 accumulator as the result (on the
    tensor cores where the Target has cooperative matrices). JAX's `precision=` is accepted
    everywhere and changes nothing: every product here already computes in float32
    (Precision.HIGHEST)."""
    a, b = asarray(a), asarray(b)
    if preferred_element_type is None:
        return a, b, None
    if dtype_of(a) == dtype_of(b) and dtype_of(a) in HALF_DTYPES and \
            dtype_name(preferred_element_type) == "f32":
        return a, b, "f32"
    return astype(a, preferred_element_type), astype(b, preferred_element_type), None


def matmul(a, b, *, precision=None, preferred_element_type=None):
    """numpy's matmul: vectors are promoted to matrices, batch dims broadcast; lowers to the
    2-D / batched 3-D `matmul` primitive. Integers and bools multiply in float32 and the result
    has their dtype (numpy, JAX; exact while sums stay below 2**24). 16-bit operands with
    preferred_element_type float32 give the f32 accumulator as it is (JAX's meaning)."""
    a, b, pet = _operands(a, b, preferred_element_type)
    want = pet or promoted_dtype(a, b)
    dt = dtype_of(a) if pet else want if is_float(want) else "f32"
    if a.ndim == 0 or b.ndim == 0:
        raise ShapeError(f"matmul of {type_string(a)} by {type_string(b)}: operands must be at "
                         "least 1-D (use * to multiply by a scalar)", primitive="matmul",
                         source=user_source())
    ka, kb = a.shape[-1], b.shape[-2] if b.ndim > 1 else b.shape[0]
    if ka != kb:
        raise ShapeError(f"matmul of {type_string(a)} by {type_string(b)}: inner dimensions differ "
                         f"({ka} vs {kb})", primitive="matmul", source=user_source())
    a, b = promote(a, dt), promote(b, dt)
    vec_a, vec_b = a.ndim == 1, b.ndim == 1
    if vec_a:
        a = P.reshape(a, (1, a.shape[0]))
    if vec_b:
        b = P.reshape(b, (b.shape[0], 1))
    m, n = a.shape[-2], b.shape[-1]
    if a.ndim == 2 and b.ndim == 2:
        r = P.matmul(a, b, preferred_element_type=pet)
    elif b.ndim == 2:   # (..., m, k) @ (k, n): one 2-D matmul over the flattened rows
        r = P.reshape(P.matmul(P.reshape(a, (math.prod(a.shape[:-1]), ka)), b,
                               preferred_element_type=pet), a.shape[:-1] + (n,))
    else:
        r = _batched_matmul(a, b, dt, pet)
    if vec_a or vec_b:
        r = P.reshape(r, r.shape[:-2] + ((m,) if not vec_a else ()) + ((n,) if not vec_b else ()))
    return astype(r, want)


def _batched_matmul(a, b, dt, pet=None):
    """(..., m, k) @ (..., k, n) with the batch dims broadcast: the batched 3-D primitive over
    the flattened batch."""
    m, ka, n = a.shape[-2], a.shape[-1], b.shape[-1]
    batch = P.broadcast_shapes("matmul", [P.TensorType(a.shape[:-2], dt),
                                          P.TensorType(b.shape[:-2], dt)])
    if a.shape[:-2] != batch:
        a = P.broadcast_to(a, batch + a.shape[-2:])
    if b.shape[:-2] != batch:
        b = P.broadcast_to(b, batch + b.shape[-2:])
    if len(batch) == 1:
        return P.matmul(a, b, preferred_element_type=pet)
    nb = math.prod(batch)
    r = P.matmul(P.reshape(a, (nb, m, ka)), P.reshape(b, (nb, ka, n)),
                 preferred_element_type=pet)
    return P.reshape(r, batch + (m, n))


def _contract(a, b, ca, cb, pet=None):
    """sum over a's axes ca against b's axes cb: a's other axes, then b's, as in tensordot
    (`pet`: _operands')."""
    fa = [i for i in range(a.ndim) if i not in ca]
    fb = [i for i in range(b.ndim) if i not in cb]
    for i, j in zip(ca, cb):
        if a.shape[i] != b.shape[j]:
            raise ShapeError(f"contraction of {type_string(a)} with {type_string(b)}: axis {i} "
                             f"({a.shape[i]}) does not match axis {j} ({b.shape[j]})",
                             source=user_source())
    out_shape = [a.shape[i] for i in fa] + [b.shape[j] for j in fb]
    k = math.prod(a.shape[i] for i in ca)
    m, n = math.prod(a.shape[i] for i in fa), math.prod(b.shape[j] for j in fb)
    want = pet or promoted_dtype(a, b)
    # ints and bools in f32, returned in their dtype
    dt = dtype_of(a) if pet else want if is_float(want) else "f32"
    a2 = reshape(transpose(promote(a, dt), fa + list(ca)), (m, k))
    b2 = reshape(transpose(promote(b, dt), list(cb) + fb), (k, n))
    return astype(reshape(P.matmul(a2, b2, preferred_element_type=pet), out_shape), want)


def tensordot(a, b, axes=2, *, precision=None, preferred_element_type=None):
    a, b, pet = _operands(a, b, preferred_element_type)
    if isinstance(axes, (int, _np.integer)):
        ca, cb = list(range(a.ndim - axes, a.ndim)), list(range(axes))
    else:
        ca, cb = ([axes[0]] if is_int(axes[0]) else list(axes[0]),
                  [axes[1]] if is_int(axes[1]) else list(axes[1]))
        if len(ca) != len(cb):
            raise ShapeError(f"tensordot: axes {axes} pair unequal numbers of axes",
                             source=user_source())
        ca = [normalize_axes(i, a.ndim)[0] for i in ca]
        cb = [normalize_axes(i, b.ndim)[0] for i in cb]
    return _contract(a, b, ca, cb, pet)


def dot(a, b, out=None, *, precision=None, preferred_element_type=None):
    """numpy's dot: a product with a scalar; 1-D and 2-D as matmul; N-D sums a's last axis
    against b's second-to-last."""
    no_out(out)
    a, b, pet = _operands(a, b, preferred_element_type)
    if a.ndim == 0 or b.ndim == 0:
        return multiply(*((astype(a, pet), astype(b, pet)) if pet else (a, b)))
    if a.ndim <= 2 and b.ndim <= 2:
        return matmul(a, b, preferred_element_type=pet)
    return _contract(a, b, [a.ndim - 1], [builtins.max(b.ndim - 2, 0)], pet)


def vdot(a, b): return dot(ravel(a), ravel(b))


def inner(a, b):
    a, b = asarray(a), asarray(b)
    if a.ndim == 0 or b.ndim == 0:
        return multiply(a, b)
    return _contract(a, b, [a.ndim - 1], [b.ndim - 1])


def outer(a, b, out=None):
    no_out(out)
    a, b = ravel(a), ravel(b)
    return multiply(reshape(a, (-1, 1)), reshape(b, (1, -1)))


def _arranged(x, term, order, shape):
    """x, whose axes `term` labels, with its axes in `order` and reshaped to `shape`."""
    if list(order) != list(term):
        x = transpose(x, [term.index(c) for c in order])
    return reshape(x, shape) if tuple(shape) != tuple(x.shape) else x


def einsum(subscripts, *operands, out=None, optimize=None, dtype=None, precision=None,
           preferred_element_type=None):
    """numpy's einsum, any subscripts (repeated indices take diagonals, '...' broadcasts,
    implicit output when there is no '->'). Lowered to diagonals and sums per operand, then one
    transpose + matmul per pair of operands, left to right; `vg.make_ir` shows the result.
    preferred_element_type (JAX's): the result's dtype; float32 for 16-bit operands keeps
    each product's f32 accumulator (as matmul's); other sums run on f32 values."""
    no_out(out)
    if not isinstance(subscripts, str):   # the interleaved form: op, sublist, op, sublist, ...
        subscripts, operands = _einsum_interleaved((subscripts,) + operands)
    ops = [asarray(o) for o in operands]
    if dtype is not None:
        ops = [astype(o, dtype) for o in ops]
    pet = None
    if preferred_element_type is not None:
        pet = dtype_name(preferred_element_type)
        if not (pet == "f32" and len({dtype_of(o) for o in ops}) == 1 and
                dtype_of(ops[0]) in HALF_DTYPES):
            ops = [astype(o, pet) for o in ops]     # the operands in it (see _operands)
    wide = "f32" if pet == "f32" and dtype_of(ops[0]) in HALF_DTYPES else None
    terms, out_t = _einsum_terms(subscripts, ops)
    sizes = _einsum_sizes(terms, ops)
    for i in range(len(ops)):
        others = "".join(terms[j] for j in range(len(ops)) if j != i) + out_t
        op, t = _einsum_operand(ops[i], terms[i], sizes, others)
        if wide and t != terms[i]:          # a diagonal or a sum: on the f32 values
            op, t = _einsum_operand(astype(ops[i], wide), terms[i], sizes, others)
        ops[i], terms[i] = op, t
    a, ta = ops[0], terms[0]
    for k in range(1, len(ops)):
        a, ta = _einsum_pair(a, ta, ops[k], terms[k], sizes,
                             set(out_t + "".join(terms[k + 1:])), wide)
    lone = [j for j, c in enumerate(ta) if c not in out_t]
    if lone:
        a = sum(astype(a, wide) if wide else a, tuple(lone))
        ta = "".join(c for j, c in enumerate(ta) if j not in lone)
    a = transpose(a, [ta.index(c) for c in out_t]) if ta != out_t else asarray(a)
    return astype(a, pet) if pet else a


def _einsum_interleaved(args):
    """numpy's einsum(a, [0, 1], b, [1, 2], [0, 2]) as ('ab,bc->ac', (a, b)): sublists of ints
    (0-51, each a letter) and Ellipsis, the output's optional."""
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"

    def term(sub):
        try:
            return "".join("..." if k is Ellipsis else letters[int(k)] for k in sub)
        except (TypeError, ValueError, IndexError):
            raise ArgumentError(f"einsum: the sublist {sub!r} must hold ints in 0..51 and "
                                "Ellipsis", source=user_source()) from None
    out = term(args[-1]) if len(args) % 2 else None   # an odd count ends with the output's
    pairs = args[:-1] if len(args) % 2 else args
    ops = pairs[0::2]
    spec = ",".join(term(sub) for sub in pairs[1::2])
    return (spec if out is None else spec + "->" + out), ops


def _einsum_terms(subscripts, ops):
    """Each operand's index letters and the output's, with '...' spelled out (as greek letters)
    and the implicit output (the letters used once, sorted) made explicit."""
    spec = subscripts.replace(" ", "")
    ins, arrow, out_spec = spec.partition("->")
    terms = ins.split(",")
    if len(terms) != len(ops):
        raise ArgumentError(f"einsum: {subscripts!r} names {len(terms)} operand(s), "
                            f"{len(ops)} given", source=user_source())
    pool = [chr(0x3B1 + i) for i in range(24)]   # greek letters stand for the '...' axes
    n_ell = builtins.max([o.ndim - (len(t) - 3) for t, o in zip(terms, ops) if "..." in t],
                         default=0)
    for i, (t, o) in enumerate(zip(terms, ops)):
        if "..." in t:
            k = o.ndim - (len(t) - 3)
            terms[i] = t.replace("...", "".join(pool[n_ell - k:n_ell]))
        if len(terms[i]) != o.ndim or not builtins.all(c.isalpha() for c in terms[i]):
            raise ShapeError(f"einsum: {t!r} does not label the {o.ndim} axes of operand {i} "
                             f"({type_string(o)})", source=user_source())
    if arrow:
        out_t = out_spec.replace("...", "".join(pool[:n_ell]))
    else:
        once = [c for c in sorted(set("".join(terms))) if "".join(terms).count(c) == 1
                and c not in pool]
        out_t = "".join(pool[:n_ell]) + "".join(once)
    if len(set(out_t)) != len(out_t) or builtins.any(c not in "".join(terms) for c in out_t):
        raise ShapeError(f"einsum: output {out_spec!r} repeats an index or names one no operand "
                         "has", source=user_source())
    return terms, out_t


def _einsum_sizes(terms, ops) -> dict:
    """Each index letter's size (1 broadcasts against any size, 0 included)."""
    sizes: dict = {}
    for t, o in zip(terms, ops):
        for c, d in zip(t, o.shape):
            if sizes.get(c, 1) not in (1, d) and d != 1:
                raise ShapeError(f"einsum: index {c!r} has sizes {sizes[c]} and {d}",
                                 source=user_source())
            sizes[c] = d if d != 1 else sizes.get(c, 1)   # 0 too: a size-0 axis stays 0
    return sizes


def _einsum_operand(o, t, sizes, others):
    """One operand before the products: diagonals of its repeated indices, broadcast to the
    indices' sizes, summed over the indices no other operand nor the output has."""
    while len(set(t)) != len(t):
        c = next(c for c in t if t.count(c) > 1)
        p, q = t.index(c), t.index(c, t.index(c) + 1)
        o = diagonal(o, 0, p, q)
        t = "".join(x for j, x in enumerate(t) if j not in (p, q)) + c
    if tuple(o.shape) != tuple(sizes[c] for c in t):
        o = broadcast_to(o, [sizes[c] for c in t])
    lone = [j for j, c in enumerate(t) if c not in others]
    if lone:
        o = sum(o, tuple(lone))
        t = "".join(c for j, c in enumerate(t) if j not in lone)
    return o, t


def _einsum_pair(a, ta, b, tb, sizes, needed, wide=None):
    """a (indices ta) times b (tb), summed over the shared indices not `needed` later: a
    broadcast product when none is summed, else one (batched) matmul (`wide`: einsum's
    preferred_element_type for 16-bit operands, the product's result dtype)."""
    if wide and not [c for c in ta if c in tb and c not in needed]:
        a, b = astype(a, wide), astype(b, wide)
    batch = [c for c in ta if c in tb and c in needed]
    summed = [c for c in ta if c in tb and c not in needed]
    a_only = [c for c in ta if c not in tb]
    b_only = [c for c in tb if c not in ta]
    t = batch + a_only + b_only
    dims = [sizes[c] for c in t]
    if not summed:   # nothing to sum: a broadcast product
        a = multiply(_arranged(a, ta, batch + a_only, dims[:len(batch) + len(a_only)]
                               + [1] * len(b_only)),
                     _arranged(b, tb, batch + b_only, dims[:len(batch)] + [1] * len(a_only)
                               + dims[len(batch) + len(a_only):]))
    else:            # one (batched) matmul: [batch, a_only, summed] @ [batch, summed, b_only]
        nb, m, kk, n = (math.prod(sizes[c] for c in group)
                        for group in (batch, a_only, summed, b_only))
        a3 = _arranged(a, ta, batch + a_only + summed, (nb, m, kk))
        b3 = _arranged(b, tb, batch + summed + b_only, (nb, kk, n))
        a = reshape(matmul(a3[0], b3[0], preferred_element_type=wide) if nb == 1 else
                    matmul(a3, b3, preferred_element_type=wide), dims)
    return a, "".join(t)


def _conv1d(a, v, mode, name):
    """numpy's convolve/correlate as JAX's jnp._conv: the longer operand is the input, the
    shorter the window (flipped for convolve; for correlate the result is reversed when they
    swap); the modes pad the input."""
    a, v = asarray(a), asarray(v)
    if a.ndim != 1 or v.ndim != 1:
        raise ShapeError(f"{name} of {type_string(a)} and {type_string(v)}: both must be 1-D",
                         source=user_source())
    if a.shape[0] == 0 or v.shape[0] == 0:
        raise ShapeError(f"{name} of {type_string(a)} and {type_string(v)}: inputs cannot be "
                         "empty", source=user_source())
    dt = promoted_dtype(a, v)
    dt = dt if is_float(dt) else "f32"
    a, v = promote(a, dt), promote(v, dt)
    reverse = False
    if a.shape[0] < v.shape[0]:
        a, v = v, a
        reverse = name == "correlate"
    if name == "convolve":
        v = flip(v)
    k = v.shape[0]
    pads = {"valid": (0, 0), "same": (k // 2, k - k // 2 - 1), "full": (k - 1, k - 1)}
    if mode not in pads:
        raise ArgumentError(f"{name}: mode must be 'full', 'same' or 'valid', not {mode!r}",
                            source=user_source())
    out = P.conv(reshape(a, (1, 1, a.shape[0])), reshape(v, (1, 1, k)), (1,), (pads[mode],),
                 (1,), (1,))
    out = reshape(out, (out.shape[2],))
    return flip(out) if reverse else out


def convolve(a, v, mode="full"):
    """numpy's discrete linear convolution of two 1-D arrays (modes full, same, valid)."""
    return _conv1d(a, v, mode, "convolve")


def correlate(a, v, mode="valid"):
    """numpy's cross-correlation of two 1-D arrays (modes valid, same, full)."""
    return _conv1d(a, v, mode, "correlate")


def _sample_weights(w, n, what, integer):
    """|w| (numpy raises on negative weights; JAX takes their size), checked to be 1-D with one
    weight per sample (of an integer dtype for fweights)."""
    w = asarray(w)
    if w.ndim != 1 or w.shape[0] != n:
        raise ShapeError(f"cov: {what} must be 1-D with one weight per sample ({n}), got "
                         f"{type_string(w)}", source=user_source())
    if integer and dtype_of(w) != "i32":
        raise DTypeError(f"cov: fweights must be integer, got {type_string(w)}",
                         source=user_source())
    return absolute(w)


def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None):
    """jnp.cov: the covariance matrix of the variables in m's rows (columns with
    rowvar=False), y's appended; frequency and reliability weights as numpy's (their absolute
    values, as JAX's). A single variable gives a scalar."""
    m = as_float(m)
    if y is not None:
        dt = promoted_dtype(m, as_float(y))
        m, y = astype(m, dt), astype(as_float(y), dt)
    for name, v in (("m", m), ("y", y)):
        if v is not None and v.ndim > 2:
            raise ShapeError(f"cov: {name} has more than 2 dimensions: {type_string(v)}",
                             source=user_source())
    x = atleast_2d(m)
    if not rowvar and m.ndim != 1:
        x = transpose(x)
    if x.shape[0] == 0:
        return zeros((0, 0), dtype_of(m))
    if y is not None:
        y = atleast_2d(y)
        if not rowvar and y.shape[0] != 1:
            y = transpose(y)
        x = concatenate([x, y], axis=0)
    if ddof is None:
        ddof = 1 if not bias else 0
    n = x.shape[1]
    w = None if fweights is None else _sample_weights(fweights, n, "fweights", True)
    if aweights is not None:
        aweights = _sample_weights(aweights, n, "aweights", False)
        w = aweights if w is None else multiply(w, aweights)
    avg, w_sum = average(x, axis=1, weights=w, returned=True)
    w_sum = w_sum[0]
    if w is None:
        f = n - ddof
    elif ddof == 0:
        f = w_sum
    elif aweights is None:
        f = subtract(w_sum, ddof)
    else:
        f = subtract(w_sum, divide(multiply(ddof, sum(multiply(w, aweights))), w_sum))
    x = subtract(x, expand_dims(avg, 1))
    xw = x if w is None else multiply(x, w)
    return squeeze(divide(dot(x, transpose(xw)), f))


def corrcoef(x, y=None, rowvar=True):
    """jnp.corrcoef: cov's matrix divided by the outer product of the standard deviations
    (its diagonal's roots), clipped to [-1, 1]; of a single variable, c / c (1, or NaN for a
    constant one)."""
    c = cov(x, y, rowvar)
    if c.ndim == 0:
        return divide(c, c)
    std = sqrt(diagonal(c))
    return clip(divide(divide(c, expand_dims(std, 1)), expand_dims(std, 0)), -1, 1)


def kron(a, b):
    """The Kronecker product: blocks a[i, j] * b, the shorter operand's shape padded with
    leading 1s (an outer product, interleaved and reshaped)."""
    a, b = asarray(a), asarray(b)
    nd = builtins.max(a.ndim, b.ndim)
    sa = (1,) * (nd - a.ndim) + tuple(a.shape)
    sb = (1,) * (nd - b.ndim) + tuple(b.shape)
    a2 = reshape(a, tuple(d for k in sa for d in (k, 1)))
    b2 = reshape(b, tuple(d for k in sb for d in (1, k)))
    return reshape(multiply(a2, b2), tuple(p * q for p, q in zip(sa, sb)))


def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """numpy's cross product of 3-vectors (or 2-vectors: the z component) along axisa / axisb,
    the result's vectors along axisc; `axis` sets all three."""
    if axis is not None:
        axisa = axisb = axisc = axis
    a, b = asarray(a), asarray(b)
    a = moveaxis(a, normalize_axes(axisa, a.ndim)[0], -1)
    b = moveaxis(b, normalize_axes(axisb, b.ndim)[0], -1)
    n, m = a.shape[-1], b.shape[-1]
    if n not in (2, 3) or m not in (2, 3):
        raise ShapeError(f"cross: the vectors have {n} and {m} components; cross takes 2 or 3",
                         source=user_source())
    ca = [a[..., k] for k in range(n)] + ([0.0] if n == 2 else [])
    cb = [b[..., k] for k in range(m)] + ([0.0] if m == 2 else [])
    z = subtract(multiply(ca[0], cb[1]), multiply(ca[1], cb[0]))
    if n == 2 and m == 2:
        return z
    x = subtract(multiply(ca[1], cb[2]), multiply(ca[2], cb[1]))
    y = subtract(multiply(ca[2], cb[0]), multiply(ca[0], cb[2]))
    x, y, z = broadcast_arrays(x, y, z)
    r = stack([x, y, z], -1)
    return moveaxis(r, -1, normalize_axes(axisc, r.ndim)[0])


def vecdot(x1, x2, /, *, axis=-1, precision=None, preferred_element_type=None):
    """The dot products of x1's and x2's vectors along `axis`, the other axes broadcast (the
    array API's vecdot; real arrays, so no conjugate)."""
    a, b = asarray(x1), asarray(x2)
    for x in (a, b):
        if x.ndim == 0:
            raise ShapeError(f"vecdot: operands must have at least one dimension, got "
                             f"{type_string(x)}", source=user_source())
    a, b = moveaxis(a, axis, -1), moveaxis(b, axis, -1)
    if a.shape[-1] != b.shape[-1]:
        raise ShapeError(f"vecdot: the vectors' lengths differ: {type_string(a)} and "
                         f"{type_string(b)} along axis {axis}", source=user_source())
    a, b, pet = _operands(a, b, preferred_element_type)
    return squeeze(matmul(expand_dims(a, -2), expand_dims(b, -1), preferred_element_type=pet),
                   (-2, -1))


def matvec(x1, x2, /):
    """Matrix-vector products x1 (..., n, m) @ x2 (..., m), the batch axes broadcast."""
    a, b = asarray(x1), asarray(x2)
    if a.ndim < 2 or b.ndim < 1:
        raise ShapeError(f"matvec needs a matrix and a vector, got {type_string(a)} and "
                         f"{type_string(b)}", source=user_source())
    return squeeze(matmul(a, expand_dims(b, -1)), -1)


def vecmat(x1, x2, /):
    """Vector-matrix products x1 (..., n) @ x2 (..., n, m), the batch axes broadcast."""
    a, b = asarray(x1), asarray(x2)
    if a.ndim < 1 or b.ndim < 2:
        raise ShapeError(f"vecmat needs a vector and a matrix, got {type_string(a)} and "
                         f"{type_string(b)}", source=user_source())
    return squeeze(matmul(expand_dims(a, -2), b), -2)


def einsum_path(subscripts, *operands, optimize="auto"):
    """numpy's einsum_path on the operands' shapes: (path, description). An order of
    contractions to report; vnp.einsum itself contracts left to right."""
    shapes = [_np.broadcast_to(_np.float32(0), tuple(o.shape) if hasattr(o, "shape")
                               else _np.shape(o)) for o in operands]
    if optimize == "auto":
        optimize = "greedy"
    elif optimize is True:
        optimize = "optimal"
    return _np.einsum_path(subscripts, *shapes, optimize=optimize)


__all__ += ["vecdot", "matvec", "vecmat", "einsum_path"]
