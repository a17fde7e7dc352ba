"""jax.typing's names, for annotations (`from vkgrad.typing import ArrayLike`): ArrayLike is
what vkgrad.numpy's functions take (vg.Arrays, tracers, numpy arrays and scalars, Python
numbers), DTypeLike what a `dtype=` takes."""

from __future__ import annotations

from typing import Union

import numpy as np

from vkgrad.tracer.array import Array
from vkgrad.tracer.core import Tracer

ArrayLike = Union[Array, Tracer, np.ndarray, np.bool_, np.number, bool, int, float]
DTypeLike = Union[str, type, np.dtype]

__all__ = ["Array", "ArrayLike", "DTypeLike"]
