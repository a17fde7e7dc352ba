"""What a JAX user expects where vkgrad once differed (issues 19 and 21): derivatives at the
kinks, NaN in top_k and descending sorts, cross_entropy with out-of-range traced labels, and
the names the ported suites found missing. Every expected value here is what JAX 0.10.2 gives
(run on its CPU backend; quoted beside each check), and every check runs on the numpy
interpreter and on Vulkan (lavapipe)."""

import numpy as np
import pytest

import vkgrad as vg
import vkgrad.numpy as vnp
from vkgrad import nn

BACKENDS = ("numpy", "vulkan")
NAN, INF = np.nan, np.inf


def on_both(f, *args):
    """f's result on each backend, as numpy (a tuple stays a tuple)."""
    outs = []
    for b in BACKENDS:
        r = vg.jit(f, backend=b)(*args)
        outs.append(tuple(np.asarray(v) for v in r) if isinstance(r, (tuple, list))
                    else np.asarray(r))
    return outs


def check(f, args, *want, rtol=0.0):
    """f(*args) on both backends equals want (one value, or one per result; within rtol)."""
    for got in on_both(f, *args):
        got = got if isinstance(got, tuple) else (got,)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.dtype == np.asarray(w).dtype or not hasattr(w, "dtype"), (g.dtype, w)
            np.testing.assert_allclose(g, np.asarray(w, g.dtype), rtol=rtol, atol=0)


def f32(*v):
    return np.array(v, np.float32)


# ----------------------------------------------------------------- derivatives at the kinks

def test_relu_has_jax_derivative_at_zero():
    # jax.grad(lambda x: jax.nn.relu(x).sum())([-1., 0., 1.]) = [0. 0. 1.]
    check(vg.grad(lambda x: vnp.sum(nn.relu(x))), (f32(-1, 0, 1),), f32(0, 0, 1))
    check(nn.relu, (f32(NAN, -1, 0, 2),), f32(NAN, 0, 0, 2))   # NaN stays NaN


def test_abs_has_jax_derivative_at_zero():
    # jax.grad(lambda x: jnp.abs(x).sum())([-1., 0., 1.]) = [-1. 1. 1.]
    check(vg.grad(lambda x: vnp.sum(vnp.abs(x))), (f32(-1, 0, 1),), f32(-1, 1, 1))


def test_maximum_and_minimum_split_a_tie():
    a, b = f32(1, 2, 3), f32(2, 2, 2)
    # jax.grad(lambda a, b: jnp.maximum(a, b).sum(), (0, 1)): [0. .5 1.], [1. .5 0.]
    check(vg.grad(lambda a, b: vnp.sum(vnp.maximum(a, b)), (0, 1)), (a, b),
          f32(0, .5, 1), f32(1, .5, 0))
    # ... jnp.minimum: [1. .5 0.], [0. .5 1.]
    check(vg.grad(lambda a, b: vnp.sum(vnp.minimum(a, b)), (0, 1)), (a, b),
          f32(1, .5, 0), f32(0, .5, 1))
    # jnp.maximum(x, 0.) at [-1, 0, 1]: [0. .5 1.]; a broadcast scalar operand sums its shares
    check(vg.grad(lambda x, c: vnp.sum(vnp.maximum(x, c)), (0, 1)), (f32(-1, 0, 1), f32(0)),
          f32(0, .5, 1), f32(1.5))
    # a NaN result sends nothing back to either operand (JAX: eq(x, NaN) is False)
    check(vg.grad(lambda a, b: vnp.sum(vnp.maximum(a, b)), (0, 1)), (f32(NAN, 1), f32(1, NAN)),
          f32(0, 0), f32(0, 0))


def test_clip_at_its_bounds():
    x = f32(-1, 0, .5, 1, 2)
    # jax.grad(lambda x: jnp.clip(x, 0., 1.).sum()) = [0. .5 1. .5 0.]
    check(vg.grad(lambda x: vnp.sum(vnp.clip(x, 0., 1.))), (x,), f32(0, .5, 1, .5, 0))
    # traced bounds: each gets 1 (below / above) + .5 (the tie): 1.5 and 1.5
    check(vg.grad(lambda x, lo, hi: vnp.sum(vnp.clip(x, lo, hi)), (0, 1, 2)),
          (x, f32(0), f32(1)), f32(0, .5, 1, .5, 0), f32(1.5), f32(1.5))


