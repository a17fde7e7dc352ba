"""Winograd F(2x2, 3x3) (lowering/winograd.py, kernels_glsl/winograd.comp): which convolutions
the planner sends there (no device), and the path against the float64 interpreter on lavapipe:
the forward, the input gradient (w read flipped and transposed in place) and the weight
gradient (the transposed algebra; x and the output gradient read as views), odd sizes (tiles
past the edge), 'SAME', 'VALID' and explicit (uneven, negative) padding.

Tolerance: F(2, 3)'s transforms add at most 4 input values and 4 products into each transformed
element and halve the weights exactly, so the fp32 result differs from a direct fp32 sum by a few
roundings more per term; relative to the float64 definition both stay within ~1e-6 at these sizes
(C <= 40: sums of <= 360 products of values in [-1, 1]). The check allows 2e-5 of the result's
largest magnitude, the GEMM kernel's own tolerance in tests/test_conv_kernels.py."""

from __future__ import annotations

import numpy as np
import pytest

import vkgrad as vg
import vkgrad.numpy as vnp
from vkgrad import lax, nn
from vkgrad.lowering import conv as conv_lowering
from vkgrad.lowering import winograd
from vkgrad.lowering.conv import plan_conv
from vkgrad.target import Target

RNG = np.random.default_rng(0)
SAME = ((1, 1), (1, 1))


def _f32(*shape):
    return RNG.uniform(-1, 1, shape).astype(np.float32)


def _launches(plan):
    return [launch.name for launch, _ in plan.steps]


def test_the_planner_takes_the_winograd_path_only_from_its_channels_and_for_its_shapes(
        monkeypatch):
    """On the H200's Target from 128 features (its winograd_min_channels: C64 measured slower
    there), not on lavapipe's; WINOGRAD_MIN_CHANNELS overrides the Target."""
    args = ((32, 128, 28, 28), (128, 128, 3, 3), (32, 128, 28, 28), (1, 1), SAME, (1, 1),
            (1, 1), 1)
    c64 = ((32, 64, 56, 56), (64, 64, 3, 3), (32, 64, 56, 56)) + args[3:]
    assert "winograd_in" not in _launches(plan_conv(*c64, target=Target.h200()))
    assert "winograd_in" not in _launches(plan_conv(*args, target=Target.lavapipe()))
    monkeypatch.setattr(conv_lowering, "WINOGRAD_MIN_CHANNELS", 1 << 30)
    assert "winograd_in" not in _launches(plan_conv(*args, target=Target.h200()))
    monkeypatch.setattr(conv_lowering, "WINOGRAD_MIN_CHANNELS", 0)       # the Target's
    plan = plan_conv(*args, target=Target.h200())
    names = _launches(plan)
    assert names[:2] == ["winograd_w", "winograd_in"] and names[-1] == "winograd_out"
    assert all(n.startswith("matmul") for n in names[2:-1])
    (gemm, roles), = plan.steps[2:-1]
    # C128 28x28, N32: 14 x 14 tiles an image, 6272 in all; 16 GEMMs [128, 128] x [128, 6272]
    assert roles == ("wg_u", "wg_v", "wg_m") and gemm.push[:3] == (128, 6272, 128)
    assert {t.role: t.size for t in plan.temps} == {
        "wg_u": 16 * 128 * 128, "wg_v": 16 * 128 * 6272, "wg_m": 16 * 128 * 6272}
    for other in [dict(window_strides=(2, 2)), dict(rhs_dilation=(1, 2)),
                  dict(groups=2, rhs=(128, 64, 3, 3)), dict(rhs=(128, 128, 5, 5))]:
        lhs, rhs, out, strides, pads, ld, rd, groups = args
        kw = dict(lhs=lhs, rhs=rhs, out=out, window_strides=strides, padding=pads,
                  lhs_dilation=ld, rhs_dilation=rd, groups=groups) | other
        assert "winograd_in" not in _launches(plan_conv(**kw, target=Target.h200())), other
    monkeypatch.setattr(conv_lowering, "WINOGRAD_MIN_CHANNELS", 64)
    assert "winograd_in" in _launches(plan_conv(*c64, target=Target.h200()))
    assert not winograd.applies((2, 64, 8, 8), (64, 64, 3, 3), (1, 1), (1, 1), (1, 1), 1, 1, 2)
    # transformed tiles past one lavapipe buffer (128 MiB): the GEMM kernel instead
    big = ((64, 128, 56, 56), (128, 128, 3, 3), (64, 128, 56, 56)) + args[3:]
    assert "winograd_in" in _launches(plan_conv(*big, target=Target.h200()))
    monkeypatch.setattr(conv_lowering, "WINOGRAD_MIN_CHANNELS", 8)
    assert "winograd_in" not in _launches(plan_conv(*big, target=Target.lavapipe()))


