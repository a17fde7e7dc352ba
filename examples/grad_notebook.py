"""vg.grad in a plain Python session (runs on the numpy interpreter; no GPU needed).

    python examples/grad_notebook.py

Print the program of `loss`'s gradient, forward and backward in one program:

    python -m vkgrad dump examples/grad_notebook.py:loss \
        --args 'f32[64,784], f32[784,10], f32[10], i32[64]' --grad --argnums 1,2
"""

import numpy as np

import vkgrad as vg
import vkgrad.nn as nn
import vkgrad.numpy as vnp


def loss(x, w, b, labels):
    logits = x @ w + b
    return nn.cross_entropy(logits, labels)


def main():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 784)).astype(np.float32)
    labels = np.argmax(x @ rng.standard_normal((784, 10)), axis=1).astype(np.int32)
    w, b = np.zeros((784, 10), np.float32), np.zeros(10, np.float32)

    # Plain gradient descent: grads come back as numpy arrays shaped like (w, b).
    step = vg.value_and_grad(loss, argnums=(1, 2))
    for i in range(30):
        value, (gw, gb) = step(x, w, b, labels)
        w -= 0.05 * gw
        b -= 0.05 * gb
        if i % 10 == 0:
            print(f"step {i:2d}  loss {float(value):.4f}")
    print(f"final     loss {float(loss(x, w, b, labels)):.4f}")

    # Derivatives agree with central finite differences (in float64), to second order.
    vg.check_grads(loss, (x[:8, :16], w[:16], b, labels[:8]), order=2)

    # Higher order: d^2/dt^2 (t sin t) = 2 cos t - t sin t.
    d2 = vg.grad(vg.grad(lambda t: t * vnp.sin(t)))
    print("d2(t sin t)/dt2 at 1.0:", float(d2(1.0)), "expected", 2 * np.cos(1.0) - np.sin(1.0))

    # The program behind vg.grad: forward, the backward marker, then the backward.
    print(vg.make_ir(vg.grad(loss, argnums=1))(x[:4, :6], w[:6, :3], b[:3], labels[:4] % 3))


if __name__ == "__main__":
    main()
