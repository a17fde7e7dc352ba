"""vg.random: counter-based, splittable random numbers, as `jax.random` (docs/random.md).

    key = vg.random.key(0)                      # i32[2] (JAX's legacy uint32[2] keys)
    k1, k2 = vg.random.split(key)
    x = vg.random.normal(k1, (3, 4))
    mask = vg.random.bernoulli(k2, 0.9, x.shape)

A key is two 32-bit words; every number is a pure function of a key and the number's position
(its counter): Threefry-2x32 (vkgrad/primitives/random.py) of the counter under the key. So the
numbers do not depend on how a program is fused, scheduled or split across kernels, the same key
gives the same bits on the interpreter and on Vulkan, and drawing them inside `vg.jit` is one
more elementwise kernel in the same submission. Reusing a key reuses its numbers: split it.

The layout is that of jax.random's partitionable threefry (`jax_threefry_partitionable`, JAX's
default since 0.5): key(seed) = (seed >> 32, seed mod 2^32); split(key, n)[i] and fold_in(key,
i) are the block (0, i) encrypted under the key; bits(key, shape) at flat position i is the xor
of the two words of the block (0, i). The block function is checked against Random123's
known-answer vectors (tests/test_random.py). uniform and bernoulli are JAX's formulas on those
bits, and normal is JAX's sqrt(2) erfinv(uniform(-1, 1)) with XLA's erfinv polynomial (equal to
JAX's up to the device's log1p and sqrt); randint and permutation have JAX's distributions, not
its numbers (docs/random.md says why).

Words are stored as i32 whose bit pattern is the uint32 (vkgrad has no unsigned dtype; why in
docs/random.md). Like any vkgrad function these run eagerly on numpy or device values, or trace
into a transform: under vmap a batch of keys draws per-key numbers, identical to a loop.
"""

from __future__ import annotations

import math

import numpy as np

from vkgrad import numpy as vnp
from vkgrad import primitives as P
from vkgrad.dtypes import dtype_name, is_float, np_dtype
from vkgrad.errors import ArgumentError, DTypeError, ShapeError
from vkgrad.scipy.special import erf, erfinv, gammaln
from vkgrad.traceback_util import wrap_namespace
from vkgrad.tracer.core import ArrayOps, Tracer, user_source

__all__ = ["key", "PRNGKey", "split", "fold_in", "bits", "uniform", "normal", "bernoulli",
           "randint", "categorical", "permutation", "gumbel", "choice", "truncated_normal"]


def key(seed):
    """A key from an integer seed: (seed >> 32, seed mod 2^32) as two uint32 words stored in
    an i32[2] array (a negative seed as its 64-bit two's complement). A traced (int32) seed
    gives (0, seed)."""
    if isinstance(seed, Tracer):
        if seed.aval.dtype != "i32" or seed.shape != ():
            raise DTypeError(f"vg.random.key: a traced seed must be an i32 scalar, got "
                             f"{seed.aval}", source=user_source())
        return vnp.stack([vnp.zeros((), vnp.int32), seed])
    if isinstance(seed, (np.ndarray, np.generic, ArrayOps)) and np.ndim(seed) == 0:
        seed = np.asarray(seed).item()
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or \
            not -2 ** 63 <= seed < 2 ** 64:
        raise ArgumentError(f"vg.random.key: the seed must be an integer in [-2^63, 2^64), got "
                            f"{seed!r}", source=user_source())
    seed = int(seed) % 2 ** 64
    return np.array([seed >> 32, seed & 0xFFFFFFFF], np.uint32).view(np.int32)


PRNGKey = key


def _words(k, fn):
    """The key's two words (scalars), after checking it is a key."""
    k = vnp.asarray(k)
    dt = P.dtype_of(k)
    if dt != "i32" or tuple(k.shape) != (2,):
        raise ArgumentError(
            f"vg.random.{fn}: the key must be an i32[2] array (from vg.random.key or split), "
            f"got {dt}[{','.join(map(str, k.shape))}]"
            + ("; for a batch of keys, vmap over them" if dt == "i32" and len(k.shape) > 1 and
               k.shape[-1] == 2 else ""), source=user_source())
    return k[0], k[1]


def _shape(shape, fn) -> tuple:
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    if any(not isinstance(d, (int, np.integer)) or d < 0 for d in shape):
        raise ShapeError(f"vg.random.{fn}: shape {shape} must be non-negative Python ints",
                         source=user_source())
    return tuple(int(d) for d in shape)


def _counters(shape):
    """The flat row-major position of each element: the blocks' second word."""
    return P.reshape(P.iota((math.prod(shape),), 0), shape)


def _block(k, shape, word, fn):
    k0, k1 = _words(k, fn)
    return P.threefry2x32(k0, k1, 0, _counters(_shape(shape, fn)), word)


# ----------------------------------------------------------------------------------- keys

def split(key, num: int = 2):
    """`num` new keys [num, 2]: key i is the block (0, i) encrypted under `key`."""
    num = int(num)
    k0, k1 = _words(key, "split")
    i = P.iota((num,), 0)
    return vnp.stack([P.threefry2x32(k0, k1, 0, i, 0), P.threefry2x32(k0, k1, 0, i, 1)], -1)


def fold_in(key, data):
    """A new key from `key` and an integer (a step number, a layer index): the block
    (0, data) encrypted under `key`. `data` may be traced (an i32 scalar)."""
    k0, k1 = _words(key, "fold_in")
    if isinstance(data, (int, np.integer)) and not isinstance(data, bool):
        d = np.uint32(int(data) & 0xFFFFFFFF).view(np.int32)     # its low 32 bits
    else:
        d = vnp.asarray(data)
        if P.dtype_of(d) != "i32" or d.shape != ():
            raise DTypeError(f"vg.random.fold_in: data must be an integer scalar, got {data!r}",
                             source=user_source())
    return vnp.stack([P.threefry2x32(k0, k1, 0, d, 0), P.threefry2x32(k0, k1, 0, d, 1)])


# ----------------------------------------------------------------------------------- numbers

def bits(key, shape=()):
    """Uniform random 32-bit words (i32 holding the uint32 bit pattern)."""
    return _block(key, shape, 2, "bits")


def _float_dtype(dtype, fn) -> str:
    dt = dtype_name(dtype)
    if not is_float(dt):
        raise DTypeError(f"vg.random.{fn}: dtype must be a float dtype, got {dt}",
                         source=user_source())
    return dt


def uniform(key, shape=(), dtype=np.float32, minval=0.0, maxval=1.0):
    """Uniform floats in [minval, maxval): 23 random bits each (a float32's mantissa), then
    scaled; float64 results carry the same 23 bits."""
    return _uniform(key, shape, _float_dtype(dtype, "uniform"), minval, maxval, "uniform")


def _uniform(key, shape, dt, minval, maxval, fn):
    u = vnp.astype(P.bits_to_unit(_block(key, shape, 2, fn)), dt)
    if isinstance(minval, (int, float)) and isinstance(maxval, (int, float)) and \
            (minval, maxval) == (0, 1):
        return u
    lo, hi = vnp.astype(minval, dt), vnp.astype(maxval, dt)
    return vnp.maximum(lo, vnp.add(vnp.multiply(u, vnp.subtract(hi, lo)), lo))