def test_fmax_and_fmin_give_a_tie_to_the_second():
    a, b = f32(1, 2, 3), f32(2, 2, 2)
    # jax.grad(lambda a, b: jnp.fmax(a, b).sum(), (0, 1)): [0. 0. 1.], [1. 1. 0.]
    check(vg.grad(lambda a, b: vnp.sum(vnp.fmax(a, b)), (0, 1)), (a, b),
          f32(0, 0, 1), f32(1, 1, 0))
    check(vg.grad(lambda a, b: vnp.sum(vnp.fmin(a, b)), (0, 1)), (a, b),
          f32(1, 0, 0), f32(0, 1, 1))
    check(vnp.fmax, (f32(NAN, 1, NAN), f32(2, NAN, NAN)), f32(2, 1, NAN))


def test_max_reduction_and_sort_ties():
    x = f32(1, 3, 3, 0)
    # jax.grad(jnp.max)(x) = [0. .5 .5 0.]; jnp.min of [1, 0, 3, 0]: [0. .5 0. .5]
    check(vg.grad(vnp.max), (x,), f32(0, .5, .5, 0))
    check(vg.grad(vnp.min), (f32(1, 0, 3, 0),), f32(0, .5, 0, .5))
    # jax.grad(lambda x: jnp.max(x, axis=1).sum()) of [[1, 3, 3], [2, 2, 2]]
    check(vg.grad(lambda x: vnp.sum(vnp.max(x, axis=1))), (np.array([[1, 3, 3], [2, 2, 2]],
                                                                     np.float32),),
          np.array([[0, .5, .5], [1 / 3, 1 / 3, 1 / 3]], np.float32))
    # jax.grad(lambda x: (jnp.sort(x) * jnp.arange(4.)).sum())(x) = [1. 2. 3. 0.]
    check(vg.grad(lambda x: vnp.sum(vnp.sort(x) * vnp.arange(4.))), (x,), f32(1, 2, 3, 0))
    # jax.grad(jnp.ptp)(x) = [0. .5 .5 -1.]
    check(vg.grad(vnp.ptp), (x,), f32(0, .5, .5, -1))


def test_reduce_window_max_and_min_give_a_tie_to_the_first():
    # JAX's select_and_scatter_add: jax.grad of lax.reduce_window(x, inf, lax.min, (1, 2),
    # (1, 2), "VALID").sum() at [[1, 1]] is [[1 0]] (max: tests/test_pooling_and_norms.py)
    for comp, init in ((vg.lax.min, INF), (vnp.maximum, -INF)):
        check(vg.grad(lambda x: vnp.sum(vg.lax.reduce_window(x, init, comp, (1, 2), (1, 2),
                                                              "VALID"))),
              (np.array([[1, 1]], np.float32),), np.array([[1, 0]], np.float32))


def test_jax_nn_activations_at_their_kinks():
    # jax.grad of the sum at the kinks: relu6 [0, 6, 3] -> [0 0 1]; leaky_relu [0, 1] -> [1 1];
    # hard_tanh [-1, 0, 1] -> [1 1 1]; elu [0] -> [1]
    check(vg.grad(lambda x: vnp.sum(nn.relu6(x))), (f32(0, 6, 3),), f32(0, 0, 1))
    check(vg.grad(lambda x: vnp.sum(nn.leaky_relu(x))), (f32(0, 1),), f32(1, 1))
    check(vg.grad(lambda x: vnp.sum(nn.hard_tanh(x))), (f32(-1, 0, 1),), f32(1, 1, 1))
    check(vg.grad(lambda x: vnp.sum(nn.elu(x))), (f32(0),), f32(1))
    x = f32(-3, -0.5, 0, 2, 7, NAN)
    with np.errstate(invalid="ignore"):
        check(nn.relu6, (x,), np.minimum(np.maximum(x, 0), 6))
        check(nn.hard_tanh, (x,), np.clip(x, -1, 1))
        check(lambda x: nn.leaky_relu(x, 0.1), (x,), np.where(x >= 0, x, 0.1 * x))
        check(nn.elu, (x,), np.where(x > 0, x, np.expm1(np.minimum(x, 0))), rtol=1e-6)


# ------------------------------------------------------------------------ NaN in sorting

