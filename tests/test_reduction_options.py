"""numpy's where= and initial= on the reductions, ptp, and jax.nn's softplus and exact gelu
(names the campaign found missing), on the interpreter and on Vulkan against numpy."""

import math

import numpy as np
import pytest

import vkgrad as vg
import vkgrad.numpy as vnp
from vkgrad import nn
from vkgrad.errors import ArgumentError

X = np.array([[1., 5., -2.], [3., np.nan, 0.]], np.float32)
M = np.array([[True, False, True], [True, False, False]])


@pytest.mark.parametrize("backend", ["numpy", "vulkan"])
def test_where_and_initial_leave_elements_out_as_numpy(backend):
    f = vg.jit(lambda x: (vnp.sum(x, axis=1, where=M), vnp.sum(x, initial=1.0, where=M),
                          vnp.max(x, axis=1, initial=-10.0, where=M), vnp.min(x, initial=0.0),
                          vnp.mean(x, axis=1, where=M), vnp.ptp(x[:, [0, 2]], axis=0)),
               backend=backend)
    want = (np.sum(X, axis=1, where=M), np.sum(X, initial=1.0, where=M),
            np.max(X, axis=1, initial=-10.0, where=M), np.min(X, initial=0.0),
            np.mean(X, axis=1, where=M), np.ptp(X[:, [0, 2]], axis=0))
    assert f.lower(X).fallback_reason is None
    for got, w in zip(f(X), want):
        np.testing.assert_allclose(np.asarray(got), w, rtol=1e-6)


def test_max_with_where_needs_initial():
    with pytest.raises(ArgumentError, match=r"max\(where=...\) needs initial="):
        vnp.max(X, where=M)


def test_the_gradient_of_a_masked_sum_is_the_mask():
    g = vg.grad(lambda x: vnp.sum(x * x, where=M))(np.nan_to_num(X))
    np.testing.assert_allclose(np.asarray(g), 2 * np.nan_to_num(X) * M)


@pytest.mark.parametrize("backend", ["numpy", "vulkan"])
def test_softplus_and_the_exact_gelu(backend):
    x = np.float32([-100, -3, -0.5, 0, 0.5, 3, 100])
    sp, ge = vg.jit(lambda x: (nn.softplus(x), nn.gelu(x, approximate=False)),
                    backend=backend)(x)
    np.testing.assert_allclose(np.asarray(sp), np.logaddexp(x.astype(np.float64), 0), rtol=1e-6,
                               atol=1e-37)   # softplus(-100) is a subnormal, or 0 flushed
    exact = [0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x.astype(np.float64)]
    np.testing.assert_allclose(np.asarray(ge), exact, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(nn.gelu(x)), np.asarray(nn.gelu(x, approximate=True)))
