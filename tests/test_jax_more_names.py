"""More of JAX's names: vg.lax's bit views, shape helpers, patches and implicitly
differentiated solves; top-level switches and device helpers; vg.random's ball and
multivariate_normal; vg.tree_util's node helpers. Values against numpy or JAX (pasted), on the
interpreter; gradients where they are differentiable."""

import dataclasses
import collections

import numpy as np
import pytest

import vkgrad as vg
import vkgrad.numpy as vnp
from vkgrad import lax
from vkgrad.errors import ArgumentError, DTypeError, ShapeError

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")   # int8/16 stored as int32
RNG = np.random.default_rng(3)
ONE = RNG.standard_normal((3, 4)).astype(np.float32)


@pytest.fixture(autouse=True)
def interpreter(monkeypatch):
    monkeypatch.setenv("VKGRAD_BACKEND", "numpy")


# ------------------------------------------------------------------------- vg.lax

def test_bitcast_convert_type_same_width_is_the_bit_view():
    words = RNG.integers(-2**31, 2**31 - 1, 4000, dtype=np.int64).astype(np.int32)
    floats = words.view(np.float32)
    ok = ~np.isnan(floats)
    edge = np.float32([0.0, -0.0, np.inf, -np.inf, 1e-45, -1e-40, 3.4028235e38, 1.17549435e-38])
    for x in (floats[ok], edge):
        np.testing.assert_array_equal(lax.bitcast_convert_type(x, np.int32), x.view(np.int32))
        np.testing.assert_array_equal(
            np.asarray(lax.bitcast_convert_type(x.view(np.int32), np.float32)).view(np.int32),
            x.view(np.int32))
    assert int(lax.bitcast_convert_type(np.float32(np.nan), np.int32)) == 0x7FC00000
    h = np.float16([1.5, -2.0, 65504.0, 6e-8, 0.0, -np.inf])
    np.testing.assert_array_equal(lax.bitcast_convert_type(h, np.int16), h.view(np.int16))
    np.testing.assert_array_equal(lax.bitcast_convert_type(h.view(np.int16), np.float16), h)
    assert int(lax.bitcast_convert_type(np.array([1.5], vnp.bfloat16), np.int16)[0]) == 16320


def test_bitcast_convert_type_changing_width_follows_jax():
    # JAX: f32 1.0 -> uint8 [0 0 128 63]; [1, -2] -> int16 [[0 16256] [0 -16384]]
    np.testing.assert_array_equal(lax.bitcast_convert_type(np.float32(1.0), np.uint8),
                                  [0, 0, 128, 63])
    np.testing.assert_array_equal(lax.bitcast_convert_type(np.float32([1, -2]), np.int16),
                                  [[0, 16256], [0, -16384]])
    np.testing.assert_array_equal(
        lax.bitcast_convert_type(np.uint8([[0, 0, 128, 63], [0, 0, 0, 192]]), np.float32),
        [1.0, -2.0])
    with pytest.raises(ShapeError, match="last axis of 4"):
        lax.bitcast_convert_type(np.uint8([1, 2, 3]), np.float32)
    with pytest.raises(DTypeError, match="uint32"):
        lax.bitcast_convert_type(np.float32(1), np.uint32)


def test_reduce_precision_mulhi_reciprocal():
    x = np.float32([1.2345678, 70000.0, 1e-6, -3.3])
    np.testing.assert_array_equal(lax.reduce_precision(x, 5, 10),   # JAX's values
                                  np.float32([1.234375, np.inf, 0.0, -3.3007812]))
    np.testing.assert_array_equal(lax.reduce_precision(np.float32([1.2345678, 3e38]), 8, 7),
                                  np.float32([1.234375, 3.0040553e38]))
    np.testing.assert_array_equal(lax.reduce_precision(ONE, 5, 10), ONE.astype(np.float16))
    np.testing.assert_allclose(vg.grad(lambda v: vnp.sum(lax.reduce_precision(v, 5, 10)))(ONE),
                               np.ones_like(ONE))
    a = np.int32([123456789, -5, 2**31 - 1, -2**31, 77, -99999])
    b = np.int32([987654321, 7, 2**31 - 1, -2**31, -3, 123456])
    np.testing.assert_array_equal(lax.mulhi(a, b), (a.astype(np.int64) * b >> 32).astype(np.int32))
    np.testing.assert_allclose(lax.reciprocal(ONE), 1 / ONE, rtol=1e-6)
    vg.check_grads(lax.reciprocal, (ONE + 3,), order=1)


