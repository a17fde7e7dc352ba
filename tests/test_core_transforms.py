"""The transforms users call: pytrees, argnums, has_aux, vjp/jvp, nesting and closures,
stop_gradient, dtypes, numpy interop, and the eager hook the jit issue will redirect."""

from __future__ import annotations

import numpy as np
import pytest

import vkgrad as vg
import vkgrad.numpy as vnp
from vkgrad.errors import GradientCheckError
from vkgrad import primitives as P
from vkgrad.ir.core import Primitive, TensorType, abstract_eval_rules, vjp_rules
from vkgrad.ir.interpreter import impls
from vkgrad.passes import optimize
from vkgrad.tracer import core
from vkgrad.tracer.core import bind

RNG = np.random.default_rng(0)
X = RNG.standard_normal((3, 4)).astype(np.float32)
W = RNG.standard_normal((4, 2)).astype(np.float32)


def test_grad_of_a_dict_of_params_keeps_the_structure():
    params = {"w": W, "b": np.zeros(2, np.float32)}

    def loss(p, x):
        return vnp.sum((x @ p["w"] + p["b"]) ** 2)

    g = vg.grad(loss)(params, X)
    assert set(g) == {"w", "b"} and g["w"].shape == (4, 2) and g["b"].dtype == np.float32
    y = X @ W
    np.testing.assert_allclose(g["w"], X.T @ (2 * y), rtol=1e-5)
    np.testing.assert_allclose(g["b"], (2 * y).sum(0), rtol=1e-5)


def test_argnums_tuple_and_value_and_grad():
    f = lambda a, b, c: vnp.sum(a * b) + c  # noqa: E731
    (v, (ga, gc)) = vg.value_and_grad(f, argnums=(0, 2))(X, 2.0, 1.5)
    assert v == pytest.approx(float((X * 2).sum() + 1.5), rel=1e-6)
    np.testing.assert_allclose(ga, np.full_like(X, 2.0))
    assert gc == 1.0 and gc.dtype == np.float32
    # a negative argnum counts from the end, like Python indexing
    np.testing.assert_allclose(vg.grad(f, argnums=-2)(X, 2.0, 1.5), X.sum(), rtol=1e-6)


def test_has_aux():
    def f(x):
        y = x * 3
        return y.sum(), {"y": y, "n": 7}

    g, aux = vg.grad(f, has_aux=True)(X)
    np.testing.assert_allclose(g, np.full_like(X, 3.0))
    np.testing.assert_allclose(aux["y"], X * 3, rtol=1e-6)
    assert aux["n"] == 7
    (v, aux2), g2 = vg.value_and_grad(f, has_aux=True)(X)
    assert v == pytest.approx(float((X * 3).sum()), rel=1e-5) and aux2["n"] == 7


def test_unused_and_passthrough_inputs():
    g = vg.grad(lambda a, b: vnp.sum(a), argnums=(0, 1))(X, W)
    np.testing.assert_array_equal(g[1], np.zeros_like(W))       # unused: zeros, right shape
    assert g[1].dtype == np.float32
    assert vg.grad(lambda s: s)(2.0) == 1.0                     # identity
    assert vg.grad(lambda s: 5.0)(2.0) == 0.0                   # constant


def test_vjp_with_pytree_output_and_int_inputs():
    idx = np.array([2, 0], np.int32)

    def f(x, i):
        return {"rows": vnp.take(x, i, axis=0), "total": x.sum()}

    out, vjp_fn = vg.vjp(f, X, idx)
    np.testing.assert_allclose(out["rows"], X[[2, 0]])
    ct = {"rows": np.ones((2, 4), np.float32), "total": np.float32(2.0)}
    gx, gi = vjp_fn(ct)
    want = np.full_like(X, 2.0)
    want[[2, 0]] += 1
    np.testing.assert_allclose(gx, want)
    assert gi is None                                              # ints have no cotangent


def test_vjp_accumulates_repeated_indices():
    idx = np.array([1, 1, 1, 0], np.int32)
    _, vjp_fn = vg.vjp(lambda e: vnp.take(e, idx, axis=0), W.T)
    (g,) = vjp_fn(np.ones((4, 4), np.float32))
    np.testing.assert_allclose(g.sum(axis=1), [4, 12])


def test_jvp_matches_analytic():
    def f(x, y):
        return vnp.sin(x) * y, (x > 0).sum()

    x, y = np.float32(0.7), np.float32(1.3)
    (out, count), (t, t_count) = vg.jvp(f, (x, y), (np.float32(1.0), np.float32(0.5)))
    assert out == pytest.approx(np.sin(0.7) * 1.3, rel=1e-6)
    assert t == pytest.approx(np.cos(0.7) * 1.3 + np.sin(0.7) * 0.5, rel=1e-6)
    assert count == 1 and t_count == 0                       # integer result: zero tangent


