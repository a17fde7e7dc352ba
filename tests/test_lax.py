"""vg.lax: an importable module of JAX's lax names, each against numpy; traced start indices
for the dynamic slices; gradients through the compositions; no name that is not JAX's."""

import math

import numpy as np
import pytest

import vkgrad as vg
import vkgrad.numpy as vnp
from vkgrad import lax
from vkgrad.lax import dynamic_slice, dynamic_update_slice  # noqa: F401  (importable)

RNG = np.random.default_rng(0)
X = RNG.standard_normal((3, 4)).astype(np.float32)
Y = RNG.standard_normal((3, 4)).astype(np.float32)
POS = (np.abs(X) + 0.5).astype(np.float32)
UNIT = np.tanh(X).astype(np.float32)
I = np.int32([[7, -7, 5], [-5, 6, 9]])
J = np.int32([[2, 2, -3], [3, -4, 4]])

UNARY = {
    "abs": (X, np.abs), "acos": (UNIT, np.arccos), "acosh": (POS + 1, np.arccosh),
    "asin": (UNIT, np.arcsin), "asinh": (X, np.arcsinh), "atan": (X, np.arctan),
    "atanh": (UNIT * 0.9, np.arctanh), "ceil": (X, np.ceil), "cos": (X, np.cos),
    "cosh": (X, np.cosh), "exp": (X, np.exp), "exp2": (X, np.exp2), "expm1": (X, np.expm1),
    "floor": (X, np.floor), "is_finite": (np.float32([1, np.inf, np.nan]), np.isfinite),
    "log": (POS, np.log), "log1p": (POS, np.log1p), "neg": (X, np.negative),
    "sign": (X, np.sign), "sin": (X, np.sin), "sinh": (X, np.sinh), "sqrt": (POS, np.sqrt),
    "square": (X, np.square), "tan": (UNIT, np.tan), "tanh": (X, np.tanh),
    "rsqrt": (POS, lambda x: 1 / np.sqrt(x)), "cbrt": (X, np.cbrt),
    "logistic": (np.float32([-30, -5, 0, 3, 40]), lambda x: 1 / (1 + np.exp(-x))),
    "erf": (X, np.vectorize(math.erf)), "erfc": (X, np.vectorize(math.erfc)),
    "lgamma": (POS, np.vectorize(math.lgamma)),
    "erf_inv": (UNIT * 0.9, None),
}


@pytest.mark.parametrize("name", UNARY)
def test_unary(name):
    x, ref = UNARY[name]
    got = getattr(lax, name)(x)
    if name == "erf_inv":     # the inverse of erf
        np.testing.assert_allclose(np.vectorize(math.erf)(np.asarray(got, np.float64)), x,
                                   rtol=2e-6, atol=2e-7)
        return
    np.testing.assert_allclose(np.asarray(got, np.float64), ref(x.astype(np.float64)),
                               rtol=2e-6, atol=2e-6)


BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
    "rem": np.fmod, "pow": None, "max": np.maximum, "min": np.minimum, "atan2": np.arctan2,
    "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
    "gt": np.greater, "ge": np.greater_equal,
}


@pytest.mark.parametrize("name", BINARY)
def test_binary(name):
    ref = BINARY[name]
    if name == "pow":
        x, y, ref = POS, Y, np.power
    else:
        x, y = X, Y
    np.testing.assert_allclose(getattr(lax, name)(x, y), ref(x, y), rtol=2e-6, atol=1e-6)


def test_integer_division_and_remainder_round_toward_zero():
    np.testing.assert_array_equal(lax.div(I, J), np.trunc(I / J).astype(np.int32))
    np.testing.assert_array_equal(lax.rem(I, J), np.fmod(I, J))


