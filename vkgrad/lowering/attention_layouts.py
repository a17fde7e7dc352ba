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

from vkgrad import primitives as P
from vkgrad.ir.core import Program
from vkgrad.lowering.contracts import CONTRACTS, Unsupported
from vkgrad.lowering.conv_layouts import View, _drop_unread_outputs, producers, view_chain
from vkgrad.passes.base import TargetPass
from vkgrad.passes.dce import dce
from vkgrad.passes.fused_program import make_fused

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


def _folds(e, producer, materialized) -> dict:
    """{role: (source, strides, eqns)} of attention eqn e's operands that are views."""
    out = {}
    for role, v in zip(_OPERANDS[e.prim], e.inputs):
        found = find_strides(v, producer, materialized) if role else None
        if found is not None:
            out[role] = found
    return out


def operand_layouts(e, body) -> dict:
    """{role: (source, strides)} of attention eqn e in a fused kernel's body: its operands
    that are views of the body's inputs."""
    return {role: (src, st) for role, (src, st, _) in
            _folds(e, producers(body.eqns), set(body.inputs)).items()}


class FoldAttentionLayouts(TargetPass):
    """A flash attention (forward or backward) whose operands are views of materialized values
    gets the views' eqns into its own fused kernel, which reads the values in place; the
    kernels that wrote the views lose those outputs. Where the contract cannot plan it so (a
    layout the kernel cannot read), nothing changes. A kernel-fusion pass (it plans for
    `target`)."""

    name = "fold_attention_layouts"

    def apply(self, program: Program) -> Program:
        eqns = list(program.eqns)
        producer = producers(eqns)
        materialized = set(program.inputs) | {v for v, _ in program.consts} | \
            {o for e in eqns for o in e.outputs}
        changed = False
        for i, e in enumerate(eqns):
            if e.prim not in _OPERANDS:
                continue
            folded = [eq for _, _, eqs in _folds(e, producer, materialized).values()
                      for eq in eqs]
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
