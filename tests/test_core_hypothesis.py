"""hypothesis-generated shapes for the broadcasting and reduction rules: traced programs and
eager results agree with numpy, and gradients reduce back to the operand shapes."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes, mutually_broadcastable_shapes

import vkgrad as vg
import vkgrad.numpy as vnp
from vkgrad.ir.interpreter import run_program

BINARY = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply,
          "maximum": np.maximum, "minimum": np.minimum, "divide": np.divide}


def _unbroadcast(g, shape):
    """numpy reference: sum g over the axes broadcasting added or stretched."""
    g = g.sum(axis=tuple(range(g.ndim - len(shape)))) if g.ndim > len(shape) else g
    return g.sum(axis=tuple(i for i, d in enumerate(shape) if d == 1), keepdims=True)


@given(shapes=mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, max_side=4),
       op=st.sampled_from(sorted(BINARY)), seed=st.integers(0, 2**16))
def test_broadcasting_binary_ops(shapes, op, seed):
    (sa, sb), out_shape = shapes.input_shapes, shapes.result_shape
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(sa).astype(np.float32)
    b = (rng.uniform(0.5, 2, sb) * rng.choice([-1, 1], sb)).astype(np.float32)
    fn = getattr(vnp, op)
    want = BINARY[op](a, b)
    prog = vg.make_ir(fn)(a, b)
    assert prog.out_types[0].shape == out_shape
    assert sum(e.prim.name == "broadcast_to" for e in prog.eqns) == 0   # broadcast is implicit
    np.testing.assert_allclose(run_program(prog, a, b)[0], want, rtol=1e-6)
    np.testing.assert_allclose(fn(a, b), want, rtol=1e-6)
    # the backward of broadcasting is a sum back to each operand's shape
    w = rng.standard_normal(out_shape).astype(np.float32)
    ga, gb = vg.grad(lambda x, y: vnp.sum(fn(x, y) * w), argnums=(0, 1))(a, b)
    assert ga.shape == sa and gb.shape == sb
    if op in ("add", "subtract", "multiply"):
        da = {"add": w, "subtract": w, "multiply": w * b}[op]
        db = {"add": w, "subtract": -w, "multiply": w * a}[op]
        np.testing.assert_allclose(ga, _unbroadcast(np.broadcast_to(da, out_shape), sa).reshape(sa),
                                   rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(gb, _unbroadcast(np.broadcast_to(db, out_shape), sb).reshape(sb),
                                   rtol=1e-5, atol=1e-5)


@st.composite
def reduction_case(draw):
    shape = draw(array_shapes(min_dims=0, max_dims=4, min_side=1, max_side=4))
    nd = len(shape)
    kind = draw(st.sampled_from(["none", "int", "tuple"])) if nd else "none"
    if kind == "none":
        axis = None
    elif kind == "int":
        axis = draw(st.integers(-nd, nd - 1))
    else:
        axis = tuple(draw(st.lists(st.integers(0, nd - 1), min_size=1, max_size=nd,
                                   unique=True)))
    return shape, axis, draw(st.booleans()), draw(st.integers(0, 2**16))


@given(case=reduction_case(), op=st.sampled_from(["sum", "mean", "max", "min", "var"]))
def test_reductions_match_numpy(case, op):
    shape, axis, keepdims, seed = case
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    fn = getattr(vnp, op)
    want = getattr(np, op)(x, axis=axis, keepdims=keepdims)
    prog = vg.make_ir(lambda v: fn(v, axis=axis, keepdims=keepdims))(x)
    assert prog.out_types[0].shape == np.shape(want)
    np.testing.assert_allclose(run_program(prog, x)[0], want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(fn(x, axis=axis, keepdims=keepdims), want, rtol=1e-5, atol=1e-6)
    g = vg.grad(lambda v: vnp.sum(fn(v, axis=axis, keepdims=keepdims)))(x)
    assert g.shape == x.shape
    if op in ("sum", "mean"):
        n = x.size // max(np.size(want), 1)
        np.testing.assert_allclose(g, np.full(shape, 1.0 if op == "sum" else 1.0 / n),
                                   rtol=1e-6)


@given(case=reduction_case(), op=st.sampled_from(["sum", "max", "var"]))
def test_reduction_gradients_match_finite_differences(case, op):
    shape, axis, keepdims, seed = case
    x = np.random.default_rng(seed).standard_normal(shape)   # float64: distinct values
    vg.check_grads(lambda v: getattr(vnp, op)(v, axis=axis, keepdims=keepdims), (x,), order=1)
