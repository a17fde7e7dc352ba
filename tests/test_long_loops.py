"""Loops longer than a device runs: lavapipe ends a shader's loops after 65,535 iterations
(counted over all of an invocation's loops) without a word, so a long contraction came back
short (`ones((1, 20000)) @ ones((20000, 1))` gave 18073). Where the Target has such a limit,
kernels split the work so that no invocation reaches it, or the program runs on the
interpreter with a warning that says why: never a truncated result."""

import numpy as np
import pytest

import vkgrad as vg
import vkgrad.numpy as vnp
from vkgrad.lowering.matmul import VARIANTS, choose_splits, loop_limit_splits
from vkgrad.runtime import get_device
from vkgrad.target import Target


def test_the_planner_splits_k_under_the_loop_limit():
    lava, gpu = Target.lavapipe(), Target.h200()
    tile = VARIANTS["wide64"]
    assert loop_limit_splits(8192, tile, lava) == 1              # the LM's weight gradients
    assert loop_limit_splits(100_000, tile, lava) > 1
    assert loop_limit_splits(100_000, tile, gpu) == 1            # no limit on the H200
    assert choose_splits(1, 1, 100_000, 1, tile, lava) >= loop_limit_splits(100_000, tile, lava)


@pytest.mark.parametrize("k", [20_000, 100_000])
def test_a_long_contraction_is_exact(k):
    f = vg.jit(lambda a, b: a @ b, backend="vulkan")
    got = np.asarray(f(np.ones((1, k), np.float32), np.ones((k, 3), np.float32)))
    np.testing.assert_array_equal(got, np.full((1, 3), k, np.float32))


def test_a_weight_gradient_over_many_rows_is_right():
    """The tiny transformer at batch 300 had weight gradients 5.9% off: K = batch x length."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((40_000, 8)).astype(np.float32)
    w = rng.standard_normal((8, 4)).astype(np.float32)
    g = vg.jit(vg.grad(lambda w, x: vnp.sum(vnp.tanh(x @ w))), backend="vulkan")(w, x)
    want = x.T.astype(np.float64) @ (1 - np.tanh(x @ w.astype(np.float64)) ** 2)
    np.testing.assert_allclose(np.asarray(g), want, rtol=2e-4, atol=2e-3)
