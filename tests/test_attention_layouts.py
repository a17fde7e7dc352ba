"""Flash attention reading and writing its operands in other arrays' places
(lowering/attention_layouts.py's pass, attention.OperandLayout, flash_common.glsl's FA_LAYOUTS)
on the real Vulkan device (lavapipe) against the numpy interpreter: values and gradients, causal
and not, Lq != Lk, and the dispatches the fold saves (counts, not times)."""

from __future__ import annotations

import collections
import dataclasses

import numpy as np
import pytest

import vkgrad as vg
import vkgrad.numpy as vnp
from vkgrad import nn
from vkgrad.lowering.attention import OperandLayout, plan_flash_attention, plan_flash_attention_bwd
from vkgrad.lowering.conv_layouts import View
from vkgrad.pipeline import Options, run_stages
from vkgrad.runtime import get_device
from vkgrad.target import Target
from test_conv_layouts import _check     # f's results on lavapipe against the interpreter's

H, D = 2, 16
# The pass runs where a Target's policy says so (off on both measured devices: target.py);
# these tests plan and run with it on
H200, LAVAPIPE = (dataclasses.replace(t, attention_layouts_in_place=True)
                  for t in (Target.h200(), Target.lavapipe()))


@pytest.fixture(autouse=True)
def _in_place(monkeypatch):
    device = get_device()
    monkeypatch.setattr(device, "target", dataclasses.replace(device.target,
                                                              attention_layouts_in_place=True))


def _f32(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _kernels(lowered) -> collections.Counter:
    return collections.Counter(s.launch.name for s in lowered.lowered.steps)


def _flash_defines(lowered) -> list:
    return [dict(s.launch.defines) for s in lowered.lowered.steps
            if s.launch.name.startswith("flash_attn")]


def _heads(x, i):
    """Head-major [B, H, L, D] of the i-th of x [B, L, n, H, D]."""
    return vnp.transpose(x[:, :, i], (0, 2, 1, 3))


def _attention(causal):
    def f(xq, xkv):
        return nn.flash_attention(_heads(xq, 0), _heads(xkv, 0), _heads(xkv, 1), causal=causal)
    return f


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("lq, lk", [(24, 40), (40, 24)])
def test_the_forward_and_its_gradients_read_the_projections_in_place(causal, lq, lk):
    """q of xq [B, Lq, 1, H, D], k and v of xkv [B, Lk, 2, H, D]: every operand of the forward
    and the backward read where it lies, no copy kernel left, the interpreter's values."""
    xq, xkv, g = _f32(2, lq, 1, H, D), _f32(2, lk, 2, H, D, seed=1), _f32(2, H, lq, D, seed=2)
    f = _attention(causal)
    fwd = _check(f, xq, xkv)
    assert set(_kernels(fwd)) == {"flash_attn_fwd"}
    (d,) = _flash_defines(fwd)
    assert (d["HEADS"], d["Q_SR"], d["K_SR"], d["V_AT"]) == ("2u", "8u", "16u", "8u")
    bwd = _check(lambda xq, xkv, g: vg.vjp(f, xq, xkv)[1](g), xq, xkv, g)
    reads = [d for d in _flash_defines(bwd) if d["MODE"] == 3]   # the fused backward kernel
    assert len(reads) == 1 and all(f"{x}_SR" in reads[0] for x in ("Q", "K", "V"))


def _block_loss(causal):
    def loss(p, x):
        return vnp.sum(vnp.sin(nn.attention_block(p, x, H, causal=causal)))
    return loss


@pytest.mark.parametrize("causal", [False, True])
def test_an_attention_blocks_gradients_read_do_in_place(causal):
    """vg.nn.attention_block's gradient: its backward reads dO, the output projection's input
    gradient [B, L, H*D], as [B, H, L, D] where it lies; the interpreter's values."""
    p = nn.init_attention_block(np.random.default_rng(0), H * D)
    x = _f32(2, 24, H * D, seed=3)
    lowered = _check(vg.grad(_block_loss(causal)), p, x, rtol=2e-4)
    reads = [d for d in _flash_defines(lowered) if d["MODE"] in (3, 4)]
    assert reads and all(d.get("DO_SR") == f"{H * D // 4}u" for d in reads)


def test_a_view_the_kernel_cannot_read_stays_a_copy():
    """q at an offset of 2 floats (not a vec4): the fold leaves it to its copy kernel."""
    x = _f32(2, 24, 3 * H * D + 2)

    def f(x):
        qkv = x[:, :, 2:].reshape(2, 24, 3, H, D)
        return nn.flash_attention(_heads(qkv, 0), _heads(qkv, 1), _heads(qkv, 2))
    lowered = _check(f, x)
    assert len(_kernels(lowered)) == 2 and not any("Q_SR" in d for d in _flash_defines(lowered))


def _fewer(prog) -> dict:
    """{Target name: dispatches the fold saves} in the plans of the H200 and of lavapipe."""
    out = {}
    for target in (H200, LAVAPIPE):
        on, off = (len(run_stages(prog, "plan", Options(target=target, disabled=frozenset(d)))
                       ["plan"].steps) for d in ((), ("fold_attention_layouts",)))
        out[target.name.split()[0]] = off - on
    return out


def test_the_fold_saves_the_copy_dispatches_on_both_targets():
    """Attention over projections' heads: without the pass the plans of the H200 and of
    lavapipe copy the heads first (one loop kernel, whose copies the backward reads too), and
    the vjp writes its zero dlse (another); with it both go."""
    xq, xkv, g = _f32(2, 24, 1, H, D), _f32(2, 40, 2, H, D, seed=1), _f32(2, H, 24, D, seed=2)
    f = _attention(True)
    assert _fewer(vg.make_ir(f)(xq, xkv)) == {"NVIDIA": 1, "llvmpipe": 1}
    step = vg.make_ir(lambda xq, xkv, g: vg.vjp(f, xq, xkv)[1](g))(xq, xkv, g)
    assert _fewer(step) == {"NVIDIA": 2, "llvmpipe": 2}


def _lm_loss(p, ids):
    logits = nn.transformer_lm(p, ids[:, :-1], H)
    return nn.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))


