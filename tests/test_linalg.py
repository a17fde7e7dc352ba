"""vnp.linalg's factorizations (LU, QR, Jacobi's eigh and svd) and what is built on them,
vg.scipy.linalg's, vg.random.orthogonal and the orthogonal initializers: values against
numpy.linalg and scipy.linalg (float32 tolerances, on the interpreter), gradients against
finite differences in float64 and the analytic formulas, one small jit per family on Vulkan,
and bad input."""

import numpy as np
import pytest

import vkgrad as vg
import vkgrad.numpy as vnp
from vkgrad.lowering.lower import lower
from vkgrad.passes import optimize
from vkgrad.pipeline import fuse_program
from vkgrad.target import Target
from vkgrad.tracer.core import ShapeDtype

sl = pytest.importorskip("scipy.linalg")
rng = np.random.default_rng(7)


def well_conditioned(*shape):
    """Random (..., n, n) matrices a few units from singular (n I + a normal matrix)."""
    n = shape[-1]
    return (rng.standard_normal(shape) + n ** 0.5 * np.eye(n)).astype(np.float32)


A = well_conditioned(5, 5)
BATCH = well_conditioned(2, 3, 4, 4)


def close(got, want, tol=2e-5):
    np.testing.assert_allclose(np.asarray(got), want, rtol=tol, atol=tol)


# ------------------------------------------------------------------------------------------ LU

@pytest.mark.parametrize("a", [A, BATCH, rng.standard_normal((6, 6)).astype(np.float32)],
                         ids=["5x5", "batched", "normal"])
def test_solve_inv_det_slogdet_against_numpy(a):
    b = rng.standard_normal(a.shape[:-1] + (3,)).astype(np.float32)
    close(vnp.linalg.solve(a, b), np.linalg.solve(a, b), 1e-4)
    close(vnp.linalg.inv(a), np.linalg.inv(a), 1e-4)
    close(vnp.linalg.det(a), np.linalg.det(a), 1e-4)
    got, want = vnp.linalg.slogdet(a), np.linalg.slogdet(a)   # JAX's SlogdetResult fields
    close(got.sign, want.sign)
    close(got.logabsdet, want.logabsdet, 1e-4)


def test_solve_b_shapes_as_jax():
    b = rng.standard_normal(5).astype(np.float32)
    close(vnp.linalg.solve(A, b), np.linalg.solve(A, b))                  # (n,): a vector
    bs = rng.standard_normal((2, 3, 4, 2)).astype(np.float32)
    close(vnp.linalg.solve(BATCH, bs), np.linalg.solve(BATCH, bs), 1e-4)  # (..., n, k)
    one = rng.standard_normal((4, 2)).astype(np.float32)                  # batch dims broadcast
    close(vnp.linalg.solve(BATCH, one), np.linalg.solve(BATCH, one), 1e-4)
    close(vnp.linalg.solve(BATCH, one[:, 0]), np.linalg.solve(BATCH, one[:, 0]), 1e-4)


def test_singular_matrices_as_jax():
    s = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.0, 1.0, 5.0]], np.float32)
    assert float(vnp.linalg.det(s)) == 0.0
    sign, logdet = vnp.linalg.slogdet(s)
    assert float(sign) == 0.0 and float(logdet) == -np.inf
    assert float(vnp.linalg.det(np.zeros((3, 3), np.float32))) == 0.0


