"""custom_vjp / custom_jvp, jacfwd / jacrev / hessian, vg.tree_util, vg.devices,
vg.StrictModeError (their values and gradients are rows of tests/cases.py too)."""

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


def test_jacobians_match_finite_differences_with_pytrees():
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


def test_tree_util_and_registered_nodes_through_grad_jit_and_optim():
    tu = vg.tree_util

    @tu.register_pytree_node_class
    class Linear:
        def __init__(self, w, b):
            self.w, self.b = w, b

        def tree_flatten(self):
            return (self.w, self.b), "linear"

        @classmethod
        def tree_unflatten(cls, aux, children):
            assert aux == "linear"
            return cls(*children)

    layer = Linear(np.ones((3, 2), np.float32), np.zeros(2, np.float32))
    leaves, tree = tu.tree_flatten(layer)
    assert len(leaves) == 2 and str(tree) == "Linear(*, *)"
    assert tu.tree_structure(tu.tree_unflatten(tree, leaves)) == tree
    doubled = tu.tree_map(lambda a: a * 2, layer)
    assert isinstance(doubled, Linear) and doubled.w[0, 0] == 2
    assert len(tu.tree_leaves({"a": layer, "b": [1.0, None]})) == 3

    def loss(m, x):
        return vnp.sum((x @ m.w + m.b) ** 2)

    g = vg.grad(loss)(layer, X)
    assert isinstance(g, Linear) and g.w.shape == (3, 2)
    opt = vg.optim.adam(0.1)
    state = opt.init(layer)
    step = vg.jit(lambda m, s, x: opt.update(vg.grad(loss)(m, x), s, m), backend="numpy")
    layer2, state = step(layer, state, X)
    assert isinstance(layer2, Linear) and float(loss(layer2, X)) < float(loss(layer, X))


def test_devices_and_strict_mode_error_are_exported():
    devs = vg.devices()
    assert devs and devs[0].index == 0 and devs[0].name
    assert issubclass(vg.StrictModeError, vg.VkgradError)
    assert "devices" in vg.__all__ and "StrictModeError" in vg.__all__


def _nested_dict(depth):
    tree = 1.0
    for _ in range(depth):
        tree = {"a": tree}
    return tree


def test_printing_a_deep_pytree_visits_each_node_once():
    """Depth 200 of dicts prints in linear work: the printer visits every node once (it
    rendered each child twice per dict level before: 6.2 s at depth 22)."""
    from vkgrad.tracer import pytree
    td = vg.tree_util.tree_structure(_nested_dict(200))
    pieces = pytree._render(td)
    assert len(pieces) == 3 * 200 + 1      # per dict: "{", "'a': ", "}"; and the leaf "*"
    assert str(td) == "{'a': " * 200 + "*" + "}" * 200
    assert str(vg.tree_util.tree_structure([(1.0,), None, {"k": []}])) == "[(*,), None, {'k': []}]"


def test_a_deep_pytree_mismatch_message_is_quick_and_shows_both_structures():
    import time
    deep = _nested_dict(200)
    t0 = time.perf_counter()
    with pytest.raises(vg.ArgumentError, match="tree structures differ") as err:
        vg.tree_util.tree_map(lambda a, b: a + b, deep, {"b": 1.0})
    assert str(err.value) == "tree structures differ: " + "{'a': " * 200 + "*" + "}" * 200 + \
        " vs {'b': *}"
    assert time.perf_counter() - t0 < 5.0    # a generous bound; the counts above are the check
