"""A careless user's inputs (issue 19's second campaign): each case here once returned a wrong
number without a word, or a bare error from inside. Every value is checked on the numpy
interpreter and on Vulkan (lavapipe) against numpy's, or JAX's where JAX differs (integer
division by zero, out-of-range updates, negative dynamic_slice starts); every error names the
problem and the user's line."""

import numpy as np
import pytest

import vkgrad as vg
import vkgrad.numpy as vnp
from vkgrad import nn

BACKENDS = ("numpy", "vulkan")
XI = np.array([7, -7, 5, 0, -2147483648], np.int32)
BOOLS = np.array([True, False, True])


def on_both(f, *args):
    """f's result on each backend, as numpy (a tuple stays a tuple)."""
    outs = []
    for b in BACKENDS:
        r = vg.jit(f, backend=b)(*args)
        outs.append(tuple(np.asarray(v) for v in r) if isinstance(r, tuple) else np.asarray(r))
    return outs


def check(f, args, want):
    for got in on_both(f, *args):
        assert got.dtype == np.asarray(want).dtype, (got.dtype, np.asarray(want).dtype)
        np.testing.assert_array_equal(got, want)


def test_invert_is_bitwise_on_integers():
    check(lambda x: ~x, (XI,), ~XI)
    check(lambda x: vnp.invert(x), (BOOLS,), ~BOOLS)
    with pytest.raises(vg.DTypeError, match=r"~ \(invert\) takes bool or integer arrays, got "
                                            r"f32\[2\][\s\S]*test_campaign.py"):
        vg.jit(lambda x: ~x)(np.ones(2, np.float32))


def test_integer_powers_stay_integers_and_wrap():
    a = np.array([2, -2, 3], np.int32)
    check(lambda x: x ** 2, (a,), a ** 2)
    check(lambda x: vnp.power(x, 31), (a,), np.power(a, 31))    # wraps in int32, as numpy
    check(lambda x: x ** 0, (a,), np.ones(3, np.int32))
    check(lambda x: x ** x, (a[[0, 2]],), np.array([4, 27], np.int32))
    with pytest.raises(vg.ArgumentError, match=r"negative integer power [\s\S]*test_campaign.py"):
        vg.jit(lambda x: x ** -1)(a)


def test_rounding_an_integer_keeps_it():
    for f in (vnp.floor, vnp.ceil, vnp.rint, vnp.trunc):
        check(f, (XI,), XI)


