"""The random-number primitives: the threefry-2x32 hash, and its bits as uniform floats.

    threefry2x32[word](k0, k1, x0, x1) -> i32
        Threefry-2x32 with 20 rounds (Salmon et al. 2011, "Parallel random numbers: as easy as
        1, 2, 3"; Random123's threefry2x32, JAX's threefry2x32_p): the block (x0, x1) encrypted
        under the key (k0, k1). word 0 or 1 is that word of the result, word 2 their xor (JAX's
        32-bit random bits). Elementwise, numpy-broadcasting: a key (two scalars) against a
        counter per element is one fused kernel.
    bits_to_unit(bits) -> f32
        The top 23 bits of each word as a float in [0, 1), step 2^-23: the float with exponent
        0 and those bits as its mantissa, minus 1 (JAX's uniform). Exact on every device.
    randint_from_bits(higher, lower, minval, maxval) -> i32
        JAX's randint from two words of bits (jax/_src/random.py `_randint`, 32-bit): in uint32
        arithmetic, span = maxval - minval (1 where maxval <= minval), m = (2^16 % span)^2 %
        span, offset = ((higher % span) * m + lower % span) % span, minval + offset.

Unsigned words, signed storage: vkgrad's integers are i32, and every operation here is on the
uint32 whose bit pattern the i32 holds (numpy views the same memory as uint32; GLSL converts
int <-> uint, which keeps the bits). Outside these primitives nothing does arithmetic on them:
they are hashed, compared for equality, or turned into floats here. (docs/random.md says why
this rather than a uint32 dtype.)

Neither has a VJP: integer results carry no gradient, and bits_to_unit's operand is an
integer. vkgrad/random.py builds keys, splitting and the distributions on them.
"""

from __future__ import annotations

import numpy as np

from vkgrad.errors import DTypeError, VkgradIndexError
from vkgrad.ir.core import Primitive, TensorType, abstract_eval_rules, batching_rules
from vkgrad.ir.interpreter import impls
from vkgrad.primitives import lax as L
from vkgrad.tracer.core import bind

# Threefry-2x32's rotation constants and key-schedule parity (Skein's C240, 32-bit).
ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
PARITY = 0x1BD11BDA


def threefry2x32_words(k0, k1, x0, x1):
    """The reference: uint32 arrays of one shape -> (y0, y1), 20 rounds (numpy wraps)."""
    k0, k1, x0, x1 = (np.asarray(a, np.uint32) for a in (k0, k1, x0, x1))
    with np.errstate(over="ignore"):      # uint32 arithmetic wraps, as it does in GLSL
        ks = (k0, k1, k0 ^ k1 ^ np.uint32(PARITY))
        x0, x1 = x0 + ks[0], x1 + ks[1]
        for i in range(5):
            for r in ROTATIONS[i % 2]:
                x0 = x0 + x1
                x1 = ((x1 << np.uint32(r)) | (x1 >> np.uint32(32 - r))) ^ x0
            x0 = x0 + ks[(i + 1) % 3]
            x1 = x1 + ks[(i + 2) % 3] + np.uint32(i + 1)
    return x0, x1


def _as_u32(x):
    return np.ascontiguousarray(x, np.int32).reshape(-1).view(np.uint32)


def _threefry_impl(k0, k1, x0, x1, *, word):
    args = np.broadcast_arrays(*(np.asarray(a, np.int32) for a in (k0, k1, x0, x1)))
    y0, y1 = threefry2x32_words(*(_as_u32(a) for a in args))
    y = y0 if word == 0 else y1 if word == 1 else y0 ^ y1
    return y.view(np.int32).reshape(args[0].shape)


def _threefry_rule(*types, word):
    if len(types) != 4:
        raise DTypeError(f"threefry2x32 takes 4 operands (k0, k1, x0, x1), got {len(types)}")
    if any(t.dtype != "i32" for t in types):
        raise DTypeError(f"threefry2x32: operands must be i32 (uint32 bit patterns), got "
                         f"{', '.join(map(str, types))}")
    if word not in (0, 1, 2):
        raise VkgradIndexError(f"threefry2x32: word={word!r}; 0 and 1 are the result's words, "
                               "2 their xor")
    return TensorType(L.broadcast_shapes("threefry2x32", types), "i32")


threefry2x32_p = Primitive("threefry2x32", ("pure", "elementwise"))
abstract_eval_rules[threefry2x32_p] = _threefry_rule
impls[threefry2x32_p] = _threefry_impl
batching_rules[threefry2x32_p] = L.elementwise_batcher(threefry2x32_p)


def _bits_to_unit_impl(bits):
    u = (_as_u32(bits) >> np.uint32(9)) | np.uint32(0x3F800000)
    return (u.view(np.float32) - np.float32(1)).reshape(np.shape(bits))


bits_to_unit_p = L._elementwise("bits_to_unit", 1, _bits_to_unit_impl, frozenset({"i32"}),
                                out_dtype="f32")


def _randint_impl(higher, lower, minval, maxval):
    args = np.broadcast_arrays(*(np.asarray(a, np.int32) for a in (higher, lower, minval,
                                                                      maxval)))
    h, lo, mn, mx = (_as_u32(a) for a in args)
    with np.errstate(over="ignore"):      # uint32 arithmetic wraps, as it does in GLSL
        span = np.where(args[3].reshape(-1) <= args[2].reshape(-1), np.uint32(1), mx - mn)
        mult = np.uint32(1 << 16) % span
        mult = (mult * mult) % span
        offset = ((h % span) * mult + lo % span) % span
        out = mn + offset
    return out.view(np.int32).reshape(args[0].shape)


def _randint_rule(*types):
    if len(types) != 4 or any(t.dtype != "i32" for t in types):
        raise DTypeError("randint_from_bits takes 4 i32 operands (higher bits, lower bits, "
                         f"minval, maxval), got {', '.join(map(str, types))}")
    return TensorType(L.broadcast_shapes("randint_from_bits", types), "i32")


randint_from_bits_p = Primitive("randint_from_bits", ("pure", "elementwise"))
abstract_eval_rules[randint_from_bits_p] = _randint_rule
impls[randint_from_bits_p] = _randint_impl
batching_rules[randint_from_bits_p] = L.elementwise_batcher(randint_from_bits_p)


def randint_from_bits(higher, lower, minval, maxval):
    return bind(randint_from_bits_p, higher, lower, minval, maxval)


def threefry2x32(k0, k1, x0, x1, word: int):
    """threefry2x32_p; Python ints are taken as uint32 (or int32) bit patterns."""
    k0, k1, x0, x1 = (np.uint32(v & 0xFFFFFFFF).view(np.int32) if isinstance(v, int) else v
                      for v in (k0, k1, x0, x1))
    return bind(threefry2x32_p, k0, k1, x0, x1, word=int(word))


def bits_to_unit(bits):
    return bind(bits_to_unit_p, bits)
