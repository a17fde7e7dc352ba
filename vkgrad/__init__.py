"""vkgrad: a JAX-style functional tracing compiler whose programs run on Vulkan GPUs.

    import vkgrad as vg
    import vkgrad.numpy as vnp

    def loss(w, x, y):
        return vnp.mean((x @ w - y) ** 2)

    g = vg.grad(loss)(w, x, y)              # numpy arrays in, vg.Arrays out
    print(vg.make_ir(vg.grad(loss))(w, x, y))   # the program, forward and backward
    step = vg.jit(train_step)                # one Vulkan submission per call

Transforms: grad, value_and_grad, vjp, jvp, linearize, linear_transpose, vmap, make_ir, trace,
check_grads, custom_vjp, custom_jvp, jacfwd, jacrev (= jacobian), hessian, make_jaxpr (=
make_ir), checkpoint (= remat, with checkpoint_policies and vg.ad_checkpoint.checkpoint_name)
(docs/compiler.md, docs/vmap.md); optimizers
with optax's contract: vg.optim (docs/optim.md); random numbers: vg.random (docs/random.md); jit, device_put, devices, profile, Array, block_until_ready,
set_max_in_flight (docs/jit.md); runtime_stats (docs/long_runs.md); check_kernels, debug_nans: when a result looks wrong
(docs/debugging.md); JAX's modules: vg.tree and vg.tree_util (pytrees), vg.lax (jax.lax's
names), vg.scipy (special, stats, signal, linalg's Cholesky family, integrate), vg.test_util
(check_grads, also in autograd's curried form); vg.mp (= vg.mixed_precision:
jmp's policies and loss scales, float16 and bfloat16 training); vg.checkpoint / vg.remat (JAX's,
vkgrad/ad_checkpoint.py); save, load, load_metadata: pytrees of arrays as safetensors files
(vkgrad/serialization.py). Every result is a vg.Array (vkgrad/tracer/array.py); vg.config and
vg.enable_x64 switch float64 on (vkgrad/config.py).

The package is layered (docs/compiler.md, "Layers"): importing it loads the compiler core
(IR, tracer, primitives, transforms, vkgrad.numpy); the layers that talk to a device (lowering,
runtime, the jit) load on first use of a name that needs them, so `import vkgrad` and the IR
work without Vulkan.
"""

import importlib

from vkgrad.errors import (ArgumentError, CheckpointError, ConcretizationError, DTypeError,
                           GradError, GradientCheckError, IntegerOverflowError, IRError,
                           LeakedTracerError, MissingRuleError, ShapeError, VkgradError,
                           VkgradIndexError)
from vkgrad import config  # noqa: F401  (vg.config: JAX's x64 switch)
from vkgrad.config import (check_tracer_leaks, checking_leaks, default_device,  # noqa: F401
                           default_matmul_precision, disable_jit, enable_x64, log_compiles,
                           numpy_dtype_promotion, numpy_rank_promotion, transfer_guard,
                           transfer_guard_device_to_device, transfer_guard_device_to_host,
                           transfer_guard_host_to_device)
from vkgrad.dtypes import float0
from vkgrad import primitives as _primitives  # noqa: F401  (defines every primitive)
from vkgrad.ir.core import Eqn, Literal, Program, Var
from vkgrad.ir.interpreter import run_program
from vkgrad.tracer.array import Array, DeletedArrayError, block_until_ready
from vkgrad.tracer.core import ShapeDtype
from vkgrad.transforms.custom import (closure_convert, custom_gradient,  # noqa: E402
                                     ensure_compile_time_eval, named_call, named_scope)
from vkgrad.transforms import (ShapeDtypeStruct, check_grads, custom_jvp, custom_vjp,
                               eval_shape, grad, hessian, jacfwd, jacrev, jvp,
                               linear_transpose, linearize, make_ir, trace, typeof, value_and_grad, vjp, vmap)
