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
binds the viewed buffer itself. Two more things the copies did go with them:
  * a projection's bias: q, k, v are views of add(M, b), the qkv matmul's M plus its bias,
    which the copy kernel added (the Target keeps epilogues out of matmuls as large as the LM's
    projection); the kernels add b as they load (FA_BIASES), a view of b with batch and row
    strides 0, so M is read in place too;
  * a first derivative's dlse (lse's cotangent) is zeros, which a kernel wrote for the
    backward to read: the backward is told so (DLSE_ZERO) and reads nothing.
And the forward's o: where a loop kernel copies it by transposes and reshapes (attention_block's
[B, L, H*D] for its output projection, when that matmul takes no fused loads: the H200's at
the LM's sizes), the forward writes the copy itself, o in its place there (lower.py binds a
kernel role to such a view of a result); the backward kernels read o there, and kernels that
computed the same copy read it instead.
The IR keeps the attention of views: the interpreter and second derivatives are unchanged.
Where the kernel cannot read the view (a stride or offset not a multiple of 4 floats, D not
contiguous, an axis of several digits), nothing changes. Measured on the plans (counts): the
transformer LM small preset's step (vkgrad.nn.transformer_lm, 4 layers) plans 154 dispatches
on the H200 instead of 166, lavapipe 210 instead of 218. Not yet: dq, dk, dv written into
their place in the projection's gradient [B, L, 3, H, D] (the backward's pad-and-add
concatenation, a loop kernel on the H200).

