"""float16 and bfloat16: the dtypes, JAX's promotion rules, what the interpreter computes (each
result rounded to its 16-bit dtype, sums and matmuls accumulated in f32, as JAX does on GPUs),
gradients through casts, and every kind of kernel on Vulkan (lavapipe: the scalar path, 16-bit
values packed two to a word) against the interpreter.

The expected values are written by hand from JAX's documented semantics
(docs/type_promotion.rst's lattice; jnp on a GPU), not computed by vkgrad.
"""

import numpy as np
import pytest

import vkgrad as vg
import vkgrad.nn as nn
import vkgrad.numpy as vnp
from vkgrad.ir.core import print_program
from vkgrad.ir.parser import parse_program
from vkgrad.lowering.fusion import widen_halves
from vkgrad.pipeline import Options, run_stages
from vkgrad.target import Target

f16, bf16, f32 = vnp.float16, vnp.bfloat16, vnp.float32


def arr(dtype, *shape):
    return np.ones(shape or (3,), dtype)


# ------------------------------------------------------------------- promotion (JAX's lattice)

# (operand, operand, result): arrays by dtype name, Python scalars as values
PROMOTION = [
    ("f16", 2.0, "f16"),          # a Python float is weak: it does not widen
    ("bf16", 3, "bf16"),          # nor a Python int
    ("f16", True, "f16"),
    ("f16", "f32", "f32"),
    ("bf16", "f32", "f32"),
    ("f16", "bf16", "f32"),       # neither holds the other: their join is f32
    ("i32", "f16", "f16"),        # ints promote to any float (i32 < f* < f16)
    ("bool", "bf16", "bf16"),
    ("f16", "f64", "f64"),        # (with x64 on; off, float64 data is float32, as in JAX)
    ("i32", 2.0, "f32"),          # a weak float beside an int: the default float
    ("f32", "f64", "f64"),
    ("bool", 1, "i32"),
]


def _operand(x):
    return arr(vg.dtypes.np_dtype(x)) if isinstance(x, str) else x


@pytest.mark.parametrize("a,b,want", PROMOTION, ids=[f"{a}-{b}" for a, b, _ in PROMOTION])
def test_promotion_follows_jax(a, b, want, request):
    if "f64" in (a, b):
        request.getfixturevalue("x64")     # float64 data stays float64 only with x64 on
    assert vnp.result_type(_operand(a), _operand(b)) == vg.dtypes.np_dtype(want)
    assert vnp.result_type(_operand(b), _operand(a)) == vg.dtypes.np_dtype(want)
    if isinstance(a, str) and isinstance(b, str):   # what an op on traced values gives
        prog = vg.make_ir(lambda x, y: x + y)(_operand(a), _operand(b))
        assert prog.outputs[0].dtype == want


def test_dtype_names_and_finfo():
    assert vnp.astype(np.ones(2, f32), "f16").dtype == np.float16
    assert vnp.astype(np.ones(2, f32), vnp.bfloat16).dtype == vnp.bfloat16
    assert vnp.zeros(3, "bfloat16").dtype == vnp.bfloat16
    assert vnp.finfo(vnp.bfloat16).eps == 2.0 ** -7 and vnp.finfo(vnp.bfloat16).bits == 16
    assert vnp.finfo(f16).max == 65504.0 and vnp.finfo("f16").eps == 2.0 ** -10
    assert vnp.finfo(np.ones(2, bf16)).max == float(np.float32(3.3895314e38))
    assert vnp.iinfo(vnp.int32).max == 2 ** 31 - 1


def test_printer_and_parser_know_the_16_bit_types():
    prog = vg.make_ir(lambda x, y: (x * 0.1, y.astype(f32) + 1.0))(arr(f16, 3, 4), arr(bf16, 2))
    text = print_program(prog)
    assert "f16[3,4]" in text and "bf16[2]" in text and ":f16" in text
    assert print_program(parse_program(text)) == text


# ------------------------------------------------------------------- the interpreter's values

def _jit(f, backend="numpy"):
    return vg.jit(f, backend=backend)


