"""vg.random.gamma, loggamma, beta, dirichlet and poisson (issue 21): JAX's distributions
(moments, and a Kolmogorov-Smirnov test against scipy's at fixed keys; poisson a chi-square test
of its counts against scipy's pmf), JAX's shapes, dtypes and parameter
broadcasting, the same numbers on Vulkan as on the interpreter. Not JAX's numbers (their
docstrings say why)."""

import numpy as np
import pytest
import scipy.stats as st

import vkgrad as vg
from random_checks import assert_vulkan_draws_the_interpreters_numbers

N = 20000
KEY = vg.random.key(42)


@pytest.mark.parametrize("a", [0.1, 0.7, 1.0, 3.0, 25.0])
def test_gamma_is_gamma_distributed(a):
    x = np.asarray(vg.random.gamma(KEY, a, (N,)))
    assert x.dtype == np.float32 and (x >= 0).all() and np.isfinite(x).all()
    assert x.mean() == pytest.approx(a, rel=5 * np.sqrt(1 / (a * N)))     # 5 sigma
    assert x.var() == pytest.approx(a, rel=0.1)
    assert st.kstest(x, st.gamma(a).cdf).pvalue > 1e-3


def test_loggamma_is_the_log_and_keeps_tiny_samples():
    a = 0.01     # samples below float32's smallest normal: gamma rounds them, loggamma not
    lg = np.asarray(vg.random.loggamma(KEY, a, (N,)))
    assert np.isfinite(lg).all() and lg.min() < -200
    np.testing.assert_allclose(np.exp(lg), vg.random.gamma(KEY, a, (N,)), rtol=1e-5,
                               atol=1e-37)
    assert st.kstest(lg, lambda v: st.gamma(a).cdf(np.exp(v.astype(np.float64)))).pvalue > 1e-3


@pytest.mark.parametrize("a,b", [(0.5, 2.0), (2.0, 5.0), (0.05, 0.05)])
def test_beta_is_beta_distributed(a, b):
    x = np.asarray(vg.random.beta(KEY, a, b, (N,)))
    assert np.isfinite(x).all() and ((0 <= x) & (x <= 1)).all()
    assert x.mean() == pytest.approx(a / (a + b), abs=0.01)
    # against numpy's draws rounded to float32: at a = b = 0.05 a fifth of the mass lies within
    # float32's last step below 1 and rounds to 1, which a test against the continuous cdf sees
    ref = np.random.default_rng(0).beta(a, b, N).astype(np.float32)
    assert st.ks_2samp(x, ref).pvalue > 1e-3


def test_dirichlet_rows_sum_to_one_with_beta_marginals():
    alpha = np.float32([0.3, 1.0, 4.0])
    x = np.asarray(vg.random.dirichlet(KEY, alpha, (N,)))
    assert x.shape == (N, 3) and x.dtype == np.float32
    np.testing.assert_allclose(x.sum(-1), 1, rtol=1e-5)
    np.testing.assert_allclose(x.mean(0), alpha / alpha.sum(), atol=0.01)
    for i, ai in enumerate(alpha):   # marginal i is Beta(alpha_i, sum - alpha_i)
        assert st.kstest(x[:, i], st.beta(ai, alpha.sum() - ai).cdf).pvalue > 1e-3


@pytest.mark.parametrize("lam", [0.3, 4.0, 9.9, 10.0, 55.0, 3000.0])
def test_poisson_is_poisson_distributed(lam):
    x = np.asarray(vg.random.poisson(KEY, lam, (N,)))
    assert x.dtype == np.int32 and (x >= 0).all()
    assert x.mean() == pytest.approx(lam, rel=5 * np.sqrt(1 / (lam * N)))
    assert x.var() == pytest.approx(lam, rel=0.1)
    # bins with at least 20 expected draws, the tails lumped into the outer two
    dist = st.poisson(lam)
    edges = np.arange(int(dist.ppf(1e-4)), int(dist.ppf(1 - 1e-4)) + 2)
    expected = np.diff(dist.cdf(edges - 1)) * N
    keep = expected >= 20
    lo, hi = edges[:-1][keep][0], edges[:-1][keep][-1]
    obs = np.array([(x <= lo).sum()] + [(x == k).sum() for k in range(lo + 1, hi)] +
                   [(x >= hi).sum()])
    exp = np.array([dist.cdf(lo)] + [dist.pmf(k) for k in range(lo + 1, hi)] +
                   [dist.sf(hi - 1)]) * N
    assert st.chisquare(obs, exp).pvalue > 1e-3


