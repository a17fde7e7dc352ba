"""One table of functions, each checked the same ways (minitorch's style):

* derivatives vs central finite differences in float64, first order and grad-of-grad
  (vg.check_grads: reverse and forward mode, random unit directions);
* forward mode against reverse mode: <v, J u> from jvp equals <J^T v, u> from vjp;
* the traced program, and its optimised form, run on the numpy interpreter, equal the eager
  (numpy) evaluation in float32, and print -> parse -> print is the identity.

Every program produced along the way is verified (tests/conftest.py turns VERIFY_ALL on).
Shapes are distinct (m != k != n) so a swapped operand cannot pass by accident.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pytest

import vkgrad as vg
import vkgrad.nn as nn
import vkgrad.numpy as vnp
from vkgrad.ir.interpreter import run_program
from vkgrad.ir.parser import parse_program
from vkgrad.passes import optimize
from vkgrad.ir.core import print_program
from vkgrad.tracer.pytree import tree_flatten


# --- argument makers: each returns a float64 (or int32) array from an rng
def F(*shape):            # standard normal
    return lambda r: r.standard_normal(shape)


def Pos(*shape):          # in [0.5, 2): for log, sqrt, fractional powers
    return lambda r: r.uniform(0.5, 2.0, shape)


def NZ(*shape):           # |x| in [0.5, 1.5): away from the kinks of abs, relu, sign, where
    return lambda r: r.choice([-1.0, 1.0], shape) * r.uniform(0.5, 1.5, shape)


def I(*shape, hi):        # integer indices / labels in [0, hi)
    return lambda r: r.integers(0, hi, shape).astype(np.int32)


@dataclass
class Case:
    name: str
    fun: Callable
    args: list
    order: int = 2                      # highest derivative order checked
    tol: dict = field(default_factory=dict)

    def make_args(self):
        rng = np.random.default_rng(zlib.crc32(self.name.encode()))
        return [a(rng) for a in self.args]


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


CASES = [
    # --- elementwise chains
    Case("add_mul", lambda x, y: x * y + x, [F(3, 4), F(3, 4)]),
    Case("sub_div", lambda x, y: (x - y) / (y * y + 1.0), [F(3, 4), F(3, 4)]),
    Case("div_positive", lambda x, p: x / p - p / x.sum(), [Pos(2, 3), Pos(2, 3)]),
    Case("int_powers", lambda x, z: x ** 2 + x ** 3 + z ** -1, [F(5), NZ(5)]),
    Case("float_powers", lambda p: p ** 1.5 + p ** 0.5, [Pos(4, 2)]),
    Case("pow_both", lambda p, y: p ** y, [Pos(3, 2), F(3, 2)]),
    Case("rpow", lambda x: 2.0 ** x, [F(4)]),
    Case("exp_log_log1p", lambda x, p: vnp.log(vnp.exp(x) + 1.0) + vnp.log1p(p),
         [F(2, 5), Pos(2, 5)]),
    Case("trig", lambda x: vnp.tanh(x) * vnp.sin(x) + vnp.cos(2 * x), [F(3, 3)]),
    Case("sqrt_square", lambda p, x: vnp.sqrt(p) * vnp.square(x), [Pos(6), F(6)]),
    Case("abs_sign", lambda z: vnp.abs(z) + vnp.sign(z) * z, [NZ(2, 3)]),
    Case("maximum_minimum", lambda x, y: vnp.maximum(x, y) - vnp.minimum(x, 0.3),
         [NZ(4, 3), NZ(4, 3)]),
    Case("relu", lambda z: nn.relu(z), [NZ(3, 5)]),
    Case("clip", lambda z: vnp.clip(z * 0.4, -0.5, 0.5) + vnp.clip(z, None, 0.0),
         [NZ(7)]),
    Case("where", lambda z: vnp.where(z > 0, z * z, -z), [NZ(4, 2)]),
    Case("logical_mask", lambda x, y: vnp.where((x > 0) & (y < 0), x, y * 2), [NZ(5), NZ(5)]),
    Case("neg_neg", lambda x: -(-x) * 3.0 - x, [F(3)]),
    Case("sigmoid", lambda x: nn.sigmoid(x), [F(2, 4)]),
    Case("python_scalars", lambda x: 2.0 * x + 1 - x / 4 + 3 ** x, [F(2, 3)]),
    # --- broadcasting, both ways (forward broadcast = backward reduction)
    Case("bias_row", lambda x, b: x + b, [F(3, 4), F(4)]),
    Case("scale_col", lambda x, c: x * c, [F(3, 4), F(3, 1)]),
    Case("outer", lambda a, b: a * b, [F(3, 1), F(1, 4)]),
    Case("scalar_array", lambda x, s: x * s + s, [F(2, 3), F()]),
    Case("broadcast_3d", lambda x, y, z: x + y - z, [F(2, 3, 4), F(3, 1), F(4)]),
    Case("broadcast_to", lambda b, x: vnp.broadcast_to(b, (3, 4)) * x, [F(4), F(3, 4)]),
    # --- reductions, every axis, keepdims
    Case("sum_all", lambda x: vnp.sum(x * x), [F(3, 4)]),
    Case("sum_axis0", lambda x: vnp.sum(x, axis=0), [F(3, 4)]),
    Case("sum_axis1_keepdims", lambda x: vnp.sum(x, axis=1, keepdims=True) * x, [F(3, 4)]),
    Case("sum_axes_0_2", lambda x: vnp.sum(x, axis=(0, 2)), [F(2, 3, 4)]),
    Case("sum_axis_neg", lambda x: x.sum(axis=-1), [F(2, 3, 4)]),
    Case("mean_axis0", lambda x: vnp.mean(x, axis=0) + x.mean(), [F(3, 4)]),
    Case("var", lambda x: vnp.var(x, axis=1) + vnp.var(x), [F(3, 5)]),
    Case("max_axis1", lambda x: vnp.max(x, axis=1), [F(3, 4)]),
    Case("min_axis0_keepdims", lambda x: vnp.min(x, axis=0, keepdims=True) * x, [F(3, 4)]),
    Case("max_all", lambda x: x.max() - x.min(axis=(0, 2)), [F(2, 3, 4)]),
    # --- matmul: every transpose combination, batched, vectors
    Case("matmul_nn", lambda a, b: a @ b, [F(3, 4), F(4, 5)]),
    Case("matmul_nt", lambda a, b: a @ b.T, [F(3, 4), F(5, 4)]),
    Case("matmul_tn", lambda a, b: a.T @ b, [F(4, 3), F(4, 5)]),
    Case("matmul_tt", lambda a, b: a.T @ b.T, [F(4, 3), F(5, 4)]),
    Case("matmul_batched", lambda a, b: a @ b, [F(2, 3, 4), F(2, 4, 5)]),
    Case("matmul_batched_by_2d", lambda a, w: a @ w, [F(2, 3, 4), F(4, 5)]),
    Case("matmul_batch_broadcast", lambda a, b: vnp.matmul(a, b), [F(2, 1, 3, 4), F(3, 4, 5)]),
    Case("matmul_batched_nt", lambda a, b: a @ b.swapaxes(-1, -2), [F(2, 3, 4), F(2, 5, 4)]),
    Case("matvec", lambda a, v: a @ v, [F(3, 4), F(4)]),
    Case("vecmat", lambda v, a: v @ a, [F(3), F(3, 4)]),
    Case("dot_vectors", lambda u, v: vnp.dot(u, v), [F(4), F(4)]),
    # --- softmax family
    Case("softmax_last", lambda x: vnp.softmax(x, axis=-1), [F(3, 5)]),
    Case("softmax_axis0", lambda x: vnp.softmax(x, axis=0), [F(3, 5)]),
    Case("softmax_3d_middle", lambda x: vnp.softmax(x, axis=1), [F(2, 3, 4)]),
    Case("log_softmax", lambda x: vnp.log_softmax(x), [F(4, 3)]),
    Case("logsumexp_axis1", lambda x: vnp.logsumexp(x, axis=1), [F(3, 5)]),
    Case("logsumexp_all_keepdims", lambda x: vnp.logsumexp(x, keepdims=True) * x, [F(2, 3)]),
    # --- indexing and slicing
    Case("index_int", lambda x: x[1] * 2 + x[-1], [F(4, 3)]),
    Case("index_slices", lambda x: x[:, 1:3].sum() + (x[::2, ::2] ** 2).sum() + x[-2:, 3],
         [F(4, 5)]),
    Case("index_negative_step", lambda x, w: x[::-1] * w + x[1:, ::-2].sum(), [F(4, 3), F(3)]),
    Case("index_newaxis_ellipsis", lambda x, y: x[..., None] * y[None, None, :], [F(3, 4), F(2)]),
    Case("index_int_array", lambda x: x[np.array([2, 0, 2])] + x[:, [1, 1, 0]].T[:, :3],
         [F(3, 3)]),
    # --- concatenate, stack
    Case("concatenate", lambda x, y: vnp.concatenate([x, y], axis=0).sum(axis=1) +
         vnp.concatenate([x, y[:2] * 2], axis=-1).sum(), [F(2, 3), F(4, 3)]),
    Case("stack", lambda x, y: vnp.stack([x, y, x * y], axis=1), [F(2, 3), F(2, 3)]),
    # --- gathers (integer arguments get no gradient; check_grads holds them fixed)
    Case("take_embedding", lambda e, ids: vnp.take(e, ids, axis=0) ** 2, [F(10, 4), I(6, hi=10)]),
    Case("take_axis1", lambda x, idx: vnp.take(x, idx, axis=1), [F(3, 5), I(2, 2, hi=5)]),
    Case("one_hot_weighted", lambda x, lbl: vnp.sum(vnp.one_hot(lbl, 4) * x, axis=1),
         [F(5, 4), I(5, hi=4)]),
    # --- shape ops
    Case("reshape_transpose", lambda x, w: x.reshape(6, 4).T @ w, [F(2, 3, 4), F(6, 2)]),
    Case("swap_expand_squeeze",
         lambda x: vnp.squeeze(vnp.swapaxes(vnp.expand_dims(x, 0), 0, 2), axis=2) * 2,
         [F(3, 4)]),
    Case("transpose_perm", lambda x, y: vnp.transpose(x, (2, 0, 1)) * y, [F(2, 3, 4), F(3)]),
    # --- small models
    Case("mlp_cross_entropy", _mlp,
         [lambda r: {"l1": (r.standard_normal((6, 5)), r.standard_normal(5)),
                     "l2": (r.standard_normal((5, 3)), r.standard_normal(3))},
          F(8, 6), I(8, hi=3)]),
    Case("attention", _attention, [F(4, 3), F(4, 3), F(4, 2)]),
    Case("layernorm", _layernorm, [F(3, 6), F(6), F(6)]),
]

IDS = [c.name for c in CASES]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_derivatives_match_finite_differences(case):
    vg.check_grads(case.fun, case.make_args(), order=1, **case.tol)


@pytest.mark.parametrize("case", [c for c in CASES if c.order >= 2],
                         ids=[c.name for c in CASES if c.order >= 2])
def test_grad_of_grad(case):
    # order 2 checks the derivatives of x -> vjp(fun, x)(v): the backward program,
    # differentiated again, against finite differences of the first derivative.
    vg.check_grads(case.fun, case.make_args(), order=2, **case.tol)


def _float_leaves(tree):
    return [np.asarray(x) for x in tree_flatten(tree)[0]
            if x is not None and np.asarray(x).dtype.kind == "f"]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_jvp_agrees_with_vjp(case):
    args = case.make_args()
    rng = np.random.default_rng(1)
    tangents = tuple(
        _map_float(a, lambda x: rng.standard_normal(np.shape(x)), zero_int=True) for a in args)
    out, t_out = vg.jvp(case.fun, tuple(args), tangents)
    v = _map_float(out, lambda x: rng.standard_normal(np.shape(x)))
    _, vjp_fn = vg.vjp(case.fun, *args)
    cts = vjp_fn(v)
    lhs = sum(float(np.vdot(a, b)) for a, b in zip(_float_leaves(v), _float_leaves(t_out)))
    rhs = sum(float(np.vdot(a, b)) for a, b in
              zip(_float_leaves(cts), _float_leaves(tangents)))
    assert lhs == pytest.approx(rhs, rel=1e-9, abs=1e-9)


def _map_float(tree, fn, zero_int=False):
    from vkgrad.tracer.pytree import tree_map
    return tree_map(lambda x: fn(x) if np.asarray(x).dtype.kind == "f" else
                    (np.zeros_like(x) if zero_int else x), tree)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_program_matches_eager_and_round_trips(case):
    args = [_map_float(a, lambda x: np.asarray(x, np.float32)) for a in case.make_args()]
    eager = tree_flatten(case.fun(*args))[0]
    program = vg.make_ir(case.fun)(*args)
    leaves = tree_flatten(args)[0]
    for prog in (program, optimize(program)):
        got = run_program(prog, *leaves)
        assert len(got) == len(eager)
        for g, e in zip(got, eager):
            assert g.dtype == np.asarray(e).dtype
            np.testing.assert_allclose(g, e, rtol=2e-5, atol=2e-5)
        text = print_program(prog)
        consts = {f"%{len(prog.inputs) + i}": a for i, (_, a) in enumerate(prog.consts)}
        assert print_program(parse_program(text, consts)) == text


def test_table_has_the_promised_breadth():
    assert len(CASES) >= 50


def test_float32_models_stay_float32():
    args = [np.asarray(a, np.float32) for a in CASES[IDS.index("attention")].make_args()]
    prog = vg.make_ir(_attention)(*args)
    assert {v.dtype for e in prog.eqns for v in e.outputs} <= {"f32", "i32", "bool"}
