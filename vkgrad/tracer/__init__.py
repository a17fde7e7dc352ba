"""The trace core: `bind`, the trace stack, Tracer and ArrayOps (core.py), pytrees (pytree.py),
and vkgrad.Array, the concrete value every eager result is (array.py)."""

from vkgrad.tracer import array  # noqa: F401  (registers the concrete array class with core)