from vkgrad import numpy, nn, optim, random, tree, tree_util  # noqa: E402,F401  (vg.numpy, ...)
from vkgrad import debug, lax, scipy, test_util  # noqa: E402,F401  (JAX's jax.lax, jax.scipy, ...)
from vkgrad.debug import pure_callback  # noqa: E402  (jax.pure_callback)
from vkgrad import typing  # noqa: E402,F401  (jax.typing: ArrayLike, DTypeLike)
from vkgrad.serialization import load, load_metadata, save  # noqa: E402
from vkgrad import ad_checkpoint  # noqa: E402  (JAX's jax.ad_checkpoint)
from vkgrad.ad_checkpoint import checkpoint, checkpoint_policies, remat  # noqa: E402
from vkgrad import mixed_precision  # noqa: E402  (vg.mixed_precision, also vg.mp as jmp)

mp = mixed_precision

jacobian = jacrev   # JAX's alias
make_jaxpr = make_ir   # JAX's name: the program a function traces to, printable

__version__ = "0.1.0"

# name -> module of the execution layer that defines it (imported on first use)
_LAZY = {"jit": "vkgrad.execution.jit",
         "set_max_in_flight": "vkgrad.runtime.inflight", "debug_nans": "vkgrad.runtime.nans",
         "check_kernels": "vkgrad.execution.check",
         "device_put": "vkgrad.execution.device_put", "profile": "vkgrad.execution.profile",
         "fallbacks": "vkgrad.execution.compiled", "default_backend": "vkgrad.execution.compiled",
         "StrictModeError": "vkgrad.execution.compiled",
         "FallbackWarning": "vkgrad.execution.fallback", "BufferSizeError": "vkgrad.lowering.limits",
         "DeviceMemoryError": "vkgrad.lowering.limits",
         "devices": "vkgrad.execution.device_put",
         "runtime_stats": "vkgrad.execution.stats",
         "debug_infs": "vkgrad.runtime.nans", "clear_caches": "vkgrad.execution.jit",
         "fwd_and_bwd": "vkgrad.execution.jit",
         **dict.fromkeys(["device_count", "local_device_count", "local_devices", "device_get",
                          "copy_to_host_async", "live_arrays", "effects_barrier",
                          "print_environment_info"], "vkgrad.execution.device_put"),
         "process_index": "vkgrad.distributed", "process_count": "vkgrad.distributed"}
_RENAMED = {"process_index": "rank", "process_count": "size"}   # jax's name -> the module's
_LAZY_MODULES = {"distributed"}   # vg.distributed (MPI: docs/distributed.md)

__all__ = ["grad", "value_and_grad", "vjp", "jvp", "vmap", "make_ir", "trace", "check_grads",
           "eval_shape", "ShapeDtypeStruct", "linearize", "linear_transpose", "typeof", "pure_callback",
           "custom_vjp", "custom_jvp", "jacfwd", "jacrev", "hessian",
           "config", "enable_x64", "Array", "DeletedArrayError", "block_until_ready",
           "ShapeDtype", "Program", "Var", "Literal", "Eqn", "run_program", "numpy", "nn", "optim",
           "save", "load", "load_metadata", "random", "debug", "lax", "scipy", "test_util", "tree",
           "typing",
           "tree_util", "jacobian", "make_jaxpr", "mixed_precision", "mp", "checkpoint", "remat",
           "checkpoint_policies", "ad_checkpoint",
           "VkgradError", "ArgumentError", "CheckpointError", "ConcretizationError", "DTypeError",
           "GradError", "GradientCheckError", "IntegerOverflowError", "IRError",
           "LeakedTracerError", "MissingRuleError", "ShapeError", "VkgradIndexError",
           # JAX's switches (vkgrad/config.py) and tracing helpers (transforms/custom.py)
           "check_tracer_leaks", "checking_leaks", "default_device", "default_matmul_precision",
           "disable_jit", "log_compiles", "numpy_dtype_promotion", "numpy_rank_promotion",
           "transfer_guard", "transfer_guard_device_to_device", "transfer_guard_device_to_host",
           "transfer_guard_host_to_device", "float0", "closure_convert", "custom_gradient",
           "ensure_compile_time_eval", "named_call", "named_scope", *_LAZY]


def __getattr__(name):
    if name in _LAZY_MODULES:
        value = importlib.import_module(f"vkgrad.{name}")
        globals()[name] = value
        return value
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'vkgrad' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), _RENAMED.get(name, name))
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY) | _LAZY_MODULES)
