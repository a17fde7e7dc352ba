"""vg.scipy.special and vg.scipy.stats.norm: values against scipy where the venv has it, else
against Python's math/statistics in float64 (the errors vkgrad/scipy/special/_base.py states);
gradients by vg.check_grads; the whole set jit-ed on Vulkan."""

import math
from statistics import NormalDist

import numpy as np
import pytest

import vkgrad as vg
import vkgrad.numpy as vnp
from vkgrad.scipy import special as sp
from vkgrad.scipy.stats import norm

try:
    import scipy.special as ref_special
except ImportError:
    ref_special = None


def _digamma_ref(x, h=1e-5):    # d lgamma / dx by central differences in float64
    return (math.lgamma(x + h) - math.lgamma(x - h)) / (2 * h)


def _ref(name):
    if ref_special is not None:
        return getattr(ref_special, name)
    table = {"erf": math.erf, "erfc": math.erfc, "gammaln": math.lgamma,
             "digamma": _digamma_ref,
             "ndtr": lambda x: 0.5 * math.erfc(-x / math.sqrt(2)),
             "log_ndtr": lambda x: math.log(0.5 * math.erfc(-x / math.sqrt(2))),
             "ndtri": lambda p: NormalDist().inv_cdf(p),
             "expit": lambda x: 1 / (1 + math.exp(-x)) if x > -700 else 0.0,
             "logit": lambda p: math.log(p / (1 - p))}
    return np.vectorize(table[name])


def grid(lo, hi, n=401):
    return np.linspace(lo, hi, n).astype(np.float32)


# name, inputs, relative tolerance, absolute tolerance
VALUES = [
    ("erf", grid(-6, 6), 3e-7, 1e-30),
    ("erf", np.float32([1e-7, 1e-4, 0.3, 0.4999, 0.5, 0.5001]), 3e-7, 1e-30),
    ("erfc", grid(-6, 9), 6e-7, 1e-37),
    ("ndtr", grid(-5, 8), 3e-6, 1e-37),
    ("log_ndtr", grid(-37, 6), 2e-6, 1e-12),
    ("ndtri", np.concatenate([np.logspace(-35, -1, 80), grid(0.03, 0.97, 95),
                              1 - np.logspace(-7, -2, 30)]).astype(np.float32), 3e-6, 1e-6),
    ("gammaln", grid(0.01, 16), 0, 6e-6),
    ("gammaln", grid(16, 1e5), 3e-7, 0),
    ("gammaln", np.float32([-0.5, -1.5, -2.3, -4.9, -0.01]), 1e-5, 1e-5),
    ("digamma", grid(0.05, 16), 1e-6, 1e-6),
    ("digamma", np.float32([-0.5, -1.5, -2.3, -4.9, 100.0, 1e4]), 1e-5, 1e-5),
    ("expit", grid(-80, 30), 1e-6, 1e-40),
    ("logit", grid(0.001, 0.999), 2e-6, 1e-6),
]


