"""vg.tree_util: flattening, mapping, and a registered node class through grad, jit and optim."""

import functools
import time

import numpy as np
import pytest

import vkgrad as vg
from vkgrad.tracer import pytree
import vkgrad.numpy as vnp

X = np.float32([0.5, -1.0, 2.0])


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

    def step(m, s, x):
        updates, s = opt.update(vg.grad(loss)(m, x), s, m)
        return vg.optim.apply_updates(m, updates), s

    layer2, state = vg.jit(step, backend="numpy")(layer, state, X)
    assert isinstance(layer2, Linear) and float(loss(layer2, X)) < float(loss(layer, X))


def _nested_dict(depth):
    tree = 1.0
    for _ in range(depth):
        tree = {"a": tree}
    return tree


def test_printing_a_deep_pytree_visits_each_node_once():
    """Depth 200 of dicts prints in linear work: the printer visits every node once (it
    rendered each child twice per dict level before: 6.2 s at depth 22)."""
    td = vg.tree_util.tree_structure(_nested_dict(200))
    pieces = pytree._render(td)
    assert len(pieces) == 3 * 200 + 1      # per dict: "{", "'a': ", "}"; and the leaf "*"
    assert str(td) == "{'a': " * 200 + "*" + "}" * 200
    assert str(vg.tree_util.tree_structure([(1.0,), None, {"k": []}])) == "[(*,), None, {'k': []}]"


def test_a_deep_pytree_mismatch_message_is_quick_and_shows_both_structures():
    deep = _nested_dict(200)
    t0 = time.perf_counter()
    with pytest.raises(vg.ArgumentError, match="tree structures differ") as err:
        vg.tree_util.tree_map(lambda a, b: a + b, deep, {"b": 1.0})
    assert str(err.value) == "tree structures differ: " + "{'a': " * 200 + "*" + "}" * 200 + \
        " vs {'b': *}"
    assert time.perf_counter() - t0 < 5.0    # a generous bound; the counts above are the check


def test_register_static_instances_are_leafless_nodes_and_static_under_jit():
    @vg.tree_util.register_static
    class Act:
        def __init__(self, name):
            self.name = name

        def __hash__(self):
            return hash(self.name)

        def __eq__(self, other):
            return isinstance(other, Act) and other.name == self.name

    relu, sin = Act("relu"), Act("sin")
    leaves, td = vg.tree_util.tree_flatten({"act": relu, "w": X})
    assert len(leaves) == 1 and vg.tree_util.tree_unflatten(td, leaves)["act"] is relu
    assert vg.tree_util.tree_structure(relu) != vg.tree_util.tree_structure(sin)
    traces = []

    @vg.jit
    def apply(p):
        traces.append(p["act"].name)            # a Python value while tracing: static
        return vnp.maximum(p["w"], 0.0) if p["act"].name == "relu" else vnp.sin(p["w"])

    np.testing.assert_allclose(np.asarray(apply({"act": relu, "w": X})), np.maximum(X, 0))
    np.testing.assert_allclose(np.asarray(apply({"act": sin, "w": X})), np.sin(X), rtol=1e-6)
    apply({"act": Act("relu"), "w": X})         # equal to relu: the cached program
    assert traces == ["relu", "sin"]


def test_register_pytree_with_keys_gives_its_own_paths():
    tu = vg.tree_util

    class Pair:
        def __init__(self, lo, hi):
            self.lo, self.hi = lo, hi

    tu.register_pytree_with_keys(
        Pair, lambda p: (((tu.DictKey("lo"), p.lo), (tu.GetAttrKey("hi"), p.hi)), None),
        lambda aux, kids: Pair(*kids))
    paths = [tu.keystr(p) for p, _ in tu.tree_leaves_with_path([Pair(1.0, (2.0, 3.0))])]
    assert paths == ["[0]['lo']", "[0].hi[0]", "[0].hi[1]"]
    doubled = tu.tree_map(lambda a: 2 * a, Pair(1.0, (2.0, 3.0)))
    assert isinstance(doubled, Pair) and doubled.lo == 2.0 and doubled.hi == (4.0, 6.0)

    @tu.register_pytree_with_keys_class
    class Box:
        flattened = []

        def __init__(self, v):
            self.v = v

        def tree_flatten_with_keys(self):
            return [(tu.GetAttrKey("v"), self.v)], "box"

        def tree_flatten(self):        # used where no keys are needed
            Box.flattened.append(1)
            return [self.v], "box"

        @classmethod
        def tree_unflatten(cls, aux, children):
            return cls(*children)

    assert tu.keystr(tu.tree_leaves_with_path(Box(X))[0][0]) == ".v"
    g = vg.grad(lambda b: vnp.sum(b.v ** 2))(Box(X))
    assert isinstance(g, Box) and np.allclose(np.asarray(g.v), 2 * X) and Box.flattened


def test_partial_is_a_pytree_through_jit_and_grad():
    tu = vg.tree_util
    w = np.float32([1.0, 2.0, 3.0])
    p = tu.Partial(lambda w, x, scale=1.0: scale * vnp.sum(w * x), w, scale=2.0)
    assert p(X) == 2.0 * np.sum(w * X)
    leaves, td = tu.tree_flatten(p)
    assert len(leaves) == 2 and leaves[0] is w
    assert [tu.keystr(k) for k, _ in tu.tree_leaves_with_path(p)] == [".args[0]",
                                                                       ".keywords['scale']"]
    rebuilt = tu.tree_unflatten(td, [2 * w, 1.0])
    assert isinstance(rebuilt, tu.Partial) and rebuilt.func is p.func
    assert float(rebuilt(X)) == float(np.sum(2 * w * X))

    traces = []

    @vg.jit
    def call(f, x):
        traces.append(1)
        return f(x)

    assert np.isclose(float(call(p, X)), 2.0 * np.sum(w * X))
    assert np.isclose(float(call(tu.Partial(p.func, 3 * w, scale=2.0), X)), 6 * np.sum(w * X))
    assert len(traces) == 1                     # new array children: the same program
    g = vg.grad(lambda f: f(X))(p)              # the gradient is a Partial like p
    assert isinstance(g, tu.Partial) and np.allclose(np.asarray(g.args[0]), 2 * X)

    inner = functools.partial(lambda a, b: a - b, 10.0)
    q = tu.Partial(inner, 4.0)                  # inner's own argument is not a child
    assert q() == 6.0 and tu.tree_leaves(q) == [4.0] and q.func.args == (10.0,)


def test_flatten_one_level():
    tu = vg.tree_util
    assert tu.flatten_one_level({"b": {"c": 3}, "a": [1, 2]}) == (([1, 2], {"c": 3}), ("a", "b"))
    assert tu.flatten_one_level([1, (2, 3)]) == ([1, (2, 3)], None)
    assert tu.flatten_one_level(None) == ((), None)
    p = tu.Partial(vnp.add, 1.0)
    assert tu.flatten_one_level(p) == (((1.0,), {}), vnp.add)
    with pytest.raises(vg.ArgumentError, match="float is a leaf"):
        tu.flatten_one_level(1.0)
