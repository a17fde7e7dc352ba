"""vg.lax.reduce_window and vg.nn's pools, batch/group/instance norm and conv layer: values
against numpy, max-pool gradients to the first maximum of each window (JAX's ties), and batch
norm's running statistics carried as explicit state through a jitted training step. The
table rows (tests/cases.py: reduce_window_*, pools, *_norm*, conv_layer) check gradients and
Vulkan."""

from __future__ import annotations

import numpy as np
import pytest

import vkgrad as vg
import vkgrad.numpy as vnp
from vkgrad import lax, nn
from vkgrad.errors import ShapeError

RNG = np.random.default_rng(0)


def windows(x, k, s):
    """numpy: [N, C, OH, OW, kh, kw] windows of a 2-D NCHW array (no padding)."""
    v = np.lib.stride_tricks.sliding_window_view(x, k, axis=(2, 3))
    return v[:, :, ::s[0], ::s[1]]


@pytest.mark.usefixtures("x64")   # float64 references at float64 tolerances
def test_pools_are_window_reductions():
    x = RNG.standard_normal((2, 3, 7, 8))
    np.testing.assert_allclose(nn.max_pool(x, (3, 2), (2, 3)), windows(x, (3, 2), (2, 3)).max((4, 5)))
    np.testing.assert_allclose(nn.avg_pool(x, (2, 2), (2, 2)), windows(x, (2, 2), (2, 2)).mean((4, 5)))
    xl = np.moveaxis(x, 1, -1)
    np.testing.assert_allclose(nn.max_pool(xl, (3, 2), (2, 3), channels_last=True),
                               np.moveaxis(windows(x, (3, 2), (2, 3)).max((4, 5)), 1, -1))
    # padding: max pads with -inf; avg counts the padding or not
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
    np.testing.assert_allclose(nn.max_pool(x, (3, 3), (1, 1), "SAME"),
                               windows(xp, (3, 3), (1, 1)).max((4, 5)))
    x0 = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    ones = np.pad(np.ones_like(x), ((0, 0), (0, 0), (1, 1), (1, 1)))
    np.testing.assert_allclose(nn.avg_pool(x, (3, 3), (1, 1), "SAME"),
                               windows(x0, (3, 3), (1, 1)).mean((4, 5)))
    np.testing.assert_allclose(nn.avg_pool(x, (3, 3), (1, 1), "SAME", count_include_pad=False),
                               windows(x0, (3, 3), (1, 1)).sum((4, 5)) /
                               windows(ones, (3, 3), (1, 1)).sum((4, 5)))


def test_max_pool_gradient_goes_to_the_first_maximum_of_each_window():
    """JAX's rule (select_and_scatter_add with `ge`): one window's cotangent goes to its
    first maximum in row-major order; overlapping windows add."""
    x = np.array([[[[1, 3, 3, 0], [2, 0, 1, 3], [3, 1, 0, 2]]]], np.float32)
    g = vg.grad(lambda x: vnp.sum(nn.max_pool(x, (2, 2), (1, 1))))(x)
    np.testing.assert_array_equal(g, [[[[0, 2, 1, 0], [0, 0, 1, 1], [1, 0, 0, 0]]]])
    on_vulkan = vg.jit(vg.grad(lambda x: vnp.sum(nn.max_pool(x, (2, 2), (1, 1)))),
                       backend="vulkan")
    np.testing.assert_array_equal(np.asarray(on_vulkan(x)), g)


@pytest.mark.usefixtures("x64")   # float64 references at float64 tolerances
def test_reduce_window_takes_any_associative_computation():
    x = RNG.uniform(0.5, 1.5, (5, 6))
    prod = lax.reduce_window(x, 1.0, lax.mul, (2, 3), (1, 3), "VALID")
    np.testing.assert_allclose(prod, np.lib.stride_tricks.sliding_window_view(
        x, (2, 3))[:, ::3].prod((2, 3)))
    with pytest.raises(ShapeError, match="larger than the padded operand"):
        lax.reduce_window(x, 0.0, lax.add, (6, 1), (1, 1), "VALID")


