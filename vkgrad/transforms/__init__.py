"""Program transforms and the functions users call on them.

    tracing.py          trace a Python function into a Program (what every transform, vg.jit
                        and vkgrad.dump share); make_ir, trace
    autodiff.py         reverse mode: Program -> joint forward+backward Program (from
                        vjp_rules); forward mode by the double-VJP trick
    differentiation.py  grad, value_and_grad, vjp, jvp, linearize, linear_transpose: trace,
                        differentiate, evaluate
    checking.py         check_grads: derivatives against finite differences
    batching.py         vmap as a program transform: Program -> Program with a mapped axis
                        (from batching_rules)
    vectorization.py    vmap: trace per example, batch the program, evaluate
    custom.py           custom_vjp, custom_jvp: functions with their own derivative rules
    jacobians.py        jacfwd, jacrev, hessian
"""

from vkgrad.transforms.checking import check_grads
from vkgrad.transforms.custom import custom_jvp, custom_vjp
from vkgrad.transforms.differentiation import (grad, jvp, linear_transpose, linearize,
                                               value_and_grad, vjp)
from vkgrad.transforms.jacobians import hessian, jacfwd, jacrev
from vkgrad.transforms.tracing import ShapeDtypeStruct, eval_shape, make_ir, trace, typeof
from vkgrad.transforms.vectorization import vmap

__all__ = ["check_grads", "custom_jvp", "custom_vjp", "grad", "hessian", "jacfwd", "jacrev",
           "jvp", "make_ir", "trace", "value_and_grad", "vjp", "vmap", "eval_shape",
           "ShapeDtypeStruct", "linearize", "linear_transpose", "typeof"]