It runs only where the Target's `attention_layouts_in_place` says so, which no measured device
does: on the H200 the LM small step's flash kernels reading the strided projection (and adding
its bias) ran 122-127 us (forward) and 210-217 (backward) a layer against 78.6 and 168.6 dense,
more than the copies they save, and the step 1.156M tokens/s with the loss read at the end
against 1.189M (target.py has the numbers, lavapipe's too). The tests plan and run it with
the policy on, so it stays correct until a kernel reads these layouts as fast as dense ones.
"""

from __future__ import annotations

import numpy as np

from vkgrad import primitives as P
from vkgrad.ir.core import Eqn, Params, Program, Var
from vkgrad.lowering.contracts import CONTRACTS, Unsupported
from vkgrad.lowering.conv_layouts import (View, _cone, _drop_unread_outputs, _step,
                                          is_zeros,
                                          materialized_values, producers, view_chain)
from vkgrad.passes.base import TargetPass
from vkgrad.passes.dce import dce
from vkgrad.passes.fused_program import anchors, body_of, kind, make_fused, needed
from vkgrad.primitives.compiler import fused_p

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


def broadcast_view(b, shape) -> View:
    """b broadcast to `shape` (numpy's rules) as a view of b's buffer: the axes it lacks or has
    at size 1 step 0."""
    lead = len(shape) - len(b.shape)
    axes = [[(n, 0)] for n in shape[:lead]]
    for n, m, digits in zip(shape[lead:], b.shape, View.of(b.shape).axes):
        axes.append(digits if m == n else [(n, 0)])
    return View(axes)


def find_bias(v, producer, materialized):
    """(M, M's strides, b, b's strides, eqns) when v is a view of add(M reshaped, b), M and b
    materialized and b the same for every batch and row (a projection's bias), and the kernel
    can read both; else None."""
    memo, steps, x = {}, [], v
    while (e := producer.get(x)) is not None and (st := _step(e, x, producer, memo)) is not None:
        x = st[0]
        steps.append((st[1], [e] + st[2]))
        if x in materialized:
            return None                 # a plain view (find_strides)
    a = producer.get(x)
    if a is None or a.prim is not P.add_p:
        return None
    for y, b in (a.inputs, a.inputs[::-1]):
        if not (isinstance(y, Var) and isinstance(b, Var) and b in materialized and
                y.shape == x.shape and b.dtype == y.dtype == v.dtype):
            continue
        m, eqns = y, [a]
        while m not in materialized and (r := producer.get(m)) is not None and \
                r.prim is P.reshape_p:
            eqns.append(r)
            m = r.inputs[0]
        if m not in materialized:
            continue
        mv, bv = View.of(m.shape).reshape(x.shape), broadcast_view(b, x.shape)
        for fn, es in reversed(steps):
            mv, bv = (fn(w) if w is not None else None for w in (mv, bv))
            eqns = es + eqns
        got = [strides(w, v.shape[3]) if w is not None else None for w in (mv, bv)]
        if None not in got and got[1][1] == got[1][3] == 0:
            return m, got[0], b, got[1], eqns
    return None


def placed(e, producer, materialized) -> dict:
    """{role: (buffer, strides, eqns)} of attention eqn e's operands that are views of
    materialized values, and of the biases added to them ("q_bias": q = view of M + view of
    its bias)."""
    out = {}
    for role, v in zip(_OPERANDS[e.prim], e.inputs):
        found = find_strides(v, producer, materialized) if role else None
        if found is not None:
            out[role] = found
        elif role in ("q", "k", "v") and (bias := find_bias(v, producer, materialized)):
            m, st, b, bst, eqns = bias
            out[role], out[role + "_bias"] = (m, st, eqns), (b, bst, [])
    return out


def _zero(v, producer):
    """The eqns that compute v when v is zeros computed from literals alone, else None."""
    return _cone(v, producer) if is_zeros(v, producer) else None


def zero_dlse(e, body) -> bool:
    """Is backward eqn e's dlse (lse's cotangent) zeros computed in `body` (a first
    derivative's)?"""
    return e.prim is P.flash_attention_bwd_p and \
        _zero(e.inputs[6], producers(body.eqns)) is not None


def _folds(e, producer, materialized) -> list:
    """The eqns its fused kernel takes from attention eqn e's operands: the views (and biases)
    it reads in place, a backward's zero dlse."""
    out = [eq for _, _, eqns in placed(e, producer, materialized).values() for eq in eqns]
    if e.prim is P.flash_attention_bwd_p:
        out += _zero(e.inputs[6], producer) or []
    return out


def operand_layouts(e, body) -> dict:
    """{role: (buffer, strides)} of attention eqn e in a fused kernel's body: its operands
    that are views of the body's inputs, and their biases; and a forward's o where the body
    outputs a view of it instead (output_view)."""
    out = {role: (src, st) for role, (src, st, _) in
           placed(e, producers(body.eqns), set(body.inputs)).items()}
    if e.prim is P.flash_attention_p and e.outputs[0] not in body.outputs:
        found = output_view(e.outputs[0], body.eqns, body.outputs)
        if found is not None:
            out["o"] = found[:2]
    return out


def output_view(o, eqns, outputs):
    """(y, o's strides in y's buffer, the eqns from o to y) when `eqns` compute y in `outputs`
    from o alone by transposes and reshapes, a chain the kernel can write o in the place of;
    else None."""
    chain, x = [], o
    while True:
        users = [e for e in eqns if x in e.inputs]
        if x in outputs or len(users) != 1 or users[0].prim not in (P.transpose_p, P.reshape_p):
            break
        chain.append(users[0])
        x = users[0].out
    if not chain or x not in outputs:
        return None
    view = View.of(x.shape)
    for e in reversed(chain):
        view = view.reshape(e.inputs[0].shape) if e.prim is P.reshape_p else \
            view.transpose(tuple(np.argsort(e.params["perm"])))
        if view is None:
            return None
    got = strides(view, o.shape[3])
    return None if got is None else (x, got, chain)


class FoldAttentionLayouts(TargetPass):
    """A flash attention (forward or backward) whose operands are views of materialized values
    gets the views' eqns into its own fused kernel, which reads the values in place; the
    kernels that wrote the views lose those outputs. Where the contract cannot plan it so (a
    layout the kernel cannot read), nothing changes. A kernel-fusion pass (it plans for
    `target`)."""

    name = "fold_attention_layouts"

    def apply(self, program: Program) -> Program:
        if not self.target.attention_layouts_in_place:   # it lost where measured (target.py)
            return program
        program = self._fold(program)
        moved = self._outputs_in_place(program)
        return program if moved is None else self._fold(moved)

    def _fold(self, program: Program) -> Program:
        eqns = list(program.eqns)
        producer, materialized = producers(eqns), materialized_values(program)
        changed = False
        for i, f in enumerate(eqns):
            e = _anchor(f)
            if e is None:
                continue
            folded = _folds(e, producer, materialized)
            if not folded:
                continue
            g = make_fused(list(dict.fromkeys(folded + list(body_of(f).eqns))), f.outputs,
                           "input", like=f)
            if self._plans(g, e):
                eqns[i] = g
                changed = True
        if not changed:
            return program
        return dce.apply(_drop_unread_outputs(program.replace(eqns=tuple(eqns))))

    def _outputs_in_place(self, program: Program) -> Program | None:
        """Each forward whose o a loop kernel of transposes and reshapes copies (vg.nn's
        attention_block: to [B, L, H*D]) writes that kernel's result itself, in o's place there,
        where o's other readers are backward kernels, which read o as a view of it (a loop
        kernel the fold then takes in), and kernels that compute the same copy, which read it
        instead."""
        eqns, moved = list(program.eqns), False
        for f in eqns[:]:
            e = _anchor(f)
            if e is None or e.prim is not P.flash_attention_p or e.outputs[0] not in f.outputs:
                continue
            o = e.outputs[0]
            readers = [r for r in eqns if o in r.inputs]
            copies = [r for r in readers if kind(r) in ("loop", "horizontal") and
                      len(r.outputs) == 1 and set(r.inputs) == {o}]
            found = output_view(o, copies[0].params["body"].eqns, copies[0].outputs) \
                if copies and o not in program.outputs else None
            if found is None:
                continue
            y, _, chain = found
            others = {r: _reading(r, o, chain, y) for r in readers if r is not copies[0] and
                      getattr(_anchor(r), "prim", None) is not P.flash_attention_bwd_p}
            g = make_fused(chain + list(body_of(f).eqns), [y, e.outputs[1]], "input", like=f)
            if None in others.values() or not self._plans(g, e):
                continue
            eqns[eqns.index(f)], moved = g, True
            eqns.remove(copies[0])
            for r in readers:
                if r in others:
                    eqns[eqns.index(r)] = others[r][0]
                elif r is not copies[0]:
                    view = _view_of(y, chain, r)
                    eqns.insert(eqns.index(r), view)
                    eqns[eqns.index(r)] = _substituted(r, o, view.out)
            for z in (z for _, z in others.values() if z is not None):
                # a kernel that wrote the same copy: its readers read y
                eqns = [_substituted(q, z, y) for q in eqns]
                program = program.replace(outputs=tuple(y if v is z else v
                                                        for v in program.outputs))
        return program.replace(eqns=tuple(eqns)) if moved else None

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


def _anchor(f):
    """The attention eqn f computes (on its own, or as its fused kernel's anchor), or None."""
    if f.prim in _OPERANDS:
        return f
    if kind(f) == "input":
        anc = anchors(f.params["body"])
        return anc[0] if len(anc) == 1 and anc[0].prim in _OPERANDS else None
    return None


def _reading(r, o, chain, y):
    """(fused eqn r reading y in place of o, the value it no longer writes or None) where its
    body uses o only for the copy that `chain` (o's transposes and reshapes to y) computes;
    None where it uses o otherwise."""
    if r.prim is not fused_p:
        return None
    body, steps = r.params["body"], []
    x = body.inputs[list(r.inputs).index(o)]
    for c in chain:
        users = [b for b in body.eqns if x in b.inputs]
        if len(users) != 1 or users[0].prim is not c.prim or users[0].params != c.params or \
                x in body.outputs:
            return None
        steps.append(users[0])
        x = users[0].out
    outs = tuple(v for v in body.outputs if v is not x)
    kept = [_substituted(b, x, y) for b in body.eqns if b not in steps]
    return make_fused(needed(kept, outs), outs, kind(r), like=r), (x if x in body.outputs
                                                                   else None)


def _substituted(e, x, y):
    """Eqn e reading y where it read x (in a fused eqn's body too)."""
    if x not in e.inputs:
        return e
    if e.prim is not fused_p:
        return e.replace(inputs=tuple(y if v is x else v for v in e.inputs))
    body = e.params["body"]
    inner = body.inputs[list(e.inputs).index(x)]
    return make_fused([_substituted(b, inner, y) for b in body.eqns], body.outputs, kind(e),
                      like=e)


def _view_of(y, chain, like):
    """A loop kernel computing o again from y, the result that `chain` (o's transposes and
    reshapes) computed: the inverse steps, in reverse."""
    eqns, x = [], y
    for e in reversed(chain):
        src = e.inputs[0]
        params = Params(shape=src.shape) if e.prim is P.reshape_p else \
            Params(perm=tuple(int(i) for i in np.argsort(e.params["perm"])))
        out = Var(src.shape, src.dtype)
        eqns.append(Eqn(e.prim, (x,), params, (out,), like.source, like.phase))
        x = out
    return make_fused(eqns, [x], "loop", like=like)


fold_attention_layouts = FoldAttentionLayouts()