@pytest.mark.parametrize("name,x,rtol,atol", VALUES, ids=lambda v: v if isinstance(v, str) else "")
def test_values(name, x, rtol, atol):
    got = np.asarray(getattr(sp, name)(x), np.float64)
    want = _ref(name)(x.astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
    assert getattr(sp, name)(x).dtype == np.float32


def test_ndtr_far_lower_tail():
    """ndtr's relative error grows as 1e-7 x^2 there: the rounding of x / sqrt(2)."""
    x = grid(-12, -5)
    got = np.asarray(sp.ndtr(x), np.float64)
    want = _ref("ndtr")(x.astype(np.float64))
    assert (np.abs(got - want) <= (6e-7 + 1e-7 * x.astype(np.float64) ** 2) * want).all()


def test_edges():
    np.testing.assert_array_equal(sp.ndtri(np.float32([0, 1, 0.5])), [-np.inf, np.inf, 0])
    assert np.isnan(sp.ndtri(np.float32([-0.1, 1.1]))).all()
    assert np.isinf(sp.gammaln(np.float32([0, -1, -3]))).all()
    assert np.isnan(sp.digamma(np.float32([0, -2]))).all()
    assert float(sp.erf(np.float32(0))) == 0.0 and float(sp.erfc(np.float32(0))) == 1.0
    np.testing.assert_array_equal(sp.xlogy(np.float32([0, 0, 2]), np.float32([0, 3, 3])),
                                  np.float32([0, 0, 2 * np.log(3)]))
    np.testing.assert_allclose(sp.xlog1py(np.float32([0, 2]), np.float32([-1, 3])),
                               [0, 2 * np.log(4)], rtol=1e-6)


def test_logsumexp_like_jax():
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32) * 10
    ref = lambda a, axis: np.log(np.sum(np.exp(a.astype(np.float64)), axis=axis))
    np.testing.assert_allclose(sp.logsumexp(x), ref(x, None), rtol=1e-6)
    np.testing.assert_allclose(sp.logsumexp(x, axis=1), ref(x, 1), rtol=1e-6)
    np.testing.assert_allclose(sp.logsumexp(x, axis=(0, 1), keepdims=True),
                               ref(x, None).reshape(1, 1), rtol=1e-6)
    np.testing.assert_array_equal(sp.logsumexp(np.float32([[-np.inf, -np.inf]]), axis=1),
                                  [-np.inf])
    b = np.float32([1, -2, 0.5])
    a = np.float32([1, 2, 0])
    s = np.sum(b * np.exp(a.astype(np.float64)))
    out, sign = sp.logsumexp(a, b=b, return_sign=True)
    np.testing.assert_allclose(out, np.log(abs(s)), rtol=1e-6)
    assert float(sign) == -1.0
    assert np.isnan(sp.logsumexp(a, b=b))              # a negative sum without return_sign
    np.testing.assert_allclose(sp.logsumexp(a, b=np.float32([1, 2, 0.5])),
                               np.log(np.sum([1, 2, 0.5] * np.exp(a.astype(np.float64)))),
                               rtol=1e-6)


def test_norm():
    x = np.linspace(-4, 4, 33).astype(np.float32)
    d = NormalDist(1.0, 2.0)
    np.testing.assert_allclose(norm.pdf(x, 1.0, 2.0), [d.pdf(v) for v in x], rtol=1e-6)
    np.testing.assert_allclose(norm.logpdf(x, 1.0, 2.0), [math.log(d.pdf(v)) for v in x],
                               rtol=1e-6)
    np.testing.assert_allclose(norm.cdf(x, 1.0, 2.0), [d.cdf(v) for v in x], rtol=1e-6)
    np.testing.assert_allclose(norm.logcdf(x, 1.0, 2.0), [math.log(d.cdf(v)) for v in x],
                               rtol=2e-6)
    np.testing.assert_allclose(norm.sf(x), [0.5 * math.erfc(v / math.sqrt(2)) for v in x],
                               rtol=3e-6)
    q = np.float32([0.001, 0.1, 0.5, 0.9, 0.999])
    np.testing.assert_allclose(norm.ppf(q, 1.0, 2.0), [d.inv_cdf(v) for v in q], rtol=2e-6,
                               atol=1e-6)


GRADS = {
    "erf": (sp.erf, np.float64([-3.0, -0.4, 0.1, 0.7, 2.5])),
    "erfc": (sp.erfc, np.float64([-2.0, 0.3, 1.0, 4.0])),
    "ndtr": (sp.ndtr, np.float64([-5.0, -1.0, 0.5, 3.0])),
    "log_ndtr": (sp.log_ndtr, np.float64([-20.0, -2.0, 0.5, 3.0])),
    "ndtri": (sp.ndtri, np.float64([0.002, 0.01, 0.3, 0.8, 0.99])),
    "gammaln": (sp.gammaln, np.float64([-2.5, 0.3, 1.5, 7.0, 20.0])),
    "digamma": (sp.digamma, np.float64([-1.5, 0.7, 3.0, 12.0])),
    "expit": (sp.expit, np.float64([-30.0, -1.0, 0.0, 2.0])),
    "erfc_at_0": (sp.erfc, np.float64([0.0])),
    "logit": (sp.logit, np.float64([0.01, 0.4, 0.9])),
    "xlogy": (lambda y: sp.xlogy(np.float64([0.0, 2.0, 3.0]), y), np.float64([0.5, 1.5, 4.0])),
    "xlog1py": (lambda y: sp.xlog1py(np.float64([0.0, 2.0, 3.0]), y), np.float64([0.5, 1.5, 4.0])),
    "logsumexp": (lambda a: sp.logsumexp(a, b=np.float64([1.0, 2.0, 0.5]), axis=0),
                  np.float64([0.3, -1.0, 2.0])),
    "norm": (lambda x: norm.logpdf(x, 0.5, 2.0) + norm.cdf(x) + norm.ppf(sp.expit(x)),
             np.float64([-1.0, 0.2, 1.3])),
}