def test_a_transformer_lm_step_reads_its_projections_in_place():
    """The tiny transformer LM's gradient (vg.nn.transformer_lm, 2 layers, d 32, 2 heads of
    16): the flash kernels read q, k, v where the qkv projection lies, adding its bias as they
    load, and the backward's dO where the output projection's gradient lies: per layer the
    forward's copy of the heads and the backward's (with its zero dlse) go, but for one
    horizontal kernel that keeps other outputs: 3 dispatches fewer on both Targets' plans; the
    interpreter's gradients."""
    p = nn.init_transformer_lm(np.random.default_rng(0), 64, H * D, 2, 32)
    ids = np.random.default_rng(1).integers(0, 64, (2, 25)).astype(np.int32)
    assert _fewer(vg.make_ir(vg.grad(_lm_loss))(p, ids)) == {"NVIDIA": 3, "llvmpipe": 3}
    lowered = _check(vg.grad(_lm_loss), p, ids, rtol=2e-4)
    modes = collections.Counter(d["MODE"] for d in _flash_defines(lowered)
                                if all(f"{x}_SR" in d and f"{x}_BSH" in d for x in "QKV"))
    assert modes == {0: 2, 3: 2}                  # forward and fused backward, both layers
    delta = [d for d in _flash_defines(lowered) if d["MODE"] == 4]
    assert len(delta) == 2 and all("DO_SR" in d and d["DLSE_ZERO"] == 1 for d in delta)


def test_the_forward_writes_o_where_its_copy_to_the_model_layout_goes():
    """o transposed to [B, L, H*D] (attention_block's input to its output projection), here a
    program's result: the forward writes it there itself (no copy kernel), and the backward
    reads o in that place; the interpreter's values and gradients."""
    q, k, v = _f32(2, H, 24, D), _f32(2, H, 40, D, seed=1), _f32(2, H, 40, D, seed=2)
    g = _f32(2, 24, H * D, seed=3)

    def f(q, k, v):
        o = nn.flash_attention(q, k, v, causal=True)
        return vnp.transpose(o, (0, 2, 1, 3)).reshape(2, 24, H * D)

    def both(q, k, v, g):
        out, pullback = vg.vjp(f, q, k, v)
        return out, pullback(g)
    fwd = _check(f, q, k, v)
    (d,) = _flash_defines(fwd)
    assert set(_kernels(fwd)) == {"flash_attn_fwd"} and (d["O_SR"], d["O_SH"]) == ("8u", "4u")
    step = _check(both, q, k, v, g)
    assert [d.get("O_SR") for d in _flash_defines(step) if d["MODE"] in (0, 4)] == ["8u", "8u"]


