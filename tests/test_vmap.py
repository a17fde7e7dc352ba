"""vmap: every row of the table (tests/cases.py) mapped over a batch, against a Python loop over
the examples on the interpreter; composition with grad, vjp, jvp, jit and itself; errors in the
user's terms; per-example gradients of an MLP on Vulkan as one submission.

The table test maps each row three ways: every argument along axis 0; only the first argument
(the others shared: the rules' one-operand-mapped paths); every argument along its last axis
(the rules' paths for a mapped axis that is not in front). Completeness: every primitive that
has operands has a batching rule, and the table runs each rule.
"""

from __future__ import annotations

import contextlib
import functools
import zlib

import numpy as np
import pytest

import vkgrad as vg
import vkgrad.nn as nn
import vkgrad.numpy as vnp
from cases import CASES, all_primitives, assert_same, to_float32
from vkgrad.errors import ArgumentError, MissingRuleError
from vkgrad.ir.core import PRIMITIVES, Primitive, abstract_eval_rules, batching_rules
from vkgrad.ir.interpreter import impls
from vkgrad.runtime import counters
from vkgrad.tracer.core import bind
from vkgrad.tracer.pytree import tree_flatten, tree_map

B = 3   # examples per batch


def same(got, want, what, rtol=2e-5, atol=2e-5):
    assert_same(got, want, rtol, atol, what)


@contextlib.contextmanager
def recording_rules():
    """The names of the primitives whose batching rule ran inside the block."""
    seen, saved = set(), dict(batching_rules)

    def wrap(p, rule):
        def recorded(*a, **k):
            seen.add(p.name)
            return rule(*a, **k)
        return recorded

    batching_rules.update({p: wrap(p, r) for p, r in saved.items()})
    try:
        yield seen
    finally:
        batching_rules.update(saved)


def examples(case):
    """B argument lists for the row, each from its own seed (Const arguments are equal)."""
    seed = zlib.crc32(case.name.encode())
    return [to_float32([a(np.random.default_rng(seed + i)) for a in case.args]) for i in range(B)]


def stack(trees, axis):
    return tree_map(lambda *xs: np.stack(xs, axis=axis if np.ndim(xs[0]) else 0), *trees)


MODES = {
    "axis0": lambda n: (0,) * n,
    "first_only": lambda n: (0,) + (None,) * (n - 1),
    "last_axis": lambda n: (-1,) * n,
}


@functools.cache
def mapped_run(name, mode):
    """The row vmapped in `mode` and the loop's results, and the rules that ran."""
    case = next(c for c in CASES if c.name == name)
    exs = examples(case)
    n = len(case.args)
    in_axes = MODES[mode](n)
    if mode == "first_only":      # the others shared: every example takes the first's
        exs = [ex[:1] + exs[0][1:] for ex in exs]
    loop = [tree_flatten(case.fun(*ex))[0] for ex in exs]
    args = [stack([ex[i] for ex in exs], -1 if in_axes[i] == -1 else 0) if in_axes[i] is not None
            else exs[0][i] for i in range(n)]
    with recording_rules() as seen:
        got = vg.vmap(case.fun, in_axes=in_axes, axis_size=B)(*args)
    return tree_flatten(got)[0], loop, frozenset(seen)


def modes(case):
    n = len(case.args)
    return ["axis0"] + ["first_only"] * (n >= 2) + ["last_axis"] * (n >= 1)


TABLE = [(c, m) for c in CASES for m in modes(c)]


# numpy sums a strided axis one element after another (a contiguous one pairwise): 300000
# float32 terms drift by 6e-5 of the sum when the mapped axis is last
RTOL = {"long_sum": 2e-4}


@pytest.mark.parametrize("case,mode", TABLE, ids=[f"{c.name}-{m}" for c, m in TABLE])
def test_vmap_matches_a_loop(case, mode):
    got, loop, _ = mapped_run(case.name, mode)
    assert len(got) == len(loop[0])
    for j, g in enumerate(got):
        want = np.stack([np.asarray(out[j]) for out in loop])
        same(g, want, f"{case.name} ({mode}), result {j}", rtol=RTOL.get(case.name, 2e-5))


# iota: never mapped (nothing to map); custom calls: vmap maps their bodies (inlined first)
NO_OPERANDS = {"iota", "custom_vjp_call", "custom_jvp_call"}


def test_every_primitive_with_operands_has_a_batching_rule():
    missing = sorted(n for n in all_primitives() - NO_OPERANDS
                     if PRIMITIVES[n] not in batching_rules)
    assert not missing, f"primitives without a batching rule: {missing}"


