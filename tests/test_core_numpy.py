"""vkgrad.numpy against numpy itself: each function evaluated eagerly and as a traced program
on the interpreter gives numpy's shape, dtype and values (differentiable or not)."""

from __future__ import annotations

import numpy as np
import pytest

import vkgrad as vg
import vkgrad.numpy as vnp
from vkgrad.ir.interpreter import run_program

RNG = np.random.default_rng(3)
A = RNG.standard_normal((3, 4)).astype(np.float32)
B = RNG.standard_normal((3, 4)).astype(np.float32)
C = RNG.standard_normal((2, 3, 4)).astype(np.float32)
IDX = np.array([[0, 2], [1, 1]], np.int32)
LBL = np.array([2, 0, 1], np.int32)

# (name, vkgrad function, numpy function, args)
CASES = [
    ("greater", lambda x, y: x > y, np.greater, (A, B)),
    ("less_equal_scalar", lambda x: x <= 0.1, lambda x: x <= np.float32(0.1), (A,)),
    ("equal_not_equal", lambda x, y: (x == y) | (x != x), lambda x, y: (x == y) | (x != x), (A, A)),
    ("logical", lambda x: vnp.logical_not((x > 0) & (x < 1)) | (x > 2),
     lambda x: ~((x > 0) & (x < 1)) | (x > 2), (A,)),
    ("where_bool", lambda x: vnp.where(x > 0, 1.0, -1.0), lambda x: np.where(x > 0, 1.0, -1.0)
     .astype(np.float32), (A,)),
    ("where_int_cond", lambda i: vnp.where(i, 3, 4), lambda i: np.where(i, 3, 4).astype(np.int32),
     (LBL,)),
    ("arange", lambda: vnp.arange(5), lambda: np.arange(5, dtype=np.int32), ()),
    ("arange_float", lambda: vnp.arange(1.0, 2.0, 0.25),
     lambda: np.arange(1.0, 2.0, 0.25, dtype=np.float32), ()),
    ("arange_step", lambda: vnp.arange(2, 11, 3), lambda: np.arange(2, 11, 3, dtype=np.int32), ()),
    ("one_hot", lambda l: vnp.one_hot(l, 4), lambda l: np.eye(4, dtype=np.float32)[l], (LBL,)),
    # vnp.add, not +: eagerly, + on two numpy arrays is numpy's (int32 + float32 -> float64)
    ("full_zeros_ones", lambda x: vnp.add(vnp.add(vnp.full((2, 3), 7), vnp.zeros_like(x)[:2, :3]),
                                          vnp.ones(3, vnp.int32)),
     lambda x: np.full((2, 3), 8, np.float32), (A,)),
    ("astype", lambda x: (x * 10).astype(vnp.int32), lambda x: (x * 10).astype(np.int32), (A,)),
    ("astype_bool", lambda x: x.astype(bool), lambda x: x.astype(bool), (A,)),
    ("clip", lambda x: vnp.clip(x, -0.5, 0.5), lambda x: np.clip(x, -0.5, 0.5), (A,)),
    ("abs_sign_int", lambda i: vnp.abs(i - 1) * vnp.sign(i - 1),
     lambda i: np.abs(i - 1) * np.sign(i - 1), (LBL,)),
    ("square_sqrt", lambda x: vnp.sqrt(vnp.square(x)), lambda x: np.sqrt(np.square(x)), (A,)),
    ("power_int", lambda x: x ** 3 - x ** -2, lambda x: x ** 3 - x ** -2.0, (A,)),
    ("index_mixed", lambda x: x[1:, None, ..., ::-2], lambda x: x[1:, None, ..., ::-2], (C,)),
    ("index_int_slice", lambda x: x[-1, 1:3, 2], lambda x: x[-1, 1:3, 2], (C,)),
    ("index_array_middle", lambda x: x[:, np.array([3, -1, 0])],
     lambda x: x[:, np.array([3, -1, 0])], (A,)),
    ("index_traced_array", lambda x, i: x[i], lambda x, i: x[i], (A, IDX)),
    ("index_empty_slice", lambda x: x[2:1], lambda x: x[2:1], (A,)),
    ("take_flat", lambda x: vnp.take(x, [0, 5, 11]), lambda x: np.take(x, [0, 5, 11]), (A,)),
    ("take_negative_concrete", lambda x: vnp.take(x, np.array([-1, 0]), axis=1),
     lambda x: np.take(x, [-1, 0], axis=1), (A,)),
    ("concatenate_none", lambda x, y: vnp.concatenate([x, y], axis=None),
     lambda x, y: np.concatenate([x, y], axis=None), (A, B)),
    ("stack_neg_axis", lambda x, y: vnp.stack([x, y], axis=-1), lambda x, y: np.stack([x, y], -1),
     (A, B)),
    ("expand_squeeze", lambda x: vnp.squeeze(vnp.expand_dims(x, (0, 3)), 0),
     lambda x: np.squeeze(np.expand_dims(x, (0, 3)), 0), (A,)),
    ("moveaxis_transpose", lambda x: vnp.moveaxis(x, 0, -1).transpose(1, 0, 2),
     lambda x: np.moveaxis(x, 0, -1).transpose(1, 0, 2), (C,)),
    ("reshape_ravel", lambda x: x.reshape(4, -1).ravel()[::5], lambda x: x.reshape(4, -1).ravel()
     [::5], (C,)),
    ("matmul_vectors", lambda x: vnp.matmul(x[0], x[1]), lambda x: np.matmul(x[0], x[1]), (A,)),
    ("matmul_batched_4d", lambda x: vnp.matmul(x[:, None], x.transpose(0, 2, 1)),
     lambda x: np.matmul(x[:, None], x.transpose(0, 2, 1)), (C,)),
    ("dot_matrix", lambda x, y: vnp.dot(x, y.T), lambda x, y: np.dot(x, y.T), (A, B)),
    ("softmax", lambda x: vnp.softmax(x, axis=1), lambda x: np.exp(x) / np.exp(x).sum(1,
                                                                                    keepdims=True),
     (C,)),
    ("log_softmax", lambda x: vnp.log_softmax(x, axis=0),
     lambda x: x - np.log(np.exp(x).sum(0, keepdims=True)), (A,)),
    ("logsumexp", lambda x: vnp.logsumexp(x, axis=(0, 2)),
     lambda x: np.log(np.exp(x).sum((0, 2))), (C,)),
    ("var_ddof_std", lambda x: vnp.var(x, axis=0, ddof=1) + vnp.std(x),
     lambda x: np.var(x, axis=0, ddof=1) + np.std(x), (A,)),
    ("mean_int", lambda i: vnp.mean(i), lambda i: np.float32(np.mean(i)), (LBL,)),
    ("max_int_keepdims", lambda i: vnp.max(i, keepdims=True), lambda i: np.max(i, keepdims=True),
     (IDX,)),
]


@pytest.mark.parametrize("name, vfn, nfn, args", CASES, ids=[c[0] for c in CASES])
def test_eager_and_traced_match_numpy(name, vfn, nfn, args):
    want = np.asarray(nfn(*args))
    eager = np.asarray(vfn(*args))
    assert eager.shape == want.shape and eager.dtype == want.dtype
    np.testing.assert_allclose(eager, want, rtol=1e-5, atol=1e-6)
    got = run_program(vg.make_ir(vfn)(*args), *args)[0]
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_traced_indices_are_clamped_like_a_gpu_kernel():
    prog = vg.make_ir(lambda x, i: vnp.take(x, i, axis=0))(A, LBL)
    out = run_program(prog, A, np.array([-5, 1, 99], np.int32))[0]
    np.testing.assert_array_equal(out, A[[0, 1, 2]])