def test_the_h200s_plan_of_an_lm_width_step_loses_the_copies_of_q_k_v_and_o():
    """A one-layer transformer LM at the small preset's width (d 256, 8 heads of 32, 256
    tokens, batch 4), planned for the H200, whose projections are too large for fused loads:
    without the pass the forward copies the heads of the qkv projection (adding its bias) and
    o back to [B*L, H*D] for the output projection; with it neither copy runs (2 dispatches
    fewer; lavapipe's plan, whose matmuls read o transposed in their loads, 1)."""
    p = nn.init_transformer_lm(np.random.default_rng(0), 64, 256, 1, 257)
    ids = np.random.default_rng(1).integers(0, 64, (4, 257)).astype(np.int32)

    def loss(p, ids):
        logits = nn.transformer_lm(p, ids[:, :-1], 8)
        return nn.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))
    prog = vg.make_ir(vg.grad(loss))(p, ids)
    assert _fewer(prog) == {"NVIDIA": 2, "llvmpipe": 1}
    plan = run_stages(prog, "plan", Options(target=H200))["plan"]
    (fwd,) = [dict(s.launch.defines) for s in plan.steps if s.launch.name == "flash_attn_fwd"]
    assert (fwd["Q_SR"], fwd["Q_BSH"], fwd["O_SR"]) == ("192u", "8u", "64u")
    (delta,) = [dict(s.launch.defines) for s in plan.steps
                if s.launch.name == "flash_attn_bwd_delta"]
    assert delta["O_SR"] == "64u"         # the backward reads o where the forward wrote it


def test_the_planner_takes_layouts_and_refuses_what_the_kernel_cannot_read():
    """plan_flash_attention(_bwd)'s layouts become each launch's defines for the roles it
    binds (none for dense operands); a stride that is no vec4, or heads that do not divide
    batch * heads, is a clear error."""
    lay = OperandLayout(offset=8, stride_b=96, stride_h=4, stride_row=24)
    plan = plan_flash_attention_bwd(4, 16, 16, 16, causal=True, scale=0.25, heads=2,
                                    layouts={"q": lay, "dq": lay}, target=LAVAPIPE)
    defines = {s[0].name: dict(s[0].defines) for s in plan.steps}
    assert defines["flash_attn_bwd"]["Q_SR"] == "6u" and "DQ_SR" not in defines["flash_attn_bwd"]
    assert defines["flash_attn_bwd_dq_sum"]["DQ_AT"] == "2u"
    assert "HEADS" not in defines["flash_attn_bwd_delta"]
    dense = plan_flash_attention(4, 16, 16, 16, causal=True, scale=0.25, target=LAVAPIPE)
    assert "HEADS" not in dict(dense.steps[0][0].defines)
    with pytest.raises(ValueError, match="multiples of 4 floats"):
        plan_flash_attention(4, 16, 16, 16, causal=False, scale=0.25, heads=2,
                             layouts={"k": OperandLayout(2, 96, 4, 24)})
    with pytest.raises(ValueError, match="must divide"):
        plan_flash_attention(4, 16, 16, 16, causal=False, scale=0.25, heads=3, layouts={"q": lay})
    with pytest.raises(ValueError, match="no layout for role 'lse'"):
        plan_flash_attention(4, 16, 16, 16, causal=False, scale=0.25, heads=2,
                             layouts={"lse": lay})


def test_a_static_slice_is_a_view():
    """conv_layouts.View.slice: x[:, 1:7:2] of [4, 9] is offset 1, strides (9, 2)."""
    view = View.of((4, 9)).slice((0, 1), (4, 7), (1, 2))
    assert view.key() == ((((4, 9),), ((3, 2),)), 1)
    assert View.of((2, 6)).reshape((2, 2, 3)).slice((0, 0, 0), (2, 2, 3), (1, 1, 1)).key() == \
        View.of((2, 6)).reshape((2, 2, 3)).key()


def test_the_devices_own_targets_keep_the_copies():
    """The policy as measured: with the H200's and lavapipe's own Targets the pass changes no
    plan."""
    xq, xkv = _f32(2, 24, 1, H, D), _f32(2, 40, 2, H, D, seed=1)
    prog = vg.make_ir(_attention(True))(xq, xkv)
    for target in (Target.h200(), Target.lavapipe()):
        on, off = (len(run_stages(prog, "plan", Options(target=target, disabled=frozenset(d)))
                       ["plan"].steps) for d in ((), ("fold_attention_layouts",)))
        assert on == off, target.name
