"""Fusion into hand-written kernels: passes that plan for a Target and ask each kernel's
contract (lowering/contracts.py) what it may take there. They sit in the lowering, as XLA keeps
its GPU fusion decisions in its GPU backend, because what pays depends on the kernel and the
device; the target-independent passes are in vkgrad/passes/.

    widen_halves       converts to and from f32 around a kernel for the 16-bit floats its
                       contract does not take
    fuse_producers     elementwise chains computed in the loads of the kernels they feed
    fuse_epilogues     elementwise work on a kernel's result done in its store
    fuse_multi_output  sibling reductions in one pass; a bias gradient's column sum computed
                       by its weight gradient's matmul
    fuse_rows          reductions over the last axis of one row shape and the loop kernels
                       around them as one kernel, a workgroup per row (a layer norm)
    fuse_horizontal_reductions
                       independent reductions of any shapes as one dispatch (a global norm)
    fold_attention_layouts
                       flash attention's operands read in place where they are views
                       (lowering/attention_layouts.py: the heads of a projection)
    fold_conv_layouts  a convolution's operands read in place where they are views
                       (lowering/conv_layouts.py: the flips and transposes of its gradients)

and one pass that chooses an algorithm before them:

    attention_scores   flash attention that runs faster written out (matmul, softmax, matmul;
                       lowering/attention_scores.py), where the Target says its scores fit
"""

from vkgrad.lowering.fusion.base import HookFusion
from vkgrad.lowering.fusion.epilogues import EpilogueFusion, fuse_epilogues
from vkgrad.lowering.fusion.horizontal_reductions import (HorizontalReductions,
                                                          fuse_horizontal_reductions)
from vkgrad.lowering.fusion.multi_output import MultiOutputFusion, fuse_multi_output
from vkgrad.lowering.fusion.producers import ProducerFusion, fuse_producers
from vkgrad.lowering.fusion.rows import RowFusion, fuse_rows
from vkgrad.lowering.fusion.widen import WidenHalves, widen_halves
from vkgrad.lowering.conv_layouts import fold_conv_layouts  # noqa: E402  (imports fusion.base)
from vkgrad.lowering.attention_scores import attention_scores  # noqa: E402
from vkgrad.lowering.attention_layouts import fold_attention_layouts  # noqa: E402

KERNEL_FUSION_PASSES = {p.name: p for p in (attention_scores, widen_halves, fuse_producers,
                                            fuse_epilogues, fuse_multi_output, fuse_rows,
                                            fuse_horizontal_reductions, fold_attention_layouts,
                                            fold_conv_layouts)}

__all__ = ["HookFusion", "EpilogueFusion", "MultiOutputFusion", "ProducerFusion", "RowFusion",
           "HorizontalReductions", "WidenHalves", "widen_halves", "fuse_producers",
           "fuse_epilogues", "fuse_multi_output", "fuse_rows", "fuse_horizontal_reductions",
           "KERNEL_FUSION_PASSES"]