_NORMAL_LO = float(np.nextafter(np.float32(-1), np.float32(0)))     # JAX's lower bound


def normal(key, shape=(), dtype=np.float32):
    """Standard normal floats, as jax.random.normal: sqrt(2) erfinv(u) of a uniform u in
    (-1, 1) (uniform(key, shape, minval=nextafter(-1, 0), maxval=1)), computed in float32 (a
    float64 result carries float32's numbers). 23-bit uniforms put the tails' end at
    |x| = 5.42, where u is its smallest, -1 + 2^-24."""
    dt = _float_dtype(dtype, "normal")
    u = _uniform(key, shape, "f32", _NORMAL_LO, 1.0, "normal")
    return vnp.astype(vnp.multiply(erfinv(u), np.float32(math.sqrt(2))), dt)


def truncated_normal(key, lower, upper, shape=None, dtype=np.float32):
    """Standard normal floats conditioned on lower < x < upper (bounds broadcast; default
    shape theirs), as jax.random.truncated_normal draws them: sqrt(2) erfinv(u) of a uniform u
    between erf(lower / sqrt 2) and erf(upper / sqrt 2), clipped into the open interval. The
    gradient flows to the bounds through u's range (the clip's bounds are stop_gradient)."""
    dt = _float_dtype(dtype, "truncated_normal")
    lower, upper = vnp.astype(lower, dt), vnp.astype(upper, dt)
    bounds = vnp.broadcast_shapes(tuple(lower.shape), tuple(upper.shape))
    shape = bounds if shape is None else _shape(shape, "truncated_normal")
    if vnp.broadcast_shapes(shape, bounds) != shape:
        raise ShapeError(f"vg.random.truncated_normal: shape {shape} does not fit the bounds' "
                         f"broadcast shape {bounds}", source=user_source())
    root2 = np.array(math.sqrt(2), np_dtype(dt))
    a, b = erf(vnp.divide(lower, root2)), erf(vnp.divide(upper, root2))
    out = vnp.multiply(erfinv(_uniform(key, shape, dt, a, b, "truncated_normal")), root2)
    return vnp.clip(out, _next_toward(vnp.stop_gradient(lower), np.inf),
                    _next_toward(vnp.stop_gradient(upper), -np.inf))


def _next_toward(x, direction):
    """numpy's nextafter(x, direction) of a concrete bound; a traced bound is itself (vkgrad
    has no bit view of a float to step it by one ulp: the interval is closed there)."""
    if isinstance(x, Tracer):
        return x
    return vnp.asarray(np.nextafter(np.asarray(x), np.asarray(direction, np.asarray(x).dtype)))


def gumbel(key, shape=(), dtype=np.float32):
    """Standard Gumbel floats, -log(-log(u)) of a uniform u in [tiny, 1) (jax.random.gumbel's
    default mode)."""
    dt = _float_dtype(dtype, "gumbel")
    return _gumbel(key, _shape(shape, "gumbel"), dt, "gumbel")


def _gumbel(key, shape, dt, fn):
    u = _uniform(key, shape, dt, float(np.finfo(np.float32).tiny), 1.0, fn)
    return vnp.negative(vnp.log(vnp.negative(vnp.log(u))))


def choice(key, a, shape=(), replace=True, p=None, axis=0):
    """Draws from range(a) (a an int) or from a's entries along `axis`, as jax.random.choice:
    with replacement uniform indices (randint; JAX's numbers), or by p (p's running sum
    searched at uniform points); without replacement the first draws of a permutation, or by
    p the top draws of log p + Gumbel noise (the Gumbel top-k trick). The result: shape, in
    place of a's axis."""
    shape = _shape(shape, "choice")
    n, arr, axis = _population(a, axis, "choice")
    draws = math.prod(shape)
    if draws and n <= 0:
        raise ArgumentError("vg.random.choice: a must be greater than 0 unless no samples are "
                            "taken", source=user_source())
    if not replace and draws > n:
        raise ArgumentError(f"vg.random.choice: cannot take a larger sample (size {draws}) "
                            f"than the population (size {n}) with replace=False",
                            source=user_source())
    if p is None:
        ind = randint(key, shape, 0, n) if replace else \
            vnp.reshape(permutation(key, n)[:draws], shape)
    else:
        p = vnp.asarray(p)
        p = p if is_float(P.dtype_of(p)) else vnp.astype(p, np.float32)
        if tuple(p.shape) != (n,):
            raise ShapeError(f"vg.random.choice: p must be None or a 1-D vector with one "
                             f"probability per choice ({n}), got shape {tuple(p.shape)}",
                             source=user_source())
        dt = P.dtype_of(p)
        if replace:
            cum = vnp.cumsum(p)
            r = vnp.multiply(cum[-1], vnp.subtract(1.0, _uniform(key, shape, dt, 0.0, 1.0,
                                                                  "choice")))
            ind = vnp.minimum(vnp.searchsorted(cum, r), n - 1)
        else:
            g = vnp.add(_gumbel(key, (n,), dt, "choice"), vnp.log(p))
            ind = vnp.reshape(P.top_k(g, draws)[1], shape)
    if arr is None:
        return ind
    taken = vnp.take(arr, vnp.ravel(ind), axis=axis)
    return vnp.reshape(taken, arr.shape[:axis] + shape + arr.shape[axis + 1:])


def _population(x, axis, fn):
    """(n, array or None, axis) of what is drawn from: range(x) for an int x, else x's entries
    along `axis`."""
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        return int(x), None, axis
    arr = vnp.asarray(x)
    if arr.ndim == 0:
        raise ShapeError(f"vg.random.{fn}: the population must be an int or an array with an "
                         "axis", source=user_source())
    if not -arr.ndim <= axis < arr.ndim:
        raise ShapeError(f"vg.random.{fn}: axis {axis} is out of range for a {arr.ndim}-d "
                         "array", source=user_source())
    return arr.shape[axis], arr, axis % arr.ndim


def bernoulli(key, p=0.5, shape=None):
    """Booleans, True with probability p (p broadcasts against shape; default p's shape)."""
    p = vnp.asarray(p)
    p = p if is_float(P.dtype_of(p)) else vnp.astype(p, np.float32)
    shape = tuple(p.shape) if shape is None else _shape(shape, "bernoulli")
    return vnp.less(_uniform(key, shape, P.dtype_of(p), 0.0, 1.0, "bernoulli"), p)


def randint(key, shape, minval, maxval, dtype=np.int32):
    """Integers in [minval, maxval) (bounds broadcast against shape), drawn as JAX draws them
    (jax/_src/random.py `_randint`): the key split in two, 32 random bits from each, combined
    in uint32 arithmetic modulo the span (P.randint_from_bits). maxval <= minval gives minval.
    Bit for bit JAX's for int32 bounds."""
    if dtype_name(dtype) != "i32":
        raise DTypeError(f"vg.random.randint: dtype must be int32, got {dtype}",
                         source=user_source())
    shape = _shape(shape, "randint")
    lo, hi = vnp.asarray(minval, np.int32), vnp.asarray(maxval, np.int32)
    k1, k2 = split(key, 2)
    return P.randint_from_bits(bits(k1, shape), bits(k2, shape), lo, hi)


