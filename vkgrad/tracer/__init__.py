"""The trace core: `bind`, the trace stack, Tracer and ArrayOps (core.py), pytrees (pytree.py)."""
