"""Every primitive on Vulkan (lavapipe in CI) against the numpy interpreter, on awkward shapes.

One table: each row is a function over vnp and the shapes of its arguments. Each runs through
vg.jit on the Vulkan backend and on the numpy backend; results must agree. The lowering's
stages are checked too: no row may fall back to the interpreter.
"""

import numpy as np
import pytest

import vkgrad as vg
import vkgrad.numpy as vnp
from vkgrad import primitives as P

RNG = np.random.default_rng(1234)


def arr(shape, dtype=np.float32, lo=-2.0, hi=2.0):
    if np.dtype(dtype) == np.int32:
        return RNG.integers(-5, 6, shape).astype(np.int32)
    return RNG.uniform(lo, hi, shape).astype(dtype)


pos = lambda shape: arr(shape, lo=0.1, hi=3.0)

# (id, function, argument factories)
CASES = [
    # elementwise, broadcasting both ways, awkward sizes
    ("add_bcast", lambda x, y: x + y, [arr((7, 33)), arr((33,))]),
    ("add_bcast_col", lambda x, y: x + y, [arr((130, 1)), arr((1, 257))]),
    ("sub_mul_div", lambda x, y: (x - y) * x / (y * y + 1.0), [arr((257,)), arr((257,))]),
    ("pow", lambda x, y: x ** y, [pos((33,)), arr((33,))]),
    ("pow_int_exponent", lambda x: x ** 3.0 + x ** 2, [arr((130,))]),
    ("max_min", lambda x, y: vnp.maximum(x, y) - vnp.minimum(x, 0.5), [arr((7,)), arr((1,))]),
    ("unary", lambda x: vnp.exp(-x) + vnp.tanh(x) + vnp.sin(x) * vnp.cos(x) + vnp.abs(x)
     + vnp.sign(x) - x, [arr((33, 7))]),
    ("log_sqrt_log1p", lambda x: vnp.log(x) + vnp.sqrt(x) + vnp.log1p(x) + vnp.log1p(x * 1e-4),
     [pos((130,))]),
    ("tanh_large", lambda x: vnp.tanh(x * 100.0), [arr((33,))]),
    ("compare_where", lambda x, y: vnp.where((x < y) | (x == 0.5), x, y * 2.0)
     + vnp.where(x >= y, 1.0, 0.0) + (x != y).astype(np.float32), [arr((7, 130)), arr((130,))]),
    ("clip_relu", lambda x: vnp.clip(x, -0.5, 0.7) + vnp.maximum(x, 0.0), [arr((257, 1))]),
    ("int_ops", lambda i, j: (i * j + i - 3) * (i < j) + vnp.maximum(i, j),
     [arr((33,), np.int32), arr((33,), np.int32)]),
    ("convert", lambda x, i: x.astype(np.int32) + i + (x > 0).astype(np.int32),
     [arr((130,)), arr((130,), np.int32)]),
    ("int_to_float", lambda i: i.astype(np.float32) * 0.5, [arr((7, 7), np.int32)]),
    ("bool_output", lambda x: x > 0.25, [arr((33,))]),
    ("stop_gradient", lambda x: vnp.stop_gradient(x) * 2.0, [arr((7,))]),
    ("scalar_math", lambda x: x * 3.0 + 1.0, [np.float32(2.5)]),
    # reductions: every axis, keepdims, non-adjacent axes
    ("sum_all", lambda x: vnp.sum(x), [arr((130, 33))]),
    ("sum_axis0", lambda x: vnp.sum(x, axis=0), [arr((257, 7))]),
    ("sum_axis1_keep", lambda x: vnp.sum(x, axis=1, keepdims=True), [arr((33, 257))]),
    ("sum_middle", lambda x: vnp.sum(x, axis=1), [arr((7, 33, 5))]),
    ("sum_outer_axes", lambda x: vnp.sum(x, axis=(0, 2)), [arr((7, 33, 5))]),
    ("max_min_mean", lambda x: vnp.max(x, axis=-1) + vnp.min(x, axis=0).sum() + vnp.mean(x),
     [arr((33, 130))]),
    ("var", lambda x: vnp.var(x, axis=0), [arr((130, 7))]),
    ("argmax_argmin", lambda x: (vnp.argmax(x, axis=1), vnp.argmin(x, axis=0), vnp.argmax(x)),
     [arr((7, 33))]),
    ("long_sum", lambda x: vnp.sum(x * x), [arr((300_000,))]),
    # layout
    ("transpose3", lambda x: vnp.transpose(x, (2, 0, 1)) * 2.0, [arr((7, 33, 5))]),
    ("transpose_to_matmul", lambda x, w: vnp.transpose(x, (1, 0, 2))[0] @ w,
     [arr((7, 5, 33)), arr((33, 7))]),
    ("reshape", lambda x: x.reshape(33, 7).T + 1.0, [arr((7, 33))]),
    ("slice_step", lambda x: x[1:6:2, ::3] * 2.0, [arr((7, 33))]),
    ("index_neg", lambda x: x[-1] + x[:, -2], [arr((7, 7))]),
    ("concatenate", lambda x, y: vnp.concatenate([x, y * 2.0, x], axis=1), [arr((7, 5)), arr((7, 33))]),
    ("stack", lambda x, y: vnp.stack([x, y], axis=0) + 1.0, [arr((33,)), arr((33,))]),
    ("broadcast_to", lambda x: vnp.broadcast_to(x, (7, 130)) * 1.5, [arr((130,))]),
    ("arange_onehot", lambda i: vnp.one_hot(i, 7) * vnp.arange(7, dtype=np.float32),
     [np.array([0, 3, 6, 6, 1], np.int32)]),
    ("pad_via_slice_grad", lambda x: vg.grad(lambda y: vnp.sum(y[1:6:2] ** 2))(x), [arr((7, 5))]),
    # gathers
    ("take_rows", lambda e, i: vnp.take(e, i, axis=0), [arr((130, 33)), np.array([[3, 0], [129, 3]], np.int32)]),
    ("take_axis1", lambda e, i: vnp.take(e, i, axis=1) * 2.0, [arr((7, 33, 5)), np.array([1, 32, 1], np.int32)]),
    ("take_grad", lambda e, i: vg.grad(lambda e: vnp.sum(vnp.take(e, i, axis=0) ** 2))(e),
     [arr((33, 7)), np.array([3, 3, 0, 32, 3, 5, 5], np.int32)]),
    # softmax family
    ("softmax", lambda x: vnp.softmax(x, axis=-1), [arr((7, 257))]),
    ("log_softmax_axis0", lambda x: vnp.log_softmax(x, axis=0), [arr((130, 7))]),
    ("logsumexp", lambda x: vnp.logsumexp(x, axis=1), [arr((33, 130))]),
    ("softmax_grad", lambda x: vg.grad(lambda x: vnp.sum(vnp.softmax(x, axis=-1) * x))(x), [arr((7, 33))]),
    ("log_softmax_grad", lambda x: vg.grad(lambda x: vnp.sum(vnp.log_softmax(x, axis=-1)[:, 0]))(x),
     [arr((130, 7))]),
    ("long_row_softmax", lambda x: vnp.softmax(x, axis=-1), [arr((3, 3000))]),
]

