"""vg.lax.gather and the scatters with XLA's dimension numbers: the classic uses (x[idx], a
point gather, a batched gather, an embedding lookup, windows, x.at[idx].add) against numpy and
against vkgrad's own x[...] / x.at[...], on the interpreter and jitted (traced indices, one on
Vulkan), the modes, gradients, and the errors for inconsistent dimension numbers."""
import numpy as np
import pytest

import vkgrad as vg
import vkgrad.numpy as vnp
from vkgrad import lax
from vkgrad.errors import ArgumentError, ShapeError

RNG = np.random.default_rng(0)
X = RNG.standard_normal((5, 6)).astype(np.float32)
ROWS = lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,),
                                  start_index_map=(0,))
ROWS_S = lax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                                     scatter_dims_to_operand_dims=(0,))


def test_rows_as_gather_match_numpy_and_getitem():
    idx = np.array([3, 0, 3, 4])
    want = X[idx]
    got = lax.gather(X, idx[:, None], ROWS, (1, 6))
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, vnp.asarray(X)[idx])
    traced = vg.jit(lambda x, i: lax.gather(x, i[:, None], ROWS, (1, 6)))
    np.testing.assert_array_equal(traced(X, idx.astype(np.int32)), want)


def test_point_gather_and_offset_dims_first():
    ij = np.array([[1, 2], [4, 5], [0, 0]])
    dn = lax.GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(0, 1),
                                    start_index_map=(0, 1))
    np.testing.assert_array_equal(lax.gather(X, ij, dn, (1, 1)), X[ij[:, 0], ij[:, 1]])
    # columns, the window's dimension first in the output: out[:, k] = X[:, j_k]
    cols = lax.GatherDimensionNumbers(offset_dims=(0,), collapsed_slice_dims=(1,),
                                      start_index_map=(1,))
    j = np.array([[5], [1]])
    np.testing.assert_array_equal(lax.gather(X, j, cols, (5, 1)), X[:, [5, 1]])


def test_one_index_vector_under_vmap_and_none():
    dn = lax.GatherDimensionNumbers(offset_dims=(0,), collapsed_slice_dims=(0,),
                                    start_index_map=(0,))
    f = vg.vmap(lambda i: lax.gather(X, i, dn, (1, 6)))   # each i: one index vector, no batch
    np.testing.assert_array_equal(f(np.array([[1], [3]], np.int32)), X[[1, 3]])
    assert np.asarray(lax.gather(X, np.zeros((0, 1), np.int32), ROWS, (1, 6))).shape == (0, 6)


def test_windows_clip_and_fill():
    starts = np.array([[1, 2], [4, 4], [-1, 0]])
    dn = lax.GatherDimensionNumbers(offset_dims=(1, 2), collapsed_slice_dims=(),
                                    start_index_map=(0, 1))
    clip = lax.gather(X, starts, dn, (2, 3), mode="clip")
    for b, (s0, s1) in enumerate(starts):
        s0, s1 = np.clip(s0, 0, 3), np.clip(s1, 0, 3)
        np.testing.assert_array_equal(clip[b], X[s0:s0 + 2, s1:s1 + 3])
    fill = np.asarray(lax.gather(X, starts, dn, (2, 3)))   # mode=None: FILL_OR_DROP
    np.testing.assert_array_equal(fill[0], X[1:3, 2:5])
    assert np.isnan(fill[1:]).all()                         # windows that do not fit
    got = lax.gather(X, starts, dn, (2, 3), mode=lax.GatherScatterMode.FILL_OR_DROP,
                     fill_value=7.0)
    np.testing.assert_array_equal(np.asarray(got)[1:], np.full((2, 2, 3), 7, np.float32))
    ints = lax.gather(np.arange(30, dtype=np.int32).reshape(5, 6), starts, dn, (2, 3))
    assert (np.asarray(ints)[1:] == np.iinfo(np.int32).min).all()
    traced = vg.jit(lambda x, s: lax.gather(x, s, dn, (2, 3)))(X, starts.astype(np.int32))
    np.testing.assert_array_equal(traced, fill)


