"""conv_general_dilated: N-d convolution (1-, 2- and 3-d on Vulkan), defined once with its rules.

    conv_general_dilated[window_strides, padding, lhs_dilation, rhs_dilation,
                         feature_group_count](lhs, rhs) -> out
        lhs [N, C, *spatial], rhs [O, C // G, *window], out [N, O, *out_spatial]  (G groups)
        out[n, o, p] = sum_{c, r} lhs'[n, g(o) C/G + c, p * stride + r * rhs_dilation] rhs[o, c, r]
        where lhs' is lhs with lhs_dilation - 1 zeros between its elements, then padded by
        padding[i] = (low, high) on spatial axis i (negative padding crops), and g(o) = o // (O/G).

The primitive holds one layout (N, C, spatial / O, I, spatial): vkgrad.lax.conv_general_dilated
takes JAX's dimension_numbers and transposes to it and back, so the rules and the kernel
(vkgrad/lowering/conv.py) see one layout. Its params are JAX's, resolved: padding as pairs,
every dilation and stride explicit. JAX's batch_group_count is not a param: the weight
gradient of a grouped convolution, which is what JAX uses it for, is written here with
feature groups over a (C/G, G*N) view of the input instead.

VJP rules are convolutions (JAX's _conv_general_dilated_transpose_lhs/_rhs), so second
derivatives come out of the same rules:
    d lhs = conv(g, rhs with spatial axes flipped and (O, I) swapped per group,
                 window_strides=lhs_dilation, lhs_dilation=window_strides, padding: below)
    d rhs = conv(lhs viewed [C/G, G*N, ...], g viewed [O, N, ...],
                 window_strides=rhs_dilation, rhs_dilation=window_strides), viewed back [O, C/G]
"""

from __future__ import annotations

import itertools

import numpy as np

from vkgrad.dtypes import FLOAT_DTYPES, np_dtype
from vkgrad.errors import ShapeError
from vkgrad.ir.core import (Primitive, TensorType, abstract_eval_rules, batching_rules,
                            param_defaults, vjp_rules)
from vkgrad.ir.interpreter import impls
from vkgrad.primitives.lax import (_check_dtypes, _shape, add, broadcast_to, dtype_of, iota,
                                   mapped_size, moveaxis, mul, pad, reshape, slice_, take,
                                   transpose)
from vkgrad.tracer.core import bind, user_source


def dilate(n: int, d: int) -> int:
    """The length of n elements with d - 1 zeros between neighbours."""
    return 0 if n == 0 else (n - 1) * d + 1


def out_spatial(spatial, window, strides, padding, lhs_dilation, rhs_dilation) -> tuple:
    """The result's spatial sizes (window positions that fit the padded, dilated input)."""
    return tuple((dilate(n, ld) + lo + hi - dilate(k, rd)) // s + 1
                 for n, k, s, (lo, hi), ld, rd in
                 zip(spatial, window, strides, padding, lhs_dilation, rhs_dilation))


