"""Flash attention operands read in place: the pass that hands the kernels
(flash_attention.comp, planned by lowering/attention.py) the views that make their operands.

A model's attention projects once and views the projection per head: vkgrad.nn's
attention_block takes q, k, v = transpose(qkv[:, :, i], (0, 2, 1, 3)) of the [B, L, 3, H, D]
projection, and its backward's dO is the output projection's input gradient [B, L, H*D]
viewed [B, H, L, D]. Copied first, those views cost a dispatch (transposes of every layer,
forward and backward). The flash kernels read any operand [B, H, L, D] at offset + b * stride_b
+ h * stride_h + row * stride_row, D contiguous (attention.OperandLayout: compile-time strides,
the dense default unchanged), so `fold_attention_layouts`, a kernel-fusion pass beside
fold_conv_layouts, moves each such view's eqns (transposes, reshapes, static slices:
conv_layouts.View) into the attention's own fused kernel, whose contract (attention.plan_group)
binds the viewed buffer itself. The IR keeps the attention of views: the interpreter and
second derivatives are unchanged. Where the kernel cannot read the view (a stride or offset not
a multiple of 4 floats, D not contiguous, an axis of several digits), nothing changes.
"""

from __future__ import annotations

import math

import numpy as np

from vkgrad import primitives as P
from vkgrad.ir.core import Eqn, Params, Program, Var
from vkgrad.lowering.contracts import CONTRACTS, Unsupported
from vkgrad.lowering.conv_layouts import (View, _cone, _constant, _drop_unread_outputs,
                                          producers, view_chain)
from vkgrad.passes.base import TargetPass
from vkgrad.passes.dce import dce
from vkgrad.passes.fused_program import Schedule, anchors, body_of, kind, make_fused, needed

# the operands of each attention primitive that a layout may place, in input order
_OPERANDS = {P.flash_attention_p: ("q", "k", "v"),
             P.flash_attention_bwd_p: ("q", "k", "v", "o", None, "do", None)}


def strides(view: View, d: int):
    """(offset, stride_b, stride_h, stride_row) in floats of a [B, H, L, D] view whose rows
    are contiguous and whose other axes step as one, else None."""
    axes, offset = view.key()
    if len(axes) != 4 or any(len(a) > 1 for a in axes) or axes[3] != ((d, 1),):
        return None
    out = (offset,) + tuple(a[0][1] if a else 0 for a in axes[:3])
    return out if all(n >= 0 for n in out) else None


def find_strides(v, producer, materialized):
    """(source, strides, eqns) for the farthest materialized value that v is a readable view of
    (not v itself), else None."""
    for src, view, eqns in reversed(view_chain(v, producer, materialized)[1:]):
        got = strides(view, v.shape[3])
        if got is not None and src.dtype == v.dtype:
            return src, got, eqns
    return None


def _zero(v, producer):
    """The eqns that compute v when v is zeros computed from literals alone, else None."""
    value = _constant(v, producer, {})
    return None if value is None or np.any(value) else _cone(v, producer)


def zero_dlse(e, body) -> bool:
    """Is backward eqn e's dlse (lse's cotangent) zeros computed in `body` (a first
    derivative's)?"""
    return e.prim is P.flash_attention_bwd_p and \
        _zero(e.inputs[6], producers(body.eqns)) is not None


def _folds(e, producer, materialized) -> list:
    """The eqns that make attention eqn e's operands where they are views of materialized
    values, and a backward's zero dlse: the eqns its fused kernel takes."""
    out = []
    for role, v in zip(_OPERANDS[e.prim], e.inputs):
        found = find_strides(v, producer, materialized) if role else None
        if found is not None:
            out += found[2]
    if e.prim is P.flash_attention_bwd_p:
        out += _zero(e.inputs[6], producer) or []
    return out


def operand_layouts(e, body) -> dict:
    """{role: (source, strides)} of attention eqn e in a fused kernel's body: its operands
    that are views of the body's inputs."""
    producer, inputs = producers(body.eqns), set(body.inputs)
    out = {}
    for role, v in zip(_OPERANDS[e.prim], e.inputs):
        found = find_strides(v, producer, inputs) if role else None
        if found is not None:
            out[role] = found[:2]
    return out


# ------------------------------------------------------------ a projection's bias first

_VIEWS = (P.transpose_p, P.reshape_p, P.slice_p)


def _through(v, producer, prims, stop=()):
    """v's source through a chain of `prims` eqns, stopping at the first value in `stop`."""
    while (e := producer.get(v)) is not None and e.prim in prims:
        v = e.inputs[0]
        if v in stop:
            break
    return v


def _row_bias(v, producer, top, materialized):
    """(M, b) when attention operand v is a view of add(M reshaped, b), M a kernel's result,
    b a smaller materialized value (a projection's bias): else None."""
    x = _through(v, producer, _VIEWS, materialized)
    a = producer.get(x)
    if x in materialized or a is None or a.prim is not P.add_p:
        return None
    for y, b in (a.inputs, a.inputs[::-1]):
        m = _through(y, producer, (P.reshape_p,), top) if isinstance(y, Var) else None
        if m in top and isinstance(b, Var) and b in materialized and \
                math.prod(b.shape) < math.prod(x.shape) and math.prod(m.shape) == math.prod(x.shape):
            return m, b
    return None