def test_lu_family_against_scipy():
    for a in (A, rng.standard_normal((4, 6)).astype(np.float32),
              rng.standard_normal((6, 4)).astype(np.float32)):
        for got, want in zip(vg.scipy.linalg.lu(a), sl.lu(a)):
            close(got, want)
        pl, u = vg.scipy.linalg.lu(a, permute_l=True)
        close(np.asarray(pl) @ np.asarray(u), a)
    lu, piv = vg.scipy.linalg.lu_factor(A)
    want_lu, want_piv = sl.lu_factor(A)
    close(lu, want_lu)
    np.testing.assert_array_equal(piv, want_piv)
    assert np.asarray(piv).dtype == np.int32
    b = rng.standard_normal((5, 2)).astype(np.float32)
    for trans in (0, 1, 2):
        close(vg.scipy.linalg.lu_solve((lu, piv), b, trans=trans),
              sl.lu_solve((want_lu, want_piv), b, trans=trans), 1e-4)
    close(vg.scipy.linalg.lu_solve((lu, piv), b[:, 0]), np.linalg.solve(A, b[:, 0]), 1e-4)
    lus, pivs = vg.scipy.linalg.lu_factor(BATCH)                          # batched
    bb = rng.standard_normal((2, 3, 4)).astype(np.float32)
    close(vg.scipy.linalg.lu_solve((lus, pivs), bb), np.linalg.solve(BATCH, bb[..., None])[..., 0],
          1e-4)
    close(vg.scipy.linalg.det(A), sl.det(A), 1e-4)
    close(vg.scipy.linalg.inv(A), sl.inv(A), 1e-4)
    close(vg.scipy.linalg.solve(A, b), sl.solve(A, b), 1e-4)
    spd = (A @ A.T + np.eye(5)).astype(np.float32)
    upper_only, lower_only = np.triu(spd), np.tril(spd)   # the triangle solve(assume_a='pos') reads
    close(vg.scipy.linalg.solve(upper_only, b, assume_a="pos"), np.linalg.solve(spd, b), 1e-4)
    close(vg.scipy.linalg.solve(lower_only, b, assume_a="pos", lower=True),
          np.linalg.solve(spd, b), 1e-4)


def test_lu_gradients():
    a, b = A.astype(np.float64), rng.standard_normal((5, 2))
    for f in (vnp.linalg.det, vnp.linalg.inv, lambda a: vnp.linalg.slogdet(a).logabsdet,
              lambda a: vnp.linalg.solve(a, b), lambda a: vg.scipy.linalg.lu(a)[2]):
        vg.test_util.check_grads(f, (a,), order=1)
    vg.test_util.check_grads(lambda b: vnp.linalg.solve(a, b), (b,), order=1)
    # the analytic rules: d det = det inv(a)^T; d <g, inv(a)> = -inv^T g inv^T
    close(vg.grad(vnp.linalg.det)(A), np.linalg.det(A) * np.linalg.inv(A).T, 1e-4)
    g = rng.standard_normal((5, 5)).astype(np.float32)
    ia = np.linalg.inv(A)
    close(vg.grad(lambda a: vnp.sum(vnp.linalg.inv(a) * g))(A), -ia.T @ g @ ia.T, 1e-4)


@pytest.mark.filterwarnings("error::vkgrad.FallbackWarning")   # all of it on Vulkan
def test_lu_jitted_on_vulkan():
    a, b = A[:4, :4], rng.standard_normal(4).astype(np.float32)
    x, d = vg.jit(lambda a, b: (vnp.linalg.solve(a, b), vnp.linalg.det(a)), backend="vulkan")(a, b)
    close(x, np.linalg.solve(a, b), 1e-4)
    close(d, np.linalg.det(a), 1e-4)


def test_lu_bad_input():
    with pytest.raises(vg.ShapeError, match="solve takes square matrices"):
        vnp.linalg.solve(np.ones((2, 3)), np.ones(2))
    with pytest.raises(vg.ShapeError, match="has 3 rows for a 4x4 matrix"):
        vnp.linalg.solve(BATCH, np.ones((3, 2)))
    with pytest.raises(vg.ShapeError, match=r"stack of matrices .*solve\(a, b\[\.\.\., None\]\)"):
        vnp.linalg.solve(BATCH, np.ones((2, 3, 4)))
    with pytest.raises(vg.ShapeError, match="det takes square matrices"):
        vnp.linalg.det(np.ones(3))
    with pytest.raises(vg.ShapeError, match="lu takes matrices"):
        vg.scipy.linalg.lu(np.ones(3))
    with pytest.raises(vg.ArgumentError, match="assume_a is"):
        vg.scipy.linalg.solve(A, A, assume_a="banded")
    ints = np.array([[2, 1], [1, 3]])
    close(vnp.linalg.det(ints), 5.0, 1e-5)                               # ints -> float
    assert np.asarray(vnp.linalg.inv(ints)).dtype == np.float32


# ------------------------------------------------------------------------------------------ QR

