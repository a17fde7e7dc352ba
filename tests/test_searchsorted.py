"""vnp.searchsorted (numpy's; the campaign found it missing): both sides, NaNs last, a sorter,
on the interpreter and Vulkan against numpy, and its errors."""

import numpy as np
import pytest

import vkgrad as vg
import vkgrad.numpy as vnp
from vkgrad.errors import ArgumentError, ShapeError

A = np.float32([1, 2, 2, 3, 5, np.nan])
V = np.float32([[0, 2, 2.5], [5, 9, np.nan]])


@pytest.mark.parametrize("backend", ["numpy", "vulkan"])
@pytest.mark.parametrize("side", ["left", "right"])
def test_searchsorted_matches_numpy(backend, side):
    f = vg.jit(lambda a, v: vnp.searchsorted(a, v, side=side), backend=backend)
    got = f(A, V)
    assert f.lower(A, V).fallback_reason is None
    np.testing.assert_array_equal(np.asarray(got), np.searchsorted(A, V, side=side))
    assert np.asarray(got).dtype == np.int32


def test_searchsorted_with_a_sorter():
    a = np.float32([3, 1, 2, 7])
    s = np.argsort(a)
    v = np.float32([0, 2, 2.5, 8])
    np.testing.assert_array_equal(np.asarray(vnp.searchsorted(a, v, sorter=s)),
                                  np.searchsorted(a, v, sorter=s))


def test_searchsorted_refuses_what_numpy_refuses():
    with pytest.raises(ArgumentError, match="side must be 'left' or 'right'"):
        vnp.searchsorted(A, V, side="middle")
    with pytest.raises(ShapeError, match="a must be 1-D"):
        vnp.searchsorted(np.ones((2, 2), np.float32), V)
