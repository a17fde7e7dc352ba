"""What JAX's docs use (issue 21): Array.devices() and .sharding, vg.debug.print and
vg.debug.callback (eager, under grad and vmap, under jit on the interpreter and on Vulkan), and a
custom_jvp rule with Python control flow on the primals' values under eager transforms."""

import numpy as np
import pytest

import vkgrad as vg
import vkgrad.numpy as vnp
from vkgrad.tracer.array import HOST


# ----------------------------------------------------------------------------- devices

def test_a_host_array_lives_on_the_host_device():
    x = vnp.arange(3.0)
    assert x.devices() == {HOST} and x.device is HOST
    s = x.sharding
    assert s.device_set == {HOST} and s.is_fully_replicated and s.is_fully_addressable
    assert s.num_devices == 1 and s.memory_kind == "device"
    assert repr(s) == "SingleDeviceSharding(device=HostDevice(id=0), memory_kind=device)"
    assert vg.devices("numpy") == [HOST] and vg.devices("cpu") == [HOST]


def test_a_device_array_is_on_the_device_vg_devices_lists():
    dev = vg.devices()[0]
    y = vg.device_put(np.ones(4, np.float32), 0)
    assert y.devices() == {dev} and y.device is dev      # the same object
    assert y.sharding.device_set == {dev} and y.sharding == vg.device_put(y * 2, 0).sharding
    assert (dev.id, dev.platform, dev.device_kind) == (0, "vulkan", dev.name)
    assert repr(dev) == f"VulkanDevice(id=0, name={dev.name!r})" and str(dev) == "vulkan:0"
    assert y.sharding != vnp.ones(4).sharding


def test_a_deleted_array_has_no_device_and_an_unknown_backend_is_named():
    y = vg.device_put(np.ones(2, np.float32), 0)
    y.delete()
    with pytest.raises(vg.DeletedArrayError, match="deleted"):
        y.devices()
    with pytest.raises(vg.ArgumentError, match="unknown backend 'tpu'") as e:
        vg.devices("tpu")
    assert "test_debug_and_devices.py" in str(e.value)


# ----------------------------------------------------------------------------- debug.print

def _f(x):
    vg.debug.print("x -> {x}", x=x)
    y = vnp.sin(x)
    vg.debug.print("y -> {}", y)
    return y


def test_debug_print_outside_a_trace_prints_at_once(capsys):
    _f(2.0)
    assert capsys.readouterr().out == "x -> 2.0\ny -> 0.9092974\n"


@pytest.mark.parametrize("backend", ["numpy", "vulkan"])
def test_debug_print_under_jit_prints_each_call_s_values(capsys, backend):
    before = dict(vg.fallbacks())
    f = vg.jit(_f, backend=backend)
    y = f(2.0)
    f(0.0)
    # the printed y is the value the device computed (the H200's sin(2) is 0.90929735, one ulp
    # from numpy's 0.9092974), printed as JAX prints a float32
    y = str(np.asarray(y, np.float32)[()])
    assert capsys.readouterr().out == f"x -> 2.0\ny -> {y}\nx -> 0.0\ny -> 0.0\n"
    assert abs(float(y) - 0.9092974) < 1e-6
    assert vg.fallbacks() == before     # on Vulkan: host steps, not the interpreter


def test_debug_print_of_an_unused_value_is_kept(capsys):
    f = vg.jit(lambda x: (vg.debug.print("{a} {b}", a=x * 3, b=[x, 1]), x + 1)[1],
               backend="vulkan")
    assert float(f(1.0)) == 2.0
    assert capsys.readouterr().out == "3.0 [Array(1., dtype=float32), 1]\n"
    assert "debug_callback" in str(vg.make_ir(lambda x: vg.debug.print("{}", x))(1.0))


def test_debug_print_under_grad_prints_the_primals_once(capsys):
    assert float(vg.grad(_f)(2.0)) == pytest.approx(np.cos(2.0), rel=1e-6)
    assert capsys.readouterr().out == "x -> 2.0\ny -> 0.9092974\n"
    vg.jit(vg.grad(_f), backend="vulkan")(0.0)
    assert capsys.readouterr().out == "x -> 0.0\ny -> 0.0\n"


@pytest.mark.parametrize("jit", [False, True])
def test_debug_print_under_vmap_prints_each_example(capsys, jit):
    def g(x, c):
        vg.debug.print("{} {}", x, c)
        return x * c
    f = vg.vmap(g, in_axes=(0, None))
    out = (vg.jit(f, backend="vulkan") if jit else f)(vnp.array([1.0, 2.0]), 5.0)
    np.testing.assert_allclose(out, [5.0, 10.0])
    assert capsys.readouterr().out == "1.0 5.0\n2.0 5.0\n"


def test_debug_print_in_a_loop_body_runs_on_the_interpreter_counted(capsys):
    def body(c, x):
        vg.debug.print("c={}", c)
        return c + x, c
    before = sum(vg.fallbacks().values())
    with pytest.warns(vg.FallbackWarning, match="debug_callback"):
        vg.jit(lambda xs: vg.lax.scan(body, 0.0, xs), backend="vulkan")(vnp.arange(3.0))
    assert capsys.readouterr().out == "c=0.0\nc=0.0\nc=1.0\n"
    assert sum(vg.fallbacks().values()) == before + 1


def test_debug_callback_gets_the_values_as_arrays():
    got = []
    f = vg.jit(lambda x: (vg.debug.callback(lambda a, *, k: got.append((a, k)), x, k="s"),
                          x)[1])
    f(vnp.arange(2.0))
    (a, k), = got
    assert isinstance(a, vg.Array) and a.tolist() == [0.0, 1.0] and k == "s"
    vg.debug.callback(lambda a: got.append(a), 7)    # outside a trace: at once
    assert got[-1] == 7


def test_debug_print_bad_arguments_name_the_problem():
    with pytest.raises(vg.ArgumentError, match="format string first, not int") as e:
        vg.debug.print(3)
    assert "test_debug_and_devices.py" in str(e.value)
    with pytest.raises(vg.ArgumentError, match="function first, not str"):
        vg.debug.callback("f", 1.0)


# ----------------------------------------------------------------------------- custom_jvp

@vg.custom_jvp
def _branchy(x):
    if x > 0:
        return vnp.sin(x)
    return vnp.cos(x)


@_branchy.defjvp
def _branchy_jvp(primals, tangents):
    x, = primals
    x_dot, = tangents
    ans = _branchy(x)
    if x > 0:
        return ans, 2 * x_dot * x
    return ans, 3 * x_dot


def test_a_custom_jvp_rule_may_branch_on_concrete_primals():
    # JAX's docs (custom derivative rules): grad(f)(1.) == 2., grad(f)(-1.) == 3.
    assert float(vg.grad(_branchy)(1.0)) == 2.0
    assert float(vg.grad(_branchy)(-1.0)) == 3.0
    out, t = vg.jvp(_branchy, (1.0,), (1.0,))
    assert float(out) == pytest.approx(np.sin(1.0)) and float(t) == 2.0
    # the rule's cotangent still depends on the primal: d/dx (2 x) = 2
    assert float(vg.grad(vg.grad(_branchy))(1.5)) == 2.0
    assert float(vg.grad(vg.grad(_branchy))(-1.5)) == 0.0


def test_a_custom_jvp_rule_branching_under_jit_is_the_concretization_error():
    with pytest.raises(vg.ConcretizationError, match="Python control flow"):
        vg.jit(vg.grad(_branchy))(1.0)
