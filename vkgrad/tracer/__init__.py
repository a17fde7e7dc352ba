"""Tracers, the trace stack and `bind` (core.py), pytrees (pytree.py), and the transforms users
call (transforms.py: grad, value_and_grad, vjp, jvp, make_ir, check_grads, trace).

Kept import-light: vkgrad/__init__.py imports the pieces in dependency order.
"""
