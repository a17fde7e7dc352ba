"""Barriers only where a hazard is (vkgrad/runtime/hazards.py, kp patch 0013).

lavapipe runs dispatches one after another, so a missing barrier cannot show as a wrong
number here: these tests check the rule (which bindings a shader writes, which dispatch gets a
barrier) and the counts; the whole suite on a GPU checks the numbers.
"""

import numpy as np
import pytest

import vkgrad as vg
import vkgrad.numpy as vnp
from vkgrad.runtime import vulkan
from vkgrad.runtime.hazards import levels, written_bindings
from vkgrad.runtime.shaders import compile_glsl

COPY = """#version 450
layout(local_size_x = 1) in;
layout(std430, binding = 0) readonly buffer In { float x[]; };
layout(std430, binding = 1) buffer Out { float y[]; };
void main() { y[0] = x[0] + 1.0; }
"""

BOTH = """#version 450
layout(local_size_x = 1) in;
layout(std430, binding = 0) buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
layout(std430, binding = 2) writeonly buffer C { float c[]; };
void main() { a[0] += b[0]; c[0] = b[0]; }
"""


@pytest.fixture(scope="module")
def device():
    return vulkan.get_device()


def test_a_shader_writes_every_binding_but_its_readonly_blocks():
    assert written_bindings(compile_glsl(COPY, {}, name="copy"), 2) == {1}
    assert written_bindings(compile_glsl(BOTH, {}, name="both"), 3) == {0, 2}


def test_levels_put_each_dispatch_right_after_all_it_depends_on(device):
    k = device.kernel(compile_glsl(COPY, {}, name="copy"), bindings=2, name="copy")
    assert k.writes == {1}
    a, b, c, d, e = (device.buffer(1) for _ in range(5))

    def lv(*pairs):
        return levels([vulkan.Dispatch(k, pair, (1, 1, 1)) for pair in pairs])

    assert lv((a, b), (b, c), (a, d)) == [[0, 2], [1]]       # the third need not wait
    assert lv((a, b), (c, a)) == [[0], [1]]                   # write after read
    assert lv((a, b), (c, b), (b, d)) == [[0], [1], [2]]      # write after write, then read
    # a reader of b's first value, then b rewritten: the rewrite waits for the reader
    assert lv((a, b), (b, c), (d, b), (b, e)) == [[0], [1], [2], [3]]
    assert lv((a, b), (c, d), (b, e), (d, a)) == [[0, 1], [2, 3]]
    assert lv((a, b), (a, c)) == [[0, 1]]                    # both only read a
    assert lv((a, b), (c, b)) == [[0], [1]]                   # write after write
    assert lv() == []


def test_independent_products_share_a_barrier_and_agree_with_every_barrier(monkeypatch):
    rng = np.random.default_rng(0)
    x, w1, w2 = (rng.standard_normal((16, 16)).astype(np.float32) for _ in range(3))

    def f(x, w1, w2):
        return x @ w1, x @ w2, vnp.sum(x * x)

    before = vulkan.counters["barriers_left_out"]
    got = vg.jit(f, backend="vulkan")(x, w1, w2)
    left_out = vulkan.counters["barriers_left_out"] - before
    assert left_out >= 1     # the second product (and the sum) need not wait for the first
    monkeypatch.setenv("VKGRAD_BARRIERS", "all")
    before = vulkan.counters["barriers_left_out"]
    every = vg.jit(lambda *a: f(*a), backend="vulkan")(x, w1, w2)
    assert vulkan.counters["barriers_left_out"] == before
    for g, e, r in zip(got, every, (x @ w1, x @ w2, np.sum(x * x))):
        np.testing.assert_allclose(np.asarray(g), r, rtol=1e-5, atol=1e-4)
        np.testing.assert_array_equal(np.asarray(g), np.asarray(e))


def test_a_chain_keeps_every_barrier():
    rng = np.random.default_rng(1)
    x, w = (rng.standard_normal((8, 8)).astype(np.float32) for _ in range(2))
    before = vulkan.counters["barriers_left_out"]
    out = vg.jit(lambda x, w: vnp.tanh((x @ w) @ w) @ w, backend="vulkan")(x, w)
    assert vulkan.counters["barriers_left_out"] == before
    np.testing.assert_allclose(np.asarray(out), np.tanh((x @ w) @ w) @ w, rtol=1e-4, atol=1e-4)


def test_a_loop_body_leaves_out_the_barriers_its_independent_dispatches_do_not_need():
    rng = np.random.default_rng(2)
    h0, g0, w1, w2 = (rng.standard_normal((4, 4)).astype(np.float32) * 0.5 for _ in range(4))

    def f(h, g, w1, w2):
        def body(carry, _):
            h, g = carry
            return (h @ w1, g @ w2), None     # two independent products
        return vg.lax.scan(body, (h, g), None, length=6)[0]

    before = vulkan.counters["barriers_left_out"]
    h, g = vg.jit(f, backend="vulkan")(h0, g0, w1, w2)
    assert vulkan.counters["barriers_left_out"] > before
    rh, rg = h0, g0
    for _ in range(6):
        rh, rg = rh @ w1, rg @ w2
    np.testing.assert_allclose(np.asarray(h), rh, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(g), rg, rtol=1e-5, atol=1e-5)