def _is_bias_add(a, m, b, producer) -> bool:
    """Is eqn a add(m reshaped, b) (either order)?"""
    if a.prim is not P.add_p or b not in a.inputs:
        return False
    y = a.inputs[1] if a.inputs[0] is b else a.inputs[0]
    return isinstance(y, Var) and _through(y, producer, (P.reshape_p,), {m}) is m


def _bias_first(program: Program, m, b, target) -> Program | None:
    """The program with M + b computed once, in the store of M's kernel (fuse_epilogues'
    rules; None where they refuse), and every loop kernel that computed add(M reshaped, b)
    reading that instead."""
    eqns = list(program.eqns)
    x = first = None
    for i, g in enumerate(eqns):
        if kind(g) not in ("loop", "horizontal"):
            continue
        body = g.params["body"]
        producer = producers(body.eqns)
        adds = [a for a in body.eqns if _is_bias_add(a, m, b, producer)
                and a.out not in body.outputs and (x is None or a.out.shape == x.shape)]
        if not adds:
            continue
        if x is None:
            first, x = adds[0], Var(adds[0].out.shape, adds[0].out.dtype)
        subst = {a.out: x for a in adds}
        kept = [e.replace(inputs=tuple(subst.get(v, v) if isinstance(v, Var) else v
                                       for v in e.inputs)) for e in body.eqns if e not in adds]
        eqns[i] = make_fused(needed(kept, body.outputs), body.outputs, kind(g), like=g)
    if x is None:
        return None
    flat = m
    body = []
    if m.shape != x.shape:
        flat = Var(x.shape, m.dtype)
        body.append(Eqn(P.reshape_p, (m,), Params(shape=x.shape), (flat,), first.source,
                        first.phase))
    body.append(first.replace(inputs=tuple(v if v is b else flat for v in first.inputs),
                              outputs=(x,)))
    k = next(i for i, e in enumerate(eqns) if m in e.outputs)
    eqns.insert(k + 1, make_fused(body, [x], "loop", like=first))
    return _merge_epilogue(program.replace(eqns=tuple(eqns)), k, target)


def _merge_epilogue(program: Program, k: int, target) -> Program | None:
    """The program with the loop kernel at k + 1 in the store of kernel k, or None where
    fuse_epilogues would not put it there."""
    from vkgrad.lowering.fusion.epilogues import fuse_epilogues   # (that package imports us)
    ep = fuse_epilogues.for_target(target)
    sched = Schedule(program)
    kern, loop = sched.eqns[k], sched.eqns[k + 1]
    anc = anchors(body_of(kern))
    if kind(kern) not in ("kernel", "input", "output") or len(anc) != 1 or \
            not ep.fits(kern, anc[0], loop, k, sched):
        return None
    eqns = list(sched.eqns)
    eqns[k:k + 2] = [ep.merge(kern, loop, sched)]
    return program.replace(eqns=tuple(eqns))


def biases_first(program: Program, target) -> Program:
    """Each attention operand that is a view of a projection plus its bias, add(M, b), gets
    M + b from the projection's own store (_bias_first), so that it is a view of a
    materialized value the fold can read in place."""
    done = set()
    while True:
        eqns = program.eqns
        producer = producers(eqns)
        top = {o for e in eqns for o in e.outputs}
        materialized = set(program.inputs) | {v for v, _ in program.consts} | top
        found = [mb for e in eqns if e.prim in _OPERANDS
                 for role, v in zip(_OPERANDS[e.prim], e.inputs) if role
                 if (mb := _row_bias(v, producer, top, materialized)) is not None
                 and mb not in done]
        if not found:
            return program
        done.add(found[0])
        program = _bias_first(program, *found[0], target) or program


class FoldAttentionLayouts(TargetPass):
    """A flash attention (forward or backward) whose operands are views of materialized values
    gets the views' eqns into its own fused kernel, which reads the values in place; the
    kernels that wrote the views lose those outputs. Where the contract cannot plan it so (a
    layout the kernel cannot read), nothing changes. A kernel-fusion pass (it plans for
    `target`)."""

    name = "fold_attention_layouts"

    def apply(self, program: Program) -> Program:
        program = biases_first(program, self.target)
        eqns = list(program.eqns)
        producer = producers(eqns)
        materialized = set(program.inputs) | {v for v, _ in program.consts} | \
            {o for e in eqns for o in e.outputs}
        changed = False
        for i, e in enumerate(eqns):
            if e.prim not in _OPERANDS:
                continue
            folded = _folds(e, producer, materialized)
            if not folded:
                continue
            g = make_fused(list(dict.fromkeys(folded)) + [e], e.outputs, "input", like=e)
            if self._plans(g, e):
                eqns[i] = g
                changed = True
        if not changed:
            return program
        return dce.apply(_drop_unread_outputs(program.replace(eqns=tuple(eqns))))

    def _plans(self, g, e) -> bool:
        """Does the contract plan g binding only g's inputs and outputs (every folded view
        read in place)?"""
        body = g.params["body"]
        try:
            planned = CONTRACTS[e.prim].group([e], self.target, lambda v: v, body)
        except Unsupported:
            return False
        bound = set(body.inputs) | set(body.outputs)
        return planned is not None and all(x in bound for x in planned[1].values())


fold_attention_layouts = FoldAttentionLayouts()