@pytest.mark.parametrize("shape", [(5, 5), (6, 4), (4, 6), (2, 3, 5, 3)])
def test_qr_against_numpy(shape):
    a = rng.standard_normal(shape).astype(np.float32)
    for mode in ("reduced", "complete"):
        q, r = vnp.linalg.qr(a, mode=mode)
        want_q, want_r = np.linalg.qr(a, mode=mode)   # the same (LAPACK's) signs
        assert q.shape == want_q.shape and r.shape == want_r.shape
        close(q, want_q, 1e-5)
        close(r, want_r, 1e-5)
        assert np.all(np.tril(np.asarray(r), -1) == 0)
    close(vnp.linalg.qr(a, mode="r"), np.linalg.qr(a, mode="r"), 1e-5)
    assert vnp.linalg.qr(a).R.shape == want_r.shape[:-2] + (min(shape[-2:]), shape[-1])


def test_qr_of_triangular_and_scipy_qr():
    u = np.triu(rng.standard_normal((4, 4))).astype(np.float32)   # nothing to reflect
    for got, want in zip(vnp.linalg.qr(u), np.linalg.qr(u)):
        close(got, want)
    a = rng.standard_normal((5, 3)).astype(np.float32)
    for mode in ("full", "economic"):
        for got, want in zip(vg.scipy.linalg.qr(a, mode=mode), sl.qr(a, mode=mode)):
            close(got, want, 1e-5)
    (r,) = vg.scipy.linalg.qr(a, mode="r")
    close(r, sl.qr(a, mode="r")[0], 1e-5)


def test_qr_gradients():
    a = rng.standard_normal((5, 3))
    vg.test_util.check_grads(lambda a: vnp.linalg.qr(a), (a,), order=1)
    vg.test_util.check_grads(lambda a: vnp.linalg.qr(a, mode="complete").R, (a,), order=1)


def test_random_orthogonal_and_initializers():
    key = vg.random.key(3)
    q = np.asarray(vg.random.orthogonal(key, 4, shape=(2,)))
    assert q.shape == (2, 4, 4)
    close(q @ np.swapaxes(q, -1, -2), np.broadcast_to(np.eye(4), (2, 4, 4)), 1e-5)
    wide, tall = vg.random.orthogonal(key, 3, m=5), vg.random.orthogonal(key, 5, m=3)
    close(np.asarray(wide) @ np.asarray(wide).T, np.eye(3), 1e-5)
    close(np.asarray(tall).T @ np.asarray(tall), np.eye(3), 1e-5)
    # the draw is Q times the signs of R's diagonal: R's diagonal positive, a = Q' R'
    z = np.asarray(vg.random.normal(key, (2, 4, 4)))
    r = np.linalg.inv(q) @ z
    assert np.all(np.diagonal(r, 0, -2, -1) > 0)
    close(np.tril(r, -1), np.zeros_like(r), 1e-5)
    w = np.asarray(vg.nn.initializers.orthogonal(2.0)(key, (3, 4, 6)))
    close(w.reshape(12, 6).T @ w.reshape(12, 6), 4 * np.eye(6), 1e-5)
    w = np.asarray(vg.nn.initializers.orthogonal(column_axis=0)(key, (6, 4)))
    close(w.T @ w, np.eye(4), 1e-5)
    w = np.asarray(vg.nn.initializers.delta_orthogonal()(key, (3, 3, 4, 5)))
    close(w[1, 1] @ w[1, 1].T, np.eye(4), 1e-5)
    assert np.count_nonzero(w) == np.count_nonzero(w[1, 1])
    with pytest.raises(vg.ShapeError, match="requires at least a 2D shape"):
        vg.nn.initializers.orthogonal()(key, (4,))
    with pytest.raises(vg.ShapeError, match="fan_in .* must be less or equal than fan_out"):
        vg.nn.initializers.delta_orthogonal()(key, (3, 5, 4))


@pytest.mark.filterwarnings("error::vkgrad.FallbackWarning")   # all of it on Vulkan
def test_qr_jitted_on_vulkan():
    a = rng.standard_normal((4, 3)).astype(np.float32)
    q, r = vg.jit(lambda a: vnp.linalg.qr(a), backend="vulkan")(a)
    want_q, want_r = np.linalg.qr(a)
    close(q, want_q, 1e-5)
    close(r, want_r, 1e-5)


def test_qr_bad_input():
    with pytest.raises(vg.ArgumentError, match="mode is 'reduced', 'complete' or 'r'"):
        vnp.linalg.qr(A, mode="raw")
    with pytest.raises(vg.ShapeError, match="qr takes matrices"):
        vnp.linalg.qr(np.ones(3))
    with pytest.raises(vg.ArgumentError, match="pivoting=True"):
        vg.scipy.linalg.qr(A, pivoting=True)
    close(vnp.linalg.qr(np.eye(3, dtype=np.int32)).Q, np.eye(3))           # ints -> float