def test_the_table_runs_every_batching_rule():
    seen = set().union(*(mapped_run(c.name, m)[2] for c, m in TABLE))
    missing = {p.name for p in batching_rules} & all_primitives() - seen
    assert not missing, f"batching rules no vmapped row runs: {sorted(missing)}"


# ----------------------------------------------------------------------------- composition

RNG = np.random.default_rng(0)


def f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def mlp_loss(params, x, y):
    """One example: x [d], y a label."""
    h = nn.relu(x @ params["w1"] + params["b1"])
    logits = h @ params["w2"] + params["b2"]
    return -vnp.log_softmax(logits)[y]


def mlp_params(d=5, h=7, k=3):
    return {"w1": f32(d, h), "b1": f32(h), "w2": f32(h, k), "b2": f32(k)}


def test_per_example_gradients_equal_a_loop_of_grads():
    params, xs, ys = mlp_params(), f32(4, 5), np.array([0, 2, 1, 2], np.int32)
    got = vg.vmap(vg.grad(mlp_loss), in_axes=(None, 0, 0))(params, xs, ys)
    for k in params:
        want = np.stack([vg.grad(mlp_loss)(params, xs[i], ys[i])[k] for i in range(4)])
        same(got[k], want, k)


def test_grad_of_vmap_and_value_and_grad_inside():
    w, xs = f32(3), f32(4, 3)
    total = lambda w: vnp.sum(vg.vmap(lambda x: vnp.tanh(x @ w) ** 2)(xs))
    want = sum(vg.grad(lambda w: vnp.tanh(xs[i] @ w) ** 2)(w) for i in range(4))
    same(vg.grad(total)(w), want, "grad of vmap")
    vals, grads = vg.vmap(vg.value_and_grad(lambda w, x: vnp.tanh(x @ w) ** 2),
                          in_axes=(None, 0))(w, xs)
    assert vals.shape == (4,) and grads.shape == (4, 3)
    same(grads.sum(0), want, "value_and_grad")


def test_nested_vmap_is_an_outer_product():
    x, y = f32(3, 4), f32(5, 4)
    got = vg.vmap(vg.vmap(lambda a, b: vnp.sum(a * b), in_axes=(None, 0)), in_axes=(0, None))(x, y)
    same(got, x @ y.T, "nested vmap")
    # the inner map over axis 1 of the outer example
    m = f32(2, 3, 4)
    got = vg.vmap(vg.vmap(lambda v: v.max(), in_axes=1), in_axes=2)(m)   # [4, 3]
    same(got, m.max(0).T, "nested axes")


def test_vjp_and_jvp_under_vmap_and_of_vmap():
    xs, ts = f32(4, 3), f32(4, 3)
    f = lambda x: vnp.sin(x) * x.sum()
    out, tan = vg.vmap(lambda x, t: vg.jvp(f, (x,), (t,)))(xs, ts)
    for i in range(4):
        o, t = vg.jvp(f, (xs[i],), (ts[i],))
        same(out[i], o, "jvp value")
        same(tan[i], t, "jvp tangent")
    _, t2 = vg.jvp(vg.vmap(f), (xs,), (ts,))
    same(t2, tan, "jvp of vmap")
    cts = vg.vmap(lambda x, c: vg.vjp(f, x)[1](c)[0])(xs, ts)
    for i in range(4):
        same(cts[i], vg.vjp(f, xs[i])[1](ts[i])[0], "vjp under vmap")
    same(vg.vjp(vg.vmap(f), xs)[1](ts)[0], cts, "vjp of vmap")


def test_jit_inside_and_outside_vmap():
    xs, w = f32(6, 4), f32(4, 2)
    f = lambda x, w: vnp.tanh(x @ w)
    want = np.tanh(xs @ w)
    same(vg.vmap(vg.jit(f, backend="numpy"), in_axes=(0, None))(xs, w), want, "vmap(jit)")
    same(vg.jit(vg.vmap(f, in_axes=(0, None)), backend="numpy")(xs, w), want, "jit(vmap)")