def test_small_shape_helpers():
    x = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    assert lax.broadcast_to_rank(x, 4).shape == (1, 1, 2, 3)
    assert lax.empty((2, 3), np.float32).shape == (2, 3)
    np.testing.assert_array_equal(lax.tile(x, (2, 1)), np.tile(x, (2, 1)))
    np.testing.assert_array_equal(lax.stack([x, x + 1], 1), np.stack([x, x + 1], 1))
    assert [np.asarray(u).tolist() for u in lax.unstack(x, 1)] == [[0, 3], [1, 4], [2, 5]]
    assert lax.dtype(1.0) == np.float32 and lax.dtype(1) == np.int32
    np.testing.assert_array_equal(lax.shape_as_value((2, 3)), [2, 3])
    src = np.arange(24.0, dtype=np.float32).reshape(2, 3, 4)
    np.testing.assert_array_equal(lax.index_take(src, (np.array([0, 1]), np.array([2, 0])),
                                                 (0, 2)), [[2, 6, 10], [12, 16, 20]])
    assert lax.DotDimensionNumbers is tuple
    assert lax.composite(lambda v: v * 2, "my.double")(3.0) == 6.0
    assert lax.platform_dependent(2.0, default=lambda v: v, vulkan=lambda v: v * 3) == 6.0
    assert lax.platform_dependent(2.0, default=lambda v: v + 1, cuda=lambda v: 0) == 3.0
    with pytest.raises(ShapeError):
        lax.broadcast_to_rank(x, 1)


def test_scatter_sub_approx_k_ragged_dot():
    dn = lax.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),
                                     scatter_dims_to_operand_dims=(0,))
    out = lax.scatter_sub(np.zeros(4, np.float32), np.array([[1], [3], [1]]),
                          np.float32([1, 2, 3]), dn)
    np.testing.assert_array_equal(out, [0, -4, 0, -2])
    v, i = lax.approx_min_k(np.float32([[3, 1, 2], [0, 5, -1]]), 2)
    np.testing.assert_array_equal(v, [[1, 2], [-1, 0]])
    np.testing.assert_array_equal(i, [[1, 2], [2, 0]])
    v, i = lax.approx_max_k(np.float32([[3, 1], [0, 5], [4, 2]]), 1, reduction_dimension=0)
    np.testing.assert_array_equal(v, [[4, 5]])
    np.testing.assert_array_equal(i, [[2, 1]])
    lhs = np.arange(12.0, dtype=np.float32).reshape(4, 3)
    rhs = np.arange(12.0, dtype=np.float32).reshape(2, 3, 2)
    np.testing.assert_array_equal(lax.ragged_dot(lhs, rhs, np.array([1, 2])),   # JAX's
                                  [[10, 13], [100, 112], [172, 193], [0, 0]])
    vg.check_grads(lambda a, b: lax.ragged_dot(a, b, np.array([3, 1])), (lhs / 10, rhs / 10),
                   order=1)


