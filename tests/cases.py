"""The one table of cases (minitorch's style): one row per function over vkgrad.numpy, checked
every way that applies to it.

    tests/test_core_table.py   the traced program, and its optimised form, run on the numpy
                               interpreter equal the eager evaluation (float32), and numpy's own
                               function where the row gives one (shape, dtype, values);
                               print -> parse -> print is the identity; derivatives against
                               central finite differences in float64 (vg.check_grads, order 1
                               and 2) and forward mode against reverse mode.
    tests/test_vulkan_ops.py   vg.jit on Vulkan against vg.jit on the interpreter (float32), with
                               no fallback to the interpreter.

Both files also check completeness: every primitive is run by some row's program on the
interpreter, on Vulkan, and (where it has a VJP rule) under a gradient check. A new primitive
fails those until it has rows here.

A row:
    name     unique; seeds its arguments (the same values on every run and in every check)
    fun      the function, over vkgrad.numpy
    args     argument makers, rng -> float64 or int32 array (or a pytree of them). Float arrays
             are made float64 (gradient checks) and cast to float32 for the other checks.
    numpy    numpy's own function, for rows that check vkgrad.numpy's numpy semantics
    grad     the highest derivative order checked: 2 by default; 1 for the awkward-size rows
             (their second derivatives are the small rows'); 0 where there is nothing to
             differentiate (integer or boolean results, integer arguments only) or where finite
             differences cannot see the derivative (say why beside the row)
    tol      check_grads tolerances (atol, rtol, eps)
    text     False where the program holds a custom_vjp/custom_jvp call, whose rule is Python
             code the parser cannot rebuild (the round trip is skipped)
    modes    the modes checked: ("fwd", "rev"), or ("rev",) where forward mode cannot run (it
             is derived from the backward, so it needs the backward primitive's own VJP);
             forward mode against reverse mode is checked where both run
    vulkan   True (the default): run on Vulkan, within vk_rtol (atol: vk_rtol / 10, times the
             result's largest magnitude). Or the name of a row whose Vulkan run already covers
             this one's lowering (the same kernels and layout primitives, other sizes; checked
             by test_vulkan_ops). Each row on Vulkan compiles a shader or two: running all 105
             rows of the interpreter's tables there compiled 117 more shaders, +42 s on a cold
             cache on a 2-core machine (+3 s warm), so a row runs there when it adds something.
             False where Vulkan cannot run it (say why).

Shapes: gradient rows use small distinct sizes (m != k != n), so a swapped operand cannot pass by
accident; Vulkan rows use awkward sizes (1, 7, 33, 130, 257: not multiples of a workgroup or a
tile, a single row or column) to hit every edge of the kernels' tiling.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

import vkgrad as vg
import vkgrad.nn as nn
import vkgrad.numpy as vnp
from vkgrad.tracer.pytree import tree_map


# ----------------------------------------------------------------------------- argument makers
# Each returns a function of an rng: a float64 array (or int32 for indices).

def F(*shape):                       # standard normal
    return lambda r: r.standard_normal(shape)


def U(*shape, lo=-2.0, hi=2.0):      # uniform: the Vulkan rows' values
    return lambda r: r.uniform(lo, hi, shape)


def Pos(*shape, lo=0.5, hi=2.0):     # positive: log, sqrt, fractional powers
    return lambda r: r.uniform(lo, hi, shape)


def NZ(*shape):                      # |x| in [0.5, 1.5): away from the kinks of abs, relu, sign
    return lambda r: r.choice([-1.0, 1.0], shape) * r.uniform(0.5, 1.5, shape)


def Few(*shape, k=3):                # floats from {0, ..., k-1}: equal elements, ties
    return lambda r: r.integers(0, k, shape).astype(np.float64)


def I(*shape, lo=0, hi):             # int32 indices / labels / integers in [lo, hi)
    return lambda r: r.integers(lo, hi, shape).astype(np.int32)


def Frac(*shape):                    # k + f, f in [0.1, 0.4]: away from the steps of floor,
    return lambda r: (r.integers(-3, 3, shape) + r.uniform(0.1, 0.4, shape))   # ceil, round


def Const(value, dtype=None):        # a fixed array (indices chosen by hand)
    a = np.asarray(value, dtype)
    return lambda r: a.copy()


@dataclass
class Case:
    name: str
    fun: Callable
    args: list
    numpy: Callable | None = None
    grad: int = 2
    tol: dict = field(default_factory=dict)
    modes: tuple = ("fwd", "rev")
    vulkan: bool | str = True
    vk_rtol: float = 2e-5
    text: bool = True     # print -> parse -> print; False where params hold Python functions

    def make_args(self) -> list:
        """The arguments, float64 (and int32)."""
        rng = np.random.default_rng(zlib.crc32(self.name.encode()))
        return [a(rng) for a in self.args]

    def args32(self) -> list:
        """The arguments with float arrays cast to float32: the eager, interpreter, numpy and
        Vulkan runs."""
        return [to_float32(a) for a in self.make_args()]

    def __repr__(self) -> str:
        return f"Case({self.name})"


def to_float32(tree):
    return tree_map(lambda x: np.asarray(x, np.float32) if np.asarray(x).dtype.kind == "f"
                    else x, tree)


NOGRAD = dict(grad=0)   # integer or boolean results, or integer arguments only


def assert_same(got, want, rtol, atol, what):
    """Same shape and dtype; integers and bools equal, floats within rtol and atol times the
    largest magnitude (at least 1)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, \
        f"{what}: got {got.dtype}{list(got.shape)}, want {want.dtype}{list(want.shape)}"
    if want.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want, err_msg=what)
    else:
        scale = max(1.0, float(np.max(np.abs(want))) if want.size else 1.0)
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol * scale, err_msg=what)


# ----------------------------------------------------------------------------- functions

def _mlp(params, x, labels):
    (w1, b1), (w2, b2) = params["l1"], params["l2"]
    h = nn.relu(x @ w1 + b1)
    return nn.cross_entropy(h @ w2 + b2, labels)


def _attention(q, k, v):
    d = q.shape[-1]
    s = q @ k.T / d ** 0.5           # a Python float: weakly typed, float32 stays float32
    i, j = vnp.arange(q.shape[0])[:, None], vnp.arange(k.shape[0])[None, :]
    s = vnp.where(j <= i, s, -1e9)                       # causal mask
    return vnp.softmax(s, axis=-1) @ v


def _layernorm(x, g, b):
    mu = vnp.mean(x, axis=-1, keepdims=True)
    var = vnp.var(x, axis=-1, keepdims=True)
    return (x - mu) / vnp.sqrt(var + 1e-5) * g + b


def _np_softmax(x, axis):
    e = np.exp(x)
    return e / e.sum(axis, keepdims=True)


# ----------------------------------------------------------------------------- the table