# ------------------------------------------------------------------------------- eigh and svd

def symmetric(*shape):
    m = rng.standard_normal(shape)
    return ((m + np.swapaxes(m, -1, -2)) / 2).astype(np.float32)


def assert_eigh(a, w, v, tol):
    """w against numpy's eigenvalues; v orthonormal with a v = v diag(w) (numpy's vectors'
    signs are LAPACK's choice, so the vectors are checked by what they must satisfy)."""
    w, v = np.asarray(w), np.asarray(v)
    close(w, np.linalg.eigvalsh(a), tol)
    close(np.swapaxes(v, -1, -2) @ v, np.broadcast_to(np.eye(a.shape[-1]), a.shape), tol)
    close(a @ v, v * w[..., None, :], tol)


@pytest.mark.parametrize("shape,tol", [((1, 1), 1e-6), ((2, 2), 1e-5), ((5, 5), 1e-5),
                                       ((2, 3, 8, 8), 2e-5), ((64, 64), 2e-4)],
                         ids=["1", "2", "5-odd", "batched", "64"])
def test_eigh_against_numpy(shape, tol):
    a = symmetric(*shape)
    w, v = vnp.linalg.eigh(a)
    assert_eigh(a, w, v, tol)
    close(vnp.linalg.eigvalsh(a), np.linalg.eigvalsh(a), tol)


def test_eigh_input_triangles_and_scipy():
    a = symmetric(5, 5)
    lower_only, upper_only = np.tril(a), np.triu(a)
    assert_eigh(a, *vnp.linalg.eigh(lower_only, symmetrize_input=False), 1e-5)
    assert_eigh(a, *vnp.linalg.eigh(upper_only, UPLO="U", symmetrize_input=False), 1e-5)
    close(vnp.linalg.eigh(lower_only + lower_only.T - np.diag(np.diag(a))).eigenvalues,
          np.linalg.eigvalsh(a), 1e-5)
    assert_eigh(a, *vg.scipy.linalg.eigh(lower_only), 1e-5)
    close(vg.scipy.linalg.eigh(upper_only, lower=False, eigvals_only=True), sl.eigh(a)[0], 1e-5)
    d = np.diag(np.array([3.0, 1.0, 2.0], np.float32))                    # already diagonal
    w, v = vnp.linalg.eigh(d)
    close(w, [1.0, 2.0, 3.0], 0)
    close(np.abs(np.asarray(v)), np.eye(3)[:, [1, 2, 0]], 0)


@pytest.mark.parametrize("shape", [(5, 5), (6, 4), (4, 6), (2, 5, 3), (7, 7)])
def test_svd_against_numpy(shape):
    x = rng.standard_normal(shape).astype(np.float32)
    close(vnp.linalg.svdvals(x), np.linalg.svd(x, compute_uv=False), 1e-5)
    for full in (False, True):
        u, s, vt = (np.asarray(r) for r in vnp.linalg.svd(x, full_matrices=full))
        want = np.linalg.svd(x, full_matrices=full)
        assert (u.shape, s.shape, vt.shape) == (want.U.shape, want.S.shape, want.Vh.shape)
        close(s, want.S, 1e-5)
        k = s.shape[-1]
        close((u[..., :k] * s[..., None, :]) @ vt[..., :k, :], x, 1e-5)
        close(np.swapaxes(u, -1, -2) @ u, np.broadcast_to(np.eye(u.shape[-1]), u.shape[:-2] +
                                                          (u.shape[-1],) * 2), 1e-5)
        close(vt @ np.swapaxes(vt, -1, -2), np.broadcast_to(np.eye(vt.shape[-2]),
                                                            vt.shape[:-2] + (vt.shape[-2],) * 2),
              1e-5)
    u, s, vt = vg.scipy.linalg.svd(x)
    close(s, sl.svd(x)[1], 1e-5)