def check_conv(lhs: tuple, rhs: tuple, strides, padding, lhs_dilation, rhs_dilation, groups,
               lhs_spec: str = "", rhs_spec: str = "") -> None:
    """ShapeError naming the dims, for operands in (N, C, spatial) / (O, I, spatial) order.
    `lhs_spec`/`rhs_spec` are the user's layout letters in that order ("NCHW", "OIHW"; the
    user's dimension_numbers permuted), used to name the dims in the messages."""
    nd = len(lhs) - 2
    lhs_spec = lhs_spec or "NC" + ("DHW"[3 - nd:] if nd <= 3 else "?" * nd)
    rhs_spec = rhs_spec or "OI" + lhs_spec[2:]
    shapes = f"lhs {lhs} ({lhs_spec[:2]} + spatial) and rhs {rhs} ({rhs_spec[:2]} + spatial)"
    if nd < 1 or len(rhs) != len(lhs):
        raise ShapeError(f"conv_general_dilated of {shapes}: both need the same rank, at least 3 "
                         "(batch, feature and one or more spatial dimensions)")
    for name, v in (("window_strides", strides), ("padding", padding),
                    ("lhs_dilation", lhs_dilation), ("rhs_dilation", rhs_dilation)):
        if len(v) != nd:
            raise ShapeError(f"conv_general_dilated: {name} {tuple(v)} needs one entry per "
                             f"spatial dimension ({nd}: {lhs_spec[2:]})")
    for name, v in (("window_strides", strides), ("lhs_dilation", lhs_dilation),
                    ("rhs_dilation", rhs_dilation)):
        if min(v) < 1:
            raise ShapeError(f"conv_general_dilated: {name} {tuple(v)} must be positive")
    n, c = lhs[:2]
    o, i = rhs[:2]
    if groups < 1 or c % groups:
        raise ShapeError(f"conv_general_dilated: feature_group_count={groups} does not divide "
                         f"the input's {c} features (lhs dimension '{lhs_spec[1]}' of {lhs})")
    if o % groups:
        raise ShapeError(f"conv_general_dilated: feature_group_count={groups} does not divide "
                         f"the kernel's {o} output features (rhs dimension '{rhs_spec[0]}' of "
                         f"{rhs})")
    if i * groups != c:
        per = f" ({groups} groups of {c // groups})" if groups > 1 else ""
        raise ShapeError(f"conv_general_dilated: channel mismatch: the input has {c} features"
                         f"{per} (lhs dimension '{lhs_spec[1]}' of {lhs}), the kernel takes {i}"
                         f" (rhs dimension '{rhs_spec[1]}' of {rhs})")
    for a, (x, k, (lo, hi), ld, rd) in enumerate(zip(lhs[2:], rhs[2:], padding, lhs_dilation,
                                                     rhs_dilation)):
        padded, window = dilate(x, ld) + lo + hi, dilate(k, rd)
        if x == 0 or k == 0 or window > padded:
            raise ShapeError(
                f"conv_general_dilated: the window is larger than the padded input in spatial "
                f"dimension '{lhs_spec[2 + a]}': a window of {k} (dilated by {rd}: {window}) "
                f"over {x} input elements (dilated by {ld}, padded by ({lo}, {hi}): {padded})")


conv_p = Primitive("conv_general_dilated", ("pure",))
param_defaults[conv_p] = {"feature_group_count": 1}


def _rule(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
          feature_group_count):
    check_conv(lhs.shape, rhs.shape, window_strides, padding, lhs_dilation, rhs_dilation,
               feature_group_count)
    dtype = _check_dtypes("conv_general_dilated", [lhs, rhs], FLOAT_DTYPES)
    return TensorType((lhs.shape[0], rhs.shape[0]) + out_spatial(
        lhs.shape[2:], rhs.shape[2:], window_strides, padding, lhs_dilation, rhs_dilation),
        dtype)


def _prepared_input(x, padding, lhs_dilation):
    """x (float64) with its spatial axes dilated, then padded (negative padding crops)."""
    lead = (slice(None),) * 2
    if any(d != 1 for d in lhs_dilation):
        xd = np.zeros(x.shape[:2] + tuple(map(dilate, x.shape[2:], lhs_dilation)))
        xd[lead + tuple(slice(None, None, d) for d in lhs_dilation)] = x
        x = xd
    x = np.pad(x, [(0, 0)] * 2 + [(max(lo, 0), max(hi, 0)) for lo, hi in padding])
    return x[lead + tuple(slice(max(-lo, 0), n - max(-hi, 0))
                          for (lo, hi), n in zip(padding, x.shape[2:]))]


