"""vg.scipy.stats' distributions beyond test_scipy.py's: every function of every module
against scipy.stats in float64 at float32's tolerance (one table), the edge values JAX gives
(outside the support, at invalid parameters; pasted from JAX 0.10.2), gradients of a few
logpdfs by check_grads, gaussian_kde, mode, rankdata and sem, and one jit on Vulkan."""

import numpy as np
import pytest

import vkgrad as vg
import vkgrad.numpy as vnp
from vkgrad.scipy import stats

sst = pytest.importorskip("scipy.stats")


def f32(*v):
    return np.asarray(v, np.float32)


X = np.linspace(-4, 4, 33).astype(np.float32)            # the real line
POS = np.linspace(0.05, 8, 33).astype(np.float32)        # a half line (below loc + scale too)
CIRCLE = np.linspace(-1, 7.5, 35).astype(np.float32)     # around [0, 2 pi]
Q = np.linspace(0.01, 0.99, 33).astype(np.float32)       # probabilities
K = np.arange(-1, 16).astype(np.float32)                 # counts (and one below the support)
UNIT = np.linspace(-0.5, 1.5, 9).astype(np.float32)

LOC_SCALE = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "sf"]
# (distribution, functions, arguments after x; x; rtol, atol). ppf and isf take Q in x's place.
TABLE = [
    ("cauchy", LOC_SCALE + ["ppf", "isf"], (0.3, 1.7), X, 2e-5, 1e-6),
    ("expon", LOC_SCALE + ["ppf"], (0.2, 1.5), X, 2e-5, 1e-6),
    ("gennorm", ["cdf", "logpdf", "pdf"], (1.5,), X, 2e-5, 1e-6),
    ("gennorm", ["cdf", "logpdf", "pdf"], (0.7,), X, 2e-5, 1e-6),
    ("gumbel_l", LOC_SCALE + ["ppf"], (0.3, 1.4), X, 2e-5, 1e-6),
    ("gumbel_r", LOC_SCALE + ["ppf"], (0.3, 1.4), X, 2e-5, 1e-6),
    ("laplace", ["cdf", "logpdf", "pdf"], (0.2, 1.3), X, 2e-5, 1e-6),
    ("logistic", ["cdf", "logpdf", "pdf", "sf", "ppf", "isf"], (0.2, 1.3), X, 2e-5, 1e-6),
    ("pareto", LOC_SCALE + ["ppf"], (2.5, 0.1, 1.2), POS, 2e-5, 1e-6),
    ("truncnorm", LOC_SCALE, (-1.0, 1.5, 0.2, 1.3), X, 2e-5, 1e-6),
    ("truncnorm", LOC_SCALE, (2.0, 4.0), X, 1e-4, 1e-6),           # a far tail
    ("truncnorm", LOC_SCALE, (-3.0, -2.5, 0.5, 0.5), X, 1e-4, 1e-6),
    ("uniform", ["cdf", "logpdf", "pdf", "ppf"], (-1.0, 2.5), X, 2e-5, 1e-6),
    ("vonmises", ["logpdf", "pdf"], (2.0,), X, 2e-5, 1e-6),
    ("vonmises", ["logpdf", "pdf"], (60.0,), X, 2e-5, 1e-6),
    ("wrapcauchy", ["logpdf", "pdf"], (0.4,), CIRCLE, 2e-5, 1e-6),
    ("norm", ["isf"], (0.2, 1.3), X, 2e-5, 1e-6),
    ("bernoulli", ["logpmf", "pmf"], (0.3,), K[:4], 2e-5, 1e-6),
    ("bernoulli", ["cdf", "ppf"], (0.3,), UNIT, 2e-5, 1e-6),
    ("betabinom", ["logpmf", "pmf"], (10.0, 2.3, 1.7), K, 2e-5, 1e-6),
    ("betabinom", ["logpmf", "pmf"], (10.0, 2.3, 1.7, 2.0), K, 2e-5, 1e-6),
    ("binom", ["logpmf", "pmf"], (10.0, 0.35), K, 2e-5, 1e-6),
    ("binom", ["logpmf", "pmf"], (10.0, 0.35, 2.0), K, 2e-5, 1e-6),
    ("geom", ["logpmf", "pmf"], (0.3,), K, 2e-5, 1e-6),
    ("geom", ["logpmf", "pmf"], (0.3, 2.0), K, 2e-5, 1e-6),
    ("nbinom", ["logpmf", "pmf"], (3.5, 0.4), K, 2e-5, 1e-6),
    ("nbinom", ["logpmf", "pmf"], (3.5, 0.4, 2.0), K, 2e-5, 1e-6),
]
CASES = [pytest.param(d, f, args, x, rtol, atol, id=f"{d}.{f}{args}")
         for d, fs, args, x, rtol, atol in TABLE for f in fs]