def test_svd_of_rank_deficient_matrices_has_orthonormal_vectors():
    x = rng.standard_normal((5, 2)).astype(np.float32)
    for a in (np.zeros((3, 3), np.float32), np.concatenate([x, 0 * x[:, :1], x[:, 1:]], 1)):
        u, s, vt = (np.asarray(r) for r in vnp.linalg.svd(a, full_matrices=False))
        k = s.shape[-1]
        close(s, np.linalg.svd(a, compute_uv=False), 1e-5)
        close(u.T @ u, np.eye(k), 1e-5)
        close(vt @ vt.T, np.eye(k), 1e-5)
        close((u * s) @ vt, a, 1e-5)


def test_svd_hermitian_and_built_on_svd():
    h = symmetric(4, 4)
    u, s, vt = (np.asarray(r) for r in vnp.linalg.svd(h, hermitian=True))
    close(s, np.linalg.svd(h, compute_uv=False), 1e-5)
    close((u * s) @ vt, h, 1e-5)
    close(vnp.linalg.svd(h, hermitian=True, compute_uv=False), s, 1e-6)
    x = rng.standard_normal((5, 3)).astype(np.float32)
    close(vnp.linalg.pinv(x), np.linalg.pinv(x), 1e-5)
    close(vnp.linalg.pinv(BATCH), np.linalg.pinv(BATCH), 1e-4)
    rank2 = (x[:, :2] @ rng.standard_normal((2, 4))).astype(np.float32)
    jax_rtol = 10 * 5 * np.finfo(np.float32).eps    # JAX's default (numpy's is 1e-15)
    close(vnp.linalg.pinv(rank2), np.linalg.pinv(rank2, rcond=jax_rtol), 1e-4)
    assert int(vnp.linalg.matrix_rank(rank2)) == 2 == np.linalg.matrix_rank(rank2)
    np.testing.assert_array_equal(vnp.linalg.matrix_rank(BATCH), np.linalg.matrix_rank(BATCH))
    assert np.asarray(vnp.linalg.matrix_rank(x)).dtype == np.int32
    assert int(vnp.linalg.matrix_rank(np.zeros(3))) == 0
    assert int(vnp.linalg.matrix_rank(rank2 @ rank2.T, hermitian=True)) == 2
    assert int(vnp.linalg.matrix_rank(A, tol=0.5)) == np.linalg.matrix_rank(A, rtol=0.5)
    for p in (None, 2, -2, 1, -1, np.inf, -np.inf, "fro"):
        close(vnp.linalg.cond(A, p), np.linalg.cond(A, p), 1e-4)
    close(vnp.linalg.cond(BATCH), np.linalg.cond(BATCH), 1e-4)
    singular = np.array([[1.0, 2.0], [2.0, 4.0]], np.float32)
    assert float(vnp.linalg.cond(singular, 1)) == np.inf
    b3 = rng.standard_normal((2, 3, 4))
    for ord in (2, -2, "nuc"):
        close(vnp.linalg.norm(x, ord), np.linalg.norm(x, ord), 1e-5)
        close(vnp.linalg.norm(b3, ord, axis=(2, 0), keepdims=True),
              np.linalg.norm(b3, ord, axis=(2, 0), keepdims=True), 1e-5)
    for n in (0, 1, 2, 5, -1, -3):
        close(vnp.linalg.matrix_power(A, n), np.linalg.matrix_power(A, n), 1e-4)
    close(vnp.linalg.matrix_power(BATCH, 3), np.linalg.matrix_power(BATCH, 3), 1e-4)
    chain = [x[:, 0], x, rng.standard_normal((3, 4)), rng.standard_normal(4)]
    close(vnp.linalg.multi_dot(chain), np.linalg.multi_dot(chain), 1e-5)


def test_eigh_and_svd_gradients():
    a, m = symmetric(4, 4).astype(np.float64), rng.standard_normal((4, 4))
    # eigenvectors up to sign: check products of each column with its first entry
    eig = lambda a: (lambda w, v: (w, v * v[..., :1, :]))(*vnp.linalg.eigh(a))
    vg.test_util.check_grads(eig, (a,), order=1)
    vg.test_util.check_grads(eig, (m,), order=1)          # symmetrized input, both modes
    x = rng.standard_normal((5, 3))
    sv = lambda x: (lambda u, s, vt: (s, u * u[..., :1, :], vt * vt[..., :, :1]))(
        *vnp.linalg.svd(x, full_matrices=False))
    for y in (x, x.T, m):
        vg.test_util.check_grads(sv, (y,), order=1)
    vg.test_util.check_grads(vnp.linalg.pinv, (x,), order=1)
    vg.test_util.check_grads(lambda x: vnp.linalg.norm(x, "nuc"), (x,), order=2)
    # the analytic rules: d w_i = v_i^T da v_i, d s_i = u_i^T da v_i
    w, v = np.linalg.eigh(a)
    close(vg.grad(lambda a: vnp.linalg.eigvalsh(a)[-1])(a), np.outer(v[:, -1], v[:, -1]), 1e-6)
    u, s, vt = np.linalg.svd(x)
    close(vg.grad(lambda x: vnp.linalg.svdvals(x)[0])(x), np.outer(u[:, 0], vt[0]), 1e-6)