def test_batch_norm_state_through_a_jitted_step():
    """Training normalizes by the batch and moves the running statistics; evaluation uses
    them. The state is an explicit pytree going in and out of the jitted step."""
    params, state = nn.init_batch_norm(3)
    x = RNG.standard_normal((8, 3, 4, 4)).astype(np.float32) * 2 + 5

    @vg.jit
    def step(params, state, x):
        def loss(params):
            y, new_state = nn.batch_norm(params, state, x, training=True)
            return vnp.mean(y ** 2), new_state
        (value, new_state), grads = vg.value_and_grad(loss, has_aux=True)(params)
        return value, new_state, grads

    value, state1, grads = step(params, state, x)
    mean, var = x.mean((0, 2, 3)), x.var((0, 2, 3))
    np.testing.assert_allclose(state1["mean"], 0.1 * mean, rtol=1e-5)
    np.testing.assert_allclose(state1["var"], 0.9 + 0.1 * var, rtol=1e-5)
    np.testing.assert_allclose(float(value), 1.0, rtol=1e-3)     # normalized: mean of y^2 ~ 1
    assert set(grads) == {"scale", "bias"}
    _, state2, _ = step(params, state1, x)
    np.testing.assert_allclose(state2["mean"], 0.19 * mean, rtol=1e-5)
    y, same = nn.batch_norm(params, state2, x, training=False)
    assert same is state2
    want = (x - state2["mean"][:, None, None]) / np.sqrt(state2["var"][:, None, None] + 1e-5)
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-5)


def test_batch_norms_one_pass_statistics_hold_far_from_zero_on_the_gpu():
    """The statistics in one pass (sums of x - K and its square, K each feature's first
    element): a feature whose mean is 10^4 its spread (where E[x^2] - E[x]^2 in float32
    would keep no digit of the variance) and one near 0, on Vulkan against float64; the
    input gradient too."""
    x = RNG.standard_normal((16, 2, 5, 5)) * np.array([1.0, 3.0])[:, None, None]
    x[:, 0] += 1e4
    x = x.astype(np.float32)
    params, state = nn.init_batch_norm(2)

    def f(x):
        y, st = nn.batch_norm(params, state, x, training=True)
        return y, st["var"]

    y, var = vg.jit(f, backend="vulkan")(x)
    x64 = x.astype(np.float64)
    want_var = x64.var((0, 2, 3))
    np.testing.assert_allclose(var, 0.9 + 0.1 * want_var, rtol=1e-5)
    mean = x64.mean((0, 2, 3))[:, None, None]
    np.testing.assert_allclose(y, (x64 - mean) / np.sqrt(want_var[:, None, None] + 1e-5),
                               rtol=2e-3, atol=2e-3)
    w = RNG.standard_normal(x.shape).astype(np.float32)
    loss = lambda x: vnp.sum(nn.batch_norm(params, state, x, training=True)[0] * w)  # noqa
    got = vg.jit(vg.grad(loss), backend="vulkan")(x)
    xc = x64 - mean
    inv = 1 / np.sqrt(want_var[:, None, None] + 1e-5)
    xhat, n = xc * inv, x.size // 2
    want = inv / n * (n * w - w.sum((0, 2, 3), keepdims=True)
                      - xhat * (w * xhat).sum((0, 2, 3), keepdims=True))
    np.testing.assert_allclose(got, want, rtol=1e-2, atol=1e-3 * np.abs(want).max())


@pytest.mark.usefixtures("x64")   # float64 references at float64 tolerances
def test_group_and_instance_norm_match_their_definitions():
    x = RNG.standard_normal((2, 6, 3, 4))
    g = x.reshape(2, 3, -1)
    want = ((g - g.mean(2, keepdims=True)) / np.sqrt(g.var(2, keepdims=True) + 1e-5)).reshape(x.shape)
    np.testing.assert_allclose(nn.group_norm(x, 3), want, rtol=1e-10)
    i = x.reshape(2, 6, -1)
    want = ((i - i.mean(2, keepdims=True)) / np.sqrt(i.var(2, keepdims=True) + 1e-5)).reshape(x.shape)
    np.testing.assert_allclose(nn.instance_norm(x), want, rtol=1e-10)
    with pytest.raises(ShapeError, match="4 groups do not divide 6 channels"):
        nn.group_norm(x, 4)


def test_conv_layer_is_torch_like_in_both_layouts():
    params = nn.init_conv(np.random.default_rng(1), 3, 5, 3)
    assert params["w"].shape == (5, 3, 3, 3) and params["b"].shape == (5,)
    x = RNG.standard_normal((2, 3, 6, 7)).astype(np.float32)
    y = nn.conv(params, x, strides=2)
    want = lax.conv(x, params["w"], (2, 2), "SAME") + params["b"][:, None, None]
    np.testing.assert_allclose(y, want, rtol=1e-6)
    yl = nn.conv(params, np.moveaxis(x, 1, -1), strides=2, channels_last=True)
    np.testing.assert_allclose(yl, np.moveaxis(want, 1, -1), rtol=1e-5, atol=1e-6)