def test_conv_patches_and_local_convolution():
    x = np.arange(2 * 4 * 4, dtype=np.float32).reshape(1, 2, 4, 4) / 10
    p = lax.conv_general_dilated_patches(x, (2, 2), (1, 1), "VALID")
    assert p.shape == (1, 8, 3, 3)
    ref = np.stack([x[0, c, i:i + 3, j:j + 3] for c in range(2) for i in range(2)
                    for j in range(2)])
    np.testing.assert_allclose(p[0], ref, rtol=1e-6)
    r = (np.arange(3 * 8 * 3 * 3, dtype=np.float32).reshape(3, 8, 3, 3) % 7) / 10
    out = lax.conv_general_dilated_local(x, r, (1, 1), "VALID", (2, 2))
    np.testing.assert_allclose(out[0, :, 1, 2], [4.62, 3.41, 3.46], rtol=1e-5)   # JAX's
    np.testing.assert_allclose(out, np.einsum("nchw,ochw->nohw", np.asarray(p), r), rtol=1e-5)
    vg.check_grads(lambda a, w: lax.conv_general_dilated_local(a, w, (1, 1), "VALID", (2, 2)),
                   (x, r), order=1)


def test_shape_tuples_match_jax():
    dn = ("NHWC", "HWIO", "NHWC")
    assert lax.conv_general_shape_tuple((1, 5, 5, 3), (3, 3, 3, 8), (2, 2), "SAME", dn) == \
        (1, 3, 3, 8)
    assert lax.conv_transpose_shape_tuple((1, 5, 5, 3), (3, 3, 3, 8), (2, 2), "SAME", dn) == \
        (1, 10, 10, 8)
    assert lax.conv_transpose_shape_tuple((1, 5, 5, 3), (3, 3, 3, 8), (2, 2), "VALID", dn) == \
        (1, 11, 11, 8)
    assert lax.reduce_window_shape_tuple((5, 7), (2, 3), (2, 1), ((0, 1), (1, 1)), (1, 2),
                                         (2, 1)) == (2, 13)
    assert lax.conv_shape_tuple((2, 3, 9, 9), (4, 3, 3, 2), (2, 3), "VALID") == (2, 4, 4, 3)
    assert lax.conv_shape_tuple((2, 3, 9, 9), (4, 3, 3, 2), (2, 3), [(1, 1), (0, 2)]) == \
        (2, 4, 5, 4)


def test_custom_root_differentiates_implicitly():
    def sqrt_root(a):
        newton = lambda f, x0: lax.fori_loop(0, 30, lambda i, x: x - f(x) / (2 * x), x0)  # noqa: E731
        return lax.custom_root(lambda x: x * x - a, 1.0, newton, lambda g, y: y / g(1.0))
    assert abs(float(sqrt_root(4.0)) - 2.0) < 1e-6
    assert abs(float(vg.grad(sqrt_root)(4.0)) - 0.25) < 1e-6
    assert abs(float(vg.jit(vg.grad(sqrt_root))(9.0)) - 1 / 6) < 1e-6


@pytest.mark.parametrize("symmetric", [False, True])
def test_custom_linear_solve_gradients_match_solve(symmetric):
    A = np.float32([[3, 1], [1.5, 2]])
    A = A + A.T if symmetric else A
    b = np.float32([1, 2])

    def via_custom(A, b):
        solve = lambda mv, rhs: vnp.linalg.solve(A, rhs)   # noqa: E731
        tsolve = None if symmetric else (lambda vm, g: vnp.linalg.solve(A.T, g))
        return lax.custom_linear_solve(lambda x: A @ x, b, solve, tsolve, symmetric=symmetric)

    np.testing.assert_allclose(via_custom(A, b), np.linalg.solve(A, b), rtol=1e-5)
    got = vg.grad(lambda A, b: vnp.sum(via_custom(A, b) ** 2), (0, 1))(A, b)
    ref = vg.grad(lambda A, b: vnp.sum(vnp.linalg.solve(A, b) ** 2), (0, 1))(A, b)
    for g, r in zip(got, ref):
        np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-6)