X_NAN = np.array([[1., NAN, 3., -INF, NAN, 2.], [INF, 0., NAN, INF, -1., 5.]], np.float32)


def test_top_k_sorts_nan_as_largest():
    # jax.lax.top_k(X_NAN, 4): values [[nan nan 3 2] [nan inf inf 5]],
    # indices [[1 4 2 5] [2 0 3 5]]
    check(lambda x: vg.lax.top_k(x, 4), (X_NAN,),
          np.array([[NAN, NAN, 3, 2], [NAN, INF, INF, 5]], np.float32),
          np.array([[1, 4, 2, 5], [2, 0, 3, 5]], np.int32))
    # ties keep the lower index first (jax.lax.top_k([3, 1, 3, 2], 3): [3 3 2], [0 2 3])
    check(lambda x: vg.lax.top_k(x, 3), (f32(3, 1, 3, 2),),
          f32(3, 3, 2), np.array([0, 2, 3], np.int32))
    # its gradient lands on the picked entries, NaN ones included
    check(vg.grad(lambda x: vnp.nansum(vg.lax.top_k(x, 3)[0])), (X_NAN,),
          np.array([[0, 0, 1, 0, 0, 0], [1, 0, 0, 1, 0, 0]], np.float32))


def test_descending_sort_puts_nan_first():
    # jnp.argsort(X_NAN, descending=True) = [[1 4 2 5 0 3] [2 0 3 5 1 4]]; ascending: NaN last
    check(lambda x: vnp.argsort(x, descending=True), (X_NAN,),
          np.array([[1, 4, 2, 5, 0, 3], [2, 0, 3, 5, 1, 4]], np.int32))
    check(lambda x: vnp.sort(x, descending=True), (X_NAN,),
          np.array([[NAN, NAN, 3, 2, 1, -INF], [NAN, INF, INF, 5, 0, -1]], np.float32))
    check(vnp.argsort, (X_NAN,), np.argsort(X_NAN, kind="stable").astype(np.int32))
    # stable: ties in index order (jnp.argsort([1, 3, 3, 0], descending=True) = [1 2 0 3])
    check(lambda x: vnp.argsort(x, descending=True), (f32(1, 3, 3, 0),),
          np.array([1, 2, 0, 3], np.int32))


# ---------------------------------------------------------- cross_entropy with traced labels

def test_cross_entropy_out_of_range_traced_label_is_nan_as_jax():
    logits = np.array([[1., 2., 3.], [0., 0., 0.]], np.float32)
    # JAX: -mean(take_along_axis(log_softmax(logits), labels[:, None], -1)) and its gradient
    # with labels [0, 5]: nan, [[-0.45498472 0.12236424 0.33262047] [0 0 0]];
    # with labels [0, -1] (the last class): 1.7531091, second row [1/6 1/6 -1/3]
    row0 = [-0.45498472, 0.12236424, 0.33262047]
    for b in BACKENDS:
        step = vg.jit(vg.value_and_grad(nn.cross_entropy), backend=b)
        loss, g = step(logits, np.array([0, 5], np.int32))
        assert np.isnan(float(loss))
        np.testing.assert_allclose(np.asarray(g), [row0, [0, 0, 0]], rtol=1e-5, atol=1e-7)
        loss, g = step(logits, np.array([0, -1], np.int32))
        np.testing.assert_allclose(float(loss), 1.7531091, rtol=1e-6)
        np.testing.assert_allclose(np.asarray(g), [row0, [1 / 6, 1 / 6, -1 / 3]], rtol=1e-5)
        assert np.isnan(float(step(logits, np.array([-4, 0], np.int32))[0]))


# ------------------------------------------------------------------------- missing names