def test_poisson_edge_rates_as_jax():
    # jax.random.poisson(key, [-1, 0, nan, 3]) on JAX 0.10.2: [-1, 0, -1, k >= 0]
    x = np.asarray(vg.random.poisson(KEY, np.float32([-1, 0, np.nan, 3])))
    assert x.tolist()[:3] == [-1, 0, -1] and x[3] >= 0
    with pytest.raises(vg.DTypeError, match="poisson: dtype must be int32"):
        vg.random.poisson(KEY, 1.0, dtype=np.float32)


def test_shapes_and_broadcasting_as_jax():
    # jax.random: gamma(k, a[2,1], (3,2,4)) -> (3,2,4); beta(k, a[2], b[3,1]) -> (3,2);
    # dirichlet(k, alpha[2,3]) -> (2,3), dirichlet(k, alpha[3], (4,)) -> (4,3)
    assert vg.random.gamma(KEY, np.ones((2, 1)), (3, 2, 4)).shape == (3, 2, 4)
    assert vg.random.gamma(KEY, np.float32([1, 2])).shape == (2,)
    assert vg.random.beta(KEY, np.ones(2), np.ones((3, 1))).shape == (3, 2)
    assert vg.random.dirichlet(KEY, np.ones((2, 3))).shape == (2, 3)
    assert vg.random.dirichlet(KEY, np.ones(3), (4,)).shape == (4, 3)
    assert vg.random.poisson(KEY, np.ones((2, 1)), (3, 2, 4)).shape == (3, 2, 4)
    a = np.float32([0.5, 5.0])        # per-element parameters
    x = np.asarray(vg.random.gamma(KEY, a, (N, 2)))
    np.testing.assert_allclose(x.mean(0), a, rtol=0.05)
    with vg.enable_x64():
        assert np.asarray(vg.random.gamma(KEY, 2.0, (3,), np.float64)).dtype == np.float64


def test_bad_parameters_are_named():
    with pytest.raises(vg.ShapeError, match="gamma: shape \\(3,\\) is not compatible"):
        vg.random.gamma(KEY, np.ones(2), (3,))
    with pytest.raises(vg.DTypeError, match="beta: dtype must be a float dtype"):
        vg.random.beta(KEY, 1.0, 1.0, dtype=np.int32)
    with pytest.raises(vg.ShapeError, match="dirichlet: alpha needs at least one axis"):
        vg.random.dirichlet(KEY, 1.0)


def test_vulkan_draws_the_interpreters_numbers():
    def draw(k, a):
        k1, k2, k3 = vg.random.split(k, 3)
        return (vg.random.gamma(k1, a, (4, 3)), vg.random.dirichlet(k2, a),
                vg.random.poisson(k3, a * 4, (2, 3)))
    assert_vulkan_draws_the_interpreters_numbers(draw, KEY, np.float32([[0.4, 1.0, 6.0]]))


def test_under_vmap_a_batch_of_keys_draws_per_key():
    keys = vg.random.split(KEY, 3)
    batched = vg.vmap(lambda k: vg.random.beta(k, 2.0, 3.0, (5,)))(keys)
    loop = np.stack([vg.random.beta(keys[i], 2.0, 3.0, (5,)) for i in range(3)])
    np.testing.assert_allclose(batched, loop, rtol=1e-6)