def test_batched_gather():
    x = RNG.standard_normal((3, 7, 4)).astype(np.float32)
    idx = RNG.integers(0, 7, (3, 5, 1))
    dn = lax.GatherDimensionNumbers(offset_dims=(2,), collapsed_slice_dims=(1,),
                                    start_index_map=(1,), operand_batching_dims=(0,),
                                    start_indices_batching_dims=(0,))
    want = np.stack([x[b, idx[b, :, 0]] for b in range(3)])
    np.testing.assert_array_equal(lax.gather(x, idx, dn, (1, 1, 4)), want)
    np.testing.assert_array_equal(vnp.asarray(x)[np.arange(3)[:, None], idx[..., 0]], want)


def test_embedding_lookup_and_its_gradient():
    table = RNG.standard_normal((10, 3)).astype(np.float32)
    ids = np.array([[1, 4, 1], [9, 0, 4]])
    dn = lax.GatherDimensionNumbers(offset_dims=(2,), collapsed_slice_dims=(0,),
                                    start_index_map=(0,))

    def embed(t, ids):
        return lax.gather(t, ids[..., None], dn, (1, 3), mode="promise_in_bounds")
    np.testing.assert_array_equal(embed(table, ids), table[ids])
    np.testing.assert_array_equal(embed(table, ids), vnp.take(vnp.asarray(table), ids, axis=0))
    vg.check_grads(lambda t: vnp.sum(vnp.sin(embed(t, ids))), (table,), order=1)
    g = vg.jit(vg.grad(lambda t, i: vnp.sum(embed(t, i) ** 2)))(table, ids.astype(np.int32))
    want = np.zeros_like(table)
    np.add.at(want, ids, 2 * table[ids])
    np.testing.assert_allclose(g, want, rtol=1e-6)


def test_scatter_add_as_at_add():
    idx = np.array([[3], [0], [3]])
    u = RNG.standard_normal((3, 6)).astype(np.float32)
    want = X.copy()
    np.add.at(want, idx[:, 0], u)
    np.testing.assert_allclose(lax.scatter_add(X, idx, u, ROWS_S), want, rtol=1e-6)
    np.testing.assert_allclose(vnp.asarray(X).at[idx[:, 0]].add(u), want, rtol=1e-6)
    traced = vg.jit(lambda x, i, u: lax.scatter_add(x, i, u, ROWS_S))
    np.testing.assert_allclose(traced(X, idx.astype(np.int32), u), want, rtol=1e-6)
    # a window that does not fit is dropped (FILL_OR_DROP), or clamped onto the last row
    bad = np.array([[3], [5], [-1]])
    drop = X.copy()
    drop[3] += u[0]
    np.testing.assert_allclose(lax.scatter_add(X, bad, u, ROWS_S), drop, rtol=1e-6)
    np.testing.assert_allclose(traced(X, bad.astype(np.int32), u), drop, rtol=1e-6)
    clip = X.copy()
    np.add.at(clip, [3, 4, 0], u)
    np.testing.assert_allclose(lax.scatter_add(X, bad, u, ROWS_S, mode="clip"), clip, rtol=1e-6)
    vg.check_grads(lambda x, u: vnp.sum(vnp.cos(lax.scatter_add(x, idx, u, ROWS_S))), (X, u),
                   order=1)