CASES = [
    # --- elementwise arithmetic
    Case("add_mul", lambda x, y: x * y + x, [F(3, 4), F(3, 4)], vulkan="sub_mul_div"),
    Case("sub_div", lambda x, y: (x - y) / (y * y + 1.0), [F(3, 4), F(3, 4)], vulkan="sub_mul_div"),
    Case("sub_mul_div", lambda x, y: (x - y) * x / (y * y + 1.0), [U(257), U(257)], grad=1),
    Case("div_positive", lambda x, p: x / p - p / x.sum(), [Pos(2, 3), Pos(2, 3)],
         vulkan="max_min_mean"),
    Case("neg_neg", lambda x: -(-x) * 3.0 - x, [F(3)], vulkan="unary"),
    Case("python_scalars", lambda x: 2.0 * x + 1 - x / 4 + 3 ** x, [F(2, 3)]),
    Case("scalar_math", lambda x: x * 3.0 + 1.0, [Const(2.5)], grad=1),
    # --- powers
    Case("int_powers", lambda x, z: x ** 2 + x ** 3 + z ** -1, [F(5), NZ(5)]),
    Case("float_powers", lambda p: p ** 1.5 + p ** 0.5, [Pos(4, 2)], vulkan="pow"),
    Case("pow_both", lambda p, y: p ** y, [Pos(3, 2), F(3, 2)], vulkan="pow"),
    Case("rpow", lambda x: 2.0 ** x, [F(4)], vulkan="python_scalars"),
    Case("pow", lambda x, y: x ** y, [Pos(33, lo=0.1, hi=3.0), U(33)], grad=1),
    Case("pow_int_exponent", lambda x: x ** 3.0 + x ** 2, [U(130)], grad=1),
    Case("power_int", lambda x: x ** 3 - x ** -2, [F(3, 4)], numpy=lambda x: x ** 3 - x ** -2.0,
         vulkan="int_powers"),
    # --- unary functions
    Case("exp_log_log1p", lambda x, p: vnp.log(vnp.exp(x) + 1.0) + vnp.log1p(p),
         [F(2, 5), Pos(2, 5)], vulkan="log_sqrt_log1p"),
    Case("log_sqrt_log1p", lambda x: vnp.log(x) + vnp.sqrt(x) + vnp.log1p(x) + vnp.log1p(x * 1e-4),
         [Pos(130, lo=0.1, hi=3.0)], grad=1),
    Case("trig", lambda x: vnp.tanh(x) * vnp.sin(x) + vnp.cos(2 * x), [F(3, 3)], vulkan="unary"),
    Case("unary", lambda x: vnp.exp(-x) + vnp.tanh(x) + vnp.sin(x) * vnp.cos(x) + vnp.abs(x)
         + vnp.sign(x) - x, [U(33, 7)], grad=1),
    Case("tanh_large", lambda x: vnp.tanh(x * 100.0), [U(33)], grad=1),
    Case("sigmoid", lambda x: nn.sigmoid(x), [F(2, 4)], vulkan="unary"),
    Case("sqrt_square", lambda p, x: vnp.sqrt(p) * vnp.square(x), [Pos(6), F(6)],
         vulkan="log_sqrt_log1p"),
    Case("square_sqrt", lambda x: vnp.sqrt(vnp.square(x)), [F(3, 4)],
         numpy=lambda x: np.sqrt(np.square(x)), vulkan="log_sqrt_log1p"),
    Case("abs_sign", lambda z: vnp.abs(z) + vnp.sign(z) * z, [NZ(2, 3)], vulkan="unary"),
    Case("abs_sign_int", lambda i: vnp.abs(i - 1) * vnp.sign(i - 1), [Const([2, 0, 1], np.int32)],
         numpy=lambda i: np.abs(i - 1) * np.sign(i - 1), **NOGRAD),
    # stop_gradient: finite differences see the identity, not the zero derivative, so the row
    # that runs it on Vulkan is not gradient-checked; logsumexp's rows check it under grad.
    Case("stop_gradient", lambda x: vnp.stop_gradient(x) * 2.0, [U(7)], **NOGRAD),
    # --- maximum, minimum, clip, relu
    Case("maximum_minimum", lambda x, y: vnp.maximum(x, y) - vnp.minimum(x, 0.3),
         [NZ(4, 3), NZ(4, 3)], vulkan="max_min"),
    Case("max_min", lambda x, y: vnp.maximum(x, y) - vnp.minimum(x, 0.5), [U(7), U(1)], grad=1),
    Case("relu", lambda z: nn.relu(z), [NZ(3, 5)], vulkan="clip_relu"),
    Case("clip", lambda z: vnp.clip(z * 0.4, -0.5, 0.5) + vnp.clip(z, None, 0.0), [NZ(7)],
         vulkan="clip_relu"),
    Case("clip_vs_numpy", lambda x: vnp.clip(x, -0.5, 0.5), [F(3, 4)],
         numpy=lambda x: np.clip(x, -0.5, 0.5), vulkan="clip_relu"),
    Case("clip_relu", lambda x: vnp.clip(x, -0.5, 0.7) + vnp.maximum(x, 0.0), [U(257, 1)], grad=1),
    # --- comparisons, logic, where
    Case("greater", lambda x, y: x > y, [F(3, 4), F(3, 4)], numpy=np.greater, **NOGRAD,
         vulkan="compare_where"),
    Case("less_equal_scalar", lambda x: x <= 0.1, [F(3, 4)],
         numpy=lambda x: x <= np.float32(0.1), **NOGRAD, vulkan="compare_where"),
    Case("equal_not_equal", lambda x, y: (x == y) | (x != x), [Few(3, 4), Few(3, 4)],
         numpy=lambda x, y: (x == y) | (x != x), **NOGRAD, vulkan="compare_where"),
    Case("bool_output", lambda x: x > 0.25, [U(33)], **NOGRAD),
    Case("logical", lambda x: vnp.logical_not((x > 0) & (x < 1)) | (x > 2), [F(3, 4)],
         numpy=lambda x: ~((x > 0) & (x < 1)) | (x > 2), **NOGRAD),
    Case("logical_mask", lambda x, y: vnp.where((x > 0) & (y < 0), x, y * 2), [NZ(5), NZ(5)],
         vulkan="logical"),
    Case("where", lambda z: vnp.where(z > 0, z * z, -z), [NZ(4, 2)], vulkan="compare_where"),
    Case("where_bool", lambda x: vnp.where(x > 0, 1.0, -1.0), [F(3, 4)],   # zero gradient
         numpy=lambda x: np.where(x > 0, 1.0, -1.0).astype(np.float32), vulkan="compare_where"),
    Case("where_int_cond", lambda i: vnp.where(i, 3, 4), [Const([2, 0, 1], np.int32)],
         numpy=lambda i: np.where(i, 3, 4).astype(np.int32), **NOGRAD),
    Case("compare_where", lambda x, y: vnp.where((x < y) | (x == 0.5), x, y * 2.0)
         + vnp.where(x >= y, 1.0, 0.0) + (x != y).astype(np.float32), [U(7, 130), U(130)], grad=1),
    # --- dtypes: integer arithmetic, conversions
    Case("int_ops", lambda i, j: (i * j + i - 3) * (i < j) + vnp.maximum(i, j),
         [I(33, lo=-5, hi=6), I(33, lo=-5, hi=6)], **NOGRAD),
    # bitwise: shifts by amounts outside [0, 32) too (left: 0, right: the sign), as numpy's
    Case("bitwise", lambda i, j: (i & j, i | j, i ^ j, (i * 99991) << j, (i * 99991) >> j),
         [I(7, 33, lo=-40, hi=40), I(33, lo=-3, hi=36)],
         numpy=lambda i, j: (i & j, i | j, i ^ j, np.left_shift(i * 99991, np.where(
             (j >= 0) & (j < 32), j, 0)) * ((j >= 0) & (j < 32)),
             np.right_shift(i * 99991, np.where((j >= 0) & (j < 32), j, 31))), **NOGRAD),
    Case("convert", lambda x, i: x.astype(np.int32) + i + (x > 0).astype(np.int32),
         [U(130), I(130, lo=-5, hi=6)], **NOGRAD),
    Case("int_to_float", lambda i: i.astype(np.float32) * 0.5, [I(7, 7, lo=-5, hi=6)], **NOGRAD),
    Case("astype", lambda x: (x * 10).astype(vnp.int32), [F(3, 4)],
         numpy=lambda x: (x * 10).astype(np.int32), **NOGRAD, vulkan="convert"),
    Case("astype_bool", lambda x: x.astype(bool), [F(3, 4)], numpy=lambda x: x.astype(bool),
         **NOGRAD),
    # --- 16-bit floats: computed in f32, each result rounded (tests/test_float16.py has their
    # semantics). grad=0: a rounding to 16 bits is a step that finite differences cannot
    # differentiate through; test_float16.py checks the casts' gradients by hand.
    Case("f16_chain", lambda x, y: vnp.tanh(x.astype(vnp.float16)) * y.astype(vnp.float16) + 0.5,
         [U(7, 130), U(130)], numpy=lambda x, y: (np.tanh(x.astype(np.float16)) *
                                                  y.astype(np.float16) + 0.5), grad=0,
         vk_rtol=2e-3),
    Case("bf16_chain", lambda x, y: (vnp.exp(x.astype(vnp.bfloat16)) - 2 * y.astype(vnp.bfloat16),
                                     x.astype(vnp.float16) + y.astype(vnp.bfloat16)),
         [U(7, 33), U(33)], grad=0, vk_rtol=1e-2),
    Case("f16_matmul_softmax", lambda a, b: vnp.softmax(a.astype(vnp.float16) @
                                                        b.astype(vnp.float16), axis=-1),
         [U(5, 33), U(33, 7)], grad=0, vk_rtol=2e-3),
    # --- broadcasting, both ways (forward broadcast = backward reduction)
    Case("bias_row", lambda x, b: x + b, [F(3, 4), F(4)], vulkan="add_bcast"),
    Case("scale_col", lambda x, c: x * c, [F(3, 4), F(3, 1)], vulkan="add_bcast_col"),
    Case("outer", lambda a, b: a * b, [F(3, 1), F(1, 4)], vulkan="add_bcast_col"),
    Case("scalar_array", lambda x, s: x * s + s, [F(2, 3), F()]),
    Case("broadcast_3d", lambda x, y, z: x + y - z, [F(2, 3, 4), F(3, 1), F(4)]),
    Case("add_bcast", lambda x, y: x + y, [U(7, 33), U(33)], grad=1),
    Case("add_bcast_col", lambda x, y: x + y, [U(130, 1), U(1, 257)], grad=1),
    Case("broadcast_to", lambda b, x: vnp.broadcast_to(b, (3, 4)) * x, [F(4), F(3, 4)],
         vulkan="broadcast_to_awkward"),
    Case("broadcast_to_awkward", lambda x: vnp.broadcast_to(x, (7, 130)) * 1.5, [U(130)], grad=1),
    # --- reductions: every axis, keepdims, non-adjacent axes
    Case("sum_all", lambda x: vnp.sum(x * x), [F(3, 4)], vulkan="sum_all_awkward"),
    Case("sum_all_awkward", lambda x: vnp.sum(x), [U(130, 33)], grad=1),
    Case("long_sum", lambda x: vnp.sum(x * x), [U(300_000)], grad=1),
    Case("sum_axis0", lambda x: vnp.sum(x, axis=0), [F(3, 4)], vulkan="sum_axis0_awkward"),
    Case("sum_axis0_awkward", lambda x: vnp.sum(x, axis=0), [U(257, 7)], grad=1),
    Case("sum_axis1_keepdims", lambda x: vnp.sum(x, axis=1, keepdims=True) * x, [F(3, 4)],
         vulkan="sum_axis1_keep"),
    Case("sum_axis1_keep", lambda x: vnp.sum(x, axis=1, keepdims=True), [U(33, 257)], grad=1),
    Case("sum_middle", lambda x: vnp.sum(x, axis=1), [U(7, 33, 5)], grad=1),
    Case("sum_axes_0_2", lambda x: vnp.sum(x, axis=(0, 2)), [F(2, 3, 4)], vulkan="sum_outer_axes"),
    Case("sum_outer_axes", lambda x: vnp.sum(x, axis=(0, 2)), [U(7, 33, 5)], grad=1),
    Case("sum_axis_neg", lambda x: x.sum(axis=-1), [F(2, 3, 4)], vulkan="sum_axis1_keep"),
    Case("mean_axis0", lambda x: vnp.mean(x, axis=0) + x.mean(), [F(3, 4)], vulkan="max_min_mean"),
    Case("mean_int", lambda i: vnp.mean(i), [Const([2, 0, 1], np.int32)],
         numpy=lambda i: np.float32(np.mean(i)), **NOGRAD, vulkan="sum_all_awkward"),
    Case("var", lambda x: vnp.var(x, axis=1) + vnp.var(x), [F(3, 5)], vulkan="var_awkward"),
    Case("var_awkward", lambda x: vnp.var(x, axis=0), [U(130, 7)], grad=1),
    Case("var_ddof_std", lambda x: vnp.var(x, axis=0, ddof=1) + vnp.std(x), [F(3, 4)],
         numpy=lambda x: np.var(x, axis=0, ddof=1) + np.std(x), vulkan="var_awkward"),
    Case("max_axis1", lambda x: vnp.max(x, axis=1), [F(3, 4)], vulkan="max_min_mean"),
    Case("min_axis0_keepdims", lambda x: vnp.min(x, axis=0, keepdims=True) * x, [F(3, 4)]),
    Case("max_all", lambda x: x.max() - x.min(axis=(0, 2)), [F(2, 3, 4)]),
    Case("max_min_mean", lambda x: vnp.max(x, axis=-1) + vnp.min(x, axis=0).sum() + vnp.mean(x),
         [U(33, 130)], grad=1),
    Case("max_int_keepdims", lambda i: vnp.max(i, keepdims=True),
         [Const([[0, 2], [1, 1]], np.int32)], numpy=lambda i: np.max(i, keepdims=True), **NOGRAD,
         vulkan=False),   # falls back: the reduction kernels compute in f32
    Case("argmax_argmin", lambda x: (vnp.argmax(x, axis=1), vnp.argmin(x, axis=0), vnp.argmax(x)),
         [U(7, 33)], **NOGRAD),
    # --- matmul: every transpose combination, batched, vectors (the awkward grid is below)
    Case("matmul_nn", lambda a, b: a @ b, [F(3, 4), F(4, 5)], vulkan="matmul_33x130x7_NN"),
    Case("matmul_nt", lambda a, b: a @ b.T, [F(3, 4), F(5, 4)], vulkan="matmul_33x130x7_NT"),
    Case("matmul_tn", lambda a, b: a.T @ b, [F(4, 3), F(4, 5)], vulkan="matmul_33x130x7_TN"),
    Case("matmul_tt", lambda a, b: a.T @ b.T, [F(4, 3), F(5, 4)], vulkan="matmul_33x130x7_TT"),
    Case("matmul_batched", lambda a, b: a @ b, [F(2, 3, 4), F(2, 4, 5)],
         vulkan="matmul_batched_awkward"),
    Case("matmul_batched_awkward", lambda a, b: a @ b, [U(3, 7, 33), U(3, 33, 5)], grad=1),
    Case("matmul_batched_TT", lambda a, b: vnp.swapaxes(a, 1, 2) @ vnp.swapaxes(b, 1, 2),
         [U(2, 33, 7), U(2, 5, 33)], grad=1),
    Case("matmul_batched_by_2d", lambda a, w: a @ w, [F(2, 3, 4), F(4, 5)],
         vulkan="matmul_bcast_batch"),
    Case("matmul_bcast_batch", lambda a, b: a @ b, [U(4, 7, 33), U(33, 5)], grad=1),
    Case("matmul_batch_broadcast", lambda a, b: vnp.matmul(a, b), [F(2, 1, 3, 4), F(3, 4, 5)]),
    Case("matmul_batched_nt", lambda a, b: a @ b.swapaxes(-1, -2), [F(2, 3, 4), F(2, 5, 4)],
         vulkan="matmul_batched_TT"),
    Case("matmul_batched_4d", lambda x: vnp.matmul(x[:, None], x.transpose(0, 2, 1)), [F(2, 3, 4)],
         numpy=lambda x: np.matmul(x[:, None], x.transpose(0, 2, 1))),
    Case("matvec", lambda a, v: a @ v, [F(3, 4), F(4)], vulkan="matvec_awkward"),
    Case("matvec_awkward", lambda a, v: a @ v, [U(33, 130), U(130)], grad=1),
    Case("vecmat", lambda v, a: v @ a, [F(3), F(3, 4)]),
    Case("dot_vectors", lambda u, v: vnp.dot(u, v), [F(4), F(4)]),
    Case("matmul_vectors", lambda x: vnp.matmul(x[0], x[1]), [F(3, 4)],
         numpy=lambda x: np.matmul(x[0], x[1]), vulkan="transpose_to_matmul"),
    Case("dot_matrix", lambda x, y: vnp.dot(x, y.T), [F(3, 4), F(3, 4)],
         numpy=lambda x, y: np.dot(x, y.T), vulkan="matmul_33x130x7_NT"),
    Case("transpose_to_matmul", lambda x, w: vnp.transpose(x, (1, 0, 2))[0] @ w,
         [U(7, 5, 33), U(33, 7)], grad=1),
    # --- softmax family
    Case("softmax_last", lambda x: vnp.softmax(x, axis=-1), [F(3, 5)], vulkan="softmax"),
    Case("softmax_axis0", lambda x: vnp.softmax(x, axis=0), [F(3, 5)], vulkan="softmax_3d_middle"),
    Case("softmax_3d_middle", lambda x: vnp.softmax(x, axis=1), [F(2, 3, 4)]),
    Case("softmax", lambda x: vnp.softmax(x, axis=-1), [U(7, 257)], grad=1),
    Case("softmax_vs_numpy", lambda x: vnp.softmax(x, axis=1), [F(2, 3, 4)],
         numpy=lambda x: _np_softmax(x, 1), vulkan="softmax_3d_middle"),
    Case("long_row_softmax", lambda x: vnp.softmax(x, axis=-1), [U(3, 3000)], grad=1),
    Case("log_softmax", lambda x: vnp.log_softmax(x), [F(4, 3)], vulkan="log_softmax_grad"),
    Case("log_softmax_axis0", lambda x: vnp.log_softmax(x, axis=0), [U(130, 7)], grad=1),
    Case("log_softmax_vs_numpy", lambda x: vnp.log_softmax(x, axis=0), [F(3, 4)],
         numpy=lambda x: x - np.log(np.exp(x).sum(0, keepdims=True)), vulkan="log_softmax_axis0"),
    Case("logsumexp", lambda x: vnp.logsumexp(x, axis=1), [U(33, 130)], grad=1),
    Case("logsumexp_axis1", lambda x: vnp.logsumexp(x, axis=1), [F(3, 5)], vulkan="logsumexp"),
    Case("logsumexp_all_keepdims", lambda x: vnp.logsumexp(x, keepdims=True) * x, [F(2, 3)],
         vulkan="logsumexp"),
    Case("logsumexp_vs_numpy", lambda x: vnp.logsumexp(x, axis=(0, 2)), [F(2, 3, 4)],
         numpy=lambda x: np.log(np.exp(x).sum((0, 2)))),
    # --- indexing and slicing
    Case("index_int", lambda x: x[1] * 2 + x[-1], [F(4, 3)], vulkan="index_neg"),
    Case("index_neg", lambda x: x[-1] + x[:, -2], [U(7, 7)], grad=1),
    Case("index_slices", lambda x: x[:, 1:3].sum() + (x[::2, ::2] ** 2).sum() + x[-2:, 3],
         [F(4, 5)]),
    Case("slice_step", lambda x: x[1:6:2, ::3] * 2.0, [U(7, 33)], grad=1),
    Case("index_negative_step", lambda x, w: x[::-1] * w + x[1:, ::-2].sum(), [F(4, 3), F(3)]),
    Case("index_newaxis_ellipsis", lambda x, y: x[..., None] * y[None, None, :], [F(3, 4), F(2)],
         vulkan="matmul_batched_4d"),
    Case("index_mixed", lambda x: x[1:, None, ..., ::-2], [F(2, 3, 4)],
         numpy=lambda x: x[1:, None, ..., ::-2]),
    Case("index_int_slice", lambda x: x[-1, 1:3, 2], [F(2, 3, 4)], numpy=lambda x: x[-1, 1:3, 2],
         vulkan="index_neg"),
    Case("index_empty_slice", lambda x: x[2:1], [F(3, 4)], numpy=lambda x: x[2:1]),
    Case("index_int_array", lambda x: x[np.array([2, 0, 2])] + x[:, [1, 1, 0]].T[:, :3],
         [F(3, 3)]),
    Case("index_array_middle", lambda x: x[:, np.array([3, -1, 0])], [F(3, 4)],
         numpy=lambda x: x[:, np.array([3, -1, 0])], vulkan="index_int_array"),
    Case("index_traced_array", lambda x, i: x[i], [F(3, 4), Const([[0, 2], [1, 1]], np.int32)],
         numpy=lambda x, i: x[i], vulkan="take_rows"),
    # --- gathers (integer arguments get no gradient; check_grads holds them fixed)
    Case("take_embedding", lambda e, ids: vnp.take(e, ids, axis=0) ** 2,
         [F(10, 4), I(6, hi=10)], vulkan="take_rows"),
    Case("take_rows", lambda e, i: vnp.take(e, i, axis=0),
         [U(130, 33), Const([[3, 0], [129, 3]], np.int32)], grad=1),
    Case("take_axis1", lambda x, idx: vnp.take(x, idx, axis=1), [F(3, 5), I(2, 2, hi=5)],
         vulkan="take_axis1_awkward"),
    Case("take_axis1_awkward", lambda e, i: vnp.take(e, i, axis=1) * 2.0,
         [U(7, 33, 5), Const([1, 32, 1], np.int32)], grad=1),
    Case("take_flat", lambda x: vnp.take(x, [0, 5, 11]), [F(3, 4)],
         numpy=lambda x: np.take(x, [0, 5, 11])),
    Case("take_negative_concrete", lambda x: vnp.take(x, np.array([-1, 0]), axis=1), [F(3, 4)],
         numpy=lambda x: np.take(x, [-1, 0], axis=1), vulkan="index_int_array"),
    Case("one_hot_weighted", lambda x, lbl: vnp.sum(vnp.one_hot(lbl, 4) * x, axis=1),
         [F(5, 4), I(5, hi=4)], vulkan="mlp_cross_entropy"),
    # --- concatenate, stack
    Case("concatenate", lambda x, y: vnp.concatenate([x, y], axis=0).sum(axis=1) +
         vnp.concatenate([x, y[:2] * 2], axis=-1).sum(), [F(2, 3), F(4, 3)]),
    Case("concatenate_awkward", lambda x, y: vnp.concatenate([x, y * 2.0, x], axis=1),
         [U(7, 5), U(7, 33)], grad=1),
    Case("concatenate_none", lambda x, y: vnp.concatenate([x, y], axis=None), [F(3, 4), F(3, 4)],
         numpy=lambda x, y: np.concatenate([x, y], axis=None), vulkan="stack_neg_axis"),
    Case("stack", lambda x, y: vnp.stack([x, y, x * y], axis=1), [F(2, 3), F(2, 3)],
         vulkan="stack_awkward"),
    Case("stack_awkward", lambda x, y: vnp.stack([x, y], axis=0) + 1.0, [U(33), U(33)], grad=1),
    Case("stack_neg_axis", lambda x, y: vnp.stack([x, y], axis=-1), [F(3, 4), F(3, 4)],
         numpy=lambda x, y: np.stack([x, y], -1)),
    # --- shape ops
    Case("reshape", lambda x: x.reshape(33, 7).T + 1.0, [U(7, 33)], grad=1),
    Case("reshape_transpose", lambda x, w: x.reshape(6, 4).T @ w, [F(2, 3, 4), F(6, 2)],
         vulkan="transpose_to_matmul"),
    Case("reshape_ravel", lambda x: x.reshape(4, -1).ravel()[::5], [F(2, 3, 4)],
         numpy=lambda x: x.reshape(4, -1).ravel()[::5], vulkan="index_slices"),
    Case("transpose_perm", lambda x, y: vnp.transpose(x, (2, 0, 1)) * y, [F(2, 3, 4), F(3)],
         vulkan="transpose3"),
    Case("transpose3", lambda x: vnp.transpose(x, (2, 0, 1)) * 2.0, [U(7, 33, 5)], grad=1),
    Case("moveaxis_transpose", lambda x: vnp.moveaxis(x, 0, -1).transpose(1, 0, 2), [F(2, 3, 4)],
         numpy=lambda x: np.moveaxis(x, 0, -1).transpose(1, 0, 2), vulkan="transpose3"),
    Case("swap_expand_squeeze",
         lambda x: vnp.squeeze(vnp.swapaxes(vnp.expand_dims(x, 0), 0, 2), axis=2) * 2,
         [F(3, 4)], vulkan="reshape"),
    Case("expand_squeeze", lambda x: vnp.squeeze(vnp.expand_dims(x, (0, 3)), 0), [F(3, 4)],
         numpy=lambda x: np.squeeze(np.expand_dims(x, (0, 3)), 0), vulkan="reshape"),
    # --- creation: arange, full, one_hot
    Case("arange", lambda: vnp.arange(5), [], numpy=lambda: np.arange(5, dtype=np.int32),
         **NOGRAD),
    Case("arange_float", lambda: vnp.arange(1.0, 2.0, 0.25), [],
         numpy=lambda: np.arange(1.0, 2.0, 0.25, dtype=np.float32), **NOGRAD, vulkan="arange"),
    Case("arange_step", lambda: vnp.arange(2, 11, 3), [],
         numpy=lambda: np.arange(2, 11, 3, dtype=np.int32), **NOGRAD, vulkan="arange"),
    Case("one_hot", lambda l: vnp.one_hot(l, 4), [Const([2, 0, 1], np.int32)],
         numpy=lambda l: np.eye(4, dtype=np.float32)[l], **NOGRAD, vulkan="arange_onehot"),
    Case("arange_onehot", lambda i: vnp.one_hot(i, 7) * vnp.arange(7, dtype=np.float32),
         [Const([0, 3, 6, 6, 1], np.int32)], **NOGRAD),
    # vnp.add, not +: eagerly, + on two numpy arrays is numpy's (int32 + float32 -> float64).
    # The result does not depend on x: its gradient is checked to be zero.
    Case("full_zeros_ones",
         lambda x: vnp.add(vnp.add(vnp.full((2, 3), 7), vnp.zeros_like(x)[:2, :3]),
                           vnp.ones(3, vnp.int32)), [F(3, 4)],
         numpy=lambda x: np.full((2, 3), 8, np.float32)),
    # --- derivatives inside the program: the backward primitives run forward (and are
    # differentiated again by the gradient checks)
    Case("pad_via_slice_grad", lambda x: vg.grad(lambda y: vnp.sum(y[1:6:2] ** 2))(x), [U(7, 5)],
         grad=1),
    Case("take_grad", lambda e, i: vg.grad(lambda e: vnp.sum(vnp.take(e, i, axis=0) ** 2))(e),
         [U(33, 7), Const([3, 3, 0, 32, 3, 5, 5], np.int32)], grad=1),
    Case("softmax_grad", lambda x: vg.grad(lambda x: vnp.sum(vnp.softmax(x, axis=-1) * x))(x),
         [U(7, 33)], grad=1),
    Case("log_softmax_grad",
         lambda x: vg.grad(lambda x: vnp.sum(vnp.log_softmax(x, axis=-1)[:, 0]))(x), [U(130, 7)],
         grad=1),
    # --- small models
    Case("mlp_cross_entropy", _mlp,
         [lambda r: {"l1": (r.standard_normal((6, 5)), r.standard_normal(5)),
                     "l2": (r.standard_normal((5, 3)), r.standard_normal(3))},
          F(8, 6), I(8, hi=3)]),
    Case("attention", _attention, [F(4, 3), F(4, 3), F(4, 2)]),
    Case("layernorm", _layernorm, [F(3, 6), F(6), F(6)]),
]

