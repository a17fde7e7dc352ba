"""vkgrad.numpy.random: numpy.random's functions, for making input data on the host, as
autograd.numpy.random is (`import vkgrad.numpy.random as npr; npr.randn(3, 2)`).

They are numpy's own and return numpy arrays: they draw from numpy's global state, outside any
trace. Random numbers inside a traced or jitted function come from keys, as JAX's:
vg.random (docs/random.md).
"""

import numpy.random as _npr

__all__ = [name for name in dir(_npr) if not name.startswith("_")]
globals().update({name: getattr(_npr, name) for name in __all__})
