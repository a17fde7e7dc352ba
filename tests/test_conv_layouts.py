"""Convolution operands read in place (lowering/conv_layouts.py, conv_gemm.comp's CG_XL and
CG_WL): the views' index maps against numpy's, and the gradients' kernels, which read the
kernel's flip and transpose (input gradient) and the transposes of x and g (weight gradient)
without a dispatch of their own, against the interpreter on lavapipe: strides, dilations,
groups, odd sizes, 1-D, both k orders, w relaid out or read in place."""

from __future__ import annotations

import collections

import numpy as np
import pytest

import vkgrad as vg
import vkgrad.numpy as vnp
from vkgrad import lax, nn
from vkgrad.lowering import conv as conv_lowering
from vkgrad.ir.parser import parse_program
from vkgrad.ir.verifier import verify
from vkgrad.lowering.conv_layouts import View, w_layouts, x_layouts
from vkgrad.pipeline import PASSES, Options, run_stages
from vkgrad.target import Target
from vkgrad.tree_util import tree_leaves

RNG = np.random.default_rng(3)


def _f32(*shape):
    return RNG.uniform(-1, 1, shape).astype(np.float32)


def _addresses(view, shape):
    """Every element's source offset under `view`, as an array of `shape`."""
    out = np.full(shape, view.offset)
    for a, digits in enumerate(view.axes):
        idx = np.arange(shape[a])
        off = np.zeros(shape[a], np.int64)
        for n, t in reversed(digits):
            off += (idx % n) * t
            idx //= n
        out = out + off.reshape([-1 if b == a else 1 for b in range(len(shape))])
    return out


def test_a_chain_of_transposes_reshapes_and_flips_is_the_view_numpy_computes():
    """The view of a chain, element by element, is where numpy's same chain finds it."""
    src = np.arange(2 * 3 * 4 * 5).reshape(2, 3, 4, 5)
    chains = [
        [("transpose", (1, 0, 2, 3)), ("flip", 2), ("flip", 3)],
        [("reshape", (2, 1, 3, 4, 5)), ("transpose", (2, 1, 0, 3, 4)), ("reshape", (3, 2, 4, 5))],
        [("reshape", (6, 20)), ("transpose", (1, 0)), ("reshape", (4, 5, 2, 3)), ("flip", 0)],
        [("flip", 1), ("reshape", (6, 4, 5)), ("transpose", (2, 0, 1)), ("reshape", (10, 12))],
    ]
    for chain in chains:
        view, arr = View.of(src.shape), src
        for op, arg in chain:
            view = getattr(view, op)(arg) if op != "transpose" else view.transpose(arg)
            arr = {"transpose": lambda a: a.transpose(arg), "flip": lambda a: np.flip(a, arg),
                   "reshape": lambda a: a.reshape(arg)}[op](arr)
            assert view is not None, chain
        np.testing.assert_array_equal(_addresses(view, arr.shape), arr)


def test_a_reshape_that_no_strides_can_express_is_no_view():
    """Axes merge as digits (a transposed [6, 4] flattened is a view), but 6 = 2 x 3 digits
    regrouped as 3 x 2 is not."""
    assert View.of((4, 6)).transpose((1, 0)).reshape((24,)) is not None
    assert View.of((2, 3, 20)).transpose((2, 0, 1)).reshape((20, 3, 2)) is None


def test_the_layouts_are_the_gradients_views():
    """x_layouts[1] and w_layouts[1], [2] as the VJPs (primitives/convolution.py) write them."""
    g, n, i, og, h, w = 2, 3, 4, 5, 6, 7
    x0 = np.arange(n * g * i * h * w).reshape(n, g * i, h, w)           # the forward's x
    x = x0.reshape(n, g, i, h, w).transpose(2, 1, 0, 3, 4).reshape(i, g * n, h, w)
    np.testing.assert_array_equal(_addresses(x_layouts(x.shape, g)[1], x.shape), x)
    w0 = np.arange(g * og * i * 3 * 2).reshape(g * og, i, 3, 2)       # the forward's w
    wt = w0.reshape(g, og, i, 3, 2).transpose(0, 2, 1, 3, 4).reshape(g * i, og, 3, 2)
    wt = wt[:, :, ::-1, ::-1]
    np.testing.assert_array_equal(_addresses(w_layouts(wt.shape, g)[1], wt.shape), wt)
    gy = np.arange(n * og * 4 * 3).reshape(n, og, 4, 3)                # the output gradient
    np.testing.assert_array_equal(_addresses(w_layouts((og, n, 4, 3), 1)[2], (og, n, 4, 3)),
                                  gy.transpose(1, 0, 2, 3))