@pytest.mark.parametrize("dist,fn,args,x,rtol,atol", CASES)
def test_against_scipy(dist, fn, args, x, rtol, atol):
    if fn in ("ppf", "isf"):
        x = Q
    got = getattr(getattr(stats, dist), fn)(x, *args)
    want = getattr(getattr(sst, dist), fn)(x.astype(np.float64), *args)
    assert np.asarray(got).dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def test_multinomial_and_poisson_entropy_against_scipy():
    x = np.array([[2, 0, 3], [1, 1, 3], [5, 0, 0], [1, 1, 1]], np.int32)
    p = f32(0.2, 0.3, 0.5)
    want = sst.multinomial.logpmf(x, 5, p.astype(np.float64) / np.sum(p.astype(np.float64)))
    np.testing.assert_allclose(stats.multinomial.logpmf(x, 5, p), want, rtol=2e-5)
    np.testing.assert_allclose(stats.multinomial.pmf(x[0], 5, p), np.exp(want[0]), rtol=2e-5)
    assert stats.multinomial.logpmf(x[3], 5, p) == -np.inf
    with pytest.raises(vg.DTypeError, match="multinomial.logpmf: x and n must be of integer"):
        stats.multinomial.logpmf(x.astype(np.float32), 5, p)
    mu = f32(0.0, 0.5, 3.0, 9.9, 10.0, 42.0, 99.0, 100.0, 500.0, 3e3)
    np.testing.assert_allclose(stats.poisson.entropy(mu), sst.poisson.entropy(mu), rtol=1e-5,
                               atol=1e-6)
    assert stats.poisson.entropy(f32(2.0), loc=f32(0, 1, 2)).shape == (3,)


# JAX 0.10.2's values (jax.scipy.stats, float32) at edge points: outside the support, invalid
# parameters, the boundaries of the quantile functions.
EDGES = [
    ("uniform.logpdf(f32(-2, 0, 1, 2), 0.0, 1.0)", [-np.inf, 0.0, 0.0, -np.inf]),
    ("uniform.pdf(f32(-2, 2), 0.0, 1.0)", [0.0, 0.0]),
    ("uniform.cdf(f32(np.nan, -1, 2), 0.0, 1.0)", [0.0, 0.0, 1.0]),
    ("uniform.ppf(f32(-0.1, 0, 1, 1.1, np.nan))", [np.nan, 0.0, 1.0, np.nan, np.nan]),
    ("expon.logpdf(f32(-1, 0))", [-np.inf, 0.0]),
    ("expon.cdf(f32(-1, 0))", [0.0, 0.0]),
    ("expon.ppf(f32(-0.1, 0, 1, 1.5))", [np.nan, 0.0, np.inf, np.nan]),
    ("pareto.logpdf(f32(0.5, 1), 2.0)", [-np.inf, np.log(2.0)]),
    ("pareto.cdf(f32(0.5, 1), 2.0)", [0.0, 0.0]),
    ("pareto.sf(f32(0.5, 1), 2.0)", [1.0, 1.0]),
    ("pareto.ppf(f32(-0.5, 0, 1.5), 2.0)", [np.nan, 1.0, np.nan]),
    ("wrapcauchy.logpdf(f32(-0.1, 7), 0.5)", [-np.inf, -np.inf]),
    ("wrapcauchy.pdf(f32(1.0), f32(0, 1, -0.5))", [np.nan, np.nan, np.nan]),
    ("vonmises.logpdf(f32(1.0), f32(0, -1))", [np.nan, np.nan]),
    ("truncnorm.logpdf(f32(-2, 2, 0), -1.0, 1.0)", [-np.inf, -np.inf, -0.53722334]),
    ("truncnorm.cdf(f32(-2, 2), -1.0, 1.0)", [0.0, 1.0]),
    ("truncnorm.pdf(f32(0.5), 1.0, 1.0)", [np.nan]),
    ("gumbel_r.logpdf(f32(0.5), 0.0, f32(0, -1))", [np.nan, np.nan]),
    ("gumbel_l.cdf(f32(0.5), 0.0, -1.0)", [np.nan]),
    ("gumbel_r.ppf(f32(0, 1, 0.5))", [np.nan, np.nan, 0.36651292]),
    ("gumbel_l.ppf(f32(0, 1, 0.5))", [np.nan, np.nan, -0.36651292]),
    ("bernoulli.logpmf(f32(-1, 0.5, 2), 0.3)", [-np.inf, -0.78032386, -np.inf]),
    ("bernoulli.cdf(f32(0.5, np.nan), f32(1.5, 0.3))", [np.nan, np.nan]),
    ("bernoulli.ppf(f32(-0.1, 0, 0.7, 0.71, 1.1), 0.3)", [np.nan, 0.0, 0.0, 1.0, np.nan]),
    ("betabinom.logpmf(f32(1.0), f32(-1, 3, 3), f32(2, 0, 2), f32(2, 2, -1))",
     [np.nan, np.nan, np.nan]),
    ("betabinom.pmf(f32(0.0), 0.0, 2.0, 3.0)", [1.0]),
    ("binom.logpmf(f32(0, 0, 3), f32(0, 3, 3), f32(0.5, 0, 1))", [0.0, 0.0, 0.0]),
    ("binom.pmf(f32(-1, 4), 3.0, 0.5)", [0.0, 0.0]),
    ("geom.logpmf(f32(0, -1), 0.5)", [-np.inf, -np.inf]),
    ("nbinom.logpmf(f32(-1.0), 2.0, 0.5)", [-np.inf]),
    ("poisson.entropy(f32(0.0))", [0.0]),
    ("norm.isf(f32(0, 0.5, 1))", [np.inf, 0.0, -np.inf]),
    ("cauchy.ppf(f32(0.5))", [0.0]),
    ("logistic.ppf(f32(0, 1))", [-np.inf, np.inf]),
]


