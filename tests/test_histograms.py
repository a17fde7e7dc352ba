"""jnp's index, set and binning helpers outside the jitted table of tests/test_jax_names.py:
the concrete (eager) forms that read values (bincount's length, ravel_multi_index's
mode='raise'), the messages under jit, vmap, and no fallback to the interpreter on Vulkan.
The expected values are numpy's wherever numpy and JAX agree, and JAX 0.10.2's (stated
beside them) where they do not."""

import numpy as np
import pytest

import source_lines
import vkgrad as vg
import vkgrad.numpy as vnp
from vkgrad.errors import ConcretizationError, VkgradIndexError

LABELS = np.array([0, 1, 1, 3, 5, 3], np.int32)
SAMPLES = np.float32([0.0, 1.0, 1.0, 2.0, 5.0, 10.0, 2.5])


def line_of(marker):
    return source_lines.line_of(__file__, marker)


def test_bincount_of_a_concrete_array_finds_its_length():
    np.testing.assert_array_equal(np.asarray(vnp.bincount(LABELS)), np.bincount(LABELS))
    np.testing.assert_array_equal(np.asarray(vnp.bincount(LABELS, minlength=9)),
                                  np.bincount(LABELS, minlength=9))
    w = np.float32([0.5, 1, 2, 3, 4, 5])
    np.testing.assert_allclose(np.asarray(vnp.bincount(LABELS, w)), np.bincount(LABELS, w))
    # JAX counts a negative value at 0 (numpy raises): jnp.bincount([-1, 2]) is [1, 0, 1]
    np.testing.assert_array_equal(np.asarray(vnp.bincount(np.int32([-1, 2]))), [1, 0, 1])
    assert vnp.bincount(np.zeros(0, np.int32)).shape == (0,)


def test_bincount_in_an_eager_grad_reads_traced_labels():
    # labels computed from the differentiated input: their values are known outside jit, as
    # in JAX, whose jax.grad of this function gives [1, 5.4, 5.4, 6.2]
    f = lambda a: vnp.sum(vnp.bincount(vnp.floor(a).astype(vnp.int32), a) ** 2)
    np.testing.assert_allclose(np.asarray(vg.grad(f)(np.float32([0.5, 1.5, 1.2, 3.1]))),
                               [1, 5.4, 5.4, 6.2], rtol=1e-6)


def test_bincount_under_jit_asks_for_length():
    with pytest.raises(ConcretizationError) as e:
        vg.jit(lambda x: vnp.bincount(x))(LABELS)  # bincount-jit
    msg = str(e.value)
    assert "length=" in msg and line_of("bincount-jit") in msg, msg


def test_ravel_multi_index_raise_mode_checks_concrete_coordinates():
    rows, cols = np.int32([0, 2, 1]), np.int32([3, 0, 2])
    np.testing.assert_array_equal(np.asarray(vnp.ravel_multi_index((rows, cols), (3, 4))),
                                  np.ravel_multi_index((rows, cols), (3, 4)))
    with pytest.raises(VkgradIndexError) as e:
        vnp.ravel_multi_index((rows, cols + 2), (3, 4))  # ravel-raise
    assert "invalid entry" in str(e.value) and line_of("ravel-raise") in str(e.value)
    with pytest.raises(ConcretizationError, match="mode='wrap' or mode='clip'"):
        vg.jit(lambda r: vnp.ravel_multi_index((r, r), (3, 4)))(rows)


def test_unravel_index_inverts_ravel_multi_index():
    flat = np.arange(24, dtype=np.int32)
    coords = vnp.unravel_index(flat, (2, 3, 4))
    for got, want in zip(coords, np.unravel_index(flat, (2, 3, 4))):
        np.testing.assert_array_equal(np.asarray(got), want)
    back = vnp.ravel_multi_index(coords, (2, 3, 4))
    np.testing.assert_array_equal(np.asarray(back), flat)