def _check(f, *args, rtol=1e-4):
    on_gpu = vg.jit(f, backend="vulkan")
    got, want = on_gpu(*args), vg.jit(f, backend="numpy")(*args)
    lowered = on_gpu.lower(*args)
    assert lowered.fallback_reason is None
    for g, w in zip(tree_leaves(got), tree_leaves(want), strict=True):
        w = np.asarray(w)
        np.testing.assert_allclose(np.asarray(g), w, rtol=rtol,
                                   atol=rtol * max(1.0, float(np.abs(w).max())))
    return lowered


def _gradients(lhs, rhs, kw):
    """(x, w, g, {"dx": f, "dw": f}): operands of these shapes, an output gradient, and the
    programs of the convolution's input and weight gradients, f(x, w, g)."""
    x, w = _f32(*lhs), _f32(*rhs)
    conv = lambda x, w: lax.conv_general_dilated(x, w, **kw)      # noqa: E731
    gy = _f32(*vg.make_ir(conv)(x, w).outputs[0].shape)
    return x, w, gy, {"dx": lambda x, w, gy: vg.vjp(lambda x: conv(x, w), x)[1](gy)[0],
                      "dw": lambda x, w, gy: vg.vjp(lambda w: conv(x, w), w)[1](gy)[0]}


def _kernels(lowered) -> collections.Counter:
    return collections.Counter(s.launch.name for s in lowered.lowered.steps)


def _defines(lowered, name="conv_gemm") -> list:
    return [dict(s.launch.defines) for s in lowered.lowered.steps if s.launch.name == name]


CASES = [   # (x, w, conv kwargs): every one runs its gradients on conv_gemm.comp
    ((2, 32, 7, 9), (32, 32, 3, 3), dict(window_strides=(1, 1), padding="SAME")),
    ((3, 32, 9, 7), (40, 32, 3, 2), dict(window_strides=(1, 1), padding=((2, 0), (1, 1)),
                                         rhs_dilation=(2, 1))),
    ((2, 64, 6, 5), (64, 32, 3, 3), dict(window_strides=(1, 1), padding="SAME",
                                         feature_group_count=2)),
    ((2, 36, 7, 5), (33, 36, 3, 3), dict(window_strides=(1, 1), padding="SAME")),   # odd
    ((16, 32, 5, 5), (32, 32, 3, 3), dict(window_strides=(1, 1), padding="VALID")),
    ((2, 32, 9, 11), (48, 32, 3, 3), dict(window_strides=(2, 1), padding="SAME")),
    ((2, 32, 23), (36, 32, 5), dict(window_strides=(1,), padding=((4, 0),))),       # 1-D
    ((4, 32, 5, 5), (32, 32, 1, 1), dict(window_strides=(1, 1), padding="VALID")),  # 1x1
]


# (the tile: lavapipe's Target plans gemm_small, whose k runs in w's order; f64 and large put
# channels innermost where I % BK == 0, and CIN_RELAYOUT off reads w in place there too)
TILES = [("planned", True), ("gemm_f64", True), ("gemm_f64", False), ("gemm_large", False)]


def _force(monkeypatch, variant, relayout):
    monkeypatch.setattr(conv_lowering, "CIN_RELAYOUT", relayout)
    if variant != "planned":
        monkeypatch.setattr(conv_lowering, "choose_variant", lambda og, m, k=0: variant)


