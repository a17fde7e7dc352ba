"""vg.scipy.special: jax.scipy.special's functions, each composed of vkgrad.numpy ops (so each
traces, fuses, runs under jit and is differentiable).

    _base.py         logsumexp, the error function and normal distribution (erf, erfc, erfinv,
                     ndtr, ndtri, log_ndtr), expit, logit, xlogy, xlog1py, the gamma family
                     (gammaln, digamma, gamma, gammasgn, rgamma, beta, betaln, multigammaln),
                     zeta, polygamma, the incomplete gamma and beta functions, i0 i0e i1 i1e,
                     j0 j1 y0 y1: their approximations and errors in its docstring
    _elementary.py   entr, rel_entr, kl_div, boxcox, boxcox1p, factorial, comb, poch, loggamma,
                     bernoulli, softmax, log_softmax, erfcx, dawsn, fresnel, owens_t, exp1,
                     expi, expn, sici, spence
    _bessel.py       bessel_jn, jn, yn (integer orders by recurrence)
    _hyper.py        hyp1f1, hyp2f1, gammaincinv, betaincinv; sph_harm_y and wofz refused
                     (complex results)
"""

from vkgrad.scipy.special import _base, _bessel, _elementary, _hyper
from vkgrad.scipy.special._base import *  # noqa: F401,F403
# helpers vg.scipy.stats builds on
from vkgrad.scipy.special._base import _betainc, _broadcast_float, _float, _jvp_rule  # noqa: F401
from vkgrad.scipy.special._bessel import *  # noqa: F401,F403
from vkgrad.scipy.special._elementary import *  # noqa: F401,F403
from vkgrad.scipy.special._hyper import *  # noqa: F401,F403

__all__ = sorted(_base.__all__ + _bessel.__all__ + _elementary.__all__ + _hyper.__all__)
