"""Flash attention written out (vkgrad/lowering/attention_scores.py): which attentions the
Target has written out (plans for the H200 and lavapipe, no device needed), and the written-out
programs on the real Vulkan device against the interpreter, with the device's Target given the
GPU's policy (lavapipe's own keeps the flash kernels)."""

import dataclasses

import numpy as np
import pytest

import vkgrad as vg
import vkgrad.numpy as vnp
from vkgrad import primitives as P
from vkgrad.ir.core import Program
from vkgrad.lowering import attention as attention_planner
from vkgrad.lowering.attention import (CAUSAL_SCORES_MIN_HEAD_DIM,
                                       CAUSAL_SCORES_MIN_HEAD_DIM_TIMES_KEYS,
                                       SCORES_MIN_HEAD_DIM, SCORES_MIN_HEAD_DIM_TIMES_KEYS,
                                       causal_blocks, scores_path)
from vkgrad.passes import optimize
from vkgrad.pipeline import fuse_program
from vkgrad.runtime import get_device
from vkgrad.target import Target
from vkgrad.tracer.core import ShapeDtype

H200 = Target.h200()
D = SCORES_MIN_HEAD_DIM
KEYS = SCORES_MIN_HEAD_DIM_TIMES_KEYS // D          # the fewest keys written out at head_dim D
DC = 128                                           # causal: a head dim, and its fewest keys
CAUSAL_KEYS = CAUSAL_SCORES_MIN_HEAD_DIM_TIMES_KEYS // DC


def _fused(fn, *shapes, target=H200) -> Program:
    args = [ShapeDtype(s, "f32") for s in shapes]
    return fuse_program(optimize(vg.make_ir(fn)(*args), final=True), target=target)


def _prims(program: Program) -> list:
    out = []
    for e in program.eqns:
        body = e.params.get("body") if e.prim.name == "fused" else None
        out += [b.prim.name for b in body.eqns] if body is not None else [e.prim.name]
    return out


def _train(q, k, v, causal=False):
    return vnp.sum(vnp.sin(vg.nn.flash_attention(q, k, v, causal=causal)))


def _grads(causal=False):
    return vg.grad(lambda q, k, v: _train(q, k, v, causal), argnums=(0, 1, 2))


@pytest.mark.parametrize("shape, causal", [
    ((2, 2, KEYS, D), False),
    ((1, 2, 2 * CAUSAL_KEYS, DC), True),
    ((1, 2, CAUSAL_SCORES_MIN_HEAD_DIM_TIMES_KEYS // CAUSAL_SCORES_MIN_HEAD_DIM,
      CAUSAL_SCORES_MIN_HEAD_DIM), True)])
def test_the_h200_writes_out_attention(shape, causal):
    """Forward and backward: six matmuls, a softmax and its backward per block of query rows
    (causal: causal_blocks', each masked), no flash kernel and no log-sum-exp (the backward
    reads the forward's P)."""
    names = _prims(_fused(_grads(causal), shape, shape, shape))
    n = len(causal_blocks(shape[2], shape[3])) if causal else 1
    assert (n > 1) == causal, n                  # the causal shape runs in blocks on the H200
    assert names.count("matmul") == 6 * n, names
    assert names.count("softmax") == n and names.count("softmax_bwd") == n, names
    assert names.count("select") == (n if causal else 0), names
    assert not {"flash_attention", "flash_attention_bwd", "reduce_max"} & set(names), names


