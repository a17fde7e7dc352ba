"""vg.pure_callback as jax.pure_callback (issue 21): a host function with declared results,
eager, under jit on the interpreter and on Vulkan (a host step between submissions: no
fallback), nested in a loop body (the interpreter, counted), under vmap by each vmap_method,
and its errors: a wrong result names the callback and the user's line, grad is refused."""

import numpy as np
import pytest

import vkgrad as vg
import vkgrad.numpy as vnp

X = np.float32([0.5, -1.0, 2.0])


def host_sin(a):
    return np.sin(a)


def spec(shape=(3,)):
    return vg.ShapeDtypeStruct(shape, np.float32)


def test_eager_call_gets_numpy_arrays_and_pytrees():
    seen = []

    def fn(a, *, k):
        seen.append((type(a), k))
        return {"s": np.sin(a), "n": np.int32(a.size)}
    out = vg.pure_callback(fn, {"s": spec(), "n": vg.ShapeDtypeStruct((), np.int32)}, X, k=3)
    np.testing.assert_allclose(out["s"], np.sin(X))
    assert int(out["n"]) == 3 and seen == [(np.ndarray, 3)]


@pytest.mark.parametrize("backend", ["numpy", "vulkan"])
def test_under_jit_the_results_feed_the_program(backend):
    calls = []

    def fn(a):
        calls.append(a.copy())
        return np.sin(a)
    before = dict(vg.fallbacks())
    f = vg.jit(lambda x: vg.pure_callback(fn, vg.typeof(x), x * 2) * x + 1, backend=backend)
    for _ in range(2):
        np.testing.assert_allclose(f(X), np.sin(2 * X) * X + 1, rtol=1e-6)
    assert len(calls) == 2 and np.allclose(calls[-1], 2 * X)
    assert vg.fallbacks() == before      # on Vulkan a host step, not the interpreter


def test_an_unused_call_is_dropped_as_jax_may():
    calls = []
    f = vg.jit(lambda x: (vg.pure_callback(lambda a: calls.append(1) or a, spec(), x), x + 1)[1])
    f(X)
    assert calls == []


def test_in_a_scan_body_it_runs_on_the_interpreter_counted():
    def body(c, x):
        return c + vg.pure_callback(host_sin, vg.typeof(x), x), c
    before = sum(vg.fallbacks().values())
    with pytest.warns(vg.FallbackWarning, match="pure_callback"):
        c, _ = vg.jit(lambda xs: vg.lax.scan(body, np.float32(0), xs), backend="vulkan")(X)
    assert float(c) == pytest.approx(float(np.sin(X).sum()), rel=1e-6)
    assert sum(vg.fallbacks().values()) == before + 1


@pytest.mark.parametrize("method,calls", [("sequential", 2), ("sequential_unrolled", 2),
                                          ("expand_dims", 1), ("broadcast_all", 1),
                                          ("legacy_vectorized", 1)])
def test_vmap_methods(method, calls):
    shapes = []

    def fn(a, b):
        shapes.append((a.shape, b.shape))
        return np.sin(a) + b.reshape(b.shape + (1,) * (a.ndim - b.ndim))
    rows = np.stack([X, -X])
    out = vg.vmap(lambda r: vg.pure_callback(fn, spec(), r, np.float32(1),
                                             vmap_method=method))(rows)
    np.testing.assert_allclose(out, np.sin(rows) + 1, rtol=1e-6)
    assert len(shapes) == calls
    want_b = {"expand_dims": (1,), "broadcast_all": (2,), "legacy_vectorized": ()}
    if calls == 1:     # JAX's shapes: the batch first, the unmapped operand as the method says
        assert shapes == [((2, 3), want_b[method])]


def test_vmap_without_a_method_is_refused_as_jax():
    with pytest.raises(vg.ArgumentError, match="needs vmap_method="):
        vg.vmap(lambda r: vg.pure_callback(host_sin, spec(), r))(np.stack([X, X]))
    with pytest.raises(vg.ArgumentError, match="vmap_method must be one of"):
        vg.pure_callback(host_sin, spec(), X, vmap_method="loop")


@pytest.mark.parametrize("backend", ["numpy", "vulkan"])
def test_a_wrong_result_names_the_callback(backend):
    f = vg.jit(lambda x: vg.pure_callback(lambda a: a[:2], spec(), x), backend=backend)
    with pytest.raises(vg.ShapeError, match=r"<lambda>.*result 0 has shape \(2,\), declared "
                                            r"\(3,\)") as e:
        f(X)
    assert "test_callbacks.py" in str(e.value)
    def host_f64(a):
        return a.astype(np.float64)
    with pytest.raises(vg.DTypeError, match="host_f64: result 0 has dtype float64, declared "
                                            "float32"):
        vg.pure_callback(host_f64, spec(), X)
    with pytest.raises(vg.ArgumentError, match="returned a pytree"):
        vg.pure_callback(lambda a: (a, a), spec(), X)


def test_grad_and_jvp_are_refused_as_jax():
    for transform in (lambda g: vg.grad(g)(X),
                      lambda g: vg.jvp(g, (X,), (X,))):
        with pytest.raises(vg.GradError, match="host_sin has no derivative.*custom_jvp"):
            transform(lambda x: vg.pure_callback(host_sin, spec(), x).sum())
