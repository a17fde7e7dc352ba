"""vg.scipy.special's entropies, Box-Cox, combinatorics, softmax, and the error-function and
integral families beyond erf (erfcx, dawsn, fresnel, owens_t, exp1, expi, expn, sici, spence):
compositions of vnp ops, float32-accurate (errors against scipy in tests/test_special_more.py).

    erfcx        Numerical Recipes' erfcc fit without its exp(-x^2): erfcx(x) = t exp(P(t)) for
                 x >= 0 (relative error < 1.2e-7 in exact arithmetic, at every x: no overflow,
                 no exp(x^2) erfc(x) cancellation), 2 exp(x^2) - erfcx(-x) below 0
    dawsn        Cody, Paciorek and Thacher's rational functions (JAX's, scipy's)
    fresnel      Cephes' single-precision fresnlf (JAX's float32 path)
    sici, spence Cephes' rational functions (JAX's)
    exp1, expn   the series below x = 1, the continued fraction (Lentz, fixed steps) above it
    expi         its series below x = 20, the asymptotic series beyond; -E1(-x) below 0
    owens_t      JAX's 13-point quadrature (Patefield and Tandy's method T5)
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as _np

import vkgrad.numpy as vnp
from vkgrad.errors import ArgumentError
from vkgrad.numpy.util import horner, nonnegative_int, normalize_axes
from vkgrad.scipy.special._base import (_ERFC_P, _broadcast_float, _float, _lentz, digamma, erf,
                                        erfc, gammaln, gammasgn, xlogy)
from vkgrad.tracer.core import user_source
from vkgrad.transforms import custom_jvp

_EULER = 0.57721566490153286061
_SQRT_PI = math.sqrt(math.pi)


# ------------------------------------------------------------------ entropies and Box-Cox

def _xlogx(x):
    return xlogy(x, x)


def entr(x):
    """-x log(x) for x > 0, 0 at 0, -inf below (jax.scipy.special.entr)."""
    x = _float(x)
    return vnp.where(x < 0, -math.inf, -_xlogx(x))


def rel_entr(p, q):
    """p log(p / q) for p, q > 0; 0 where p == 0 and q >= 0; inf otherwise."""
    p, q = _broadcast_float(p, q)
    both = (p > 0) & (q > 0)
    sp, sq = vnp.where(both, p, 1.0), vnp.where(both, q, 1.0)
    out = _xlogx(sp) - xlogy(sp, sq)
    return vnp.where(both, out, vnp.where((p == 0) & (q >= 0), 0.0, math.inf))


def kl_div(p, q):
    """rel_entr(p, q) - p + q (scipy's kl_div: inf outside p, q >= 0)."""
    p, q = _broadcast_float(p, q)
    return rel_entr(p, q) - p + q


def _boxcox_of_log(log_x, lmbda):
    zero = lmbda == 0
    safe = vnp.where(zero, 1.0, lmbda)
    return vnp.where(zero, log_x, vnp.expm1(safe * log_x) / safe)


def boxcox(x, lmbda):
    """(x^lmbda - 1) / lmbda, log(x) at lmbda = 0, as expm1(lmbda log x) / lmbda (JAX's):
    nan for x < 0."""
    x, lmbda = _broadcast_float(x, lmbda)
    return _boxcox_of_log(vnp.log(x), lmbda)


def boxcox1p(x, lmbda):
    """boxcox of 1 + x, from log1p(x)."""
    x, lmbda = _broadcast_float(x, lmbda)
    return _boxcox_of_log(vnp.log1p(x), lmbda)


# ------------------------------------------------------------------------- combinatorics

def factorial(n, exact: bool = False):
    """n! as exp(gammaln(n + 1)), 0 for n < 0 (jax.scipy.special.factorial; exact=True, an
    integer result, is refused as JAX refuses it)."""
    if exact:
        raise ArgumentError("factorial: exact=True is not supported (JAX's neither: integers "
                            "past 12! overflow int32); use exact=False", source=user_source())
    n = _float(n)
    return vnp.where(n < 0, 0.0, vnp.exp(gammaln(n + 1.0)))


def comb(N, k, *, repetition: bool = False):
    """N choose k as exp(gammaln(N + 1) - gammaln(k + 1) - gammaln(N - k + 1)), 0 unless
    0 <= k <= N (jax.scipy.special.comb: no `exact`); repetition: comb(N + k - 1, k)."""
    N, k = _broadcast_float(N, k)
    if repetition:
        return vnp.where((k == 0) & (N >= 0), 1.0, comb(N + k - 1.0, k))
    ok = (k <= N) & (N >= 0) & (k >= 0)
    sn, sk = vnp.where(ok, N, 0.0), vnp.where(ok, k, 0.0)
    out = vnp.exp(gammaln(sn + 1.0) - gammaln(sk + 1.0) - gammaln(sn - sk + 1.0))
    return vnp.where(ok, out, 0.0)


def _gamma_pole(x):
    return (x <= 0) & (x == vnp.floor(x))


def poch(z, m):
    """The Pochhammer symbol Gamma(z + m) / Gamma(z), 1 where m == 0: the ratio through gammaln
    and the signs (so it does not overflow where both gammas would), 0 where Gamma(z) has a
    pole and Gamma(z + m) not."""
    z, m = _broadcast_float(z, m)
    zm = z + m
    ratio = gammasgn(zm) * gammasgn(z) * vnp.exp(gammaln(zm) - gammaln(z))
    out = vnp.where(_gamma_pole(z) & ~_gamma_pole(zm), 0.0, ratio)
    return vnp.where(m == 0, 1.0, out)


def loggamma(x):
    """The principal branch of log Gamma for real x: gammaln(x) for x > 0, nan elsewhere
    (jax.scipy.special.loggamma's real case; complex results are not computed)."""
    x = _float(x)
    return vnp.where(x > 0, gammaln(vnp.where(x > 0, x, 1.0)), math.nan)


def _bernoulli_fractions(n: int) -> list:
    """B_0 .. B_n exactly (the Akiyama-Tanigawa algorithm), B_1 = -1/2."""
    out, a = [], []
    for m in range(n + 1):
        a.append(Fraction(1, m + 1))
        for j in range(m, 0, -1):
            a[j - 1] = j * (a[j - 1] - a[j])
        out.append(a[0])
    if n >= 1:
        out[1] = Fraction(-1, 2)
    return out


def _to_float(f: Fraction) -> float:
    try:
        return float(f)
    except OverflowError:
        return math.copysign(math.inf, f)


def bernoulli(n):
    """The Bernoulli numbers B_0 .. B_n (n a concrete int), B_1 = -1/2 (jax.scipy.special's
    and scipy's convention): computed exactly at trace time, rounded to float32 (inf past
    B_~64 in magnitude)."""
    n = nonnegative_int(n, "bernoulli", "n")
    return vnp.asarray(_np.array([_to_float(b) for b in _bernoulli_fractions(n)], _np.float32))


# ------------------------------------------------------------------------------- softmax

def _over_axes(fn, x, axis):
    """fn(x, axis=-1) over the axes `axis` (None: all) taken together: moved last and joined."""
    x = _float(x)
    if isinstance(axis, int):
        return fn(x, axis=axis)
    axes = normalize_axes(axis, x.ndim)
    rest = [i for i in range(x.ndim) if i not in axes]
    moved = vnp.transpose(x, rest + list(axes))
    lead = moved.shape[:len(rest)]
    out = fn(vnp.reshape(moved, lead + (-1,)), axis=-1)
    out = vnp.reshape(out, moved.shape)
    return vnp.transpose(out, list(_np.argsort(rest + list(axes))))


def softmax(x, /, *, axis=None):
    """exp(x) / sum(exp(x)) over axis (an int, a tuple, or None for all axes: scipy's and
    jax.scipy.special's default; jax.nn.softmax's is -1)."""
    return _over_axes(vnp.softmax, x, axis)


def log_softmax(x, /, *, axis=None):
    """x - logsumexp(x) over axis (None: all axes, as jax.scipy.special.log_softmax)."""
    return _over_axes(vnp.log_softmax, x, axis)


# --------------------------------------------------------------------------------- erfcx

def _erfcx_pos(z):
    """erfcx(z) for z >= 0: erfc's fit t exp(-z^2 + P(t)) without the exp(-z^2)."""
    t = 1.0 / (1.0 + 0.5 * z)
    return t * vnp.exp(horner(_ERFC_P, t))


def _exp_square(x):
    """exp(x^2) with x^2 split as hi^2 + (x - hi)(x + hi), hi^2 exact (as _erfc_pos does)."""
    ax = vnp.abs(x)
    hi = vnp.floor(vnp.minimum(ax, 16.0) * 256.0) / 256.0
    return vnp.exp(hi * hi) * vnp.exp((ax - hi) * (ax + hi))


@custom_jvp
def erfcx(x):
    """The scaled complementary error function exp(x^2) erfc(x), accurate at every x (no
    exp(x^2) erfc(x) product: erfc's fit with its exp(-x^2) left out); 2 exp(x^2) - erfcx(-x)
    below 0 (inf past x = -9.4). Its derivative 2 x erfcx(x) - 2 / sqrt(pi)."""
    x = _float(x)
    neg = x < 0
    pos = _erfcx_pos(vnp.where(neg, -x, x))
    return vnp.where(neg, 2.0 * _exp_square(vnp.where(neg, x, 0.0)) - pos, pos)


erfcx.defjvps(lambda t, out, x: t * (2.0 * x * out - 2.0 / _SQRT_PI))


# --------------------------------------------------------------------------------- dawsn

# Cody, Paciorek and Thacher (1970), as JAX's and scipy's: x P(x^2) / Q(x^2) below 3.25, then
# 0.5 / x (1 + t P(t) / Q(t)), t = 1 / x^2, on [3.25, 6.25) and beyond
_DAWSN_AN = (1.13681498971755972054e-11, 8.49262267667473811108e-10, 1.94434204175553054283e-8,
             9.53151741254484363489e-7, 3.07828309874913200438e-6, 3.52513368520288738649e-4,
             -8.50149846724410912031e-4, 4.22618223005546594270e-2, -9.17480371773452345351e-2,
             9.99999999999999994612e-1)
_DAWSN_AD = (2.40372073066762605484e-11, 1.48864681368493396752e-9, 5.21265281010541664570e-8,
             1.27258478273186970203e-6, 2.32490249820789513991e-5, 3.25524741826057911661e-4,
             3.48805814657162590916e-3, 2.79448531198828973716e-2, 1.58874241960120565368e-1,
             5.74918629489320327824e-1, 1.00000000000000000539e0)
_DAWSN_BN = (5.08955156417900903354e-1, -2.44754418142697847934e-1, 9.41512335303534411857e-2,
             -2.18711255142039025206e-2, 3.66207612329569181322e-3, -4.23209114460388756528e-4,
             3.59641304793896631888e-5, -2.14640351719968974225e-6, 9.10010780076391431042e-8,
             -2.40274520828250956942e-9, 3.59233385440928410398e-11)
_DAWSN_BD = (1.0, -6.31839869873368190192e-1, 2.36706788228248691528e-1,
             -5.31806367003223277662e-2, 8.48041718586295374409e-3, -9.47996768486665330168e-4,
             7.81025592944552338085e-5, -4.55875153252442634831e-6, 1.89100358111421846170e-7,
             -4.91324691331920606875e-9, 7.18466403235734541950e-11)
_DAWSN_CN = (-5.90592860534773254987e-1, 6.29235242724368800674e-1, -1.72858975380388136411e-1,
             1.64837047825189632310e-2, -4.86827613020462700845e-4)
_DAWSN_CD = (1.0, -2.69820057197544900361e0, 1.73270799045947845857e0,
             -3.93708582281939493482e-1, 3.44278924041233391079e-2, -9.73655226040941223894e-4)


def _rational(num, den, t):
    return horner(num, t) / horner(den, t)


@custom_jvp
def dawsn(x):
    """Dawson's integral exp(-x^2) int_0^x exp(t^2) dt (odd); its derivative 1 - 2 x dawsn(x)."""
    x = _float(x)
    ax = vnp.abs(x)
    r1, r3 = ax < 3.25, ax >= 6.25
    a1 = vnp.where(r1, ax, 1.0)
    a2 = vnp.where(r1 | r3, 4.0, ax)
    a3 = vnp.where(r3, ax, 8.0)
    v1 = a1 * _rational(_DAWSN_AN, _DAWSN_AD, a1 * a1)
    t2, t3 = 1.0 / (a2 * a2), 1.0 / (a3 * a3)
    v2 = 0.5 / a2 * (1.0 + t2 * _rational(_DAWSN_BN, _DAWSN_BD, t2))
    v3 = 0.5 / a3 * (1.0 + t3 * _rational(_DAWSN_CN, _DAWSN_CD, t3))
    out = vnp.where(r1, v1, vnp.where(r3, v3, v2))
    return vnp.where(x < 0, -out, out)


dawsn.defjvps(lambda t, out, x: t * (1.0 - 2.0 * x * out))


# ------------------------------------------------------------------------------- fresnel

# Cephes' fresnlf (single precision): S = x^3 sn(x^4), C = x cn(x^4) for x^2 < 2.5625; beyond,
# the auxiliary f = 1 - u fn(u), g = t gn(u) (t = 1 / (pi x^2), u = t^2) with sin and cos of
# pi x^2 / 2 reduced exactly (x^2 / 2 mod 2); past x = 36974, 0.5 each
_FRESNEL_SN = (1.647629463788700e-9, -1.522754752581096e-7, 8.424748808502400e-6,
               -3.120693124703272e-4, 7.244727626597022e-3, -9.228055941124598e-2,
               5.235987735681432e-1)
_FRESNEL_CN = (1.416802502367354e-8, -1.157231412229871e-6, 5.387223446683264e-5,
               -1.604381798862293e-3, 2.818489036795073e-2, -2.467398198317899e-1,
               9.999999760004487e-1)
_FRESNEL_FN = (-1.903009855649792e12, 1.355942388050252e11, -4.158143148511033e9,
               7.343848463587323e7, -8.732356681548485e5, 8.560515466275470e3,
               -1.032877601091159e2, 2.999401847870011e0)
_FRESNEL_GN = (-1.860843997624650e11, 1.278350673393208e10, -3.779387713202229e8,
               6.492611570598858e6, -7.787789623358162e4, 8.602931494734327e2,
               -1.493439396592284e1, 9.999841934744914e-1)


def _sincos_pi_half_square(x):
    """sin and cos of pi x^2 / 2 for x >= 0, the argument reduced exactly: with s = x mod 2,
    x^2 / 2 = s (x - s / 2) mod 2 (scipy's and JAX's reduction)."""
    s = vnp.fmod(x, 2.0)
    r = vnp.fmod(s * (x - 0.5 * s), 2.0)
    return vnp.sin(math.pi * r), vnp.cos(math.pi * r)


def _fresnel(x):
    x = _float(x)
    ax = vnp.abs(x)
    small = ax * ax < 2.5625
    xs = vnp.where(small, ax, 0.0)
    x4 = xs * xs * xs * xs
    s_small, c_small = xs * xs * xs * horner(_FRESNEL_SN, x4), xs * horner(_FRESNEL_CN, x4)
    big = ax > 36974.0
    xo = vnp.where(small | big, 2.0, ax)
    t = 1.0 / (math.pi * xo * xo)
    u = t * t
    f = 1.0 - u * horner(_FRESNEL_FN, u)
    g = t * horner(_FRESNEL_GN, u)
    sn, cs = _sincos_pi_half_square(xo)
    c_other = 0.5 + (f * sn - g * cs) / (math.pi * xo)
    s_other = 0.5 - (f * cs + g * sn) / (math.pi * xo)
    s = vnp.where(small, s_small, vnp.where(big, 0.5, s_other))
    c = vnp.where(small, c_small, vnp.where(big, 0.5, c_other))
    neg = x < 0
    return vnp.where(neg, -s, s), vnp.where(neg, -c, c)


@custom_jvp
def fresnel(x):
    """The Fresnel integrals (S, C) = int_0^x (sin, cos)(pi t^2 / 2) dt (odd; 0.5 at inf);
    their derivatives sin and cos of pi x^2 / 2."""
    return _fresnel(x)


def _fresnel_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    x = _float(x)
    sn, cs = _sincos_pi_half_square(vnp.abs(x))
    return _fresnel(x), (t * sn, t * cs)


fresnel.defjvp(_fresnel_jvp)


# ------------------------------------------------------------------------------ owens_t

# JAX's quadrature of T(h, a) = a sum_i w_i exp(-h^2 (1 + a^2 t_i) / 2) / (1 + a^2 t_i), |a| <= 1
# (1 / |a| and the reflection T(h, a) = (ndtr(h) + ndtr(ah)) / 2 - ndtr(h) ndtr(ah) - T(ah, 1/a)
# beyond), with its exact values at h = 0 and a = 1
_OWENS_T_PTS = (0.0035082039676451715, 0.031279042338030754, 0.085266826283219451,
                0.16245071730812277, 0.25851196049125435, 0.36807553840697534,
                0.48501092905604697, 0.60277514152618577, 0.71477884217753227,
                0.81475510988760099, 0.89711029755948966, 0.95723808085944262,
                0.99178832974629704)
_OWENS_T_WTS = (0.018831438115323503, 0.018567086243977649, 0.018042093461223386,
                0.017263829606398753, 0.016243219975989857, 0.014994592034116705,
                0.013535474469662088, 0.011886351605820165, 0.010070377242777432,
                0.0081130545742299587, 0.0060419009528470239, 0.0038862217010742058,
                0.0016793031084546090)
_SQRT2 = math.sqrt(2.0)


def _owens_t(h, a):
    h, aa = vnp.abs(h), vnp.abs(a)
    inside = aa <= 1.0
    ma = vnp.where(inside, aa, 1.0 / vnp.where(inside, 1.0, aa))
    mh = vnp.where(inside, h, aa * h)
    a2, h2 = ma * ma, mh * mh
    quad = 0.0
    for p, w in zip(_OWENS_T_PTS, _OWENS_T_WTS):
        r = a2 * p
        quad = quad + w * vnp.exp(-0.5 * h2 * (1.0 + r)) / (1.0 + r)
    out = ma * quad
    out = vnp.where(mh == 0, vnp.arctan(ma) / (2 * math.pi), out)
    out = vnp.where(ma == 1.0, 0.125 * erfc(-mh / _SQRT2) * erfc(mh / _SQRT2), out)
    hn = h / _SQRT2
    nh, nah = erfc(hn), erfc(aa * hn)
    flipped = vnp.where(aa * h <= 0.67, 0.25 - 0.25 * erf(hn) * erf(aa * hn) - out,
                        0.25 * (nh + nah - nh * nah) - out)
    out = vnp.sign(a) * vnp.where(inside, out, flipped)
    return vnp.where(vnp.isnan(a) | vnp.isnan(h), math.nan, out)


@custom_jvp
def _owens_t_p(h, a):
    return _owens_t(h, a)


_owens_t_p.defjvps(
    lambda t, out, h, a: -t * vnp.exp(-0.5 * h * h) * erf(a * h / _SQRT2)
    / (2.0 * math.sqrt(2 * math.pi)),
    lambda t, out, h, a: t * vnp.exp(-0.5 * (a * a + 1.0) * h * h) / (2 * math.pi * (a * a + 1.0)))


def owens_t(h, a):
    """Owen's T function (1 / 2 pi) int_0^a exp(-h^2 (1 + x^2) / 2) / (1 + x^2) dx: JAX's
    13-point quadrature (absolute error < 1e-6 against scipy), analytic derivatives."""
    return _owens_t_p(*_broadcast_float(h, a))


# -------------------------------------------------------------------- exponential integrals

_EXPN_SERIES = 24       # x <= 1: the omitted terms < 1 / 24! (6e-24)
_EXPN_FRACTION = 48     # x > 1: the continued fraction's steps (converged at x = 1, n = 1)


def _expn_series(n, x):
    """E_n(x) for 0 < x <= 1 and integer n >= 1 (DLMF 8.19.8): (-x)^(n-1) / (n-1)! (psi(n) -
    log x) - sum over k != n - 1 of (-x)^k / ((k - n + 1) k!)."""
    total, term = vnp.zeros_like(x), vnp.ones_like(x)        # term = (-x)^k / k!
    for k in range(_EXPN_SERIES):
        d = k - n + 1.0
        total = total + vnp.where(d == 0, 0.0, term / vnp.where(d == 0, 1.0, d))
        term = term * -x / (k + 1.0)
    sign = vnp.where(vnp.fmod(n - 1.0, 2.0) == 0, 1.0, -1.0)
    lead = sign * vnp.exp((n - 1.0) * vnp.log(x) - gammaln(n))
    return lead * (digamma(n) - vnp.log(x)) - total


def _expn_fraction(n, x):
    """E_n(x) for x > 1: e^-x / (x + n - 1 n / (x + n + 2 - 2 (n + 1) / (x + n + 4 - ...)))."""
    frac = _lentz(x + n, lambda i: (-i * (n - 1.0 + i), x + n + 2.0 * i), _EXPN_FRACTION)
    return vnp.exp(-x) / frac


def _expn(n, x):
    ok = (n >= 1) & (x > 0) & (x < math.inf)
    ns, xs = vnp.where(ok, n, 1.0), vnp.where(ok, x, 1.0)
    low = xs <= 1.0
    series = _expn_series(ns, vnp.where(low, xs, 1.0))
    frac = _expn_fraction(ns, vnp.where(low, 2.0, xs))
    out = vnp.where(low, series, frac)
    xz = vnp.where(x > 0, x, 1.0)
    out = vnp.where(n == 0, vnp.exp(-xz) / xz, out)
    out = vnp.where(x == math.inf, 0.0, out)
    out = vnp.where(x == 0, vnp.where(n < 2, math.inf, 1.0 / vnp.maximum(n - 1.0, 1.0)), out)
    return vnp.where((n < 0) | (x < 0) | vnp.isnan(x) | vnp.isnan(n), math.nan, out)


@custom_jvp
def _expn_p(n, x):
    return _expn(n, x)


_expn_p.defjvps(lambda t, out, n, x: t * 0.0, lambda t, out, n, x: -t * _expn(n - 1.0, x))


def expn(n, x):
    """The generalized exponential integral E_n(x) = int_1^inf e^(-x t) / t^n dt for integer
    n >= 0 and x >= 0 (scipy's values: inf at x = 0 for n < 2, 1 / (n - 1) beyond; nan for
    n < 0 or x < 0). d/dx is -E_(n-1)(x); n is not differentiable (0)."""
    n, x = _broadcast_float(n, x)
    return _expn_p(vnp.floor(n), x)


def exp1(x):
    """E_1(x) = int_x^inf e^-t / t dt = expn(1, x): inf at 0, nan below."""
    x = _float(x)
    return expn(vnp.ones_like(x), x)


_EI_SERIES = 64         # x <= 20: the omitted terms < 1e-13 relative
_EI_ASYMPTOTIC = 18     # x > 20: the asymptotic series' terms k! / x^k, the last < 3e-8


def _expi_pos(x):
    """Ei(x) for x > 0: gamma + log x + sum x^k / (k k!) up to 20, e^x / x sum k! / x^k beyond
    (e^x / x as exp(x - log x), finite until Ei itself overflows)."""
    near = x <= 20.0
    xs = vnp.where(near, x, 1.0)
    term, total = vnp.ones_like(x), vnp.zeros_like(x)
    for k in range(1, _EI_SERIES + 1):
        term = term * xs / k
        total = total + term / k
    series = _EULER + vnp.log(xs) + total
    xa = vnp.where(near, 21.0, x)
    term, asym = vnp.ones_like(x), vnp.ones_like(x)
    for k in range(1, _EI_ASYMPTOTIC + 1):
        term = term * k / xa
        asym = asym + term
    return vnp.where(near, series, vnp.exp(xa - vnp.log(xa)) * asym)


@custom_jvp
def expi(x):
    """The exponential integral Ei(x) = -PV int_-x^inf e^-t / t dt: -inf at 0 (scipy's; JAX's
    gives nan there), -E_1(-x) below 0. Its derivative e^x / x. Near Ei's zero x = 0.3725 the
    series' cancellation leaves an absolute error ~ 1e-7, not a relative one."""
    x = _float(x)
    pos = (x > 0) & (x < math.inf)
    p = _expi_pos(vnp.where(pos, x, 1.0))
    n = -exp1(vnp.where(x < 0, -x, 1.0))
    return vnp.where(pos, p, vnp.where(x == 0, -math.inf, vnp.where(x > 0, math.inf, n)))


expi.defjvps(lambda t, out, x: t * vnp.exp(x) / x)


# ---------------------------------------------------------------------------------- sici

# Cephes' sici (JAX's, scipy's): below 4, Si = x SN(x^2) / SD(x^2), Ci = gamma + log x +
# x^2 CN / CD; above, the auxiliary f and g (two fits, below and above 8) with
# Si = pi/2 - f cos x - g sin x, Ci = f sin x - g cos x; past 1e9 f = 1 / x, g = 0
_SI_N = (-8.39167827910303881427E-11, 4.62591714427012837309E-8, -9.75759303843632795789E-6,
         9.76945438170435310816E-4, -4.13470316229406538752E-2, 1.00000000000000000302E0)
_SI_D = (2.03269266195951942049E-12, 1.27997891179943299903E-9, 4.41827842801218905784E-7,
         9.96412122043875552487E-5, 1.42085239326149893930E-2, 9.99999999999999996984E-1)
_CI_N = (2.02524002389102268789E-11, -1.35249504915790756375E-8, 3.59325051419993077021E-6,
         -4.74007206873407909465E-4, 2.89159652607555242092E-2, -1.00000000000000000080E0)
_CI_D = (4.07746040061880559506E-12, 3.06780997581887812692E-9, 1.23210355685883423679E-6,
         3.17442024775032769882E-4, 5.10028056236446052392E-2, 4.00000000000000000080E0)
_FN4 = (4.23612862892216586994E0, 5.45937717161812843388E0, 1.62083287701538329132E0,
        1.67006611831323023771E-1, 6.81020132472518137426E-3, 1.08936580650328664411E-4,
        5.48900223421373614008E-7)
_FD4 = (1.0, 8.16496634205391016773E0, 7.30828822505564552187E0, 1.86792257950184183883E0,
        1.78792052963149907262E-1, 7.01710668322789753610E-3, 1.10034357153915731354E-4,
        5.48900252756255700982E-7)
_GN4 = (8.71001698973114191777E-2, 6.11379109952219284151E-1, 3.97180296392337498885E-1,
        7.48527737628469092119E-2, 5.38868681462177273157E-3, 1.61999794598934024525E-4,
        1.97963874140963632189E-6, 7.82579040744090311069E-9)
_GD4 = (1.0, 1.64402202413355338886E0, 6.66296701268987968381E-1, 9.88771761277688796203E-2,
        6.22396345441768420760E-3, 1.73221081474177119497E-4, 2.02659182086343991969E-6,
        7.82579218933534490868E-9)
_FN8 = (4.55880873470465315206E-1, 7.13715274100146711374E-1, 1.60300158222319456320E-1,
        1.16064229408124407915E-2, 3.49556442447859055605E-4, 4.86215430826454749482E-6,
        3.20092790091004902806E-8, 9.41779576128512936592E-11, 9.70507110881952024631E-14)
_FD8 = (1.0, 9.17463611873684053703E-1, 1.78685545332074536321E-1, 1.22253594771971293032E-2,
        3.58696481881851580297E-4, 4.92435064317881464393E-6, 3.21956939101046018377E-8,
        9.43720590350276732376E-11, 9.70507110881952025725E-14)
_GN8 = (6.97359953443276214934E-1, 3.30410979305632063225E-1, 3.84878767649974295920E-2,
        1.71718239052347903558E-3, 3.48941165502279436777E-5, 3.47131167084116673800E-7,
        1.70404452782044526189E-9, 3.85945925430276600453E-12, 3.14040098946363334640E-15)
_GD8 = (1.0, 1.68548898811011640017E0, 4.87852258695304967486E-1, 4.67913194259625806320E-2,
        1.90284426674399523638E-3, 3.68475504442561108162E-5, 3.57043223443740838771E-7,
        1.72693748966316146736E-9, 3.87830166023954706752E-12, 3.14040098946363335242E-15)


def _sici(x):
    x = _float(x)
    ax = vnp.abs(x)
    near = ax <= 4.0
    far = ax > 1e9
    xs = vnp.where(near & (ax > 0), ax, 1.0)
    t = xs * xs
    si_near = xs * _rational(_SI_N, _SI_D, t)
    ci_near = _EULER + vnp.log(xs) + t * _rational(_CI_N, _CI_D, t)
    xa = vnp.where(near | far, 5.0, ax)
    z = 1.0 / (xa * xa)
    below8 = xa < 8.0
    f = vnp.where(below8, _rational(_FN4, _FD4, z), _rational(_FN8, _FD8, z)) / xa
    g = z * vnp.where(below8, _rational(_GN4, _GD4, z), _rational(_GN8, _GD8, z))
    s, c = vnp.sin(xa), vnp.cos(xa)
    si_mid, ci_mid = math.pi / 2 - f * c - g * s, f * s - g * c
    xf = vnp.where(far & (ax < math.inf), ax, 2e9)
    si_far = vnp.where(ax == math.inf, math.pi / 2, math.pi / 2 - vnp.cos(xf) / xf)
    ci_far = vnp.where(ax == math.inf, 0.0, vnp.sin(xf) / xf)
    si = vnp.where(near, vnp.where(ax == 0, 0.0, si_near), vnp.where(far, si_far, si_mid))
    ci = vnp.where(near, vnp.where(ax == 0, -math.inf, ci_near), vnp.where(far, ci_far, ci_mid))
    return vnp.where(x < 0, -si, si), vnp.where(x == -math.inf, math.nan, ci)


@custom_jvp
def sici(x):
    """The sine and cosine integrals (Si, Ci) = (int_0^x sin t / t dt, gamma + log|x| +
    int_0^x (cos t - 1) / t dt): Si odd, Ci(-x) = Ci(x) (scipy's real values; -inf at 0).
    Derivatives sin x / x and cos x / x."""
    return _sici(x)


def _sici_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    x = _float(x)
    nz = x != 0
    xs = vnp.where(nz, x, 1.0)
    return _sici(x), (t * vnp.where(nz, vnp.sin(xs) / xs, 1.0), t * vnp.cos(x) / x)


sici.defjvp(_sici_jvp)


# -------------------------------------------------------------------------------- spence

# Cephes' spence (JAX's): -w A(w) / B(w) around 1, with the reflections below 0.5 and above
# 1.5 (and x -> 1/x above 2)
_SPENCE_A = (4.65128586073990045278E-5, 7.31589045238094711071E-3, 1.33847639578309018650E-1,
             8.79691311754530315341E-1, 2.71149851196553469920E0, 4.25697156008121755724E0,
             3.29771340985225106936E0, 1.00000000000000000126E0)
_SPENCE_B = (6.90990488912553276999E-4, 2.54043763932544379113E-2, 2.82974860602568089943E-1,
             1.41172597751831069617E0, 3.63800533345137075418E0, 5.03278880143316990390E0,
             3.54771340985225096217E0, 9.99999999999999998740E-1)


def spence(x):
    """Spence's function int_1^x log(t) / (1 - t) dt for x >= 0 (pi^2 / 6 at 0, 0 at 1), nan
    below 0 (JAX's; scipy continues it to complex values)."""
    x = _float(x)
    ok = x > 0
    xs = vnp.where(ok, x, 1.0)
    inv = xs > 2.0
    y = vnp.where(inv, 1.0 / xs, xs)
    above, below = y > 1.5, y < 0.5
    w = vnp.where(above, 1.0 / y - 1.0, vnp.where(below, -y, y - 1.0))
    s = -w * _rational(_SPENCE_A, _SPENCE_B, w)
    yb = vnp.where(below, y, 0.25)
    s = vnp.where(below, math.pi ** 2 / 6 - vnp.log(yb) * vnp.log1p(-yb) - s, s)
    s = vnp.where(inv | above, -0.5 * vnp.log(y) ** 2 - s, s)
    out = vnp.where(x == 0, math.pi ** 2 / 6, vnp.where(x == 1, 0.0, s))
    return vnp.where((x < 0) | vnp.isnan(x), math.nan, out)


__all__ = ["bernoulli", "boxcox", "boxcox1p", "comb", "dawsn", "entr", "erfcx", "exp1", "expi",
           "expn", "factorial", "fresnel", "kl_div", "log_softmax", "loggamma", "owens_t",
           "poch", "rel_entr", "sici", "softmax", "spence"]