def test_integer_division_by_zero_gives_jax_values():
    y = np.array([2, 2, 0, 0, -1], np.int32)
    # JAX: 5 // 0 = -2 and 0 // 0 = -1 (XLA's quotient -1, floored); x % 0 = 0 (numpy too)
    check(lambda a, b: a // b, (XI, y), np.array([3, -4, -2, -1, -2147483648], np.int32))
    check(lambda a, b: a % b, (XI, y), np.array([1, 1, 0, 0, 0], np.int32))
    check(lambda a, b: vnp.divmod(a, b)[1], (XI, y), np.array([1, 1, 0, 0, 0], np.int32))


def test_float_mod_by_infinity():
    x = np.array([5., -5., 0., -3.], np.float32)
    y = np.array([np.inf, np.inf, -np.inf, -np.inf], np.float32)
    with np.errstate(invalid="ignore"):
        check(lambda a, b: a % b, (x, y), x % y)


def test_logsumexp_and_logaddexp_of_infinities():
    ninf = np.array([-np.inf, -np.inf], np.float32)
    check(nn.logsumexp, (ninf,), np.float32(-np.inf))
    check(nn.logsumexp, (np.array([np.inf, 1.], np.float32),), np.float32(np.inf))
    check(lambda x: nn.logsumexp(x, axis=1), (np.array([[0., 0.], [-np.inf, -np.inf]],
                                                       np.float32),),
          np.array([np.log(2), -np.inf], np.float32))
    a = np.array([-np.inf, np.inf, 1.], np.float32)
    check(vnp.logaddexp, (a, a), np.logaddexp(a, a))
    # the gradient is still softmax's where the values are finite
    g = vg.grad(lambda x: nn.logsumexp(x))(np.array([0., 0.], np.float32))
    np.testing.assert_allclose(g, [0.5, 0.5])


def test_hypot_does_not_overflow_or_underflow():
    x = np.array([3e30, 3e-30, 0., np.inf, 3.], np.float32)
    y = np.array([4e30, 4e-30, 0., 1., -4.], np.float32)
    for got in on_both(vnp.hypot, x, y):
        np.testing.assert_allclose(got, np.hypot(x, y), rtol=1e-6)


def test_bool_arithmetic_stays_bool_or_is_refused():
    t = np.array([True, True, False, False])
    u = np.array([True, False, True, False])
    check(lambda a, b: a + b, (t, u), t + u)
    check(lambda a, b: a * b, (t, u), t * u)
    check(lambda a, b: a ^ b, (t, u), t ^ u)
    check(lambda a, b: vnp.maximum(a, b), (t, u), np.maximum(t, u))
    check(lambda a: a + 1, (t,), t + np.int32(1))                  # with an int: int32
    for f in (lambda a: a - a, lambda a: -a):
        with pytest.raises(vg.DTypeError, match=r"- on bool arrays is refused[\s\S]*test_campaign"):
            vg.jit(f)(t)


def test_bitwise_operators_on_integers_are_bitwise_and_refused_on_floats():
    a, b = np.array([6, 5, -8], np.int32), np.array([3, 3, 1], np.int32)
    for f in (lambda x, y: x & y, lambda x, y: x | y, lambda x, y: x ^ y,
              lambda x, y: x << y, lambda x, y: x >> y, lambda x, y: 1 << y):
        check(f, (a, b), f(a, b))
    for f, name in ((lambda x: x & x, "bitwise_and"), (lambda x: x << 1, "left_shift")):
        with pytest.raises(vg.DTypeError, match=rf"{name} takes integer or bool arrays, got "
                                                r"f32\[3\][\s\S]*test_campaign.py"):
            vg.jit(f)(a.astype(np.float32))


def test_integer_and_bool_matmul_keep_their_dtype():
    m = np.arange(6, dtype=np.int32).reshape(2, 3)
    check(lambda x: x @ x.T, (m,), m @ m.T)
    check(lambda x: vnp.dot(x[0], x[1]), (m,), np.dot(m[0], m[1]))
    check(lambda x: vnp.tensordot(x, x.T, 1), (m,), np.tensordot(m, m.T, 1))
    e = np.array([[True, False], [True, True]])
    check(lambda x: x @ x, (e,), e @ e)


def test_argmax_of_bools_and_sort_of_bools():
    b = np.array([[False, True, True], [False, False, False]])
    check(lambda x: vnp.argmax(x, axis=1), (b,), np.argmax(b, axis=1).astype(np.int32))
    check(lambda x: vnp.argmin(x, axis=1), (b,), np.argmin(b, axis=1).astype(np.int32))
    check(vnp.sort, (BOOLS,), np.sort(BOOLS))


@pytest.mark.parametrize("i", [10, 4, -5, -1, 2])
def test_traced_out_of_range_updates_are_dropped_as_in_jax(i):
    x = np.arange(4, dtype=np.float32)
    want_add, want_set = x.copy(), x.copy()
    if -4 <= i < 4:
        want_add[i] += 9
        want_set[i] = 9
    check(lambda a, k: a.at[k].add(9.), (x, np.int32(i)), want_add)
    check(lambda a, k: a.at[k].set(9.), (x, np.int32(i)), want_set)


def test_traced_out_of_range_updates_in_two_dimensions():
    m = np.arange(12, dtype=np.float32).reshape(3, 4)
    check(lambda a, k: a.at[k].add(1.), (m[0], np.array([0, 7, -1, 0, -9], np.int32)),
          m[0] + np.array([2, 0, 0, 1], np.float32))
    check(lambda a, k: a.at[k, 1:].set(-1.), (m, np.int32(3)), m)
    check(lambda a, j: a.at[:, j].set(0.), (m, np.array([-1, 9], np.int32)),
          m * (np.arange(4) != 3))
    check(lambda a, i, j: a.at[i, j].add(1.),
          (m, np.array([0, 5], np.int32), np.array([1, 1], np.int32)),
          m + (np.arange(12).reshape(3, 4) == 1))
    check(lambda a, k: a.at[..., k].add(1.), (m, np.int32(-1)), m + (np.arange(4) == 3))


def test_python_int_beyond_int32_beside_an_int_array_names_the_line():
    with pytest.raises(vg.IntegerOverflowError, match=r"1099511627776 does not fit int32"
                                                      r"[\s\S]*test_campaign.py"):
        vg.jit(lambda x: x + 2 ** 40)(np.ones(2, np.int32))
    with pytest.raises(vg.IntegerOverflowError, match="test_campaign.py"):
        vnp.ones(2, np.int32) * 2 ** 33


def test_arange_with_step_zero_is_refused():
    with pytest.raises(vg.ArgumentError, match=r"arange: step is 0[\s\S]*test_campaign.py"):
        vnp.arange(0, 1, 0)


def test_a_learning_rate_that_is_not_a_number_is_refused_at_construction():
    from vkgrad import optim
    for bad in ("0.1", np.ones(2, np.float32), True):
        with pytest.raises(vg.ArgumentError, match=r"learning_rate must be a number[\s\S]*"
                                                   r"test_campaign.py"):
            optim.sgd(bad)
    assert optim.adam(np.float32(0.1)) is not None and optim.sgd(np.array(0.1)) is not None


def test_dynamic_slice_negative_start_counts_from_the_end_as_in_jax():
    x = np.arange(8, dtype=np.float32)
    m = x[:6].reshape(3, 2)
    L = vg.lax
    # JAX: a negative start counts from the end, then clamps so the window fits
    check(lambda a, i: L.dynamic_slice(a, (i,), (3,)), (x, np.int32(-2)), x[5:8])
    check(lambda a, i: L.dynamic_slice(a, (i,), (3,)), (x, np.int32(-20)), x[0:3])
    check(lambda a, i: L.dynamic_update_slice(a, np.ones(3, np.float32), (i,)),
          (x, np.int32(-1)), np.concatenate([x[:5], np.ones(3, np.float32)]))
    check(lambda a, i: L.dynamic_index_in_dim(a, i, 0, keepdims=False), (m, np.int32(-1)), m[2])
    with pytest.raises(vg.ArgumentError, match=r"dynamic_slice: start indices must be integer "
                                               r"scalars, got f32\[\][\s\S]*test_campaign.py"):
        vg.jit(lambda a, i: L.dynamic_slice(a, (i,), (2,)))(x, np.float32(1))


def test_conv_with_a_zero_stride_is_refused():
    img, ker = np.ones((1, 1, 4, 4), np.float32), np.ones((1, 1, 2, 2), np.float32)
    with pytest.raises(vg.ShapeError, match=r"window_strides \(0, 1\): every entry must be a "
                                            r"positive integer[\s\S]*test_campaign.py"):
        vg.lax.conv(img, ker, (0, 1), "SAME")
    with pytest.raises(vg.ShapeError, match=r"rhs_dilation \(1, 1.5\): every entry must be"):
        vg.lax.conv_general_dilated(img, ker, (1, 1), "SAME", rhs_dilation=(1, 1.5))


def test_a_concrete_boolean_mask_indexes_a_traced_array_as_numpy():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    m, cols = np.eye(3, 4, dtype=bool), np.array([True, False, False, True])
    check(lambda a: a[m], (x,), x[m])
    check(lambda a: a[[True, False, True]], (x,), x[[True, False, True]])
    check(lambda a: a[..., cols], (x,), x[..., cols])
    check(lambda a: a[None, np.array([True, False, True]), 1], (x,),
          x[None, np.array([True, False, True]), 1])
    check(lambda a: a.at[m].set(-1.), (x,), np.where(m, np.float32(-1), x))
    np.testing.assert_array_equal(vg.grad(lambda a: a[m].sum())(x), m.astype(np.float32))
    with pytest.raises(vg.VkgradIndexError, match=r"a boolean index of shape \(2,\) does not "
                                                  r"match the axes it indexes, \(3,\), of "
                                                  r"f32\[3,4\][\s\S]*test_campaign.py"):
        vg.jit(lambda a: a[np.array([True, False])])(x)


def test_a_float_axis_is_refused_not_truncated():
    x = np.ones((2, 3), np.float32)
    for f in (lambda a: vnp.sum(a, axis=1.0), lambda a: vnp.argmax(a, axis=1.5),
              lambda a: vnp.cumsum(a, axis=0.0)):
        with pytest.raises(vg.VkgradIndexError, match=r"axis .* must be an integer, not float"
                                                      r"[\s\S]*test_campaign.py"):
            vg.jit(f)(x)
    check(lambda a: vnp.sum(a, axis=np.int64(1)), (x,), np.full(2, 3, np.float32))


def test_integer_division_is_exact_over_the_int32_range():
    rng = np.random.default_rng(0)
    a = np.concatenate([rng.integers(-2 ** 31, 2 ** 31, 40),
                        [2 ** 31 - 1, -2 ** 31, 2 ** 25 + 2, -2 ** 24 - 3, 7, -7]]).astype(np.int32)
    b = np.concatenate([rng.integers(-2 ** 31, 2 ** 31, 16), rng.integers(1, 50, 24),
                        [3, -3, 1, -7, 2 ** 31 - 1, 2]]).astype(np.int32)
    check(lambda x, y: x // y, (a, b), a // b)       # was float32: 2**31 - 1 // 3 was 715827904
    check(lambda x, y: x % y, (a, b), a % b)
    check(lambda x, y: vnp.fmod(x, y), (a, b), np.fmod(a, b))
    check(lambda x: vnp.fmod(x, 0), (a[:3],), np.zeros(3, np.int32))


def test_float_to_int_conversion_saturates_as_in_jax():
    x = np.array([np.nan, np.inf, -np.inf, 3e9, -3e9, -3.7, 2.9, 2147483520.], np.float32)
    want = np.array([0, 2 ** 31 - 1, -2 ** 31, 2 ** 31 - 1, -2 ** 31, -3, 2, 2147483520],
                    np.int32)
    check(lambda a: a.astype(np.int32), (x,), want)
    check(lambda a: vnp.astype(a.astype(np.float16), np.int32), (x[:7],), want[:7])


def test_integer_updates_beyond_2_to_the_24_are_exact():
    big = 2 ** 25 + 1
    check(lambda a: a.at[0].set(big), (np.zeros(2, np.int32),), np.array([big, 0], np.int32))
    check(lambda a, i: a.at[i].set(big), (np.zeros(2, np.int32), np.int32(1)),
          np.array([0, big], np.int32))
    check(lambda a, i: a.at[i].add(1), (np.full(2, big, np.int32), np.int32(0)),
          np.array([big + 1, big], np.int32))


def test_a_negative_repeat_count_is_refused():
    with pytest.raises(vg.ShapeError, match=r"repeat: repeats is -1[\s\S]*test_campaign.py"):
        vg.jit(lambda a: vnp.repeat(a, -1))(np.ones(3, np.float32))


def test_an_empty_index_array_or_an_all_false_mask_runs_on_vulkan():
    """Failed on Vulkan: the empty index array is a constant of the program whose slot holds
    one element, and uploading its 0 elements raised `DeviceError: cannot upload 0 elements
    into a buffer of 1` (vkgrad/runtime/runners.py skips the upload now)."""
    x = np.arange(6.0, dtype=np.float32)
    check(lambda x: x[np.zeros(0, int)], (x,), np.zeros(0, np.float32))
    check(lambda x: x[np.zeros(6, bool)].sum(), (x,), np.float32(0))
    check(lambda x: x[np.zeros(0, int)].sum() + x[np.array([1, 2])].sum(), (x,), np.float32(3))