# (name, function, arguments, the value JAX gives, its dtype)
VALUES = [
    # 1 + 2^-11 is halfway between 1 and the next f16: round to even
    ("f16_round_to_even", lambda x, y: x + y, [np.float16(1), np.float16(2.0 ** -11)], 1.0, "f16"),
    ("f16_round_up", lambda x, y: x + y, [np.float16(1), np.float16(3 * 2.0 ** -12)],
     1 + 2.0 ** -10, "f16"),
    ("f16_overflow", lambda x: x * 2.0, [np.float16(60000)], np.inf, "f16"),
    ("bf16_round_to_even", lambda x, y: x + y, [np.array(1, bf16), np.array(2.0 ** -8, bf16)],
     1.0, "bf16"),
    ("bf16_keeps_f32_range", lambda x: x * 2, [np.array(1e38, bf16)],
     float(np.array(2e38, bf16).astype(np.float32)), "bf16"),
    # a sum accumulates in f32 (in f16, 2048 + 1 rounds back to 2048: the sum would stop there)
    ("f16_sum_accumulates_in_f32", lambda x: vnp.sum(x), [np.ones(4096, f16)], 4096.0, "f16"),
    ("f16_matmul_accumulates_in_f32", lambda a, b: a @ b,
     [np.ones((1, 4096), f16), np.ones((4096, 1), f16)], [[4096.0]], "f16"),
    ("bf16_mean", lambda x: vnp.mean(x), [np.full(300, 3.0, bf16)], 3.0, "bf16"),
    # var of 0, 1/1000, ..., 1 (as bf16) computed in f32 (JAX upcasts mean and var), rounded once
    ("bf16_var_in_f32", lambda x: vnp.var(x), [np.linspace(0, 1, 1001).astype(bf16)],
     0.08349609375, "bf16"),
    # f32 -> f16 rounds: 1/3 is 0x3555 in f16
    ("f32_to_f16", lambda x: x.astype(f16), [np.float32(1 / 3)], 0.333251953125, "f16"),
    ("f16_to_i32", lambda x: x.astype(vnp.int32), [np.float16(-2.75)], -2, "i32"),
    ("exp_in_f32_rounded", lambda x: vnp.exp(x), [np.float16(1)], 2.71875, "f16"),
]


@pytest.mark.parametrize("name,f,args,want,dtype", VALUES, ids=[v[0] for v in VALUES])
def test_interpreter_values(name, f, args, want, dtype):
    got = np.asarray(_jit(f)(*args))
    assert got.dtype == vg.dtypes.np_dtype(dtype)
    np.testing.assert_array_equal(got.astype(np.float64), np.asarray(want, np.float64))


# ------------------------------------------------------------------- gradients through casts

def test_gradient_through_a_cast_is_rounded_like_jax():
    """jax.grad(lambda x: (x.astype(f16).astype(f32) * w).sum())(x) is w rounded to f16 (the
    cotangent of the f16 value is an f16), back in f32."""
    w = np.full(5, 1 / 3, np.float32)
    g = vg.grad(lambda x: vnp.sum(x.astype(f16).astype(f32) * w))(np.ones(5, np.float32))
    assert g.dtype == np.float32
    np.testing.assert_array_equal(g, np.full(5, 0.333251953125, np.float32))


def test_gradient_of_16_bit_parameters_is_16_bit():
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    w = np.full((3, 2), 0.5, bf16)
    g = vg.grad(lambda w: vnp.sum((x.astype(bf16) @ w).astype(f32) ** 2))(w)
    assert g.dtype == vnp.bfloat16
    r = lambda a: a.astype(bf16).astype(np.float32)   # each bf16 value, rounded once
    xb = r(x)
    y = r(xb @ np.full((3, 2), 0.5, np.float32))
    want = (xb.T @ r(2 * y)).astype(bf16)   # the cotangent of the bf16 product is bf16
    np.testing.assert_array_equal(np.asarray(g), want)


# ------------------------------------------------------------------- Vulkan against the interpreter

def _mixed(x, y, t):
    return (vnp.tanh(x.astype(f16)) * y.astype(f16) + 0.5,     # f16 chain
            vnp.exp(x.astype(bf16)) - 2 * y.astype(bf16),      # bf16 chain
            x.astype(f16) + y.astype(bf16),                    # f16 + bf16 -> f32
            (x.astype(f16).T * 3).T,                           # a layout op on 16-bit values
            vnp.where(x.astype(bf16) > 0, x.astype(bf16), t.astype(bf16)))


rng = np.random.default_rng(16)


def U(*shape):
    return rng.uniform(-2, 2, shape).astype(np.float32)