def categorical(key, logits, axis=-1, shape=None):
    """Class indices drawn with probabilities softmax(logits) along `axis` (the Gumbel-max
    trick: argmax(logits + Gumbel noise)). shape: the result's shape, the logits' batch shape
    (their shape without `axis`) at its end; default that batch shape."""
    logits = vnp.asarray(logits)
    if not is_float(P.dtype_of(logits)):
        logits = vnp.astype(logits, np.float32)
    nd = logits.ndim
    if nd == 0:
        raise ShapeError("vg.random.categorical: logits need at least one axis",
                         source=user_source())
    ax = axis % nd if -nd <= axis < nd else None
    if ax is None:
        raise ShapeError(f"vg.random.categorical: axis {axis} out of range for {nd}-d logits",
                         source=user_source())
    batch = tuple(d for i, d in enumerate(logits.shape) if i != ax)
    shape = batch if shape is None else _shape(shape, "categorical")
    if len(shape) < len(batch) or shape[len(shape) - len(batch):] != batch:
        raise ShapeError(f"vg.random.categorical: shape {shape} must end with the logits' "
                         f"batch shape {batch}", source=user_source())
    lead = len(shape) - len(batch)
    full = list(shape[lead:])
    full.insert(ax, logits.shape[ax])
    noise = _gumbel(key, shape[:lead] + tuple(full), P.dtype_of(logits), "categorical")
    scores = vnp.add(noise, vnp.reshape(logits, (1,) * lead + tuple(logits.shape)))
    return vnp.argmax(scores, axis=lead + ax)


def permutation(key, x, axis=0):
    """A random permutation of range(x) (x an int), or x shuffled along `axis`: JAX's shuffle,
    a stable argsort of random keys, repeated with a fresh key while ties are likely (rounds =
    ceil(3 log n / log 2^23), the keys being 23-bit uniform floats: one round up to n = 203, two
    up to 41,000, three to 8.4 million); each round is one argsort kernel on Vulkan."""
    n, arr, axis = _population(x, axis, "permutation")
    perm = P.iota((n,), 0)
    for k in _shuffle_keys(key, n):
        # the keys as floats: the argsort kernel sorts f32 (23 random bits, exact in f32)
        perm = vnp.take(perm, vnp.argsort(P.bits_to_unit(_block(k, (n,), 2, "permutation"))))
    return perm if arr is None else vnp.take(arr, perm, axis=axis)


def _shuffle_keys(key, n: int) -> list:
    """One key per round of permutation's sort: JAX's round count (its exponent 3) for 23-bit
    keys, so that n^2 / 2^(23 rounds), about the chance of two elements tying in every round,
    stays below 1/n."""
    rounds = max(1, math.ceil(3 * math.log(max(n, 1)) / math.log(2 ** 23)))
    if rounds == 1:
        return [key]
    keys = split(key, rounds)
    return [keys[i] for i in range(rounds)]


def _eps(dt):
    return np.finfo(np_dtype(dt))


def exponential(key, shape=(), dtype=np.float32):
    """Exponential floats with rate 1: -log1p(-u) of a uniform u in [0, 1) (JAX's formula,
    so JAX's numbers where vg.random's uniform is JAX's)."""
    dt = _float_dtype(dtype, "exponential")
    return vnp.negative(vnp.log1p(vnp.negative(
        _uniform(key, _shape(shape, "exponential"), dt, 0.0, 1.0, "exponential"))))


def laplace(key, shape=(), dtype=np.float32):
    """Laplace floats: sign(u) * log1p(-|u|), u uniform in (-1, 1) (jax.random.laplace)."""
    dt = _float_dtype(dtype, "laplace")
    u = _uniform(key, _shape(shape, "laplace"), dt, -1.0 + float(_eps(dt).epsneg), 1.0,
                 "laplace")
    return vnp.multiply(vnp.sign(u), vnp.log1p(vnp.negative(vnp.abs(u))))


def logistic(key, shape=(), dtype=np.float32):
    """Logistic floats: log(u) - log1p(-u), u uniform in [tiny, 1) (jax.random.logistic)."""
    dt = _float_dtype(dtype, "logistic")
    u = _uniform(key, _shape(shape, "logistic"), dt, float(_eps(dt).tiny), 1.0, "logistic")
    return vnp.subtract(vnp.log(u), vnp.log1p(vnp.negative(u)))


def cauchy(key, shape=(), dtype=np.float32):
    """Cauchy floats: tan(pi (u - 1/2)), u uniform in [eps, 1) (jax.random.cauchy)."""
    dt = _float_dtype(dtype, "cauchy")
    u = _uniform(key, _shape(shape, "cauchy"), dt, float(_eps(dt).eps), 1.0, "cauchy")
    return vnp.tan(vnp.multiply(np.pi, vnp.subtract(u, 0.5)))


def rademacher(key, shape=(), dtype=np.int32):
    """-1 or 1 with probability 1/2 each: 2 * bernoulli(key, 0.5, shape) - 1
    (jax.random.rademacher; int32 by default)."""
    b = vnp.astype(bernoulli(key, 0.5, _shape(shape, "rademacher")), dtype)
    return vnp.astype(2 * b - 1, dtype)


def key_data(keys):
    """The words of a key (or an array of keys): vkgrad's keys are those words already, two
    uint32 held in int32 bits (jax.random.key_data gives them as uint32)."""
    if vnp.ndim(keys) == 1:
        _words(keys, "key_data")   # checks it is a key
    return vnp.asarray(keys)


def wrap_key_data(key_bits_array, *, impl=None):
    """The key(s) made of key_bits_array's words, the last axis of length 2
    (jax.random.wrap_key_data; only threefry2x32, JAX's default, exists here)."""
    if impl not in (None, "threefry2x32"):
        raise ArgumentError(f"vg.random.wrap_key_data: impl {impl!r} does not exist here; "
                            "vkgrad's keys are threefry2x32", source=user_source())
    k = key_bits_array
    if isinstance(k, (np.ndarray, np.generic)) and k.dtype.kind == "u":
        k = np.asarray(k).astype(np.uint32).view(np.int32)   # words from 2^31 up, as int32 bits
    k = vnp.asarray(k)
    if not k.shape or k.shape[-1] != 2:
        raise ShapeError(f"vg.random.wrap_key_data: key data must have a last axis of length "
                         f"2 (threefry2x32's two words), got shape {tuple(k.shape)}",
                         source=user_source())
    if P.dtype_of(k) != "i32":
        raise DTypeError(f"vg.random.wrap_key_data: key data must be integer words, got "
                         f"{P.dtype_of(k)}", source=user_source())
    return k


# ------------------------------------------------------------------- gamma and its family

