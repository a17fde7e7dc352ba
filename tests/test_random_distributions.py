"""vg.random's distributions composed of gamma, uniform and normal (issue 21): t, chisquare,
f, binomial, multinomial, generalized_normal, weibull_min, pareto, maxwell, double_sided_maxwell, rayleigh,
wald, geometric, triangular, lognormal. Each is checked against scipy's distribution at a fixed
key (Kolmogorov-Smirnov; binomial and geometric a chi-square test of their counts), with JAX's
shapes, dtypes, edge values and parameter broadcasting; the formulas of uniform and normal
against JAX 0.10.2's own numbers; Vulkan against the interpreter."""

import numpy as np
import pytest
import scipy.stats as st

import vkgrad as vg
from random_checks import assert_vulkan_draws_the_interpreters_numbers

N = 20000
KEY = vg.random.key(42)
R = vg.random


class _DoubleSidedMaxwell:
    """loc + scale * (a random sign) * (a Maxwell): its cdf from scipy's Maxwell's."""
    def __init__(self, loc, scale):
        self.loc, self.scale = loc, scale

    def cdf(self, x):
        y = (np.asarray(x, np.float64) - self.loc) / self.scale
        return 0.5 + 0.5 * np.sign(y) * st.maxwell.cdf(np.abs(y))


CONTINUOUS = [
    ("t 1", lambda k: R.t(k, 1.0, (N,)), st.t(1)),
    ("t 5", lambda k: R.t(k, np.float32(5), (N,)), st.t(5)),
    ("chisquare 0.5", lambda k: R.chisquare(k, 0.5, (N,)), st.chi2(0.5)),
    ("chisquare 7", lambda k: R.chisquare(k, 7.0, (N,)), st.chi2(7)),
    ("f 3 7", lambda k: R.f(k, 3.0, 7.0, (N,)), st.f(3, 7)),
    ("generalized_normal 1", lambda k: R.generalized_normal(k, 1.0, (N,)), st.gennorm(1)),
    ("generalized_normal 4", lambda k: R.generalized_normal(k, 4.0, (N,)), st.gennorm(4)),
    ("weibull_min", lambda k: R.weibull_min(k, 2.0, 1.5, (N,)), st.weibull_min(1.5, scale=2)),
    ("pareto", lambda k: R.pareto(k, 3.0, (N,)), st.pareto(3)),
    ("maxwell", lambda k: R.maxwell(k, (N,)), st.maxwell()),
    ("double_sided_maxwell", lambda k: R.double_sided_maxwell(k, 1.0, 2.0, (N,)),
     _DoubleSidedMaxwell(1.0, 2.0)),
    ("rayleigh", lambda k: R.rayleigh(k, 2.0, (N,)), st.rayleigh(scale=2)),
    ("wald", lambda k: R.wald(k, 1.5, (N,)), st.invgauss(1.5)),
    ("triangular", lambda k: R.triangular(k, -1.0, 0.5, 3.0, (N,)), st.triang(0.375, -1, 4)),
    ("lognormal", lambda k: R.lognormal(k, 0.5, (N,)), st.lognorm(0.5)),
]


@pytest.mark.parametrize("name,draw,dist", CONTINUOUS, ids=[c[0] for c in CONTINUOUS])
def test_continuous_draws_have_scipys_distribution(name, draw, dist):
    x = np.asarray(draw(KEY))
    assert x.shape == (N,) and x.dtype == np.float32 and np.isfinite(x).all()
    assert st.kstest(x, dist.cdf).pvalue > 1e-3


def _chisquare_pvalue(x, dist):
    """Counts against the pmf, in bins of 20 or more expected draws, the tails lumped in."""
    lo, hi = int(dist.ppf(1e-4)), int(dist.ppf(1 - 1e-4))
    ks = [k for k in range(lo, hi + 1) if dist.pmf(k) * N >= 20]
    lo, hi = ks[0], ks[-1]
    obs = [(x <= lo).sum()] + [(x == k).sum() for k in range(lo + 1, hi)] + [(x >= hi).sum()]
    exp = [dist.cdf(lo)] + [dist.pmf(k) for k in range(lo + 1, hi)] + [dist.sf(hi - 1)]
    return st.chisquare(obs, np.array(exp) * N * sum(obs) / (N * sum(exp))).pvalue


# n q <= 10 draws by inversion, above by BTRS; p > 1/2 draws n - Binomial(n, 1 - p)
@pytest.mark.parametrize("n,p", [(5, 0.3), (30, 0.9), (20, 0.4), (100, 0.3), (100, 0.8),
                                 (5000, 0.5)])
