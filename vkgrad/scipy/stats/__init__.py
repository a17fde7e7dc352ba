"""vg.scipy.stats: distributions as modules of functions, as jax.scipy.stats (`norm`)."""

from vkgrad.scipy.stats import norm  # noqa: F401

__all__ = ["norm"]