def test_odd_sizes_pad_the_gemms_columns_to_vec4_and_few_features_transpose_it():
    """The GEMM's push constants are (m, n, k): [Tp, O] = V^T U for O short of 128, else
    [O, Tp] = U^T V; Tp the tiles rounded up to 4."""
    plan = winograd.plan_winograd((3, 8, 7, 5), (16, 8, 3, 3), (3, 16, 7, 5), SAME)
    gemm, roles = plan.steps[2]
    assert gemm.push[:3] == (36, 16, 8)       # 3 x 4 x 3 = 36 tiles (already a multiple of 4)
    assert roles == ("wg_v", "wg_u", "wg_m")
    plan = winograd.plan_winograd((1, 8, 5, 5), (16, 8, 3, 3), (1, 16, 3, 3), ((0, 0),) * 2)
    assert plan.steps[2][0].push[:3] == (4, 16, 8)       # 2 x 2 = 4 tiles
    plan = winograd.plan_winograd((1, 8, 7, 5), (256, 8, 3, 3), (1, 256, 5, 3), ((0, 0),) * 2)
    assert plan.steps[2][0].push[:3] == (256, 8, 8)      # 3 x 2 = 6 tiles, padded to 8


def _check(f, *args):
    on_gpu = vg.jit(f, backend="vulkan")
    got = on_gpu(*args)
    want = vg.jit(f, backend="numpy")(*vg.tree_util.tree_map(lambda a: a.astype(np.float64),
                                                             args))
    lowered = on_gpu.lower(*args)
    assert lowered.fallback_reason is None
    for g, w in zip(*(x if isinstance(x, tuple) else (x,) for x in (got, want))):
        w = np.asarray(w)
        np.testing.assert_allclose(np.asarray(g), w, rtol=2e-5,
                                   atol=2e-5 * max(1.0, float(np.abs(w).max())))
    return [s.launch.name for s in lowered.lowered.steps]


@pytest.mark.parametrize("lhs,rhs,padding", [
    ((2, 8, 6, 6), (12, 8, 3, 3), "SAME"),
    ((1, 8, 7, 9), (8, 8, 3, 3), "SAME"),                     # odd: tiles past both edges
    ((2, 12, 9, 6), (8, 12, 3, 3), "VALID"),                  # 7 x 4 outputs
    ((1, 8, 5, 8), (20, 8, 3, 3), ((2, 0), (-1, 2))),         # uneven, negative padding
    ((3, 40, 5, 5), (36, 40, 3, 3), ((1, 1), (0, 1))),
    ((1, 8, 5, 7), (128, 8, 3, 3), "SAME"),                  # M = U^T V: O fills 128 rows
])
def test_the_forward_and_input_gradient_match_the_interpreter(lhs, rhs, padding, monkeypatch):
    monkeypatch.setattr(conv_lowering, "WINOGRAD_MIN_CHANNELS", 8)
    conv = lambda x, w: lax.conv_general_dilated(x, w, (1, 1), padding)     # noqa: E731
    x, w = _f32(*lhs), _f32(*rhs)
    names = _check(conv, x, w)
    assert names[0] == "winograd_w" and names[-1] == "winograd_out"
    gy = _f32(*vg.jit(conv, backend="numpy")(x, w).shape)
    dx = lambda x, w, gy: vg.vjp(lambda x: conv(x, w), x)[1](gy)[0]          # noqa: E731
    names = _check(dx, x, w, gy)
    # the input gradient's kernel read flipped and transposed in place: no flip kernel
    assert names[0] == "winograd_w" and names[-1] == "winograd_out", names


def test_a_bias_and_activation_run_in_the_output_transforms_store(monkeypatch):
    monkeypatch.setattr(conv_lowering, "WINOGRAD_MIN_CHANNELS", 8)
    params = {"w": _f32(16, 8, 3, 3), "b": _f32(16)}
    f = lambda p, x: nn.relu(nn.conv(p, x)) * 2.0        # noqa: E731
    x = _f32(2, 8, 7, 5)
    names = _check(f, params, x)
    *_, last = vg.jit(f, backend="vulkan").lower(params, x).lowered.steps
    assert names[-1] == "winograd_out" and "VKG_STORE_B1" in last.launch.hooks
    assert len(names) == 4                              # no kernel of its own for the epilogue


def test_a_training_step_with_winograd_matches_the_interpreter(monkeypatch):
    """Both gradients and a nonlinearity after the convolution."""
    monkeypatch.setattr(conv_lowering, "WINOGRAD_MIN_CHANNELS", 8)
    f = vg.grad(lambda x, w: vnp.sum(vnp.tanh(lax.conv(x, w, (1, 1), "SAME")) ** 2),
                argnums=(0, 1))
    names = _check(f, _f32(2, 8, 7, 6), _f32(16, 8, 3, 3))
    assert names.count("winograd_out") == 2             # the forward and the input gradient