# (name, function, f32 arguments, relative tolerance): odd shapes (7, 33, 130) hit every edge
# of the tiling and the half-used last word of an odd-sized 16-bit buffer
KERNELS = [
    ("elementwise", _mixed, [U(7, 33), U(33), U(7, 33)], 1e-2),
    ("odd_sizes", lambda x: (x.astype(f16) * 2, x.astype(bf16) + 1), [U(1)], 1e-2),
    ("matmul_nn", lambda a, b: a.astype(f16) @ b.astype(f16), [U(5, 33), U(33, 7)], 2e-3),
    ("matmul_nt", lambda a, b: a.astype(bf16) @ b.astype(bf16).T, [U(5, 33), U(7, 33)], 1e-2),
    ("matmul_tn_batched", lambda a, b: vnp.swapaxes(a.astype(f16), -1, -2) @ b.astype(f16),
     [U(2, 33, 5), U(2, 33, 7)], 2e-3),
    ("reductions", lambda x: (vnp.sum(x.astype(f16), axis=1), vnp.max(x.astype(bf16), axis=0),
                              vnp.mean(x.astype(f16))), [U(7, 130)], 2e-3),
    ("softmax", lambda x: (vnp.softmax(x.astype(f16), axis=-1),
                           vnp.log_softmax(x.astype(bf16), axis=-1)), [U(7, 33)], 1e-2),
    ("embedding", lambda t, i: nn.embedding(t.astype(bf16), i), [U(11, 6), np.array([3, 0, 10, 3],
                                                                                    np.int32)], 0),
    ("attention", lambda q, k, v: nn.flash_attention(q.astype(f16), k.astype(f16), v.astype(f16),
                                                     causal=True),
     [U(1, 2, 7, 16), U(1, 2, 7, 16), U(1, 2, 7, 16)], 2e-3),
    ("training_step", lambda w, x: vg.grad(lambda w: vnp.mean(vnp.tanh(
        x.astype(f16) @ w.astype(f16)).astype(f32) ** 2))(w), [U(33, 7), U(5, 33)], 2e-3),
    ("layout", lambda x, y: (vnp.concatenate([x.astype(bf16), y.astype(bf16)], axis=0),
                             vnp.pad(x.astype(f16), ((1, 2), (0, 3)))[::2, 1:],
                             vnp.transpose(x.astype(f16))), [U(7, 33), U(3, 33)], 1e-2),
    ("cumsum_sort", lambda x: (vnp.cumsum(x.astype(f16), axis=1), vnp.sort(x.astype(bf16), axis=1),
                               vnp.argsort(x.astype(f16), axis=1)), [U(7, 33)], 2e-3),
    ("norm_and_gradients", lambda x, w, t, i: vg.grad(lambda w, t: vnp.sum(
        nn.layer_norm(x.astype(f16), w.astype(f16)).astype(f32) ** 2) + vnp.sum(
        nn.embedding(t.astype(bf16), i).astype(f32) ** 2), argnums=(0, 1))(w, t),
     [U(7, 33), U(33), U(11, 6), np.array([3, 0, 10, 3], np.int32)], 1e-2),
    ("attention_gradient", lambda q, k, v: vg.grad(lambda q, k, v: vnp.sum(nn.flash_attention(
        q.astype(f16), k.astype(f16), v.astype(f16)).astype(f32) ** 2), argnums=(0, 1, 2))(
        q, k, v), [U(1, 2, 7, 16), U(1, 2, 9, 16), U(1, 2, 9, 16)], 1e-2),
    ("selective_scan", lambda u, d, a, b, c: nn.selective_scan(
        u.astype(f16), vnp.abs(d.astype(f16)), -vnp.abs(a.astype(f16)), b.astype(f16),
        c.astype(f16)), [U(1, 5, 9), U(1, 5, 9), U(5, 4), U(1, 4, 9), U(1, 4, 9)], 2e-3),
]


@pytest.mark.parametrize("name,f,args,rtol", KERNELS, ids=[k[0] for k in KERNELS])
def test_kernels_on_vulkan_match_the_interpreter(name, f, args, rtol):
    want = _jit(f)(*args)
    on_gpu = _jit(f, "vulkan")
    got = on_gpu(*args)
    assert on_gpu.lower(*args).fallback_reason is None
    got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        scale = max(1.0, float(np.max(np.abs(w.astype(np.float32)))))
        np.testing.assert_allclose(g.astype(np.float32), w.astype(np.float32), rtol=rtol,
                                   atol=rtol * scale, err_msg=name)


