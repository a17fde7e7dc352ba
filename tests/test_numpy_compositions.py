"""jnp's compositions: cov, corrcoef, trapezoid, vander, piecewise, vectorize,
apply_along_axis, apply_over_axes, histogramdd and histogram2d. Values against numpy's on the
interpreter, gradients against finite differences (float64), JAX's errors for bad arguments,
and a jitted program of several of them on Vulkan."""

import numpy as np
import pytest

import vkgrad as vg
import vkgrad.numpy as vnp

RNG = np.random.default_rng(0)
M = RNG.standard_normal((3, 7)).astype(np.float32)
Y = RNG.standard_normal(7).astype(np.float32)
FW = np.int32([1, 2, 1, 3, 1, 1, 2])
AW = np.float32([0.5, 1.0, 2.0, 1.0, 1.0, 0.1, 0.7])
SAMPLE = RNG.standard_normal((60, 3)).astype(np.float32)


def close(got, want, **kw):
    got = np.asarray(got)
    assert got.shape == np.shape(want)
    np.testing.assert_allclose(got, want, **{"rtol": 1e-5, "atol": 1e-5, **kw})


COV_ARGS = [((M,), {}), ((M,), {"bias": True}), ((M,), {"ddof": 0}), ((M,), {"ddof": 3}),
            ((M,), {"fweights": FW}), ((M,), {"aweights": AW}),
            ((M,), {"fweights": FW, "aweights": AW}), ((M,), {"fweights": FW, "aweights": AW,
                                                              "ddof": 2}),
            ((M, Y), {}), ((M.T,), {"rowvar": False}), ((M.T, Y), {"rowvar": False}), ((Y,), {}),
            ((M[:2].tolist(),), {})]


@pytest.mark.parametrize("args,kw", COV_ARGS)
def test_cov_and_corrcoef_are_numpys(args, kw):
    close(vnp.cov(*args, **kw), np.cov(*args, **kw))
    kw = {k: v for k, v in kw.items() if k == "rowvar"}
    close(vnp.corrcoef(*args, **kw), np.corrcoef(*args, **kw))


def test_cov_edge_cases_and_errors():
    assert vnp.cov(np.zeros((0, 3), np.float32)).shape == (0, 0)
    assert np.isnan(float(vnp.corrcoef(np.ones(4, np.float32))))    # 0 / 0, as JAX's
    with pytest.raises(vg.ShapeError, match="more than 2 dimensions"):
        vnp.cov(np.ones((2, 2, 2)))
    with pytest.raises(vg.ShapeError, match="one weight per sample"):
        vnp.cov(M, fweights=FW[:3])
    with pytest.raises(vg.DTypeError, match="fweights must be integer"):
        vnp.cov(M, fweights=AW)


def test_trapezoid_is_numpys_and_scipys():
    t = np.sort(RNG.random(9)).astype(np.float32)
    y = np.sin(3 * t)
    close(vnp.trapezoid(y), np.trapezoid(y))
    close(vnp.trapezoid(y, t), np.trapezoid(y, t))
    close(vnp.trapezoid(y, dx=0.25), np.trapezoid(y, dx=0.25))
    grid = RNG.random((4, 9)).astype(np.float32)
    close(vnp.trapezoid(grid, t, axis=1), np.trapezoid(grid, t, axis=1))
    close(vnp.trapezoid(grid.T, grid.T, axis=0), np.trapezoid(grid.T, grid.T, axis=0))
    close(vg.scipy.integrate.trapezoid(grid, t), np.trapezoid(grid, t))   # the same function


def test_vander_is_numpys():
    x = np.float32([0.0, 1.5, -2.0, 3.0, 0.7])
    for args in [(), (3,), (0,), (6, True)]:
        close(vnp.vander(x, *args), np.vander(x, *args), rtol=1e-6)   # numpy's in float64
    got = vnp.vander(np.int32([2, -3, 7]), 5)
    assert got.dtype == np.int32 and np.array_equal(np.asarray(got), np.vander([2, -3, 7], 5))
    assert vnp.vander(x).dtype == np.float32
    with pytest.raises(vg.ShapeError, match="one-dimensional"):
        vnp.vander(np.ones((2, 2)))
    with pytest.raises(vg.ShapeError, match="nonnegative"):
        vnp.vander(x, -1)


