"""vkgrad.numpy (`vnp`): numpy's names and semantics, on traced values and on numpy arrays.

Inside a transformed function every call here emits IR; outside one it computes now (through
the single eager path: the interpreter, or the device of the Arrays it is given) and returns
vg.Arrays (vkgrad/tracer/array.py), as jax.numpy returns jax.Arrays.

Semantics follow numpy, with these choices:
* dtypes are float32 (the default for Python floats and float lists), float64, int32 (other
  integer inputs are narrowed) and bool;
* promotion: bool < i32 < f32 < f64; Python scalars, and NumPy scalars beside an array, are
  weakly typed (`x * 2.0` and `x * np.float64(2.0)` keep an f32 x f32; `i * 0.5` for an int i
  is f32); arithmetic on bools computes in i32; divide, power and the transcendental functions
  on integers compute in f32;
* negative indices count from the end, traced ones too; traced indices out of range clamp
  into it, as in JAX (a GPU kernel cannot raise), concrete ones raise;
* indexing supports ints, slices (negative bounds and steps), None, Ellipsis and integer
  arrays, mixed as numpy's advanced indexing (x[3, 2:, [1, 3]]: the indexed axes stay in place
  when adjacent, else lead); boolean masks give data-dependent shapes: use vnp.where.
* softmax, log_softmax and logsumexp live here too (jax.nn / scipy.special names), and
  stop_gradient;
* arrays are immutable: `out=` and `x[i] = v` are refused; `x.at[i].set(v)` (or `vnp.at(x)`)
  returns the updated array.

The modules, by subject (as JAX's numpy):
    dtypes.py         dtype names, the promotion policy, asarray / astype
    ufuncs.py         elementwise functions, where
    indexing.py       x[key], take, x.at[idx]
    shapes.py         reshaping, transposing, joining, splitting, flipping, padding
    creation.py       zeros / ones / full, ranges, grids (indices, ix_), eye / tri, one_hot, r_ / c_
    reductions.py     sum, mean, max, argmax, any, prod, cumsum, ..., softmax, logsumexp
    linalg.py         diagonal, trace, diag, cholesky and triangular solves
    decompositions.py the vnp.linalg namespace: norm, cholesky, LU (solve, inv, det), QR,
                      Jacobi (eigh, svd) and what is built on them (pinv, lstsq, cond, ...)
    contractions.py   matmul, tensordot, dot, einsum
    sorting.py        sort, argsort, quantiles, argwhere, unique, isin
    setops.py         intersect1d, union1d, setdiff1d, setxor1d, unique_values / _counts / ...
    selection.py      choose, compress, extract, place, put, put_along_axis, fill_diagonal,
                      delete, insert, trim_zeros (JAX's functional forms)
    histograms.py     bincount, digitize, histogram, histogramdd, histogram2d, interp
    vectorize.py      vectorize, apply_along_axis, apply_over_axes, piecewise (by vg.vmap)
    polynomials.py    polyval, polyadd, polymul, polydiv, polyder, polyint, polyfit, poly
    windows.py        hanning, hamming, blackman, bartlett, kaiser, i0
    array_methods.py  operators and methods on Tracer and vkgrad.Array
    util.py           argument checks the modules share

docs/numpy.md lists what is covered, how each function is built (a primitive, or a composition
that fuses on Vulkan), and what is refused and why (complex numbers, float16, data-dependent
shapes, ...).
"""

import numpy as _np

from vkgrad.traceback_util import wrap_namespace
from vkgrad.tracer.array import Array as _Array

from vkgrad.numpy.dtypes import *  # noqa: F401,F403
from vkgrad.numpy.ufuncs import *  # noqa: F401,F403
from vkgrad.numpy.indexing import *  # noqa: F401,F403
from vkgrad.numpy.shapes import *  # noqa: F401,F403
from vkgrad.numpy.creation import *  # noqa: F401,F403
from vkgrad.numpy.reductions import *  # noqa: F401,F403
from vkgrad.numpy.contractions import *  # noqa: F401,F403
from vkgrad.numpy.sorting import *  # noqa: F401,F403
from vkgrad.numpy.setops import *  # noqa: F401,F403
from vkgrad.numpy.selection import *  # noqa: F401,F403
from vkgrad.numpy.histograms import *  # noqa: F401,F403
from vkgrad.numpy.vectorize import *  # noqa: F401,F403
from vkgrad.numpy.polynomials import *  # noqa: F401,F403
from vkgrad.numpy.windows import *  # noqa: F401,F403
from vkgrad.numpy.linalg import *  # noqa: F401,F403
# last: its `linalg` (the vnp.linalg namespace) replaces the submodule's name in this package
from vkgrad.numpy.decompositions import *  # noqa: F401,F403
from vkgrad.numpy import array_methods

pi, e, inf, nan = _np.pi, _np.e, _np.inf, _np.nan
euler_gamma = _np.euler_gamma
newaxis = None
bool = bool_       # numpy 2's name (jnp.bool)
# numpy's own, as jnp re-exports them: index expressions, files, printing (vg.Arrays print
# through numpy, so its print options apply to them), iterable
index_exp, s_, save, savez, iterable = _np.index_exp, _np.s_, _np.save, _np.savez, _np.iterable
printoptions, get_printoptions, set_printoptions = (_np.printoptions, _np.get_printoptions,
                                                    _np.set_printoptions)


def array_repr(arr, max_line_width=None, precision=None, suppress_small=None):
    """numpy's array_repr of the array's value."""
    return _np.array_repr(_np.asarray(arr), max_line_width, precision, suppress_small)


def array_str(a, max_line_width=None, precision=None, suppress_small=None):
    """numpy's array_str of the array's value."""
    return _np.array_str(_np.asarray(a), max_line_width, precision, suppress_small)


ndarray = _Array   # what eager computations return (jnp.ndarray is jax.Array)

array_methods.install_array_methods(globals())
wrap_namespace(globals())   # tracebacks without vkgrad's frames (vkgrad/traceback_util.py)
