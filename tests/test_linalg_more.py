"""vg.scipy.linalg's special matrices (toeplitz, hankel, ..., pascal, hadamard), hessenberg,
the real Schur form, sqrtm, expm_frechet, solve_sylvester, eigh_tridiagonal, funm,
qr_multiply, and vg.scipy.signal's convolve2d, correlate2d, fftconvolve and detrend: values
against scipy (float32 tolerances, on the interpreter: eager calls), dtypes as JAX 0.10.2's,
gradients by check_grads, one small jit on Vulkan, the refusals (complex results) and bad
input."""

import numpy as np
import pytest

import vkgrad as vg
import vkgrad.numpy as vnp
from vkgrad.errors import ArgumentError, DTypeError, ShapeError

sl = pytest.importorskip("scipy.linalg")
ss = pytest.importorskip("scipy.signal")
L, S = vg.scipy.linalg, vg.scipy.signal
rng = np.random.default_rng(11)


def close(got, want, tol=1e-5):
    got = np.asarray(got)
    assert got.shape == np.shape(want)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def normal(*shape):
    return rng.standard_normal(shape).astype(np.float32)


# ------------------------------------------------------------------------- special matrices

@pytest.mark.parametrize("name,args", [
    ("toeplitz", ([1, 2, 3], [9, 5, 6, 7])), ("toeplitz", ([1.5, 2, 3],)),
    ("hankel", ([1, 2, 3], [9, 5, 6, 7])), ("hankel", ([1, 2, 3],)),
    ("circulant", ([1, 2, 3, 4],)), ("leslie", ([0.1, 2, 1, 0.1], [0.2, 0.8, 0.7])),
    ("leslie", ([1, 2], [3])), ("companion", ([1, -10, 31, -30],)),
    ("fiedler", ([1, 4, 12, 45, 77],)), ("fiedler_companion", ([1.0, 2, 3, 4, 5, 6],)),
    ("fiedler_companion", ([2.0, 2, 3, 4, 5],)), ("fiedler_companion", ([2.0, 3.0],)),
    ("block_diag", (3.0, [1.0, 2.0], np.ones((2, 2)))), ("block_diag", ([[1, 2]], [[3], [4]])),
])
def test_special_matrices_against_scipy(name, args):
    got = getattr(L, name)(*args)
    close(got, getattr(sl, name)(*args))


def test_special_matrices_keep_jax_dtypes():
    # JAX 0.10.2 (x64 off): the integer constructors keep int32, companion and
    # fiedler_companion are inexact, hadamard is int32 by default, pascal always float32
    assert L.toeplitz([1, 2]).dtype == np.int32 and L.hankel([1, 2]).dtype == np.int32
    assert L.circulant([1, 2]).dtype == np.int32 and L.fiedler([1, 2]).dtype == np.int32
    assert L.leslie([1, 2], [1]).dtype == np.int32
    assert L.convolution_matrix([1, 2], 3).dtype == np.int32
    assert L.companion([1, 2, 3]).dtype == np.float32
    assert L.fiedler_companion([1, 2, 3]).dtype == np.float32
    assert L.hadamard(2).dtype == np.int32 and L.hadamard(2, np.float32).dtype == np.float32
    assert L.block_diag(np.int32([1]), np.float32([[2.0]])).dtype == np.float32
    assert L.block_diag().shape == (1, 0) and L.helmert(1).shape == (0, 1)
    assert L.fiedler_companion([2.0]).shape == (0, 0)
    for f in (L.pascal, L.invpascal, L.hilbert, L.invhilbert, L.helmert):
        assert f(3).dtype == np.float32


def test_batched_constructors_broadcast_their_vectors():
    c, r = np.arange(6).reshape(2, 3), np.array([[9, 7, 8, 5]])
    got = np.asarray(L.toeplitz(c, r))
    assert got.shape == (2, 3, 4)
    for k in range(2):
        np.testing.assert_array_equal(got[k], sl.toeplitz(c[k], r[0]))
    got = np.asarray(L.hankel([1, 2, 3], [[4, 5], [6, 7]]))   # JAX's documented example
    np.testing.assert_array_equal(got, [[[1, 2], [2, 3], [3, 5]], [[1, 2], [2, 3], [3, 7]]])
    np.testing.assert_array_equal(L.circulant(np.arange(6).reshape(2, 3))[1],
                                  sl.circulant([3, 4, 5]))


