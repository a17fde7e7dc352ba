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
