"""What an autograd user porting their tests finds (renaming `autograd` to `vkgrad` in the
imports): vkgrad.test_util's autograd forms (curried check_grads, combo_check, scalar_close,
check_equivalent), vkgrad.numpy.random, and the errors of the numpy functions autograd's tests
use. Their values and gradients are rows of tests/cases.py (fabs_fmax_fmin_select, kron_cross,
gradient_rollaxis_partition, einsum_interleaved, index_advanced_mixed, autograd_names_vk)."""

import numpy as np
import pytest

import vkgrad as vg
import vkgrad.numpy as vnp
import vkgrad.numpy.random as npr
from vkgrad.test_util import check_equivalent, check_grads, combo_check, scalar_close


def test_check_grads_takes_autograd_curried_form():
    check_grads(lambda x, y: vnp.sin(x) * y)(0.3, np.array([1.0, 2.0]))        # argnum 0
    check_grads(lambda x, y: vnp.sin(x) * y, 1, order=1)(0.3, np.array([1.0, 2.0]))
    check_grads(lambda x, y: x * y, argnum=(0, 1), modes=["rev"])(np.ones(3), np.arange(3.0))
    check_grads(lambda x, axis: vnp.sum(x ** 3, axis=axis))(np.ones((2, 3)), axis=1)   # kwargs
    wrong = vg.custom_jvp(lambda x: x ** 2)
    wrong.defjvps(lambda g, ans, x: g * 3 * x)       # 3x, not 2x
    with pytest.raises(vg.GradientCheckError, match="forward-mode"):
        check_grads(wrong, modes=["fwd"], order=1)(0.7)


def test_check_grads_keeps_jax_form_and_its_required_order():
    check_grads(lambda x: vnp.tanh(x), (np.array([0.1, -0.4]),), order=2)
    with pytest.raises(TypeError, match="order is required"):
        check_grads(lambda x: x, (np.ones(2),))


def test_autograd_form_checks_in_float64_held_arguments_too():
    """A gradient with respect to a held Python float would be float32 (vkgrad's policy), and
    its finite differences at autograd's step, 1e-6, noise; held floats are float64 here."""
    dy = vg.grad(lambda x, y: vnp.sin(vnp.sin(x) + vnp.sin(y)), 1)
    check_grads(dy)(-0.23415337472333597, -0.23413695694918055)


def test_check_grads_of_eager_results_runs_in_float64():
    x = vnp.sqrt(vnp.asarray([2.0, 3.0]) ** 2 + 0.5)      # a float32 vg.Array argument
    assert isinstance(x, vg.Array) and x.dtype == np.float32
    check_grads(lambda a, b: a / b, (x, x[::-1]), order=2)  # float32 differences fail this


def test_combo_check_runs_every_combination():
    seen = []

    def f(x, axis, keepdims):
        seen.append((np.shape(x), axis, keepdims))
        return vnp.sum(x * x, axis=axis, keepdims=keepdims)
    combo_check(f, [0], order=1, modes=["rev"])([np.ones(3), np.ones((2, 3))], axis=[None, 0],
                                                keepdims=[True, False])
    assert {(s, a, k) for s, a, k in seen} == {(s, a, k) for s in [(3,), (2, 3)]
                                               for a in [None, 0] for k in [True, False]}


def test_scalar_close_and_check_equivalent():
    assert scalar_close(1.0, 1.0 + 1e-9) and not scalar_close(1.0, 1.001)
    check_equivalent({"a": np.ones(2), "b": (1.0,)}, {"a": vnp.ones(2), "b": (1.0,)})
    with pytest.raises(AssertionError, match="value mismatch"):
        check_equivalent(np.ones(2), np.zeros(2))


def test_numpy_random_is_numpy_random_for_input_data():
    npr.seed(3)
    a = npr.randn(2, 3)
    np.random.seed(3)
    np.testing.assert_array_equal(a, np.random.randn(2, 3))
    assert vnp.random is npr and npr.RandomState(0).rand(2).shape == (2,)


def test_linspace_of_float64_data_is_float64_with_x64(x64):
    assert vnp.linspace(np.float64(1.2), np.float64(3.4), 5).dtype == np.float64
    assert vnp.linspace(1.2, 3.4, 5).dtype == np.float32     # Python floats: float32


def test_einsum_size_zero_batch_and_interleaved_errors():
    r = vnp.einsum("...ij,...jk->...ik", np.ones((0, 2, 3)), np.ones((0, 3, 4)))
    assert r.shape == (0, 2, 4)
    with pytest.raises(vg.ArgumentError, match="sublist .* ints in 0..51"):
        vnp.einsum(np.ones(3), ["i"])


def test_mixed_advanced_indexing_with_a_traced_int_on_vulkan():
    x = np.arange(5 * 6 * 4, dtype=np.float32).reshape(5, 6, 4)
    f = vg.jit(lambda x, i: x[i, 2:, vnp.array([1, 3])], backend="vulkan")
    np.testing.assert_array_equal(f(x, np.int32(-2)), x[-2, 2:, [1, 3]])
    g = vg.grad(lambda x: vnp.sum(x[3, 2:, [1, 3]] ** 2))(x)
    want = np.zeros_like(x)
    want[3, 2:, [1, 3]] = 2 * x[3, 2:, [1, 3]]
    np.testing.assert_array_equal(g, want)


def test_new_functions_refuse_bad_arguments_by_name():
    with pytest.raises(vg.ArgumentError, match="select: condlist has 2 conditions but "
                                               "choicelist 1"):
        vnp.select([np.ones(2) > 0, np.ones(2) > 0], [np.ones(2)])
    with pytest.raises(vg.ShapeError, match="gradient: axis 0 has 2 points; edge_order 2"):
        vnp.gradient(np.ones(2), edge_order=2)
    with pytest.raises(vg.ShapeError, match="coordinate arrays"):
        vnp.gradient(np.ones(4), np.arange(4.0))
    with pytest.raises(vg.ShapeError, match="cross: the vectors have 4 and 3 components"):
        vnp.cross(np.ones(4), np.ones(3))
    with pytest.raises(vg.ArgumentError, match="partition: kth 7 is out of bounds"):
        vnp.partition(np.ones(5), 7)
    with pytest.raises(vg.VkgradIndexError, match="rollaxis: start 5"):
        vnp.rollaxis(np.ones((2, 3)), 0, 5)


def test_real_arrays_report_no_complex_parts():
    assert vnp.isrealobj(np.ones(2)) and not vnp.iscomplexobj(vnp.ones(2))
    assert vnp.iscomplexobj(np.ones(2) * 1j)
    np.testing.assert_array_equal(vnp.isreal(np.ones(2)), [True, True])
    with pytest.raises(vg.DTypeError, match="complex"):
        vnp.real(np.ones(2) * 1j)     # complex numbers are refused (docs/numpy.md)