@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("a,n", [([1.0, 2, 3, 4], 3), ([1.0, 2], 4), ([1, 2, 3], 3)])
def test_convolution_matrix_against_scipy(a, n, mode):
    m = L.convolution_matrix(a, n, mode)
    close(m, sl.convolution_matrix(a, n, mode))
    v = np.arange(1.0, n + 1)
    close(np.asarray(m) @ v, np.convolve(a, v, mode))


@pytest.mark.parametrize("kind", [None, "lower", "upper"])
def test_pascal_hilbert_helmert_hadamard_against_scipy(kind):
    close(L.pascal(6, kind), sl.pascal(6, kind or "symmetric"))       # exact integers
    close(L.invpascal(5, kind), sl.invpascal(5, kind or "symmetric"))
    close(L.hilbert(4), sl.hilbert(4))
    np.testing.assert_allclose(L.invhilbert(5), sl.invhilbert(5), rtol=1e-6)
    close(L.helmert(5), sl.helmert(5))
    close(L.helmert(4, full=True), sl.helmert(4, full=True))
    np.testing.assert_array_equal(L.hadamard(8), sl.hadamard(8))


def test_toeplitz_gradient():
    c, r = normal(3), normal(4)
    vg.test_util.check_grads(lambda c, r: L.toeplitz(c, r) ** 2, (c, r), order=1)
    # r[0] is not read: its gradient is 0
    g = vg.grad(lambda r: vnp.sum(L.toeplitz(c, r)))(r)
    np.testing.assert_array_equal(np.asarray(g), [0, 3, 2, 1])


# ------------------------------------------------------------------- factorizations and functions

def test_hessenberg_is_scipys():
    a = normal(5, 5)
    h, q = L.hessenberg(a, calc_q=True)
    want_h, want_q = sl.hessenberg(a, calc_q=True)
    close(h, want_h)
    close(q, want_q)
    assert np.all(np.tril(np.asarray(L.hessenberg(a)), -2) == 0)


def _check_real_schur(a, t, z):
    t, z = np.asarray(t, np.float64), np.asarray(z, np.float64)
    n = a.shape[-1]
    close(z @ t @ z.T, a, 2e-5)
    close(z.T @ z, np.eye(n), 2e-6)
    assert np.all(np.tril(t, -2) == 0)
    sub = np.diag(t, -1) != 0
    assert not np.any(sub[1:] & sub[:-1])                   # 2x2 blocks, apart
    for k in np.flatnonzero(sub):                            # each a complex pair
        b = t[k:k + 2, k:k + 2]
        assert (b[0, 0] - b[1, 1]) ** 2 / 4 + b[0, 1] * b[1, 0] < 0
    got = np.sort_complex(np.linalg.eigvals(t))
    np.testing.assert_allclose(got, np.sort_complex(sl.eigvals(a.astype(np.float64))), atol=1e-4)


@pytest.mark.parametrize("n", [2, 3, 5, 6])
def test_schur_real_form(n):
    for _ in range(2):
        a = normal(n, n)
        _check_real_schur(a, *L.schur(a))


def test_schur_of_a_batch_and_of_symmetric_and_rotation_matrices():
    batch = normal(2, 4, 4)
    t, z = L.schur(batch)
    for k in range(2):
        _check_real_schur(batch[k], t[k], z[k])
    s = normal(4, 4)
    s = s + s.T
    t, _ = L.schur(s)
    assert np.all(np.tril(np.asarray(t), -1) == 0)           # real eigenvalues: triangular
    perm = np.float32([[0, 0, 1], [1, 0, 0], [0, 1, 0]])     # |eigenvalues| all 1: shifts stall
    _check_real_schur(perm, *L.schur(perm))


def test_sqrtm_real_principal_root():
    a = normal(4, 4)
    for m in (a @ a.T + np.eye(4, dtype=np.float32), a + 4 * np.eye(4, dtype=np.float32),
              np.float32([[0, -1], [1, 0]])):                # the last: complex eigenvalues
        close(L.sqrtm(m), sl.sqrtm(m.astype(np.float64)).real, 1e-4)
    # no real principal root (a negative eigenvalue), or a singular matrix: nan
    assert np.all(np.isnan(np.asarray(L.sqrtm(np.diag(np.float32([-1.0, 2, 3]))))))
    assert np.all(np.isnan(np.asarray(L.sqrtm(np.zeros((2, 2), np.float32)))))
    b = normal(3, 3)
    batch = np.stack([b @ b.T + np.eye(3, dtype=np.float32), np.diag(np.float32([1, -2, 3]))])
    got = np.asarray(L.sqrtm(batch))                          # nan in the second only
    close(got[0] @ got[0], batch[0], 1e-4)
    assert np.all(np.isnan(got[1]))