# Marsaglia-Tsang rounds drawn per element: a round accepts with probability 0.951 or more
# (the least at alpha = 1), so all of them reject with probability below 0.049^8 = 3e-11
GAMMA_ROUNDS = 8


def _params(x, dt):
    """A distribution's parameter in dtype dt, without a gradient (none is written)."""
    return vnp.stop_gradient(vnp.astype(vnp.asarray(x), dt))


def _param_shape(shape, bounds, fn) -> tuple:
    """The result's shape: `shape`, which the parameters' broadcast shape must broadcast to
    (JAX's rule), or that broadcast shape."""
    if shape is None:
        return bounds
    shape = _shape(shape, fn)
    try:
        fits = np.broadcast_shapes(shape, bounds) == shape
    except ValueError:
        fits = False
    if not fits:
        raise ShapeError(f"vg.random.{fn}: shape {shape} is not compatible with the "
                         f"parameters' broadcast shape {bounds}", source=user_source())
    return shape


def _log_gamma(key, a, shape, dt):
    """log of Gamma(a, 1) samples of `shape` (a broadcast to it), by Marsaglia and Tsang (2000):
    d = alpha - 1/3, c = 1 / sqrt(9 d), x = d (1 + c z)^3 for a normal z, accepted when
    log u < z^2 / 2 + d - d v + d log v; GAMMA_ROUNDS candidates per element, the first accepted
    taken (the last where none is). a < 1 is boosted: Gamma(a) = Gamma(a + 1) u^(1/a), kept in
    log space so that tiny samples do not round to 0 before beta and dirichlet normalise them."""
    a = vnp.broadcast_to(a, shape)
    kz, ku, kb = split(key, 3)
    boost = vnp.less(a, 1)
    alpha = vnp.where(boost, vnp.add(a, 1), a)
    d = vnp.subtract(alpha, np.array(1 / 3, np_dtype(dt)))
    c = vnp.divide(1, vnp.sqrt(vnp.multiply(9, d)))
    rounds = (GAMMA_ROUNDS,) + shape
    z = normal(kz, rounds, dt)
    logu = vnp.log(_uniform(ku, rounds, dt, float(_eps(dt).tiny), 1.0, "gamma"))
    v = vnp.add(1, vnp.multiply(c, z))
    v = vnp.multiply(vnp.multiply(v, v), v)
    ok = vnp.greater(v, 0)
    logv = vnp.log(vnp.where(ok, v, 1))
    bound = vnp.add(vnp.multiply(0.5, vnp.multiply(z, z)),
                    vnp.multiply(d, vnp.add(vnp.subtract(1, v), logv)))
    out = _first_accepted(vnp.logical_and(ok, vnp.less(logu, bound)),
                          vnp.add(vnp.log(d), logv))
    ub = _uniform(kb, shape, dt, float(_eps(dt).tiny), 1.0, "gamma")
    return vnp.add(out, vnp.where(boost, vnp.divide(vnp.log(ub), a), 0))


def _first_accepted(accept, candidates):
    """Along the first axis (the rounds of a rejection sampler): the first candidate accepted,
    the last candidate where none is."""
    out = candidates[-1]
    for r in reversed(range(candidates.shape[0] - 1)):
        out = vnp.where(accept[r], candidates[r], out)
    return out


def _gamma_args(a, shape, dtype, fn):
    dt = _float_dtype(np.float32 if dtype is None else dtype, fn)
    a = _params(a, dt)
    return a, _param_shape(shape, tuple(a.shape), fn), dt


def gamma(key, a, shape=None, dtype=None):
    """Gamma(a, 1) floats (shape a's broadcast to `shape`, default a's shape), as
    jax.random.gamma draws them: Marsaglia-Tsang rejection, each element GAMMA_ROUNDS
    candidates in parallel (one elementwise kernel, no loop), a < 1 by the u^(1/a) boost. The
    distribution is JAX's, the numbers are not (JAX's loop draws its candidates one key split
    at a time). No gradient flows to a (JAX's implicit reparameterization is not written)."""
    a, shape, dt = _gamma_args(a, shape, dtype, "gamma")
    return vnp.exp(_log_gamma(key, a, shape, dt))


def loggamma(key, a, shape=None, dtype=None):
    """log of Gamma(a, 1) floats, as jax.random.loggamma: accurate where a is small and the
    samples underflow (vg.random.gamma's docstring says how they are drawn)."""
    a, shape, dt = _gamma_args(a, shape, dtype, "loggamma")
    return _log_gamma(key, a, shape, dt)


def beta(key, a, b, shape=None, dtype=None):
    """Beta(a, b) floats (shape the parameters' broadcast to `shape`, default theirs), as
    jax.random.beta: X / (X + Y) of X ~ Gamma(a), Y ~ Gamma(b), computed from their logs
    (scaled by the larger, so small a and b do not give 0 / 0). JAX's distribution, not its
    numbers."""
    dt = _float_dtype(np.float32 if dtype is None else dtype, "beta")
    a, b = _params(a, dt), _params(b, dt)
    shape = _param_shape(shape, vnp.broadcast_shapes(tuple(a.shape), tuple(b.shape)), "beta")
    ka, kb = split(key)
    la, lb = _log_gamma(ka, a, shape, dt), _log_gamma(kb, b, shape, dt)
    top = vnp.maximum(la, lb)
    ea, eb = vnp.exp(vnp.subtract(la, top)), vnp.exp(vnp.subtract(lb, top))
    return vnp.divide(ea, vnp.add(ea, eb))


def dirichlet(key, alpha, shape=None, dtype=None):
    """Dirichlet(alpha) floats over alpha's last axis, as jax.random.dirichlet: the result
    `shape + alpha.shape[-1:]` (shape default alpha.shape[:-1], to which alpha's batch shape
    must broadcast), each row Gamma(alpha_i) samples normalised (from their logs, the largest
    subtracted). JAX's distribution, not its numbers."""
    dt = _float_dtype(np.float32 if dtype is None else dtype, "dirichlet")
    alpha = _params(alpha, dt)
    if alpha.ndim < 1:
        raise ShapeError("vg.random.dirichlet: alpha needs at least one axis (the categories)",
                         source=user_source())
    batch = _param_shape(shape, tuple(alpha.shape[:-1]), "dirichlet")
    lg = _log_gamma(key, alpha, batch + tuple(alpha.shape[-1:]), dt)
    e = vnp.exp(vnp.subtract(lg, vnp.max(lg, axis=-1, keepdims=True)))
    return vnp.divide(e, vnp.sum(e, axis=-1, keepdims=True))


# Knuth's rounds (uniforms multiplied until below exp(-lam), for lam < 10): P(Poisson(10) >= 40)
# is 5e-12, the count's cap. The transformed rejection's rounds (lam >= 10) accept with
# probability 0.87 or more each, so all 16 reject with probability below 1e-14.
KNUTH_ROUNDS = 40
PTRS_ROUNDS = 16


