"""Errors a user gets: each is a VkgradError whose message names the problem in the user's
terms, the primitive if any, and the file:line of the user's code (found here by a marker
comment on that line, so editing this file does not break the tests)."""

from __future__ import annotations

import os
import traceback

import numpy as np
import pytest

import source_lines
import vkgrad as vg
import vkgrad.numpy as vnp
from vkgrad.errors import (ArgumentError, ConcretizationError, GradError, LeakedTracerError,
                           MissingRuleError, ShapeError, VkgradError, VkgradIndexError)
from vkgrad.ir.core import Primitive, TensorType, abstract_eval_rules
from vkgrad.tracer.core import bind
from vkgrad.ir.interpreter import impls


# Two primitives defined the way vkgrad/primitives/lax.py defines its own, minus some rules.
floor_p = Primitive("floor_for_test", ("pure", "elementwise"))     # no VJP rule
abstract_eval_rules[floor_p] = lambda x: TensorType(x.shape, x.dtype)
impls[floor_p] = np.floor
bare_p = Primitive("bare_for_test")                                 # no rules at all
X = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)


def line_of(marker: str) -> str:
    """'test_core_errors.py:<n>' for the line holding `# <marker>`."""
    return source_lines.line_of(__file__, marker)


def check(err: VkgradError, *, marker: str, words=(), primitive=None):
    msg = str(err)
    assert isinstance(err, VkgradError)
    assert line_of(marker) in msg, msg
    for w in words:
        assert w in msg, f"{w!r} not in {msg!r}"
    if primitive is not None:
        assert err.primitive == primitive and f"primitive '{primitive}'" in msg


def test_grad_of_non_scalar_result():
    with pytest.raises(GradError) as e:
        vg.grad(lambda x: x * 2)(X)  # nonscalar
    check(e.value, marker="nonscalar", words=["float scalar", "f32[2,3]", ".sum()", "vjp"])


def test_grad_of_non_float_result():
    with pytest.raises(GradError) as e:
        vg.grad(lambda x: (x > 0).sum())(X)  # nonfloat
    check(e.value, marker="nonfloat", words=["float scalar", "i32[]"])


def test_int_argument_in_argnums():
    labels = np.array([0, 2, 1])
    with pytest.raises(GradError) as e:
        vg.grad(lambda x, y: (x * y).sum(), argnums=(0, 1))(X, labels)  # intarg
    check(e.value, marker="intarg", words=["argument 1", "i32[3]", "only float arguments",
                                           "argnums"])
    # the same argument is fine when it is not differentiated
    assert vg.grad(lambda x, y: (x * y).sum())(X, labels).shape == X.shape


def test_matmul_shape_mismatch_at_trace_time():
    a, b = vg.ShapeDtype((3, 4)), vg.ShapeDtype((5, 6))
    with pytest.raises(ShapeError) as e:
        vg.make_ir(lambda a, b: a @ b)(a, b)  # matmul
    check(e.value, marker="matmul", words=["f32[3,4]", "f32[5,6]", "4 vs 5"], primitive="matmul")


def test_broadcast_mismatch_names_the_primitive():
    def f(x, y):
        return vnp.multiply(x, y)  # broadcast
    with pytest.raises(ShapeError) as e:
        vg.make_ir(f)(vg.ShapeDtype((3, 4)), vg.ShapeDtype((5,)))
    check(e.value, marker="broadcast", words=["f32[3,4]", "f32[5]", "broadcast"],
          primitive="mul")


def test_python_if_on_a_traced_value():
    def f(x):
        if x.sum() > 0:  # control-flow
            return x.sum()
        return -x.sum()
    with pytest.raises(ConcretizationError) as e:   # under jit (an eager grad sees values)
        vg.jit(vg.grad(f), backend="numpy")(X)
    check(e.value, marker="control-flow", words=["vnp.where", "static_argnums"])


def test_float_and_int_of_a_tracer():
    with pytest.raises(ConcretizationError) as e:
        vg.jit(vg.grad(lambda x: float(x.sum())), backend="numpy")(X)  # float
    check(e.value, marker="float", words=["float()", "f32[]"])
    with pytest.raises(ConcretizationError) as e:
        vg.jit(lambda x: x.sum() * int(x[0, 0]), backend="numpy")(X)  # int
    check(e.value, marker="int", words=["int()", "static"])


def test_np_asarray_of_a_tracer():
    with pytest.raises(ConcretizationError) as e:
        vg.grad(lambda x: np.asarray(x).sum())(X)  # asarray
    check(e.value, marker="asarray", words=["np.asarray", "vkgrad.numpy"])


