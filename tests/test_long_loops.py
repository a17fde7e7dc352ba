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


def test_flash_attention_past_the_loop_limit_runs_on_the_interpreter():
    """70,000 keys: lavapipe's kernel would stop early (the forward gave 1.98 where 1 is
    right); a Target with a loop limit sends it to the interpreter, with a warning naming the
    limit; a GPU target plans it."""
    from vkgrad.lowering.attention import loop_limit_problem
    assert loop_limit_problem("fwd", 70_000, 16, Target.h200()) is None
    assert "65535 iterations" in loop_limit_problem("fwd", 70_000, 16, Target.lavapipe())
    assert loop_limit_problem("fwd", 1024, 64, Target.lavapipe()) is None
    rng = np.random.default_rng(1)
    q = rng.standard_normal((1, 1, 2, 16)).astype(np.float32)
    k = rng.standard_normal((1, 1, 70_000, 16)).astype(np.float32)
    v = np.ones((1, 1, 70_000, 16), np.float32)
    f = vg.jit(lambda q, k, v: vg.nn.flash_attention(q, k, v), backend="vulkan")
    if get_device().target.max_loop_iterations:
        with pytest.warns(vg.FallbackWarning, match="ends a shader's loops"):
            o = f(q, k, v)
    else:
        o = f(q, k, v)
    np.testing.assert_allclose(np.asarray(o), 1.0, rtol=1e-5)


def test_cumsum_is_one_kernel_whatever_its_length():
    """vnp.cumsum was log2(n) fused shift-and-adds: its shader doubled with n (11.7 s to
    compile at n = 2,048 on the H200; n = 8,192 did not finish in 15 minutes on lavapipe). Now
    one cumsum kernel whose shader does not depend on n."""
    f = vg.jit(lambda x: vnp.cumsum(x), backend="vulkan")
    plans = {n: f.lower(np.ones(n, np.float32)).lowered for n in (1024, 8192)}
    for plan in plans.values():
        assert [s.launch.name for s in plan.steps] == ["cumsum"]
    assert plans[1024].steps[0].launch.shader == plans[8192].steps[0].launch.shader
    assert plans[1024].steps[0].launch.defines == plans[8192].steps[0].launch.defines
    x = np.ones(100_000, np.int32)
    got = np.asarray(vg.jit(lambda x: vnp.cumsum(x), backend="vulkan")(x))
    np.testing.assert_array_equal(got, np.arange(1, 100_001, dtype=np.int32))
    rev = np.asarray(vg.jit(lambda x: vg.grad(lambda x: vnp.sum(vnp.cumsum(x) * x))(x),
                            backend="vulkan")(np.ones(5000, np.float32)))
    want = np.cumsum(np.ones(5000))[::-1] + np.cumsum(np.ones(5000))   # d/dx_j sum_i c_i x_i
    np.testing.assert_allclose(rev, want, rtol=1e-6)
