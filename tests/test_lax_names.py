"""vg.lax's general reduce, its bool/int reductions, cummax/cummin/cumlogsumexp, the special
functions under lax's names and the integer bit counts: values against numpy and scipy on the
interpreter, gradients through the compositions, a few jitted on Vulkan."""

import numpy as np
import pytest
import scipy.special as sp

import vkgrad as vg
import vkgrad.numpy as vnp
from vkgrad import lax
from vkgrad.errors import ArgumentError, DTypeError, ShapeError

RNG = np.random.default_rng(1)
X = RNG.standard_normal((5, 7)).astype(np.float32)
I = RNG.integers(-2**31, 2**31 - 1, (5, 7), dtype=np.int64).astype(np.int32)
EDGE = np.int32([0, 1, -1, 2**31 - 1, -2**31, 255, 256, 12345678])


@pytest.mark.parametrize("comp,ref,init", [(lax.add, np.sum, 0.0), (vnp.multiply, np.prod, 1.0),
                                           (lax.max, np.max, -np.inf),
                                           (vnp.minimum, np.min, np.inf)])
def test_reduce_of_a_known_monoid_is_the_reduction(comp, ref, init):
    for dims in [(0,), (1,), (0, 1)]:
        np.testing.assert_allclose(lax.reduce(X, np.float32(init), comp, dims),
                                   ref(X, axis=dims), rtol=1e-5)
    # a non-identity init value takes part once, as in JAX
    np.testing.assert_allclose(lax.reduce(X, np.float32(2.0), lax.add, (1,)),
                               X.sum(1) + 2, rtol=1e-5)


def test_reduce_folds_an_arbitrary_associative_computation():
    logaddexp = lambda a, b: vnp.logaddexp(a, b)                            # noqa: E731
    for dims in [(0,), (1,), (1, 0)]:                     # 5 and 7: odd lengths carried
        got = lax.reduce(X, np.float32(-np.inf), logaddexp, dims)
        np.testing.assert_allclose(got, sp.logsumexp(X, axis=dims), rtol=1e-5)
    got = lax.reduce(I, np.int32(0), vnp.bitwise_xor, (0, 1))
    assert int(got) == int(np.bitwise_xor.reduce(I.ravel()))
    vg.check_grads(lambda x: lax.reduce(x, np.float32(-np.inf), logaddexp, (1,)), (X,), order=1)
    empty = lax.reduce(np.zeros((0, 3), np.float32), np.float32(4.0), logaddexp, (0,))
    np.testing.assert_array_equal(empty, np.full(3, 4.0, np.float32))


def test_reduce_multi_operand_form_is_an_argmax():
    idx = np.broadcast_to(np.arange(7, dtype=np.int32), X.shape)

    def argmax_step(a, b):
        (av, ai), (bv, bi) = a, b
        take_b = (bv > av) | ((bv == av) & (bi < ai))
        return vnp.where(take_b, bv, av), vnp.where(take_b, bi, ai)

    v, i = lax.reduce((X, idx), (np.float32(-np.inf), np.int32(0)), argmax_step, (1,))
    np.testing.assert_array_equal(v, X.max(1))
    np.testing.assert_array_equal(i, X.argmax(1))


def test_reduce_refuses_bad_input():
    with pytest.raises(ArgumentError, match="dimensions"):
        lax.reduce(X, 0.0, lax.add, (2,))
    with pytest.raises(ArgumentError, match="init_values"):
        lax.reduce((X, X), 0.0, lax.add, (0,))
    with pytest.raises(ShapeError, match="one shape"):
        lax.reduce((X, X[0]), (0.0, 0.0), lambda a, b: a, (0,))


def test_bool_and_integer_reductions():
    B = X > 0
    np.testing.assert_array_equal(lax.reduce_and(B, (1,)), B.all(1))
    np.testing.assert_array_equal(lax.reduce_or(B, (0,)), B.any(0))
    np.testing.assert_array_equal(lax.reduce_xor(B, (1,)), np.logical_xor.reduce(B, 1))
    np.testing.assert_array_equal(lax.reduce_and(I, (0,)), np.bitwise_and.reduce(I, 0))
    np.testing.assert_array_equal(lax.reduce_or(I, (1,)), np.bitwise_or.reduce(I, 1))
    np.testing.assert_array_equal(lax.reduce_xor(I, (0, 1)), np.bitwise_xor.reduce(I.ravel()))
    with pytest.raises(DTypeError, match="reduce_or"):
        lax.reduce_or(X, (0,))
    np.testing.assert_array_equal(lax.reduce_and(np.zeros((0, 2), bool), (0,)), [True, True])
    # lax.bitwise_and / or of bools are all / any; of integers, a fold
    np.testing.assert_array_equal(lax.reduce(B, True, lax.bitwise_and, (1,)), B.all(1))
    np.testing.assert_array_equal(lax.reduce(I, np.int32(0), lax.bitwise_or, (0,)),
                                  np.bitwise_or.reduce(I, 0))