MATMUL_SHAPES = [(1, 7, 33), (7, 33, 1), (33, 130, 7), (130, 257, 33), (257, 1, 130)]
for (m, k, n) in MATMUL_SHAPES:
    for ta in (False, True):
        for tb in (False, True):
            a = arr((k, m) if ta else (m, k))
            b = arr((n, k) if tb else (k, n))
            f = (lambda ta, tb: lambda a, b: (a.T if ta else a) @ (b.T if tb else b))(ta, tb)
            CASES.append((f"matmul_{m}x{k}x{n}_{'T' if ta else 'N'}{'T' if tb else 'N'}", f, [a, b]))
CASES += [
    ("matmul_batched", lambda a, b: a @ b, [arr((3, 7, 33)), arr((3, 33, 5))]),
    ("matmul_batched_TT", lambda a, b: vnp.swapaxes(a, 1, 2) @ vnp.swapaxes(b, 1, 2),
     [arr((2, 33, 7)), arr((2, 5, 33))]),
    ("matmul_bcast_batch", lambda a, b: a @ b, [arr((4, 7, 33)), arr((33, 5))]),
    ("matvec", lambda a, v: a @ v, [arr((33, 130)), arr((130,))]),
]


def _close(got, want, case):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, case
    if want.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want, err_msg=case)
    else:
        scale = max(1.0, float(np.max(np.abs(want))) if want.size else 1.0)
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6 * scale, err_msg=case)


@pytest.mark.parametrize("case,fn,args", CASES, ids=[c[0] for c in CASES])
def test_op_on_vulkan_matches_interpreter(case, fn, args):
    on_gpu = vg.jit(fn, backend="vulkan")
    want = vg.jit(fn, backend="numpy")(*args)
    got = on_gpu(*args)
    lowered = on_gpu.lower(*args)
    assert lowered.fallback_reason is None, lowered.fallback_reason
    flat_got = got if isinstance(got, (tuple, list)) else [got]
    flat_want = want if isinstance(want, (tuple, list)) else [want]
    for g, w in zip(flat_got, flat_want):
        assert isinstance(g, vg.Array)
        _close(g, w, case)


def test_every_primitive_has_a_vulkan_lowering():
    """The table above reaches every primitive on the Vulkan path (fused or kernel)."""
    from vkgrad.ir.core import PRIMITIVES
    from vkgrad.passes.fuse import fused_p
    seen = set()
    for case, fn, args in CASES:
        lw = vg.jit(fn, backend="vulkan").lower(*args)
        for e in lw.stages["fused"].eqns:
            seen.add(e.prim)
            if e.prim is fused_p:
                seen.update(b.prim for b in e.params["body"].eqns)
    assert P.stop_gradient_p not in seen   # the optimizer removes it before lowering
    missing = {p.name for p in PRIMITIVES.values()} - {p.name for p in seen} \
        - {"fused", "stop_gradient", "save"} - {n for n in PRIMITIVES if n.endswith("_for_test")}
    assert not missing, f"primitives never run on Vulkan by this table: {sorted(missing)}"
