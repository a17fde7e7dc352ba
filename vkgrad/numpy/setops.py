"""Set operations on flattened arrays, as JAX's: intersect1d, union1d, setdiff1d, setxor1d, and
the array API's unique_values, unique_counts, unique_inverse, unique_all.
Their results' lengths are data, so a traced argument needs `size=` (then the first `size`
sorted values, padded with `fill_value`), as unique does. Compositions of unique (sized: one
sort), isin (every element against every test element) and a running count that finds the
kept values (sorting.true_positions); no primitive of their own (docs/numpy.md)."""

from __future__ import annotations

import operator
from typing import NamedTuple

import numpy as _np

from vkgrad import primitives as P
from vkgrad.errors import ArgumentError, ShapeError
from vkgrad.numpy.creation import full
from vkgrad.numpy.dtypes import asarray, dtype_of, promote, promoted_dtype
from vkgrad.numpy.reductions import argmax, max, min
from vkgrad.numpy.shapes import concatenate, ravel, reshape
from vkgrad.numpy.sorting import isin, sort, true_positions, unique
from vkgrad.numpy.ufuncs import equal, greater, logical_and, where
from vkgrad.tracer.core import Tracer, concretization_error, user_source

__all__ = ["intersect1d", "union1d", "setdiff1d", "setxor1d", "unique_values", "unique_counts",
           "unique_inverse", "unique_all"]


def _result_size(name, size, arrays, count) -> int:
    """size as an int; without it, the result's length from concrete arrays (count, numpy's
    function of the same name: JAX's values without size=), or the ConcretizationError JAX
    raises for traced ones."""
    if size is not None:
        size = operator.index(size)
        if size < 0:
            raise ArgumentError(f"vnp.{name}: size must be >= 0, got {size}",
                                source=user_source())
        return size
    for x in arrays:
        if isinstance(x, Tracer):
            raise concretization_error(
                x, f"vnp.{name} (its result's length depends on the data)",
                f"give it a length, vnp.{name}(a, b, size=n, fill_value=v), as JAX's "
                f"jnp.{name} asks")
    return int(count(*[_np.asarray(x) for x in arrays]).size)


def _flat_promoted(ar1, ar2):
    a, b = asarray(ar1), asarray(ar2)
    dt = promoted_dtype(a, b)
    return ravel(promote(a, dt)), ravel(promote(b, dt))


def _unique_values(x):
    """x's sorted unique values, padded to x's length, and which of them are real."""
    values, counts = unique(x, return_counts=True, size=x.shape[0])
    return values, greater(counts, 0)


def _kept_at(keep, size):
    """The positions of keep's first `size` Trues (0 past the last) and which are real."""
    return true_positions(keep, size)[:2]


def _padded(values, valid, fill_value):
    """values with fill_value where not valid; by default JAX's: the smallest valid value
    (NaN if one is NaN: max, then min, of the values with the padding at 0), 0 if none."""
    dt = dtype_of(values)
    if fill_value is not None:
        return where(valid, values, promote(asarray(fill_value), dt))
    if values.shape[0] == 0:
        return values
    v = where(valid, values, promote(asarray(0), dt))
    v = where(valid, v, max(v))
    return where(valid, v, min(v))


def _high(dt):
    """A padding that sorts after every value (NaN after +inf), or ties with the largest."""
    return {"bool": True, "i32": _np.iinfo(_np.int32).max}.get(dt, _np.nan)


def intersect1d(ar1, ar2, assume_unique=False, return_indices=False, *, size=None,
                fill_value=None):
    """The sorted values in both arrays (NaN is in neither); return_indices: also where each
    first occurs in ar1 and in ar2 (the padding's: their sizes). assume_unique is a promise
    that changes no value here."""
    a, b = _flat_promoted(ar1, ar2)
    size = _result_size("intersect1d", size, (a, b),
                        lambda x, y: _np.intersect1d(x, y, assume_unique))
    n1, n2 = a.shape[0], b.shape[0]
    if n1 == 0 or n2 == 0:
        vals, valid = full((size,), 0, dtype_of(a)), full((size,), False)
        at1 = at2 = None
    else:
        u, idx, counts = unique(a, return_index=True, return_counts=True, size=n1)
        at, valid = _kept_at(logical_and(greater(counts, 0), isin(u, b)), size)
        vals = P.take(u, at, 0)
        at1 = P.take(idx, at, 0)
        at2 = argmax(equal(reshape(vals, (size, 1)), b), axis=1)   # b's first equal element
    vals = _padded(vals, valid, fill_value)
    if not return_indices:
        return vals
    return vals, _index_or(at1, valid, n1, size), _index_or(at2, valid, n2, size)


