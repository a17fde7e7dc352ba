"""Every primitive of the IR, each defined once with its rules right below it, and the lax-like
functions that bind them (`add`, `matmul`, `reduce_sum`, ...: what vkgrad.numpy and the VJP
rules are written with).

    lax.py    the basic set: elementwise, comparisons, select, convert, reductions, layout
              (broadcast, reshape, transpose, slice, pad, concatenate, iota), take/scatter_add,
              matmul, softmax/log_softmax and their backward primitives
"""

from vkgrad.primitives.lax import *  # noqa: F401,F403
from vkgrad.primitives.lax import _unbroadcast, dtype_of  # noqa: F401