def test_in_axes_prefixes_negative_axes_and_out_axes():
    p = {"w": f32(4, 3), "b": f32(5, 3)}               # b mapped along axis 0, w shared
    xs = f32(4, 5)                                     # mapped along axis 1
    f = lambda p, x: (x @ p["w"] + p["b"], p["w"].sum())
    out, s = vg.vmap(f, in_axes=({"w": None, "b": 0}, -1), out_axes=(1, None))(p, xs)
    assert out.shape == (3, 5) and np.ndim(s) == 0
    for i in range(5):
        same(out[:, i], xs[:, i] @ p["w"] + p["b"][i], "prefix in_axes")
    # an unmapped result with an out axis is broadcast along it (as JAX does)
    c = vg.vmap(lambda x: (x * 2, vnp.ones(2)), out_axes=(0, -1))(f32(3, 4))[1]
    same(c, np.ones((2, 3), np.float32), "broadcast output")
    # keyword arguments are mapped over their axis 0; axis_size with nothing mapped
    got = vg.vmap(lambda x, *, scale: x * scale)(f32(3, 2), scale=np.arange(3, dtype=np.float32))
    assert got.shape == (3, 2)
    assert vg.vmap(lambda: vnp.zeros(2), axis_size=4)().shape == (4, 2)


def test_random_keys_under_vmap_draw_per_key():
    keys = vg.random.split(vg.random.key(3), 5)
    x = np.ones(8, np.float32)
    got = vg.vmap(lambda k, x: nn.dropout(k, x, 0.5), in_axes=(0, None))(keys, x)
    want = np.stack([nn.dropout(k, x, 0.5) for k in keys])
    np.testing.assert_array_equal(got, want)


# ----------------------------------------------------------------------------- errors

def test_errors_say_what_is_wrong_in_the_users_terms():
    def f(x, y):
        return x + y
    with pytest.raises(ArgumentError, match=r"argument 0 \(x\) has size 3 along axis 0; "
                                            r"argument 1 \(y\) has size 4 along axis 0"):
        vg.vmap(f)(f32(3, 2), f32(4, 2))
    with pytest.raises(ArgumentError, match=r"in_axes has 3 entries .* called with 2"):
        vg.vmap(f, in_axes=(0, 0, 0))(f32(3), f32(3))
    with pytest.raises(ArgumentError, match=r"argument 0 \(x\)\['a'\].*does not match"):
        vg.vmap(f, in_axes=({"a": {"b": 0}}, 0))({"a": f32(3)}, f32(3))
    with pytest.raises(ArgumentError, match=r"argument 1 \(y\).*scalar has no axis"):
        vg.vmap(f)(f32(3), 2.0)
    with pytest.raises(ArgumentError, match=r"in_axes 2 for argument 0 \(x\) \(f32\[3,2\]\) is "
                                            r"out of range"):
        vg.vmap(f, in_axes=(2, None))(f32(3, 2), 1.0)
    with pytest.raises(ArgumentError, match=r"result\[0\].*depends on the mapped axis, but "
                                            r"out_axes is None"):
        vg.vmap(lambda x: (x, x), out_axes=None)(f32(3))
    with pytest.raises(ArgumentError, match="no argument is mapped"):
        vg.vmap(f, in_axes=None)(f32(3), f32(3))
    with pytest.raises(ArgumentError, match="entries must be ints or None"):
        vg.vmap(f, in_axes=("a", 0))
    with pytest.raises(ArgumentError, match="axis_size is 5"):
        vg.vmap(f, axis_size=5)(f32(3), f32(3))


def test_a_primitive_without_a_rule_is_named():
    p = Primitive("no_batching_for_test")
    abstract_eval_rules[p] = lambda x: x
    impls[p] = lambda x: x
    with pytest.raises(MissingRuleError, match="vmap cannot batch 'no_batching_for_test'") as e:
        vg.vmap(lambda x: bind(p, x))(f32(3, 2))
    assert e.value.primitive == "no_batching_for_test" and e.value.source.startswith("tests/")


# ----------------------------------------------------------------------------- on Vulkan

def test_per_example_gradients_on_vulkan_are_one_submission():
    """The per-example-gradient idiom compiles to one program: no per-example loop, one
    submission, equal to a loop of grads on the interpreter."""
    params, xs = mlp_params(33, 16, 10), f32(12, 33)
    ys = RNG.integers(0, 10, 12).astype(np.int32)
    step = vg.jit(vg.vmap(vg.grad(mlp_loss), in_axes=(None, 0, 0)), backend="vulkan")
    step(params, xs, ys)                                   # compile
    sub = counters["submissions"]
    got = step(params, xs, ys)
    assert counters["submissions"] == sub + 1
    lowered = step.lower(params, xs, ys)
    assert lowered.fallback_reason is None
    kernels = lowered.stats()["kernels"]
    assert kernels.get("matmul", 0) <= 5, kernels         # one per product, not per example
    for k in params:
        want = np.stack([vg.grad(mlp_loss)(params, xs[i], ys[i])[k] for i in range(12)])
        same(got[k], want, k, rtol=1e-4, atol=1e-5)