@pytest.mark.parametrize("what, q, k, causal, target", [
    ("causal at head_dim 64", (2, 2, 1024, D), (2, 2, 1024, D), True, H200),
    ("causal with fewer keys than queries", (1, 1, 2048, 128), (1, 1, 1024, 128), True, H200),
    ("short keys", (2, 2, KEYS // 2, D), (2, 2, KEYS // 2, D), False, H200),
    ("small head dim", (2, 2, 4 * KEYS, D // 2), (2, 2, 4 * KEYS, D // 2), False, H200),
    ("lavapipe", (2, 2, KEYS, D), (2, 2, KEYS, D), False, Target.lavapipe()),
])
def test_flash_kernels_stay(what, q, k, causal, target):
    names = _prims(_fused(_grads(causal), q, k, k, target=target))
    assert "flash_attention" in names and "flash_attention_bwd" in names, (what, names)


def test_the_scores_budget():
    """One attention's scores above attention_scores_max_bytes stay flash; so does the one whose
    scores would take the program's total past a quarter of the device's memory."""
    q = (4, 8, 4096, 64)                                         # 2 GiB of scores
    assert scores_path(q, q, "f32", False, H200)
    assert not scores_path(q, q, "f32", False,
                           dataclasses.replace(H200, attention_scores_max_bytes=2 ** 30))
    assert scores_path(q, q, "bf16", False, H200)          # on the tensor cores
    assert not scores_path(q, q, "f16", False, H200)       # the coop flash kernels (below)
    small = dataclasses.replace(H200, device_local_bytes=3 * 2 ** 32)   # a quarter: 3 GiB

    def two(q, k, v):
        return vnp.sum(vg.nn.flash_attention(q, k, v)) + vnp.sum(vg.nn.flash_attention(k, q, v))

    names = _prims(_fused(two, q, q, q, target=small))
    assert names.count("flash_attention") == 1 and names.count("softmax") == 1, names


# ---------------------------------------------------------------- on the device

@pytest.fixture
def written_out(monkeypatch):
    """The device's Target with the GPU's attention policy (lavapipe's keeps flash)."""
    device = get_device()
    monkeypatch.setattr(device, "target", dataclasses.replace(
        device.target, attention_scores_max_bytes=H200.attention_scores_max_bytes))


def _operands(b, h, lq, lk, d, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float32)
            for s in ((b, h, lq, d), (b, h, lk, d), (b, h, lk, d))]


def _check(fn, args, rtol=2e-5, atol=2e-6):
    """fn on the device against the interpreter; the device's plan has no flash kernel."""
    got = vg.jit(fn, backend="vulkan")(*args)
    want = vg.jit(fn, backend="numpy")(*args)
    for g, w in zip(vg.tree_util.tree_leaves(got), vg.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=rtol, atol=atol)
    names = [s.launch.name for s in vg.jit(fn, backend="vulkan").lower(*args).lowered.steps]
    assert not any(n.startswith("flash_attn") for n in names), names


def test_written_out_gradients_match_the_interpreter(written_out):
    """Lq != Lk (640 queries over 512 keys), B1 H3: the written-out forward and backward on
    the device against the interpreter's flash attention."""
    _check(_grads(), _operands(1, 3, 640, KEYS, D))


def test_written_out_causal_gradients_match_the_interpreter(written_out):
    """Causal, Lq < Lk (the mask bottom-right aligned), head_dim 128."""
    _check(_grads(causal=True), _operands(1, 2, 200, CAUSAL_KEYS, DC, seed=3))


@pytest.mark.parametrize("heads, lq, block", [(2, 200, 64), (1, CAUSAL_KEYS, 256)])
def test_written_out_causal_blocks_match_the_interpreter(written_out, monkeypatch, heads, lq,
                                                         block):
    """Causal in blocks of query rows (the last one shorter where they do not divide), each
    over its prefix of keys: Lq < Lk and Lq = Lk, against the interpreter's flash attention."""
    monkeypatch.setattr(attention_planner, "CAUSAL_QUERY_BLOCK", block)
    assert len(causal_blocks(lq, DC)) == -(-lq // block) > 1
    _check(_grads(causal=True), _operands(1, heads, lq, CAUSAL_KEYS, DC, seed=4))


def test_causal_blocks_cover_the_rows(monkeypatch):
    """causal_blocks: consecutive [start, stop) ranges of CAUSAL_QUERY_BLOCK rows covering every
    query once; 0 gives one block; unset, CAUSAL_QUERY_ROWS_PER_HEAD_DIM rows a head dim."""
    monkeypatch.setattr(attention_planner, "CAUSAL_QUERY_BLOCK", 96)
    assert causal_blocks(200, 64) == ((0, 96), (96, 192), (192, 200))
    assert causal_blocks(96, 64) == ((0, 96),)
    monkeypatch.setattr(attention_planner, "CAUSAL_QUERY_BLOCK", 0)
    assert causal_blocks(200, 64) == ((0, 200),)
    monkeypatch.setattr(attention_planner, "CAUSAL_QUERY_BLOCK", None)   # by the head dim
    rows = attention_planner.CAUSAL_QUERY_ROWS_PER_HEAD_DIM
    step = 128 * rows
    assert causal_blocks(4096, 128) == tuple((a, a + step) for a in range(0, 4096, step))
    assert len(causal_blocks(4096, 64)) == 2 * len(causal_blocks(4096, 128))


def test_written_out_forward_alone_gives_lse(written_out):
    """The primitive's (o, lse): the written-out forward computes lse where it is read."""
    args = _operands(2, 1, 96, KEYS, D, seed=1)
    _check(lambda q, k, v: P.flash_attention(q, k, v, False, 0.3), args)


def test_second_derivative_through_the_written_out_path(written_out):
    """grad of a function of the gradient: the first backward's VJP gives the forward's lse a
    cotangent, so a second backward with dlse != 0 is written out too (P dlse added)."""
    args = _operands(1, 2, 64, KEYS, D, seed=2)
    g = vg.grad(lambda q, k, v: _train(q, k, v))

    def f(q, k, v):
        return vg.grad(lambda q: vnp.sum(g(q, k, v) ** 2))(q)

    _check(f, args, rtol=1e-4, atol=1e-5)


def test_second_derivative_through_causal_blocks(written_out, monkeypatch):
    """The second backward of causal attention in blocks: each block's rows of dlse."""
    monkeypatch.setattr(attention_planner, "CAUSAL_QUERY_BLOCK", 32)
    args = _operands(1, 1, 80, CAUSAL_KEYS, DC, seed=5)
    g = vg.grad(lambda q, k, v: _train(q, k, v, causal=True))

    def f(q, k, v):
        return vg.grad(lambda q: vnp.sum(g(q, k, v) ** 2))(q)

    _check(f, args, rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------- float16 and bfloat16

def _half_program(fn, dtype, *shapes, target=H200) -> Program:
    args = [ShapeDtype(s, dtype) for s in shapes]
    return fuse_program(optimize(vg.make_ir(fn)(*args), final=True), target=target)


def _matmuls(program: Program) -> list:
    out = []
    for e in program.eqns:
        body = e.params.get("body") if e.prim.name == "fused" else None
        out += [b for b in (body.eqns if body is not None else (e,)) if b.prim is P.matmul_p]
    return out


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("shape, causal", [((2, 2, 200, 128), False), ((1, 2, 2000, 64), True)])
def test_the_h200_writes_out_half_attention_on_the_tensor_cores(dtype, shape, causal):
    """16-bit attention on the H200 that the coop flash kernels do not take (bf16; f16 not in
    64-row blocks: tests/test_attention_coop.py): written out,
    its scores and dP products 16-bit operands with f32 results (the cooperative-matrix
    kernel's accumulator), and P v, dS k, dS^T q and P^T do 16-bit products (f32 results only
    where causal blocks sum dk and dv)."""
    program = _half_program(_grads(causal), dtype, shape, shape, shape)
    names = _prims(program)
    assert not {"flash_attention", "flash_attention_bwd"} & set(names), names
    n = len(causal_blocks(shape[2], shape[3], half=True)) if causal else 1
    assert n == (2 if causal else 1)          # 1024 rows a block at every head dim
    mms = _matmuls(program)
    assert len(mms) == 6 * n, names
    assert all(m.inputs[0].dtype == m.inputs[1].dtype == dtype for m in mms), mms
    wide = [m for m in mms if m.out.dtype == "f32"]
    assert all(m.params.get("preferred_element_type") == "f32" for m in wide)
    assert len(wide) == (4 if n > 1 else 2) * n, [m.out.dtype for m in mms]


def _half_operands(b, h, lq, lk, d, dtype, seed=0):
    np_type = {"f16": np.float16, "bf16": vnp.bfloat16}[dtype]
    return [x.astype(np_type) for x in _operands(b, h, lq, lk, d, seed)]


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_written_out_half_gradients_match_the_interpreter(written_out, dtype):
    """f16 and bf16 attention written out on the device (lavapipe: its products on the f32
    kernel through 16-bit loads) against the interpreter's flash attention in f32 math: P is
    rounded to 16 bits once, so the results agree to a few 16-bit roundings."""
    tol = 2e-2 if dtype == "f16" else 1e-1
    _check(_grads(), _half_operands(1, 2, 96, KEYS, D, dtype, seed=6), rtol=tol, atol=tol)


def test_written_out_half_causal_blocks_match_the_interpreter(written_out, monkeypatch):
    """f16 causal in blocks: dk and dv summed over the blocks in f32."""
    monkeypatch.setattr(attention_planner, "CAUSAL_QUERY_BLOCK", 64)
    _check(_grads(causal=True), _half_operands(1, 1, 150, CAUSAL_KEYS, DC, "f16", seed=7),
           rtol=2e-2, atol=2e-2)