@pytest.mark.parametrize("expr,want", EDGES, ids=[e for e, _ in EDGES])
def test_edge_values_as_jax(expr, want):
    got = np.asarray(eval(expr, {**vars(stats), "f32": f32, "np": np}))
    np.testing.assert_allclose(got, np.float32(want), rtol=1e-6, atol=1e-7)


def _d(*v):
    return np.asarray(v, np.float64)


GRADS = [
    (lambda x, loc, s: stats.cauchy.logpdf(x, loc, s), (_d(0.3, -1.2), _d(0.1, 0.4), _d(1.5, 0.7))),
    (lambda x, a, s: stats.truncnorm.logpdf(x, a, 2.0, 0.1, s),
     (_d(0.3, 0.9), _d(-1.0, -0.5), _d(1.5, 0.8))),
    (lambda x, s: stats.truncnorm.logcdf(x, -1.0, 1.5, 0.2, s), (_d(0.3, -0.4), _d(1.3, 0.9))),
    (lambda x, s: stats.gumbel_r.logpdf(x, 0.2, s), (_d(0.3, -1.2), _d(1.5, 0.7))),
    (lambda x, s: stats.logistic.logpdf(x, 0.2, s), (_d(0.3, -1.2), _d(1.5, 0.7))),
    (lambda x, k: stats.vonmises.logpdf(x, k), (_d(0.3, -1.2), _d(1.5, 20.0))),
    (lambda x, b: stats.gennorm.logpdf(x, b), (_d(0.3, -1.2), _d(1.5, 2.5))),
    (lambda x, b: stats.pareto.logpdf(x, b, 0.0, 1.0), (_d(1.3, 2.2), _d(1.5, 2.5))),
    (lambda p: stats.binom.logpmf(_d(0, 3, 7), 7.0, p), (_d(0.2, 0.5, 0.6),)),
    (lambda n, p: stats.nbinom.logpmf(_d(0, 3, 7), n, p), (_d(2.5, 3.0, 1.5), _d(0.2, 0.5, 0.6))),
    (lambda a, b: stats.betabinom.logpmf(_d(0, 3, 7), 7.0, a, b), (_d(2.5, 3.0, 1.5),
                                                                   _d(0.7, 1.5, 4.0))),
    (lambda c: stats.wrapcauchy.logpdf(_d(0.5, 3.0), c), (_d(0.3, 0.8),)),
]


@pytest.mark.parametrize("i", range(len(GRADS)))
def test_gradients(i):
    f, args = GRADS[i]
    vg.test_util.check_grads(f, args, order=1, rtol=1e-3, atol=1e-4)


