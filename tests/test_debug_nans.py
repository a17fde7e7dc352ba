"""NaN hunting (vg.debug_nans, VKGRAD_DEBUG_NANS=1): a call whose float results hold NaN/Inf
raises a FloatingPointError naming the first eqn that made one from finite inputs, its part
(forward/backward), shapes and the user's line; on lavapipe and on the numpy interpreter."""

import numpy as np
import pytest

import vkgrad as vg
import vkgrad.numpy as vnp
from vkgrad.lowering.glsl import code_for_op
from vkgrad.primitives.lax import exp_p
from vkgrad.runtime import nans

BACKENDS = ("vulkan", "numpy")


@pytest.fixture
def debug_nans():
    old = vg.debug_nans(True)
    yield
    vg.debug_nans(old)


def line_of(fun, text):
    """file:line (the file's name) of the line of `fun` containing `text`."""
    lines, first = __import__("inspect").getsourcelines(fun)
    k = next(i for i, s in enumerate(lines) if text in s)
    return f"test_debug_nans.py:{first + k}"


def raised(step, *args) -> FloatingPointError:
    """Call the jitted `step` and wait for its results; return the error it raises."""
    with pytest.raises(FloatingPointError) as info:
        vg.block_until_ready(step(*args))
    return info.value


def log_of_difference(x, y):
    d = x - y
    h = vnp.log(d)
    return vnp.sum(h * 2.0)


def root_sum(x):
    return vnp.sum(vnp.sqrt(x) * 3.0)


def exp_scale(x):
    e = vnp.exp(x * 2.0)
    return e / vnp.sum(e)


@pytest.mark.parametrize("backend", BACKENDS)
def test_log_of_a_negative_in_the_forward(debug_nans, backend):
    x = np.array([3.0, 1.0, 2.0], np.float32)
    y = np.array([1.0, 2.0, 0.5], np.float32)
    e = raised(vg.jit(log_of_difference, backend=backend), x, y)
    assert isinstance(e, vg.VkgradError)
    assert "log(f32[3]) -> f32[3] in the forward part" in str(e)
    assert "1 non-finite element(s)" in str(e)
    assert e.primitive == "log" and e.source.endswith(line_of(log_of_difference, "vnp.log"))


@pytest.mark.parametrize("backend", BACKENDS)
def test_division_by_zero_only_in_the_backward(debug_nans, backend):
    x = np.array([0.0, 1.0, 4.0, 9.0], np.float32)
    value = vg.jit(root_sum, backend=backend)(x)       # the forward is finite: sqrt(0) = 0
    assert float(value) == pytest.approx(18.0)
    e = raised(vg.jit(vg.grad(root_sum), backend=backend), x)
    assert "in the backward part" in str(e) and e.primitive == "div"   # 0.5 / sqrt(0)
    assert "f32[4]" in str(e)
    assert e.source.endswith(line_of(root_sum, "vnp.sqrt"))
    assert f"is div in the derivative of sqrt at {e.source}:" in str(e)


@pytest.mark.parametrize("backend", BACKENDS)
def test_overflow_in_exp(debug_nans, backend):
    x = np.array([1.0, 50.0, 2.0], np.float32)          # exp(100) overflows float32
    e = raised(vg.jit(exp_scale, backend=backend), x)
    assert e.primitive == "exp" and "in the forward part" in str(e)
    assert e.source.endswith(line_of(exp_scale, "vnp.exp"))
    small = np.array([1.0, 5.0, 2.0], np.float32)       # and a finite call goes through
    np.testing.assert_allclose(np.asarray(vg.jit(exp_scale, backend=backend)(small)),
                               np.exp(2 * small) / np.exp(2 * small).sum(), rtol=1e-5)


def test_a_donated_argument_is_hunted_from_its_copy(debug_nans):
    """The call overwrites the donated buffer; the re-run starts from the host copy."""
    step = vg.jit(lambda x: vnp.log(x - 2.0), donate_argnums=0, backend="vulkan")
    x = vg.device_put(np.array([3.0, 1.0, 4.0], np.float32))
    e = raised(step, x)
    assert e.primitive == "log" and x.is_deleted()


def test_an_argument_holding_nan_is_named(debug_nans):
    e = raised(vg.jit(lambda x: x * 2.0, backend="vulkan"), np.array([1.0, np.nan], np.float32))
    assert "argument 0 (f32[2]) already holds NaN/Inf" in str(e)


def test_off_records_no_check_and_copies_nothing(monkeypatch):
    """Off: the recorded sequence is the plan's dispatches; on: one check per float result."""
    old = vg.debug_nans(False)
    try:
        def two(x, i):
            return x * 2.0, vnp.sum(x), i + 1
        step = vg.jit(two, backend="vulkan")
        x, i = np.ones(5, np.float32), np.arange(3, dtype=np.int32)
        copies = []
        monkeypatch.setattr(type(step.lower(x, i).runner), "_host_copy",
                            staticmethod(lambda x, v: copies.append(x) or np.asarray(x)))
        vg.block_until_ready(step(x, i))
        runner = step.lower(x, i).runner
        steps = len(runner.lowered.steps)
        assert len(runner.last_run.dispatches) == steps and copies == []
        vg.debug_nans(True)
        out = step(x, i)
        assert len(runner.last_run.dispatches) == steps + 2   # two float results, one int
        assert len(copies) == 2                                # both arguments
        np.testing.assert_array_equal(np.asarray(out[2]), [1, 2, 3])
        assert nans.checked_slots(runner.lowered) and all(
            runner.lowered.slots[s].dtype == "f32" for s in nans.checked_slots(runner.lowered))
    finally:
        vg.debug_nans(old)


def test_env_variable_turns_it_on(monkeypatch):
    monkeypatch.setenv("VKGRAD_DEBUG_NANS", "1")
    monkeypatch.setattr(nans, "_on", [None])
    assert nans.enabled()
    monkeypatch.setenv("VKGRAD_DEBUG_NANS", "0")
    monkeypatch.setattr(nans, "_on", [None])
    assert not nans.enabled()


def test_a_nan_only_the_device_computes_points_to_check_kernels(debug_nans, monkeypatch):
    monkeypatch.setitem(code_for_op, exp_p, "sqrt(-1.0 - abs({0}))")   # a broken kernel
    e = raised(vg.jit(lambda x: vnp.exp(x) + 1.0, backend="vulkan"), np.ones(3, np.float32))
    assert "the numpy interpreter computes finite values" in str(e)
    assert "vg.check_kernels" in str(e)


def relu_of_a_nan(x):
    return vg.nn.relu(vnp.log(x)) + 1.0


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_nan_made_and_used_inside_one_fused_kernel(debug_nans, backend):
    """relu keeps the NaN (numpy's maximum), so the result shows it and the search finds log.
    Failed before on Vulkan: GLSL's max(nan, 0) is 0, so relu(log(-1)) + 1 returned [1.]."""
    x = np.array([-1.0], np.float32)
    vg.debug_nans(False)
    assert np.isnan(np.asarray(vg.jit(relu_of_a_nan, backend=backend)(x))).all()
    vg.debug_nans(True)
    e = raised(vg.jit(relu_of_a_nan, backend=backend), x)
    assert "log(f32[1]) -> f32[1] in the forward part" in str(e)
