"""Program transforms and the functions users call on them.

    autodiff.py   reverse mode: Program -> joint forward+backward Program (from vjp_rules);
                  forward mode by the double-VJP trick
    batching.py   vmap as a program transform: Program -> Program with a mapped axis (from
                  batching_rules)
    api.py        grad, value_and_grad, vjp, jvp, vmap, make_ir, trace, check_grads: trace a
                  Python function, transform its program, evaluate the result
"""

from vkgrad.transforms.api import (check_grads, grad, jvp, make_ir, trace, value_and_grad,
                                   vjp, vmap)

__all__ = ["check_grads", "grad", "jvp", "make_ir", "trace", "value_and_grad", "vjp", "vmap"]