def test_piecewise_is_numpys():
    x = np.linspace(-2.5, 2.5, 11).astype(np.float32)
    conds = [x < 0, x >= 1]
    for funcs in ([lambda v: -v, lambda v: v * 10, 0.5], [lambda v: -v, 7.0],
                  [np.float32(3), lambda v, k=2.0: v ** k]):
        close(vnp.piecewise(x, conds, funcs), np.piecewise(x, conds, funcs))
    # later conditions win where several hold; extra arguments reach every function
    both = [x < 1, x > -1]
    close(vnp.piecewise(x, both, [lambda v, s: v * s, lambda v, s: v + s], 3.0),
          np.piecewise(x, both, [lambda v, s: v * s, lambda v, s: v + s], 3.0))
    ints = np.arange(6, dtype=np.int32)
    got = vnp.piecewise(ints, [ints > 2], [lambda v: v * 1.7, 0])   # cast to x's dtype
    assert got.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(got), np.piecewise(ints, [ints > 2],
                                                                [lambda v: v * 1.7, 0]))
    with pytest.raises(vg.ArgumentError, match="either 2 or 3 functions"):
        vnp.piecewise(x, conds, [0.0])


def test_vectorize_with_and_without_a_signature():
    add = vnp.vectorize(lambda a, b: a * 2 + b)
    a, b = np.arange(6, dtype=np.float32).reshape(2, 3), np.float32([10, 20, 30])
    close(add(a, b), a * 2 + b)
    close(add(np.ones((2, 1), np.float32), b), 2 + np.broadcast_to(b, (2, 3)))
    dot = vnp.vectorize(lambda u, v: vnp.sum(u * v), signature="(n),(n)->()")
    u, v = RNG.random((4, 1, 5)).astype(np.float32), RNG.random((3, 5)).astype(np.float32)
    close(dot(u, v), np.einsum("ijk,jk->ij", np.broadcast_to(u, (4, 3, 5)), v))
    stats = vnp.vectorize(lambda r: (vnp.mean(r), r - vnp.mean(r)), signature="(n)->(),(n)")
    mean, centred = stats(M)
    close(mean, M.mean(1))
    close(centred, M - M.mean(1, keepdims=True))
    outer = vnp.vectorize(lambda p, q: p[:, None] * q[None, :], signature="(m),(n)->(m,n)")
    close(outer(M, Y), M[:, :, None] * Y[None, None, :])
    scaled = vnp.vectorize(lambda x, how: x * 2 if how == "double" else x, excluded={1})
    close(scaled(Y, "double"), 2 * Y)
    keyword = vnp.vectorize(lambda x, *, k: x + k, excluded={"k"})
    close(keyword(Y, k=1.0), Y + 1.0)
    rows = vnp.vectorize(lambda x: vnp.stack([x, -x]))(Y)    # no signature: any shape
    close(rows, np.stack([Y, -Y], axis=-1))
    with pytest.raises(vg.ArgumentError, match=r"keyword arguments \['k'\] are not in"):
        vnp.vectorize(lambda x, *, k: x + k)(Y, k=1.0)
    with pytest.raises(vg.ArgumentError, match="contains negative numbers"):
        vnp.vectorize(lambda x: x, excluded={-1})
    with pytest.raises(vg.ArgumentError, match="not a valid gufunc signature"):
        vnp.vectorize(lambda x: x, signature="(n)->")(Y)
    with pytest.raises(vg.ShapeError, match="inconsistent size for core dimension 'n'"):
        dot(u, v[:, :4])
    with pytest.raises(vg.ShapeError, match="does not match core dimensions"):
        vnp.vectorize(lambda r: r, signature="(n)->()")(M)
    with pytest.raises(vg.ArgumentError, match="wrong number of positional arguments"):
        dot(u)


def test_apply_along_axis_and_over_axes_are_numpys():
    a = RNG.random((2, 3, 4)).astype(np.float32)
    for axis in (0, 1, -1):
        close(vnp.apply_along_axis(lambda v: v[::-1] * vnp.sum(v), axis, a),
              np.apply_along_axis(lambda v: v[::-1] * np.sum(v), axis, a))
        close(vnp.apply_along_axis(lambda v, p: vnp.stack([vnp.max(v), p * vnp.min(v)]),
                                   axis, a, 2.0),
              np.apply_along_axis(lambda v, p: np.stack([np.max(v), p * np.min(v)]), axis, a, 2.0))
    close(vnp.apply_along_axis(vnp.sum, 1, a), a.sum(1))
    for axes in ([0, 2], [1], 2):
        close(vnp.apply_over_axes(vnp.sum, a, axes), np.apply_over_axes(np.sum, a, axes))
    close(vnp.apply_over_axes(lambda x, ax: vnp.cumsum(x, ax), a, [0, 1]),
          np.apply_over_axes(lambda x, ax: np.cumsum(x, ax), a, [0, 1]))
    with pytest.raises(vg.ShapeError, match="keep them or drop one"):
        vnp.apply_over_axes(lambda x, ax: vnp.sum(x), a, [0])