def test_sqrtm_gradient():
    a = normal(2, 2)
    spd = a @ a.T + 2 * np.eye(2, dtype=np.float32)
    vg.test_util.check_grads(L.sqrtm, (spd,), order=1, modes=("rev",), atol=1e-4, rtol=1e-3)


def test_expm_frechet_against_scipy_and_its_gradient():
    a, e = 0.5 * normal(4, 4), normal(4, 4)
    ea, fr = L.expm_frechet(a, e)
    want_ea, want_fr = sl.expm_frechet(a.astype(np.float64), e.astype(np.float64))
    close(ea, want_ea, 1e-4)
    close(fr, want_fr, 1e-4)
    close(L.expm_frechet(a, e, compute_expm=False), want_fr, 1e-4)
    vg.test_util.check_grads(lambda a, e: L.expm_frechet(a, e, compute_expm=False),
                             (0.5 * a, e), order=1, modes=("rev",), atol=1e-4, rtol=1e-3)
    with pytest.raises(ShapeError, match="same shape"):
        L.expm_frechet(a, e[:3, :3])


def test_solve_sylvester_against_scipy():
    a, b, c = normal(3, 3) + 3 * np.eye(3, dtype=np.float32), normal(4, 4), normal(3, 4)
    b = b + 3 * np.eye(4, dtype=np.float32)
    close(L.solve_sylvester(a, b, c), sl.solve_sylvester(a, b, c), 1e-4)
    close(L.solve_sylvester(a, b, c, method="eigen"), sl.solve_sylvester(a, b, c), 1e-4)
    batch = np.stack([c, 2 * c])
    got = np.asarray(L.solve_sylvester(a, b, batch))
    close(got[1], sl.solve_sylvester(a, b, 2 * c), 1e-4)
    # A and -B share an eigenvalue: no unique solution, nan (JAX's)
    eye = np.eye(2, dtype=np.float32)
    assert np.all(np.isnan(np.asarray(L.solve_sylvester(eye, -eye, np.ones((2, 2), np.float32)))))
    with pytest.raises(ShapeError, match="incompatible"):
        L.solve_sylvester(a, b, c.T)


def test_eigh_tridiagonal_against_scipy():
    d, e = np.float32([1, 2, 3, 4, 5]), np.float32([1, -1, 0.5, 2])
    close(L.eigh_tridiagonal(d, e, eigvals_only=True), sl.eigh_tridiagonal(d, e, True), 2e-5)
    w, v = L.eigh_tridiagonal(d, e)
    want_w, want_v = sl.eigh_tridiagonal(d, e)
    close(w, want_w, 2e-5)
    close(np.abs(np.asarray(v)), np.abs(want_v), 2e-5)                # up to sign
    close(L.eigh_tridiagonal(d, e, eigvals_only=True, select="i", select_range=(1, 3)),
          want_w[1:4], 2e-5)
    with pytest.raises(DTypeError):
        L.eigh_tridiagonal(d, e.astype(np.int32))
    with pytest.raises(ArgumentError, match="select='v'"):
        L.eigh_tridiagonal(d, e, select="v", select_range=(0.0, 1.0))


def test_funm_real_eigenvalues():
    a = normal(4, 4)
    s = a + a.T
    close(L.funm(s, vnp.exp), sl.expm(s.astype(np.float64)), 1e-3)
    close(L.funm(s, lambda x: vnp.sin(x) + 2 * vnp.cos(x)),
          sl.funm(s.astype(np.float64), lambda x: np.sin(x) + 2 * np.cos(x)).real, 1e-3)
    f, err = L.funm(s, vnp.exp, disp=False)
    assert 0 < float(err) < 1e-3
    # complex eigenvalues (a 2x2 block in the real Schur form): nan, not a complex result
    assert np.all(np.isnan(np.asarray(L.funm(np.float32([[0, -1], [1, 0]]), vnp.exp))))


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4)])
def test_qr_multiply_against_scipy(shape):
    a = normal(*shape)
    m, n = shape
    k = min(m, n)
    for mode, c in (("right", normal(2, m)), ("left", normal(k, 2)), ("right", normal(m)),
                    ("left", normal(k))):
        got, r = L.qr_multiply(a, c, mode=mode)
        want, want_r = sl.qr_multiply(a, c, mode=mode)
        close(got, want, 2e-5)
        close(r, want_r, 2e-5)
    with pytest.raises(ArgumentError, match="pivoting"):
        L.qr_multiply(a, normal(2, m), pivoting=True)


