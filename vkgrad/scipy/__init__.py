"""vg.scipy: JAX's jax.scipy names over vkgrad.numpy (compositions, so every function is
traceable, jit-able and differentiable).

    special    logsumexp, erf, erfc, erfinv, expit, logit, xlogy, xlog1py, gammaln, digamma,
               gamma, gammasgn, rgamma, beta, betaln, multigammaln, zeta, polygamma, i0, i0e,
               i1, i1e, ndtr, ndtri, log_ndtr, j0, j1, y0, y1, gammainc, gammaincc, betainc,
               and the rest of jax.scipy.special (erfcx, dawsn, fresnel, sici, expi, expn,
               hyp1f1, hyp2f1, bessel_jn, comb, poch, softmax, ...; sph_harm_y and wofz
               refused: complex) with scipy's jn, yn, gammaincinv, betaincinv
    stats      norm (pdf, logpdf, cdf, logcdf, sf, logsf, ppf); t, gamma, beta, chi2,
               dirichlet, multivariate_normal (pdf, logpdf); poisson (pmf, logpmf)
    signal     convolve, correlate (N-D; full, same, valid)
    linalg     cholesky, cho_factor, cho_solve, solve_triangular, lu, lu_factor, lu_solve, det,
               inv, solve, qr, eigh, svd, polar, expm
    integrate  trapezoid
"""

from vkgrad.scipy import integrate, linalg, signal, special, stats  # noqa: F401

__all__ = ["integrate", "linalg", "signal", "special", "stats"]
