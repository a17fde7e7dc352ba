"""Program transforms and the functions users call on them.

    autodiff.py   reverse mode: Program -> joint forward+backward Program (from vjp_rules);
                  forward mode by the double-VJP trick
    batching.py   vmap as a program transform: Program -> Program with a mapped axis (from
                  batching_rules)
    api.py        grad, value_and_grad, vjp, jvp, vmap, make_ir, trace, check_grads: trace a
                  Python function, transform its program, evaluate the result
    custom.py     custom_vjp, custom_jvp: functions with their own derivative rules
    jacobians.py  jacfwd, jacrev, hessian
"""

from vkgrad.transforms.api import (check_grads, grad, jvp, make_ir, trace, value_and_grad,
                                   vjp, vmap)

from vkgrad.transforms.custom import custom_jvp, custom_vjp
from vkgrad.transforms.jacobians import hessian, jacfwd, jacrev

__all__ = ["check_grads", "custom_jvp", "custom_vjp", "grad", "hessian", "jacfwd", "jacrev",
           "jvp", "make_ir", "trace", "value_and_grad", "vjp", "vmap"]