def test_winograds_rounding_is_that_of_the_direct_sum(monkeypatch):
    """At 128 channels (1152 products an output) F(2, 3)'s relative error against float64 is
    within 1e-6, and within twice the GEMM kernel's (its sums of 128 products per transformed
    element round no worse than the direct sums of 1152: measured 3.6e-7 against 5.6e-7)."""
    x, w = _f32(2, 128, 6, 7), _f32(128, 128, 3, 3)
    conv = lambda x, w: lax.conv_general_dilated(x, w, (1, 1), "SAME")    # noqa: E731
    want = np.asarray(vg.jit(conv, backend="numpy")(x.astype(np.float64), w.astype(np.float64)))
    errors = {}
    for channels in (1 << 30, 64):
        monkeypatch.setattr(conv_lowering, "WINOGRAD_MIN_CHANNELS", channels)
        on_gpu = vg.jit(conv, backend="vulkan")
        got = np.asarray(on_gpu(x, w), np.float64)
        first = on_gpu.lower(x, w).lowered.steps[0].launch.name
        errors[first] = np.linalg.norm(got - want) / np.linalg.norm(want)
    assert set(errors) == {"conv_gemm", "winograd_w"}
    assert errors["winograd_w"] < min(1e-6, 2 * errors["conv_gemm"]), errors


@pytest.mark.parametrize("lhs,rhs,padding", [
    ((2, 8, 7, 9), (12, 8, 3, 3), "SAME"),                   # odd: tiles past both edges
    ((3, 8, 6, 5), (8, 8, 3, 3), "VALID"),
    ((1, 8, 5, 8), (20, 8, 3, 3), ((2, 0), (-1, 2))),        # batch 1: no views to read
    ((2, 40, 6, 5), (36, 40, 3, 3), ((1, 1), (0, 1))),
])
def test_the_weight_gradient_matches_the_interpreter(lhs, rhs, padding, monkeypatch):
    monkeypatch.setattr(conv_lowering, "WINOGRAD_WGRAD_MIN_CHANNELS", 8)
    conv = lambda x, w: lax.conv_general_dilated(x, w, (1, 1), padding)     # noqa: E731
    x, w = _f32(*lhs), _f32(*rhs)
    gy = _f32(*vg.jit(conv, backend="numpy")(x, w).shape)
    dw = lambda x, w, gy: vg.vjp(lambda w: conv(x, w), w)[1](gy)[0]          # noqa: E731
    names = _check(dw, x, w, gy)
    assert ["winograd_in", "winograd_dy"] == [n for n in names if n.startswith("winograd")][:2]
    assert "winograd_dw" in names and "conv_gemm" not in names and "conv" not in names


def test_the_h200_splits_the_weight_gradients_tall_gemm_into_one_wave(monkeypatch):
    """C128 28x28 (N32): 16 GEMMs [128, 6272] x [6272, 128] on the large tile, 16 slices each:
    256 workgroups (the matmul's tall-K target, 264), then their sum; C64's on wide64."""
    monkeypatch.setattr(conv_lowering, "WINOGRAD_WGRAD_MIN_CHANNELS", 64)
    dw = ((128, 32, 28, 28), (128, 32, 28, 28), (128, 128, 3, 3), (1, 1), SAME, (1, 1), (1, 1),
          1)
    plan = plan_conv(*dw, target=Target.h200(), x_layout=1, w_layout=2)
    assert _launches(plan) == ["winograd_in", "winograd_dy", "matmul_large_splitk16",
                               "reduce_sum", "winograd_dw"]
    assert plan.steps[2][0].groups == (1, 1, 256)
    dw64 = ((64, 32, 56, 56), (64, 32, 56, 56), (64, 64, 3, 3)) + dw[3:]
    plan = plan_conv(*dw64, target=Target.h200(), x_layout=1, w_layout=2)
    assert _launches(plan)[2].startswith("matmul_wide64_splitk")
    monkeypatch.setattr(conv_lowering, "WINOGRAD_WGRAD_MIN_CHANNELS", 1 << 30)
    assert "winograd_dy" not in _launches(plan_conv(*dw, target=Target.h200(), x_layout=1,
                                                    w_layout=2))


def test_an_epilogue_after_a_weight_gradient_runs_in_its_last_store(monkeypatch):
    """A convolution of the weight gradient's form (x and g viewed [C, N, ...], a 3 x 3
    result) with an activation after it: winograd_dw's store runs it."""
    monkeypatch.setattr(conv_lowering, "WINOGRAD_WGRAD_MIN_CHANNELS", 8)

    def f(x, g):
        t = lambda a: vnp.transpose(a, (1, 0, 2, 3))             # noqa: E731
        return nn.relu(lax.conv_general_dilated(t(x), t(g), (1, 1), SAME)) * 2.0
    x, g = _f32(2, 8, 6, 7), _f32(2, 12, 6, 7)
    names = _check(f, x, g)
    *_, last = vg.jit(f, backend="vulkan").lower(x, g).lowered.steps
    assert last.launch.name == "winograd_dw" and "VKG_STORE_B1" in last.launch.hooks, names
