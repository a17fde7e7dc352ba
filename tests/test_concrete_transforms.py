"""Eager transforms see values (issue 21): grad, value_and_grad, vjp, jvp, the Jacobians and
hessian on concrete arguments trace with their values known, as JAX's do outside jit, so Python
control flow on values works; under jit (and vmap) the trace is abstract and the error stays."""

import numpy as np
import pytest

import vkgrad as vg
import vkgrad.numpy as vnp


def branchy(x):
    if x > 0:
        return x ** 2
    return -3.0 * x


def doubling(x):   # a while loop on a value: how many doublings depends on x
    y = vnp.sin(x)
    while vnp.sum(y) < 10.0:
        y = y * 2.0
    return vnp.sum(y)


def test_grad_takes_the_branch_of_each_call():
    assert float(vg.grad(branchy)(2.0)) == 4.0
    assert float(vg.grad(branchy)(-2.0)) == -3.0      # a new trace for a new value
    value, g = vg.value_and_grad(branchy)(3.0)
    assert (float(value), float(g)) == (9.0, 6.0)


def test_while_loop_on_values_against_finite_differences():
    x = np.float32([0.5, 1.0])
    n = 4   # sin(0.5) + sin(1.0) = 1.32: doubled 3 times to 10.6
    np.testing.assert_allclose(vg.grad(doubling)(x), 2.0 ** (n - 1) * np.cos(x), rtol=1e-6)
    vg.check_grads(doubling, (np.float64([0.5, 1.0]),), order=2)


def test_vjp_jvp_jacobians_and_hessian_on_values():
    out, tangent = vg.jvp(branchy, (2.0,), (1.0,))
    assert (float(out), float(tangent)) == (4.0, 4.0)
    assert float(vg.vjp(branchy, -1.0)[1](1.0)[0]) == -3.0
    assert float(vg.hessian(branchy)(2.0)) == 2.0 and float(vg.hessian(branchy)(-2.0)) == 0.0
    scale = lambda x: x * (2.0 if float(x.sum()) > 0 else -1.0)   # noqa: E731
    for jac in (vg.jacfwd, vg.jacrev, vg.jacobian):
        np.testing.assert_array_equal(jac(scale)(np.float32([1.0, 2.0])), 2 * np.eye(2))
        np.testing.assert_array_equal(jac(scale)(np.float32([-1.0, -2.0])), -np.eye(2))


def test_nested_transforms_read_values_through_the_enclosing_trace():
    assert float(vg.grad(lambda x: vg.grad(branchy)(x) * x)(3.0)) == 12.0   # d/dx 2x * x
    assert int(vg.grad(lambda x: x * vnp.zeros(int(x)).sum() + x)(3.0)) == 1


def test_under_jit_and_vmap_the_trace_is_abstract_and_the_error_stays():
    for f, x in ((vg.jit(vg.grad(branchy), backend="numpy"), np.float32(2.0)),
                 (vg.vmap(vg.grad(branchy)), np.float32([2.0, -1.0]))):
        with pytest.raises(vg.ConcretizationError, match=r"Python control flow.*vnp\.where"):
            f(x)
    with pytest.raises(vg.ConcretizationError, match="Python control flow"):
        vg.make_ir(branchy)(np.float32(2.0))


def test_numpy_conversion_of_a_tracer_stays_an_error():
    """As in JAX: a numpy value would silently cut the gradient."""
    with pytest.raises(vg.ConcretizationError, match=r"np\.asarray\(\)"):
        vg.grad(lambda x: np.asarray(x).sum())(2.0)