def test_nested_grad_closing_over_the_outer_argument():
    # inner grad treats x as a constant; the outer grad still sees that the result depends on x
    assert vg.grad(lambda x: vg.grad(lambda y: x * y)(x))(3.0) == 1.0
    # d/dx [d/dy x*y^2 at y=x] = d/dx 2x^2 = 4x
    assert vg.grad(lambda x: vg.grad(lambda y: x * y ** 2)(x))(3.0) == pytest.approx(12.0)
    # the closure is an array, and the inner argument a different one
    w = np.float32(0.5)

    def outer(x):
        return vg.grad(lambda v: vnp.sum(vnp.tanh(x * v)))(w)

    x = np.float32(0.8)
    want = lambda x: (1 - np.tanh(x * 0.5) ** 2) * x   # noqa: E731  d/dv tanh(xv)
    got = vg.grad(outer)(x)
    assert got == pytest.approx((want(x + 1e-3) - want(x - 1e-3)) / 2e-3, rel=1e-3)


def test_third_order_derivative():
    f = lambda x: vnp.sin(x)  # noqa: E731
    d3 = vg.grad(vg.grad(vg.grad(f)))
    assert d3(0.3) == pytest.approx(-np.cos(0.3), rel=1e-6)


def test_grad_inside_make_ir_shows_forward_and_backward():
    prog = vg.make_ir(vg.grad(lambda x, w: vnp.sum(vnp.tanh(x @ w))))(X, W)
    text = str(prog)
    assert "# ---- backward ----" in text
    assert text.count("matmul") == 2 and "matmul[transpose_b=True]" in text
    np.testing.assert_allclose(vg.run_program(prog, X, W)[0], vg.grad(
        lambda x, w: vnp.sum(vnp.tanh(x @ w)))(X, W), rtol=1e-6)


def test_stop_gradient_semantics_including_nested():
    assert vg.grad(lambda x: x * vnp.stop_gradient(x))(3.0) == 3.0
    # d/dy [sg(y) * y] = sg(y): the outer derivative of that is 0 (JAX's semantics), so a
    # transform's result inside another trace must keep its stop_gradient
    assert vg.grad(vg.grad(lambda y: vnp.stop_gradient(y) * y))(3.0) == 0.0
    # logsumexp uses stop_gradient(max) internally; its gradient is softmax
    g = vg.grad(lambda x: vnp.logsumexp(x))(X[0])
    e = np.exp(X[0] - X[0].max())
    np.testing.assert_allclose(g, e / e.sum(), rtol=1e-5)
    # the final optimised program has no stop_gradient left
    prog = vg.make_ir(lambda x: vnp.logsumexp(x))(X[0])
    assert "stop_gradient" in str(prog) and "stop_gradient" not in str(optimize(prog))


def test_dtypes_follow_numpy_with_weak_python_scalars():
    x32, x64 = np.ones(3, np.float32), np.ones(3, np.float64)
    i = np.arange(3)
    assert vnp.multiply(x32, 2.0).dtype == np.float32                  # weak scalar
    assert vnp.add(x32, x64).dtype == np.float32                       # x64 off: f64 is f32
    assert vnp.multiply(i, 0.5).dtype == np.float32                    # int * weak float
    assert vnp.divide(i, 2).dtype == np.float32                        # true division
    assert vnp.add(i, 1).dtype == np.int32                             # int64 narrowed
    assert vnp.sum(i > 0).dtype == np.int32 and vnp.sum(i > 0) == 2
    assert vnp.asarray([1.0, 2.0]).dtype == np.float32
    assert vnp.exp(i).dtype == np.float32
    assert vg.grad(lambda x: vnp.sum(x * 2.5))(x32).dtype == np.float32
    assert vg.grad(lambda x: vnp.sum(x * 2.5))(x64).dtype == np.float32
    with vg.enable_x64():
        assert vnp.add(x32, x64).dtype == np.float64
        assert vg.grad(lambda x: vnp.sum(x * 2.5))(x64).dtype == np.float64
    prog = vg.make_ir(lambda x: x * 2 + 1)(x32)
    assert "2.0:f32" in str(prog) and "f64" not in str(prog)


def test_static_argnums_and_trace():
    def f(x, n):
        return vnp.reshape(x, (n, -1)).sum(axis=1)

    prog = vg.trace(f, (vg.ShapeDtype((3, 4)), 2), static_argnums=(1,))
    assert len(prog.inputs) == 1 and prog.out_types[0].shape == (2,)
    assert "reshape[shape=(2,6)]" in str(vg.make_ir(f, static_argnums=1)(X, 2))


def test_numpy_interop_on_tracers():
    def f(x):
        a = np.exp(x)                      # __array_ufunc__ -> vnp.exp
        b = np.ones(4, np.float32) + x     # ndarray (op) tracer defers to the tracer
        c = np.sum(x * x, axis=1)          # __array_function__ -> vnp.sum
        return vnp.sum(a) + vnp.sum(b) + vnp.sum(c)

    prog = vg.make_ir(f)(X)
    names = [e.prim.name for e in prog.eqns]
    assert "exp" in names and "reduce_sum" in names
    assert vg.grad(f)(X).shape == X.shape
    with pytest.raises(vg.ConcretizationError, match="does not support real_if_close yet"):
        vg.make_ir(lambda x: np.real_if_close(x))(X)