def test_16_bit_buffers_are_packed_two_to_a_word():
    f = _jit(lambda x: (x.astype(f16), x * 2), "vulkan")
    plan = f.lower(U(7, 33)).stages["plan"]
    halves = [s for s in plan.slots if s.dtype == "f16"]
    assert halves and all(s.nbytes == (s.size + 1) // 2 * 4 for s in halves)
    # one element width per buffer: no 16-bit value shares a buffer with a 32-bit one
    for s in plan.slots:
        widths = {v.dtype in ("f16", "bf16") for v, _, _ in s.values if hasattr(v, "dtype")}
        assert len(widths) <= 1


def test_16_bit_arguments_and_results_cross_to_the_device_exactly():
    """Every f16 bit pattern but the NaNs survives an upload and a download unchanged."""
    bits = np.arange(0, 2 ** 16, dtype=np.uint16)
    x = bits.view(np.float16)
    x = x[~np.isnan(x)][:1001]               # an odd count: the last word half used
    got = np.asarray(_jit(lambda a: vnp.negative(vnp.negative(a)), "vulkan")(x))
    np.testing.assert_array_equal(got.view(np.uint16), x.view(np.uint16))


@pytest.mark.parametrize("dtype", [f16, bf16])
def test_debug_nans_sees_16_bit_results(dtype):
    """nan_check reads both halves of each word of an odd-sized f16 or bf16 result: a NaN in
    either is found, and the eqn that made it named."""
    f = _jit(lambda x: vnp.log(x.astype(dtype) - 1), "vulkan")
    old = vg.debug_nans(True)
    try:
        np.asarray(f(np.array([2.0, 3.0, 5.0, 9.0, 4.0], np.float32)))   # finite: no error
        for bad in (4, 1):     # the low half of the last word, the high half of the first
            x = np.array([2.0, 3.0, 5.0, 9.0, 4.0], np.float32)
            x[bad] = 0.5
            with pytest.raises(vg.runtime.errors.NaNError, match="log"):
                np.asarray(f(x))       # (the check's error comes with the result)
    finally:
        vg.debug_nans(old)


WIDEN_IN = """\
program f(%0: f16[5,33], %1: f16[33,7]) -> (f16[5,7], bf16[5]) {
  %2: f16[5,7] = matmul %0, %1
  %3: bf16[5,33] = convert[dtype=bf16] %0
  %4: bf16[5] = reduce_sum[axes=(1,)] %3
  return %2, %4
}
"""
WIDEN_OUT = """\
program f(%0: f16[5,33], %1: f16[33,7]) -> (f16[5,7], bf16[5]) {
  %2: f32[5,33] = convert[dtype=f32] %0
  %3: f32[33,7] = convert[dtype=f32] %1
  %4: f32[5,7] = matmul %2, %3
  %5: f16[5,7] = convert[dtype=f16] %4
  %6: bf16[5,33] = convert[dtype=bf16] %0
  %7: f32[5,33] = convert[dtype=f32] %6
  %8: f32[5] = reduce_sum[axes=(1,)] %7
  %9: bf16[5] = convert[dtype=bf16] %8
  return %5, %9
}
"""


def test_widen_halves_converts_around_kernels_that_take_f32():
    """The pass's golden text: a kernel whose contract lists f32 only gets converts to f32
    before it and back after it; elementwise eqns (the generated kernels) are left alone."""
    out = widen_halves.apply(parse_program(WIDEN_IN))
    assert print_program(out) == WIDEN_OUT
    x = [np.linspace(-1, 1, 165).reshape(5, 33).astype(f16), np.full((33, 7), 0.25, f16)]
    for a, b in zip(vg.run_program(parse_program(WIDEN_IN), *x), vg.run_program(out, *x)):
        np.testing.assert_array_equal(a, b)      # the same values: the interpreter widens too


def test_a_fused_kernel_keeps_16_bit_intermediates_in_f32_and_rounds_where_they_leave():
    """Excess precision, XLA's GPU default (docs/kernels.md, "16-bit storage"): inside one
    generated kernel a bf16 intermediate keeps its f32 value; it is rounded at an explicit
    convert and where it is stored. (1.5 + 256) - 256 in bf16: the interpreter rounds 257.5 to
    258 (bf16 keeps 8 bits) and gives 2; the kernel gives 1.5. The shader rounds only at the
    convert."""
    def f(x):
        return (x + 256.0) - 256.0, (x.astype(f32) + 0.25).astype(bf16)

    x = np.array([1.5, -1.5], bf16)
    on_vulkan = vg.jit(f, backend="vulkan")(x)
    on_numpy = vg.jit(f, backend="numpy")(x)
    np.testing.assert_array_equal(np.asarray(on_vulkan[0], np.float32), [1.5, -1.5])
    np.testing.assert_array_equal(np.asarray(on_numpy[0], np.float32), [2.0, -2.0])
    for got in (on_vulkan[1], on_numpy[1]):      # 1.75 and -1.25 are bf16 values
        np.testing.assert_array_equal(np.asarray(got, np.float32), [1.75, -1.25])
    glsl = run_stages(vg.make_ir(f)(x), "glsl", Options(target=Target.h200()))["glsl"]
    text = glsl.text() if hasattr(glsl, "text") else str(glsl)
    assert text.count("vkg_round_bf16(") - text.count("float vkg_round_bf16(") == 1


def test_a_kernel_stores_16_bit_results_through_its_epilogue():
    """A hand-written kernel's f32 result rounded to 16 bits where it is stored: 16-bit stores
    (lowering/hooks.py) where the Target has 16-bit storage, so no kernel of its own for the
    convert. A matmul plus a residual into f16 (odd sizes: threads store neighbouring halves
    of one word; the f32 residual is never overwritten by the 16-bit result), a softmax into
    bf16, past f16's range to inf, against the interpreter."""
    def f(a, b, r, x):
        return ((a @ b + r).astype(f16), vnp.softmax(x, axis=-1).astype(bf16),
                (a @ b * 7e4).astype(f16))

    args = [U(7, 33), U(33, 5), U(7, 5), U(3, 131)]
    on_gpu = _jit(f, "vulkan")
    plan = on_gpu.lower(*args).stages["plan"]
    kernels = [s.launch.name for s in plan.steps]
    assert not any(k.startswith("fused") for k in kernels), kernels   # no convert kernel
    got, want = on_gpu(*args), _jit(f)(*args)
    for g, w, tol in zip(got, want, (2e-3, 1e-2, 2e-3)):
        g, w = np.asarray(g).astype(np.float32), np.asarray(w).astype(np.float32)
        assert np.array_equal(np.isinf(g), np.isinf(w))
        fin = np.isfinite(w)
        np.testing.assert_allclose(g[fin], w[fin], rtol=tol, atol=tol * np.abs(w[fin]).max())
    assert np.isinf(np.asarray(got[2], np.float32)).any()


WIDE_PRODUCTS = {
    "matmul": lambda a, b: vnp.matmul(a, b, preferred_element_type=f32),
    "einsum": lambda a, b: vnp.einsum("ij,jk->ik", a, b, preferred_element_type=f32),
    "dot_general": lambda a, b: vg.lax.dot_general(a, b, (((1,), (0,)), ((), ())),
                                                   preferred_element_type=f32),
    "tensordot": lambda a, b: vnp.tensordot(a, b, 1, preferred_element_type=f32),
    "dot": lambda a, b: vnp.dot(a, b, preferred_element_type=f32),
}


@pytest.mark.parametrize("name", list(WIDE_PRODUCTS))
def test_preferred_float32_keeps_the_accumulator_of_16_bit_products(name):
    """JAX's preferred_element_type=float32 on f16 operands: the f32 sums as they are, not
    rounded to f16 first. Integer sums between 2048 and 4096, odd ones among them (f16 holds
    only the even ones there), are exact in f32; the product stays a 16-bit matmul (the
    primitive's own parameter)."""
    r = np.random.default_rng(3)
    a = r.integers(4, 9, (5, 64)).astype(np.float16)
    b = r.integers(4, 9, (64, 7)).astype(np.float16)
    want = a.astype(np.float32) @ b.astype(np.float32)
    assert (want > 2048).all() and (want % 2 == 1).any()
    fn = WIDE_PRODUCTS[name]
    for backend in ("numpy", "vulkan"):
        got = np.asarray(vg.jit(fn, backend=backend)(a, b))
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, want)
    (e,) = [e for e in vg.make_ir(fn)(a, b).eqns if e.prim.name == "matmul"]
    assert e.inputs[0].dtype == "f16" and e.params["preferred_element_type"] == "f32"
