"""vkgrad: a JAX-style functional tracing compiler whose programs run on Vulkan GPUs.

    import vkgrad as vg
    import vkgrad.numpy as vnp

    def loss(w, x, y):
        return vnp.mean((x @ w - y) ** 2)

    g = vg.grad(loss)(w, x, y)              # numpy arrays in, numpy arrays out
    print(vg.make_ir(vg.grad(loss))(w, x, y))   # the program, forward and backward

Transforms: grad, value_and_grad, vjp, jvp, make_ir, trace, check_grads. See docs/compiler.md.
"""

from vkgrad.errors import (ArgumentError, ConcretizationError, DTypeError, GradError,
                           GradientCheckError, IRError, LeakedTracerError, MissingRuleError,
                           ShapeError, VkgradError, VkgradIndexError)
from vkgrad.ir import primitives as _primitives  # noqa: F401  (defines every primitive)
from vkgrad.ir.core import Eqn, Literal, Program, Var
from vkgrad.ir.interpreter import run_program
from vkgrad.tracer.core import ShapeDtype
from vkgrad.tracer.transforms import (check_grads, grad, jvp, make_ir, trace, value_and_grad,
                                      vjp)
from vkgrad import numpy, nn, optim  # noqa: E402,F401  (vg.numpy, vg.nn, vg.optim)

__version__ = "0.1.0"

__all__ = ["grad", "value_and_grad", "vjp", "jvp", "make_ir", "trace", "check_grads",
           "ShapeDtype", "Program", "Var", "Literal", "Eqn", "run_program", "numpy", "nn", "optim",
           "VkgradError", "ArgumentError", "ConcretizationError", "DTypeError", "GradError",
           "GradientCheckError", "IRError", "LeakedTracerError", "MissingRuleError",
           "ShapeError", "VkgradIndexError"]

from vkgrad.array import Array, DeletedArrayError  # noqa: E402
from vkgrad.jit import default_backend, device_put, fallbacks, jit, profile  # noqa: E402
