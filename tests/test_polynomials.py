"""jnp's polynomial functions (vkgrad/numpy/polynomials.py) and window functions
(vkgrad/numpy/windows.py): values against numpy, JAX's dtypes and errors, gradients by
vg.check_grads, and a jit of them on Vulkan."""

import numpy as np
import pytest

import vkgrad as vg
import vkgrad.numpy as vnp
from vkgrad.errors import ArgumentError, ConcretizationError, DTypeError, ShapeError

P3 = np.float32([2.0, -1.5, 0.5, 3.0])
Q2 = np.float32([1.0, 4.0, -2.0])


def close(got, want, rtol=2e-6, atol=1e-6):
    np.testing.assert_allclose(np.asarray(got), want, rtol=rtol, atol=atol)


def test_polyval():
    x = np.linspace(-3, 3, 13).astype(np.float32)
    close(vnp.polyval(P3, x), np.polyval(P3, x))
    assert float(vnp.polyval([1, 2, 3], 2)) == 11 and vnp.polyval([1, 2, 3], 2).dtype == np.float32
    # p's trailing axes broadcast against x (JAX's): two polynomials at three points each
    p2 = np.stack([P3, P3[::-1]], axis=1)                               # (4, 2)
    want = np.stack([np.polyval(P3, x[:3]), np.polyval(P3[::-1], x[:3])], 1)   # (3, 2)
    close(vnp.polyval(p2, x[:3, None, None]), want[:, None])
    assert vnp.polyval(np.float32([]), x).shape == x.shape              # the zero polynomial
    with pytest.raises(ShapeError, match="polyval: p must have at least one axis"):
        vnp.polyval(1.0, x)


def test_arithmetic():
    close(vnp.polyadd(P3, Q2), np.polyadd(P3, Q2))
    close(vnp.polyadd(Q2, P3), np.polyadd(Q2, P3))
    close(vnp.polysub(Q2, P3), np.polysub(Q2, P3))
    assert vnp.polyadd([1, 2], [3]).dtype == np.int32                   # integers stay integers
    close(vnp.polymul(P3, Q2), np.polymul(P3, Q2))
    assert vnp.polymul([1, 2], [3]).dtype == np.float32                 # JAX's: inexact
    close(vnp.polymul(np.float32([0, 0, 1, 2]), np.float32([0, 3]), trim_leading_zeros=True),
          [3.0, 6.0])
    close(vnp.polymul(np.float32([0, 0, 1, 2]), np.float32([0, 3])), [0, 0, 0, 3, 6])
    with pytest.raises(ConcretizationError, match="trim_leading_zeros"):
        vg.jit(lambda a: vnp.polymul(a, a, trim_leading_zeros=True))(P3)
    # JAX's 2-D case: the array with fewer rows goes into the other's last rows, broadcasting
    a, b = np.int32([[2, 3, 1]]), np.int32([[5, 7, 3], [8, 2, 6]])
    np.testing.assert_array_equal(vnp.polyadd(a, b), [[5, 7, 3], [10, 5, 7]])
    np.testing.assert_array_equal(vnp.polysub(b, np.int32([2])), [[5, 7, 3], [6, 0, 4]])
    with pytest.raises(ShapeError, match=r"polyadd: i32\[2,3\] does not broadcast into the last 2"):
        vnp.polyadd(np.int32([1, 3, 5]), b)
    with pytest.raises(ShapeError, match="polyadd: a1 must have at least one axis"):
        vnp.polyadd(1.0, P3)


def test_polydiv():
    for u, v in ((P3, Q2), (P3, np.float32([4.0, 1.0])), (Q2, P3), (P3, np.float32([2.0]))):
        q, r = vnp.polydiv(u, v)
        q_ref, r_ref = np.polydiv(u, v)
        close(q, q_ref, rtol=1e-5)
        assert r.shape == u.shape                          # JAX's: the remainder keeps u's length
        close(r[u.shape[0] - r_ref.shape[0]:], r_ref, rtol=1e-5, atol=1e-5)
        t = np.float32([-1.5, 0.5, 2.0])                  # u = q v + r, as polynomials
        close(vnp.polyval(vnp.polyadd(vnp.polymul(q, v), r), t), np.polyval(u, t), rtol=1e-5,
              atol=1e-5)
    q, r = vnp.polydiv(np.int32([5, 7, 9]), np.int32([4, 1]), trim_leading_zeros=True)
    close(q, [1.25, 1.4375])
    close(r, [7.5625])
    assert r.shape == (1,)
    with pytest.raises(ConcretizationError, match="trim_leading_zeros"):
        vg.jit(lambda a: vnp.polydiv(a, Q2, trim_leading_zeros=True))(P3)


