"""vg.scipy: JAX's jax.scipy names over vkgrad.numpy (compositions, so every function is
traceable, jit-able and differentiable).

    special    logsumexp, erf, erfc, erfinv, expit, logit, xlogy, xlog1py, gammaln, digamma,
               gamma, gammasgn, rgamma, beta, betaln, multigammaln, zeta, polygamma, i0, i0e,
               i1, i1e, ndtr, ndtri, log_ndtr, j0, j1, y0, y1, gammainc, gammaincc, betainc,
               and the rest of jax.scipy.special (erfcx, dawsn, fresnel, sici, expi, expn,
               hyp1f1, hyp2f1, bessel_jn, comb, poch, softmax, ...; sph_harm_y and wofz
               refused: complex) with scipy's jn, yn, gammaincinv, betaincinv
    stats      jax.scipy.stats' modules, each with JAX's functions: bernoulli, beta,
               betabinom, binom, cauchy, chi2, dirichlet, expon, gamma, gennorm, geom,
               gumbel_l, gumbel_r, laplace, logistic, multinomial, multivariate_normal,
               nbinom, norm, pareto, poisson, t, truncnorm, uniform, vonmises, wrapcauchy;
               gaussian_kde; mode, rankdata, sem
    signal     convolve, correlate (N-D; full, same, valid), convolve2d, correlate2d,
               fftconvolve (direct), detrend
    linalg     cholesky, cho_factor, cho_solve, solve_triangular, lu, lu_factor, lu_solve, det,
               inv, solve, qr, qr_multiply, eigh, eigh_tridiagonal, svd, polar, expm,
               expm_frechet, hessenberg, schur (real), sqrtm (real), funm (real eigenvalues),
               solve_sylvester, and the special matrices (toeplitz, hankel, circulant, ...)
    integrate  trapezoid
"""

from vkgrad.scipy import integrate, linalg, signal, special, stats  # noqa: F401

__all__ = ["integrate", "linalg", "signal", "special", "stats"]