def test_gradient_outside_the_support_is_zero_not_nan():
    for f, x in [(lambda x: stats.pareto.logcdf(x, 2.0), 0.5),
                 (lambda x: stats.binom.logpmf(x, 3.0, 0.5), -1.0),
                 (lambda x: stats.nbinom.logpmf(2.0, x, 0.5), 1.0),
                 (lambda mu: stats.poisson.entropy(mu), 0.0)]:
        assert np.isfinite(float(vg.grad(f)(np.float32(x))))


def test_gaussian_kde_against_scipy():
    rng = np.random.RandomState(0)
    data = rng.randn(2, 40).astype(np.float32)
    w = rng.uniform(0.5, 2.0, 40).astype(np.float32)
    pts = rng.randn(2, 7).astype(np.float32)
    for kw in [{}, {"bw_method": "silverman"}, {"bw_method": 0.4, "weights": w}]:
        got, want = stats.gaussian_kde(data, **kw), sst.gaussian_kde(data.astype(np.float64), **kw)
        np.testing.assert_allclose(got.covariance, want.covariance, rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(got.neff, want.neff, rtol=1e-5)
        np.testing.assert_allclose(got.evaluate(pts), want.evaluate(pts), rtol=1e-5)
        np.testing.assert_allclose(got.pdf(pts), want.pdf(pts), rtol=1e-5)
        np.testing.assert_allclose(got.logpdf(pts), want.logpdf(pts), rtol=1e-5)
        np.testing.assert_allclose(got(pts[:, 0]), want(pts[:, 0]), rtol=1e-5)
        mean, cov = f32(0.3, -0.2), np.float32([[1.0, 0.2], [0.2, 0.5]])
        np.testing.assert_allclose(got.integrate_gaussian(mean, cov),
                                   want.integrate_gaussian(mean, cov), rtol=1e-5)
    other = rng.randn(2, 15).astype(np.float32) + 0.5
    np.testing.assert_allclose(stats.gaussian_kde(data).integrate_kde(stats.gaussian_kde(other)),
                               sst.gaussian_kde(data).integrate_kde(sst.gaussian_kde(other)),
                               rtol=1e-5)
    one = stats.gaussian_kde(data[0], weights=w)
    np.testing.assert_allclose(one.integrate_box_1d(-0.5, 1.0),
                               sst.gaussian_kde(data[0], weights=w).integrate_box_1d(-0.5, 1.0),
                               rtol=1e-5)
    # a pytree (its leaves traced through jit and grad), differentiable in its data
    leaves = vg.tree_util.tree_leaves(one)
    assert len(leaves) == 5
    g = vg.grad(lambda d: vnp.sum(stats.gaussian_kde(d).logpdf(pts[:1])))(data[0])
    eps, d64 = 1e-3, data[0].astype(np.float64)
    e = np.zeros(40)
    e[3] = eps
    fd = (np.sum(sst.gaussian_kde(d64 + e).logpdf(pts[:1])) -
          np.sum(sst.gaussian_kde(d64 - e).logpdf(pts[:1]))) / (2 * eps)
    np.testing.assert_allclose(g[3], fd, rtol=1e-2, atol=1e-3)


def test_gaussian_kde_resample_is_jax_draws():
    data = np.float32([[0.1, -0.4, 1.3, 0.8, 2.0], [0.5, 0.2, -0.3, 1.1, 0.0]])
    kde = stats.gaussian_kde(data, weights=f32(1, 2, 1, 3, 1))
    want = [[-2.1366243, 0.94614518, 0.25822449, 1.1835978, -0.13181162, -0.53478891],
            [-0.65546089, 0.92376137, 0.57608682, 0.19098465, 2.1650367, 0.66425049]]
    # JAX 0.10.2: gaussian_kde(data, weights=...).resample(jax.random.key(0), (6,))
    np.testing.assert_allclose(kde.resample(vg.random.key(0), (6,)), want, rtol=1e-5, atol=1e-6)
    # the kde is a pytree: through jit as an argument
    got = vg.jit(lambda k, p: k.logpdf(p), backend="numpy")(kde, data[:, :2])
    np.testing.assert_allclose(got, kde.logpdf(data[:, :2]), rtol=1e-6)


def test_gaussian_kde_refusals():
    with pytest.raises(vg.ShapeError, match="more than one element"):
        stats.gaussian_kde(f32(1.0))
    with pytest.raises(vg.ShapeError, match="one weight per data point"):
        stats.gaussian_kde(f32(1, 2, 3), weights=f32(1, 2))
    with pytest.raises(vg.ArgumentError, match="bw_method should be"):
        stats.gaussian_kde(f32(1, 2, 3), bw_method="wide")
    k = stats.gaussian_kde(np.random.RandomState(1).randn(2, 5).astype(np.float32))
    with pytest.raises(vg.ShapeError, match="points have dimension 3, the dataset has dimension 2"):
        k.evaluate(np.ones((3, 2), np.float32))
    with pytest.raises(vg.ShapeError, match="integrate_box_1d: only 1-D"):
        k.integrate_box_1d(0.0, 1.0)
    with pytest.raises(vg.ArgumentError, match="integrate_box: only 1-D box"):
        k.integrate_box(f32(0, 0), f32(1, 1))
    with pytest.raises(vg.ArgumentError, match="set_bandwidth"):
        k.set_bandwidth("scott")


def test_mode_against_scipy():
    rng = np.random.RandomState(2)
    a = rng.randint(0, 4, (3, 9, 2)).astype(np.float32)
    for axis in (0, 1, -1, None):
        for keepdims in (False, True):
            got, want = stats.mode(a, axis, keepdims=keepdims), sst.mode(a, axis,
                                                                        keepdims=keepdims)
            np.testing.assert_array_equal(got.mode, want.mode)
            np.testing.assert_array_equal(got.count, want.count)
    m = stats.mode(np.array([[1, 2, 2], [3, 3, 1]], np.int32), axis=1)
    assert m.mode.dtype == np.int32 and m.mode.tolist() == [2, 3] and m.count.tolist() == [2, 2]
    assert stats.mode(f32(3, 1, 1, 3)) == (1.0, 2)                   # a tie: the smallest
    nan = stats.mode(f32(1, np.nan, np.nan, 2))                       # nans one value (JAX's)
    assert np.isnan(nan.mode) and nan.count == 2
    empty = stats.mode(np.zeros((0, 3), np.float32))
    assert np.isnan(empty.mode).all() and empty.count.tolist() == [0, 0, 0]
    with pytest.raises(vg.ArgumentError, match="mode: nan_policy='omit' is not supported"):
        stats.mode(a, nan_policy="omit")


def test_rankdata_against_scipy():
    a = f32(3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5)
    for method in ("average", "min", "max", "dense", "ordinal"):
        np.testing.assert_array_equal(stats.rankdata(a, method), sst.rankdata(a, method))
    b = np.random.RandomState(3).randint(0, 3, (4, 5)).astype(np.float32)
    for axis in (0, 1):
        np.testing.assert_array_equal(stats.rankdata(b, "average", axis=axis),
                                      sst.rankdata(b, "average", axis=axis))
    np.testing.assert_array_equal(stats.rankdata(b), sst.rankdata(b))   # flattened
    assert np.isnan(stats.rankdata(f32(3, np.nan))).all()
    with pytest.raises(vg.ArgumentError, match="rankdata: unknown method 'mean'"):
        stats.rankdata(a, "mean")


def test_sem_against_scipy():
    a = np.random.RandomState(4).randn(4, 6).astype(np.float32)
    for axis in (0, 1, None):
        np.testing.assert_allclose(stats.sem(a, axis), sst.sem(a, axis), rtol=1e-5)
    np.testing.assert_allclose(stats.sem(a, 1, ddof=0, keepdims=True),
                               sst.sem(a, 1, ddof=0, keepdims=True), rtol=1e-5)
    a[1, 2] = np.nan
    np.testing.assert_allclose(stats.sem(a, 1, nan_policy="omit"),
                               sst.sem(a, 1, nan_policy="omit"), rtol=1e-5)
    assert np.isnan(stats.sem(a, 1)[1])


def test_jit_on_vulkan():
    def f(x, q):
        return (stats.cauchy.logpdf(x, 0.2, 1.5), stats.truncnorm.logcdf(x, -1.0, 1.0),
                stats.gumbel_r.logsf(x), stats.pareto.pdf(x + 2.0, 2.5),
                stats.logistic.isf(q), stats.binom.logpmf(x + 2.0, 5.0, 0.3))
    x, q = f32(-1.5, -0.3, 0.4, 1.2), f32(0.1, 0.3, 0.6, 0.9)
    for got, want in zip(vg.jit(f, backend="vulkan")(x, q), f(x, q)):
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-6)