# --- hand-written kernels of whole layers: flash attention, Mamba's selective scan


def _flash(q, k, v):          # q [1, 2, 5, 16], k and v [1, 2, 7, 16]: the mask is aligned at
    return nn.flash_attention(q, k, v, causal=True)       # the bottom right (Lq < Lk)


def _scan(u, delta, A, B, C, D, z, bias):
    return nn.selective_scan(u, delta, A, B, C, D, z, bias, delta_softplus=True)


def _decay(*shape):           # A < 0: each state decays
    return lambda r: -r.uniform(0.5, 2.0, shape)


CASES += [
    Case("flash_attention", _flash, [F(1, 2, 5, 16), F(1, 2, 7, 16), F(1, 2, 7, 16)]),
    # BLHD layout, more queries than keys: the first two see no key (output 0, no gradient)
    Case("flash_attention_blhd_more_queries",
         lambda q, k, v: nn.flash_attention(q, k, v, causal=True, scale=0.3, layout="BLHD"),
         [F(2, 7, 1, 16), F(2, 5, 1, 16), F(2, 5, 1, 16)]),
    # the backward primitive run forward; its own VJP checked at order 1 (3rd derivatives of
    # attention are slow for nothing)
    Case("flash_attention_grad",
         lambda q, k, v: vg.grad(lambda *a: vnp.sum(_flash(*a) ** 2), argnums=(0, 1, 2))(q, k, v),
         [F(1, 2, 5, 16), F(1, 2, 7, 16), F(1, 2, 7, 16)], grad=1),
    # selective_scan_bwd has no VJP: first derivatives, reverse mode only. L = 20 > 16 steps
    # per saved state: the backward restarts from a saved state.
    Case("selective_scan", _scan,
         [F(2, 3, 20), F(2, 3, 20), _decay(3, 4), F(2, 4, 20), F(2, 4, 20), F(3), F(2, 3, 20),
          F(3)], grad=1, modes=("rev",)),
    Case("selective_scan_fixed_BC", lambda u, dt, A, B, C: nn.selective_scan(u, dt, A, B, C),
         [F(1, 2, 6), Pos(1, 2, 6, lo=0.1, hi=1.0), _decay(2, 4), F(2, 4), F(2, 4)],
         grad=1, modes=("rev",)),
    Case("selective_scan_grad",     # no gradient check: selective_scan_bwd has no VJP rule
         lambda u, dt, A, B, C: vg.grad(lambda *a: vnp.sum(nn.selective_scan(*a) ** 2),
                                        argnums=(0, 1, 2, 3, 4))(u, dt, A, B, C),
         [F(1, 2, 6), Pos(1, 2, 6, lo=0.1, hi=1.0), _decay(2, 4), F(1, 4, 6), F(1, 4, 6)],
         **NOGRAD),
]

