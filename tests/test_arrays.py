"""vg.Array as JAX's jax.Array (issue 21): every result vkgrad gives is one, host-backed on the
interpreter, with .at, .block_until_ready(), .item(), numpy interop, and JAX's immutability."""

import pickle

import numpy as np
import pytest

import vkgrad as vg
import vkgrad.numpy as vnp

X = np.arange(12, dtype=np.float32).reshape(3, 4) / 10


def test_eager_results_of_vnp_and_of_every_transform_are_arrays():
    f = lambda x: vnp.sum(vnp.tanh(x) ** 2)   # noqa: E731
    results = {
        "vnp.tanh": vnp.tanh(X), "vnp.asarray": vnp.asarray(X), "vnp.zeros": vnp.zeros(3),
        "vnp.arange": vnp.arange(5), "operator on a result": vnp.asarray(X) + 1,
        "grad": vg.grad(f)(X), "value_and_grad": vg.value_and_grad(f)(X)[0],
        "vjp": vg.vjp(f, X)[1](np.float32(1.0))[0], "jvp": vg.jvp(f, (X,), (X,))[1],
        "vmap": vg.vmap(f)(X), "jacfwd": vg.jacfwd(vnp.sin)(X[0]),
        "jacrev": vg.jacrev(vnp.sin)(X[0]), "hessian": vg.hessian(f)(X[0]),
        "jit (interpreter)": vg.jit(f, backend="numpy")(X),
        "an output that is an input": vg.vjp(lambda x: x, X)[0],
    }
    for name, r in results.items():
        assert isinstance(r, vg.Array), (name, type(r))


def test_reading_an_array():
    a = vg.grad(lambda x: vnp.sum(x * x))(X)
    assert a.block_until_ready() is a and vg.block_until_ready({"a": a})["a"] is a
    assert vnp.sum(a).item() == pytest.approx(float((2 * X).sum()), rel=1e-6)
    assert a[1, 2].item() == pytest.approx(2 * X[1, 2])
    h = np.asarray(a)
    np.testing.assert_allclose(h, 2 * X, rtol=1e-6)
    with pytest.raises(ValueError):   # the host copy is read-only: no one can change an Array
        h[0, 0] = 5.0
    assert np.asarray(a, np.float64).dtype == np.float64 and a.tolist()[0][1] == pytest.approx(0.2)
    assert a.shape == (3, 4) and a.dtype == np.float32 and a.ndim == 2 and a.size == 12
    assert [r.shape for r in a] == [(4,)] * 3 and all(isinstance(r, vg.Array) for r in a)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(a)), a)
    assert "Array([[0." in repr(a) and "dtype=float32" in repr(a)


def test_item_assignment_is_jax_immutability_error():
    a = vnp.asarray(X)
    with pytest.raises(TypeError, match=r"'Array' object does not support item assignment\. "
                       r"vkgrad arrays are immutable.*x = x\.at\[idx\]\.set\(y\)"):
        a[0, 0] = 1.0
    with pytest.raises(TypeError, match="does not support item assignment"):
        vg.grad(lambda x: x.__setitem__(0, 1.0))(X)


def test_at_updates_return_new_arrays():
    a = vnp.asarray(X)
    idx = (1, slice(None, 2))
    cases = {"set": (lambda h, v: v), "add": np.add, "mul": np.multiply,
             "multiply": np.multiply, "min": np.minimum, "max": np.maximum}
    for name, op in cases.items():
        got = getattr(a.at[idx], name)(0.25)
        want = X.copy()
        want[idx] = op(X[idx], np.float32(0.25))
        assert isinstance(got, vg.Array), name
        np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=name)
    np.testing.assert_array_equal(a.at[2].get(), X[2])
    np.testing.assert_array_equal(a, X)   # unchanged


def test_source_data_changed_later_does_not_change_the_array():
    h = X.copy()
    a = vnp.asarray(h)
    h[0, 0] = 100.0
    assert a[0, 0].item() == 0.0


def test_basic_indexing_of_host_arrays_is_numpy_and_errors_stay_vkgrads():
    a = vnp.asarray(X)
    for key in (1, (slice(None), 2), (Ellipsis, None, slice(1, None, 2)), -1, (2, -3)):
        got = a[key]
        assert isinstance(got, vg.Array)
        np.testing.assert_array_equal(got, X[key])
    with pytest.raises(vg.VkgradIndexError, match="out of"):
        a[5]


def test_concrete_boolean_mask_selects_as_numpy():
    a = vnp.asarray(X)
    np.testing.assert_array_equal(a[a > 0.5], X[X > 0.5])
    with pytest.raises(vg.VkgradIndexError, match="boolean mask"):
        vg.jit(lambda x: x[x > 0.5], backend="numpy")(X)


def test_operators_defer_to_types_they_do_not_know():
    assert vnp.sum(vnp.asarray(X)) == pytest.approx(float(X.sum()), rel=1e-6)
    assert (vnp.asarray([1.0, 2.0]) + [1.0, 1.0]).tolist() == [2.0, 3.0]
