"""Fused kernels on Vulkan (lavapipe) against the interpreter: every hand-written kernel with
generated loads (producers) and stores (epilogues), each variant its planner can pick (vec4 or
not, split reductions, streamed softmax rows, transposed and batched matmuls, split-K, the
column-sum row), and horizontal kernels."""

import dataclasses

import numpy as np
import pytest

import vkgrad as vg
import vkgrad.numpy as vnp
from vkgrad.lowering.lower import lower
from vkgrad.pipeline import Options, run_stages
from vkgrad.target import Target
from vkgrad.primitives.compiler import fused_p
from vkgrad.runtime import get_device
from vkgrad.runtime.inflight import HostResult
from vkgrad.runtime.pool import Owned
from vkgrad.runtime.runners import VulkanRunner

RNG = np.random.default_rng(11)


def gpu_info():
    """The device's limits, but planned as a discrete GPU (split-K, GPU tiles)."""
    return Target.from_device(dataclasses.replace(get_device().info, type="discrete GPU"))


def run_both(fn, *args, info=None, grad=None, disable=frozenset()):
    """fn's program on Vulkan through every pass but `disable` (planned for `info`), and on the
    interpreter; returns (fused program, plan, vulkan outputs, reference outputs)."""
    program = vg.make_ir(fn)(*args)
    device = get_device()
    values = run_stages(program, "fused", Options(target=info or device.target,
                                                  disabled=frozenset(disable)))
    lw = lower(values["fused"], info or device.target)
    outs = VulkanRunner(device, lw).run([np.asarray(a) for a in args])
    got = []
    for o, v in zip(outs, program.outputs):
        if isinstance(o, Owned):
            o.wait()
            host = o.buffer.download()
        else:
            host = o.result() if isinstance(o, HostResult) else np.asarray(o)
        got.append(np.asarray(host).reshape(-1)[: max(1, v.type.size)].reshape(v.shape))
    return values["fused"], lw, got, vg.run_program(program, *args)


def check(fn, *args, kinds=(), info=None, rtol=1e-4, atol=1e-5, disable=frozenset()):
    fused, lw, got, want = run_both(fn, *args, info=info, disable=disable)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
    seen = {e.params.get("kind") for e in fused.eqns if e.prim is fused_p}
    for k in kinds:
        assert k in seen, f"expected a fused[kind={k}] eqn:\n{fused}"
    return fused, lw


def f32(*shape, low=-1.0, high=1.0):
    return RNG.uniform(low, high, shape).astype(np.float32)


# ------------------------------------------------------------------ reductions

@pytest.mark.parametrize("shape,axes", [((7, 5), 1), ((6, 8), 0), ((3, 9, 12), (0, 1)),
                                        ((5, 33), None)])
def test_reduction_with_prologue_and_epilogue(shape, axes):
    x, y = f32(*shape), f32(*shape)
    fused, lw = check(lambda x, y: vnp.sum(x * y + 1.0, axis=axes) * 0.5, x, y,
                      kinds=("output",))
    assert len(lw.steps) == 1                       # x * y + 1 is never written


def test_split_reduction_keeps_its_hooks_on_the_right_launches():
    """Large enough to split: the prologue goes with the first launch, the epilogue with the
    second (which writes the result)."""
    x = f32(512, 640)
    _, lw = check(lambda x: -vnp.sum(vnp.exp(x)) * 0.25, x, kinds=("output",), rtol=2e-4)
    assert [s.launch.name for s in lw.steps] == ["reduce_sum_partial", "reduce_sum"]
    assert "vkg_load_b0" in lw.steps[0].launch.hooks
    assert "vkg_store_b1" in lw.steps[1].launch.hooks


def test_sibling_max_sum_with_fused_loads():
    x = f32(9, 24)
    check(lambda x: (vnp.max(vnp.abs(x) * 2.0, axis=1), vnp.min(x - 1.0, axis=0)), x)