def test_bitwise_ops_and_shifts_as_jax():
    s = np.int32([0, 1, 5, 31, 32, 40, -1, 3])
    x = np.int32([-7, -7, 12345, -1, -1, 5, 9, -2**31])
    np.testing.assert_array_equal(lax.bitwise_not(x), ~x)
    np.testing.assert_array_equal(lax.bitwise_xor(x, s), x ^ s)
    ok = (s >= 0) & (s < 32)
    sc = np.where(ok, s, 0)
    u = x.view(np.uint32)
    np.testing.assert_array_equal(lax.shift_left(x, s), np.where(ok, x << sc, 0))
    np.testing.assert_array_equal(lax.shift_right_arithmetic(x, s),
                                  np.where(ok, x >> sc, x >> 31))
    np.testing.assert_array_equal(lax.shift_right_logical(x, s),
                                  np.where(ok, u >> sc.astype(np.uint32), 0).view(np.int32))
    with pytest.raises(DTypeError, match="same dtypes"):
        lax.bitwise_and(x, True)


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("reverse", [False, True])
def test_cumulative_max_min_logsumexp(axis, reverse):
    def ref(ufunc, x):
        x = np.flip(x, axis) if reverse else x
        out = ufunc.accumulate(x, axis=axis)
        return np.flip(out, axis) if reverse else out

    np.testing.assert_array_equal(lax.cummax(X, axis, reverse), ref(np.maximum, X))
    np.testing.assert_array_equal(lax.cummin(X, axis=axis, reverse=reverse), ref(np.minimum, X))
    np.testing.assert_allclose(lax.cumlogsumexp(X, axis, reverse), ref(np.logaddexp, X),
                               rtol=1e-5)
    with pytest.raises(ShapeError, match="axis 2"):
        lax.cummax(X, 2)


def test_cumulative_gradients():
    vg.check_grads(lambda x: lax.cumlogsumexp(x, 1), (X,), order=1)
    g = vg.grad(lambda x: vnp.sum(lax.cummax(x)))(np.float32([1, 3, 2, 5, 4]))
    np.testing.assert_array_equal(g, np.float32([1, 2, 0, 2, 0]))


def test_special_functions_under_lax_names():
    a = np.float32([0.5, 1.0, 3.0, 10.0])
    x = np.float32([0.2, 1.5, 2.0, 12.0])
    u = np.float32([0.1, 0.5, 0.7, 0.95])
    np.testing.assert_allclose(lax.igamma(a, x), sp.gammainc(a, x), rtol=2e-5)
    np.testing.assert_allclose(lax.igammac(a, x), sp.gammaincc(a, x), rtol=2e-5)
    np.testing.assert_allclose(lax.regularized_incomplete_beta(a, x, u), sp.betainc(a, x, u),
                               rtol=5e-5)
    np.testing.assert_allclose(lax.bessel_i0e(X), sp.i0e(X), rtol=1e-5)
    np.testing.assert_allclose(lax.bessel_i1e(X), sp.i1e(X), rtol=1e-5, atol=1e-7)
    s = np.float32([1.5, 2.0, 3.0, 7.5])
    np.testing.assert_allclose(lax.zeta(s, x), sp.zeta(s, x), rtol=2e-5)
    for m in (0, 1, 2, 3):
        np.testing.assert_allclose(lax.polygamma(np.float32(m), x), sp.polygamma(m, x),
                                   rtol=5e-5)
    vg.check_grads(lambda x: lax.igamma(np.float32(2.0), x) + lax.bessel_i0e(x),
                   (np.abs(X) + 0.5,), order=1)


def test_population_count_and_clz():
    def bits(v):
        return np.array([bin(int(n) & 0xFFFFFFFF).count("1") for n in v.ravel()],
                        np.int32).reshape(v.shape)

    def lead(v):
        return np.array([32 - (int(n) & 0xFFFFFFFF).bit_length() for n in v.ravel()],
                        np.int32).reshape(v.shape)

    for v in (EDGE, I):
        np.testing.assert_array_equal(lax.population_count(v), bits(v))
        np.testing.assert_array_equal(lax.clz(v), lead(v))
    with pytest.raises(DTypeError, match="clz"):
        lax.clz(X)


def test_nextafter_is_numpys():
    fi = np.finfo(np.float32)
    x = np.float32([1, 1, 2, -2, -2, 0, 0, fi.max, fi.max, np.inf, -np.inf, fi.tiny, fi.tiny,
                    fi.smallest_subnormal, 3e-41, np.nan, 1, 0.1, -7.3e20, 4])
    y = np.float32([2, 0, 0, 0, -3, 1, -1, np.inf, 0, 0, 0, 0, 1, 0, 0, 1, np.nan, -1, 0, 4])
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(lax.nextafter(x, y), np.nextafter(x, y))
        p2 = np.float32(2.0) ** np.arange(-149, 128).astype(np.float32)   # every power of two
        wide = (RNG.standard_normal(2000) * 10.0 ** RNG.integers(-44, 38, 2000)).astype(np.float32)
        for v in (p2, -p2, wide):
            for to in (np.inf, -np.inf, 0):
                t = np.full_like(v, to)
                np.testing.assert_array_equal(lax.nextafter(v, t), np.nextafter(v, t))
    with pytest.raises(DTypeError, match="nextafter"):
        lax.nextafter(I, I)


def test_jitted_on_vulkan():
    def f(x, i):
        return (lax.reduce(x, np.float32(-np.inf), vnp.logaddexp, (1,)), lax.cummax(x, 1),
                lax.population_count(i), lax.clz(i), lax.reduce_xor(i, (0,)),
                lax.shift_right_logical(i, vnp.full_like(i, 3)),
                lax.nextafter(x, np.float32(0.0)))

    got = vg.jit(f, backend="vulkan")(X, I)
    want = f(X, I)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5)
    np.testing.assert_array_equal(got[-1], np.nextafter(X, np.float32(0.0)))
