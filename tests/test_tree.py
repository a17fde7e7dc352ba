"""vg.tree (jax.tree's names) and the path functions of vg.tree_util: keys as JAX prints them,
register_dataclass; and the small JAX names: vg.jacobian, vg.test_util.check_grads,
custom_jvp.defjvps, JAX's error for jvp of a custom_vjp function."""

import collections
import dataclasses

import numpy as np
import pytest

import vkgrad as vg
import vkgrad.numpy as vnp
from vkgrad import tree_util as tu

Pair = collections.namedtuple("Pair", "w b")
TREE = {"blocks": [{"w": 1.0, "b": 2.0}, Pair(3.0, None)], "emb": (4.0,)}


def test_tree_module_names():
    leaves, td = vg.tree.flatten(TREE)
    assert leaves == [2.0, 1.0, 3.0, 4.0]            # dict keys sorted, None is no leaf
    assert vg.tree.leaves(TREE) == leaves and vg.tree.structure(TREE) == td
    assert vg.tree.unflatten(td, [x * 10 for x in leaves]) == vg.tree.map(lambda x: x * 10, TREE)
    assert vg.tree.map(lambda x, y: x + y, TREE, TREE)["emb"] == (8.0,)
    assert vg.tree.reduce(lambda a, b: a + b, TREE) == 10.0
    assert vg.tree.reduce(lambda a, b: a + b, TREE, 100.0) == 110.0
    assert vg.tree.all([True, (1, {"a": 2})]) and not vg.tree.all([True, 0])
    assert vg.tree.map(lambda x: x, None) is None


def test_transpose():
    outer, inner = vg.tree.structure([0, 0, 0]), vg.tree.structure({"a": 0, "b": 0})
    tree = [{"a": 1, "b": 2}, {"a": 3, "b": 4}, {"a": 5, "b": 6}]
    want = {"a": [1, 3, 5], "b": [2, 4, 6]}
    assert vg.tree.transpose(outer, inner, tree) == want
    assert vg.tree.transpose(outer, None, tree) == want
    with pytest.raises(vg.ArgumentError, match="structures differ"):
        vg.tree.transpose(outer, inner, [{"a": 1}, {"a": 3}, {"a": 5}])


def test_paths_print_as_jax():
    pairs = vg.tree.leaves_with_path(TREE)
    assert [tu.keystr(p) for p, _ in pairs] == \
        ["['blocks'][0]['b']", "['blocks'][0]['w']", "['blocks'][1].w", "['emb'][0]"]
    assert pairs[2][0] == (tu.DictKey("blocks"), tu.SequenceKey(1), tu.GetAttrKey("w"))
    assert repr(tu.DictKey("a")) == "DictKey(key='a')" and str(tu.SequenceKey(3)) == "[3]"
    assert str(tu.GetAttrKey("w")) == ".w"
    flat, td = vg.tree.flatten_with_path(TREE)
    assert [x for _, x in flat] == vg.tree.leaves(TREE) and td == vg.tree.structure(TREE)
    named = vg.tree.map_with_path(lambda p, x, y: f"{tu.keystr(p)}={x + y}", TREE, TREE)
    assert named["blocks"][1] == Pair("['blocks'][1].w=6.0", None)
    assert tu.tree_leaves_with_path(TREE) == pairs
    assert tu.tree_map_with_path(lambda p, x: len(p), TREE)["emb"] == (2,)


def test_register_dataclass_and_nodes_without_keys():
    @tu.register_dataclass
    @dataclasses.dataclass
    class Linear:
        w: object
        b: object
        name: str = dataclasses.field(default="lin", metadata=dict(static=True))

    lin = Linear(np.ones((2, 2), np.float32), np.zeros(2, np.float32))
    assert [tu.keystr(p) for p, _ in vg.tree.leaves_with_path({"l": lin})] == \
        ["['l'].w", "['l'].b"]
    doubled = vg.tree.map(lambda x: x * 2, lin)
    assert isinstance(doubled, Linear) and doubled.name == "lin" and doubled.w[0, 0] == 2
    g = vg.grad(lambda m: vnp.sum(m.w * 3.0 + m.b))(lin)
    assert isinstance(g, Linear) and float(g.w[0, 0]) == 3.0

    class Box:
        def __init__(self, a, b):
            self.a, self.b = a, b

    tu.register_pytree_node(Box, lambda x: ((x.a, x.b), None), lambda aux, k: Box(*k))
    assert [tu.keystr(p) for p, _ in vg.tree.leaves_with_path(Box(1, 2))] == \
        ["[<flat index 0>]", "[<flat index 1>]"]
    with pytest.raises(vg.ArgumentError, match="not a dataclass"):
        tu.register_dataclass(Box)