def poisson(key, lam, shape=None, dtype=None):
    """Poisson(lam) integers (int32; shape lam's broadcast to `shape`, default lam's shape), as
    jax.random.poisson draws them: for lam < 10 Knuth's count of uniforms multiplied before the
    product falls below exp(-lam) (KNUTH_ROUNDS uniforms per element: the count stops there),
    from 10 up Hoermann's transformed rejection (PTRS, PTRS_ROUNDS candidates per element, the
    first accepted taken). 0 where lam is 0, -1 where lam is negative or NaN (JAX's). JAX's
    distribution, not its numbers."""
    if dtype is not None and dtype_name(dtype) != "i32":
        raise DTypeError(f"vg.random.poisson: dtype must be int32, got {dtype}",
                         source=user_source())
    lam = _params(lam, "f32")
    shape = _param_shape(shape, tuple(lam.shape), "poisson")
    lam = vnp.broadcast_to(lam, shape)
    knuth = vnp.less(lam, 10)
    k1, k2 = split(key)
    small = _poisson_knuth(k1, vnp.where(knuth, lam, 0), shape)
    large = _poisson_ptrs(k2, vnp.where(knuth, 1e5, lam), shape)
    k = vnp.where(knuth, small, large)
    return vnp.astype(vnp.where(vnp.greater_equal(lam, 0), k, -1), np.int32)


def _poisson_knuth(key, lam, shape):
    """The number of running products of uniforms above exp(-lam), in log space."""
    logu = vnp.log(_uniform(key, (KNUTH_ROUNDS,) + shape, "f32", float(_eps("f32").tiny), 1.0,
                            "poisson"))
    above = vnp.greater(vnp.cumsum(logu, axis=0), vnp.negative(lam))
    return vnp.sum(vnp.astype(above, np.float32), axis=0)


def _poisson_ptrs(key, lam, shape):
    """Hoermann (1993), "The transformed rejection method for generating Poisson random
    variables", algorithm PTRS, with JAX's constants (jax/_src/random.py)."""
    rounds = (PTRS_ROUNDS,) + shape
    ku, kv = split(key)
    u = vnp.subtract(_uniform(ku, rounds, "f32", 0.0, 1.0, "poisson"), 0.5)
    v = _uniform(kv, rounds, "f32", 0.0, 1.0, "poisson")
    b = vnp.add(0.931, vnp.multiply(2.53, vnp.sqrt(lam)))
    a = vnp.add(-0.059, vnp.multiply(0.02483, b))
    inv_alpha = vnp.add(1.1239, vnp.divide(1.1328, vnp.subtract(b, 3.4)))
    v_r = vnp.subtract(0.9277, vnp.divide(3.6224, vnp.subtract(b, 2)))
    us = vnp.subtract(0.5, vnp.abs(u))
    k = vnp.floor(vnp.add(vnp.multiply(vnp.add(vnp.divide(vnp.multiply(2, a), us), b), u),
                          vnp.add(lam, 0.43)))
    s = vnp.log(vnp.divide(vnp.multiply(v, inv_alpha),
                           vnp.add(vnp.divide(a, vnp.multiply(us, us)), b)))
    t = vnp.subtract(vnp.multiply(k, vnp.log(lam)),
                     vnp.add(lam, gammaln(vnp.add(vnp.maximum(k, 0), 1))))
    accept1 = vnp.logical_and(vnp.greater_equal(us, 0.07), vnp.less_equal(v, v_r))
    reject = vnp.logical_or(vnp.less(k, 0), vnp.logical_and(vnp.less(us, 0.013),
                                                            vnp.greater(v, us)))
    accept = vnp.logical_or(accept1, vnp.logical_and(vnp.logical_not(reject),
                                                     vnp.less_equal(s, t)))
    return _first_accepted(accept, k)


# ------------------------------------------------- distributions composed of gamma and uniform

def _float_params(fn, dtype, *params):
    """The dtype (default float32) and the parameters in it, without a gradient."""
    dt = _float_dtype(np.float32 if dtype is None else dtype, fn)
    return (dt,) + tuple(_params(x, dt) for x in params)


def _broadcast_params(shape, params, fn):
    """The result's shape (_param_shape over the parameters' broadcast shape) and the
    parameters broadcast to it."""
    shape = _param_shape(shape, vnp.broadcast_shapes(*(tuple(x.shape) for x in params)), fn)
    return shape, [vnp.broadcast_to(x, shape) for x in params]


def t(key, df, shape=None, dtype=None):
    """Student's t floats with df degrees of freedom (shape df's broadcast to `shape`, default
    df's), as jax.random.t: z sqrt((df/2) / g) of a normal z and g ~ Gamma(df/2). JAX's
    distribution, not its numbers (gamma's are not)."""
    dt, df = _float_params("t", dtype, df)
    shape, (df,) = _broadcast_params(shape, [df], "t")
    kn, kg = split(key)
    half = vnp.divide(df, 2)
    return vnp.multiply(normal(kn, shape, dt),
                        vnp.sqrt(vnp.divide(half, vnp.exp(_log_gamma(kg, half, shape, dt)))))


def chisquare(key, df, shape=None, dtype=None):
    """Chi-square floats with df degrees of freedom, as jax.random.chisquare: 2 exp(loggamma(
    df/2)). JAX's distribution, not its numbers."""
    dt, df = _float_params("chisquare", dtype, df)
    shape, (df,) = _broadcast_params(shape, [df], "chisquare")
    return _chisquare(key, df, shape, dt)


def _chisquare(key, df, shape, dt):
    return vnp.multiply(vnp.exp(_log_gamma(key, vnp.divide(df, 2), shape, dt)), 2)


def f(key, dfnum, dfden, shape=None, dtype=None):
    """F floats, (chi2(dfnum) / dfnum) / (chi2(dfden) / dfden), as jax.random.f (the default
    shape the parameters' broadcast shape). JAX's distribution, not its numbers."""
    dt, dfnum, dfden = _float_params("f", dtype, dfnum, dfden)
    shape, (dfnum, dfden) = _broadcast_params(shape, [dfnum, dfden], "f")
    kd, kn = split(key)
    return vnp.divide(vnp.divide(_chisquare(kn, dfnum, shape, dt), dfnum),
                      vnp.divide(_chisquare(kd, dfden, shape, dt), dfden))


# Binomial's rounds, JAX's two algorithms bounded: below n q = 10 (q = min(p, 1 - p)) the count
# of geometric gaps that fit in n, BINOMIAL_INVERSION_ROUNDS gaps per element (the count's cap:
# Chernoff's bound e^-10 (10 e / 40)^40 puts P(k >= 40) below 1e-11); from 10 up BTRS
# (Hoermann 1993), BTRS_ROUNDS candidates per element, the first accepted.
BINOMIAL_INVERSION_ROUNDS = 40
BTRS_ROUNDS = 16

# log k! - Stirling's approximation of it, k = 0..9 (JAX's and TensorFlow's table)
_STIRLING_TAIL = np.array([0.0810614667953272, 0.0413406959554092, 0.0276779256849983,
                           0.02079067210376509, 0.0166446911898211, 0.0138761288230707,
                           0.0118967099458917, 0.0104112652619720, 0.00925546218271273,
                           0.00833056343336287])


