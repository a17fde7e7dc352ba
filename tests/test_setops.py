"""jnp's set operations outside the jitted table of tests/test_jax_names.py: the concrete
(eager) forms without size= (numpy's values, which JAX's equal there), the message under jit,
sizes where JAX 0.10.2 fails, vmap, and float data running whole on Vulkan."""

import numpy as np
import pytest

import source_lines
import vkgrad as vg
import vkgrad.numpy as vnp
from vkgrad.errors import ConcretizationError

A = np.float32([3.0, np.nan, 1.0, 1.0, 2.0, -4.0, np.nan])
B = np.float32([2.0, 5.0, 1.0, np.nan, 7.0, 2.0])
I = np.int32([4, 0, 4, -2, 9, 1])
J = np.int32([1, 1, 8, 4])


def _equal(got, want):
    got = np.asarray(got)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("a, b", [(A, B), (I, J), (J, I), (I, I[:0])])
def test_without_size_a_concrete_array_gives_numpy_s_values(a, b):
    for name in ("intersect1d", "union1d", "setdiff1d", "setxor1d"):
        _equal(getattr(vnp, name)(a, b), getattr(np, name)(a, b))
    for got, want in zip(vnp.intersect1d(a, b, return_indices=True),
                         np.intersect1d(a, b, return_indices=True)):
        np.testing.assert_array_equal(np.asarray(got), want)
    u = np.unique(a)
    _equal(vnp.setdiff1d(u, b, assume_unique=True), np.setdiff1d(u, b, assume_unique=True))


def test_under_jit_without_size_asks_for_one():
    with pytest.raises(ConcretizationError) as e:
        vg.jit(lambda x, y: vnp.setxor1d(x, y))(I, J)  # setxor-jit
    msg = str(e.value)
    assert "vnp.setxor1d" in msg and "size=" in msg, msg
    assert source_lines.line_of(__file__, "setxor-jit") in msg, msg


def test_sizes_where_jax_fails():
    # JAX 0.10.2 raises for size=0 (a max of no values) and for return_indices with an empty
    # array (a gather out of range); vkgrad gives the empty result and the padding's indices
    f = vg.jit(lambda x, y: (vnp.intersect1d(x, y, size=0), vnp.setxor1d(x, y, size=0),
                             vnp.setdiff1d(x, y, size=0)), backend="numpy")
    assert [np.asarray(r).shape for r in f(I, J)] == [(0,)] * 3
    vals, i1, i2 = vnp.intersect1d(A, B[:0], return_indices=True, size=2)
    _equal(vals, np.float32([0, 0]))
    _equal(i1, np.int32([7, 7]))
    _equal(i2, np.int32([0, 0]))


@pytest.mark.parametrize("backend", ["numpy", "vulkan"])
def test_vmap_over_rows(backend):
    a = np.stack([A, A[::-1] * 2])
    f = vg.jit(vg.vmap(lambda x: (vnp.intersect1d(x, B, size=4),
                                  vnp.setdiff1d(x, B, size=5, fill_value=-1.0))),
               backend=backend)
    inter, diff = f(a)
    for row, got_i, got_d in zip(a, np.asarray(inter), np.asarray(diff)):
        want_i = np.intersect1d(row, B)
        np.testing.assert_array_equal(got_i[:want_i.size], want_i)
        want_d = np.setdiff1d(row, B)
        np.testing.assert_array_equal(got_d, np.concatenate(
            [want_d, np.full(5 - want_d.size, -1, np.float32)]))


def test_float_sets_run_whole_on_vulkan():
    fns = {
        "intersect1d": lambda x, y: vnp.intersect1d(x, y, return_indices=True, size=3),
        "union1d": lambda x, y: vnp.union1d(x, y, size=8),
        "setdiff1d": lambda x, y: vnp.setdiff1d(x, y, size=4),
        "setxor1d": lambda x, y: vnp.setxor1d(x, y, size=6),
    }
    for name, fn in fns.items():
        assert vg.jit(fn, backend="vulkan").lower(A, B).fallback_reason is None, name