def test_rng_bit_generator_is_a_function_of_the_key():
    key = np.uint32([1, 2, 3, 4])
    k1, bits = lax.rng_bit_generator(key, (5,))
    k2, again = lax.rng_bit_generator(key, (5,))
    np.testing.assert_array_equal(bits, again)
    assert k1.shape == (4,) and bits.shape == (5,)
    _, other = lax.rng_bit_generator(np.asarray(k1), (5,))
    assert not np.array_equal(np.asarray(other), np.asarray(bits))
    u = np.asarray(lax.rng_uniform(np.float32(2), np.float32(3), (1000,)))
    assert u.min() >= 2 and u.max() < 3 and abs(u.mean() - 2.5) < 0.05
    with pytest.raises(ShapeError):
        lax.rng_bit_generator(np.uint32([1, 2]), (3,))


# ---------------------------------------------------------------------- top-level vg

def test_switches_and_context_managers():
    f = vg.jit(lambda x: x * 2)
    with vg.disable_jit():
        out = f(np.ones(2, np.float32))
    assert f.compiles == 0 and np.asarray(out).tolist() == [2, 2]
    f(np.ones(2, np.float32))
    assert f.compiles == 1
    vg.clear_caches()
    f(np.ones(2, np.float32))
    assert f.compiles == 2
    for cm in (vg.default_matmul_precision("highest"), vg.numpy_dtype_promotion("standard"),
               vg.numpy_rank_promotion("allow"), vg.transfer_guard("allow"),
               vg.transfer_guard_host_to_device("allow"), vg.checking_leaks(),
               vg.check_tracer_leaks(True), vg.named_scope("block"),
               vg.ensure_compile_time_eval(), vg.log_compiles(True), vg.default_device(None)):
        with cm:
            pass
    with pytest.raises(ArgumentError, match="strict"):
        vg.numpy_dtype_promotion("strict")
    with pytest.raises(ArgumentError):
        vg.transfer_guard("disallow")
    assert vg.debug_infs is vg.debug_nans
    assert vg.float0 == np.dtype([("float0", np.void, 0)])


def test_devices_and_arrays_helpers():
    assert vg.process_index() == 0 and vg.process_count() == 1
    assert vg.device_count() == len(vg.devices()) == vg.local_device_count()
    assert vg.local_devices() == vg.devices()
    a = vg.device_put(np.ones(3, np.float32))
    got = vg.device_get({"a": a, "b": 1})
    assert isinstance(got["a"], np.ndarray) and got["b"] == 1
    assert any(x is a for x in vg.live_arrays())
    a.copy_to_host_async()
    vg.copy_to_host_async([a])
    vg.effects_barrier()
    text = vg.print_environment_info(return_string=True)
    assert "vkgrad:" in text and "numpy:" in text


def test_custom_gradient_closure_convert_named_call_fwd_and_bwd():
    @vg.custom_gradient
    def h(x, y):
        return x * y, lambda g: (g * y, g * x * 10)
    gx, gy = vg.grad(h, (0, 1))(2.0, 3.0)          # JAX: 3.0, 20.0
    assert float(gx) == 3.0 and float(gy) == 20.0

    @vg.custom_gradient
    def square(x):
        return x * x, lambda g: g * 3 * x
    assert float(vg.grad(square)(2.0)) == 6.0

    def outer(v):
        g, consts = vg.closure_convert(lambda x: x * v, np.ones(3, np.float32))
        assert len(consts) == 1
        return g(np.ones(3, np.float32), *consts)
    np.testing.assert_array_equal(vg.jit(outer)(np.full(3, 2, np.float32)), [2, 2, 2])
    assert vg.closure_convert(lambda x: x, 1.0)[1] == []
    named = vg.named_call(lambda x: x + 1, name="plus_one")
    assert named.__name__ == "plus_one" and named(1) == 2

    x = np.ones((2, 2), np.float32)
    W = np.arange(4.0, dtype=np.float32).reshape(2, 2)
    fwd, bwd = vg.fwd_and_bwd(lambda x, W: x @ W, argnums=(0, 1))
    y, res = fwd(x, W)
    cx, cW = bwd(res, np.ones((2, 2), np.float32))
    np.testing.assert_array_equal(y, x @ W)
    np.testing.assert_array_equal(cx, [[1, 5], [1, 5]])
    np.testing.assert_array_equal(cW, [[2, 2], [2, 2]])
    fwd, bwd = vg.fwd_and_bwd(lambda x, W: (vnp.sum(x @ W), 7), argnums=1, has_aux=True,
                              jitted=False)
    y, res, aux = fwd(x, W)
    assert aux == 7 and bwd(res, np.float32(1)).shape == (2, 2)


