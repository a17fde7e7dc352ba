"""Device Arrays: `call`, which runs a compiled program on Arrays and host data and returns
Arrays, and the eager operations on device Arrays (registered with vkgrad.Array, which lives in
the trace core: vkgrad/tracer/array.py says what an Array is).

On Vulkan an Array is a view (shape, dtype) of a device buffer (an `Owned`, shared by the Arrays
that view it). Small results of a jitted call (the loss) are copied to the host inside the call's
own submission (a HostResult), so reading them costs nothing more.

vnp operations on device Arrays run as a compiled one-eqn program, and whole programs (the joint
program of an eager `vg.grad`) as ONE submission (vkgrad/execution/eager.py).
"""

from __future__ import annotations

import itertools
import operator

import numpy as np

from vkgrad.dtypes import dtype_name
from vkgrad.execution import eager
from vkgrad.ir.core import TensorType
from vkgrad.runtime.inflight import HostResult
from vkgrad.runtime.pool import Owned
from vkgrad.tracer.array import (Array, DeletedArrayError, block_until_ready,  # noqa: F401
                                 delete_all, register_device)
from vkgrad.tracer.core import ArrayOps


class DeviceOps:
    """What vkgrad.Array runs on the device when one of an operation's values lives there."""

    @staticmethod
    def apply(prim, values, params, out_types) -> list:
        types = [v.aval if isinstance(v, ArrayOps) else TensorType(v.shape, dtype_name(v.dtype))
                 for v in values]
        return call(eager.compiled_eqn(prim, params, tuple(types), tuple(out_types)), values)

    @staticmethod
    def program(program, values) -> list:
        return call(eager.compiled_program(program), values)

    @staticmethod
    def device_of(owned):
        """The device `owned`'s buffer is on, as vg.devices() lists it (its DeviceInfo)."""
        return owned.pool.device.info


register_device(DeviceOps)

_OWNED, _NONE = itertools.repeat("_owned"), itertools.repeat(None)


def call(compiled, leaves, *, donated=(), timestamps=False) -> list:
    """Run `compiled` on `leaves` (Arrays, numpy data, scalars): an Array already on the
    runner's device is bound as is, anything else is host data; each donated device Array is
    consumed.
    Returns one Array per program output, without waiting for the device."""
    runner = compiled.runner
    # an Array's device buffer (the runner checks its device), else host data
    inputs = list(map(getattr, leaves, _OWNED, _NONE))
    on_device = runner.device is not None and all(inputs)   # (an Owned is true, None not)
    if not on_device:   # host data, a host-only Array, a deleted one (which raises)
        holes = range(len(inputs)) if runner.device is None else \
            itertools.compress(range(len(inputs)), map(operator.not_, inputs))
        for k in holes:
            inputs[k] = np.asarray(leaves[k])
    if not donated:
        return compiled.results(runner.run(inputs, donate=False, timestamps=timestamps))
    if on_device and compiled.run_distinct:
        outs, distinct = runner.run_distinct(inputs, True, timestamps)
    else:
        outs, distinct = runner.run(inputs, donate=True, timestamps=timestamps), False
    gone = compiled.gone(leaves) if donated is compiled.donated else \
        list(map(leaves.__getitem__, donated))
    # every leaf a device Array: each donated one is consumed; else only the device Arrays
    # among them (a host-backed Array was copied up, so nothing of it was consumed). The
    # runner found the arguments' buffers distinct objects (`distinct`): so are the Arrays.
    delete_all(gone if on_device else itertools.compress(gone, map(getattr, gone, _OWNED, _NONE)),
               distinct=distinct)
    return compiled.results(outs)