@pytest.mark.filterwarnings("error::vkgrad.FallbackWarning")   # all of it on Vulkan
def test_eigh_and_svd_jitted_on_vulkan():
    a, x = symmetric(4, 4), rng.standard_normal((4, 3)).astype(np.float32)
    w, v, s = vg.jit(lambda a, x: (*vnp.linalg.eigh(a), vnp.linalg.svdvals(x)),
                     backend="vulkan")(a, x)
    assert_eigh(a, w, v, 1e-5)
    close(s, np.linalg.svd(x, compute_uv=False), 1e-5)
    g = vg.jit(vg.grad(lambda a: vnp.linalg.eigvalsh(a)[-1] + vnp.linalg.svdvals(a)[0]),
               backend="vulkan")(a)                    # the JVP rules transposed, on Vulkan
    _, v = np.linalg.eigh(a)
    u, _, vt = np.linalg.svd(a)
    close(g, np.outer(v[:, -1], v[:, -1]) + np.outer(u[:, 0], vt[0]), 1e-5)


def test_eigh_and_svd_bad_input():
    with pytest.raises(vg.ShapeError, match="eigh takes square matrices"):
        vnp.linalg.eigh(np.ones((2, 3)))
    with pytest.raises(vg.ArgumentError, match="UPLO is 'L' or 'U'"):
        vnp.linalg.eigh(A, UPLO="X")
    with pytest.raises(vg.ShapeError, match="svd takes matrices"):
        vnp.linalg.svd(np.ones(3))
    with pytest.raises(vg.ArgumentError, match="subset_by_index is not supported"):
        vnp.linalg.svd(A, subset_by_index=(0, 2))
    with pytest.raises(vg.ArgumentError, match="generalized problem"):
        vg.scipy.linalg.eigh(A, A)
    with pytest.raises(vg.ArgumentError, match="n must be an integer"):
        vnp.linalg.matrix_power(A, 0.5)
    with pytest.raises(vg.ShapeError, match=r"cond\(p=1\) takes square matrices"):
        vnp.linalg.cond(np.ones((2, 3)), 1)
    with pytest.raises(vg.ArgumentError, match="give rtol or its alias rcond, not both"):
        vnp.linalg.pinv(A, 1e-3, rcond=1e-3)
    with pytest.raises(vg.ArgumentError, match="at least 2 arrays"):
        vnp.linalg.multi_dot([A])
    with pytest.raises(vg.ArgumentError, match="ord is None, 'fro', 'nuc'"):
        vnp.linalg.norm(A, 3)
    close(vnp.linalg.eigvalsh(np.array([[2, 1], [1, 2]])), [1.0, 3.0])    # ints -> float
    with pytest.raises(AttributeError, match="eigenvalues are complex"):
        vnp.linalg.eig(A)


# --------------------------------------------------- lstsq, cholesky's options, array API names