def test_scatter_set_mul_min_max_and_apply():
    idx = np.array([[1, 2], [4, 0], [1, 2]])
    dn = lax.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0, 1),
                                     scatter_dims_to_operand_dims=(0, 1))
    u = np.array([10.0, -3.0, 0.5], np.float32)
    for fn, at in [(lax.scatter_mul, np.multiply.at), (lax.scatter_min, np.minimum.at),
                   (lax.scatter_max, np.maximum.at)]:
        want = X.copy()
        at(want, (idx[:, 0], idx[:, 1]), u)
        np.testing.assert_allclose(fn(X, idx, u, dn), want, rtol=1e-6)
    want = X.copy()
    want[idx[:, 0], idx[:, 1]] = u                          # the last update of a repeat
    np.testing.assert_array_equal(lax.scatter(X, idx, u, dn), want)
    np.testing.assert_array_equal(vnp.asarray(X).at[idx[:, 0], idx[:, 1]].set(u), want)
    for fn in (lax.scatter, lax.scatter_mul, lax.scatter_max):
        vg.check_grads(lambda x, u: vnp.sum(vnp.sin(fn(x, idx[:2], u, dn))), (X, u[:2]),
                       order=1)
    got = lax.scatter_apply(X, idx, vnp.exp, dn, update_shape=(3,))
    want = X.copy()
    want[idx[:, 0], idx[:, 1]] = np.exp(X[idx[:, 0], idx[:, 1]])
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_batched_scatter():
    x = np.zeros((2, 4, 3), np.float32)
    idx = np.array([[[1], [1]], [[3], [0]]])
    u = RNG.standard_normal((2, 2, 3)).astype(np.float32)
    dn = lax.ScatterDimensionNumbers(update_window_dims=(2,), inserted_window_dims=(1,),
                                     scatter_dims_to_operand_dims=(1,), operand_batching_dims=(0,),
                                     scatter_indices_batching_dims=(0,))
    want = x.copy()
    for b in range(2):
        np.add.at(want[b], idx[b, :, 0], u[b])
    np.testing.assert_allclose(lax.scatter_add(x, idx, u, dn), want, rtol=1e-6)


def test_jit_on_vulkan():
    idx = np.array([[2], [0]], np.int32)
    f = vg.jit(lambda x, i: lax.scatter_add(x, i, lax.gather(x, i, ROWS, (1, 6)), ROWS_S),
               backend="vulkan")
    want = X.copy()
    np.add.at(want, idx[:, 0], X[idx[:, 0]])
    np.testing.assert_allclose(f(X, idx), want, rtol=1e-6)


def test_traced_indices_need_add_or_set():
    dn = lax.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0, 1),
                                     scatter_dims_to_operand_dims=(0, 1))
    f = vg.jit(lambda x, i: lax.scatter_max(x, i, np.ones(2, np.float32), dn))
    with pytest.raises(ArgumentError, match="scatter_max with traced indices"):
        f(X, np.array([[0, 1], [2, 3]], np.int32))


def test_modes():
    assert lax.GatherScatterMode.from_any(None) is lax.GatherScatterMode.FILL_OR_DROP
    assert lax.GatherScatterMode.from_any("clip") is lax.GatherScatterMode.CLIP
    with pytest.raises(ArgumentError, match="unknown gather/scatter mode"):
        lax.gather(X, np.array([[0]]), ROWS, (1, 6), mode="wrap")


@pytest.mark.parametrize("call,match", [
    (lambda: lax.gather(X, np.array([[0, 1]]), ROWS, (1, 6)), "index vectors of length 2"),
    (lambda: lax.gather(X, np.array([[0.0]]), ROWS, (1, 6)), "integer array"),
    (lambda: lax.gather(X, np.array([[0]]), ROWS, (1,)), "1 slice sizes"),
    (lambda: lax.gather(X, np.array([[0]]), ROWS, (2, 6)), "must have size 1"),
    (lambda: lax.gather(X, np.array([[0]]), ROWS, (1, 7)), "window of size 7"),
    (lambda: lax.gather(X, np.array([[0]]), ROWS._replace(offset_dims=()), (1, 6)),
     "0 offset_dims"),
    (lambda: lax.gather(X, np.array([[0]]), ROWS._replace(collapsed_slice_dims=(1, 0)),
                        (1, 1)), "collapsed_slice_dims"),
    (lambda: lax.gather(X, np.array([[0]]), ROWS._replace(operand_batching_dims=(1,)), (1, 1)),
     "do not pair"),
    (lambda: lax.scatter_add(X, np.array([[0]]), np.ones((2, 6)), ROWS_S), "updates of shape"),
    (lambda: lax.scatter_add(X, np.array([[0]]), np.ones((1, 6)),
                             ROWS_S._replace(inserted_window_dims=())), "update_window_dims"),
])
def test_inconsistent_dimension_numbers(call, match):
    with pytest.raises((ShapeError, ArgumentError), match=match):
        call()
