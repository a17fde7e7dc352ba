"""The chi-squared distribution (jax.scipy.stats.chi2): a gamma of shape df / 2, scale 2."""

from vkgrad.scipy.stats import gamma

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "sf"]


def _of_gamma(name):
    """chi2's `name`: gamma's at shape df / 2 and twice the scale."""
    of = getattr(gamma, name)

    def f(x, df, loc=0.0, scale=1.0):
        return of(x, df / 2.0, loc, 2.0 * scale)

    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"chi2.{name}(x, df, loc, scale): gamma.{name}(x, df / 2, loc, 2 scale)."
    return f


logpdf, pdf, cdf, logcdf, sf, logsf = map(_of_gamma, ("logpdf", "pdf", "cdf", "logcdf", "sf",
                                                      "logsf"))