def test_jacobian_and_test_util_check_grads():
    x = np.float32([0.5, -1.0, 2.0])
    np.testing.assert_allclose(vg.jacobian(lambda v: vnp.sin(v) * v[0])(x),
                               vg.jacrev(lambda v: vnp.sin(v) * v[0])(x))
    vg.test_util.check_grads(lambda v: vnp.sum(vnp.tanh(v) ** 2), (x,), order=2,
                             modes=("fwd", "rev"), atol=1e-4, rtol=1e-3, eps=1e-4)
    with pytest.raises(vg.GradientCheckError):
        bad = vg.custom_vjp(lambda v: vnp.sin(v)).defvjp(lambda v: (vnp.sin(v), v),
                                                         lambda r, g: (g * 2.0,))
        vg.test_util.check_grads(bad, (x,), order=1, modes=("rev",))


def test_defjvps_one_rule_per_argument_summed():
    f = vg.custom_jvp(lambda x, y: vnp.sin(x) * y)
    f.defjvps(lambda t, ans, x, y: vnp.cos(x) * y * t, lambda t, ans, x, y: vnp.sin(x) * t)
    x, y = np.float32(0.5), np.float32(2.0)
    _, t = vg.jvp(f, (x, y), (np.float32(1.0), np.float32(3.0)))
    assert float(t) == pytest.approx(np.cos(0.5) * 2 + np.sin(0.5) * 3, rel=1e-6)
    gx, gy = vg.grad(f, argnums=(0, 1))(x, y)
    assert float(gx) == pytest.approx(2 * np.cos(0.5), rel=1e-6)
    assert float(gy) == pytest.approx(np.sin(0.5), rel=1e-6)
    # None: that argument's tangent contributes nothing (JAX's semantics)
    g = vg.custom_jvp(lambda x, y: x * y)
    g.defjvps(None, lambda t, ans, x, y: x * t)
    gx, gy = vg.grad(g, argnums=(0, 1))(np.float32(3.0), np.float32(2.0))
    assert float(gx) == 0.0 and float(gy) == 3.0
    with pytest.raises(vg.ArgumentError, match="nondiff_argnums"):
        vg.custom_jvp(lambda n, x: x, nondiff_argnums=(0,)).defjvps(None)


def test_jvp_of_a_custom_vjp_function_is_jax_s_error():
    h = vg.custom_vjp(lambda x: vnp.sin(x)).defvjp(lambda x: (vnp.sin(x), x),
                                                   lambda r, g: (g * vnp.cos(r),))
    assert float(vg.grad(h)(np.float32(0.3))) == pytest.approx(np.cos(0.3), rel=1e-6)
    for fwd in (lambda: vg.jvp(h, (np.float32(0.3),), (np.float32(1.0),)),
                lambda: vg.jacfwd(h)(np.float32([0.3, 0.4]))):
        with pytest.raises(vg.GradError, match=r"can't apply forward-mode autodiff \(jvp\) "
                                                "to a custom_vjp function"):
            fwd()
    # a custom_vjp call no tangent reaches is fine under jvp
    _, t = vg.jvp(lambda x: x * h(np.float32(0.2)), (np.float32(2.0),), (np.float32(1.0),))
    assert float(t) == pytest.approx(np.sin(0.2), rel=1e-6)


# ------------------------------------------------ broadcast, reduce_associative, leaf tests
# expected values: jax 0.10.2's jax.tree / jax.tree_util on the same trees

def test_broadcast_repeats_prefix_leaves_over_the_full_tree():
    assert vg.tree.broadcast([1, {"a": 2}], [(3, 4), {"a": [5, 6, None]}]) == \
        [(1, 1), {"a": [2, 2, None]}]
    assert vg.tree.broadcast(7, {"x": 1, "y": (2, 3)}) == {"x": 7, "y": (7, 7)}
    assert vg.tree_util.tree_broadcast(None, None) is None


def test_reduce_associative_is_jaxs_balanced_order():
    import operator
    assert vg.tree.reduce_associative(operator.add, [1, (2, 3), {"a": 4, "b": 5}]) == 15
    cat = lambda a, b: f"({a}{b})"
    assert vg.tree.reduce_associative(cat, list("abcde")) == "((ab)(c(de)))"
    assert vg.tree.reduce_associative(operator.add, [], identity=0) == 0
    with pytest.raises(TypeError, match="identity"):   # JAX: TypeError too
        vg.tree.reduce_associative(operator.add, [])


def test_leaf_predicates():
    tu = vg.tree_util
    assert [tu.treedef_is_leaf(tu.tree_structure(x)) for x in (1, None, [1])] == \
        [True, True, False]
    assert [tu.all_leaves(x) for x in ([1, 2.0, "a"], [1, None], [1, [2]], [])] == \
        [True, False, False, True]