def test_binomial_is_binomial_distributed(n, p):
    x = np.asarray(R.binomial(KEY, n, p, (N,)))
    assert x.dtype == np.float32 and ((0 <= x) & (x <= n)).all() and (x == np.floor(x)).all()
    var = n * p * (1 - p)
    assert x.mean() == pytest.approx(n * p, abs=5 * np.sqrt(var / N))
    assert x.var() == pytest.approx(var, rel=0.1)
    assert _chisquare_pvalue(x, st.binom(n, p)) > 1e-3


@pytest.mark.parametrize("p", [0.05, 0.5])
def test_geometric_is_geometric_distributed(p):
    x = np.asarray(R.geometric(KEY, p, (N,)))
    assert x.dtype == np.int32 and (x >= 1).all()
    assert _chisquare_pvalue(x, st.geom(p)) > 1e-3


def test_multinomial_counts_sum_to_n_with_binomial_marginals():
    p = np.float32([0.2, 0.5, 0.3])
    x = np.asarray(R.multinomial(KEY, 20.0, p, shape=(N, 3)))
    assert x.shape == (N, 3) and x.dtype == np.float32
    assert (x.sum(-1) == 20).all()
    np.testing.assert_allclose(x.mean(0), 20 * p, atol=0.05)
    for i, pi in enumerate(p):    # outcome i's count is Binomial(20, p_i)
        assert _chisquare_pvalue(x[:, i], st.binom(20, pi)) > 1e-3


def test_edge_parameters_as_jax():
    # jax.random.binomial(key, [-1, nan, inf, 0, 5, 5, 5], [.5, .5, .5, .5, nan, -.1, 1]) on
    # JAX 0.10.2: [nan, nan, inf, 0, nan, nan, 5]
    x = np.asarray(R.binomial(KEY, np.float32([-1, np.nan, np.inf, 0, 5, 5, 5]),
                              np.float32([.5, .5, .5, .5, np.nan, -.1, 1])))
    np.testing.assert_array_equal(x, [np.nan, np.nan, np.inf, 0, np.nan, np.nan, 5])
    assert (np.asarray(R.binomial(KEY, 7.0, 0.0, (50,))) == 0).all()
    assert np.asarray(R.geometric(KEY, 0.0)) == 2 ** 31 - 1      # JAX's int32 max


# jax.random.*(jax.random.PRNGKey(0), ...) on JAX 0.10.2, with a = [[0.5], [2]] and
# c = [0.7, 1, 3]: formulas of uniform and normal, so JAX's numbers up to rounding
a = np.float32([[0.5], [2.0]])
c = np.float32([0.7, 1.0, 3.0])
JAX_NUMBERS = [
    (lambda k: R.weibull_min(k, a, c, (2, 3)),
     [2.3451533, 1.9217123, 0.36959767, 1.0392077, 1.6874225, 1.1311767]),
    (lambda k: R.pareto(k, a, (2, 3)),
     [3.6513098e+02, 2.1794963e+03, 2.2429838e+00, 1.3718834e+00, 1.5247884e+00, 1.0946811]),
    (lambda k: R.maxwell(k, (2, 3)),
     [2.6310966, 0.99103284, 0.9649306, 3.0782752, 1.3358209, 1.892936]),
    (lambda k: R.double_sided_maxwell(k, a, c, ())[0, 0],     # shape (2, 3, 2, 3), as JAX's
     [1.5820047, 2.0741277, -5.7475915, 3.604692, 4.1050215, 4.737585]),
    (lambda k: R.rayleigh(k, a, (2, 3)),
     [0.16393916, 0.10405014, 0.7422071, 2.462291, 2.1209698, 3.793432]),
    (lambda k: R.wald(k, a, (2, 3)),
     [0.24933201, 0.2661928, 0.2963536, 0.442173, 0.62379193, 0.88937366]),
    (lambda k: R.geometric(k, np.float32([0, 1, 0.5, 0.1, 0.01, 0.9])),
     [2147483647, 1, 2, 8, 56, 1]),
    (lambda k: R.triangular(k, a * 0, a * 0.3, c + 2, (2, 3)),
     [2.0997396, 2.5720491, 0.97607994, 0.96430135, 1.2402269, 0.7152672]),
    (lambda k: R.lognormal(k, a, (2, 3)),
     [2.2508795, 2.752838, 0.8050932, 0.8545035, 1.4221671, 0.14310475]),
]


@pytest.mark.parametrize("draw,want", JAX_NUMBERS)
def test_formulas_of_uniform_and_normal_draw_jaxs_numbers(draw, want):
    np.testing.assert_allclose(np.ravel(draw(vg.random.key(0))), want, rtol=1e-6)


