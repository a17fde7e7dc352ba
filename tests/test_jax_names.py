"""JAX's names that vkgrad took from the API diff (jax.nn's activations and initializers,
jax.random's distributions and key data, jax.numpy's nan-reductions, array-API names and index
helpers): each row of tests/jax_cases.py, on the edge values (NaN, +-inf, -0.0, empty and 0-d
arrays) too, equals JAX 0.10.2's value (tests/golden/jax_names.json, written by
scripts/jax_reference.py): the same dtype, shape, NaNs, infinities and signs of zero, values
within float32 rounding. Each runs jitted on the interpreter and on Vulkan."""

import builtins
import json
import pathlib

import numpy as np
import pytest

import vkgrad as vg
import vkgrad.numpy as vnp
from vkgrad import lax, nn, random

from jax_cases import CASES, INPUTS

GOLDEN = json.loads((pathlib.Path(__file__).parent / "golden" / "jax_names.json").read_text())
NS = {"jnp": vnp, "nn": nn, "lax": lax, "random": random, "jax": vg}


def _function(name):
    src, inputs = CASES[name]
    return eval("lambda a=None, b=None: " + src, NS), [INPUTS[i] for i in inputs]


def _compare(got, want, name):
    if "tuple" in want:
        assert isinstance(got, (tuple, list)) and len(got) == len(want["tuple"]), name
        for g, w in zip(got, want["tuple"]):
            _compare(g, w, name)
        return
    g = np.asarray(got)
    assert str(g.dtype) == want["dtype"], (name, g.dtype, want["dtype"])
    assert list(g.shape) == want["shape"], (name, g.shape, want["shape"])
    w = np.array([float(v) for v in want["values"]] if g.dtype.kind == "f" else want["values"],
                 g.dtype).reshape(g.shape)
    if g.dtype.kind != "f":
        np.testing.assert_array_equal(g, w, err_msg=name)
        return
    np.testing.assert_array_equal(np.isnan(g), np.isnan(w), err_msg=f"{name}: NaNs")
    # float32 rounding: XLA's transcendental functions are not numpy's to the last ulp, and a
    # derivative such as tanh's 1 - y^2 cancels, so the absolute tolerance scales with the
    # result's magnitude (4 ulps of the largest value)
    finite = np.abs(w[np.isfinite(w)])
    scale = max(1.0, float(finite.max())) if finite.size else 1.0
    np.testing.assert_allclose(g, w, rtol=2e-6, atol=4.8e-7 * scale, err_msg=name)
    zeros = w == 0
    np.testing.assert_array_equal(np.signbit(g)[zeros], np.signbit(w)[zeros],
                                  err_msg=f"{name}: the sign of zero")


def _check(name, backend):
    fn, args = _function(name)
    want = GOLDEN[name]
    if "error" in want:   # JAX raised: vkgrad's error is of the same builtin class
        with pytest.raises(getattr(builtins, want["error"])):
            vg.jit(fn, backend=backend)(*args)
        return
    _compare(vg.jit(fn, backend=backend)(*args), want, name)


@pytest.mark.parametrize("name", sorted(CASES))
def test_interpreter_matches_jax(name):
    _check(name, "numpy")


@pytest.mark.parametrize("name", sorted(CASES))
def test_jit_on_vulkan_matches_jax(name):
    _check(name, "vulkan")


@pytest.mark.parametrize("backend", ["numpy", "vulkan"])
def test_hypot_hessian_at_a_tie_is_the_true_one(backend):
    # JAX's hessian of hypot at (2, 2) is 0 (maximum/minimum split a tie's cotangent); vkgrad
    # picks max and min by one select, so it is sqrt(x^2 + y^2)'s: [[y^2, -xy], [-xy, x^2]] / r^3
    h = vg.jit(vg.hessian(vnp.hypot, (0, 1)), backend=backend)(np.float32(2), np.float32(2))
    np.testing.assert_allclose(np.array(h, np.float64), np.array([[1, -1], [-1, 1]]) * 4 / 8 ** 1.5,
                               rtol=1e-6)


def test_eval_shape_traces_without_computing():
    # jax.eval_shape on the same function and arguments gives these shapes and dtypes
    f = lambda p, x: {"y": vnp.tanh(x @ p["w"]) + p["b"], "n": vnp.sum(x > 0), "c": 2.0}
    p = {"w": vg.ShapeDtypeStruct((3, 5), vnp.float32), "b": np.zeros(5, np.float32)}
    out = vg.eval_shape(f, p, vg.ShapeDtypeStruct((10 ** 6, 3), vnp.float32))
    assert {k: (v.shape, v.dtype) for k, v in out.items()} == {
        "c": ((), np.float32), "n": ((), np.int32), "y": ((10 ** 6, 5), np.float32)}
    s = vg.ShapeDtypeStruct((2, 3), vnp.int32)
    assert (s.ndim, s.size, s) == (2, 6, vg.ShapeDtypeStruct((2, 3), np.int32))
    assert vg.eval_shape(lambda x: x.astype(vnp.float16) * 2, 3).dtype == np.float16


def test_typing_names_annotate():
    from vkgrad.typing import ArrayLike, DTypeLike

    def f(x: ArrayLike, dtype: DTypeLike = vnp.float32) -> vg.Array:
        return vnp.asarray(x, dtype)
    assert isinstance(f(np.ones(2)), vg.Array) and vg.Array in ArrayLike.__args__
