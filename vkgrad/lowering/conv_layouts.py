"""Convolution operands read in place: the layouts conv_gemm.comp reads besides its own, and
the pass that hands them to it.

The VJPs of conv_general_dilated are convolutions of views (primitives/convolution.py, as
JAX's): the input gradient convolves g with the kernel's (O, I) swapped per group and its
window flipped (a transpose and a take per spatial axis), the weight gradient x viewed
[C/G, G*N, ...] with g viewed [O, N, ...] (transposes). Copied first, those views cost a
dispatch each (H200, ResNet-18 step: the flip and transposes 20-120 us per convolution at
bench_conv's shapes). conv_gemm.comp reads them in place instead (its CG_XL and CG_WL
defines): the IR keeps the convolution of views (the interpreter and second derivatives are
unchanged); `fold_conv_layouts`, the last kernel-fusion pass, moves the view's eqns into the
convolution's fused kernel, whose planner (lowering/conv.py, `plan_group`) binds the viewed
buffer itself.

A view is found by its index map: a chain of transposes, reshapes, static slices and flips (a
take whose indices are a constant reversed range) is a strided view of its source, each axis a
list of (size, stride) digits (`View`); an operand takes a layout when its map is the layout's.
    x layouts (CG_XL): 0 x itself; 1 x0 [I, G*N, *sp] viewed [N, G*I, *sp],
        x[n, g*I + c] = x0[c, g*N + n]                          (a weight gradient's input)
    w layouts (CG_WL): 0 w itself; 1 w0 [G*I, Og, *win] with (O, I) swapped per group and
        the window flipped, w[g*Og + f, c, r] = w0[g*I + c, f, R-1-r]  (an input gradient's);
        2 w0 [I, O, *win] with its first two axes swapped, w[f, c, r] = w0[c, f, r]
        (a weight gradient's output gradient)
"""

from __future__ import annotations

import math

import numpy as np

from vkgrad import primitives as P
from vkgrad.ir.core import Literal, Program, Var
from vkgrad.ir.interpreter import impls
from vkgrad.lowering.contracts import CONTRACTS, Unsupported
from vkgrad.passes.base import TargetPass
from vkgrad.passes.dce import dce
from vkgrad.passes.fused_program import body_of, kind, make_fused, needed
from vkgrad.primitives.compiler import fused_p