def test_lstsq_against_numpy():
    a, b = rng.standard_normal((6, 3)).astype(np.float32), rng.standard_normal((6, 2))
    for got, want in zip(vnp.linalg.lstsq(a, b.astype(np.float32)), np.linalg.lstsq(a, b)):
        close(got, want, 1e-5)
    wide = a.T                                   # underdetermined: the least-norm x
    x, resid, rank, s = vnp.linalg.lstsq(wide, b[:3, 0].astype(np.float32))
    close(x, np.linalg.lstsq(wide, b[:3, 0])[0], 1e-5)
    assert resid.shape == (1,) and int(rank) == 3   # JAX's: the residuals always
    deficient = np.concatenate([a, a[:, :1]], 1)
    x, _, rank, _ = vnp.linalg.lstsq(deficient, b.astype(np.float32))
    assert int(rank) == 3 and np.asarray(rank).dtype == np.int32
    close(x, np.linalg.lstsq(deficient, b, rcond=None)[0], 1e-4)
    x = vg.jit(lambda a, b, rcond: vnp.linalg.lstsq(a, b, rcond)[0], backend="numpy")(
        deficient, b.astype(np.float32), np.float32(-1))                 # a traced rcond
    close(x, np.linalg.lstsq(deficient, b, rcond=None)[0], 1e-4)
    vg.test_util.check_grads(lambda a, b: vnp.linalg.lstsq(a, b)[0], (a.astype(np.float64), b),
                             order=1)
    with pytest.raises(vg.ShapeError, match="leading dimensions"):
        vnp.linalg.lstsq(a, b[:5])
    with pytest.raises(vg.ArgumentError, match="numpy_resid=True"):
        vnp.linalg.lstsq(a, b, numpy_resid=True)


def test_cholesky_options_and_array_api_names():
    spd = (A @ A.T + np.eye(5)).astype(np.float32)
    close(vnp.linalg.cholesky(spd, upper=True), np.linalg.cholesky(spd, upper=True), 1e-5)
    close(vnp.linalg.cholesky(np.tril(spd), symmetrize_input=False), np.linalg.cholesky(spd),
          1e-5)
    g = vg.grad(lambda a: vnp.sum(vnp.linalg.cholesky(a) * np.arange(25.0).reshape(5, 5)))(spd)
    close(g, np.asarray(g).T, 1e-6)                                     # symmetrized input
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    close(vnp.linalg.vector_norm(x), np.linalg.vector_norm(x), 1e-5)
    close(vnp.linalg.vector_norm(x, axis=(0, 2), ord=1, keepdims=True),
          np.linalg.vector_norm(x, axis=(0, 2), ord=1, keepdims=True), 1e-5)
    for ord in ("fro", "nuc", 2, 1):
        close(vnp.linalg.matrix_norm(x, ord=ord), np.linalg.matrix_norm(x, ord=ord), 1e-5)
    close(vnp.linalg.vecdot(x, x), np.linalg.vecdot(x, x), 1e-5)
    close(vnp.linalg.diagonal(x, offset=1), np.linalg.diagonal(x, offset=1))
    close(vnp.linalg.trace(x), np.linalg.trace(x), 1e-5)
    close(vnp.linalg.matrix_transpose(x), np.linalg.matrix_transpose(x))
    xt = x.swapaxes(-1, -2)
    close(vnp.linalg.matmul(x, xt), np.linalg.matmul(x, xt), 1e-5)
    y = rng.standard_normal((3, 4, 2)).astype(np.float32)
    close(vnp.linalg.tensordot(x, y, axes=2), np.linalg.tensordot(x, y, axes=2), 1e-4)
    close(vnp.linalg.outer(x[0, 0], x[0, 1]), np.linalg.outer(x[0, 0], x[0, 1]))
    close(vnp.linalg.cross(x[..., :3], x[..., 1:]), np.linalg.cross(x[..., :3], x[..., 1:]), 1e-5)
    with pytest.raises(vg.ShapeError, match="linalg.outer takes 1-D vectors"):
        vnp.linalg.outer(x, x)


def test_tensorinv_and_tensorsolve_against_numpy():
    a = (rng.standard_normal((2, 3, 6)) + 3 * np.eye(6).reshape(2, 3, 6)).astype(np.float32)
    close(vnp.linalg.tensorinv(a, ind=2), np.linalg.tensorinv(a, ind=2), 1e-4)
    b = rng.standard_normal((2, 3)).astype(np.float32)
    close(vnp.linalg.tensorsolve(a, b), np.linalg.tensorsolve(a, b), 1e-4)
    moved = np.moveaxis(a, -1, 0)                    # axes: a's axes moved to the end first
    close(vnp.linalg.tensorsolve(moved, b, axes=(0,)), np.linalg.tensorsolve(moved, b, axes=(0,)),
          1e-4)
    with pytest.raises(vg.ShapeError, match="the product of the first ind dimensions"):
        vnp.linalg.tensorinv(a, ind=1)
    with pytest.raises(vg.ShapeError, match="tensorsolve: a f32"):
        vnp.linalg.tensorsolve(a, b[:1])