@pytest.mark.parametrize("variant,relayout", TILES)
@pytest.mark.parametrize("lhs,rhs,kw", CASES)
def test_the_input_gradient_reads_the_flipped_kernel_in_place(lhs, rhs, kw, variant, relayout,
                                                              monkeypatch):
    """No take (the flip) and no transpose kernel before the convolution: conv_gemm.comp
    reads w as CG_WL = 1 (through conv_relayout.comp's copy where k runs channels innermost,
    or in place with `CIN_RELAYOUT` off)."""
    _force(monkeypatch, variant, relayout)
    x, w, gy, f = _gradients(lhs, rhs, kw)
    lowered = _check(f["dx"], x, w, gy)
    if max(kw["window_strides"]) > 1:         # phases: convolutions of slices of w's flip
        return
    steps = [s.launch.name for s in lowered.lowered.steps]
    assert set(steps) <= {"conv_relayout", "conv_gemm", "reduce_sum"}, steps
    assert {d["CG_WL"] for d in _defines(lowered)} == {1}
    relaid = {d["CR_WL"] for d in _defines(lowered, "conv_relayout")}
    assert relaid <= {1} and (relayout or not relaid)


@pytest.mark.parametrize("variant,relayout", TILES)
@pytest.mark.parametrize("lhs,rhs,kw", CASES)
def test_the_weight_gradient_reads_x_and_g_in_place(lhs, rhs, kw, variant, relayout,
                                                    monkeypatch):
    """No transpose kernel before the convolution: x as CG_XL = 1, g as CG_WL = 2."""
    _force(monkeypatch, variant, relayout)
    x, w, gy, f = _gradients(lhs, rhs, kw)
    lowered = _check(f["dw"], x, w, gy)
    steps = [s.launch.name for s in lowered.lowered.steps]
    first = next(i for i, n in enumerate(steps) if n == "conv_gemm")
    assert set(steps[:first]) <= {"conv_relayout"}, steps
    assert [(d["CG_XL"], d["CG_WL"]) for d in _defines(lowered)] == [(1, 2)]


@pytest.mark.parametrize("relayout", [True, False])
def test_channels_innermost_reads_the_views_relaid_out_or_in_place(relayout, monkeypatch):
    """The cases above on the f64 tile with k channels innermost (CG_CIN): w's view relaid out
    by conv_relayout.comp (CR_WL), or read in place by the A tile (CG_W_DIRECT)."""
    _force(monkeypatch, "gemm_f64", relayout)
    x, w, gy, f = _gradients(*CASES[4])
    for mode, layouts in (("dx", (0, 1)), ("dw", (1, 2))):
        lowered = vg.jit(f[mode], backend="vulkan").lower(x, w, gy)
        (d,) = _defines(lowered)
        assert (d["CG_CIN"], d["CG_W_DIRECT"], d["CG_XL"], d["CG_WL"]) == \
            (1, int(not relayout)) + layouts
        relaid = [r["CR_WL"] for r in _defines(lowered, "conv_relayout")]
        assert relaid == ([layouts[1]] if relayout else [])


@pytest.mark.parametrize("lhs,rhs,kw", [
    ((4, 8, 16, 16), (8, 1, 3, 3), dict(window_strides=(1, 1), padding="SAME",
                                        feature_group_count=8)),
    ((2, 8, 600), (8, 1, 4), dict(window_strides=(1,), padding=((3, 0),),
                                  feature_group_count=8)),                 # causal conv1d
])
def test_a_depthwise_convolutions_gradients_read_their_views_in_place(lhs, rhs, kw):
    """conv_depthwise.comp: the input gradient's flip (DW_WL = 1, the direct form) and the
    weight gradient's x and g (DW_XL = 1, DW_WL = 2, the split form), no take or transpose
    kernel before them (the weight gradient's result is transposed after, as the GEMM's)."""
    x, w, gy, f = _gradients(lhs, rhs, kw)
    for mode, name, layouts in (("dx", "conv_depthwise", (0, 1)),
                                ("dw", "conv_depthwise_split", (1, 2))):
        lowered = _check(f[mode], x, w, gy)
        steps = [s.launch for s in lowered.lowered.steps]
        assert steps[0].name == name and "take" not in {s.name for s in steps}, steps
        assert (dict(steps[0].defines)["DW_XL"], dict(steps[0].defines)["DW_WL"]) == layouts


def test_both_gradients_and_a_second_derivative_agree_with_the_interpreter():
    """grad of a loss through both gradients (the folds inside a bigger program), and the
    gradient of a gradient (its convolutions are views again)."""
    kw = dict(window_strides=(1, 1), padding="SAME")
    x, w = _f32(2, 32, 6, 7), _f32(32, 32, 3, 3)
    loss = lambda x, w: vnp.sum(vnp.sin(lax.conv_general_dilated(x, w, **kw)))   # noqa: E731
    lowered = _check(vg.grad(loss, argnums=(0, 1)), x, w)
    assert "take" not in _kernels(lowered)
    second = vg.grad(lambda x, w: vnp.sum(vg.grad(loss)(x, w) ** 2), argnums=1)
    _check(second, x, w, rtol=2e-4)