def test_shapes_dtypes_and_broadcasting_as_jax():
    # the shapes JAX 0.10.2 gives for parameters a (2, 1) and b (3,)
    a, b = np.ones((2, 1), np.float32), np.float32([0.3, 0.6, 0.2])
    assert R.t(KEY, a).shape == (2, 1) and R.t(KEY, a, (3, 2, 4)).shape == (3, 2, 4)
    assert R.chisquare(KEY, a, (2, 3)).shape == (2, 3)
    assert R.f(KEY, a, b + 1).shape == (2, 3)
    assert R.binomial(KEY, a * 5, b).shape == (2, 3)
    assert R.generalized_normal(KEY, 1.5).shape == ()
    assert R.weibull_min(KEY, a, b).shape == (2, 3)        # shape () broadcast with them
    assert R.pareto(KEY, a, (3, 2, 4)).shape == (3, 2, 4)
    assert R.maxwell(KEY, (2, 3)).shape == (2, 3)
    assert R.double_sided_maxwell(KEY, a, b).shape == (2, 3, 2, 3)
    assert R.double_sided_maxwell(KEY, a, b, (4,)).shape == (4, 2, 3)
    assert R.rayleigh(KEY, a).shape == R.wald(KEY, a).shape == R.lognormal(KEY, a).shape
    assert R.geometric(KEY, a * 0.3).dtype == np.int32
    assert R.triangular(KEY, a * 0, a * 0.3, b + 1).shape == (2, 3)
    assert R.lognormal(KEY).shape == ()
    assert R.multinomial(KEY, 10.0, np.float32([.2, .8])).shape == (2,)
    assert R.multinomial(KEY, np.float32([5, 10]), np.float32([.2, .8]), shape=(4, 2, 2)).shape \
        == (4, 2, 2)
    with vg.enable_x64():
        assert np.asarray(R.t(KEY, 3.0, (3,), np.float64)).dtype == np.float64
        assert np.asarray(R.binomial(KEY, 9.0, 0.5, (3,), np.float64)).dtype == np.float64


def test_bad_arguments_are_named():
    with pytest.raises(vg.ShapeError, match="t: shape \\(\\) is not compatible"):
        R.t(KEY, np.ones(2), ())
    with pytest.raises(vg.ShapeError, match="binomial: shape \\(3, 2, 4\\) is not compatible"):
        R.binomial(KEY, np.ones((2, 1)), np.ones(3), (3, 2, 4))
    with pytest.raises(vg.DTypeError, match="chisquare: dtype must be a float dtype"):
        R.chisquare(KEY, 1.0, dtype=np.int32)
    with pytest.raises(vg.ShapeError, match="multinomial: shape \\(3, 3\\) is not compatible"):
        R.multinomial(KEY, np.float32([5, 10]), np.float32([.2, .8]), shape=(3, 3))
    with pytest.raises(vg.DTypeError, match="geometric: dtype must be int32"):
        R.geometric(KEY, 0.5, dtype=np.float32)


def test_vulkan_draws_the_interpreters_numbers():
    def draw(k, p):
        ks = vg.random.split(k, 6)
        return (R.t(ks[0], p * 8, (2, 3)), R.f(ks[1], p * 4, 5.0),
                R.binomial(ks[2], np.float32([[3], [200]]), p),
                R.wald(ks[3], p), R.geometric(ks[4], p), R.double_sided_maxwell(ks[5], p, 1.0))
    assert_vulkan_draws_the_interpreters_numbers(draw, KEY, np.float32([[0.2, 0.5, 0.9]]))


def test_multinomial_on_vulkan_draws_the_interpreters_numbers():
    def draw(k):
        return (R.multinomial(k, 20.0, np.float32([0.4, 0.6]), shape=(8, 2)),)
    assert_vulkan_draws_the_interpreters_numbers(draw, KEY, rtol=0)


def test_multinomial_kernels_do_not_nest_the_earlier_outcomes():
    """Each outcome's count is kept in memory (an optimization barrier): recomputed, every
    outcome's sampler was inlined into every later outcome's kernels, and at three outcomes one
    kernel was 121,858 lines of GLSL (lavapipe had not compiled it after 10 minutes)."""
    p = np.float32([0.2, 0.3, 0.5])
    low = vg.jit(lambda k: R.multinomial(k, 20.0, p, shape=(8, 3)), backend="vulkan").lower(KEY)
    kernels = low.as_text("glsl").split("// ==== k")[1:]
    assert len(kernels) == low.stats()["dispatches"]
    assert max(k.count("\n") for k in kernels) < 3000


def test_under_vmap_a_batch_of_keys_draws_per_key():
    keys = vg.random.split(KEY, 3)
    batched = vg.vmap(lambda k: R.binomial(k, 50.0, 0.4, (5,)))(keys)
    loop = np.stack([R.binomial(keys[i], 50.0, 0.4, (5,)) for i in range(3)])
    np.testing.assert_array_equal(batched, loop)