# -------------------------------------------------------------------------- expm and polar

@pytest.mark.parametrize("scale", [0.1, 1.0, 3.0, 30.0])   # each Pade degree, then squarings
def test_expm_against_scipy(scale):
    a = (scale * rng.standard_normal((4, 4)) / 2).astype(np.float32)
    want = sl.expm(a.astype(np.float64))
    close(np.asarray(vg.scipy.linalg.expm(a)) / np.abs(want).max(), want / np.abs(want).max(),
          2e-5)


def test_expm_batched_triangular_float64_and_gradient(x64):
    b = rng.standard_normal((2, 3, 3)).astype(np.float32)
    close(vg.scipy.linalg.expm(b), sl.expm(b.astype(np.float64)), 2e-5)
    u = np.triu(rng.standard_normal((4, 4))).astype(np.float32)
    close(vg.scipy.linalg.expm(u, upper_triangular=True), sl.expm(u.astype(np.float64)), 2e-5)
    for scale in (0.01, 0.2, 0.5, 1.5, 12.0):                             # float64's degrees
        a = scale * rng.standard_normal((4, 4)) / 4
        got = vg.scipy.linalg.expm(a)
        assert np.asarray(got).dtype == np.float64
        np.testing.assert_allclose(got, sl.expm(a), rtol=1e-12, atol=1e-12 * np.abs(got).max())
    assert np.isnan(vg.scipy.linalg.expm(np.full((2, 2), 1e6))).all()    # past max_squarings
    vg.test_util.check_grads(vg.scipy.linalg.expm, (rng.standard_normal((3, 3)),), order=1)
    with pytest.raises(vg.ShapeError, match="expm takes square matrices"):
        vg.scipy.linalg.expm(np.ones((2, 3)))


def test_polar_against_scipy():
    x = rng.standard_normal((5, 3)).astype(np.float32)
    for side, a in (("right", x), ("left", x.T)):
        for got, want in zip(vg.scipy.linalg.polar(a, side), sl.polar(a, side)):
            close(got, want, 1e-5)
    vg.test_util.check_grads(lambda a: vg.scipy.linalg.polar(a)[0], (x.astype(np.float64),),
                             order=1)
    with pytest.raises(vg.ArgumentError, match="side is 'right' or 'left'"):
        vg.scipy.linalg.polar(x, "up")


def test_factorizations_of_n_24_plan_within_lavapipes_32_buffers():
    """Each column step keeps its matrices in memory, so no kernel binds more buffers as n
    grows (recomputed, step j's bound 2j + 1: lavapipe refused n = 16 and ran it on numpy)."""
    from vkgrad.pipeline import Options, run_stages
    from vkgrad.target import Target

    a = well_conditioned(24, 24)
    prog = vg.make_ir(lambda a: (vnp.linalg.solve(a, a), vnp.linalg.qr(a), vnp.linalg.slogdet(a),
                                 vg.scipy.linalg.cho_solve((vnp.linalg.cholesky(a @ a.T), True),
                                                           a)))(a)
    plan = run_stages(prog, "plan", Options(target=Target.lavapipe()))["plan"]   # no Unsupported
    assert len(plan.steps) > 24


@pytest.mark.parametrize("name, n", [("det", 8), ("solve", 8), ("cholesky", 8),
                                     ("cholesky", 16)])
def test_gradients_plan_within_lavapipes_32_buffers(name, n):
    """The factorizations' saved steps keep their cotangents in memory too (save's
    `cotangent`), so the gradients' kernels bind few buffers: planned for lavapipe (32 a
    kernel) they lower, where a backward that recomputed the cotangent chain bound 33-44 at
    n = 8 and ran on the interpreter. Planned only (no device): lavapipe's compile of these
    programs takes a minute."""
    fn, shapes = {"det": (vnp.linalg.det, [(n, n)]),
                  "solve": (lambda a, b: vnp.sum(vnp.linalg.solve(a, b)), [(n, n), (n,)]),
                  "cholesky": (lambda a: vnp.sum(vnp.linalg.cholesky(a)), [(n, n)])}[name]
    target = Target.lavapipe()
    program = optimize(vg.make_ir(vg.grad(fn))(*[ShapeDtype(s, "f32") for s in shapes]),
                       final=True)
    lower(fuse_program(program, target=target), target)       # raises Unsupported past 32