def binomial(key, n, p, shape=None, dtype=None):
    """Binomial(n, p) counts as floats (float32 default; shape the parameters' broadcast to
    `shape`, default theirs), as jax.random.binomial: n floored, q = min(p, 1 - p) drawn and
    the count mirrored where p > 1/2; where n q <= 10 the inversion (geometric gaps), else
    BTRS, each bounded (BINOMIAL_INVERSION_ROUNDS, BTRS_ROUNDS). NaN where n is negative or NaN
    or p is NaN or negative, inf where n is inf (JAX's). JAX's distribution, not its numbers."""
    dt, n, p = _float_params("binomial", dtype, n, p)
    shape, (n, p) = _broadcast_params(shape, [n, p], "binomial")
    return _binomial(key, n, p, shape, dt)


def _binomial(key, n, p, shape, dt):
    low = vnp.less(p, 0.5)
    q = vnp.where(low, p, vnp.subtract(1, p))
    bad_n = vnp.logical_or(vnp.isnan(n), vnp.less(n, 0))
    bad_q = vnp.logical_or(vnp.isnan(q), vnp.less(q, 0))
    q = vnp.where(bad_q, 0.01, q)
    inversion = vnp.logical_or(bad_n, vnp.less_equal(vnp.multiply(n, q), 10))
    n = vnp.floor(n)
    k1, k2 = split(key)
    small = _binomial_inversion(k1, vnp.where(inversion, n, 0), q, shape, dt)
    large = _btrs(k2, vnp.where(inversion, 1e4, n), vnp.where(inversion, 0.5, q), shape, dt)
    k = vnp.where(inversion, small, large)
    k = vnp.where(vnp.isinf(n), np.inf, k)
    k = vnp.where(vnp.logical_or(low, vnp.isinf(n)), k, vnp.subtract(n, k))
    return vnp.where(vnp.logical_or(bad_n, bad_q), np.nan, k)


def _binomial_inversion(key, n, q, shape, dt):
    """How many running sums of geometric(q) gaps, ceil(log u / log(1 - q)), stay within n (0
    where q is 0)."""
    u = _uniform(key, (BINOMIAL_INVERSION_ROUNDS,) + shape, dt, 0.0, 1.0, "binomial")
    gaps = vnp.ceil(vnp.divide(vnp.log(u), vnp.log1p(vnp.negative(q))))
    k = vnp.sum(vnp.astype(vnp.less_equal(vnp.cumsum(gaps, axis=0), n), dt), axis=0)
    return vnp.where(vnp.equal(q, 0), 0, k)


def _stirling_tail(k):
    """log k! minus Stirling's approximation: the table up to 9, the series beyond."""
    kc = vnp.clip(k, 0, 9)
    k1 = vnp.add(kc, 1)
    sq = vnp.multiply(k1, k1)
    series = vnp.divide(vnp.subtract(1 / 12, vnp.divide(vnp.subtract(1 / 360, vnp.divide(
        1 / 1260, sq)), sq)), k1)
    table = vnp.take(_STIRLING_TAIL.astype(np_dtype(P.dtype_of(k))),
                     vnp.astype(vnp.floor(kc), np.int32))
    return vnp.where(vnp.less_equal(k, 9), table, series)


def _btrs(key, n, q, shape, dt):
    """Hoermann (1993), "The generation of binomial random variates", algorithm BTRS, with
    JAX's constants."""
    rounds = (BTRS_ROUNDS,) + shape
    ku, kv = split(key)
    u = vnp.subtract(_uniform(ku, rounds, dt, 0.0, 1.0, "binomial"), 0.5)
    v = _uniform(kv, rounds, dt, 0.0, 1.0, "binomial")
    stddev = vnp.sqrt(vnp.multiply(vnp.multiply(n, q), vnp.subtract(1, q)))
    b = vnp.add(1.15, vnp.multiply(2.53, stddev))
    a = vnp.add(vnp.add(-0.0873, vnp.multiply(0.0248, b)), vnp.multiply(0.01, q))
    c = vnp.add(vnp.multiply(n, q), 0.5)
    v_r = vnp.subtract(0.92, vnp.divide(4.2, b))
    r = vnp.divide(q, vnp.subtract(1, q))
    alpha = vnp.multiply(vnp.add(2.83, vnp.divide(5.1, b)), stddev)
    m = vnp.floor(vnp.multiply(vnp.add(n, 1), q))
    us = vnp.subtract(0.5, vnp.abs(u))
    k = vnp.floor(vnp.add(vnp.multiply(vnp.add(vnp.divide(vnp.multiply(2, a), us), b), u), c))
    reject = vnp.logical_or(vnp.less(k, 0), vnp.greater(k, n))
    kk = vnp.clip(k, 0, n)     # the bound's logs where k is rejected anyway
    lv = vnp.log(vnp.divide(vnp.multiply(v, alpha),
                            vnp.add(vnp.divide(a, vnp.multiply(us, us)), b)))
    nm1 = vnp.add(vnp.subtract(n, m), 1)
    nk1 = vnp.add(vnp.subtract(n, kk), 1)
    ub = vnp.add(vnp.add(
        vnp.multiply(vnp.add(m, 0.5), vnp.log(vnp.divide(vnp.add(m, 1), vnp.multiply(r, nm1)))),
        vnp.multiply(vnp.add(n, 1), vnp.log(vnp.divide(nm1, nk1)))),
        vnp.multiply(vnp.add(kk, 0.5), vnp.log(vnp.divide(vnp.multiply(r, nk1),
                                                          vnp.add(kk, 1)))))
    ub = vnp.add(ub, vnp.subtract(vnp.add(_stirling_tail(m), _stirling_tail(vnp.subtract(n, m))),
                                  vnp.add(_stirling_tail(kk), _stirling_tail(vnp.subtract(n, kk)))))
    accept1 = vnp.logical_and(vnp.greater_equal(us, 0.07), vnp.less_equal(v, v_r))
    accept = vnp.logical_or(accept1, vnp.logical_and(vnp.logical_not(reject),
                                                     vnp.less_equal(lv, ub)))
    return _first_accepted(accept, k)


def multinomial(key, n, p, *, shape=None, dtype=None, unroll=1):
    """Multinomial(n, p) counts as floats over p's last axis (the outcomes), as
    jax.random.multinomial: the result `shape` (default p's shape; its last axis the
    outcomes, n broadcast to the rest), drawn as JAX does, one binomial per outcome of the
    trials left, with probability p_i over the probability left. The outcomes are unrolled
    (`unroll`, JAX's scan hint, changes nothing). JAX's distribution, not its numbers."""
    dt, n, p = _float_params("multinomial", dtype, n, p)
    if p.ndim < 1:
        raise ShapeError("vg.random.multinomial: p needs at least one axis (the outcomes)",
                         source=user_source())
    shape = _param_shape(shape, tuple(p.shape), "multinomial")
    if not shape:
        raise ShapeError("vg.random.multinomial: shape needs at least one axis (the outcomes)",
                         source=user_source())
    batch = _param_shape(shape[:-1], tuple(n.shape), "multinomial")
    n, p = vnp.broadcast_to(n, batch), vnp.broadcast_to(p, shape)
    left = vnp.flip(vnp.cumsum(vnp.flip(p, -1), axis=-1), -1)     # p_i + ... + p_last
    ratios = vnp.clip(vnp.divide(p, vnp.where(vnp.equal(left, 0), 1, left)), 0, 1)
    keys = split(key, shape[-1])
    counts = []
    for i in range(shape[-1]):
        # each count in memory: the next outcome's trials left read it there (recomputed, the
        # outcomes' samplers nest in every later kernel: 122k lines of GLSL at 3 outcomes)
        counts.append(P.save(_binomial(keys[i], n, ratios[..., i], batch, dt)))
        n = vnp.subtract(n, counts[-1])
    return vnp.stack(counts, -1)