@pytest.mark.parametrize("bins,kw", [(10, {}), ((3, 4, [-1.0, 0.0, 1.5]), {}),
                                     (4, {"range": [(-2, 2), None, (-1, 1)]}),
                                     (5, {"density": True}),
                                     (3, {"weights": RNG.random(60).astype(np.float32)}),
                                     (3, {"weights": RNG.random(60).astype(np.float32),
                                          "density": True})])
def test_histogramdd_is_numpys(bins, kw):
    hist, edges = vnp.histogramdd(SAMPLE, bins, **kw)
    want, want_edges = np.histogramdd(SAMPLE, bins, **kw)
    close(hist, want, rtol=1e-4)
    assert hist.dtype == (np.int32 if not kw.get("density") and "weights" not in kw
                          else np.float32)   # JAX's: counts are ints (numpy's floats)
    for e, w in zip(edges, want_edges):
        close(e, w)


def test_histogram2d_is_numpys():
    x, y = SAMPLE[:, 0], SAMPLE[:, 1]
    for bins in (6, (3, 5), [-1.0, 0.0, 0.5, 2.0], ([-1.0, 0.0, 1.0], 4)):
        got, want = vnp.histogram2d(x, y, bins), np.histogram2d(x, y, bins)
        for g, w in zip(got, want):
            close(g, w)
    got = vnp.histogram2d(x, y, 4, range=[(-1, 1), (-2, 2)], density=True)
    want = np.histogram2d(x, y, 4, range=[(-1, 1), (-2, 2)], density=True)
    close(got[0], want[0], rtol=1e-4)
    with pytest.raises(vg.ShapeError, match="a bin for each dimension"):
        vnp.histogramdd(SAMPLE, [3, 4])
    with pytest.raises(vg.ShapeError, match="range must be a sequence of 3 pairs"):
        vnp.histogramdd(SAMPLE, 3, range=[(0, 1)])
    with pytest.raises(vg.ShapeError, match="one weight for each sample"):
        vnp.histogramdd(SAMPLE, 3, weights=np.ones(5))


def test_gradients_against_finite_differences(x64):
    m, y = M.astype(np.float64), Y.astype(np.float64)
    t = np.sort(RNG.random(7))
    check = vg.test_util.check_grads
    check(lambda m: vnp.cov(m, aweights=AW.astype(np.float64)), (m,), order=2)
    check(lambda m, y: vnp.corrcoef(m, y), (m, y), order=1)
    check(lambda y, t: vnp.trapezoid(y, t), (y, t), order=2)
    check(lambda y: vnp.vander(y, 4), (y,), order=2)
    check(lambda y: vnp.piecewise(y, [y < 0], [lambda v: vnp.sin(v), lambda v: v ** 3]), (y,),
          order=2)
    check(vnp.vectorize(lambda u, v: vnp.sum(u * vnp.exp(v)), signature="(n),(n)->()"),
          (m, y), order=1)
    check(lambda m: vnp.apply_along_axis(lambda v: vnp.cumsum(v) * vnp.max(v), 1, m), (m,),
          order=1)
    assert np.asarray(vg.grad(lambda y: vnp.vander(y, 3).sum())(np.zeros(1))).tolist() == [1.0]


def test_a_jitted_program_of_them_runs_on_vulkan():
    def stats(m, y):
        rows = vnp.vectorize(lambda r: vnp.trapezoid(r, dx=0.5), signature="(n)->()")(m)
        pw = vnp.piecewise(y, [y < 0], [lambda v: -v, lambda v: v * v])
        hist = vnp.histogram2d(m[0], m[1], bins=3, range=[(-3, 3), (-3, 3)])[0]
        return vnp.corrcoef(m), rows, vnp.vander(y[:3], 3), pw, hist

    jitted = vg.jit(stats, backend="vulkan")
    assert jitted.lower(M, Y).fallback_reason is None    # whole on the device
    c, rows, v, pw, hist = jitted(M, Y)
    close(c, np.corrcoef(M), atol=1e-5)
    close(rows, np.trapezoid(M, dx=0.5, axis=1))
    close(v, np.vander(Y[:3], 3))
    close(pw, np.piecewise(Y, [Y < 0], [lambda v: -v, lambda v: v * v]))
    close(hist, np.histogram2d(M[0], M[1], bins=3, range=[(-3, 3), (-3, 3)])[0])