def test_bitwise_functions_and_shift_operators():
    a = np.array([1, -8, 5, 7, -1, 3], np.int32)
    b = np.array([0, 1, 31, 32, 33, -1], np.int32)
    # jnp.left_shift(a, b) = [1 -16 -2147483648 0 0 0]; jnp.right_shift(a, b) = [1 -4 0 0 -1 0]
    check(vnp.left_shift, (a, b), np.array([1, -16, -2 ** 31, 0, 0, 0], np.int32))
    check(vnp.right_shift, (a, b), np.array([1, -4, 0, 0, -1, 0], np.int32))
    check(lambda a: (vnp.bitwise_and(a, 6), vnp.bitwise_or(a, 6), vnp.bitwise_xor(a, 6),
                     vnp.bitwise_not(a), vnp.invert(a)), (a,),
          a & 6, a | 6, a ^ 6, ~a, ~a)
    # the operators, reflected ones too: jnp's [4 -32 20 28 -4 12] [0 -4 2 3 -1 1] ...
    check(lambda a: (a << 2, a >> 1, a & 3, 2 << a[:3], 1 | a, 5 ^ a), (a,),
          a << 2, a >> 1, a & 3, np.int32(2) << a[:3], 1 | a, 5 ^ a)
    t = np.array([True, False])
    # bools: and/or/xor stay logical bools; a shift computes in int32 (jnp.left_shift: int32)
    check(lambda t: (vnp.bitwise_and(t, True), vnp.bitwise_xor(t, t), vnp.left_shift(t, 1)),
          (t,), t, np.array([False, False]), np.array([2, 0], np.int32))
    with pytest.raises(vg.DTypeError, match=r"right_shift takes integer or bool arrays, got "
                                            r"f32\[6\][\s\S]*test_parity_jax.py"):
        vnp.right_shift(a.astype(np.float32), 1)


X_UNIQUE = np.array([3., 1., NAN, 3., 2., NAN, 1.], np.float32)


def test_unique_eager_is_numpys():
    # jnp.unique(X_UNIQUE, return_index=True, return_inverse=True, return_counts=True):
    # [1 2 3 nan], [1 4 0 2], [2 0 3 2 1 3 0], [2 1 2 2] (NaNs are one value)
    vals, idx, inv, counts = vnp.unique(X_UNIQUE, return_index=True, return_inverse=True,
                                        return_counts=True)
    assert isinstance(vals, vg.Array) and np.asarray(idx).dtype == np.int32
    np.testing.assert_array_equal(vals, f32(1, 2, 3, NAN))
    np.testing.assert_array_equal(idx, [1, 4, 0, 2])
    np.testing.assert_array_equal(inv, [2, 0, 3, 2, 1, 3, 0])
    np.testing.assert_array_equal(counts, [2, 1, 2, 2])
    rows = np.array([[1, 2], [1, 2], [0, 5]], np.int32)
    np.testing.assert_array_equal(vnp.unique(rows, axis=0), [[0, 5], [1, 2]])


def test_unique_under_jit_takes_jax_size_and_fill_value():
    # jax.jit(lambda x: jnp.unique(x, size=6))(X_UNIQUE) = [1 2 3 nan 1 1] (padded with the
    # smallest); with fill_value=-1 and every return_*: [1 2 3 nan -1 -1], [1 4 0 2 1 1],
    # [2 0 3 2 1 3 0], [2 1 2 2 0 0]; size=2: [1 2]
    check(lambda x: vnp.unique(x, size=6), (X_UNIQUE,), f32(1, 2, 3, NAN, 1, 1))
    check(lambda x: vnp.unique(x, size=6, fill_value=-1., return_index=True,
                               return_inverse=True, return_counts=True), (X_UNIQUE,),
          f32(1, 2, 3, NAN, -1, -1), np.array([1, 4, 0, 2, 1, 1], np.int32),
          np.array([2, 0, 3, 2, 1, 3, 0], np.int32), np.array([2, 1, 2, 2, 0, 0], np.int32))
    check(lambda x: vnp.unique(x, size=2), (X_UNIQUE,), f32(1, 2))
    # the values are gathered from x: jax.grad(lambda x: jnp.unique(x, size=3).sum()) of
    # [2, 1, 2] is [1 2 0] (the padding reads the smallest value again)
    check(vg.grad(lambda x: vnp.sum(vnp.unique(x, size=3))), (f32(2, 1, 2),), f32(1, 2, 0))
    with pytest.raises(vg.ConcretizationError, match=r"vnp.unique[\s\S]*size=n, fill_value=v"
                                                     r"[\s\S]*test_parity_jax.py"):
        vg.jit(vnp.unique)(X_UNIQUE)


KEY = vg.random.PRNGKey(0)


def close_on_both(f, args, want, rtol=1e-5):
    for got in on_both(f, *args):
        np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-6)