def test_tracers_behave_like_arrays():
    def f(x):
        rows = [r.sum() for r in x]        # iteration over the leading axis
        assert len(x) == 3 and x.ndim == 2 and x.shape == (3, 4) and x.size == 12
        assert x.dtype == np.float32 and x.T.shape == (4, 3)
        return vnp.stack(rows).sum() + (-x).mean() + abs(x).max() + (x @ x.T).var()

    prog = vg.make_ir(f)(X)
    np.testing.assert_allclose(vg.run_program(prog, X)[0], f(X), rtol=1e-5)   # f(X): numpy


def test_eager_evaluation_goes_through_one_path(monkeypatch):
    """On numpy values every operation (through `eval_eager`), and every eqn of a transform's
    result (the whole program at once), is evaluated by the interpreter, giving vg.Arrays."""
    seen = []
    apply = core.interpreter.apply

    def spy(prim, values, params, out_types):
        seen.append(prim.name)
        return apply(prim, values, params, out_types)

    monkeypatch.setattr(core.interpreter, "apply", spy)
    out = vnp.tanh(vnp.matmul(X, W))
    g = vg.grad(lambda w: vnp.sum(X @ w))(W)
    assert seen[:2] == ["matmul", "tanh"] and "matmul" in seen[2:]
    assert isinstance(out, vg.Array) and isinstance(g, vg.Array)
    np.testing.assert_allclose(out, np.tanh(X @ W), rtol=1e-6)
    np.testing.assert_allclose(g, np.broadcast_to(X.sum(0)[:, None], W.shape), rtol=1e-5)


def test_check_grads_catches_a_wrong_rule():
    bad_p = Primitive("bad_square_for_test", ("pure", "elementwise"))
    abstract_eval_rules[bad_p] = lambda x: TensorType(x.shape, x.dtype)
    impls[bad_p] = np.square
    vjp_rules[bad_p] = lambda g, ans, x: (P.mul(g, x),)      # wrong: d x^2 = 2x
    with pytest.raises(GradientCheckError, match="differs from finite differences"):
        vg.check_grads(lambda x: vnp.sum(bind(bad_p, x)), (X,))
    vjp_rules[bad_p] = lambda g, ans, x: (P.mul(g, P.mul(x, 2)),)
    vg.check_grads(lambda x: vnp.sum(bind(bad_p, x)), (X,), order=2)


def test_keyword_arguments_are_passed_through_undifferentiated():
    def f(x, *, scale, shift=0.0):
        return vnp.sum(x * scale + shift)

    np.testing.assert_allclose(vg.grad(f)(X, scale=W[0, 0], shift=1.0), np.full_like(X, W[0, 0]))
    assert len(vg.make_ir(f)(X, scale=2.0).inputs) == 1


class _RecordingArray(core.ArrayOps):
    """A concrete array class of its own: the trace core hands it whole programs to run."""
    programs: list = []

    def __init__(self, value):
        self.value = np.asarray(value)

    @property
    def aval(self):
        return TensorType(self.value.shape, "f32")

    def __array__(self, dtype=None, copy=None):
        return self.value

    @staticmethod
    def _eager_program(program, values):
        _RecordingArray.programs.append(program)
        return vg.run_program(program, *[np.asarray(v) for v in values])


def test_eager_transform_results_run_as_one_program_where_the_array_lives():
    programs = _RecordingArray.programs
    programs.clear()
    g = vg.grad(lambda w: vnp.sum(vnp.tanh(X @ w)))(_RecordingArray(W))
    assert len(programs) == 1 and "# ---- backward ----" in str(programs[0])
    np.testing.assert_allclose(g, X.T @ (1 - np.tanh(X @ W) ** 2), rtol=1e-5)


def test_warmup_cosine_schedule_and_clipping_by_global_norm():
    """vg.optim's schedule (on numbers it computes at once, as a training loop logs it) and
    clipping, against the formulas written out in numpy (optax's)."""
    sched = vg.optim.warmup_cosine_decay_schedule(0.0, 1e-3, 10, 110, end_value=1e-4)
    for step, want in [(0, 0.0), (4, 4e-4), (9, 9e-4), (10, 1e-3), (60, 5.5e-4), (110, 1e-4),
                       (500, 1e-4)]:
        assert float(sched(np.int32(step))) == pytest.approx(want, rel=1e-5, abs=1e-12), step
    g = {"a": np.full(3, 2.0, np.float32), "b": [np.ones(1, np.float32)]}
    assert float(vg.optim.global_norm(g)) == pytest.approx(np.sqrt(13))
    clipped, _ = vg.optim.clip_by_global_norm(1.0).update(g, vg.optim.EmptyState())
    np.testing.assert_allclose(clipped["a"], 2 / np.sqrt(13), rtol=1e-6)
    same, _ = vg.optim.clip_by_global_norm(10.0).update(g, vg.optim.EmptyState())   # under
    np.testing.assert_array_equal(same["b"][0], g["b"][0])                          # the limit