def test_the_fold_is_a_pass_that_can_be_switched_off():
    """VKGRAD's `disable_passes=fold_conv_layouts` gives the copies back (same values)."""
    kw = dict(window_strides=(1, 1), padding="SAME")
    x, w = _f32(2, 32, 6, 7), _f32(32, 32, 3, 3)
    loss = lambda x, w: vnp.sum(vnp.sin(lax.conv_general_dilated(x, w, **kw)))   # noqa: E731
    f = vg.grad(loss, argnums=(0, 1))
    on = _kernels(vg.jit(f, backend="vulkan").lower(x, w))
    off_jit = vg.jit(f, backend="vulkan", disable_passes="fold_conv_layouts")
    off = _kernels(off_jit.lower(x, w))
    assert off["take"] == 2 and on["take"] == 0
    assert sum(on.values()) < sum(off.values())
    for a, b in zip(vg.jit(f, backend="vulkan")(x, w), off_jit(x, w)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------ the pass, as golden text
# (the fused stage of the input and weight gradients of a 3x3 'SAME' convolution, N2 C32 5x4,
# 32 features, with the pass off -> the pass). The input gradient's two flips and transpose
# join its kernel; the weight gradient's transposes of x and g leave their loop kernel (gone),
# the result's transpose stays a kernel of its own.
GOLDEN = {"dx": ("""
program dx(%0: f32[2,32,5,4], %1: f32[32,32,3,3], %2: f32[2,32,5,4]) -> f32[2,32,5,4] {
  # ---- backward ----
  %3: f32[32,32,3,3] = fused[kind=input] %1 {
      # ---- backward ----
      %4: i32[3] = iota[dimension=0, dtype=i32, shape=(3,)]
      %5: i32[3] = neg %4
      %6: i32[3] = add %5, 2:i32
      %7: f32[32,32,3,3] = transpose[perm=(1,0,2,3)] %1
      %3: f32[32,32,3,3] = take[axis=2] %7, %6
  }
  %8: f32[32,32,3,3] = fused[kind=input] %3 {
      # ---- backward ----
      %4: i32[3] = iota[dimension=0, dtype=i32, shape=(3,)]
      %5: i32[3] = neg %4
      %6: i32[3] = add %5, 2:i32
      %8: f32[32,32,3,3] = take[axis=3] %3, %6
  }
  %9: f32[2,32,5,4] = conv_general_dilated[lhs_dilation=(1,1), padding=((1,1),(1,1)), rhs_dilation=(1,1), window_strides=(1,1)] %2, %8
  return %9
}
""", """
program dx(%0: f32[2,32,5,4], %1: f32[32,32,3,3], %2: f32[2,32,5,4]) -> f32[2,32,5,4] {
  # ---- backward ----
  %3: f32[2,32,5,4] = fused[kind=input] %1, %2 {
      # ---- backward ----
      %4: f32[32,32,3,3] = transpose[perm=(1,0,2,3)] %1
      %5: i32[3] = iota[dimension=0, dtype=i32, shape=(3,)]
      %6: i32[3] = neg %5
      %7: i32[3] = add %6, 2:i32
      %8: f32[32,32,3,3] = take[axis=2] %4, %7
      %9: i32[3] = iota[dimension=0, dtype=i32, shape=(3,)]
      %10: i32[3] = neg %9
      %11: i32[3] = add %10, 2:i32
      %12: f32[32,32,3,3] = take[axis=3] %8, %11
      %3: f32[2,32,5,4] = conv_general_dilated[lhs_dilation=(1,1), padding=((1,1),(1,1)), rhs_dilation=(1,1), window_strides=(1,1)] %2, %12
  }
  return %3
}
"""), "dw": ("""
program dw(%0: f32[2,32,5,4], %1: f32[32,32,3,3], %2: f32[2,32,5,4]) -> f32[32,32,3,3] {
  # ---- backward ----
  %3: f32[32,2,5,4], %4: f32[32,2,5,4] = fused %0, %2 {
      # ---- backward ----
      %5: f32[2,1,32,5,4] = reshape[shape=(2,1,32,5,4)] %0
      %6: f32[32,1,2,5,4] = transpose[perm=(2,1,0,3,4)] %5
      %3: f32[32,2,5,4] = reshape[shape=(32,2,5,4)] %6
      %4: f32[32,2,5,4] = transpose[perm=(1,0,2,3)] %2
  }
  %7: f32[32,32,3,3] = conv_general_dilated[lhs_dilation=(1,1), padding=((1,1),(1,1)), rhs_dilation=(1,1), window_strides=(1,1)] %3, %4
  %8: f32[32,32,3,3] = fused %7 {
      # ---- backward ----
      %8: f32[32,32,3,3] = transpose[perm=(1,0,2,3)] %7
  }
  return %8
}
""", """
program dw(%0: f32[2,32,5,4], %1: f32[32,32,3,3], %2: f32[2,32,5,4]) -> f32[32,32,3,3] {
  # ---- backward ----
  %3: f32[32,32,3,3] = fused[kind=input] %0, %2 {
      # ---- backward ----
      %4: f32[2,1,32,5,4] = reshape[shape=(2,1,32,5,4)] %0
      %5: f32[32,1,2,5,4] = transpose[perm=(2,1,0,3,4)] %4
      %6: f32[32,2,5,4] = reshape[shape=(32,2,5,4)] %5
      %7: f32[32,2,5,4] = transpose[perm=(1,0,2,3)] %2
      %3: f32[32,32,3,3] = conv_general_dilated[lhs_dilation=(1,1), padding=((1,1),(1,1)), rhs_dilation=(1,1), window_strides=(1,1)] %6, %7
  }
  %8: f32[32,32,3,3] = fused %3 {
      # ---- backward ----
      %8: f32[32,32,3,3] = transpose[perm=(1,0,2,3)] %3
  }
  return %8
}
""")}


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_the_pass_golden(name):
    source, expected = GOLDEN[name]
    p = parse_program(source)
    out = PASSES["fold_conv_layouts"].apply(p)
    verify(out)
    assert str(out) == expected.lstrip("\n")
    args = [RNG.standard_normal(v.shape).astype(np.float32) for v in p.inputs]
    for a, b in zip(vg.run_program(p, *args), vg.run_program(out, *args)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


def test_a_resnets_gradient_runs_fewer_dispatches_with_the_same_values():
    """A small ResNet's training gradient (vg.nn.resnet, widths 32 and 64, one block each,
    batch norm in training mode): its stride-1 input gradients lose their flips (8 takes ->
    2: the stride-2 block's phases keep theirs), and the weight gradients read the
    convolutions' inputs in place (vg.nn.conv saves them), so lavapipe's two loop kernels
    that wrote them transposed go (the H200's, horizontal kernels that write other values
    too, stay, smaller), on both Targets' plans, the gradients the interpreter's on
    lavapipe."""
    weights, stats = nn.init_resnet(np.random.default_rng(0), 3, 10, (32, 64), (1, 1))
    x, y = _f32(2, 3, 16, 16), np.array([1, 7], np.int32)

    def loss(weights, x, y):
        logits, _ = nn.resnet(weights, stats, x, training=True)
        return nn.cross_entropy(logits, y)

    prog = vg.make_ir(vg.grad(loss))(weights, x, y)
    for target, fewer in ((Target.h200(), 6), (Target.lavapipe(), 8)):
        on, off = (collections.Counter(s.launch.name for s in run_stages(
            prog, "plan", Options(target=target, disabled=frozenset(d)))["plan"].steps)
            for d in ((), ("fold_conv_layouts",)))
        assert (off["take"], on["take"]) == (8, 2)
        assert sum(off.values()) - sum(on.values()) == fewer
        plan = run_stages(prog, "plan", Options(target=target))["plan"]
        weight_grads = [dict(s.launch.defines) for s in plan.steps
                        if s.launch.name == "conv_gemm" and dict(s.launch.defines)["CG_WL"] == 2]
        assert len(weight_grads) == 5 and all(d["CG_XL"] == 1 for d in weight_grads)
    _check(vg.grad(loss), weights, x, y, rtol=2e-4)
