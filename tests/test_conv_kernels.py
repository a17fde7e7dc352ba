"""The convolution kernels (kernels_glsl/conv_gemm.comp and conv.comp, lowering/conv.py): the
planner alone, for lavapipe's and the H200's Targets (no device), and the kernels against the
interpreter on lavapipe: every variant of both, 1-, 2- and 3-D, groups, dilations, negative
padding, both k orders of the GEMM kernel, split-K, and the gradients (convolutions run by the
same kernels)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

import vkgrad as vg
import vkgrad.numpy as vnp
from vkgrad import lax, nn
from vkgrad.lowering import conv as conv_lowering
from vkgrad.lowering import conv_depthwise
from vkgrad.lowering.conv import (GEMM_VARIANTS, VARIANTS, choose_splits, choose_variant,
                                  plan_conv)
from vkgrad.pipeline import Options, run_stages
from vkgrad.runtime import get_device
from vkgrad.target import Target

RNG = np.random.default_rng(0)


def test_the_variant_follows_the_features_per_group_and_the_output_positions():
    """From 32 output features per group the GEMM kernel by the rule fitted to the H200 sweep
    (lowering/conv.py): f64w for 64 features where it fills 192 workgroups (the ResNet-18
    step's 32x32 convolutions; not C64 56x56's), f64 with 192 workgroups or more (ResNet's
    stride-1 forwards) or, with fewer, split to fill the GPU where K is long (the step's 8x8
    and 4x4 convolutions, a stride-2 forward at C256 14x14, the weight gradients at C128,
    C256), small for few positions (the step's C64 weight gradients), else the 128 x 128 tile
    split in K where og is a multiple of 128 and K splits into enough workgroups (the step's
    16x16 -> 8x8 forward), f64w for 64 features (a C64 56x56 weight gradient), small for
    short k with few positions (a stride-2 input gradient's phases); fewer features on
    conv.comp's tiles: a depthwise forward on `depthwise`, its weight gradient (m = the
    window) on `wide`."""
    assert choose_variant(64, 65536, 576) == "gemm_f64w"
    assert choose_variant(64, 100352, 576) == "gemm_f64"
    assert choose_variant(256, 6272, 2304) == "gemm_f64"
    assert choose_variant(512, 1024, 4608) == choose_variant(256, 4096, 2304) == "gemm_f64"
    assert choose_variant(256, 1568, 2304) == "gemm_f64"
    assert choose_variant(128, 1152, 25088) == "gemm_f64"
    assert choose_variant(64, 576, 65536) == "gemm_small"
    assert choose_variant(256, 4096, 1152) == "gemm_large"
    assert choose_variant(64, 576, 100352) == "gemm_f64w"
    assert choose_variant(256, 1568, 256) == "gemm_small"
    assert choose_variant(48, 10 ** 6, 432) == "gemm_small"
    assert choose_variant(16, 100352, 144) == "narrow"
    assert choose_variant(1, 25088, 9) == "depthwise" and choose_variant(1, 9, 25088) == "wide"
    plan = plan_conv((2, 8, 9, 9), (8, 2, 3, 3), (2, 8, 9, 9), (1, 1), ((1, 1), (1, 1)),
                     (1, 1), (1, 1), 4, target=Target.h200())
    (launch, roles), = plan.steps
    assert roles == ("x", "w", "out") and dict(launch.defines)["CV_TX"] == 16
    assert launch.groups == (3, 1, 4)          # 162 positions in 64-row blocks, 4 groups
    plan = plan_conv((2, 8, 9, 9), (8, 1, 3, 3), (2, 8, 9, 9), (1, 1), ((1, 1), (1, 1)),
                     (1, 1), (1, 1), 8, target=Target.h200())
    (launch, _), = plan.steps                  # depthwise: the direct kernel
    assert launch.name == "conv_depthwise" and launch.groups == (6, 1, 1)   # 1296 outputs


def _conv_launch(lhs, rhs, out, **kw):
    """(the plan's kernel names, the convolution kernel's groups and defines) on the H200."""
    nd = len(lhs) - 2
    plan = plan_conv(lhs, rhs, out, kw.get("strides", (1,) * nd),
                     kw.get("padding", ((1, 1),) * nd), kw.get("lhs_dilation", (1,) * nd),
                     (1,) * nd, 1, target=Target.h200(), variant=kw.get("variant"))
    names = [launch.name for launch, _ in plan.steps]
    launch, roles = next(s for s in plan.steps if s[0].name in ("conv", "conv_gemm"))
    return names, roles, launch.groups, dict(launch.defines)


def test_the_gemm_kernels_k_order_and_vector_accesses_follow_the_shapes():
    """Channels innermost in k where they come in whole steps and the window is short (a
    3x3: one padding test per step, w relaid out first for vec4 loads), w's storage order
    with vec4 loads where K % 4 == 0 (a weight gradient's long window), vec4 stores where the
    output planes are multiples of 4; rows are features, columns positions; 3-D and
    lhs-dilated convolutions go to conv.comp."""
    names, roles, groups, d = _conv_launch((32, 64, 56, 56), (64, 64, 3, 3), (32, 64, 56, 56))
    assert names == ["conv_relayout", "conv_gemm"] and roles == ("x", "w_cin", "out")
    assert groups == (784, 1, 1)                               # 100352 / 128 positions
    assert (d["CG_BM"], d["CG_BN"], d["CG_CIN"], d["CG_VEC_W"], d["CG_VEC_O"]) == \
        (64, 128, 1, 1, 1)
    names, roles, _, d = _conv_launch((64, 32, 56, 56), (64, 32, 56, 56), (64, 64, 3, 3),
                                      padding=((1, 1), (1, 1)))       # a weight gradient
    assert names == ["conv_gemm", "reduce_sum"] and roles == ("x", "w", "partials")
    assert (d["CG_CIN"], d["CG_VEC_W"], d["CG_VEC_O"]) == (0, 1, 0)
    names, _, _, d = _conv_launch((2, 5, 9, 9), (40, 5, 3, 3), (2, 40, 9, 9))
    assert names == ["conv_gemm"] and (d["CG_CIN"], d["CG_VEC_W"]) == (0, 0)   # K = 45
    names, _, _, d = _conv_launch((2, 8, 4, 4, 4), (40, 8, 3, 3, 3), (2, 40, 4, 4, 4),
                                  variant="gemm_large")
    assert names == ["conv"] and d["CV_TX"] == 16              # 3-D: conv.comp's tile
    names, *_ = _conv_launch((2, 8, 9, 9), (40, 8, 3, 3), (2, 40, 17, 17),
                             lhs_dilation=(2, 2), strides=(1, 1), variant="gemm_large")
    assert names == ["conv"]


@pytest.mark.parametrize("name", sorted(VARIANTS) + sorted(GEMM_VARIANTS))
def test_every_variant_is_a_valid_tile_and_matches_the_interpreter(name, monkeypatch):
    """Each variant on shapes off its tile edges, with both gradients (the sweep in
    bench/bench_conv.py forces variants the same way): 5 input features (k in w's order,
    scalar loads of w, a stride-2 input gradient as phases), then 32 (channels innermost in
    the forward and the input gradient, vec4 loads of w in the weight gradient)."""
    tile = {**VARIANTS, **GEMM_VARIANTS}[name]
    tile.check()
    # conv_gemm.comp: a thread's load slots share their k offsets
    assert name not in GEMM_VARIANTS or tile.threads % (tile.bk // 4) == 0
    monkeypatch.setattr(conv_lowering, "choose_variant", lambda og, m, k=0: name)
    f = vg.grad(lambda x, w: vnp.sum(vnp.sin(lax.conv(x, w, (2, 1), "SAME"))), argnums=(0, 1))
    kernel, key = ("conv_gemm", "CG_BM") if name in GEMM_VARIANTS else ("conv", "CV_RM")
    for x, w in (((3, 5, 7, 9), (70, 5, 3, 2)), ((2, 32, 7, 5), (36, 32, 3, 3))):
        lowered = _check(f, _f32(*x), _f32(*w), rtol=1e-4)
        defines = {dict(s.launch.defines).get(key) for s in lowered.lowered.steps
                   if s.launch.name == kernel}
        assert defines == {tile.bm if kernel == "conv_gemm" else tile.rm}


def test_weight_gradients_split_k_on_a_gpu_and_under_lavapipes_loop_limit():
    """The weight gradient of a 3x3 conv at N32 C64 56x56 is a "conv" with 576 output rows
    and k = 32 * 56 * 56: 9 workgroups unsplit, so the H200 Target splits K; lavapipe splits
    only where a workgroup would loop past its limit."""
    tile = VARIANTS["wide"]
    k = 32 * 56 * 56
    assert choose_splits(9, k, tile, Target.h200()) > 8
    assert choose_splits(9, 64, tile, Target.h200()) == 1        # too few k steps to split
    assert choose_splits(200, 4096, tile, Target.h200()) == 1    # enough workgroups
    assert choose_splits(256, 25088, tile, Target.h200()) == 7   # ... each looping too long
    assert choose_splits(9, 4096, tile, Target.lavapipe()) == 1
    assert choose_splits(9, k, tile, Target.lavapipe()) > 1
    # the GEMM kernel's 64 x 256 tile (128 threads) over the 576 positions: 3 workgroups,
    # split for the matmul's tall-K target of 264 x 256 threads (capped at MAX_SPLITS), or
    # for a lower target given to the planner; slices of at least SPLIT_MIN_STEPS steps
    f64w = GEMM_VARIANTS["gemm_f64w"]
    assert choose_splits(3, k, f64w, Target.h200()) == conv_lowering.MAX_SPLITS == 128
    assert choose_splits(3, k, f64w, Target.h200(), split_threads=132 * 256) == 88
    assert choose_splits(3, 32 * 8 * 10, f64w, Target.h200()) == 10    # 320 steps / 32
    plan = plan_conv((64, 32, 56, 56), (64, 32, 3, 3), (64, 64, 56, 56), (1, 1),
                     ((1, 1), (1, 1)), (1, 1), (1, 1), 1, target=Target.h200())
    assert not any(t.role == "partials" for t in plan.temps)   # many workgroups: no split
    wgrad = plan_conv((64, 32, 56, 56), (64, 32, 56, 56), (64, 64, 3, 3), (1, 1),
                      ((1, 1), (1, 1)), (1, 1), (1, 1), 1, target=Target.h200())
    assert [r for _, r in wgrad.steps][0] == ("x", "w", "partials")
    assert wgrad.steps[-1][1][-1] == "out" and wgrad.temps[0].role == "partials"


def _check(f, *args, rtol=2e-5):
    on_gpu = vg.jit(f, backend="vulkan")
    got, want = on_gpu(*args), vg.jit(f, backend="numpy")(*args)
    assert on_gpu.lower(*args).fallback_reason is None
    for g, w in zip(*(x if isinstance(x, tuple) else (x,) for x in (got, want))):
        w = np.asarray(w)
        np.testing.assert_allclose(np.asarray(g), w, rtol=rtol,
                                   atol=rtol * max(1.0, float(np.abs(w).max())))
    return on_gpu.lower(*args)


def _f32(*shape):
    return RNG.uniform(-1, 1, shape).astype(np.float32)


@pytest.mark.parametrize("lhs,rhs,kw", [
    ((2, 64, 5, 7), (33, 64, 3, 3), dict(window_strides=(1, 2), padding="SAME")),     # gemm
    ((1, 12, 9, 10), (12, 4, 2, 3), dict(window_strides=(2, 1), padding=((2, -1), (0, 1)),
                                         rhs_dilation=(2, 1), feature_group_count=3)),  # narrow
    ((2, 7, 19), (14, 1, 4), dict(window_strides=(1,), padding=((3, 0),),
                                  feature_group_count=7)),                            # 2 per group
    ((1, 2, 3, 4, 5), (3, 2, 2, 2, 3), dict(window_strides=(1, 1, 2), padding="SAME",
                                            lhs_dilation=(2, 1, 2))),                 # 3-D
    ((2, 64, 6, 5), (64, 32, 3, 3), dict(window_strides=(1, 1), padding="SAME",
                                         feature_group_count=2)),         # gemm, 2 groups
    ((3, 16, 11, 9), (40, 16, 3, 3), dict(window_strides=(2, 3), padding=((2, -1), (0, 3)),
                                          rhs_dilation=(2, 1))),   # gemm, channels inner
    ((2, 8, 23), (48, 8, 5), dict(window_strides=(2,), padding=((4, 1),),
                                  rhs_dilation=(3,))),                     # gemm, 1-D
])
def test_the_kernel_matches_the_interpreter(lhs, rhs, kw):
    f = lambda x, w: lax.conv_general_dilated(x, w, **kw)    # noqa: E731
    lowered = _check(f, _f32(*lhs), _f32(*rhs))
    names = [s.launch.name for s in lowered.lowered.steps]
    # one kernel (the GEMM one from 32 features per group, 1-D and 2-D, after w's relayout
    # where k runs channels innermost), and on a GPU Target a small output may split K: then
    # a sum of the slices (lowering/conv.py's choose_splits)
    kernel = "conv_gemm" if rhs[0] // kw.get("feature_group_count", 1) >= 32 and \
        len(lhs) < 5 else "conv"
    names = names[1:] if names[0] == "conv_relayout" else names
    assert names[0] == kernel and names[1:] in ([], ["reduce_sum"]), names


@pytest.mark.parametrize("lhs,rhs,kw", [
    ((2, 7, 19), (7, 1, 4), dict(window_strides=(1,), padding=((3, 0),))),       # causal conv1d
    ((2, 6, 9, 10), (6, 1, 3, 3), dict(window_strides=(2, 1), padding="SAME",
                                       rhs_dilation=(1, 2))),
    ((1, 3, 4, 5, 6), (3, 1, 2, 3, 2), dict(window_strides=(1, 2, 1), padding="SAME",
                                            lhs_dilation=(2, 1, 1))),            # 3-D
])
def test_a_depthwise_convolution_and_its_gradients_run_on_the_direct_kernel(lhs, rhs, kw):
    """One output feature per group from one input feature: conv_depthwise.comp for the
    forward and the input gradient (a depthwise convolution too, with lhs dilation where the
    forward strides); the weight gradient (a window over the batch) is a GEMM for batch > 1."""
    kw = dict(kw, feature_group_count=lhs[1])
    conv = lambda x, w: lax.conv_general_dilated(x, w, **kw)    # noqa: E731
    lowered = _check(conv, _f32(*lhs), _f32(*rhs))
    assert [s.launch.name for s in lowered.lowered.steps] == ["conv_depthwise"]
    f = vg.grad(lambda x, w: vnp.sum(vnp.sin(conv(x, w))), argnums=(0, 1))
    names = [s.launch.name for s in _check(f, _f32(*lhs), _f32(*rhs), rtol=1e-4).lowered.steps]
    # the forward and the input gradient (3-D: phases), and with a batch of 1 the weight
    # gradient too (I = the batch = 1, a window of the output's size)
    assert names.count("conv_depthwise") >= 2 and ("conv" in names or lhs[0] == 1), names


@pytest.mark.parametrize("lhs,window,kw", [
    ((4, 3, 16, 16), (3, 3), dict(window_strides=(1, 1), padding="SAME")),
    ((8, 3, 21, 26), (3, 3), dict(window_strides=(2, 1), padding=((0, 1), (2, 2)),
                                  rhs_dilation=(1, 2))),
    ((3, 5, 400), (4,), dict(window_strides=(1,), padding=((3, 0),))),   # causal conv1d
    ((2, 2, 3, 9, 40), (2, 2, 3), dict(window_strides=(1, 2, 1), padding="SAME")),  # 3-D
])
def test_a_depthwise_weight_gradient_with_a_long_window_sums_in_workgroups(lhs, window, kw):
    """k = batch x output positions (1024 to 2080 here): the split form, a workgroup per
    channel holding all of its weights (9, 4, 12 of them); lavapipe's loop limit holds: a few
    k steps per thread."""
    c = lhs[1]
    conv = lambda x, w: lax.conv_general_dilated(x, w, feature_group_count=c, **kw)  # noqa
    f = vg.grad(lambda x, w: vnp.sum(vnp.sin(conv(x, w))), argnums=1)
    names = [s.launch.name for s in _check(f, _f32(*lhs), _f32(c, 1, *window),
                                           rtol=1e-4).lowered.steps]
    assert "conv_depthwise_split" in names and "conv" not in names, names


@pytest.fixture
def split_k_on_lavapipe(monkeypatch):
    """The device's Target with the GPU's split-K policy: lavapipe's plans split K too."""
    device = get_device()
    monkeypatch.setattr(device, "target", dataclasses.replace(device.target, split_k=True))


@pytest.mark.parametrize("lhs,window,kw,slices", [
    ((24, 3, 16, 16), (3, 3), dict(window_strides=(1, 1), padding="SAME"), 3),
    ((5, 2, 1000), (4,), dict(window_strides=(1,), padding=((3, 0),)), 2),
])
def test_a_depthwise_weight_gradients_k_slices_add_up(lhs, window, kw, slices,
                                                      split_k_on_lavapipe):
    """With the GPU's split-K policy, K = 6144 and 5000 cut into slices of at least
    SPLIT_MIN_K (2048), each slice's partial sums summed after: each slice starts mid-window
    (its first k decoded) and sums only its own."""
    c = lhs[1]
    conv = lambda x, w: lax.conv_general_dilated(x, w, feature_group_count=c, **kw)  # noqa
    f = vg.grad(lambda x, w: vnp.sum(vnp.sin(conv(x, w))), argnums=1)
    lowered = _check(f, _f32(*lhs), _f32(c, 1, *window), rtol=1e-4)
    (split,) = [s.launch for s in lowered.lowered.steps if s.launch.name == "conv_depthwise_split"]
    assert split.groups == (c, slices, 1)
    assert any(s.launch.name == "reduce_sum" for s in lowered.lowered.steps)


def test_a_depthwise_weight_gradient_with_many_weights_a_channel_sums_each_in_a_workgroup():
    """More weights a channel than a thread of the split form holds (a 5x5 window: 25 > 16):
    the reduce form, a workgroup per weight."""
    conv = lambda x, w: lax.conv_general_dilated(                       # noqa: E731
        x, w, (1, 1), "SAME", feature_group_count=2)
    f = vg.grad(lambda x, w: vnp.sum(vnp.sin(conv(x, w))), argnums=1)
    names = [s.launch.name for s in _check(f, _f32(4, 2, 16, 16), _f32(2, 1, 5, 5),
                                           rtol=1e-4).lowered.steps]
    assert "conv_depthwise_reduce" in names and "conv" not in names, names


@pytest.mark.parametrize("lhs,window,pads", [
    ((32, 256, 28, 28), (3, 3), ((1, 1), (1, 1))),      # bench_conv's depthwise_c256_28
    ((8, 1024, 2048), (4,), ((3, 0),)),                  # ... and conv1d_k4_c1024_l2048
])
def test_the_h200_plans_the_benchmarks_depthwise_weight_gradients_in_split_workgroups(
        lhs, window, pads):
    """The planner alone, on the H200's Target: the weight gradients of bench_conv.py's two
    depthwise convolutions run the DW_SPLIT form (a workgroup per channel and slice of k:
    256 channels x 3 slices, 1024 channels unsplit), not the GEMM that measured 3.2 and
    8.1 ms there (BENCHMARKS.md)."""
    c, nd = lhs[1], len(window)
    conv = lambda x, w: lax.conv_general_dilated(                       # noqa: E731
        x, w, (1,) * nd, pads, feature_group_count=c)
    dw = vg.grad(lambda x, w: vnp.sum(conv(x, w)), argnums=1)
    program = vg.make_ir(dw)(vg.ShapeDtype(lhs), vg.ShapeDtype((c, 1) + window))
    plan = run_stages(program, "plan", Options(target=Target.h200()))["plan"]
    (split,) = [s.launch for s in plan.steps if s.launch.name == "conv_depthwise_split"]
    assert split.groups == ((256, 3, 1) if c == 256 else (1024, 1, 1))
    assert not {"conv", "conv_gemm"} & {s.launch.name for s in plan.steps}
    # a higher target for the planner: more slices, each at least SPLIT_MIN_K (2048) long
    k = lhs[0] * math.prod(lhs[2:])
    assert conv_depthwise.split_slices(c, k, Target.h200(), 1056) == (5 if c == 256 else 2)
    assert conv_depthwise.split_slices(c, 4096, Target.h200(), 1056) == 2
    assert conv_depthwise.split_slices(c, k, Target.lavapipe(), 1056) == 1


def test_a_depthwise_kernels_store_runs_the_epilogue():
    f = lambda x, w, b: nn.relu(lax.conv_general_dilated(           # noqa: E731
        x, w, (1, 1), "SAME", feature_group_count=4) + b[None, :, None, None])
    lowered = _check(f, _f32(2, 4, 7, 7), _f32(4, 1, 3, 3), _f32(4))
    (step,) = lowered.lowered.steps
    assert step.launch.name == "conv_depthwise" and "VKG_STORE_B2" in step.launch.hooks


def test_both_gradients_run_on_the_kernel_with_split_k():
    """K = 64 * 16 * 16 for the weight gradient: split under lavapipe's loop limit."""
    f = vg.grad(lambda x, w: vnp.sum(vnp.tanh(lax.conv(x, w, (1, 1), "SAME"))), argnums=(0, 1))
    lowered = _check(f, _f32(64, 8, 16, 16), _f32(8, 8, 3, 3), rtol=1e-4)
    names = [s.launch.name for s in lowered.lowered.steps]
    assert names.count("conv") == 3


@pytest.mark.parametrize("variant", ["gemm_large", "gemm_small"])
@pytest.mark.parametrize("lhs,rhs,kw", [
    ((2, 32, 9, 7), (40, 32, 3, 3), dict(window_strides=(1, 2), padding="SAME")),
    ((3, 16, 30), (36, 16, 5), dict(window_strides=(2,), padding=((3, 1),), rhs_dilation=(2,))),
])
def test_the_gemm_kernels_k_slices_add_up(lhs, rhs, kw, variant, monkeypatch):
    """Split-K (3 slices, forced) on both k orders (the large tile; small takes w's order),
    with both gradients: each slice decodes its first k (mid-window for channels innermost)
    and sums only its own."""
    monkeypatch.setattr(conv_lowering, "choose_variant", lambda og, m, k=0: variant)
    monkeypatch.setattr(conv_lowering, "choose_splits", lambda *a, **k: 3)
    f = vg.grad(lambda x, w: vnp.sum(vnp.sin(lax.conv_general_dilated(x, w, **kw))),
                argnums=(0, 1))
    lowered = _check(f, _f32(*lhs), _f32(*rhs), rtol=1e-4)
    gemm = [s.launch for s in lowered.lowered.steps if s.launch.name == "conv_gemm"]
    orders = {0, 1} if variant in conv_lowering.CIN_TILES else {0}     # small: w's order
    assert {dict(la.defines)["CG_CIN"] for la in gemm} == orders
    assert all(la.groups[2] == 3 for la in gemm)


@pytest.mark.parametrize("variant", ["gemm_f64", "gemm_large"])
def test_a_weight_gradient_runs_with_channels_innermost_over_its_long_window(variant,
                                                                          monkeypatch):
    """A weight gradient's k = (batch, output positions): with channels innermost (the
    batch, 16 of it, in whole steps) over a 9 x 7 window, past CIN_MAX_WINDOW (what
    bench_conv.py's ".cin" labels time), split in K."""
    monkeypatch.setattr(conv_lowering, "CIN_MAX_WINDOW", 1 << 30)
    monkeypatch.setattr(conv_lowering, "choose_variant", lambda og, m, k=0: variant)
    monkeypatch.setattr(conv_lowering, "choose_splits", lambda *a, **k: 3)
    f = vg.grad(lambda x, w: vnp.sum(vnp.sin(lax.conv(x, w, (1, 1), "SAME"))), argnums=1)
    lowered = _check(f, _f32(16, 5, 9, 7), _f32(40, 5, 3, 3), rtol=1e-4)
    (gemm,) = [s.launch for s in lowered.lowered.steps if s.launch.name == "conv_gemm"
               and tuple(s.eqn.outputs[0].shape[2:]) == (3, 3)]      # the weight gradient
    assert dict(gemm.defines)["CG_CIN"] == 1 and gemm.groups[2] == 3


def test_the_gemm_kernels_long_sums_split_under_lavapipes_loop_limit():
    """k = 4 x 140,000 (in w's order) and 140,000 x 4 (channels innermost): 70,000
    steps of 8 in one workgroup each, past lavapipe's 65,535 (which stops the loop: 524,280);
    the planner splits K, and the sums come back whole."""
    for x_shape, w_shape in (((1, 4, 140_000), (32, 4, 140_000)),
                             ((1, 140_000, 4), (32, 140_000, 4))):
        x, w = np.ones(x_shape, np.float32), np.ones(w_shape, np.float32)
        conv = vg.jit(lambda x, w: lax.conv(x, w, (1,), "VALID"), backend="vulkan")
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(conv_lowering, "choose_variant", lambda og, m, k=0: "gemm_large")
            got = conv(x, w)
            names = [s.launch.name for s in conv.lower(x, w).lowered.steps]
            assert names[-2:] == ["conv_gemm", "reduce_sum"], names   # (w relaid out first)
        np.testing.assert_array_equal(np.asarray(got), np.full((1, 32, 1), 560_000, np.float32))


def test_a_long_window_sum_is_exact():
    """The k loop past lavapipe's 65,535 counted iterations (k = 200,000 in one group) comes
    back whole: the planner splits it."""
    x = np.ones((1, 1, 200_000), np.float32)
    w = np.ones((1, 1, 200_000), np.float32)
    got = vg.jit(lambda x, w: lax.conv(x, w, (1,), "VALID"), backend="vulkan")(x, w)
    np.testing.assert_array_equal(np.asarray(got), np.full((1, 1, 1), 200_000, np.float32))


def test_a_bias_and_activation_run_in_the_kernels_store():
    """nn.conv's bias, a relu and a scaling after it: one conv dispatch whose store computes
    them (VKG_STORE_B2), as the interpreter does."""
    params = {"w": _f32(8, 3, 3, 3), "b": _f32(8)}
    lowered = _check(lambda p, x: nn.relu(nn.conv(p, x)) * 2.0, params, _f32(2, 3, 9, 9))
    (step,) = lowered.lowered.steps
    assert step.launch.name == "conv" and "VKG_STORE_B2" in step.launch.hooks
    params = {"w": _f32(32, 16, 3, 3), "b": _f32(32)}      # the GEMM kernel's store
    lowered = _check(lambda p, x: nn.relu(nn.conv(p, x)) * 2.0, params, _f32(2, 16, 6, 7))
    *before, step = lowered.lowered.steps         # (a relayout of w for channels innermost)
    assert all(s.launch.name == "conv_relayout" and not s.launch.hooks for s in before)
    assert step.launch.name == "conv_gemm" and "VKG_STORE_B2" in step.launch.hooks
    assert not conv_lowering.takes_hooks(
        vg.make_ir(lambda x, w: lax.conv(x, w, (1,), "VALID"))(
            np.ones((1, 1, 200_000), np.float32), np.ones((1, 1, 100_000), np.float32)).eqns[0],
        Target.lavapipe())                     # split K: no epilogue


def test_the_benchmarks_step_cases_are_the_resnet_steps_convolutions():
    """bench/bench_conv.py's r18 cases (step_convs, from init_resnet's structure) are exactly
    the convolutions vg.nn.resnet traces to, shapes, strides and 'SAME' pads (a small network
    of the same structure), so the sweep at them times the step's own kernels."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
    import bench_conv
    widths, blocks, batch, size = (8, 16, 32), (1, 2, 1), 2, 16
    weights, stats = nn.init_resnet(np.random.default_rng(0), 3, 10, widths, blocks)
    x = np.zeros((batch, 3, size, size), np.float32)
    prog = vg.make_ir(lambda w, x: nn.resnet(w, stats, x, training=True)[0])(weights, x)
    traced = {(e.inputs[0].shape, e.inputs[1].shape, e.params["window_strides"],
               e.params["padding"]) for e in prog.eqns if e.prim.name == "conv_general_dilated"}
    cases = bench_conv.step_convs(widths, blocks, batch, size)
    assert len(cases) == len(traced) == 8     # stem; s1 per stage; s2 and proj past the first
    assert traced == {((n, c) + sp, (o, c, k, k), (s, s), bench_conv.padding(case))
                      for case in cases for _, n, c, sp, o, k, s, _ in [case]}


def test_the_h200_plans_the_resnet_steps_convolutions_as_their_sweep_chose(monkeypatch):
    """The planner alone on the H200's Target at the ResNet-18 step's shapes (batch 64;
    bench_conv.py's r18_ cases, lowering/conv.py's rules with their times): the 32x32
    forward on f64w unsplit, the 8x8 and 4x4 forwards on f64 split in K into 256 workgroups
    (2 and 4 slices, the split sum after), the 8x8 -> 4x4 block's input gradient's phases on
    small split into 4 each, the C64 weight gradient on small split to 528 workgroups. Those
    8x8 and 4x4 forwards (C256, C512) run on the Winograd path by default (the Target's
    winograd_min_channels, 128: tests/test_conv_winograd.py); the GEMM rules with it off."""
    for lhs in ((64, 256, 8, 8), (64, 512, 4, 4)):
        c = lhs[1]
        p = plan_conv(lhs, (c, c, 3, 3), lhs, (1, 1), ((1, 1), (1, 1)), (1, 1), (1, 1), 1,
                      target=Target.h200())
        assert p.steps[-1][0].name == "winograd_out"
    monkeypatch.setattr(conv_lowering, "WINOGRAD_MIN_CHANNELS", 1 << 30)

    def plan(lhs, w, out, strides=(1, 1), padding=((1, 1), (1, 1)), lhs_dilation=(1, 1)):
        p = plan_conv(lhs, w, out, strides, padding, lhs_dilation, (1, 1), 1,
                      target=Target.h200())
        (launch, _), = [s for s in p.steps if s[0].name == "conv_gemm"]
        d = dict(launch.defines)
        return (d["CG_BM"], d["CG_BN"]), launch.groups, [s[0].name for s in p.steps]

    assert plan((64, 64, 32, 32), (64, 64, 3, 3), (64, 64, 32, 32))[:2] == ((64, 256),
                                                                            (256, 1, 1))
    assert plan((64, 256, 8, 8), (256, 256, 3, 3), (64, 256, 8, 8)) == \
        ((64, 128), (32, 4, 2), ["conv_relayout", "conv_gemm", "reduce_sum"])
    assert plan((64, 512, 4, 4), (512, 512, 3, 3), (64, 512, 4, 4))[:2] == ((64, 128),
                                                                            (8, 8, 4))
    # a phase of the stride-2 input gradient: g [64, 512, 4, 4] with a 2x2 slice of the
    # flipped kernel, unit strides (primitives/convolution.py's _phase_conv)
    assert plan((64, 512, 4, 4), (256, 512, 2, 2), (64, 256, 4, 4),
                padding=((1, 0), (1, 0)))[:2] == ((64, 64), (16, 4, 4))
    # the C64 32x32 weight gradient: x viewed [64, 64, 32, 32] (batch = its channels) with g
    # as the kernel [64, 64, 32, 32], 3x3 out
    assert plan((64, 64, 32, 32), (64, 64, 32, 32), (64, 64, 3, 3))[:2] == ((64, 64),
                                                                            (9, 1, 59))


def test_the_tall_k_wave_rule_splits_a_weight_gradient_into_whole_waves(monkeypatch):
    """On a GPU Target (lowering/conv.py's WGRAD_WAVE_GROUPS, its H200 times beside it): C128
    28x28's weight gradient (og 128, m = 1152 positions, k = 25088) on the 128 x 128 tile, 9
    blocks x floor(264 / 9) = 29 slices, 261 workgroups in one H200 wave of 264, where the
    f64-fill rule plans 18 x 15 = 270; with WGRAD_WAVE_ROWS 64 on f64 (18 blocks x 22 = 396);
    not for a stride-2 forward's (a dilated window), nor on lavapipe (no split-K)."""
    dw = ((128, 32, 28, 28), (128, 32, 28, 28), (128, 128, 3, 3), (1, 1), ((1, 1), (1, 1)),
          (1, 1), (1, 1), 1)

    def gemm(*args, target=Target.h200()):
        (launch, _), *_ = plan_conv(*args, target=target, x_layout=1, w_layout=2).steps
        return launch.groups, dict(launch.defines)["CG_BM"]
    assert gemm(*dw) == ((9, 1, 29), 128)
    dilated = ((128, 32, 28, 28), (128, 32, 14, 14), (128, 128, 3, 3), (1, 1),
               ((1, 0), (1, 0)), (1, 1), (2, 2), 1)         # C128 28x28 stride 2's
    assert gemm(*dilated)[1] == 64
    assert gemm(*dw, target=Target.lavapipe())[1] == 64             # choose_variant's f64
    monkeypatch.setattr(conv_lowering, "WGRAD_WAVE_ROWS", 64)      # f64, 3 a multiprocessor
    monkeypatch.setattr(conv_lowering, "WGRAD_WAVE_GROUPS", 396)
    assert gemm(*dw) == ((9, 2, 22), 64)
    monkeypatch.setattr(conv_lowering, "WGRAD_WAVE_GROUPS", 0)
    assert gemm(*dw) == ((9, 2, 15), 64)                            # the f64-fill rule
