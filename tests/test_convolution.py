"""vg.lax's convolutions (conv_general_dilated, conv, conv_with_general_padding,
conv_transpose) against a direct loop over the definition, JAX's padding and layout rules, vmap,
and the errors a user gets for bad input (each naming the dims and the user's line). The table
rows (tests/cases.py, conv*) check the interpreter, gradients and Vulkan."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import source_lines
import vkgrad as vg
import vkgrad.numpy as vnp
from vkgrad import lax
from vkgrad.errors import ArgumentError, ShapeError

RNG = np.random.default_rng(0)


def line_of(marker: str) -> str:
    return source_lines.line_of(__file__, marker)


def direct(x, w, strides, padding, lhs_dilation, rhs_dilation, groups):
    """The definition as loops, 2-D NCHW/OIHW, float64."""
    n, c, h, wd = x.shape
    o, i, kh, kw = w.shape
    xd = np.zeros((n, c, (h - 1) * lhs_dilation[0] + 1, (wd - 1) * lhs_dilation[1] + 1))
    xd[:, :, ::lhs_dilation[0], ::lhs_dilation[1]] = x
    (pt, pb), (pl, pr) = padding
    big = np.zeros((n, c, xd.shape[2] + abs(pt) + abs(pb), xd.shape[3] + abs(pl) + abs(pr)))
    big[:, :, abs(pt):abs(pt) + xd.shape[2], abs(pl):abs(pl) + xd.shape[3]] = xd
    xp = big[:, :, abs(pt) - pt:big.shape[2] - abs(pb) + pb, abs(pl) - pl:big.shape[3] - abs(pr) + pr]
    oh = (xp.shape[2] - (kh - 1) * rhs_dilation[0] - 1) // strides[0] + 1
    ow = (xp.shape[3] - (kw - 1) * rhs_dilation[1] - 1) // strides[1] + 1
    out = np.zeros((n, o, oh, ow))
    og = o // groups
    for b, f, y, z in itertools.product(range(n), range(o), range(oh), range(ow)):
        g = f // og
        for ci, a, e in itertools.product(range(i), range(kh), range(kw)):
            out[b, f, y, z] += xp[b, g * i + ci, y * strides[0] + a * rhs_dilation[0],
                                  z * strides[1] + e * rhs_dilation[1]] * w[f, ci, a, e]
    return out


@pytest.mark.parametrize("strides,padding,lhs_d,rhs_d,groups", [
    ((1, 1), ((0, 0), (0, 0)), (1, 1), (1, 1), 1),
    ((2, 3), ((1, 2), (0, 1)), (1, 1), (2, 1), 2),
    ((1, 2), ((-1, 2), (1, -1)), (2, 1), (1, 2), 1),
    ((3, 1), ((2, 2), (2, 2)), (1, 3), (1, 1), 4),
])
@pytest.mark.usefixtures("x64")   # float64 references at float64 tolerances
def test_conv_general_dilated_is_the_definition(strides, padding, lhs_d, rhs_d, groups):
    x = RNG.standard_normal((2, 4, 7, 6))
    w = RNG.standard_normal((4, 4 // groups, 3, 2))
    got = lax.conv_general_dilated(x, w, strides, padding, lhs_d, rhs_d,
                                   feature_group_count=groups)
    np.testing.assert_allclose(got, direct(x, w, strides, padding, lhs_d, rhs_d, groups),
                               rtol=1e-12, atol=1e-12)


@pytest.mark.usefixtures("x64")   # float64 references at float64 tolerances
def test_same_padding_and_layouts_are_jaxs():
    assert lax.padtype_to_pads((7, 6), (3, 2), (2, 1), "SAME") == [(1, 1), (0, 1)]
    assert lax.padtype_to_pads((7, 6), (3, 2), (2, 1), "SAME_LOWER") == [(1, 1), (1, 0)]
    dn = lax.conv_dimension_numbers((1, 5, 6, 3), (2, 3, 3, 4), ("NHWC", "HWIO", "NHWC"))
    assert dn == ((0, 3, 1, 2), (3, 2, 0, 1), (0, 3, 1, 2))
    x = RNG.standard_normal((2, 7, 6, 3))
    w = RNG.standard_normal((3, 2, 3, 4))
    y = lax.conv_general_dilated(x, w, (2, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    want = direct(x.transpose(0, 3, 1, 2), w.transpose(3, 2, 0, 1), (2, 1), ((1, 1), (0, 1)),
                  (1, 1), (1, 1), 1).transpose(0, 2, 3, 1)
    assert y.shape == (2, 4, 6, 4)
    np.testing.assert_allclose(y, want, rtol=1e-12, atol=1e-12)
    # conv and conv_with_general_padding are conv_general_dilated in NCHW/OIHW
    xc, wc = x.transpose(0, 3, 1, 2), w.transpose(3, 2, 0, 1)
    np.testing.assert_allclose(lax.conv(xc, wc, (1, 1), "VALID"),
                               direct(xc, wc, (1, 1), ((0, 0), (0, 0)), (1, 1), (1, 1), 1))
    np.testing.assert_allclose(
        lax.conv_with_general_padding(xc, wc, (1, 2), ((1, 0), (2, 1)), (1, 2), (2, 1)),
        direct(xc, wc, (1, 2), ((1, 0), (2, 1)), (1, 2), (2, 1), 1))


def test_conv_transpose_is_the_gradient_of_a_strided_conv():
    """JAX's conv_transpose with transpose_kernel=True is the input gradient of the forward
    convolution with the same kernel, strides and padding (its documented use)."""
    x = RNG.standard_normal((1, 8, 8, 2))
    w = RNG.standard_normal((3, 3, 2, 5))
    dn = ("NHWC", "HWIO", "NHWC")
    fwd = lambda x: lax.conv_general_dilated(x, w, (2, 2), "SAME", dimension_numbers=dn)  # noqa
    y = fwd(x)
    g = RNG.standard_normal(y.shape)
    want = vg.vjp(fwd, x)[1](g)[0]
    got = lax.conv_transpose(g, w, (2, 2), "SAME", dimension_numbers=dn, transpose_kernel=True)
    assert got.shape == x.shape
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("in_axes", [(0, None), (None, 0), (0, 0), (2, 1)])
def test_vmap_of_a_grouped_conv(in_axes):
    xs = RNG.standard_normal((3, 2, 4, 5, 6))
    ws = RNG.standard_normal((3, 6, 2, 2, 3))
    f = lambda x, w: lax.conv_general_dilated(x, w, (1, 2), "SAME", feature_group_count=2)  # noqa
    args = [np.moveaxis(a, 0, d) if d is not None else a[0] for a, d in zip((xs, ws), in_axes)]
    got = vg.vmap(f, in_axes=in_axes)(*args)
    want = np.stack([f(xs[i] if in_axes[0] is not None else xs[0],
                       ws[i] if in_axes[1] is not None else ws[0]) for i in range(3)])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_second_derivative_of_a_conv_is_a_conv():
    f = lambda x, w: vnp.sum(lax.conv_general_dilated(x, w, (2,), "SAME") ** 2)  # noqa
    x, w = RNG.standard_normal((1, 2, 9)), RNG.standard_normal((3, 2, 3))
    hvp = vg.make_ir(lambda x, w: vg.grad(lambda w: vnp.sum(vg.grad(f)(x, w) ** 2))(w))(x, w)
    assert "conv_general_dilated" in str(hvp)
    vg.check_grads(f, (x, w), order=2)


def _err(fn):
    with pytest.raises(ShapeError) as e:
        fn()
    return str(e.value)


def test_bad_input_names_the_dims_and_the_line():
    x = np.ones((2, 6, 8, 8), np.float32)
    msg = _err(lambda: lax.conv(x, np.ones((4, 5, 3, 3), np.float32), (1, 1), "SAME"))  # chan
    assert "channel mismatch" in msg and "6 features" in msg and "takes 5" in msg, msg
    assert line_of("chan") in msg
    w2 = np.ones((4, 2, 3, 3), np.float32)
    msg = _err(lambda: lax.conv_general_dilated(x, w2, (1, 1), "SAME", feature_group_count=4))  # groups
    assert "feature_group_count=4 does not divide the input's 6 features" in msg, msg
    assert line_of("groups") in msg
    msg = _err(lambda: lax.conv(x, np.ones((4, 6, 9, 3), np.float32), (1, 1), "VALID"))  # big
    assert "window is larger than the padded input" in msg and "'H'" in msg, msg
    assert line_of("big") in msg
    msg = _err(lambda: lax.conv(x, np.ones((4, 6, 3), np.float32), (1,), "VALID"))  # rank
    assert "same rank" in msg and line_of("rank") in msg, msg
    xh, wh = np.ones((2, 8, 8, 6), np.float32), np.ones((3, 3, 5, 4), np.float32)
    nhwc, bad = ("NHWC", "HWIO", "NHWC"), ("NHWC", "HWOO", "NHWC")
    msg = _err(lambda: lax.conv_general_dilated(xh, wh, (1, 1), "SAME", dimension_numbers=nhwc))  # nhwc
    assert "lhs dimension 'C'" in msg and "rhs dimension 'I'" in msg and line_of("nhwc") in msg
    msg = _err(lambda: lax.conv_general_dilated(xh, wh, (1, 1), "SAME", dimension_numbers=bad))  # dn
    assert "'HWOO' needs one 'O', one 'I'" in msg and line_of("dn") in msg, msg
    msg = _err(lambda: lax.conv(x, np.ones((4, 6, 3, 3), np.float32), (1, 1, 1), "VALID"))  # strides
    assert "window_strides (1, 1, 1) needs one entry per spatial dimension" in msg, msg
    assert line_of("strides") in msg


def test_bad_input_inside_jit_names_the_line():
    f = vg.jit(lambda x, w: lax.conv(x, w, (1, 1), "VALID"))  # injit
    with pytest.raises(ShapeError) as e:
        f(np.ones((1, 3, 4, 4), np.float32), np.ones((2, 4, 3, 3), np.float32))
    assert "channel mismatch" in str(e.value) and line_of("injit") in str(e.value)


def test_batch_group_count_is_refused_clearly():
    with pytest.raises(ArgumentError, match="batch_group_count=2 is not supported"):
        lax.conv_general_dilated(np.ones((2, 2, 3)), np.ones((2, 2, 1)), (1,), "VALID",
                                 batch_group_count=2)


@pytest.mark.usefixtures("x64")   # float64 references at float64 tolerances
def test_convolve_and_correlate_follow_numpy():
    for la, lv in [(7, 3), (3, 7), (5, 5), (1, 4)]:
        a, v = RNG.standard_normal(la), RNG.standard_normal(lv)
        for mode in ("full", "same", "valid"):
            np.testing.assert_allclose(vnp.convolve(a, v, mode), np.convolve(a, v, mode))
            np.testing.assert_allclose(vnp.correlate(a, v, mode), np.correlate(a, v, mode))
    with pytest.raises(ShapeError, match="both must be 1-D"):
        vnp.convolve(np.ones((2, 2)), np.ones(2))


@pytest.mark.parametrize("spatial,window,dilation,padding", [
    ((5,), (3,), (2,), ((2, 2),)), ((4, 3), (3, 2), (2, 3), ((1, -1), (2, 0))),
    ((3, 4), (1, 1), (2, 2), ((0, 1), (0, 1))), ((2, 5), (4, 3), (3, 1), ((-2, 3), (1, 1))),
])
def test_a_transposed_convolution_is_bound_as_its_phases(spatial, window, dilation, padding):
    """P.conv binds an lhs-dilated stride-1 convolution as one plain convolution per output
    phase (no products with the dilation's zeros): the same values as the primitive itself,
    and the gradient of a strided convolution has no lhs-dilated convolution left."""
    from vkgrad import primitives as P
    from vkgrad.tracer.core import bind
    nd = len(spatial)
    x = RNG.standard_normal((2, 4) + spatial)
    w = RNG.standard_normal((6, 2) + window)
    want = bind(P.conv_p, x, w, window_strides=(1,) * nd, padding=padding,
                lhs_dilation=dilation, rhs_dilation=(1,) * nd, feature_group_count=2)
    got = P.conv(x, w, (1,) * nd, padding, dilation, (1,) * nd, 2)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    prog = vg.make_ir(vg.grad(lambda x: vnp.sum(lax.conv(x, w[:, :2], (2,) * nd, "SAME") ** 2)))(
        RNG.standard_normal((1, 2) + tuple(s + 4 for s in spatial)))
    convs = [e for e in prog.eqns if e.prim is P.conv_p]
    assert len(convs) > 2 - (window == (1, 1))       # the forward, one per phase with taps
    assert all(set(e.params["lhs_dilation"]) == {1} for e in convs)
