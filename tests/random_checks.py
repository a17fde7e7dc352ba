"""Checks shared by the random-distribution tests."""

import numpy as np

import vkgrad as vg


def assert_vulkan_draws_the_interpreters_numbers(draw, *args, rtol=2e-4):
    """draw(*args) jitted on Vulkan compiles (no interpreter fallback) and gives the
    interpreter's numbers."""
    want = draw(*args)
    before = dict(vg.fallbacks())
    got = vg.jit(draw, backend="vulkan")(*args)
    assert vg.fallbacks() == before      # compiled, not the interpreter
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=rtol)
