"""vmap and vg.random on the default Vulkan device: per-example gradients of an MLP (the idiom
DP-SGD clips), and a training step with dropout, each one jitted program.

    .venv/bin/python examples/vmap_random.py
"""

import numpy as np

import vkgrad as vg
import vkgrad.nn as nn
import vkgrad.numpy as vnp

rng = np.random.default_rng(0)
params = {"w1": (rng.standard_normal((784, 256)) * 0.05).astype(np.float32),
          "b1": np.zeros(256, np.float32),
          "w2": (rng.standard_normal((256, 10)) * 0.05).astype(np.float32),
          "b2": np.zeros(10, np.float32)}
x = rng.standard_normal((64, 784)).astype(np.float32)
y = rng.integers(0, 10, 64).astype(np.int32)

# --- per-example gradients: write the loss of ONE example, vmap its gradient over the batch


def loss(params, x, y):                      # x: [784], y: a label
    h = nn.relu(x @ params["w1"] + params["b1"])
    return -vnp.log_softmax(h @ params["w2"] + params["b2"])[y]


per_example = vg.jit(vg.vmap(vg.grad(loss), in_axes=(None, 0, 0)))
grads = per_example(params, x, y)
print({k: v.shape for k, v in grads.items()})
norms = np.sqrt(sum(np.sum(np.asarray(g).reshape(64, -1) ** 2, axis=1) for g in grads.values()))
print(norms[:4])                             # what DP-SGD clips, example by example
print(per_example.lower(params, x, y).stats())

# --- dropout in a jitted training step: the key is data, split every step


def batch_loss(params, key, x, y):
    h = nn.dropout(key, nn.relu(x @ params["w1"] + params["b1"]), rate=0.5)
    return nn.cross_entropy(h @ params["w2"] + params["b2"], y)


opt = vg.optim.adam(1e-3)


def train_step(params, opt_state, key, x, y):
    key, sub = vg.random.split(key)
    value, g = vg.value_and_grad(batch_loss)(params, sub, x, y)
    updates, opt_state = opt.update(g, opt_state, params)
    params = vg.optim.apply_updates(params, updates)
    return params, opt_state, key, value


step = vg.jit(train_step, donate_argnums=(0, 1))
opt_state, key = opt.init(params), vg.random.key(0)
for i in range(3):
    params, opt_state, key, value = step(params, opt_state, key, x, y)
    print(i, float(value))
print(step.lower(params, opt_state, key, x, y).stats())
print(vg.random.normal(vg.random.key(42), (4,)))