# ------------------------------------------------------------------------ vg.random

def test_multivariate_normal_is_jaxs_for_the_same_normals():
    mean, cov = np.float32([1, 2]), np.float32([[2, 0.5], [0.5, 1]])
    got = vg.random.multivariate_normal(vg.random.key(0), mean, cov, (3,))
    jax_values = [[3.29476261, 4.46815204], [0.38680488, 1.77316141], [1.24903011, 1.15295124]]
    np.testing.assert_allclose(got, jax_values, rtol=1e-5)
    for method in ("svd", "eigh"):
        draws = vg.random.multivariate_normal(vg.random.key(1), mean, cov, (20000,),
                                              method=method)
        np.testing.assert_allclose(np.cov(np.asarray(draws).T), cov, atol=0.06)
    g = vg.grad(lambda m: vnp.sum(vg.random.multivariate_normal(vg.random.key(0), m, cov)))(mean)
    np.testing.assert_allclose(g, [1, 1])
    with pytest.raises(ShapeError):
        vg.random.multivariate_normal(vg.random.key(0), mean, np.eye(3, dtype=np.float32))


def test_ball_clone_and_key_helpers():
    b = np.asarray(vg.random.ball(vg.random.key(0), 3, 2, (5000,)))
    r = np.linalg.norm(b, axis=-1)
    assert b.shape == (5000, 3) and r.max() <= 1 and abs(np.mean(r ** 3) - 0.5) < 0.02
    b1 = np.asarray(vg.random.ball(vg.random.key(0), 2, 1, (2000,)))
    assert np.abs(b1).sum(-1).max() <= 1
    k = vg.random.key(5)
    assert vg.random.clone(k) is k
    assert vg.random.key_impl(k) == "threefry2x32" and vg.random.key_dtype() == np.int32


# --------------------------------------------------------------------- vg.tree_util

def test_tree_util_node_helpers():
    tu = vg.tree_util
    assert tu.flatten_one_level_with_keys({"a": 1, "b": (2, 3)}) == \
        (((tu.DictKey("a"), 1), (tu.DictKey("b"), (2, 3))), ("a", "b"))
    assert tu.flatten_one_level_with_keys((1, [2])) == \
        (((tu.SequenceKey(0), 1), (tu.SequenceKey(1), [2])), None)
    assert [tu.is_tree_node(t) for t in (int, type(None), tuple, dict, np.ndarray,
                                         collections.OrderedDict)] == \
        [False, True, True, True, False, True]
    assert str(tu.treedef_tuple([tu.tree_structure(1), tu.tree_structure((1, 2))])) == \
        str(tu.tree_structure((1, (1, 2))))
    assert tu.tree_transpose(tu.tree_structure([0, 0]), tu.tree_structure((0, 0)),
                             [(1, 2), (3, 4)]) == ([1, 3], [2, 4])
    assert tu.default_registry.flatten({"a": 1})[0] == [1]
    assert tu.default_registry.is_node(list)
    assert tu.KeyPath == tuple[tu.KeyEntry, ...]

    @tu.register_dataclass
    @dataclasses.dataclass
    class Op:
        x: object
        op: str = vg.tree.static(default="add")
    leaves, td = vg.tree.flatten(Op(1.0))
    assert leaves == [1.0] and vg.tree.unflatten(td, [2.0]) == Op(2.0, "add")