def test_refusals_name_the_complex_result():
    a = normal(3, 3)
    for call, name in ((lambda: L.dft(4), "dft"), (lambda: L.rsf2csf(a, a), "rsf2csf"),
                       (lambda: L.schur(a, output="complex"), "schur"),
                       (lambda: S.stft(np.ones(8)), "stft"),
                       (lambda: S.istft(np.ones((3, 4))), "istft"),
                       (lambda: S.welch(np.ones(8)), "welch"),
                       (lambda: S.csd(np.ones(8), np.ones(8)), "csd")):
        with pytest.raises(DTypeError, match=f"{name}.*complex"):
            call()


# ------------------------------------------------------------------------------------ signal

SHAPES = [((5, 6), (2, 3)), ((4, 4), (3, 2)), ((2, 3), (4, 5)), ((3, 3), (3, 3)),
          ((2, 5), (3, 2))]


@pytest.mark.parametrize("sa,sb", SHAPES)
def test_convolve2d_correlate2d_fftconvolve_against_scipy(sa, sb):
    a, b = normal(*sa), normal(*sb)
    for mode in ("full", "same", "valid"):
        if mode == "valid" and not (np.all(np.greater_equal(sa, sb)) or
                                    np.all(np.less_equal(sa, sb))):
            with pytest.raises(ShapeError):
                S.convolve2d(a, b, mode)
            continue
        close(S.convolve2d(a, b, mode), ss.convolve2d(a, b, mode))
        close(S.correlate2d(a, b, mode), ss.correlate2d(a, b, mode))   # even sizes: scipy's centre
        close(S.fftconvolve(a, b, mode), ss.fftconvolve(a, b, mode), 1e-4)


def test_fftconvolve_axes_and_2d_errors():
    a, b = normal(3, 7), normal(3, 4)
    close(S.fftconvolve(a, b, "same", axes=1), ss.fftconvolve(a, b, "same", axes=1), 1e-4)
    close(S.fftconvolve(a, b, axes=[-1]), ss.fftconvolve(a, b, axes=[-1]), 1e-4)
    with pytest.raises(ShapeError, match="not convolved"):
        S.fftconvolve(a, normal(2, 4), axes=1)
    with pytest.raises(ShapeError, match="2-D"):
        S.convolve2d(np.ones(3), np.ones(2))
    with pytest.raises(ArgumentError, match="boundary='fill'"):
        S.correlate2d(a, b, boundary="wrap")


def test_convolve2d_gradient():
    a, b = normal(4, 5), normal(2, 3)
    vg.test_util.check_grads(lambda a, b: S.convolve2d(a, b, "same"), (a, b), order=1)
    vg.test_util.check_grads(lambda a, b: S.correlate2d(a, b, "full"), (a, b), order=1,
                             modes=("rev",))


def test_detrend_against_scipy():
    x = normal(4, 9)
    close(S.detrend(x), ss.detrend(x))
    close(S.detrend(x, axis=0, type="constant"), ss.detrend(x, axis=0, type="constant"))
    close(S.detrend(x, bp=[3, 5]), ss.detrend(x, bp=[3, 5]))
    close(S.detrend(x, bp=8), ss.detrend(x, bp=8))          # a one-point piece
    got = S.detrend(np.arange(6) * 2 + 1)                    # ints: inexact, as JAX's
    assert got.dtype == np.float32
    close(got, np.zeros(6))
    with pytest.raises(ArgumentError, match="breakpoints"):
        S.detrend(x, bp=[12])


def test_a_jit_on_vulkan():
    c, k = normal(4), normal(2, 2)
    f = vg.jit(lambda c, k: (L.toeplitz(c), S.convolve2d(L.hankel(c[:3]), k, "valid")),
               backend="vulkan")
    t, conv = f(c, k)
    close(t, sl.toeplitz(c))
    close(conv, ss.convolve2d(sl.hankel(c[:3]), k, "valid"))