@pytest.mark.parametrize("name", GRADS)
def test_gradients(name):
    f, x = GRADS[name]
    vg.test_util.check_grads(f, (x,), order=1, modes=("rev",), rtol=1e-3, atol=1e-4)


def test_known_derivatives():
    x = np.float32([-1.0, 0.0, 0.5, 2.0])
    np.testing.assert_allclose(vg.grad(lambda v: vnp.sum(sp.erf(v)))(x),
                               2 / np.sqrt(np.pi) * np.exp(-x.astype(np.float64) ** 2), rtol=2e-5)
    np.testing.assert_allclose(vg.grad(lambda v: vnp.sum(sp.gammaln(v)))(x[2:]),
                               [_digamma_ref(0.5), _digamma_ref(2.0)], rtol=2e-4)


def test_jitted_on_vulkan():
    x = np.linspace(-3, 3, 16).astype(np.float32)
    p = np.linspace(0.01, 0.99, 16).astype(np.float32)

    def f(x, p):
        return (sp.erf(x), sp.log_ndtr(x), sp.ndtri(p), sp.gammaln(x + 3.5), sp.digamma(x + 3.5),
                sp.logsumexp(x), sp.expit(x))

    got = vg.jit(f, backend="vulkan")(x, p)
    want = f(x, p)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-5, atol=2e-5)


# --- jax.scipy's other names: gamma-family special functions, more distributions, signal,
# integrate; against scipy (in the venv)

scipy_special = pytest.importorskip("scipy.special") if ref_special is None else ref_special


def test_gamma_family_against_scipy():
    x = np.float64([-2.5, -1.5, -0.5, 0.0, 0.3, 1.0, 2.5, 7.0])
    np.testing.assert_array_equal(sp.gammasgn(x), scipy_special.gammasgn(x))
    assert np.isnan(sp.gammasgn(np.float32([-1.0, -2.0]))).all()
    np.testing.assert_allclose(sp.gamma(x[x != 0]), scipy_special.gamma(x[x != 0]), rtol=1e-5)
    np.testing.assert_allclose(sp.rgamma(np.float32([-2.0, 0.0, 0.5, 4.0])),
                               scipy_special.rgamma([-2.0, 0.0, 0.5, 4.0]), rtol=1e-5, atol=1e-7)
    a, b = np.float32([0.5, 2.0, 3.3, -0.5]), np.float32([1.5, 0.7, 4.0, 0.3])
    np.testing.assert_allclose(sp.beta(a, b), scipy_special.beta(a, b), rtol=1e-5)
    np.testing.assert_allclose(sp.betaln(a[:3], b[:3]), scipy_special.betaln(a[:3], b[:3]),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(sp.multigammaln(np.float32(3.3), 3),
                               scipy_special.multigammaln(3.3, 3), rtol=1e-5)


def test_distributions_against_scipy():
    stats = pytest.importorskip("scipy.stats")
    x = np.float32([-0.5, 0.3, 1.2, 3.0])
    y = np.float32([-0.1, 0.3, 0.7, 1.2])
    k = np.float32([-1, 0, 2, 2.5, 7])
    al = np.float32([1.5, 2.0, 3.0])
    X = np.float32([[0.2, 0.5], [0.3, 0.1], [0.5, 0.4]])
    for got, want in [
            (vg.scipy.stats.t.logpdf(x, 3.5, 0.2, 1.5), stats.t.logpdf(x, 3.5, 0.2, 1.5)),
            (vg.scipy.stats.t.pdf(x, 3.5), stats.t.pdf(x, 3.5)),
            (vg.scipy.stats.gamma.logpdf(x, 2.5, 0.1, 1.5), stats.gamma.logpdf(x, 2.5, 0.1, 1.5)),
            (vg.scipy.stats.chi2.pdf(x, 3.5), stats.chi2.pdf(x, 3.5)),
            (vg.scipy.stats.beta.logpdf(y, 2.5, 1.3), stats.beta.logpdf(y, 2.5, 1.3)),
            (vg.scipy.stats.poisson.logpmf(k, 3.3), stats.poisson.logpmf(k, 3.3)),
            (vg.scipy.stats.poisson.pmf(k, 3.3), stats.poisson.pmf(k, 3.3)),
            (vg.scipy.stats.dirichlet.logpdf(X, al), stats.dirichlet.logpdf(X, al))]:
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-6)
    assert float(vg.scipy.stats.dirichlet.logpdf(np.float32([0.5, 0.6, 0.2]), al)) == -np.inf
    with pytest.raises(vg.ShapeError, match="alpha must be 1-D and x's first axis as long"):
        vg.scipy.stats.dirichlet.logpdf(X.T, al)
    vg.test_util.check_grads(lambda x, df, s: vg.scipy.stats.t.logpdf(x, df, 0.1, s),
                             (np.float64([0.3, -1.2]), np.float64([3.0, 5.5]),
                              np.float64([1.5, 0.7])), order=2, rtol=1e-3, atol=1e-4)
    vg.test_util.check_grads(lambda a: vg.scipy.stats.dirichlet.logpdf(X.astype(np.float64), a),
                             (al.astype(np.float64),), order=1, rtol=1e-3, atol=1e-4)


