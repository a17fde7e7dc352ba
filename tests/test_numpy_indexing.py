"""Indexing on traced values: x[i] and x.at[i] with traced (negative, out-of-range) indices on
the interpreter and on Vulkan, x.at inside grad and jit, and the refusal of x[i] = v."""

import numpy as np
import pytest

import vkgrad as vg
import vkgrad.numpy as vnp

X = np.arange(12, dtype=np.float32).reshape(3, 4) / 7 - 0.5
V = np.arange(5, dtype=np.float32) + 1


@pytest.mark.parametrize("i, want", [(-1, 5.0), (-5, 1.0), (2, 3.0), (7, 5.0), (-9, 1.0)])
def test_a_traced_index_counts_from_the_end_and_clamps(i, want):
    """Negative indices count from the end as in numpy and JAX; out of range they clamp (JAX)."""
    def f(x, i):
        return x[i]
    assert float(vg.jit(f)(V, i)) == want                                  # Vulkan
    prog = vg.make_ir(f)(V, np.int32(i))
    assert float(vg.run_program(prog, V, np.int32(i))[0]) == want        # the interpreter
    g = vg.grad(lambda x, i: 2.0 * f(x, i))(V, np.int32(i))
    np.testing.assert_array_equal(g, 2.0 * (np.arange(5) == int(want) - 1))


def test_traced_negative_indices_in_take_rows_and_at():
    rows = vg.jit(lambda x, i: x[i])(X, -1)
    np.testing.assert_array_equal(rows, X[-1])
    ids = np.int32([-1, 0, -4])
    np.testing.assert_array_equal(vg.jit(lambda x, i: vnp.take(x, i, axis=1))(X, ids),
                                  X[:, [3, 0, 0]])

    def setter(x, i, v):
        return x.at[i].set(v)
    want = V.copy()
    want[-2] = 10.0
    ten = np.float32(10.0)
    np.testing.assert_array_equal(vg.jit(setter)(V, -2, ten), want)
    prog = vg.make_ir(setter)(V, np.int32(-2), ten)
    np.testing.assert_array_equal(vg.run_program(prog, V, np.int32(-2), ten)[0], want)
    prog = vg.make_ir(lambda x, i: x.at[i].set(10.0))(V, np.int32(-2))     # a constant value
    np.testing.assert_array_equal(vg.run_program(prog, V, np.int32(-2))[0], want)


def test_a_constant_update_at_a_traced_index_on_vulkan():
    """A reshape of the literal update was planned as a view of a buffer it has not: the
    scatter read the index's buffer as its update (x[3] came back as 4e-45)."""
    np.testing.assert_array_equal(vg.jit(lambda x, i: x.at[i].set(10.0))(V, 3),
                                  [1, 2, 3, 10, 5])


def test_in_place_assignment_points_to_at():
    def f(x):
        x[0] = 1.0
        return x
    with pytest.raises(vg.ArgumentError, match=r"x = x\.at\[idx\]\.set\(y\)") as e:
        vg.make_ir(f)(X)
    assert "test_numpy_indexing.py" in e.value.source


def test_at_inside_grad_and_jit():
    def loss(x, v):
        y = x.at[1].set(v).at[:, 0].add(2.0 * v[:3]).at[2, 1:].mul(3.0)
        return vnp.sum(y * y)
    v = np.float32([1.0, 2.0, 3.0, 4.0])
    gx, gv = vg.grad(loss, argnums=(0, 1))(X, v)
    y = X.copy()
    y[1] = v
    y[:, 0] += 2 * v[:3]
    y[2, 1:] *= 3
    np.testing.assert_allclose(vg.jit(loss, backend="numpy")(X, v), np.sum(y * y), rtol=1e-6)

    def same_loss(x, v):   # vnp.at(x) is x.at for numpy arrays too (check_grads calls it on them)
        y = vnp.at(vnp.at(vnp.at(x)[1].set(v))[:, 0].add(2.0 * v[:3]))[2, 1:].mul(3.0)
        return vnp.sum(y * y)
    vg.check_grads(same_loss, (X, v), order=2)
    np.testing.assert_allclose(vg.grad(same_loss)(X, v), gx, rtol=1e-6)
    assert gx.shape == X.shape and gv.shape == v.shape
    assert np.all(gx[1] == 0)            # row 1 was overwritten: no gradient reaches x there
    # x.at[i].get() and traced masks
    prog = vg.make_ir(lambda x: (x.at[::2].get(), x.at[x > 0].set(0.0)))(X)
    got = vg.run_program(prog, X)
    np.testing.assert_array_equal(got[0], X[::2])
    np.testing.assert_array_equal(got[1], np.where(X > 0, 0, X))