class View:
    """An array as a strided view of a flat source: element (i_0, i_1, ...) is at source
    offset + sum over axes of the axis's digits: axis a's index in mixed radix, digit j of
    size s_j at stride t_j (outermost first)."""

    def __init__(self, axes, offset=0):
        self.axes, self.offset = tuple(tuple(a) for a in axes), offset

    @staticmethod
    def of(shape) -> "View":
        strides = np.cumprod((1,) + tuple(shape[:0:-1]))[::-1]
        return View([[(n, int(s))] for n, s in zip(shape, strides)])

    def transpose(self, perm) -> "View":
        return View([self.axes[p] for p in perm], self.offset)

    def flip(self, axis) -> "View":
        digits = self.axes[axis]
        axes = list(self.axes)
        axes[axis] = [(n, -t) for n, t in digits]
        return View(axes, self.offset + sum((n - 1) * t for n, t in digits))

    def slice(self, start, limit, step) -> "View | None":
        """x[start:limit:step] per axis (lax.slice); None where an axis of several digits is
        cut."""
        axes, offset = [], self.offset
        for digits, a, b, k in zip(self.axes, start, limit, step):
            n = max(0, -(-(b - a) // k))
            digits = [d for d in digits if d[0] != 1]
            if (a, n, k) == (0, math.prod(d[0] for d in digits), 1):
                axes.append(digits)
            elif len(digits) == 1:
                axes.append([(n, digits[0][1] * k)])
                offset += a * digits[0][1]
            elif not digits and n == 1:
                axes.append([])
            else:
                return None
        return View(axes, offset)

    def reshape(self, shape) -> "View | None":
        digits = [d for a in self.axes for d in a if d[0] != 1]
        axes = []
        for size in shape:
            axis = []
            while size > 1:
                if not digits:
                    return None
                n, t = digits.pop(0)
                if size % n == 0:
                    axis.append((n, t))
                    size //= n
                elif n % size == 0:          # split the digit: its outer part is this axis'
                    axis.append((size, t * (n // size)))
                    digits.insert(0, (n // size, t))
                    size = 1
                else:
                    return None
            axes.append(axis)
        return View(axes, self.offset) if not digits else None

    def key(self) -> tuple:
        """Canonical form: size-1 digits dropped, neighbours that step as one merged."""
        out = []
        for axis in self.axes:
            merged = []
            for n, t in axis:
                if n == 1:
                    continue
                if merged and merged[-1][1] == n * t:
                    m, _ = merged.pop()
                    merged.append((m * n, t))
                else:
                    merged.append((n, t))
            out.append(tuple(merged))
        return tuple(out), self.offset


def _spatial(shape, flipped: bool):
    """The digits of row-major spatial axes (each reversed when `flipped`)."""
    view = View.of(shape)
    for a in range(len(shape)) if flipped else ():
        view = view.flip(a)
    return list(view.axes), view.offset


def x_layouts(x_shape, groups: int) -> dict:
    """{layout: the View it reads} for a convolution input of x_shape [N, G*I, *spatial]."""
    n, c, sp = x_shape[0], x_shape[1], tuple(x_shape[2:])
    i, hw = c // groups, math.prod(sp)
    axes, _ = _spatial(sp, False)
    return {1: View([[(n, hw)], [(groups, n * hw), (i, groups * n * hw)]] + axes)}


def w_layouts(w_shape, groups: int) -> dict:
    """{layout: the View it reads} for a convolution kernel of w_shape [G*Og, I, *window]."""
    o, i, win = w_shape[0], w_shape[1], tuple(w_shape[2:])
    og, r = o // groups, math.prod(win)
    flipped, off = _spatial(win, True)
    plain, _ = _spatial(win, False)
    return {1: View([[(groups, i * og * r), (og, r)], [(i, og * r)]] + flipped, off),
            2: View([[(o, r)], [(i, o * r)]] + plain)}


# ----------------------------------------------------------------------- finding views

def is_zeros(v, producer) -> bool:
    """Whether v is zeros computed from literals alone (a first derivative's unused
    cotangent)."""
    value = _constant(v, producer, {})
    return value is not None and not np.any(value)


def _constant(v, producer, memo):
    """v's value when it is computed from literals and iotas alone, else None."""
    if isinstance(v, Literal):
        return np.asarray(v.value)
    if v in memo:
        return memo[v]
    e = producer.get(v)
    out = None
    if e is not None and e.prim is not fused_p and len(e.outputs) == 1 and (
            e.prim.elementwise or e.prim in (P.iota_p, P.broadcast_to_p, P.reshape_p)):
        args = [_constant(x, producer, memo) for x in e.inputs]
        if all(a is not None for a in args):
            out = np.asarray(impls[e.prim](*args, **e.params))
    memo[v] = out
    return out


def _step(e, v, producer, memo):
    """(operand, view function, index eqns) when eqn e computes v as a view of one operand."""
    if e.prim is P.transpose_p:
        return e.inputs[0], lambda view: view.transpose(e.params["perm"]), []
    if e.prim is P.reshape_p:
        return e.inputs[0], lambda view: view.reshape(e.params["shape"]), []
    if e.prim is P.slice_p:
        return e.inputs[0], lambda view: view.slice(e.params["start"], e.params["limit"],
                                                    e.params["step"]), []
    if e.prim is P.take_p:
        x, idx = e.inputs
        axis, n = e.params["axis"], x.shape[e.params["axis"]]
        value = _constant(idx, producer, memo)
        if value is not None and value.shape == (n,) and \
                np.array_equal(value, np.arange(n)[::-1]):
            return x, lambda view: view.flip(axis), _cone(idx, producer)
    return None


def _cone(v, producer) -> list:
    """The eqns that compute v (a constant: no inputs)."""
    out, todo = [], [v]
    while todo:
        x = todo.pop()
        e = producer.get(x) if isinstance(x, Var) else None
        if e is not None and e not in out:
            out.append(e)
            todo.extend(e.inputs)
    return out


def view_chain(v, producer, materialized) -> list:
    """[(source, View of v over it, eqns from source to v)] for each materialized value that v
    is a view of, nearest first (v itself first)."""
    memo = {}
    steps = []                     # (view function, eqns) from v back towards its sources
    out = [(v, View.of(v.shape), [])]
    while True:
        e = producer.get(v)
        step = _step(e, v, producer, memo) if e is not None else None
        if step is None:
            return out
        src, fn, index_eqns = step
        steps.append((fn, [e] + index_eqns))
        v = src
        if v in materialized:
            view, eqns = View.of(v.shape), []
            for fn_, es in reversed(steps):
                view = fn_(view) if view is not None else None
                eqns = es + eqns
            if view is not None:
                out.append((v, view, eqns))


def find_layout(v, layouts: dict, producer, materialized):
    """(source, layout, eqns) for the farthest source v reads in one of `layouts` or as
    itself (layout 0: a reshape's source), else (v, 0, [])."""
    keys = {0: View.of(v.shape).key(), **{k: view.key() for k, view in layouts.items()}}
    for src, view, eqns in reversed(view_chain(v, producer, materialized)):
        for k, key in keys.items():
            if view.key() == key:
                return src, k, eqns
    return v, 0, []


def producers(eqns) -> dict:
    """{value: the eqn that computes it}, looking into fused eqns' bodies."""
    out = {}
    for e in eqns:
        for o in e.outputs:
            out.setdefault(o, e)
        if e.prim is fused_p:
            for b in e.params["body"].eqns:
                for o in b.outputs:
                    out[o] = b
    return out


def materialized_values(program: Program) -> set:
    """The values a program keeps in buffers: its inputs, constants and top-level results."""
    return set(program.inputs) | {v for v, _ in program.consts} | \
        {o for e in program.eqns for o in e.outputs}


def operand_layouts(e, producer, materialized) -> tuple:
    """((x source, x layout, eqns), (w source, w layout, eqns)) of convolution eqn e."""
    x, w = e.inputs
    groups = e.params["feature_group_count"]
    return (find_layout(x, x_layouts(x.shape, groups), producer, materialized),
            find_layout(w, w_layouts(w.shape, groups), producer, materialized))


# ----------------------------------------------------------------------------- the pass

class FoldConvLayouts(TargetPass):
    """A convolution whose operand is a view of a materialized value (a layout above) gets the
    view's eqns into its own fused kernel, which reads the value in place; the kernels that
    wrote the view lose that output. Where the kernel that would run cannot read the layout
    (its contract's plan_group refuses), nothing changes. A kernel-fusion pass (it plans for
    `target`, as fusion/base.py's HookFusion, whose package imports this module)."""

    name = "fold_conv_layouts"

    def apply(self, program: Program) -> Program:
        eqns = list(program.eqns)
        producer, materialized = producers(eqns), materialized_values(program)
        changed = False
        for i, f in enumerate(eqns):
            conv = self._conv(f)
            if conv is None:
                continue
            folded = [eq for _, layout, eqs in operand_layouts(conv, producer, materialized)
                      if layout for eq in eqs]
            if not folded:
                continue
            body = body_of(f).eqns
            g = make_fused(list(dict.fromkeys(folded)) + list(body), f.outputs,
                           "input" if kind(f) == "kernel" else kind(f), like=f)
            if self._plans(g):
                eqns[i] = g
                changed = True
        if not changed:
            return program
        return dce.apply(_drop_unread_outputs(program.replace(eqns=tuple(eqns))))

    @staticmethod
    def _conv(f):
        """The convolution f computes (on its own, or as its fused kernel's anchor)."""
        if f.prim is P.conv_p:
            return f
        if f.prim is fused_p and kind(f) in ("input", "output"):
            convs = [b for b in f.params["body"].eqns if b.prim is P.conv_p]
            others = [b for b in f.params["body"].eqns if not b.prim.fusible and
                      b.prim is not P.conv_p]
            return convs[0] if len(convs) == 1 and not others else None
        return None

    def _plans(self, g) -> bool:
        """Does the contract plan g reading its operands from g's inputs?"""
        body = g.params["body"]
        anchors = [b for b in body.eqns if not b.prim.fusible]
        try:
            planned = CONTRACTS[P.conv_p].group(anchors, self.target, lambda v: v, body)
        except Unsupported:
            return False
        return planned is not None and \
            all(planned[1][r] in body.inputs for r in ("x", "w"))


def _drop_unread_outputs(program: Program) -> Program:
    """Loop and horizontal kernels without the outputs nothing reads any more (a horizontal
    kernel: the backward's copies of every convolution input transposed for its weight
    gradient, which the weight gradients now read in place)."""
    read = {x for e in program.eqns for x in e.inputs if isinstance(x, Var)} | \
        {o for o in program.outputs if isinstance(o, Var)}
    eqns = []
    for e in program.eqns:
        if kind(e) in ("loop", "horizontal") and not all(o in read for o in e.outputs):
            keep = tuple(o for o in e.outputs if o in read)
            if not keep:
                continue
            e = make_fused(needed(e.params["body"].eqns, keep), keep, kind(e), like=e)
        eqns.append(e)
    return program.replace(eqns=tuple(eqns))


fold_conv_layouts = FoldConvLayouts()