def test_elementwise_specials():
    h = np.float32([-2.5, -1.5, -0.5, 0.5, 1.5, 2.4])
    np.testing.assert_array_equal(lax.round(h), [-3, -2, -1, 1, 2, 2])
    np.testing.assert_array_equal(lax.round(h, lax.RoundingMethod.TO_NEAREST_EVEN), np.rint(h))
    np.testing.assert_allclose(lax.integer_pow(X, 3), X ** 3, rtol=1e-6)
    np.testing.assert_allclose(lax.integer_pow(POS, -2), POS ** -2.0, rtol=1e-6)
    np.testing.assert_array_equal(lax.clamp(-0.5, X, 0.5), np.clip(X, -0.5, 0.5))
    np.testing.assert_array_equal(lax.select(X > 0, X, Y), np.where(X > 0, X, Y))
    np.testing.assert_array_equal(lax.select_n(X > 0, X, Y), np.where(X > 0, Y, X))
    which = np.int32([[0, 1, 2, 0]] * 3)
    np.testing.assert_array_equal(lax.select_n(which, X, Y, X * 2),
                                  np.choose(which, [X, Y, X * 2]))
    assert lax.convert_element_type(X, np.int32).dtype == np.int32
    g = vg.grad(lambda x: vnp.sum(lax.stop_gradient({"a": x})["a"] * x))(X)
    np.testing.assert_allclose(g, X)