__all__ += ["t", "chisquare", "f", "binomial", "multinomial"]


def orthogonal(key, n, shape=(), dtype=np.float32, m=None):
    """Matrices (*shape, n, m) (m defaults to n) with orthonormal columns (rows, where m > n),
    uniform over them (Haar), as jax.random.orthogonal draws them: the Q of a normal (*shape,
    max(n, m), min(n, m)) matrix's QR, its columns' signs fixed by R's diagonal."""
    m = n if m is None else m
    z = normal(key, _shape(shape, "orthogonal") + (max(n, m), min(n, m)), dtype)
    q, r = vnp.linalg.qr(z)
    d = vnp.diagonal(r, 0, -2, -1)
    q = vnp.multiply(q, vnp.expand_dims(vnp.divide(d, vnp.abs(d)), -2))
    return vnp.swapaxes(q, -1, -2) if n < m else q


__all__ += ["orthogonal"]


# --------------------------------------------- distributions as formulas of uniform and normal

def generalized_normal(key, p, shape=(), dtype=None):
    """Generalized normal floats with shape parameter p (density exp(-|x|^p) up to a
    constant), as jax.random.generalized_normal: r g^(1/p) of a random sign r and g ~
    Gamma(1/p). JAX's distribution, not its numbers (gamma's are not)."""
    dt, p = _float_params("generalized_normal", dtype, p)
    shape = _shape(shape, "generalized_normal")
    kg, kr = split(key)
    g = vnp.exp(vnp.divide(_log_gamma(kg, vnp.divide(1, p), shape, dt), p))
    return vnp.multiply(rademacher(kr, shape, dt), g)


def weibull_min(key, scale, concentration, shape=(), dtype=None):
    """Weibull floats, scale (-log1p(-u))^(1 / concentration) of a uniform u (jax.random.
    weibull_min; the result `shape` broadcast with the parameters, as JAX's)."""
    dt, scale, conc = _float_params("weibull_min", dtype, scale, concentration)
    u = _uniform(key, _shape(shape, "weibull_min"), dt, 0.0, 1.0, "weibull_min")
    return vnp.multiply(vnp.power(vnp.negative(vnp.log1p(vnp.negative(u))),
                                  vnp.divide(1, conc)), scale)


def pareto(key, b, shape=None, dtype=None):
    """Pareto floats with shape b, exp(e / b) of a standard exponential e (jax.random.pareto;
    JAX's numbers)."""
    dt, b = _float_params("pareto", dtype, b)
    shape, (b,) = _broadcast_params(shape, [b], "pareto")
    return vnp.exp(vnp.divide(exponential(key, shape, dt), b))


def maxwell(key, shape=(), dtype=None):
    """Maxwell floats, the length of a 3-vector of normals (jax.random.maxwell; JAX's numbers
    up to the norm's rounding)."""
    dt = _float_dtype(np.float32 if dtype is None else dtype, "maxwell")
    z = normal(key, _shape(shape, "maxwell") + (3,), dt)
    return vnp.sqrt(vnp.sum(vnp.multiply(z, z), axis=-1))


def double_sided_maxwell(key, loc, scale, shape=(), dtype=None):
    """Double-sided Maxwell floats, loc + scale r m of a random sign r and a Maxwell m, as
    jax.random.double_sided_maxwell: the result's shape is `shape` (the parameters' broadcast
    shape where it is ()) followed by the parameters' broadcast shape, as JAX's."""
    dt, loc, scale = _float_params("double_sided_maxwell", dtype, loc, scale)
    params = vnp.broadcast_shapes(tuple(loc.shape), tuple(scale.shape))
    shape = (_shape(shape, "double_sided_maxwell") or params) + params
    km, kr = split(key)
    m = vnp.multiply(vnp.multiply(rademacher(kr, shape, dt), maxwell(km, shape, dt)), scale)
    return vnp.add(m, loc)


def rayleigh(key, scale, shape=None, dtype=None):
    """Rayleigh floats, scale sqrt(-2 log u) of a uniform u (jax.random.rayleigh; JAX's
    numbers, inf where u is 0 as JAX's)."""
    dt, scale = _float_params("rayleigh", dtype, scale)
    shape, (scale,) = _broadcast_params(shape, [scale], "rayleigh")
    u = _uniform(key, shape, dt, 0.0, 1.0, "rayleigh")
    return vnp.multiply(scale, vnp.sqrt(vnp.multiply(vnp.log(u), -2)))


def wald(key, mean, shape=None, dtype=None):
    """Wald (inverse Gaussian, scale 1) floats by Michael, Schucany and Haas's transformation of
    a squared normal, as jax.random.wald (JAX's numbers up to rounding)."""
    dt, mean = _float_params("wald", dtype, mean)
    shape, (mean,) = _broadcast_params(shape, [mean], "wald")
    k1, k2 = split(key)
    v = normal(k1, shape, dt)
    z = _uniform(k2, shape, dt, 0.0, 1.0, "wald")
    y = vnp.multiply(v, v)
    m2 = vnp.multiply(mean, mean)
    root = vnp.sqrt(vnp.add(vnp.multiply(vnp.multiply(4, mean), y),
                            vnp.multiply(m2, vnp.multiply(y, y))))
    x = vnp.subtract(vnp.add(mean, vnp.divide(vnp.multiply(m2, y), 2)),
                     vnp.multiply(vnp.divide(mean, 2), root))
    return vnp.where(vnp.less_equal(z, vnp.divide(mean, vnp.add(mean, x))), x,
                     vnp.divide(m2, x))


_INT32_MAX = 2 ** 31 - 1