def _impl(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
          feature_group_count):
    """The definition, accumulated in float64: one einsum per window position."""
    g = feature_group_count
    x = _prepared_input(lhs.astype(np.float64), padding, lhs_dilation)
    w = rhs.astype(np.float64)
    n, (o, i), window = x.shape[0], w.shape[:2], w.shape[2:]
    outs = tuple((p - dilate(k, rd)) // s + 1 for p, k, s, rd in
                 zip(x.shape[2:], window, window_strides, rhs_dilation))
    xg = x.reshape((n, g, i) + x.shape[2:])
    wg = w.reshape((g, o // g, i) + window)
    out = np.zeros((n, g, o // g) + outs)
    for r in np.ndindex(*window):
        at = tuple(slice(k * rd, k * rd + (m - 1) * s + 1, s)
                   for k, rd, m, s in zip(r, rhs_dilation, outs, window_strides))
        out += np.einsum("ngi...,goi->ngo...", xg[(slice(None),) * 3 + at],
                         wg[(Ellipsis,) + r])
    return out.reshape((n, o) + outs).astype(lhs.dtype)


def _flip_spatial(w):
    """w with every spatial axis (2, 3, ...) reversed: a gather each (slices step forward)."""
    shape = _shape(w)
    for axis in range(2, len(shape)):
        if shape[axis] > 1:
            w = take(w, add(mul(iota((shape[axis],), 0, "i32"), -1), shape[axis] - 1), axis)
    return w


def _lhs_vjp_padding(in_sp, window, strides, out_sp, padding, lhs_dilation, rhs_dilation):
    pads = []
    for n, k, s, m, (lo, _), ld, rd in zip(in_sp, window, strides, out_sp, padding,
                                           lhs_dilation, rhs_dilation):
        before = dilate(k, rd) - lo - 1
        pads.append((before, dilate(n, ld) + dilate(k, rd) - 1 - dilate(m, s) - before))
    return tuple(pads)


def _rhs_vjp_padding(in_sp, window, strides, out_sp, padding, lhs_dilation, rhs_dilation):
    return tuple((lo, dilate(m, s) - dilate(n, ld) + dilate(k, rd) - lo - 1)
                 for n, k, s, m, (lo, _), ld, rd in zip(in_sp, window, strides, out_sp, padding,
                                                        lhs_dilation, rhs_dilation))


def _grad_lhs(g, rhs, lhs_shape, window_strides, padding, lhs_dilation, rhs_dilation, groups):
    """A transposed convolution of g: rhs [G*Og, I, k] becomes [G*I, Og, k], flipped."""
    (o, i), window = _shape(rhs)[:2], tuple(_shape(rhs)[2:])
    nd = len(window)
    w = rhs
    if groups > 1:
        w = reshape(w, (groups, o // groups, i) + window)
        w = reshape(transpose(w, (0, 2, 1) + tuple(range(3, 3 + nd))),
                    (groups * i, o // groups) + window)
    else:
        w = transpose(w, (1, 0) + tuple(range(2, 2 + nd)))
    pads = _lhs_vjp_padding(lhs_shape[2:], window, window_strides, _shape(g)[2:], padding,
                            lhs_dilation, rhs_dilation)
    return conv(g, _flip_spatial(w), lhs_dilation, pads, window_strides, rhs_dilation, groups)


def _grad_rhs(g, lhs, rhs_shape, window_strides, padding, lhs_dilation, rhs_dilation, groups):
    """A convolution of lhs [N, G*Cg, ...] viewed [Cg, G*N, ...] with g viewed [O, N, ...]."""
    (n, c), spatial = _shape(lhs)[:2], tuple(_shape(lhs)[2:])
    nd = len(spatial)
    rest = tuple(range(3, 3 + nd))
    x = reshape(lhs, (n, groups, c // groups) + spatial)
    x = reshape(transpose(x, (2, 1, 0) + rest), (c // groups, groups * n) + spatial)
    gt = transpose(g, (1, 0) + tuple(range(2, 2 + nd)))
    pads = _rhs_vjp_padding(spatial, rhs_shape[2:], window_strides, _shape(g)[2:], padding,
                            lhs_dilation, rhs_dilation)
    out = conv(x, gt, rhs_dilation, pads, lhs_dilation, window_strides, groups)
    return transpose(out, (1, 0) + tuple(range(2, 2 + nd)))


def _vjp(g, ans, lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
         feature_group_count):
    geometry = (window_strides, padding, lhs_dilation, rhs_dilation, feature_group_count)
    return (_grad_lhs(g, rhs, _shape(lhs), *geometry),
            _grad_rhs(g, lhs, _shape(rhs), *geometry))


def _batch(args, dims, **params):
    """lhs mapped: the mapped axis joins N. rhs mapped: it joins O (inside each group). Both:
    every example is a group of its own (feature_group_count times the batch)."""
    (lhs, rhs), (dl, dr) = args, dims
    b, g = mapped_size(args, dims), params["feature_group_count"]
    if dr is None:
        x = moveaxis(lhs, dl, 0)
        s = tuple(_shape(x))
        out = bind(conv_p, reshape(x, (b * s[1],) + s[2:]), rhs, **params)
        return reshape(out, (b, s[1]) + tuple(_shape(out)[1:])), 0
    w = moveaxis(rhs, dr, 0)
    ws = tuple(_shape(w))                        # [B, O, I, *window]
    o, nd = ws[1], len(ws) - 3
    if dl is None:
        w = reshape(w, (b, g, o // g) + ws[2:])
        w = reshape(transpose(w, (1, 0) + tuple(range(2, 4 + nd))), (g * b * o // g,) + ws[2:])
        out = bind(conv_p, lhs, w, **params)     # [N, G*B*Og, *out]
        os_ = tuple(_shape(out))
        out = reshape(out, (os_[0], g, b, o // g) + os_[2:])
        out = transpose(out, (2, 0, 1) + tuple(range(3, 4 + nd)))
        return reshape(out, (b, os_[0], o) + os_[2:]), 0
    x = moveaxis(lhs, dl, 1)                     # [N, B, C, *spatial]
    xs = tuple(_shape(x))
    out = bind(conv_p, reshape(x, (xs[0], b * xs[2]) + xs[3:]),
               reshape(w, (b * o,) + ws[2:]), **{**params, "feature_group_count": b * g})
    os_ = tuple(_shape(out))
    return reshape(out, (os_[0], b, o) + os_[2:]), 1


abstract_eval_rules[conv_p] = _rule
impls[conv_p] = _impl
vjp_rules[conv_p] = _vjp
batching_rules[conv_p] = _batch


def conv(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
         feature_group_count=1):
    """conv_general_dilated in the (N, C, spatial) / (O, I, spatial) layout, every geometry
    param given (vkgrad.lax.conv_general_dilated is the user's function). A transposed
    convolution (lhs dilation, at unit strides and rhs dilation: the input gradient of a
    strided convolution, lax.conv_transpose) is bound as its phases (_phase_conv), which do
    not multiply by the dilation's zeros."""
    params = dict(window_strides=tuple(int(s) for s in window_strides),
                  padding=tuple((int(lo), int(hi)) for lo, hi in padding),
                  lhs_dilation=tuple(int(d) for d in lhs_dilation),
                  rhs_dilation=tuple(int(d) for d in rhs_dilation),
                  feature_group_count=int(feature_group_count))
    if max(params["lhs_dilation"], default=1) > 1 and \
            max(params["window_strides"] + params["rhs_dilation"]) == 1:
        try:
            check_conv(tuple(_shape(lhs)), tuple(_shape(rhs)), *params.values())
        except ShapeError as e:
            raise e.with_context(primitive=conv_p, source=user_source()) from None
        return _phase_conv(lhs, rhs, params["padding"], params["lhs_dilation"],
                           params["feature_group_count"])
    return bind(conv_p, lhs, rhs, **params)


def _phase_conv(x, w, padding, lhs_dilation, groups):
    """A stride-1 convolution of x dilated by lhs_dilation, as one plain convolution per output
    phase. Per spatial axis (input n, window k, padding (lo, hi), dilation d, output L): the
    outputs i = p + d*j of phase p see the window taps r = r0 + d*t, r0 = (lo - p) mod d, at
    input m = j + t + c, c = (p + r0 - lo) / d, so
        out[p + d*j] = sum_t x[j + t + c] w[r0 + d*t]
    a convolution of x with the strided slice w[r0::d], padded by (-c, ...); the phases are
    interleaved back by interior padding and summed (their supports are disjoint)."""
    xs, ws = tuple(_shape(x)), tuple(_shape(w))
    out_sp = tuple(dilate(n, d) + lo + hi - k + 1
                   for n, k, (lo, hi), d in zip(xs[2:], ws[2:], padding, lhs_dilation))
    total = None
    for phase in itertools.product(*(range(d) for d in lhs_dilation)):
        axes = []
        for p, n, k, (lo, _), d, length in zip(phase, xs[2:], ws[2:], padding, lhs_dilation,
                                               out_sp):
            r0 = (lo - p) % d
            taps, outs = max(0, -(-(k - r0) // d)), max(0, -(-(length - p) // d))
            c = (p + r0 - lo) // d
            axes.append((p, r0, taps, outs, c, n, d, length))
        if any(taps == 0 or outs == 0 for _, _, taps, outs, *_ in axes):
            continue                                 # no tap reaches this phase: zeros
        w_p = slice_(w, (0, 0) + tuple(a[1] for a in axes),
                     ws[:2] + tuple(r0 + d * (taps - 1) + 1 for _, r0, taps, _, _, _, d, _ in axes),
                     (1, 1) + tuple(a[6] for a in axes))
        y = bind(conv_p, x, w_p, window_strides=(1,) * len(axes),
                 padding=tuple((-c, outs - 1 + taps - n + c) for _, _, taps, outs, c, n, _, _
                               in axes),
                 lhs_dilation=(1,) * len(axes), rhs_dilation=(1,) * len(axes),
                 feature_group_count=groups)
        y = pad(y, (0, 0) + phase,
                (0, 0) + tuple(length - (p + d * (outs - 1) + 1)
                               for p, _, _, outs, _, _, d, length in axes),
                (0, 0) + tuple(d - 1 for d in lhs_dilation))
        total = y if total is None else add(total, y)
    if total is None:
        return broadcast_to(np_dtype(dtype_of(x)).type(0), (xs[0], ws[0]) + out_sp)
    return total
