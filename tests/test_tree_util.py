"""vg.tree_util: flattening, mapping, and a registered node class through grad, jit and optim."""

import numpy as np

import vkgrad as vg
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