def _index_or(at, valid, n, size):
    return full((size,), n, "i32") if at is None else where(valid, at, n)


def union1d(ar1, ar2, *, size=None, fill_value=None):
    """The sorted values in either array (unique of both, NaNs one value)."""
    x = concatenate([ravel(asarray(ar1)), ravel(asarray(ar2))])
    if size is None:
        _result_size("union1d", size, (x,), _np.unique)
    elif x.shape[0] == 0:
        if size and fill_value is None:
            raise ShapeError("vnp.union1d of empty arrays with size > 0 needs fill_value "
                             "(there is no value to pad with)", source=user_source())
        return full((size,), 0 if fill_value is None else fill_value, dtype_of(x))
    return unique(x, size=size, fill_value=fill_value)


def setdiff1d(ar1, ar2, assume_unique=False, *, size=None, fill_value=None):
    """The sorted unique values of ar1 not in ar2 (ar1's dtype; NaNs kept), padded with
    fill_value, 0 by default as JAX's; assume_unique=True: ar1's values in ar1's order."""
    a, b = ravel(asarray(ar1)), ravel(asarray(ar2))
    size = _result_size("setdiff1d", size, (a, b),
                        lambda x, y: _np.setdiff1d(x, y, assume_unique))
    fill = 0 if fill_value is None else fill_value
    if a.shape[0] == 0:
        return full((size,), fill, dtype_of(a))
    if assume_unique:
        u, real = a, full(a.shape, True)
    else:
        u, real = _unique_values(a)
    at, valid = _kept_at(logical_and(real, isin(u, b, invert=True)), size)
    return _padded(P.take(u, at, 0), valid, fill)


def setxor1d(ar1, ar2, assume_unique=False, *, size=None, fill_value=None):
    """The sorted values in exactly one of the arrays: each array's unique values not in the
    other, merged (a NaN of each array stays, as JAX's). assume_unique changes no value."""
    a, b = _flat_promoted(ar1, ar2)
    size = _result_size("setxor1d", size, (a, b),
                        lambda x, y: _np.setxor1d(x, y, assume_unique))
    parts = [_only_in(x, y) for x, y in ((a, b), (b, a)) if x.shape[0]]
    if not parts:
        return _padded(full((size,), 0, dtype_of(a)), full((size,), False), fill_value)
    at, valid = _kept_at(concatenate([k for _, k in parts]), size)
    vals = P.take(concatenate([u for u, _ in parts]), at, 0)
    vals = sort(where(valid, vals, promote(asarray(_high(dtype_of(a))), dtype_of(a))))
    return _padded(vals, valid, fill_value)


def _only_in(x, y):
    """x's sorted unique values and which of them are not in y."""
    u, real = _unique_values(x)
    return u, logical_and(real, isin(u, y, invert=True))



# The array API's unique functions (jnp's): unique with NaNs distinct (equal_nan=False), their
# results as named tuples. A traced x needs size= (and pads with fill_value), as unique does.
class UniqueCountsResult(NamedTuple):
    values: object
    counts: object


class UniqueInverseResult(NamedTuple):
    values: object
    inverse_indices: object


class UniqueAllResult(NamedTuple):
    values: object
    indices: object
    inverse_indices: object
    counts: object


def unique_values(x, /, *, size=None, fill_value=None):
    """The sorted unique values of x (each NaN its own value)."""
    return unique(x, equal_nan=False, size=size, fill_value=fill_value)


def unique_counts(x, /, *, size=None, fill_value=None):
    """(values, counts): the sorted unique values and how often each occurs."""
    return UniqueCountsResult(*unique(x, return_counts=True, equal_nan=False, size=size,
                                      fill_value=fill_value))


def unique_inverse(x, /, *, size=None, fill_value=None):
    """(values, inverse_indices): the unique values and, for each element of x (x's shape),
    the position of its value among them."""
    return UniqueInverseResult(*unique(x, return_inverse=True, equal_nan=False, size=size,
                                       fill_value=fill_value))


def unique_all(x, /, *, size=None, fill_value=None):
    """(values, indices, inverse_indices, counts): unique's four results at once."""
    return UniqueAllResult(*unique(x, return_index=True, return_inverse=True,
                                   return_counts=True, equal_nan=False, size=size,
                                   fill_value=fill_value))
