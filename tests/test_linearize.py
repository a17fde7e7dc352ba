"""vg.linearize and vg.typeof as JAX's (issue 21): f_jvp is the JVP at the fixed primals,
against vg.jvp and against JAX 0.10.2's values, eager and under jit and vmap."""

import numpy as np
import pytest

import vkgrad as vg
import vkgrad.numpy as vnp

X = np.float32([0.5, -1.25, 2.0])
Y = np.float32([1.5, 0.25, -3.0])


def f(x, y):
    return vnp.sin(x) * y + x ** 2


def test_linearize_is_the_jvp_at_the_primals():
    out, f_jvp = vg.linearize(f, X, Y)
    np.testing.assert_allclose(out, f(X, Y), rtol=1e-6)
    rng = np.random.default_rng(0)
    for _ in range(2):   # the same f_jvp, several tangents
        tx, ty = rng.standard_normal((2, 3)).astype(np.float32)
        want = np.cos(X) * Y * tx + 2 * X * tx + np.sin(X) * ty
        np.testing.assert_allclose(f_jvp(tx, ty), want, rtol=1e-5)
        np.testing.assert_allclose(f_jvp(tx, ty), vg.jvp(f, (X, Y), (tx, ty))[1], rtol=1e-6)


def test_linearize_matches_jax_on_a_pytree():
    # jax.linearize(lambda p: jnp.tanh(p["w"]) * p["b"], {"w": 0.3, "b": 2.0}) on JAX 0.10.2:
    # out 0.5826252, f_jvp({"w": 1.0, "b": -1.0}) = 1.5389614
    fun = lambda p: vnp.tanh(p["w"]) * p["b"]           # noqa: E731
    out, f_jvp = vg.linearize(fun, {"w": np.float32(0.3), "b": np.float32(2.0)})
    assert float(out) == pytest.approx(0.5826252, rel=1e-6)
    assert float(f_jvp({"w": np.float32(1.0), "b": np.float32(-1.0)})) == \
        pytest.approx(1.5389614, rel=1e-6)


def test_linearize_with_aux_and_integer_outputs():
    def g(x):
        return (x * x, vnp.argmax(x)), x.sum()
    (out, arg), f_jvp, aux = vg.linearize(g, X, has_aux=True)
    assert float(aux) == pytest.approx(float(X.sum())) and int(arg) == 2
    t, t_int = f_jvp(np.ones(3, np.float32))
    np.testing.assert_allclose(t, 2 * X, rtol=1e-6)
    assert np.asarray(t_int).dtype == np.int32 and int(t_int) == 0


@pytest.mark.parametrize("backend", ["numpy", "vulkan"])
def test_linearize_under_jit(backend):
    @vg.jit(backend=backend)
    def step(x, y):
        out, f_jvp = vg.linearize(f, x, y)
        return out, f_jvp(y, x)
    out, t = step(X, Y)
    np.testing.assert_allclose(out, f(X, Y), rtol=1e-5)
    np.testing.assert_allclose(t, np.cos(X) * Y * Y + 2 * X * Y + np.sin(X) * X, rtol=1e-5)


def test_linearize_under_vmap_and_grad():
    rows = np.stack([X, Y])
    t = vg.vmap(lambda r: vg.linearize(vnp.sin, r)[1](r))(rows)
    np.testing.assert_allclose(t, np.cos(rows) * rows, rtol=1e-6)
    # d/dx of the directional derivative cos(x) * 1 summed: -sin(x)
    g = vg.grad(lambda x: vg.linearize(vnp.sin, x)[1](vnp.ones_like(x)).sum())(X)
    np.testing.assert_allclose(g, -np.sin(X), rtol=1e-6)


def test_linearize_bad_tangents_are_named():
    _, f_jvp = vg.linearize(f, X, Y)
    with pytest.raises(vg.ArgumentError, match="takes 2 tangents") as e:
        f_jvp(X)
    assert "test_linearize.py" in str(e.value)
    with pytest.raises(vg.ArgumentError, match="has shape"):
        f_jvp(X[:2], Y)


def test_typeof_gives_shape_and_dtype():
    assert vg.typeof(X) == vg.ShapeDtypeStruct((3,), np.float32)
    assert vg.typeof(np.arange(6, dtype=np.int32).reshape(2, 3)).shape == (2, 3)
    assert vg.typeof(1.0).dtype == np.float32 and vg.typeof(2).dtype == np.int32
    seen = []
    vg.jit(lambda x: seen.append(vg.typeof(x)) or x)(np.ones((2, 4), np.float32))
    assert seen == [vg.ShapeDtypeStruct((2, 4), np.float32)]
    with pytest.raises(vg.ArgumentError, match="typeof"):
        vg.typeof("s")