def test_reductions_and_scans():
    np.testing.assert_allclose(lax.reduce_sum(X, (1,)), X.sum(1), rtol=1e-6)
    np.testing.assert_array_equal(lax.reduce_max(X, (0, 1)), X.max())
    np.testing.assert_array_equal(lax.reduce_min(X, (0,)), X.min(0))
    np.testing.assert_allclose(lax.reduce_prod(X, (1,)), X.prod(1), rtol=1e-5)
    np.testing.assert_array_equal(lax.argmax(X, 1, np.int32), X.argmax(1))
    np.testing.assert_array_equal(lax.argmin(X, 0, np.int32), X.argmin(0))
    np.testing.assert_allclose(lax.cumsum(X, 1), np.cumsum(X, 1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(lax.cumsum(X, 1, reverse=True),
                               np.cumsum(X[:, ::-1], 1)[:, ::-1], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(lax.cumprod(X, 0), np.cumprod(X, 0), rtol=1e-5, atol=1e-6)


def test_layout():
    v = np.arange(3, dtype=np.float32)
    np.testing.assert_array_equal(lax.broadcast_in_dim(v, (2, 3, 4), (1,)),
                                  np.broadcast_to(v[None, :, None], (2, 3, 4)))
    np.testing.assert_array_equal(lax.broadcast(v, (2,)), np.broadcast_to(v, (2, 3)))
    np.testing.assert_array_equal(lax.reshape(X, (4, 3)), X.reshape(4, 3))
    np.testing.assert_array_equal(lax.reshape(X, (12,), dimensions=(1, 0)), X.T.reshape(12))
    np.testing.assert_array_equal(lax.transpose(X, (1, 0)), X.T)
    np.testing.assert_array_equal(lax.squeeze(X[None], (0,)), X)
    np.testing.assert_array_equal(lax.expand_dims(X, (0, 3)), X[None, :, :, None])
    np.testing.assert_array_equal(lax.rev(X, (0, 1)), X[::-1, ::-1])
    np.testing.assert_array_equal(lax.concatenate([X, Y], 1), np.concatenate([X, Y], 1))
    np.testing.assert_array_equal(lax.pad(v, 9.0, [(1, 2, 1)]), [9, 0, 9, 1, 9, 2, 9, 9])
    np.testing.assert_array_equal(lax.pad(X, 0.0, [(0, 1, 0), (2, 0, 0)]),
                                  np.pad(X, [(0, 1), (2, 0)]))
    np.testing.assert_array_equal(lax.slice(X, (0, 1), (3, 4), (2, 2)), X[0:3:2, 1:4:2])
    np.testing.assert_array_equal(lax.slice_in_dim(X, 1, 3, axis=1), X[:, 1:3])
    np.testing.assert_array_equal(lax.index_in_dim(X, -1, 0, keepdims=False), X[-1])
    a, b = lax.split(X, (1, 3), axis=1)
    np.testing.assert_array_equal(b, X[:, 1:])
    np.testing.assert_array_equal(lax.collapse(np.zeros((2, 3, 4)), 1).shape, (2, 12))
    np.testing.assert_array_equal(lax.iota(np.int32, 5), np.arange(5))
    np.testing.assert_array_equal(lax.broadcasted_iota(np.int32, (2, 3), 1),
                                  np.broadcast_to(np.arange(3), (2, 3)))
    np.testing.assert_array_equal(lax.full((2, 2), 3.0, np.float32), np.full((2, 2), 3.0))
    np.testing.assert_array_equal(lax.full_like(X, 1.0), np.ones_like(X))
    np.testing.assert_array_equal(lax.zeros_like_array(X), np.zeros_like(X))


def test_dynamic_slices_clamp_like_jax_and_take_traced_starts():
    np.testing.assert_array_equal(lax.dynamic_slice(X, (1, 1), (2, 2)), X[1:3, 1:3])
    np.testing.assert_array_equal(lax.dynamic_slice(X, (5, -3), (2, 2)), X[1:3, 1:3])  # JAX: -3 counts from the end
    np.testing.assert_array_equal(lax.dynamic_slice_in_dim(X, 2, 2, axis=1), X[:, 2:4])
    np.testing.assert_array_equal(lax.dynamic_index_in_dim(X, 1, 0, keepdims=False), X[1])
    up = np.full((2, 2), 9.0, np.float32)
    want = X.copy()
    want[1:3, 2:4] = up
    np.testing.assert_array_equal(lax.dynamic_update_slice(X, up, (1, 2)), want)
    np.testing.assert_array_equal(lax.dynamic_update_slice(X, up, (7, 9)), want)   # clamped
    want0 = X.copy()
    want0[:, 1] = 5.0
    np.testing.assert_array_equal(
        lax.dynamic_update_index_in_dim(X, np.full(3, 5.0, np.float32), 1, 1), want0)
    # traced starts, under jit
    f = vg.jit(lambda x, i: (lax.dynamic_slice(x, (i, 0), (2, 4)),
                             lax.dynamic_update_slice_in_dim(x, up[:1], i, 0)),
               backend="numpy")
    for i in range(4):
        s, u = f(X, np.int32(i))
        k = min(i, 1)
        np.testing.assert_array_equal(s, X[k:k + 2])
        w = X.copy()
        w[min(i, 2):min(i, 2) + 1, :2] = 9.0
        np.testing.assert_array_equal(u[:, :2], w[:, :2])
    # gradients flow to the operand and to the update
    g_x, g_u = vg.grad(lambda x, u: vnp.sum(lax.dynamic_update_slice(x, u, (1, 2)) ** 2),
                       argnums=(0, 1))(X, up)
    mask = np.ones_like(X)
    mask[1:3, 2:4] = 0
    np.testing.assert_allclose(g_x, 2 * X * mask)
    np.testing.assert_allclose(g_u, 2 * up)


def test_contractions():
    a = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    b = RNG.standard_normal((2, 4, 5)).astype(np.float32)
    np.testing.assert_allclose(lax.dot_general(a, b, (((2,), (1,)), ((0,), (0,)))), a @ b,
                               rtol=1e-5, atol=1e-5)
    c = RNG.standard_normal((5, 3)).astype(np.float32)
    # contract a's axis 1 with c's axis 1, no batch: result (2, 4, 5)
    np.testing.assert_allclose(lax.dot_general(a, c, (((1,), (1,)), ((), ()))),
                               np.einsum("ijk,lj->ikl", a, c), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(lax.dot(X, Y.T), X @ Y.T, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(lax.dot(X[0], Y[0]), X[0] @ Y[0], rtol=1e-5)
    np.testing.assert_allclose(lax.batch_matmul(a, b), a @ b, rtol=1e-5, atol=1e-5)
    with pytest.raises(vg.ShapeError, match="dot_general"):
        lax.dot(a, b)


def test_sorting():
    vals, idx = lax.top_k(X, 2)
    np.testing.assert_array_equal(idx, np.argsort(-X, axis=1, kind="stable")[:, :2])
    np.testing.assert_array_equal(vals, np.take_along_axis(X, idx, 1))
    np.testing.assert_array_equal(lax.sort(X, 0), np.sort(X, 0))
    k, v = lax.sort_key_val(X, Y, 1)
    order = np.argsort(X, axis=1, kind="stable")
    np.testing.assert_array_equal(k, np.take_along_axis(X, order, 1))
    np.testing.assert_array_equal(v, np.take_along_axis(Y, order, 1))


def test_only_jax_names():
    for name in ("selective_scan", "matmul", "take"):
        with pytest.raises(AttributeError, match="vkgrad.lax"):
            getattr(vg.lax, name)
    assert set(lax.__all__) <= set(dir(lax))


def test_gradients_through_compositions():
    vg.check_grads(lambda x: lax.dot_general(x, x, (((1,), (1,)), ((), ()))), (X,), order=1)
    vg.check_grads(lambda x: lax.broadcast_in_dim(x[0], (2, 4), (1,)) * 2.0, (X,), order=1)
    vg.check_grads(lambda x: lax.pad(x, 1.5, [(1, 0, 1), (0, 2, 0)]), (X,), order=1)
    vg.check_grads(lambda x: lax.logistic(x) + lax.rsqrt(x * x + 1.0), (X,), order=2)


def test_binary_ops_refuse_mixed_dtypes_as_jax_lax_does():
    """lax's binary ops take one dtype (Python scalars at their default: int32, float32); vnp's
    functions promote."""
    with pytest.raises(vg.DTypeError, match="lax.add requires arguments to have the same "
                                            "dtypes, got int32, float32"):
        lax.add(1, 1.0)
    with pytest.raises(vg.DTypeError, match="got float32, int32"):
        lax.mul(np.float32(2.0), 3)
    np.testing.assert_array_equal(lax.add(np.ones(2, np.float32), 1.0), [2.0, 2.0])
    np.testing.assert_array_equal(lax.max(np.arange(3, dtype=np.int32), 1), [1, 1, 2])


def test_optimization_barrier_is_the_identity_under_grad_vmap_and_jit():
    tree = {"a": X, "b": (Y, 3.0)}
    out = lax.optimization_barrier(tree)
    np.testing.assert_array_equal(np.asarray(out["a"]), X)
    assert float(out["b"][1]) == 3.0

    def f(x):
        y = lax.optimization_barrier(vnp.sin(x))
        return vnp.sum(y * y + vnp.cos(y))

    want = np.cos(X) * (2 * np.sin(X) - np.sin(np.sin(X)))
    np.testing.assert_allclose(np.asarray(vg.grad(f)(X)), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(vg.vmap(vg.grad(f))(X)), want, rtol=1e-5, atol=1e-6)
    for backend in ("numpy", "vulkan"):
        np.testing.assert_allclose(np.asarray(vg.jit(vg.grad(f), backend=backend)(X)), want,
                                   rtol=1e-5, atol=1e-6)


def test_optimization_barrier_keeps_its_value_in_memory():
    """Without it, sin(x) is recomputed inside each kernel that reads it; with it, one kernel
    writes it and the readers read it from there."""
    def f(x, barrier):
        y = vnp.sin(x)
        y = lax.optimization_barrier(y) if barrier else y
        return vnp.sum(y), y * 2.0

    def sin_kernels(barrier):
        low = vg.jit(lambda x: f(x, barrier), backend="vulkan").lower(X)
        return sum(b.prim.name == "sin" for s in low.lowered.steps
                   if s.eqn.prim.name == "fused" for b in s.eqn.params["body"].eqns)

    assert sin_kernels(False) == 2 and sin_kernels(True) == 1
    got = vg.jit(lambda x: f(x, True), backend="vulkan")(X)
    np.testing.assert_allclose(np.asarray(got[0]), np.sin(X).sum(), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(got[1]), 2 * np.sin(X), rtol=1e-5, atol=1e-6)