@pytest.mark.parametrize("shape,axes", [((6, 10), 1), ((4096, 64), 0), ((3, 5, 8), (0, 1))])
def test_sibling_reductions_in_one_pass(shape, axes):
    """Sums of g * w and g over the same axes (a layer norm's gradients): one kernel, with
    per-output partials when the reduction splits (the [4096, 64] case). (Over the last axis
    a row kernel takes them when fuse_rows runs: tests/test_row_kernels.py.)"""
    g, w = f32(*shape), f32(*shape[-1:])
    fused, lw = check(lambda g, w: (vnp.sum(g * w, axis=axes), vnp.sum(g, axis=axes) * 2.0,
                                    vnp.max(g * g, axis=axes)), g, w, kinds=("multi_output",),
                      rtol=3e-4, atol=1e-4, disable={"fuse_rows"})
    reductions = [s for s in lw.steps if s.launch.name.startswith("reduce")]
    assert any("NOUT" in dict(s.launch.defines) for s in reductions)


# ------------------------------------------------------------------ softmax

@pytest.mark.parametrize("cols", [16, 13, 40000])      # vec4, scalar, streamed rows
def test_softmax_mask_and_scale_read_once(cols):
    rows = 3
    s = f32(rows, cols, low=-3, high=3)

    def f(s):
        i, j = vnp.arange(rows)[:, None], vnp.arange(cols)[None, :]
        return vnp.softmax(vnp.where(j <= i + cols // 2, s * 0.125, -1e30), axis=-1) * 2.0
    fused, lw = check(f, s, kinds=("output",))
    assert len(lw.steps) == 1


def test_log_softmax_and_softmax_backward_fused():
    x, g = f32(4, 12), f32(4, 12)

    def f(x, g):
        return vg.vjp(lambda x: vnp.softmax(x * 3.0, axis=-1), x)[1](g * 2.0)[0] * 0.5
    check(f, x, g)
    check(lambda x, g: vg.vjp(lambda x: vnp.log_softmax(x + 1.0, axis=-1), x)[1](g)[0], x, g)


# ------------------------------------------------------------------ take

def test_take_with_fused_operand_and_epilogue():
    table, idx = f32(10, 8), np.array([3, -1, 0, 9, 4], np.int32)
    check(lambda t, i: vnp.take(t * 2.0, i, axis=0) + 1.0, table, idx)
    check(lambda t, i: vnp.take(t, i, axis=1) * 3.0, f32(4, 7), np.array([6, 0, -2], np.int32))


# ------------------------------------------------------------------ matmul

@pytest.mark.parametrize("m,k,n", [(8, 12, 16), (7, 5, 9), (33, 20, 10)])
def test_matmul_prologue_and_two_epilogue_outputs(m, k, n):
    x, w, b, r = f32(m, k), f32(k, n), f32(n), f32(m, n)

    def f(x, w, b, r):
        pre = vnp.maximum(x + 0.5, 0.0) @ w + b      # relu in A's loads, bias at the store
        return pre, vnp.tanh(pre) + r                 # pre- and post-activation, a residual
    fused, lw = check(f, x, w, b, r, kinds=("output",))
    assert len(lw.steps) == 1


@pytest.mark.parametrize("ta,tb", [(True, False), (False, True), (True, True)])
def test_matmul_transposed_operands_with_fused_loads(ta, tb):
    a = f32(6, 9) if ta else f32(9, 6)
    b = f32(5, 6) if tb else f32(6, 5)

    def f(a, b):
        a2 = (a * 2.0).T if ta else a * 2.0
        b2 = (b - 1.0).T if tb else b - 1.0
        return a2 @ b2
    check(f, a, b, kinds=("input",))


def test_batched_matmul_with_broadcast_operand_fused():
    a, b = f32(5, 7), f32(3, 7, 4)
    check(lambda a, b: (a * 2.0 + 1.0) @ b, a, b, kinds=("input",))   # cheap: no exp per load


@pytest.mark.parametrize("tb", [False, True])
@pytest.mark.parametrize("info", [None, "gpu"])
def test_bias_gradient_as_the_matmuls_extra_row(tb, info):
    """dW = x^T g and db = sum(g, 0) in one kernel; a narrow product over a long K (split-K on
    a GPU) keeps its column sum apart: riding along, the H200 ran its K-slice sum 100x slower
    (vkgrad/lowering/fusion/multi_output.py)."""
    k = 512 if info else 64
    x, g = f32(k, 20), f32(k, 10) if not tb else f32(10, k)

    def f(x, g):
        return vnp.matmul(x.T, g.T if tb else g), vnp.sum(g, axis=1 if tb else 0)
    fused, lw = check(f, x, g, kinds=() if info else ("multi_output",),
                      info=gpu_info() if info else None)
    names = [s.launch.name for s in lw.steps]
    if info:
        assert any("splitk" in n for n in names), names   # K = 512 is long for a 20x10 output
        assert not any(e.params.get("kind") == "multi_output" for e in fused.eqns)
    else:
        assert len(names) == 1


def test_a_matmul_that_splits_k_takes_no_fused_loads_or_stores():
    """A narrow product over a long K runs split-K on a GPU, which a matmul with fused loads or
    stores cannot (on the H200 split-K with hooks gave wrong results; vkgrad/lowering/lower.py),
    and unsplit it ran 10-40x slower (the matmul contract's takes_hooks: lowering/matmul.py). So the bias and
    ReLU stay a kernel of their own."""
    x, w, b = f32(16, 512), f32(512, 6), f32(6)
    fused, lw = check(lambda x, w, b: vnp.maximum(x @ w + b, 0.0), x, w, b, info=gpu_info(),
                      rtol=2e-4)
    assert not any(e.params.get("kind") in ("input", "output", "multi_output")
                   for e in fused.eqns if e.prim is fused_p), fused
    names = [s.launch.name for s in lw.steps]
    assert any("splitk" in n for n in names) and not any(s.launch.hooks for s in lw.steps
                                                         if s.launch.name.startswith("matmul"))
    # a short K: the same epilogue fuses into the matmul's stores
    x, w = f32(16, 64), f32(64, 6)
    check(lambda x, w, b: vnp.maximum(x @ w + b, 0.0), x, w, b, kinds=("output",),
          info=gpu_info(), rtol=2e-4)


# ------------------------------------------------------------------ horizontal

def test_horizontal_kernel_of_three_shapes():
    a, b, c, s = f32(4, 5), f32(7), f32(3, 2, 2), f32(1)
    fused, lw = check(lambda a, b, c, s: (a * 2.0 + 1.0, vnp.exp(b), c - s[0]), a, b, c, s,
                      kinds=("horizontal",))
    assert len(lw.steps) == 1


def test_a_kernel_with_more_buffers_than_a_device_binds_is_split():
    """40 buffers in one loop kernel: two dispatches on a device that binds 32 per kernel
    (lavapipe; planned so on any device here, which is what a GPU allowing more skips)."""
    xs = [f32(3, 4) for _ in range(20)]

    def f(*xs):
        return tuple(x * float(i) + 1.0 for i, x in enumerate(xs))
    fused, lw = check(f, *xs, info=dataclasses.replace(get_device().target, max_storage_buffers=32))
    assert len(lw.steps) == 2 and all(s.launch.bindings <= 32 for s in lw.steps)


@pytest.mark.parametrize("info", [None, "gpu"])
def test_bias_gradient_row_in_a_block_row_of_its_own(info):
    """M a multiple of the tile's rows: the column sums get workgroups of their own (the
    weight gradient's tiles stay exact, without range checks)."""
    k = 512 if info else 40
    x, g, b = f32(k, 64), f32(k, 12), f32(12)
    fused, lw = check(lambda x, g, b: (vnp.matmul(x.T, vnp.maximum(g + b, 0.0)),
                                       vnp.sum(vnp.maximum(g + b, 0.0), axis=0)),
                      x, g, b, info=gpu_info() if info else None, rtol=3e-4, atol=1e-4)