def test_random_choice_draws_as_jax():
    # jax.random.choice(jax.random.PRNGKey(0), ...): the same numbers, except without
    # replacement and p (a permutation's prefix: vkgrad's permutation is JAX's distribution,
    # not its numbers, docs/random.md)
    check(lambda k: vg.random.choice(k, 10, (5,)), (KEY,), np.array([9, 0, 2, 3, 1], np.int32))
    check(lambda k: vg.random.choice(k, vnp.arange(10.) * 2, (2, 3)), (KEY,),
          np.array([[18, 0, 4], [6, 2, 14]], np.float32))
    p = f32(.1, .2, .3, .4, 0.)
    check(lambda k: vg.random.choice(k, 5, (6,), p=p), (KEY,),
          np.array([0, 0, 3, 2, 2, 3], np.int32))
    check(lambda k: vg.random.choice(k, 5, (3,), replace=False, p=p), (KEY,),
          np.array([1, 0, 3], np.int32))
    check(lambda k: vg.random.choice(k, vnp.arange(12).reshape(3, 4), (2,), axis=1), (KEY,),
          np.array([[1, 0], [5, 4], [9, 8]], np.int32))
    for got in on_both(lambda k: vg.random.choice(k, 5, (5,), replace=False), KEY):
        assert sorted(got.tolist()) == list(range(5))
    with pytest.raises(vg.ArgumentError, match=r"larger sample \(size 5\) than the population "
                                               r"\(size 3\)[\s\S]*test_parity_jax.py"):
        vg.random.choice(KEY, 3, (5,), replace=False)
    with pytest.raises(vg.ShapeError, match=r"p must be None or a 1-D vector with one "
                                            r"probability per choice \(3\)"):
        vg.random.choice(KEY, 3, (2,), p=f32(.5, .5))


def test_random_truncated_normal_and_gumbel_draw_as_jax():
    # jax.random.truncated_normal(jax.random.PRNGKey(0), -1., 2., (6,)), and (-inf, .5):
    close_on_both(lambda k: vg.random.truncated_normal(k, -1., 2., (6,)), (KEY,),
                  f32(1.5094677, 1.747393, -0.17467561, 0.10624172, 0.31906945, -0.5413444))
    close_on_both(lambda k: vg.random.truncated_normal(k, -INF, 0.5, (4,)), (KEY,),
                  f32(0.39960477, 0.45835495, -0.7396141, -0.45635706))
    # jax.grad(lambda lo: truncated_normal(key, lo, 2., (3,)).sum())(-1.) = 0.5701862
    close_on_both(vg.grad(lambda lo: vnp.sum(vg.random.truncated_normal(KEY, lo, 2., (3,)))),
                  (np.float32(-1),), 0.5701862, rtol=1e-5)
    # jax.random.gumbel(jax.random.PRNGKey(0), (3,))
    close_on_both(lambda k: vg.random.gumbel(k, (3,)), (KEY,),
                  f32(2.9233725, 3.8326178, -0.09689324))
    x = np.asarray(vg.random.truncated_normal(KEY, 0.0, 0.25, (2000,)))
    assert x.min() > 0 and x.max() < 0.25


def test_narrow_integers_are_int32_with_jax_conversion_values():
    # jnp: [300, -1, 129].astype(uint8) = [44 255 129], .astype(int8) = [44 -1 -127];
    # [300.5, -1., 3.7].astype(uint8) = [255 0 3] (a float saturates); int16 of 70000: 4464
    i = np.array([300, -1, 129, 70000], np.int32)
    f = f32(300.5, -1., 3.7, 129.)
    with pytest.warns(UserWarning, match=r"Explicitly requested dtype u?int(8|16) requested in "
                                         r"astype is stored as int32"):
        check(lambda i, f: (i.astype(np.uint8), i.astype(np.int8), i.astype(np.int16),
                            f.astype(np.uint8), f.astype(np.int8)), (i, f),
              np.array([44, 255, 129, 112], np.int32), np.array([44, -1, -127, 112], np.int32),
              np.array([300, -1, 129, 4464], np.int32), np.array([255, 0, 3, 129], np.int32),
              np.array([127, -1, 3, 127], np.int32))
    with pytest.warns(UserWarning, match=r"dtype uint8 requested in zeros is stored as int32"):
        assert vnp.zeros(2, np.uint8).dtype == np.int32
    assert vnp.asarray(np.array([200, 100], np.uint8)).dtype == np.int32   # data: no warning