def test_derivative_and_integral():
    for m in range(5):
        close(vnp.polyder(P3, m), np.polyder(P3, m))
    assert vnp.polyder(P3, 4).shape == (0,) and vnp.polyder([1, 2, 3]).dtype == np.float32
    for m, k in ((0, None), (1, None), (1, 2.5), (2, None), (2, [5.0, 7.0]), (3, 1.0)):
        close(vnp.polyint(P3, m, k), np.polyint(P3, m, 0 if k is None else k), rtol=3e-6)
    close(vnp.polyder(vnp.polyint(P3, 2, [1.0, 2.0]), 2), P3)
    with pytest.raises(ShapeError, match=r"polyint: k must be a scalar or a 1-D array of length 1"):
        vnp.polyint(P3, 2, [1.0, 2.0, 3.0])
    with pytest.raises(ShapeError, match="polyder: m must be nonnegative"):
        vnp.polyder(P3, -1)
    with pytest.raises(ArgumentError, match="polyint: m must be an integer"):
        vnp.polyint(P3, 1.5)


def test_polyfit():
    rng = np.random.default_rng(0)
    x = np.linspace(-2, 3, 40).astype(np.float32)
    y = (np.polyval([0.5, -1.0, 2.0, 1.5], x) + 0.05 * rng.standard_normal(40)).astype(np.float32)
    w = rng.uniform(0.5, 2.0, 40).astype(np.float32)
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    for deg in (0, 1, 3, 5):
        close(vnp.polyfit(x, y, deg), np.polyfit(x64, y64, deg), rtol=2e-4, atol=2e-5)
    close(vnp.polyfit(x, y, 3, w=w), np.polyfit(x64, y64, 3, w=w), rtol=2e-4, atol=2e-5)
    ys = np.stack([y, 2 * y - x], axis=1)
    close(vnp.polyfit(x, ys, 2), np.polyfit(x64, ys.astype(np.float64), 2), rtol=2e-4, atol=2e-5)
    for cov in (True, "unscaled"):
        c, v = vnp.polyfit(x, y, 2, cov=cov)
        c_ref, v_ref = np.polyfit(x64, y64, 2, cov=cov)
        close(c, c_ref, rtol=2e-4, atol=2e-5)
        close(v, v_ref, rtol=2e-3, atol=1e-7)
    c, v = vnp.polyfit(x, ys, 2, cov="unscaled")          # numpy's and JAX's (3, 3, 1)
    close(v, np.polyfit(x64, ys.astype(np.float64), 2, cov="unscaled")[1], rtol=2e-3, atol=1e-7)
    with pytest.raises(ArgumentError, match="polyfit: cov=True with a 2-D y is not supported"):
        vnp.polyfit(x, ys, 2, cov=True)
    close(vnp.polyfit(x, y, 2.0), np.polyfit(x64, y64, 2), rtol=2e-4, atol=2e-5)   # int(deg)
    # the fit is linear in y: its gradient is the pseudo-inverse of the Vandermonde matrix
    g = vg.grad(lambda yy: vnp.polyfit(x, yy, 2)[0])(y)
    close(g, np.linalg.pinv(np.vander(x64, 3))[0], rtol=1e-3, atol=1e-6)
    got = vnp.polyfit(x, y, 3, full=True)                 # (c, residuals, rank, s, rcond)
    want = np.polyfit(x64, y64, 3, full=True)
    for g, r in zip(got, want):
        close(g, r, rtol=2e-4, atol=2e-5)
    assert got[4].dtype == np.float32 and float(got[4]) == pytest.approx(40 * 2 ** -23)
    with pytest.raises(ArgumentError, match=r"polyfit: y must be 1-D or 2-D with one row per x"):
        vnp.polyfit(x, y[:5], 2)
    with pytest.raises(ShapeError, match="must exceed order"):
        vnp.polyfit(x[:3], y[:3], 2, cov=True)


