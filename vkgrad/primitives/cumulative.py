"""cumsum[reverse](x): the running sum of x along its LAST axis (from the end with reverse):
one primitive, so a scan costs one kernel however long the axis (its composition of log2(n)
shift-and-adds fused into one expression grew the generated shader about 2x per doubling of n:
2.5 s to compile at n = 1,024 and 11.7 s at 2,048 on the H200). vkgrad.numpy's cumsum moves
the scanned axis last. On Vulkan: kernels_glsl/cumsum.comp, planned by lowering/cumsum.py.
"""

import numpy as np

from vkgrad.dtypes import NUMERIC_DTYPES
from vkgrad.errors import ShapeError
from vkgrad.ir.core import (Primitive, TensorType, abstract_eval_rules, batching_rules,
                            param_defaults, vjp_rules)
from vkgrad.ir.interpreter import impls
from vkgrad.primitives.lax import _check_dtypes, batch_to_front, mapped_size
from vkgrad.tracer.core import bind

cumsum_p = Primitive("cumsum", ("pure",))
param_defaults[cumsum_p] = {"reverse": False}


def _rule(x, *, reverse):
    if x.ndim == 0:
        raise ShapeError(f"cumsum of {x}: needs at least one axis")
    _check_dtypes("cumsum", [x], NUMERIC_DTYPES)
    return TensorType(x.shape, x.dtype)


def _impl(x, *, reverse):
    if reverse:
        return np.flip(np.cumsum(np.flip(x, -1), axis=-1, dtype=x.dtype), -1)
    return np.cumsum(x, axis=-1, dtype=x.dtype)


abstract_eval_rules[cumsum_p] = _rule
impls[cumsum_p] = _impl
# out[i] = sum_{j <= i} x[j], so dx[j] = sum_{i >= j} g[i]: the reverse running sum of g
vjp_rules[cumsum_p] = lambda g, ans, x, *, reverse: (cumsum(g, not reverse),)
# along the last axis: the mapped axis goes first
batching_rules[cumsum_p] = lambda args, dims, *, reverse: (
    bind(cumsum_p, batch_to_front(args[0], dims[0], mapped_size(args, dims)),
         reverse=reverse), 0)


def cumsum(x, reverse=False):
    return bind(cumsum_p, x, reverse=bool(reverse))
