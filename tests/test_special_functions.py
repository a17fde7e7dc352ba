"""vg.scipy.special's incomplete gamma and beta functions and Bessel functions of the first and
second kinds, and the distribution functions built on them (vg.scipy.stats' cdf and sf): values
against scipy in float64 over grids that reach the tails, at float32's tolerance (the errors
vkgrad/scipy/special/_base.py states); gradients against scipy's analytic derivatives or central
differences of scipy in float64; one jit of them all on Vulkan."""

import numpy as np
import pytest

import vkgrad as vg
import vkgrad.numpy as vnp
from vkgrad.scipy import special as sp
from vkgrad.scipy import stats

ss = pytest.importorskip("scipy.special")
sst = pytest.importorskip("scipy.stats")


def f32(*v):
    return np.asarray(v, np.float32)


def _rel(got, want, floor):
    """max relative error where the reference is above floor, absolute below it."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return np.max(np.abs(got - want) / np.maximum(np.abs(want), floor))


# a, the largest relative error (special.py's comment above _IGAMMA_TERMS)
IGAMMA = [(0.05, 2e-5), (0.3, 2e-5), (1.0, 5e-6), (2.5, 1e-5), (7.0, 1e-5), (8.0, 1e-5),
          (20.0, 1e-5), (50.0, 1e-5), (100.0, 2e-5)]


@pytest.mark.parametrize("a,rtol", IGAMMA)
def test_gammainc_gammaincc_values(a, rtol):
    # around the switch from the series to the fraction (x = a + 1), the body and both tails
    x = np.concatenate([np.geomspace(1e-3, 1, 20) * a, np.linspace(0.02, 4, 60) * a,
                        a + 1 + np.linspace(-3, 3, 13) * np.sqrt(a)]).astype(np.float32)
    x = x[x > 0]
    av = np.full_like(x, a)
    p, q = ss.gammainc(a, x.astype(np.float64)), ss.gammaincc(a, x.astype(np.float64))
    assert _rel(sp.gammainc(av, x), p, 1e-30) < rtol
    assert _rel(sp.gammaincc(av, x), q, 1e-30) < rtol


def test_incomplete_gamma_edges_as_scipy():
    # JAX's boundary values are scipy's (since jax-ml/jax#20507): the limits at a = 0, x = 0,
    # x = inf and a = inf, nan outside the domain and where the limit depends on the path
    inf, nan = np.inf, np.nan
    a = f32(0, 0, 0, 1, 1, -1, 1, nan, 1, inf, inf, 0)
    x = f32(1, 0, inf, 0, inf, 1, -1, 1, nan, 1, inf, -1)
    for ours, ref in ((sp.gammainc, ss.gammainc), (sp.gammaincc, ss.gammaincc)):
        np.testing.assert_array_equal(np.asarray(ours(a, x)), ref(a, x).astype(np.float32))
    assert float(sp.gammainc(2.0, 1e-30)) == 0.0 and float(sp.gammaincc(2.0, 1e-30)) == 1.0
    assert float(sp.gammaincc(1.0, 80.0)) == pytest.approx(np.exp(-80.0), rel=1e-5)  # no 1 - P
    # scalars broadcast against arrays; an int argument computes in float32
    assert sp.gammainc(2, np.float32([1.0, 2.0])).dtype == np.float32


BETA = [(0.5, 0.5), (1.0, 3.0), (2.0, 5.0), (10.0, 10.0), (0.1, 4.0), (30.0, 2.0), (100.0, 50.0)]


@pytest.mark.parametrize("a,b", BETA)
def test_betainc_values(a, b):
    x = np.concatenate([np.linspace(0.001, 0.999, 120), np.geomspace(1e-6, 1e-2, 10),
                        1 - np.geomspace(1e-6, 1e-2, 10)]).astype(np.float32)
    want = ss.betainc(a, b, x.astype(np.float64))
    assert _rel(sp.betainc(f32(a), f32(b), x), want, 1e-30) < 3e-5


def test_betainc_edges_as_jax():
    got = sp.betainc(f32(2, 2, 2, 2, 0, -1, 2), f32(3, 3, 3, 3, 1, 1, np.nan),
                     f32(0, 1, -0.1, 1.1, 0.5, 0.5, 0.5))
    np.testing.assert_array_equal(np.asarray(got), f32(0, 1, np.nan, np.nan, np.nan, np.nan,
                                                       np.nan))


def test_bessel_values():
    x = np.concatenate([np.linspace(-40, 40, 801), f32(0, 1e-4, 1.99999, 2, 2.00001)])
    x = x.astype(np.float32)
    for name in ("j0", "j1"):
        want = getattr(ss, name)(x.astype(np.float64))
        np.testing.assert_allclose(np.asarray(getattr(sp, name)(x)), want, rtol=0, atol=6e-7)
    xp = np.concatenate([np.geomspace(1e-4, 2, 40), np.linspace(2, 40, 400)]).astype(np.float32)
    for name in ("y0", "y1"):       # absolute where |y| < 1, relative beyond (Cephes' measure)
        want = getattr(ss, name)(xp.astype(np.float64))
        assert _rel(getattr(sp, name)(xp), want, 1.0) < 6e-7
        np.testing.assert_array_equal(np.asarray(getattr(sp, name)(f32(0, -1))),
                                      f32(-np.inf, np.nan))
    assert float(sp.j1(-3.0)) == -float(sp.j1(3.0))     # odd, as J1 is


def _central(f, args, i, h=1e-6):
    up, dn = list(args), list(args)
    up[i], dn[i] = up[i] + h, dn[i] - h
    return (f(*up) - f(*dn)) / (2 * h)


def test_incomplete_gamma_gradients():
    a = f32(0.5, 0.5, 2, 2, 7, 7, 30, 30)
    x = f32(0.2, 3, 1, 5, 4, 12, 25, 40)
    a64, x64 = a.astype(np.float64), x.astype(np.float64)
    for f, ref in ((sp.gammainc, ss.gammainc), (sp.gammaincc, ss.gammaincc)):
        da, dx = vg.vmap(vg.grad(f, argnums=(0, 1)))(a, x)
        # d/dx analytic, d/da the derivative of the series or fraction (JAX's igamma_grad_a)
        np.testing.assert_allclose(np.asarray(dx), _central(ref, (a64, x64), 1), rtol=1e-5)
        np.testing.assert_allclose(np.asarray(da), _central(ref, (a64, x64), 0), rtol=1e-5)
    # second derivative in x: d/dx (x e^-x) at a = 2, x = 2 is -e^-2; forward mode agrees
    assert float(vg.hessian(sp.gammainc, argnums=1)(2.0, 2.0)) == pytest.approx(-np.exp(-2.0),
                                                                               rel=1e-5)
    assert float(vg.jvp(lambda v: sp.gammaincc(2.0, v), (1.0,), (1.0,))[1]) == \
        pytest.approx(-np.exp(-1.0), rel=1e-6)


def test_betainc_gradients():
    a, b, x = f32(0.5, 2, 10, 30), f32(0.5, 5, 10, 2), f32(0.3, 0.2, 0.6, 0.9)
    args = (a.astype(np.float64), b.astype(np.float64), x.astype(np.float64))
    got = vg.vmap(vg.grad(sp.betainc, argnums=(0, 1, 2)))(a, b, x)
    for i in range(3):      # x: the beta pdf; a and b: the fraction's own derivative
        np.testing.assert_allclose(np.asarray(got[i]), _central(ss.betainc, args, i), rtol=2e-5)


def test_bessel_gradients():
    x = f32(-5, -0.3, 0, 0.7, 1.9, 2.1, 9)
    np.testing.assert_allclose(vg.vmap(vg.grad(sp.j0))(x), -ss.j1(x.astype(np.float64)),
                               atol=2e-7)
    np.testing.assert_allclose(vg.vmap(vg.grad(sp.j1))(x), ss.jvp(1, x.astype(np.float64)),
                               atol=2e-7)
    xp = x[x > 0].astype(np.float64)
    for n, f in enumerate((sp.y0, sp.y1)):
        np.testing.assert_allclose(vg.vmap(vg.grad(f))(xp.astype(np.float32)), ss.yvp(n, xp),
                                   rtol=2e-6)
    vg.test_util.check_grads(lambda v: sp.j1(v) + sp.y0(v), (np.float64([0.5, 3.0]),), order=2,
                             rtol=1e-3, atol=1e-4)


def test_distribution_functions_against_scipy():
    x = np.linspace(0.05, 12, 40).astype(np.float32)
    x64 = x.astype(np.float64)
    g, gw = stats.gamma, sst.gamma(2.5, loc=0.5, scale=1.5)
    for name in ("cdf", "sf", "logcdf", "logsf"):
        np.testing.assert_allclose(getattr(g, name)(x, 2.5, 0.5, 1.5), getattr(gw, name)(x64),
                                   rtol=5e-5, atol=1e-6, err_msg=name)
        np.testing.assert_allclose(getattr(stats.chi2, name)(x, 3.0),
                                   getattr(sst.chi2(3.0), name)(x64), rtol=5e-5, atol=1e-6,
                                   err_msg=name)
    assert float(stats.gamma.cdf(-1.0, 2.0)) == 0.0 and float(stats.gamma.sf(-1.0, 2.0)) == 1.0
    y = np.linspace(-0.2, 1.2, 29).astype(np.float32)
    bw = sst.beta(2.0, 3.5)
    for name in ("cdf", "sf", "logcdf", "logsf"):
        np.testing.assert_allclose(getattr(stats.beta, name)(y, 2.0, 3.5),
                                   getattr(bw, name)(y.astype(np.float64)), rtol=5e-5, atol=1e-6,
                                   err_msg=name)
    z = np.concatenate([np.linspace(-30, 30, 61), f32(-1e3, 1e3)]).astype(np.float32)
    for df in (1.0, 3.0, 30.0):     # both tails relative (each from the incomplete beta)
        assert _rel(stats.t.cdf(z, df, 0.5, 2.0), sst.t.cdf(z.astype(np.float64), df, 0.5, 2.0),
                    1e-30) < 5e-5
    k = f32(-1, 0, 1, 2.5, 3, 7, 20)
    np.testing.assert_allclose(stats.poisson.cdf(k, 3.5), sst.poisson.cdf(k, 3.5), rtol=2e-5,
                               atol=1e-7)
    np.testing.assert_allclose(stats.poisson.cdf(k, 3.5, loc=1), sst.poisson.cdf(k, 3.5, loc=1),
                               rtol=2e-5, atol=1e-7)
    # the cdf's gradient in x is the pdf
    np.testing.assert_allclose(vg.grad(lambda v: vnp.sum(stats.t.cdf(v, 3.0)))(z[20:40]),
                               sst.t.pdf(z[20:40].astype(np.float64), 3.0), rtol=2e-5, atol=1e-8)


def test_jitted_on_vulkan():
    a = np.linspace(0.5, 6, 8).astype(np.float32)
    x = np.linspace(0.2, 9, 8).astype(np.float32)

    def f(a, x):
        u = x / 10.0
        return (sp.gammainc(a, x), sp.gammaincc(a, x), sp.betainc(a, a + 1.0, u), sp.j0(x),
                sp.j1(x), sp.y0(x), sp.y1(x), vg.grad(lambda v: vnp.sum(sp.gammainc(a, v)))(x))

    got = vg.jit(f, backend="vulkan")(a, x)
    want = f(a, x)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-5, atol=2e-6)


def test_one_kernel_each_on_vulkan():
    # the fixed compositions fuse: each function, and gammainc's x-gradient, is one dispatch
    a = np.linspace(0.5, 6, 64).astype(np.float32)
    x = np.linspace(0.2, 9, 64).astype(np.float32)
    for f in (sp.gammainc, lambda a, x: sp.betainc(a, a, x / 10.0), lambda a, x: sp.y1(x),
              vg.grad(lambda a, x: vnp.sum(sp.gammainc(a, x)), argnums=1)):
        jf = vg.jit(f, backend="vulkan")
        jf(a, x)
        runner = jf.lower(a, x).runner
        assert [len(c.ex.dispatches) for cs in runner.variants.values() for c in cs] == [1]
