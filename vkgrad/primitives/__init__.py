"""Every primitive of the IR, each defined once with its rules right below it, and the lax-like
functions that bind them (`add`, `matmul`, `reduce_sum`, ...: what vkgrad.numpy and the VJP
rules are written with).

    lax.py        the basic set: elementwise, comparisons, select, convert, reductions, layout
                  (broadcast, reshape, transpose, slice, pad, concatenate, iota), take and
                  scatter_add, matmul, softmax/log_softmax and their backward primitives
    attention.py  flash_attention and flash_attention_bwd
    scan.py       selective_scan and selective_scan_bwd (Mamba)
    random.py     threefry2x32 (the counter-based hash), bits_to_unit (bits -> [0, 1)) and
                  randint_from_bits (JAX's randint from two words)
    custom.py     custom_vjp_call and custom_jvp_call (vg.custom_vjp, vg.custom_jvp)
    cumulative.py cumsum (a running sum: one kernel however long the axis)
    convolution.py conv_general_dilated (N-d convolution, one layout; vkgrad.lax has JAX's)
    compiler.py   fused and save: what the compiler's passes introduce
    control_flow.py scan, while, cond and checkpoint: eqns holding closed sub-programs (loops
                  stay loops), and checkpoint_name
    collective.py psum, pmax, pmin: reductions over a named axis (vmap's, or the MPI world's)
    debug.py      debug_callback: a Python function on runtime values (vg.debug.print)
"""

from vkgrad.primitives.lax import *  # noqa: F401,F403
from vkgrad.primitives.lax import _unbroadcast, dtype_of  # noqa: F401
from vkgrad.primitives.attention import (flash_attention,  # noqa: F401
                                         flash_attention_bwd, flash_attention_bwd_p,
                                         flash_attention_p)
from vkgrad.primitives.scan import (scan_chunk, selective_scan,  # noqa: F401
                                    selective_scan_bwd_p, selective_scan_p)
from vkgrad.primitives.random import (bits_to_unit, bits_to_unit_p,  # noqa: F401
                                      randint_from_bits, randint_from_bits_p, threefry2x32,
                                      threefry2x32_p)
from vkgrad.primitives.custom import (CUSTOM_CALLS, CustomRule,  # noqa: F401
                                     custom_jvp_call_p, custom_vjp_call_p)
from vkgrad.primitives.compiler import FUSED_KINDS, fused_p, save, save_p  # noqa: F401
from vkgrad.primitives.cumulative import cumsum, cumsum_p  # noqa: F401
from vkgrad.primitives.convolution import conv, conv_p  # noqa: F401
from vkgrad.primitives.control_flow import (checkpoint_name_p, checkpoint_p, cond_p,  # noqa: F401
                                            scan_p, while_p)
from vkgrad.primitives.collective import pmax_p, pmin_p, psum_p  # noqa: F401
from vkgrad.primitives.debug import debug_callback_p  # noqa: F401
