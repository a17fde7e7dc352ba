"""custom_vjp / custom_jvp and jacfwd / jacrev / hessian (their values and gradients are rows of
tests/cases.py too): rules used under jit, jvp and grad of grad; what a rule lacks; Jacobians
of pytrees against finite differences."""

import numpy as np
import pytest

import vkgrad as vg
import vkgrad.numpy as vnp

X = np.float32([0.5, -1.0, 2.0])


def test_custom_vjp_rule_is_used_and_traced_into_jit():
    @vg.custom_vjp
    def clip_gradient(lo, hi, x):
        return x

    def fwd(lo, hi, x):
        return x, None

    def bwd(lo, hi, res, g):
        return (vnp.clip(g, lo, hi),)

    clip_gradient = vg.custom_vjp(clip_gradient.fun, nondiff_argnums=(0, 1)).defvjp(fwd, bwd)
    f = lambda x: vnp.sum(clip_gradient(-1.0, 1.0, x) * np.float32([5.0, 0.5, -3.0]))
    np.testing.assert_array_equal(vg.grad(f)(X), [1.0, 0.5, -1.0])
    step = vg.jit(vg.grad(f), backend="vulkan")
    np.testing.assert_array_equal(np.asarray(step(X)), [1.0, 0.5, -1.0])
    lowered = step.lower(X)
    assert lowered.fallback_reason is None
    assert "min" in lowered.as_text("optimized") and "custom" not in lowered.as_text("optimized")
    assert "custom_vjp_call[rule=clip_gradient]" in str(vg.make_ir(f)(X))
    assert clip_gradient(-1.0, 1.0, X) is X          # outside any transform it just runs


def test_custom_jvp_under_jvp_grad_and_grad_of_grad():
    @vg.custom_jvp
    def f(x):
        return vnp.sin(x) * 2.0

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return f(x), 2.0 * vnp.cos(x) * t

    x = np.float64(0.7)
    assert vg.jvp(f, (x,), (1.0,))[1] == pytest.approx(2 * np.cos(0.7))
    assert vg.grad(f)(x) == pytest.approx(2 * np.cos(0.7))
    assert vg.grad(vg.grad(f))(x) == pytest.approx(-2 * np.sin(0.7))


def test_custom_rules_say_what_is_missing():
    g = vg.custom_vjp(lambda x: x)
    with pytest.raises(vg.ArgumentError, match="defvjp"):
        vg.grad(lambda x: g(x))(1.0)
    h = vg.custom_vjp(lambda x, y: x * y).defvjp(lambda x, y: (x * y, (x, y)),
                                                 lambda res, g: (g * res[1],))
    with pytest.raises(vg.ArgumentError, match="one cotangent per differentiable argument"):
        vg.grad(h)(1.0, 2.0)


def test_jacobians_match_finite_differences_with_pytrees(x64):
    def f(p, x):
        return {"y": vnp.tanh(p["w"] @ x + p["b"]), "n": vnp.sum(x ** 2)}

    rng = np.random.default_rng(0)
    p = {"w": rng.standard_normal((2, 3)), "b": rng.standard_normal(2)}
    x = rng.standard_normal(3)
    jr = vg.jacrev(f, argnums=(0, 1))(p, x)
    jf = vg.jacfwd(f, argnums=(0, 1))(p, x)
    assert jr["y"][0]["w"].shape == (2, 2, 3) and jr["n"][1].shape == (3,)
    for key in ("y", "n"):
        np.testing.assert_allclose(jr[key][0]["w"], jf[key][0]["w"], atol=1e-12)
        np.testing.assert_allclose(jr[key][1], jf[key][1], atol=1e-12)
    eps = 1e-6
    for i in range(3):
        d = np.zeros(3)
        d[i] = eps
        fd = (f(p, x + d)["y"] - f(p, x - d)["y"]) / (2 * eps)
        np.testing.assert_allclose(jr["y"][1][:, i], fd, atol=1e-7)
    h = vg.hessian(lambda x: vnp.sum(vnp.sin(x) * x[0]))(x)
    want = np.diag(-np.sin(x) * x[0])
    want[0, :] += np.cos(x)
    want[:, 0] += np.cos(x)
    np.testing.assert_allclose(h, want, atol=1e-12)
