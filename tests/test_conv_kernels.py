"""The convolution kernel (kernels_glsl/conv.comp, lowering/conv.py): the planner alone, for
lavapipe's and the H200's Targets (no device), and the kernel against the interpreter on
lavapipe: every variant, 1-, 2- and 3-D, groups, dilations, negative padding, split-K, and the
gradients (convolutions run by the same kernel)."""

from __future__ import annotations

import numpy as np
import pytest

import vkgrad as vg
import vkgrad.numpy as vnp
from vkgrad import lax, nn
from vkgrad.lowering import conv as conv_lowering
from vkgrad.lowering.conv import VARIANTS, choose_splits, choose_variant, plan_conv
from vkgrad.target import Target

RNG = np.random.default_rng(0)


def test_the_variant_follows_the_features_per_group_and_the_output_positions():
    """The H200 sweep's choices (lowering/conv.py's table): ResNet forwards at many positions
    on `wide`, their weight gradients (m = C * window) on the 128-row tiles, a depthwise
    forward on `depthwise`, its weight gradient (m = the window) on `wide`."""
    assert choose_variant(64, 100352) == "wide" and choose_variant(16, 100352) == "narrow"
    assert choose_variant(1, 25088) == "depthwise" and choose_variant(1, 9) == "wide"
    assert choose_variant(128, 1152) == "big" and choose_variant(64, 576) == "tall"
    assert choose_variant(256, 6272) == "wide"
    plan = plan_conv((2, 8, 9, 9), (8, 2, 3, 3), (2, 8, 9, 9), (1, 1), ((1, 1), (1, 1)),
                     (1, 1), (1, 1), 4, target=Target.h200())
    (launch, roles), = plan.steps
    assert roles == ("x", "w", "out") and dict(launch.defines)["CV_TX"] == 16
    assert launch.groups == (3, 1, 4)          # 162 positions in 64-row blocks, 4 groups
    plan = plan_conv((2, 8, 9, 9), (8, 1, 3, 3), (2, 8, 9, 9), (1, 1), ((1, 1), (1, 1)),
                     (1, 1), (1, 1), 8, target=Target.h200())
    (launch, _), = plan.steps                  # depthwise: the direct kernel
    assert launch.name == "conv_depthwise" and launch.groups == (6, 1, 1)   # 1296 outputs


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_every_variant_is_a_valid_tile_and_matches_the_interpreter(name, monkeypatch):
    """Each variant on a shape off its tile edges, with both gradients (the sweep in
    bench/bench_conv.py forces variants the same way)."""
    VARIANTS[name].check()
    monkeypatch.setattr(conv_lowering, "choose_variant", lambda og, m: name)
    f = vg.grad(lambda x, w: vnp.sum(vnp.sin(lax.conv(x, w, (2, 1), "SAME"))), argnums=(0, 1))
    lowered = _check(f, _f32(3, 5, 7, 9), _f32(70, 5, 3, 2), rtol=1e-4)
    defines = {dict(s.launch.defines).get("CV_RM") for s in lowered.lowered.steps
               if s.launch.name == "conv"}
    assert defines == {VARIANTS[name].rm}


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
    plan = plan_conv((64, 32, 56, 56), (64, 32, 3, 3), (64, 64, 56, 56), (1, 1),
                     ((1, 1), (1, 1)), (1, 1), (1, 1), 1, target=Target.h200())
    assert len(plan.steps) == 1                # a forward with many workgroups: no split
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
    ((2, 64, 5, 7), (33, 64, 3, 3), dict(window_strides=(1, 2), padding="SAME")),     # wide
    ((1, 12, 9, 10), (12, 4, 2, 3), dict(window_strides=(2, 1), padding=((2, -1), (0, 1)),
                                         rhs_dilation=(2, 1), feature_group_count=3)),  # narrow
    ((2, 7, 19), (14, 1, 4), dict(window_strides=(1,), padding=((3, 0),),
                                  feature_group_count=7)),                            # 2 per group
    ((1, 2, 3, 4, 5), (3, 2, 2, 2, 3), dict(window_strides=(1, 1, 2), padding="SAME",
                                            lhs_dilation=(2, 1, 2))),                 # 3-D
])
def test_the_kernel_matches_the_interpreter(lhs, rhs, kw):
    f = lambda x, w: lax.conv_general_dilated(x, w, **kw)    # noqa: E731
    lowered = _check(f, _f32(*lhs), _f32(*rhs))
    names = [s.launch.name for s in lowered.lowered.steps]
    # one kernel, and on a GPU Target a small output may split K: then a sum of the slices
    # (lowering/conv.py's choose_splits; the H200 splits the first case, lavapipe none)
    assert names[0] == "conv" and names[1:] in ([], ["reduce_sum"]), names


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


@pytest.mark.parametrize("lhs,kw", [
    ((4, 3, 16, 16), dict(window_strides=(1, 1), padding="SAME")),
    ((8, 3, 21, 26), dict(window_strides=(2, 1), padding=((0, 1), (2, 2)), rhs_dilation=(1, 2))),
])
def test_a_depthwise_weight_gradient_with_a_long_window_sums_in_workgroups(lhs, kw):
    """k = batch x output positions (1024 here, 1144 strided): the reduce form, a workgroup
    per weight element (lavapipe's loop limit holds: a few k steps per thread)."""
    conv = lambda x, w: lax.conv_general_dilated(x, w, feature_group_count=3, **kw)  # noqa
    f = vg.grad(lambda x, w: vnp.sum(vnp.sin(conv(x, w))), argnums=1)
    names = [s.launch.name for s in _check(f, _f32(*lhs), _f32(3, 1, 3, 3),
                                           rtol=1e-4).lowered.steps]
    assert "conv_depthwise_reduce" in names and "conv" not in names, names


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
    assert not conv_lowering.takes_hooks(
        vg.make_ir(lambda x, w: lax.conv(x, w, (1,), "VALID"))(
            np.ones((1, 1, 200_000), np.float32), np.ones((1, 1, 100_000), np.float32)).eqns[0],
        Target.lavapipe())                     # split K: no epilogue