def geometric(key, p, shape=None, dtype=None):
    """Geometric counts (int32; trials up to the first success, from 1), floor(log u /
    log1p(-p)) + 1 of a uniform u (u = 0 taken as 1), as jax.random.geometric: JAX's numbers;
    where p is 0, int32's largest (JAX's)."""
    if dtype is not None and dtype_name(dtype) != "i32":
        raise DTypeError(f"vg.random.geometric: dtype must be int32, got {dtype}",
                         source=user_source())
    p = vnp.stop_gradient(vnp.asarray(p))
    p = p if is_float(P.dtype_of(p)) else vnp.astype(p, np.float32)
    dt = P.dtype_of(p)
    shape, (p,) = _broadcast_params(shape, [p], "geometric")
    u = _uniform(key, shape, dt, 0.0, 1.0, "geometric")
    logu = vnp.log(vnp.where(vnp.equal(u, 0), 1, u))
    g = vnp.add(vnp.floor(vnp.divide(logu, vnp.log1p(vnp.negative(p)))), 1)
    big = vnp.logical_not(vnp.less(g, float(_INT32_MAX)))     # inf, NaN's not: JAX's cast
    return vnp.where(big, _INT32_MAX, vnp.astype(vnp.where(big, 0, g), np.int32))


def triangular(key, left, mode, right, shape=None, dtype=None):
    """Triangular floats on [left, right] peaking at mode, by inverting the cdf of a uniform
    (jax.random.triangular; JAX's numbers)."""
    dt, left, mode, right = _float_params("triangular", dtype, left, mode, right)
    shape, (left, mode, right) = _broadcast_params(shape, [left, mode, right], "triangular")
    width = vnp.subtract(right, left)
    u = _uniform(key, shape, dt, 0.0, 1.0, "triangular")
    below = vnp.add(left, vnp.sqrt(vnp.multiply(vnp.multiply(u, width),
                                                vnp.subtract(mode, left))))
    above = vnp.subtract(right, vnp.sqrt(vnp.multiply(vnp.multiply(vnp.subtract(1, u), width),
                                                      vnp.subtract(right, mode))))
    return vnp.where(vnp.less(u, vnp.divide(vnp.subtract(mode, left), width)), below, above)


def lognormal(key, sigma=np.float32(1), shape=None, dtype=None):
    """Log-normal floats, exp(sigma z) of a normal z (jax.random.lognormal; JAX's numbers up to
    the device's exp)."""
    dt, sigma = _float_params("lognormal", dtype, sigma)
    shape, (sigma,) = _broadcast_params(shape, [sigma], "lognormal")
    return vnp.exp(vnp.multiply(normal(key, shape, dt), sigma))


__all__ += ["generalized_normal", "weibull_min", "pareto", "maxwell", "double_sided_maxwell",
            "rayleigh", "wald", "geometric", "triangular", "lognormal"]


__all__ += ["exponential", "laplace", "logistic", "cauchy", "rademacher", "key_data",
            "wrap_key_data", "gamma", "loggamma", "beta", "dirichlet", "poisson"]


# ------------------------------------------------- multivariate draws, and JAX's key helpers

def multivariate_normal(key, mean, cov, shape=None, dtype=None, method: str = "cholesky"):
    """Normal vectors with the given mean (..., n) and covariance (..., n, n), as
    jax.random.multivariate_normal: mean + factor @ z of standard normals z, factor cov's
    Cholesky factor ('cholesky'), or U sqrt(s) of its SVD ('svd'), or V sqrt(w) of its eigh
    ('eigh'); shape (the batch shape) defaults to mean's and cov's broadcast batch shapes.
    The same numbers as JAX's given the same normal draws (vg.random.normal's)."""
    if method not in ("cholesky", "svd", "eigh"):
        raise ArgumentError(f"vg.random.multivariate_normal: method must be 'cholesky', "
                            f"'svd' or 'eigh', got {method!r}", source=user_source())
    dt = _float_dtype(np.float32 if dtype is None else dtype, "multivariate_normal")
    mean, cov = vnp.asarray(mean, dt), vnp.asarray(cov, dt)
    if mean.ndim < 1 or cov.ndim < 2:
        raise ShapeError(f"vg.random.multivariate_normal needs mean.ndim >= 1 and cov.ndim >= "
                         f"2, got {mean.ndim} and {cov.ndim}", source=user_source())
    n = mean.shape[-1]
    if tuple(cov.shape[-2:]) != (n, n):
        raise ShapeError(f"vg.random.multivariate_normal: cov.shape must be (..., {n}, {n}) "
                         f"for mean.shape {tuple(mean.shape)}, got {tuple(cov.shape)}",
                         source=user_source())
    batch = np.broadcast_shapes(tuple(mean.shape[:-1]), tuple(cov.shape[:-2]))
    shape = batch if shape is None else _shape(shape, "multivariate_normal")
    if np.broadcast_shapes(shape, batch) != shape:
        raise ShapeError(f"vg.random.multivariate_normal: shape {shape} is not broadcast-"
                         f"compatible with the parameters' batch shape {batch}",
                         source=user_source())
    if method == "svd":
        u, s, _ = vnp.linalg.svd(cov)
        factor = vnp.multiply(u, vnp.expand_dims(vnp.sqrt(s), -2))
    elif method == "eigh":
        w, v = vnp.linalg.eigh(cov)
        factor = vnp.multiply(v, vnp.expand_dims(vnp.sqrt(w), -2))
    else:
        factor = vnp.linalg.cholesky(cov)
    z = normal(key, shape + (n,), dt)
    return vnp.add(mean, vnp.einsum("...ij,...j->...i", factor, z))


def ball(key, d: int, p: float = 2, shape=(), dtype=None):
    """Points uniform in the unit Lp ball of dimension d, shape (*shape, d), as
    jax.random.ball: g / (sum |g|^p + e)^(1/p) of generalized normals g and an exponential e
    (arXiv math/0503650). JAX's distribution, not its numbers (generalized_normal's are not)."""
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 0:
        raise ArgumentError(f"vg.random.ball: d must be a nonnegative int, got {d!r}",
                            source=user_source())
    dt = _float_dtype(np.float32 if dtype is None else dtype, "ball")
    shape = _shape(shape, "ball")
    k1, k2 = split(key)
    g = generalized_normal(k1, p, shape + (int(d),), dt)
    e = exponential(k2, shape, dt)
    norm = vnp.power(vnp.add(vnp.sum(vnp.power(vnp.abs(g), p), axis=-1), e), 1.0 / p)
    return vnp.divide(g, vnp.expand_dims(norm, -1))


def clone(key):
    """The key itself (jax.random.clone, for typed keys' reuse checking, which vkgrad's raw
    keys do not have)."""
    return key


def key_impl(keys) -> str:
    """The random number generator of a key: "threefry2x32", vkgrad's only one."""
    if vnp.ndim(keys) == 1:
        _words(keys, "key_impl")   # checks it is a key
    return "threefry2x32"


def key_dtype(impl_spec=None):
    """The dtype of a key array (jax.random.key_dtype). JAX's is its typed key<fry> dtype;
    vkgrad's keys are raw key data, two words in int32 (vg.random.key), so it is int32."""
    if impl_spec not in (None, "threefry2x32"):
        raise ArgumentError(f"vg.random.key_dtype: impl {impl_spec!r} does not exist here; "
                            "vkgrad's keys are threefry2x32", source=user_source())
    return np.dtype(np.int32)


__all__ += ["multivariate_normal", "ball", "clone", "key_impl", "key_dtype"]


wrap_namespace(globals())   # tracebacks without vkgrad's frames (vkgrad/traceback_util.py)
