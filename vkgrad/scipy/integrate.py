"""vg.scipy.integrate: jax.scipy.integrate's trapezoid rule, which is jnp.trapezoid
(vkgrad/numpy/reductions.py)."""

from vkgrad.numpy import trapezoid

__all__ = ["trapezoid"]