def test_histogram_of_a_concrete_array_is_numpy_s():
    for bins in (4, np.float32([0, 1, 2, 10])):
        for density in (False, True):
            counts, edges = vnp.histogram(SAMPLES, bins, density=density)
            want_c, want_e = np.histogram(SAMPLES, bins, density=density)
            np.testing.assert_allclose(np.asarray(edges), want_e, rtol=1e-6)
            np.testing.assert_allclose(np.asarray(counts), want_c, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(vnp.histogram_bin_edges(SAMPLES, 3, (0, 6))),
                               np.histogram_bin_edges(SAMPLES, 3, (0, 6)))


def test_interp_and_digitize_match_numpy():
    x = np.float32([-1, 0, 0.5, 1, 2.5, 3, 9])
    xp, fp = np.float32([0, 1, 3]), np.float32([1, 2, -2])
    np.testing.assert_allclose(np.asarray(vnp.interp(x, xp, fp)), np.interp(x, xp, fp))
    np.testing.assert_allclose(np.asarray(vnp.interp(x, xp, fp, period=2.5)),
                               np.interp(x, xp, fp, period=2.5), rtol=1e-6, atol=1e-6)
    for right in (False, True):
        np.testing.assert_array_equal(np.asarray(vnp.digitize(x, xp, right)),
                                      np.digitize(x, xp, right))
        np.testing.assert_array_equal(np.asarray(vnp.digitize(x, xp[::-1], right)),
                                      np.digitize(x, xp[::-1], right))


@pytest.mark.parametrize("backend", ["numpy", "vulkan"])
def test_vmap_over_rows(backend):
    x = np.float32([[0.2, 2.0, 9.0], [-1.0, 1.5, 2.9]])
    xp, fp = np.float32([0, 1, 3]), np.float32([1, 2, -2])
    f = vg.jit(vg.vmap(lambda r: (vnp.interp(r, xp, fp), vnp.digitize(r, xp),
                                  vnp.isin(r, xp))), backend=backend)
    got = f(x)
    np.testing.assert_allclose(np.asarray(got[0]), np.stack([np.interp(r, xp, fp) for r in x]),
                               rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(got[1]), np.digitize(x, xp))
    np.testing.assert_array_equal(np.asarray(got[2]), np.isin(x, xp))
    counts = vg.jit(vg.vmap(lambda w: vnp.bincount(LABELS, w, length=6)), backend=backend)(
        np.ones((2, 6), np.float32) * np.float32([[1], [2]]))
    np.testing.assert_array_equal(np.asarray(counts), [np.bincount(LABELS, minlength=6) * k
                                                       for k in (1, 2)])


def test_the_helpers_run_whole_on_vulkan():
    fns = {
        "histogram": (lambda a: vnp.histogram(a, 3, range=(0, 6)), (SAMPLES,)),
        "bincount": (lambda x: vnp.bincount(x, length=6), (LABELS,)),
        "interp": (lambda x: vnp.interp(x, np.float32([0, 1, 3]), np.float32([1, 2, -2])),
                   (SAMPLES,)),
        "unravel_index": (lambda i: vnp.unravel_index(i, (2, 3)), (LABELS,)),
        "ravel_multi_index": (lambda i: vnp.ravel_multi_index((i, i), (6, 6), mode="clip"),
                              (LABELS,)),
        "isin": (lambda x: vnp.isin(x, np.int32([1, 3])), (LABELS,)),
    }
    for name, (fn, args) in fns.items():
        assert vg.jit(fn, backend="vulkan").lower(*args).fallback_reason is None, name


@pytest.mark.parametrize("backend", ["numpy", "vulkan"])
def test_histogram_range_may_be_traced(backend):
    f = vg.jit(lambda a, lo: vnp.histogram(a, 3, range=(lo, 6.0)), backend=backend)
    counts, edges = f(SAMPLES, np.float32(0))
    want_c, want_e = np.histogram(SAMPLES, 3, range=(0, 6))
    np.testing.assert_array_equal(np.asarray(counts), want_c)
    np.testing.assert_allclose(np.asarray(edges), want_e)