def test_leaked_tracer_used_later():
    stash = []

    def f(x):
        stash.append(x * 2)  # created
        return x.sum()

    vg.grad(f)(X)
    with pytest.raises(LeakedTracerError) as e:
        vnp.exp(stash[0])  # leak-use
    check(e.value, marker="leak-use", words=["f32[2,3]", line_of("created"), "escaped",
                                             "Return it"])
    # also when the leaked value reaches a later, different trace
    with pytest.raises(LeakedTracerError) as e:
        vg.grad(lambda y: (y * stash[0]).sum())(X)  # leak-trace
    check(e.value, marker="leak-trace", words=["after the trace"])


def test_missing_vjp_rule_names_the_primitive():
    def f(x):
        return bind(floor_p, x * 3).sum()  # no-vjp

    assert vg.make_ir(f)(X) is not None           # tracing and eager evaluation work
    np.testing.assert_array_equal(bind(floor_p, X), np.floor(X))
    with pytest.raises(MissingRuleError) as e:
        vg.grad(f)(X)
    check(e.value, marker="no-vjp", words=["no VJP rule", "autodiff"], primitive="floor_for_test")


def test_missing_shape_rule_and_impl():
    with pytest.raises(MissingRuleError, match="no shape rule"):
        vg.make_ir(lambda x: bind(bare_p, x))(X)
    abstract_eval_rules[bare_p] = lambda x: x
    try:
        with pytest.raises(MissingRuleError, match="no numpy implementation"):
            bind(bare_p, X)
    finally:
        del abstract_eval_rules[bare_p]


@pytest.mark.parametrize("bad", ["abc", object(), {1, 2}])
def test_unsupported_argument_types(bad):
    with pytest.raises(ArgumentError) as e:
        vg.grad(lambda x: x.sum())(bad)  # bad-arg
    check(e.value, marker="bad-arg", words=["argument 0", type(bad).__name__, "arrays"])


def test_bad_argnums():
    with pytest.raises(ArgumentError) as e:
        vg.grad(lambda x: x.sum(), argnums=2)(X)  # argnums
    check(e.value, marker="argnums", words=["argnums=2", "1 argument"])


def test_unsupported_result_type():
    with pytest.raises(ArgumentError, match="result leaf 0 .* has type str"):
        vg.make_ir(lambda x: "text")(X)


def test_indexing_errors():
    with pytest.raises(VkgradIndexError) as e:
        vg.make_ir(lambda x: x[5])(X)  # index
    check(e.value, marker="index", words=["index 5", "size 2"])
    with pytest.raises(VkgradIndexError) as e:
        vg.make_ir(lambda x: x[x > 0])(X)  # mask
    check(e.value, marker="mask", words=["boolean mask", "vnp.where"])


def test_vjp_cotangent_structure_mismatch():
    _, vjp_fn = vg.vjp(lambda x: x * 2, X)
    with pytest.raises(ArgumentError) as e:
        vjp_fn((X, X))  # cotangent
    check(e.value, marker="cotangent", words=["structure"])


def test_errors_are_also_the_builtin_kind_users_expect():
    assert issubclass(ShapeError, ValueError) and issubclass(ConcretizationError, TypeError)
    assert issubclass(VkgradIndexError, IndexError) and issubclass(GradError, TypeError)


def _frames(err) -> list:
    return [(os.path.basename(f.filename), f.name) for f in traceback.extract_tb(err.__traceback__)]


def _bad_loss(x):
    return vnp.sum(vnp.matmul(x, np.ones((5, 2), np.float32)))   # 4 vs 5: a ShapeError


def test_tracebacks_leave_out_vkgrad_frames_unless_asked(monkeypatch):
    vkgrad_dir = os.path.dirname(vg.__file__)
    for call in (lambda: vg.grad(_bad_loss)(np.ones((3, 4), np.float32)),
                 lambda: vg.jit(_bad_loss, backend="numpy")(np.ones((3, 4), np.float32)),
                 lambda: vnp.asarray(np.ones((3, 4), np.float32)) @ np.ones((5, 2))):
        with pytest.raises(ShapeError) as e:
            call()
        inside = [f for f in traceback.extract_tb(e.value.__traceback__)
                  if f.filename.startswith(vkgrad_dir)]
        assert [os.path.basename(f.filename) for f in inside] == ["traceback_util.py"]
        assert ("test_core_errors.py", "<lambda>") in _frames(e.value)
        assert any("VKGRAD_TRACEBACK_FILTERING=off" in n for n in e.value.__notes__)
    with pytest.raises(ShapeError) as e:
        vg.grad(_bad_loss)(np.ones((3, 4), np.float32))
    assert ("test_core_errors.py", "_bad_loss") in _frames(e.value)   # the user's function
    monkeypatch.setenv("VKGRAD_TRACEBACK_FILTERING", "off")
    with pytest.raises(ShapeError) as e:
        vg.grad(_bad_loss)(np.ones((3, 4), np.float32))
    assert len([f for f in traceback.extract_tb(e.value.__traceback__)
                if f.filename.startswith(vkgrad_dir)]) > 3