def test_poly_and_roots():
    z = np.float32([1.0, -2.0, 0.5, 3.0])
    close(vnp.poly(z), np.poly(z))
    close(vnp.poly(vnp.asarray(z)), np.poly(z))
    assert float(vnp.poly(np.float32([]))) == 1.0 and vnp.poly([1, 2]).dtype == np.float32
    close(vnp.poly(2.0), [1.0, -2.0])                                  # JAX's: one root
    with pytest.raises(DTypeError, match="poly: a square matrix's characteristic polynomial"):
        vnp.poly(np.eye(3))
    with pytest.raises(DTypeError, match="roots: the roots of a polynomial are complex"):
        vnp.roots(P3)


def test_gradients():
    x = np.float64([-1.5, 0.3, 2.0])
    vg.test_util.check_grads(lambda p, x: vnp.polyval(p, x), (P3.astype(np.float64), x), order=2)
    vg.test_util.check_grads(lambda a, b: vnp.polyval(vnp.polymul(a, vnp.polyint(b, 1, 0.5)), x),
                             (P3.astype(np.float64), Q2.astype(np.float64)), order=1)
    vg.test_util.check_grads(lambda z: vnp.polyder(vnp.poly(z), 1), (np.float64([1.0, -2.0, 0.5]),),
                             order=1)
    vg.test_util.check_grads(lambda u, v: vnp.polydiv(u, v), (P3.astype(np.float64),
                                                              Q2.astype(np.float64)), order=1)


WINDOWS = ["hanning", "hamming", "blackman", "bartlett"]


@pytest.mark.parametrize("name", WINDOWS)
def test_windows(name):
    for M in (0, 1, 2, 5, 16, 51):
        got = getattr(vnp, name)(M)
        assert got.shape == (M,) and got.dtype == np.float32
        close(got, getattr(np, name)(M), rtol=0, atol=2e-7)
    with pytest.raises(ShapeError, match=f"{name}: M must be nonnegative"):
        getattr(vnp, name)(-1)
    close(getattr(vnp, name)(5.7), getattr(np, name)(5), rtol=0, atol=2e-7)   # int(M), JAX's
    with pytest.raises(ArgumentError, match=f"{name}: M must be an integer"):
        getattr(vnp, name)(None)


def test_kaiser():
    for M, beta in ((0, 1.0), (1, 3.0), (5, 0.0), (12, 8.6), (31, 14.0), (20, 100.0), (8, -5.0)):
        close(vnp.kaiser(M, beta), np.kaiser(M, beta), rtol=1e-5, atol=1e-7)
    # beta may be traced; d/dbeta against finite differences
    vg.test_util.check_grads(lambda b: vnp.kaiser(9, b), (np.float64(6.0),), order=1)


def test_i0():
    x = np.concatenate([np.linspace(-30, 30, 121), [0.0, 3.75, -3.75]]).astype(np.float32)
    close(vnp.i0(x), np.i0(x.astype(np.float64)), rtol=3e-6, atol=0)
    assert vnp.i0(2).dtype == np.float32
    # I0' = I1, 0 at 0
    xg = np.float32([-2.0, 0.0, 0.5, 6.0])
    i1 = pytest.importorskip("scipy.special").i1
    close(vg.vmap(vg.grad(vnp.i0))(xg), i1(xg.astype(np.float64)), rtol=1e-5, atol=1e-7)


def test_jitted_on_vulkan():
    x = np.linspace(-1, 1, 16).astype(np.float32)

    def f(p, x, beta):
        y = vnp.polyval(p, x) * vnp.hanning(16) + vnp.kaiser(16, beta)
        return y, vnp.polyfit(x, y, 2), vnp.polyval(vnp.polyder(vnp.polyint(p, 1, 1.0)), x)

    got = vg.jit(f, backend="vulkan")(P3, x, np.float32(5.0))
    want = f(P3, x, np.float32(5.0))
    for g, w in zip(got, want):
        close(g, np.asarray(w), rtol=5e-5, atol=5e-5)