# --- random numbers (vg.random): the key is an argument, an i32[2] held fixed by the gradient
# checks. Integer results (bits, keys, indices) must be equal on Vulkan, bit for bit; the hash
# has no gradient, dropout's is checked (the mask is fixed by the key).
CASES += [
    Case("random_bits", lambda k: vg.random.bits(k, (7, 33)), [Const([0, 42], np.int32)],
         **NOGRAD),
    Case("random_keys", lambda k: (vg.random.split(k, 5), vg.random.fold_in(k, 7)),
         [Const([-1, 5], np.int32)], **NOGRAD),
    Case("random_uniform_normal",
         lambda k: (vg.random.uniform(k, (257,), minval=-1.0, maxval=3.0),
                    vg.random.normal(k, (130,))), [Const([3, 4], np.int32)], **NOGRAD),
    Case("random_discrete",
         lambda k, logits: (vg.random.randint(k, (33,), -3, 9), vg.random.bernoulli(k, 0.3, (7,)),
                            vg.random.categorical(k, logits), vg.random.permutation(k, 33)),
         [Const([5, 6], np.int32), F(7, 5)], **NOGRAD),
    Case("dropout", lambda x, k: nn.dropout(k, x, 0.25) * x, [F(3, 4), Const([0, 1], np.int32)],
         vulkan="dropout_awkward"),
    Case("dropout_awkward", lambda x, k: nn.dropout(k, x, 0.5), [U(33, 7), Const([2, 9], np.int32)],
         grad=1),
]

# --- vkgrad.numpy's wider surface (issue 14): rounding, hyperbolic and inverse trigonometric
# functions, float tests, compositions; small rows check gradients and numpy, the *_vk rows run
# the same kernels on awkward sizes (their derivatives are the small rows')
_INF = [0.0, np.nan, np.inf, -np.inf, 1.5, -2.5]


def _np_at(fn):
    """numpy's in-place update on a copy (the reference of the x.at rows)."""
    def run(x, *a):
        y = x.copy()
        fn(y, *a)
        return y
    return run