def test_signal_convolve_and_correlate_against_scipy():
    signal = pytest.importorskip("scipy.signal")
    rng = np.random.default_rng(1)
    for sa, sb in [((5,), (3,)), ((4,), (6,)), ((5, 4), (3, 2)), ((2, 3), (4, 5)),
                   ((3, 4, 2), (2, 2, 2))]:
        a, b = rng.standard_normal(sa).astype(np.float32), rng.standard_normal(sb).astype(np.float32)
        for mode in ("full", "same", "valid"):
            for name in ("convolve", "correlate"):
                want = getattr(signal, name)(a, b, mode=mode)
                np.testing.assert_allclose(getattr(vg.scipy.signal, name)(a, b, mode=mode), want,
                                           rtol=1e-5, atol=1e-5, err_msg=f"{name} {sa} {sb} {mode}")
    with pytest.raises(vg.ShapeError, match="mode 'valid': one of in1 \\(2, 5\\) and in2"):
        vg.scipy.signal.convolve(np.ones((2, 5)), np.ones((3, 3)), mode="valid")
    vg.test_util.check_grads(lambda a, b: vg.scipy.signal.convolve(a, b, mode="same"),
                             (rng.standard_normal((4, 3)), rng.standard_normal((2, 2))), order=2)


def test_integrate_trapezoid_against_scipy():
    integrate = pytest.importorskip("scipy.integrate")
    y = np.random.default_rng(2).standard_normal((3, 5)).astype(np.float32)
    x = np.sort(np.random.default_rng(3).standard_normal(5)).astype(np.float32)
    np.testing.assert_allclose(vg.scipy.integrate.trapezoid(y, x), integrate.trapezoid(y, x),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(vg.scipy.integrate.trapezoid(y, dx=0.5, axis=0),
                               integrate.trapezoid(y, dx=0.5, axis=0), rtol=1e-5, atol=1e-6)


def test_new_scipy_names_jitted_on_vulkan():
    x = np.linspace(0.2, 3, 8).astype(np.float32)
    img = np.linspace(-1, 1, 35).astype(np.float32).reshape(5, 7)

    def f(x, img):
        return (sp.gamma(x), sp.beta(x, x[::-1]), vg.scipy.stats.t.logpdf(x, 3.0),
                vg.scipy.stats.beta.pdf(x / 4, 2.0, 3.0), vg.scipy.integrate.trapezoid(img),
                vg.scipy.signal.convolve(img, img[:2, :3], mode="same"))

    got = vg.jit(f, backend="vulkan")(x, img)
    for g, w in zip(got, f(x, img)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-5, atol=2e-5)


def test_cholesky_family_and_multivariate_normal_against_scipy():
    linalg, stats = pytest.importorskip("scipy.linalg"), pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(4)
    m = rng.standard_normal((4, 4))
    a = (m @ m.T + 4 * np.eye(4)).astype(np.float32)
    batch = rng.standard_normal((3, 4, 4))
    batch = (batch @ np.swapaxes(batch, -1, -2) + 4 * np.eye(4)).astype(np.float32)
    np.testing.assert_allclose(vnp.linalg.cholesky(a), np.linalg.cholesky(a), atol=1e-5)
    np.testing.assert_allclose(vnp.linalg.cholesky(batch), np.linalg.cholesky(batch), atol=1e-5)
    np.testing.assert_allclose(vg.scipy.linalg.cholesky(a), linalg.cholesky(a), atol=1e-5)
    b = rng.standard_normal((4, 2)).astype(np.float32)
    low = np.linalg.cholesky(a)
    for lower, t, trans in [(True, low, 0), (True, low, 1), (False, low.T, 0), (False, low.T, "T")]:
        np.testing.assert_allclose(vg.scipy.linalg.solve_triangular(t, b, trans=trans, lower=lower),
                                   linalg.solve_triangular(t, b, trans=trans, lower=lower),
                                   atol=1e-5)
    np.testing.assert_allclose(vg.scipy.linalg.cho_solve(vg.scipy.linalg.cho_factor(a), b[:, 0]),
                               np.linalg.solve(a, b[:, 0]), atol=1e-5)
    x, mu = rng.standard_normal((5, 4)).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    np.testing.assert_allclose(vg.scipy.stats.multivariate_normal.logpdf(x, mu, a),
                               stats.multivariate_normal.logpdf(x, mu, a), rtol=1e-5)
    np.testing.assert_allclose(vg.scipy.stats.multivariate_normal.pdf(x[0], mu, a),
                               stats.multivariate_normal.pdf(x[0], mu, a), rtol=1e-5)
    vg.test_util.check_grads(lambda m: vnp.linalg.cholesky(m @ m.T + 4 * vnp.eye(4)), (m,), order=2)
    vg.test_util.check_grads(
        lambda mean, c: vg.scipy.stats.multivariate_normal.logpdf(x.astype(np.float64), mean,
                                                                  c @ c.T + vnp.eye(4)),
        (mu.astype(np.float64), m), order=2)
    with pytest.raises(vg.ShapeError, match="cholesky takes square matrices"):
        vnp.linalg.cholesky(np.ones((2, 3)))
    with pytest.raises(vg.ArgumentError, match="allow_singular=True is not supported"):
        vg.scipy.stats.multivariate_normal.logpdf(x, mu, a, allow_singular=True)
    got = vg.jit(lambda a, b: vg.scipy.linalg.cho_solve((vnp.linalg.cholesky(a), True), b),
                 backend="vulkan")(a, b)
    np.testing.assert_allclose(got, np.linalg.solve(a, b), atol=1e-4)


def test_dirichlet_rvs_draws_input_data_with_numpy():
    np.random.seed(5)
    x = vg.scipy.stats.dirichlet.rvs(np.float32([1.5, 2.0, 3.0]), size=4)
    assert isinstance(x, np.ndarray) and x.shape == (4, 3)
    np.testing.assert_allclose(x.sum(1), 1.0, rtol=1e-12)
    np.random.seed(5)
    np.testing.assert_array_equal(x, np.random.dirichlet([1.5, 2.0, 3.0], 4))


def test_zeta_polygamma_and_bessel_i_against_scipy():
    x = np.linspace(0.1, 20, 60).astype(np.float32)
    for n in (0, 1, 2, 3, 5):
        np.testing.assert_allclose(sp.polygamma(n, x), scipy_special.polygamma(n, x), rtol=2e-6,
                                   atol=1e-6)   # digamma: absolute error < 3e-6 (above)
    np.testing.assert_allclose(sp.polygamma(np.float32([0, 1, 2]), np.float32(1.5)),
                               scipy_special.polygamma([0, 1, 2], 1.5), rtol=2e-6, atol=1e-6)
    for s in (1.5, 2.0, 7.0):
        np.testing.assert_allclose(sp.zeta(np.float32(s), x), scipy_special.zeta(s, x), rtol=1e-6)
    assert np.isnan(sp.zeta(np.float32(0.5), np.float32(1.0)))
    z = np.concatenate([np.linspace(-20, 20, 81), [3.74, 3.75, 3.76]]).astype(np.float32)
    for name in ("i0", "i0e", "i1", "i1e"):
        np.testing.assert_allclose(getattr(sp, name)(z), getattr(scipy_special, name)(z),
                                   rtol=5e-7, atol=1e-30, err_msg=name)
    vg.test_util.check_grads(lambda x: sp.polygamma(1, x) + sp.i0(x) + sp.i1e(x),
                             (np.float64([0.7, 2.0, 5.5]),), order=2, rtol=1e-3, atol=1e-4)