CASES += [
    Case("rounding", lambda x: vnp.floor(x) + 2 * vnp.ceil(x) + 3 * vnp.round(x) + vnp.trunc(x) + x,
         [Frac(3, 4)], numpy=lambda x: np.floor(x) + 2 * np.ceil(x) + 3 * np.round(x)
         + np.trunc(x) + x, vulkan="rounding_vk"),
    Case("rounding_vk", lambda x: (vnp.floor(x), vnp.ceil(x), vnp.rint(x), vnp.round(x, 1)),
         [U(130, lo=-5.0, hi=5.0)], **NOGRAD),
    Case("round_half_even", lambda x: vnp.round(x), [Const([0.5, 1.5, 2.5, -0.5, -1.5, 0.49])],
         numpy=np.round, **NOGRAD),
    Case("hyperbolic_tan", lambda x: vnp.sinh(x) + 0.5 * vnp.cosh(x) + vnp.tan(0.5 * x), [F(3, 4)],
         numpy=lambda x: np.sinh(x) + 0.5 * np.cosh(x) + np.tan(0.5 * x), vulkan="trig_vk"),
    Case("inverse_trig", lambda x: vnp.arcsin(x) + 0.5 * vnp.arccos(x) + vnp.arctan(3 * x)
         + vnp.arctanh(x), [U(3, 4, lo=-0.8, hi=0.8)], numpy=lambda x: np.arcsin(x)
         + 0.5 * np.arccos(x) + np.arctan(3 * x) + np.arctanh(x), vulkan="trig_vk"),
    Case("inverse_hyperbolic", lambda x, p: vnp.arcsinh(x) + vnp.arccosh(p + 1.0), [F(3, 4), Pos(3, 4)],
         numpy=lambda x, p: np.arcsinh(x) + np.arccosh(p + 1.0), vulkan="trig_vk"),
    Case("arctan2", lambda y, x: vnp.arctan2(y, x), [NZ(3, 4), NZ(4)], numpy=np.arctan2,
         vulkan="trig_vk"),
    # tan away from its pole at pi/2, where the H200's float32 tan (within the Vulkan spec's
    # bound) was 1e-4 off at tan(x) = 1074
    Case("trig_vk", lambda x: (vnp.tan(0.7 * x), vnp.sinh(x), vnp.cosh(x), vnp.arcsin(0.45 * x),
                               vnp.arccos(0.45 * x), vnp.arctan(x), vnp.arcsinh(10 * x),
                               vnp.arccosh(vnp.abs(x) + 1.1), vnp.arctanh(0.45 * x),
                               vnp.arctan2(x, x[::-1])), [U(257)], **NOGRAD),
    Case("float_tests", lambda x: (vnp.isnan(x), vnp.isinf(x), vnp.isfinite(x), vnp.nan_to_num(x),
                                   vnp.isclose(x, x + 1e-7), vnp.isclose(x, x, equal_nan=True),
                                   vnp.isposinf(x), vnp.isneginf(x)),
         [Const(_INF)], numpy=lambda x: (np.isnan(x), np.isinf(x), np.isfinite(x),
                                         np.nan_to_num(x), np.isclose(x, x + np.float32(1e-7)),
                                         np.isclose(x, x, equal_nan=True), np.isposinf(x),
                                         np.isneginf(x)), **NOGRAD),
    Case("exp_log_bases", lambda x, p: vnp.exp2(x) + vnp.log2(p) + vnp.log10(p) + vnp.expm1(x)
         + 1e3 * vnp.expm1(1e-3 * x) + vnp.deg2rad(x) + vnp.rad2deg(x) / 100, [F(3, 4), Pos(3, 4)],
         numpy=lambda x, p: np.exp2(x) + np.log2(p) + np.log10(p) + np.expm1(x)
         + 1e3 * np.expm1(np.float32(1e-3) * x) + np.deg2rad(x) + np.rad2deg(x) / 100,
         vulkan="trig_vk"),
    Case("logaddexp_hypot_sinc", lambda x, y: vnp.logaddexp(x, y) + vnp.hypot(x, y) + vnp.sinc(x)
         + vnp.logaddexp(x, x), [NZ(3, 4), NZ(3, 4)], numpy=lambda x, y: np.logaddexp(x, y)
         + np.hypot(x, y) + np.sinc(x) + np.logaddexp(x, x), vulkan="trig_vk"),
    Case("mod_floordiv", lambda x: x % 0.7 + x // 0.7 + vnp.fmod(x, -0.7) + vnp.remainder(2.0, x),
         [NZ(3, 4)], numpy=lambda x: x % np.float32(0.7) + x // np.float32(0.7)
         + np.fmod(x, np.float32(-0.7)) + np.remainder(np.float32(2.0), x), vulkan="int_mod"),
    Case("int_mod", lambda i: (i % 3, i // 3, vnp.fmod(i, 3), i % -4),
         [Const(np.arange(-7, 8), np.int32)], numpy=lambda i: (i % 3, i // 3, np.fmod(i, 3),
                                                                i % -4), **NOGRAD),
    # --- reductions and scans
    Case("prod_scans_diff", lambda x: (vnp.prod(x, axis=1), vnp.cumsum(x, axis=0),
                                       vnp.cumprod(x, axis=1), vnp.diff(x, axis=1),
                                       x.prod(), x.cumsum()),
         [F(3, 5)], numpy=lambda x: (np.prod(x, axis=1), np.cumsum(x, axis=0),
                                     np.cumprod(x, axis=1), np.diff(x, axis=1), x.prod(),
                                     x.cumsum()), vulkan="scans_vk"),
    Case("prod_with_zeros", lambda x: vnp.prod(x, axis=1) + vnp.cumprod(x, axis=1).sum(),
         [Const([[0.0, 2.0, 3.0], [1.5, -2.0, 0.0], [0.5, 0.0, 0.0]])], vulkan="scans_vk"),
    Case("scans_vk", lambda x: (vnp.cumsum(x, axis=1), vnp.cumprod(0.1 * x + 1, axis=0).sum(1),
                                vnp.prod(0.1 * x + 1, axis=1), vnp.diff(x, 2, axis=0),
                                vnp.cumsum(x, axis=0), vnp.cumsum(x > 0.5, axis=1)),
         [U(7, 33)], **NOGRAD),
    Case("any_all_count", lambda x: (vnp.any(x > 1, axis=0), vnp.all(x > -1, axis=1),
                                     vnp.any(x > 9), vnp.count_nonzero(x > 0, axis=1)),
         [F(3, 4)], numpy=lambda x: (np.any(x > 1, axis=0), np.all(x > -1, axis=1), np.any(x > 9),
                                     np.count_nonzero(x > 0, axis=1).astype(np.int32)),
         **NOGRAD),
    Case("average_var_std_nan", lambda x: (vnp.average(x, axis=1, weights=np.float32([1, 2, 3, 4])),
                                           vnp.var(x, axis=0, ddof=1), vnp.std(x, axis=1, ddof=2),
                                           vnp.nansum(x), vnp.nanmean(x, axis=1)),
         [F(3, 4)], numpy=lambda x: (np.average(x, axis=1, weights=np.float32([1, 2, 3, 4])),
                                     np.var(x, axis=0, ddof=1), np.std(x, axis=1, ddof=2),
                                     np.nansum(x), np.nanmean(x, axis=1)), vulkan="stats_vk"),
    Case("stats_vk", lambda x: (vnp.average(x, axis=1, weights=np.arange(1.0, 34.0, dtype=np.float32)),
                                vnp.std(x, axis=0, ddof=1), vnp.nanmean(x, axis=1),
                                vnp.std(x[:, :1], axis=1), vnp.linalg.norm(x, -np.inf),
                                vnp.linalg.norm(x, np.inf),
                                vnp.linalg.norm(x[0], 3), vnp.linalg.norm(x, axis=1)),
         [U(7, 33)], **NOGRAD),
    Case("nan_reductions", lambda x: (vnp.nansum(x, axis=0), vnp.nanmean(x), vnp.nanmax(x),
                                      vnp.nanmin(x, axis=1)),
         [Const([[1.0, np.nan], [3.0, -2.0]])], numpy=lambda x: (
             np.nansum(x, axis=0), np.nanmean(x), np.nanmax(x), np.nanmin(x, axis=1)), **NOGRAD),
    # issue 14's wrong gradients: std/var over one element are constant (gradient 0, not nan);
    # d/dx x**0 = 0 at x = 0, and so is the second derivative
    Case("std_var_one_element", lambda x: vnp.std(x, axis=1) + 2 * vnp.var(x, axis=1) + vnp.std(x[0]),
         [F(3, 1)], numpy=lambda x: np.std(x, axis=1) + 2 * np.var(x, axis=1) + np.std(x[0]),
         vulkan="stats_vk"),
    Case("power_zero_exponent", lambda x: 3 * vnp.power(x, 0.0) + x * x + x ** 0,
         [Const([0.0, 1.5, -2.0])], numpy=lambda x: 3 * np.power(x, np.float32(0.0)) + x * x + 1,
         vulkan="pow"),
    Case("norms", lambda x: (vnp.linalg.norm(x), vnp.linalg.norm(x[0], 1),
                             vnp.linalg.norm(x[0], np.inf), vnp.linalg.norm(x, axis=1),
                             vnp.linalg.norm(x, "fro"), vnp.linalg.norm(x, 1),
                             vnp.linalg.norm(x, -np.inf), vnp.linalg.norm(x[1], 3),
                             vnp.linalg.norm(x, axis=0, keepdims=True)),
         [NZ(3, 4)], numpy=lambda x: (np.linalg.norm(x), np.linalg.norm(x[0], 1),
                                      np.linalg.norm(x[0], np.inf), np.linalg.norm(x, axis=1),
                                      np.linalg.norm(x, "fro"), np.linalg.norm(x, 1),
                                      np.linalg.norm(x, -np.inf), np.linalg.norm(x[1], 3),
                                      np.linalg.norm(x, axis=0, keepdims=True)),
         vulkan="stats_vk"),
    # --- sorting: argsort (stable; a bitonic sort per row on Vulkan) and gathers
    Case("sort_argsort", lambda x: (vnp.sort(x, axis=0), vnp.argsort(x, axis=1), vnp.sort(x, axis=None),
                                    vnp.argsort(x, axis=0, descending=True)),
         [Few(3, 4)], numpy=lambda x: (np.sort(x, axis=0),
                                       np.argsort(x, axis=1, kind="stable").astype(np.int32),
                                       np.sort(x, axis=None),
                                       np.argsort(-x, axis=0, kind="stable").astype(np.int32)),
         **NOGRAD, vulkan="sort_vk"),
    Case("sort_grad", lambda x: vnp.sort(x, axis=1) * vnp.arange(4.0), [F(3, 4)], vulkan="sort_vk"),
    Case("top_k", lambda x: vg.lax.top_k(x, 2), [F(3, 5)],
         numpy=lambda x: (-np.sort(-x, axis=1)[:, :2], np.argsort(-x, axis=1)[:, :2]
                          .astype(np.int32)), vulkan="sort_vk"),
    Case("median_percentile", lambda x: (vnp.median(x, axis=1), vnp.percentile(x, [25, 90]),
                                         vnp.quantile(x, 0.5, axis=0, keepdims=True)),
         [F(3, 4)], numpy=lambda x: (np.median(x, axis=1), np.percentile(x, [25, 90]).astype(np.float32),
                                     np.quantile(x, 0.5, axis=0, keepdims=True)), vulkan="sort_vk"),
    # ties (5 values) check stability; NaN (argsort_nan_vk) sorts last ascending, first descending
    Case("sort_vk", lambda x: (vnp.argsort(x, axis=0), vnp.sort(x, axis=1), *vg.lax.top_k(x, 3),
                               vnp.median(x, axis=1), vnp.percentile(x, 30, axis=0),
                               vnp.argsort(x, axis=1, descending=True)),
         [Few(33, 130, k=5)], numpy=lambda x: (
             np.argsort(x, axis=0, kind="stable").astype(np.int32), np.sort(x, axis=1),
             -np.sort(-x, axis=1)[:, :3], np.argsort(-x, axis=1, kind="stable")[:, :3]
             .astype(np.int32), np.median(x, axis=1),
             np.percentile(x, 30, axis=0).astype(np.float32),
             np.argsort(-x, axis=1, kind="stable").astype(np.int32)), **NOGRAD),
    Case("argsort_nan_vk", lambda x: (vnp.argsort(x), vnp.argsort(x, descending=True)),
         [Const([[1.0, np.nan, -2.0, 1.0, np.nan, 0.0, -0.0]])],
         # descending: NaN first, as JAX's (jnp.argsort(x, descending=True))
         numpy=lambda x: (np.argsort(x, kind="stable").astype(np.int32),
                          np.lexsort((np.nan_to_num(-x), ~np.isnan(x))).astype(np.int32)),
         **NOGRAD),
    # --- contractions
    Case("einsum", lambda a, b, c: (vnp.einsum("ij,jk->ik", a, b), vnp.einsum("ij,jk", a, b),
                                    vnp.einsum("bij,jk->bki", c, b), vnp.einsum("ii->i", a[:, :3]),
                                    vnp.einsum("...j,...j->...", c, c), vnp.einsum("i,j", a[0], b[0]),
                                    vnp.einsum("ij,jk,kl->il", a, b, b.T)),
         [F(3, 4), F(4, 5), F(2, 3, 4)],
         numpy=lambda a, b, c: (np.einsum("ij,jk->ik", a, b), np.einsum("ij,jk", a, b),
                                np.einsum("bij,jk->bki", c, b), np.einsum("ii->i", a[:, :3]),
                                np.einsum("...j,...j->...", c, c), np.einsum("i,j", a[0], b[0]),
                                np.einsum("ij,jk,kl->il", a, b, b.T)), vulkan="einsum_vk"),
    Case("einsum_vk", lambda a, b: (vnp.einsum("bij,bkj->bik", a, b) + vnp.einsum("bii->b", a[:, :, :7])[:, None, None],
                                    vnp.einsum("bij,bkj->kib", a, b), vnp.tensordot(a, b, ([0, 2], [0, 2]))),
         [U(3, 7, 33), U(3, 5, 33)], **NOGRAD),
    Case("tensordot_dot_inner_outer", lambda a, b: (vnp.tensordot(a, b, ([2], [0])), vnp.dot(a, b),
                                                    vnp.inner(a, a), vnp.outer(a[0, 0], b[0]),
                                                    vnp.tensordot(a, a.transpose(1, 2, 0))),
         [F(2, 3, 4), F(4, 5)], numpy=lambda a, b: (np.tensordot(a, b, ([2], [0])), np.dot(a, b),
                                                    np.inner(a, a), np.outer(a[0, 0], b[0]),
                                                    np.tensordot(a, a.transpose(1, 2, 0))),
         vulkan="einsum_vk"),
    Case("trace_diag_tri", lambda x, v: (vnp.trace(x), vnp.diagonal(x, 1), vnp.diag(v, -1),
                                         vnp.diag(x), vnp.tril(x), vnp.triu(x, 1),
                                         vnp.eye(3, 4, 1) * x, vnp.tri(3, 4) + vnp.identity(3)[0, 0]),
         [F(3, 4), F(3)], numpy=lambda x, v: (np.trace(x), np.diagonal(x, 1), np.diag(v, -1),
                                              np.diag(x), np.tril(x), np.triu(x, 1),
                                              np.eye(3, 4, 1, dtype=np.float32) * x,
                                              np.tri(3, 4, dtype=np.float32) + 1),
         vulkan="diag_vk"),
    Case("diag_vk", lambda x: (vnp.diagonal(x, 2), vnp.tril(x, -1), vnp.diag(x[0, :5], -2),
                               vnp.trace(x)), [U(33, 130)], **NOGRAD),
    # --- creation
    Case("linspace_logspace_meshgrid", lambda: (vnp.linspace(0, 1, 7), vnp.logspace(0, 2, 5),
                                                *vnp.meshgrid(vnp.arange(3), vnp.arange(2.0))),
         [], numpy=lambda: (np.linspace(0, 1, 7, dtype=np.float32),
                            np.logspace(0, 2, 5, dtype=np.float32),
                            *np.meshgrid(np.arange(3, dtype=np.int32),
                                         np.arange(2.0, dtype=np.float32))), **NOGRAD),
    Case("creation_more", lambda: (vnp.geomspace(1, 1000, 4), vnp.empty((2, 3)),
                                   vnp.linspace(0, 1, 4, endpoint=False), vnp.identity(2, int)),
         [], numpy=lambda: (np.geomspace(1, 1000, 4).astype(np.float32),
                            np.zeros((2, 3), np.float32),
                            np.linspace(0, 1, 4, endpoint=False).astype(np.float32),
                            np.identity(2, np.int32)), **NOGRAD),
    Case("linspace_traced", lambda a, b: vnp.linspace(a, b, 5), [F(3), F(3)],
         numpy=lambda a, b: np.linspace(a, b, 5).astype(np.float32)),
    # --- shapes
    Case("repeat_tile_roll_flip", lambda x: (vnp.repeat(x, 2, axis=1), vnp.repeat(x, [1, 0, 2], axis=0),
                                             vnp.tile(x, (2, 1)), vnp.roll(x, 1, axis=0),
                                             vnp.flip(x), vnp.rot90(x), vnp.fliplr(x)),
         [F(3, 4)], numpy=lambda x: (np.repeat(x, 2, axis=1), np.repeat(x, [1, 0, 2], axis=0),
                                     np.tile(x, (2, 1)), np.roll(x, 1, axis=0), np.flip(x),
                                     np.rot90(x), np.fliplr(x)), vulkan="shapes_vk"),
    Case("shapes_vk", lambda x: (vnp.repeat(x, 3, axis=0), vnp.tile(x, (1, 2)), vnp.roll(x, -5, 1),
                                 vnp.flipud(x), vnp.rot90(x, 3), vnp.array_split(x, 3, axis=1)[1],
                                 vnp.broadcast_arrays(x, x[0])[1], vnp.column_stack([x[0], x[1]])),
         [U(7, 33)], **NOGRAD),
    Case("more_contractions_gathers", lambda x, y, i: (vnp.vdot(x, y), vnp.logaddexp2(x, y),
                                                       vnp.take_along_axis(x, i, 1),
                                                       *vnp.divmod(x, 0.6)),
         [NZ(3, 4), NZ(3, 4), I(3, 5, hi=4)],
         numpy=lambda x, y, i: (np.vdot(x, y), np.logaddexp2(x, y), np.take_along_axis(x, i, 1),
                                *np.divmod(x, np.float32(0.6)))),
    Case("split_stack_append", lambda x: (*vnp.array_split(x, 3, axis=1), *vnp.split(x, [1]),
                                          *vnp.hsplit(x, 2), *vnp.vsplit(x, [2]),
                                          *vnp.dsplit(x[None], 2),
                                          vnp.hstack([x, x]), vnp.vstack([x[0], x[1]]),
                                          vnp.dstack([x, x]), vnp.column_stack([x[0], x[1]]),
                                          vnp.append(x, x[0]), vnp.r_[x[0], 1.0, x[1]],
                                          vnp.c_[x[0], x[1]], vnp.atleast_3d(x[0]),
                                          *vnp.broadcast_arrays(x, x[0])),
         [F(3, 4)], numpy=lambda x: (*np.array_split(x, 3, axis=1), *np.split(x, [1]),
                                     *np.hsplit(x, 2), *np.vsplit(x, [2]), *np.dsplit(x[None], 2),
                                     np.hstack([x, x]), np.vstack([x[0], x[1]]),
                                     np.dstack([x, x]), np.column_stack([x[0], x[1]]),
                                     np.append(x, x[0]), np.r_[x[0], np.float32(1.0), x[1]],
                                     np.c_[x[0], x[1]], np.atleast_3d(x[0]),
                                     *np.broadcast_arrays(x, x[0])), grad=1,
         vulkan="shapes_vk"),
    Case("pad_modes", lambda x: (vnp.pad(x, 1, constant_values=2.0), vnp.pad(x, (1, 2), mode="edge"),
                                 vnp.pad(x, 2, mode="reflect")), [F(3, 4)],
         numpy=lambda x: (np.pad(x, 1, constant_values=2.0), np.pad(x, (1, 2), mode="edge"),
                          np.pad(x, 2, mode="reflect")), vulkan="pad_vk"),
    Case("pad_vk", lambda x: (vnp.pad(x, ((1, 0), (3, 2)), constant_values=2.0),
                              vnp.pad(x, 2, mode="edge"),
                              vnp.pad(x, (5, 1), mode="reflect")), [U(7, 33)], **NOGRAD),
    # --- functional updates: vnp.at(x)[idx] is x.at[idx] (which numpy arrays, what the rows
    # get eagerly, do not have); repeated indices: add and mul combine, set keeps the last
    Case("at_updates", lambda x, v: (vnp.at(x)[1, 2:].set(v[:2]), vnp.at(x)[[0, 0, 2]].add(v[:3, None]),
                                     vnp.at(x)[[0, 0]].set(v[1:3, None]), vnp.at(x)[:, [1, 1]].mul(v[:2]),
                                     vnp.at(x)[::2].max(0.5), vnp.at(x)[x > 0].min(v[0])),
         [F(3, 4), F(4)], numpy=lambda x, v: (
             _np_at(lambda y: y.__setitem__((1, slice(2, None)), v[:2]))(x),
             _np_at(lambda y: np.add.at(y, [0, 0, 2], v[:3, None]))(x),
             _np_at(lambda y: y.__setitem__([0, 0], v[1:3, None]))(x),
             _np_at(lambda y: np.multiply.at(y, (slice(None), [1, 1]), v[:2]))(x),
             _np_at(lambda y: np.maximum.at(y, slice(None, None, 2), 0.5))(x),
             _np_at(lambda y: np.minimum.at(y, x > 0, v[0]))(x)), vulkan="at_vk"),
    Case("at_traced_index", lambda x, i, v: (vnp.at(x)[i].set(v), vnp.at(x)[i].add(v)),
         [F(5, 2), Const([3, 0], np.int32), F(2, 2)],
         numpy=lambda x, i, v: (_np_at(lambda y: y.__setitem__(i, v))(x),
                                _np_at(lambda y: np.add.at(y, i, v))(x)), vulkan="at_vk"),
    Case("at_vk", lambda x, i: (vnp.at(x)[i].add(1.0), vnp.at(x)[[3, 3, 0]].set(x[:3] * 2)),
         [U(33, 7), Const([3, 3, 0, 32], np.int32)], **NOGRAD),
]

# --- custom derivative rules (vg.custom_vjp, vg.custom_jvp) and whole Jacobians. The rules are
# the true derivatives (the gradient checks compare them with finite differences); inlined
# before lowering, so on Vulkan they are the elementwise kernels of any row.


@vg.custom_vjp
def _softplus(x):
    return vnp.logaddexp(x, 0.0)


def _softplus_fwd(x):
    return _softplus(x), nn.sigmoid(x)


_softplus.defvjp(_softplus_fwd, lambda sig, g: (g * sig,))


@vg.custom_jvp
def _log1pexp(x):
    return vnp.log1p(vnp.exp(x))


@_log1pexp.defjvp
def _log1pexp_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return _log1pexp(x), t * nn.sigmoid(x)


def _cubic(x):
    return vnp.sum(x ** 3) + x[0] * x[1] * x[2]


CASES += [
    Case("custom_vjp", lambda x: _softplus(x) * x, [F(3, 4)], numpy=lambda x: np.logaddexp(x, 0) * x,
         vulkan="unary", text=False, modes=("rev",)),      # jvp of a custom_vjp: refused
    Case("custom_jvp", lambda x, y: _log1pexp(x * y) + _log1pexp(x), [F(3, 4), F(4)],
         numpy=lambda x, y: np.log1p(np.exp(x * y)) + np.log1p(np.exp(x)), vulkan="unary",
         text=False),
    Case("custom_under_jit_grad", lambda x: vg.grad(lambda x: vnp.sum(_softplus(x) + _log1pexp(x)))(x),
         [F(5)], numpy=lambda x: 2 / (1 + np.exp(-x)), grad=1, vulkan="unary", text=False,
         modes=("rev",)),
    Case("jacobians", lambda x: (vg.jacrev(lambda x: vnp.sin(x) * x[0])(x),
                                 vg.jacfwd(lambda x: vnp.cumsum(x) ** 2)(x), vg.hessian(_cubic)(x)),
         [F(3)], grad=1),
]

# --- convolutions (vg.lax.conv_general_dilated and friends; vnp.convolve/correlate): every
# option on odd sizes, each a conv kernel on Vulkan; the gradients are convolutions too
_lax = vg.lax


def _conv(**kw):
    return lambda x, w: _lax.conv_general_dilated(x, w, **kw)


CASES += [
    Case("conv2d_groups_strides_dilation",
         _conv(window_strides=(2, 1), padding="SAME", rhs_dilation=(1, 2),
               feature_group_count=2), [F(2, 4, 7, 6), F(6, 2, 3, 2)]),
    Case("conv2d_nhwc_valid", _conv(window_strides=(2, 3), padding="VALID",
                                    dimension_numbers=("NHWC", "HWIO", "NHWC")),
         [F(1, 9, 8, 3), F(3, 2, 3, 5)]),
    Case("conv2d_pairs_lhs_dilation",      # a transposed convolution, and negative padding
         _conv(window_strides=(1, 1), padding=((2, -1), (0, 1)), lhs_dilation=(2, 3)),
         [F(2, 3, 4, 3), F(2, 3, 2, 3)]),
    Case("conv1d_depthwise_causal",        # the Mamba conv: window 4, padded on the left
         _conv(window_strides=(1,), padding=((3, 0),), feature_group_count=5),
         [F(2, 5, 9), F(5, 1, 4)]),
    Case("conv3d_strided", _conv(window_strides=(1, 2, 1), padding="SAME", rhs_dilation=(2, 1, 1),
                                 dimension_numbers=("NDHWC", "DHWIO", "NCDHW")),
         [F(1, 5, 4, 3, 2), F(2, 3, 2, 2, 3)], grad=1),
    Case("conv_transpose_same",
         lambda x, w: _lax.conv_transpose(x, w, (2, 2), "SAME", transpose_kernel=True),
         [F(1, 3, 4, 2), F(3, 3, 3, 2)], grad=1),
    Case("conv_vk", _conv(window_strides=(1, 1), padding="SAME"), [U(3, 33, 7, 5), U(40, 33, 3, 3)],
         grad=0, vk_rtol=1e-4),
    Case("conv_grad",                      # both gradients run forward, their own VJPs checked
         lambda x, w: vg.grad(lambda x, w: vnp.sum(vnp.tanh(_lax.conv_general_dilated(
             x, w, (2, 1), ((1, 0), (1, 1)), rhs_dilation=(1, 2), feature_group_count=2))),
             argnums=(0, 1))(x, w), [F(2, 4, 5, 6), F(4, 2, 2, 2)], grad=1),
    Case("convolve_modes", lambda a, v: (vnp.convolve(a, v), vnp.convolve(v, a, "same"),
                                         vnp.convolve(a, v, "valid")), [F(7), F(3)],
         numpy=lambda a, v: (np.convolve(a, v), np.convolve(v, a, "same"),
                             np.convolve(a, v, "valid"))),
    Case("correlate_modes", lambda a, v: (vnp.correlate(a, v), vnp.correlate(v, a, "same"),
                                          vnp.correlate(a, v, "full")), [F(6), F(4)],
         numpy=lambda a, v: (np.correlate(a, v), np.correlate(v, a, "same"),
                             np.correlate(a, v, "full"))),
]

# --- windows and norms (vg.lax.reduce_window, vg.nn's pools, batch/group/instance norm):
# compositions of strided slices and elementwise ops, one fused kernel on Vulkan
CASES += [
    Case("reduce_window_max", lambda x: _lax.reduce_window(x, -np.inf, _lax.max, (1, 3, 2),
                                                           (1, 2, 1), "SAME"), [F(2, 7, 5)]),
    Case("reduce_window_sum_dilated",
         lambda x: _lax.reduce_window(x, 0.0, _lax.add, (2, 2), (1, 2), ((1, 0), (0, 2)),
                                      base_dilation=(2, 1), window_dilation=(1, 2)), [F(4, 5)]),
    Case("pools", lambda x: (nn.max_pool(x, (2, 2), (2, 1)),
                             nn.avg_pool(x, (3, 3), (2, 2), "SAME", count_include_pad=False),
                             nn.avg_pool(x, (2, 2), padding="SAME", channels_last=True)),
         [F(2, 3, 5, 6)]),
    Case("batch_norm_train_eval",
         lambda p, x: (lambda y, st: (y, st["mean"], st["var"], nn.batch_norm(p, st, x, False)[0]))(
             *nn.batch_norm(p, {"mean": vnp.zeros(3), "var": vnp.ones(3)}, x, True)),
         [lambda r: {"scale": r.uniform(0.5, 2, 3), "bias": r.standard_normal(3)}, F(4, 3, 2, 3)]),
    Case("group_instance_norm",
         lambda x, w, b: (nn.group_norm(x, 2, w, b), nn.instance_norm(x, channels_last=True)),
         [F(2, 4, 3, 2), F(4), F(4)]),
    Case("conv_layer", lambda p, x: nn.relu(nn.conv(p, x, strides=2, padding="SAME")),
         [lambda r: {"w": r.standard_normal((4, 3, 3, 3)), "b": r.standard_normal(4)},
          NZ(2, 3, 7, 6)]),
]

# --- control flow (vkgrad/primitives/control_flow.py): loops that stay loops. A scan runs on
# Vulkan (its body lowered once, replayed per step: vkgrad/lowering/loops.py), a cond as its
# branches and a select (passes/select_conds.py); a while loop at a program's top level as
# chunks of masked iterations driven from the host, in a scan body or a cond branch bounded
# (vkgrad/execution/segmented.py; in another while's body on the interpreter, counted).
def _rnn(h, xs, w):
    def step(h, x):
        h = vnp.tanh(h @ w + x)
        return h, h.sum()
    return vg.lax.scan(step, h, xs)


def _scan_tree(a, xs):         # a pytree carry with an integer leaf, a captured value, reverse
    def step(c, x):
        return {"s": c["s"] * x + a, "n": c["n"] + 1}, (c["s"] * 2.0, x * c["s"])
    c, (y0, y1) = vg.lax.scan(step, {"s": a * 0.5, "n": np.int32(0)}, xs, reverse=True)
    return c["s"], c["n"], y0, y1


def _fori(x):                  # Python int bounds: a scan
    return vg.lax.fori_loop(0, 3, lambda i, v: vnp.sin(v) * (i + 1.0), x)


def _while(x):                 # the predicate reads the carry: under vmap, a batched predicate
    return vg.lax.while_loop(lambda c: vnp.sum(c[1]) < 20.0,
                             lambda c: (c[0] + 1, c[1] * 1.5 + 1.0), (0, x))


def _cond(p, x):
    return vg.lax.cond(vnp.sum(p) > 0, lambda x: vnp.sin(x) * p, lambda x: x * x - p, x)


def _switch(i, x):
    return vg.lax.switch(i[0], [lambda x: vnp.exp(x), lambda x: x * x, lambda x: vnp.sin(x)],
                         x * 2.0)


def _block(x, w):
    h = vnp.tanh(x @ w)
    return vnp.sin(vg.ad_checkpoint.checkpoint_name(h @ w, "proj")) * h


def _rnn_checkpointed(h, xs, w):   # a checkpointed scan body
    step = vg.checkpoint(lambda h, x: (vnp.tanh(h @ w + x), h.sum()))
    return vg.lax.scan(step, h, xs)


CASES += [
    Case("scan_rnn", _rnn, [F(3), F(4, 3), F(3, 3)]),
    Case("scan_pytree_reverse", _scan_tree, [F(2), F(5, 2)]),
    Case("fori_loop_static", _fori, [F(4)]),
    Case("scan_rnn_grad", lambda h, xs, w: vg.grad(lambda *a: vnp.sum(_rnn(*a)[1] ** 2),
                                                   argnums=(0, 1, 2))(h, xs, w),
         [F(3), F(4, 3), F(3, 3)], grad=1),
    Case("while_loop", _while, [Pos(3)], grad=1, modes=("fwd",)),   # no reverse mode (JAX's)
    Case("cond_true", _cond, [Pos(3), F(3)]),
    Case("cond_false", _cond, [Pos(3, lo=-2.0, hi=-0.5), F(3)]),
    Case("switch", _switch, [I(1, hi=3), F(4)]),
    Case("checkpoint_nothing", vg.checkpoint(_block), [F(2, 3), F(3, 3)]),
    Case("checkpoint_dots", vg.checkpoint(_block, policy=vg.checkpoint_policies.dots_saveable),
         [F(2, 3), F(3, 3)], vulkan="checkpoint_nothing"),
    Case("checkpoint_names", vg.checkpoint(
        _block, policy=vg.checkpoint_policies.save_only_these_names("proj")), [F(2, 3), F(3, 3)],
        vulkan="checkpoint_nothing"),
    Case("scan_checkpointed_body", _rnn_checkpointed, [F(3), F(4, 3), F(3, 3)],
         vulkan="scan_rnn"),
]

# --- numpy's functions that autograd's own tests use (vkgrad.numpy's ufuncs, shapes,
# contractions, sorting, reductions); advanced indexing mixes ints and several arrays
CASES += [
    Case("fabs_fmax_fmin_select", lambda x, y: (vnp.fabs(x), vnp.fmax(x, y), vnp.fmin(x, y),
                                                vnp.select([x > 0, y > 0], [x, y], 0.5)),
         [NZ(3, 4), NZ(3, 4)], numpy=lambda x, y: (np.fabs(x), np.fmax(x, y), np.fmin(x, y),
                                                  np.select([x > 0, y > 0], [x, y],
                                                            np.float32(0.5))),
         vulkan="autograd_names_vk"),
    Case("real_imag_conj_angle", lambda x: (vnp.real(x), vnp.imag(x), vnp.conj(x),
                                            vnp.angle(x) * x),
         [NZ(3, 4)], numpy=lambda x: (np.real(x), np.imag(x), np.conj(x), np.angle(x) * x),
         vulkan="autograd_names_vk"),
    Case("kron_cross", lambda a, b, c, d: (vnp.kron(a, b), vnp.kron(a[0], b), vnp.cross(c, d),
                                           vnp.cross(c, d, axisa=0, axisb=1, axisc=0),
                                           vnp.cross(c[:, :2], d)),
         [F(2, 3), F(3, 2), F(3, 3), F(3, 3)],
         numpy=lambda a, b, c, d: (np.kron(a, b), np.kron(a[0], b), np.cross(c, d),
                                   np.cross(c, d, axisa=0, axisb=1, axisc=0),
                                   np.cross(np.pad(c[:, :2], ((0, 0), (0, 1))), d)),
         vulkan="autograd_names_vk"),   # a 2-vector is one with z = 0
    Case("gradient_rollaxis_partition", lambda x: (vnp.gradient(x, axis=1),
                                                   *vnp.gradient(x, 0.5, edge_order=2),
                                                   vnp.rollaxis(x[None], 2),
                                                   vnp.partition(x, 1, axis=1)),
         [F(4, 5)], numpy=lambda x: (np.gradient(x, axis=1), *np.gradient(x, 0.5, edge_order=2),
                                     np.rollaxis(x[None], 2), np.sort(x, axis=1)),
         vulkan="autograd_names_vk"),
    Case("einsum_interleaved", lambda a, b: (vnp.einsum(a, [0, 1], b, [1, 2], [0, 2]),
                                             vnp.einsum(a, [0, 1], a, [0, 1]),
                                             vnp.einsum(a, [Ellipsis, 1], [1, Ellipsis])),
         [F(3, 4), F(4, 5)], numpy=lambda a, b: (np.einsum(a, [0, 1], b, [1, 2], [0, 2]),
                                                 np.einsum(a, [0, 1], a, [0, 1]),
                                                 np.einsum(a, [Ellipsis, 1], [1, Ellipsis])),
         vulkan="einsum_vk"),
    Case("index_advanced_mixed", lambda x: (x[2, 1:, [0, 3]], x[[0, 1], :, [1, -2]], x[:, [0, 2], [1, 3]],
                                   x[-1, [1], ::-1], x[None, [1, 2], 0]),
         [F(3, 4, 5)], numpy=lambda x: (x[2, 1:, [0, 3]], x[[0, 1], :, [1, -2]],
                                        x[:, [0, 2], [1, 3]], x[-1, [1], ::-1],
                                        x[None, [1, 2], 0]), vulkan="autograd_names_vk"),
    Case("autograd_names_vk", lambda x, i: (x[i, 2:, [1, 32]], x[:, [0, 6], [1, 129]],
                                            vnp.kron(x[0, :2, :3], x[1, :3, :2]),
                                            vnp.cross(x[0, :, :3], x[1, :, :3]),
                                            vnp.gradient(x[0], axis=1), vnp.fmax(x[0], x[1]),
                                            vnp.select([x[0] > 0], [x[1]], 0.5),
                                            vnp.angle(x[0]), vnp.imag(x[1]),
                                            vnp.rollaxis(x, 2, 1), x[-1, [1], ::-1],
                                            vnp.partition(x[0], 3)),
         [U(7, 33, 130), I(hi=7)], **NOGRAD),
]

# --- collectives over a named axis. The world of this one process: the MPI collectives are the
# identity, removed by the optimizer (tests/test_distributed.py runs them on two ranks); under
# vmap, reductions.
def _over_world(f):
    return vg.distributed.data_parallel(f, axis_name="batch")


def _psum_pmean(x, y):
    return _over_world(lambda x, y: (vg.lax.psum(x * y, "batch"),
                                     vg.lax.pmean({"a": vnp.sin(x)}, "batch")["a"]))(x, y)


def _pmax_pmin(x):
    return _over_world(lambda x: vg.lax.pmax(x, "batch") - vg.lax.pmin(x * 2.0, "batch"))(x)


def _vmap_collectives(x):
    return vg.vmap(lambda v: v * vg.lax.pmean(v, "i") - vg.lax.pmax(v, "i") * vg.lax.psum(1, "i")
                   + vg.lax.pmin(v * v, "i"), axis_name="i")(x)


CASES += [
    Case("psum_pmean", _psum_pmean, [F(3, 4), F(3, 4)]),
    Case("pmax_pmin", _pmax_pmin, [U(5)], grad=0),      # no VJP for pmax, pmin (JAX's)
    Case("vmap_collectives", _vmap_collectives, [NZ(4, 3)]),
]

# --- debug callbacks (vg.debug.print): a host step between Vulkan submissions, once per example
# under vmap; nothing to differentiate (the row checks that the gradient ignores it)
def _debug_print(x):
    vg.debug.print("debug_print row: sum {s}", s=x.sum())
    y = vnp.sin(x)
    vg.vmap(lambda r: vg.debug.print("row {}", r))(y[:2])
    return y * x


CASES += [Case("debug_print", _debug_print, [F(3, 2)], text=False)]


# --- pure_callback: a host function with declared results, a host step between submissions;
# no derivative (JAX's), one call per example under vmap_method="sequential"
def _host_cos(a):
    return np.cos(a)


def _pure_callback(x):
    return vg.pure_callback(_host_cos, vg.typeof(x), x * 2, vmap_method="sequential") + x


CASES += [Case("pure_callback", _pure_callback, [F(3, 2)], grad=0, text=False)]

# --- matmul on Vulkan: every transpose combination on awkward shapes (one row, one column,
# sizes off every tile boundary). Not gradient-checked: matmul's derivatives are the small
# matmul_* rows' (every transpose combination); checking these 20 too took 3.5 s (measured).
MATMUL_SHAPES = [(1, 7, 33), (7, 33, 1), (33, 130, 7), (130, 257, 33), (257, 1, 130)]
for (m, k, n) in MATMUL_SHAPES:
    for ta in (False, True):
        for tb in (False, True):
            CASES.append(Case(
                f"matmul_{m}x{k}x{n}_{'T' if ta else 'N'}{'T' if tb else 'N'}",
                (lambda ta, tb: lambda a, b: (a.T if ta else a) @ (b.T if tb else b))(ta, tb),
                [U(k, m) if ta else U(m, k), U(n, k) if tb else U(k, n)], grad=0))

BY_NAME = {c.name: c for c in CASES}
assert len(BY_NAME) == len(CASES), "case names must be unique (they seed the arguments)"

GRAD_CASES = [c for c in CASES if c.grad >= 1]
VULKAN_CASES = [c for c in CASES if c.vulkan is True]


def ids(cases):
    return [c.name for c in cases]


# ----------------------------------------------------------------------------- completeness

# Primitives `optimize(final=True)` removes, so the lowering never sees them (and cond and
# checkpoint, which the fused stage replaces: by the branches and a select, by its body).
REMOVED_BEFORE_LOWERING = {"stop_gradient", "custom_vjp_call", "custom_jvp_call", "cond",
                           "checkpoint", "checkpoint_name"}
# Primitives no Vulkan plan holds: a while loop at a program's top level runs as plans of its
# cond and body driven from the host (vkgrad/execution/segmented.py), nested on the interpreter;
# a collective or a debug or pure callback runs on the host between the plans before and after
# it (the same module).
HOST_DRIVEN = {"while", "psum", "pmax", "pmin", "debug_callback", "pure_callback"}


def primitives_in(program) -> set:
    """Names of the primitives a program's eqns bind, looking inside fused bodies, loop bodies
    and branches."""
    from vkgrad.ir.core import sub_programs
    seen = set()
    for e in program.eqns:
        seen.add(e.prim.name)
        for _, _, body in sub_programs(e.params):
            seen |= primitives_in(body)
    return seen


def all_primitives() -> set:
    """Every primitive defined now (looked up when called, so a primitive added later counts),
    except the compiler's own (`fused` made by the fusion pass, `save` by remat) and test-only
    ones."""
    from vkgrad.ir.core import PRIMITIVES
    return {n for n in PRIMITIVES if n not in ("fused", "save") and not n.endswith("_for_test")}


# Primitives whose VJP rule is a clear error, as in JAX: a while loop's trip count is not known
# when the backward is built (tests/test_control_flow.py checks the message); a pure callback is
# a host function (tests/test_callbacks.py checks the message).
REFUSES_REVERSE_MODE = {"while", "pure_callback"}


def differentiable_primitives() -> set:
    from vkgrad.ir.core import vjp_rules
    return {p.name for p in vjp_rules} & all_primitives() - REFUSES_REVERSE_MODE
