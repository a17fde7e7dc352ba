"""Reliability (issue 12): no silent slow path, the float64 policy, and faults in the user's
terms (too-large arrays, shaders that fail to compile, threads, no Vulkan device).

Everything runs for real: on lavapipe and on the numpy interpreter; docs/reliability.md says
what each message means."""

import dataclasses
import os
import re
import subprocess
import sys
import threading
import warnings

import numpy as np
import pytest

import vkgrad as vg
import vkgrad.numpy as vnp
from vkgrad.lowering.glsl import code_for_op
from vkgrad.primitives import lax
from vkgrad.runtime import ShaderCompileError, counters, get_device
from vkgrad.tracer.core import Tracer
from child_env import child_env

HERE = os.path.basename(__file__)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def line_of(fn, text) -> str:
    """`file:line` of the line of this file holding `text` inside function `fn`."""
    import inspect
    lines, start = inspect.getsourcelines(fn)
    return f"{HERE}:{start + next(i for i, l in enumerate(lines) if text in l)}"


# ----------------------------------------------------------------------- no silent slow path

def _scaled_step(x, w):
    d = x.shape[-1]
    h = x @ w * (1.0 / np.sqrt(d))            # a NumPy float64 scalar: weakly typed
    return vnp.sum(vnp.tanh(h) + np.ones(w.shape[1]))   # a float64 array: float64 program


def test_fallback_warns_once_naming_the_float64_line(x64):
    x, w = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)
    f = vg.jit(_scaled_step, backend="vulkan")
    with pytest.warns(vg.FallbackWarning) as got:
        out = f(x, w)
        f(x, w)                                   # same compiled program: no second warning
    assert len(got) == 1
    msg = str(got[0].message)
    assert "scaled_step runs on the numpy interpreter" in msg
    assert "float64 values" in msg and "np.ones(w.shape[1])" in msg
    assert line_of(_scaled_step, "np.ones(w.shape[1])") in msg
    assert "astype(np.float32)" in msg                        # how to fix it
    assert got[0].filename == __file__                         # points at the user's call
    assert out.dtype == np.float64
    np.testing.assert_allclose(np.asarray(out), np.sum(np.tanh(x @ w / np.sqrt(3)) + 1.0),
                               rtol=1e-6)


def test_fallback_names_a_float64_argument_and_strict_mode_refuses(x64, monkeypatch):
    f = vg.jit(lambda x: vnp.exp(x) * 2.0, backend="vulkan")
    with pytest.warns(vg.FallbackWarning, match="float64 argument 0"):
        f(np.ones(3))
    monkeypatch.setenv("VKGRAD_STRICT", "1")
    with pytest.raises(vg.StrictModeError, match="float64 argument 0.*VKGRAD_STRICT=1"):
        vg.jit(lambda x: vnp.exp(x) * 2.0, backend="vulkan")(np.ones(3))


def test_fallback_of_another_kind_names_the_eqns_line():
    from vkgrad.lowering.sort import max_row
    x = np.zeros((1, max_row(get_device().info) + 1), np.float32)

    def sort_rows(x):
        return vnp.sort(x, axis=1) * 2.0

    with pytest.warns(vg.FallbackWarning) as got:
        vg.jit(sort_rows, backend="vulkan")(x)
    msg = str(got[0].message)
    assert "argsort of rows longer than" in msg
    assert line_of(sort_rows, "vnp.sort(x, axis=1)") in msg and "vnp.sort(x, axis=1)" in msg


def test_a_float32_program_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = vg.jit(_scaled_step_f32, backend="vulkan")(np.ones((2, 3), np.float32),
                                                         np.ones((3, 4), np.float32))
    assert out.dtype == np.float32


def _scaled_step_f32(x, w):
    return vnp.sum(vnp.tanh(x @ w * (1.0 / np.sqrt(x.shape[-1]))) + np.float64(1.0))


# ----------------------------------------------------------------------------- float64 policy

def test_numpy_scalars_are_weakly_typed_beside_arrays():
    x32 = np.ones(3, np.float32)
    prog = vg.make_ir(lambda x: np.float64(3.0) * x * (1.0 / np.sqrt(16)) + np.float64(2.0)
                      - np.int64(1))(x32)
    assert "f64" not in str(prog)
    for s in (np.float64(0.5), np.float32(0.5), np.int64(2), np.bool_(True)):
        assert vnp.multiply(x32, s).dtype == np.float32             # eagerly as well
        assert (s * vg.jit(lambda x: x + 1.0)(x32)).dtype == np.float32   # reflected too
    assert vnp.multiply(np.arange(3, dtype=np.int32), np.float64(0.5)).dtype == np.float32
    with vg.enable_x64():
        assert vnp.multiply(np.ones(3), np.float32(2.0)).dtype == np.float64   # f64 arrays stay
        assert vnp.add(np.float64(1.0), np.float64(2.0)).dtype == np.float64   # alone: theirs
        assert vnp.asarray(np.float64(1.0)).dtype == np.float64
    assert vnp.multiply(np.ones(3), np.float32(2.0)).dtype == np.float32   # x64 off: truncated
    assert vnp.add(np.float64(1.0), np.float64(2.0)).dtype == np.float32


def test_without_x64_float64_data_is_float32_and_runs_on_vulkan():
    """JAX's policy with 64 bits off: float64 data is float32 (no fallback to the interpreter),
    a float64 asked for by name is float32 with JAX's warning, and int64 never wraps."""
    x, w = np.ones((2, 3)), np.ones((3, 4))                              # float64
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = vg.jit(_scaled_step, backend="vulkan")(x, w)
        g = vg.grad(lambda w: vnp.sum(vnp.tanh(x @ w)))(w)
        preds, targets = vnp.asarray(np.float32([0.2, 0.7])), np.array([0.0, 1.0])
        assert ((1 - preds) * (1 - targets)).dtype == np.float32
    assert out.dtype == np.float32 and g.dtype == np.float32
    np.testing.assert_allclose(out, np.sum(np.tanh(x @ w / np.sqrt(3)) + 1.0), rtol=1e-6)
    for make, where in [(lambda: vnp.zeros(3, np.float64), "zeros"),
                        (lambda: vnp.asarray([1.0], dtype="float64"), "asarray"),
                        (lambda: vnp.ones(2).astype(vnp.float64), "astype"),
                        (lambda: vnp.arange(3, dtype=np.int64), "arange")]:
        with pytest.warns(UserWarning, match=f"Explicitly requested dtype (float|int)64 "
                          f"requested in {where} is not available, and will be truncated to "
                          "dtype (float|int)32") as got:
            r = make()
        assert r.dtype in (np.float32, np.int32) and got[0].filename == __file__, where
    with pytest.raises(vg.IntegerOverflowError, match="9999800001 does not fit int32"):
        vnp.sum(np.arange(100000) ** 2)                                  # never a silent wrap
    with pytest.raises(OverflowError, match="1099511627777 does not fit int32"):
        vnp.asarray(2 ** 40 + 1)


def test_config_switches_x64_as_jax_config_does():
    assert vg.config.x64_enabled is False and vnp.asarray(np.ones(2)).dtype == np.float32
    try:
        vg.config.update("jax_enable_x64", True)                         # JAX's name works too
        assert vg.config.x64_enabled and vnp.asarray(np.ones(2)).dtype == np.float64
        with vg.enable_x64(False):                                      # a block, this thread
            assert not vg.config.x64_enabled and vnp.zeros(2, "float32").dtype == np.float32
    finally:
        vg.config.update("enable_x64", False)
    with pytest.raises(vg.ArgumentError, match="no option 'enable_x32'"):
        vg.config.update("enable_x32", True)
    out = subprocess.run([sys.executable, "-c", "import numpy as np, vkgrad.numpy as vnp; "
                          "print(vnp.sin(np.ones(2)).dtype)"], capture_output=True, text=True,
                         env=child_env(VKGRAD_ENABLE_X64="1"), check=True)
    assert out.stdout.strip() == "float64"


def test_grad_and_check_grads_keep_float64(x64):
    def loss(w, x):
        return vnp.sum(vnp.tanh(x @ w) * (1.0 / np.sqrt(x.shape[-1])))

    rng = np.random.default_rng(0)
    w, x = rng.standard_normal((3, 2)), rng.standard_normal((4, 3))   # float64
    g = vg.grad(loss)(w, x)
    assert g.dtype == np.float64
    t = np.tanh(x @ w)
    np.testing.assert_allclose(g, x.T @ (1 - t * t) / np.sqrt(3), rtol=1e-12)   # f64 precise
    vg.check_grads(loss, (w, x), order=2)


# ----------------------------------------------------------------------------- faults: sizes

def _too_big(info):
    """A side length n with n*n float32 values over one buffer's limit (not allocated)."""
    return int(np.sqrt(info.max_storage_buffer_range / 4)) + 1


def test_a_value_over_the_buffer_limit_is_refused_at_plan_time():
    info = get_device().info
    n = _too_big(info)

    def outer(x):
        return vnp.broadcast_to(x, (n, n)) * 2.0

    f = vg.jit(outer, backend="vulkan")
    with pytest.raises(vg.BufferSizeError) as e:
        f(np.ones(n, np.float32))
    msg = str(e.value)
    assert f"f32[{n},{n}]" in msg and "maxStorageBufferRange" in msg
    assert str(info.max_storage_buffer_range) in msg and info.name in msg
    assert line_of(outer, "broadcast_to") in msg
    assert isinstance(e.value, MemoryError)
    ok = vg.jit(lambda x: x * 2.0, backend="vulkan")(np.ones(3, np.float32))   # still usable
    np.testing.assert_array_equal(np.asarray(ok), np.full(3, 2.0))


def test_an_argument_over_the_buffer_limit_is_refused_before_upload():
    n = _too_big(get_device().info)
    big = np.broadcast_to(np.float32(1), (n, n))        # a view: no memory behind it
    with pytest.raises(vg.BufferSizeError, match=rf"argument 0: f32\[{n},{n}\]"):
        vg.jit(lambda x: x + 1.0, backend="vulkan")(big)
    with pytest.raises(vg.BufferSizeError, match=rf"device_put's argument: f32\[{n},{n}\]"):
        vg.device_put(big)
    np.testing.assert_array_equal(np.asarray(vg.device_put(np.ones(2, np.float32))), [1, 1])


def test_device_put_follows_the_backend_and_advice_is_not_what_is_set(monkeypatch):
    """Under the numpy backend device_put returns a host-backed Array (eager work on it runs on
    the interpreter); a Vulkan limit met there (a call that asked for Vulkan itself) does not
    advise setting VKGRAD_BACKEND=numpy, which is set."""
    monkeypatch.setenv("VKGRAD_BACKEND", "numpy")
    x = vg.device_put({"a": np.ones((2, 3), np.float32), "b": 2.0})
    assert type(x["a"]) is vg.Array and x["a"].buffer is None and x["b"].buffer is None
    assert vg.device_put(x["a"]) is x["a"]
    sub = counters["submissions"]
    g = vg.grad(lambda p: vnp.sum(p["a"] * p["b"]))(x)
    np.testing.assert_array_equal(np.asarray(g["a"]), np.full((2, 3), 2.0))
    assert counters["submissions"] == sub                       # nothing ran on Vulkan
    n = _too_big(get_device().info)
    big = np.broadcast_to(np.float32(1), (n, n))
    for call in (lambda: vg.jit(lambda x: x + 1.0, backend="vulkan")(big),
                 lambda: vg.device_put(big, device=0)):
        with pytest.raises(vg.BufferSizeError) as e:
            call()
        assert "(VKGRAD_BACKEND=numpy)" not in str(e.value)
        assert "VKGRAD_BACKEND=numpy is set, but the call asked for Vulkan" in str(e.value)
    monkeypatch.setenv("VKGRAD_BACKEND", "vulkan")
    assert vg.device_put(np.ones(2, np.float32)).buffer is not None


def test_a_program_larger_than_device_memory_is_refused_at_plan_time(monkeypatch):
    """The buffers of one call together: checked against the device's largest device-local
    heap (kp patch 0004's device_local_bytes) while planning, before any buffer exists. Here
    the device is made to report 1 MiB; the program needs about 2."""
    device = get_device()
    assert device.info.device_local_bytes > 0          # the driver reports its heaps
    monkeypatch.setattr(device, "target", dataclasses.replace(device.target,
                                                              device_local_bytes=1 << 20))

    def step(x, w):
        h = vnp.tanh(x @ w)
        return vnp.sum(h * h)

    x, w = np.ones((256, 512), np.float32), np.ones((512, 256), np.float32)
    with pytest.raises(vg.DeviceMemoryError) as e:
        vg.jit(step, backend="vulkan")(x, w)
    msg = str(e.value)
    assert re.search(r"needs \d\.\d MiB of device memory at once \(arguments 1\.0 MiB", msg)
    assert "has 1.0 MiB" in msg
    assert device.info.name in msg and "f32[256,512]" in msg and "donate_argnums" in msg
    assert isinstance(e.value, MemoryError)
    monkeypatch.undo()                                   # the real device: it runs
    np.testing.assert_allclose(float(vg.jit(step, backend="vulkan")(x, w)),
                               256 * 256 * np.tanh(512.0) ** 2, rtol=1e-5)


# ----------------------------------------------------------------------------- faults: shaders

def test_a_generated_shader_that_fails_to_compile(monkeypatch, tmp_path):
    monkeypatch.setenv("VKGRAD_CACHE", str(tmp_path))   # a fresh cache: the shader compiles
    monkeypatch.setitem(code_for_op, lax.tanh_p, "tanh({0}) +* 1.0")   # not GLSL

    def act(x):
        return vnp.tanh(x) * 3.0

    with pytest.raises(ShaderCompileError) as e:
        vg.jit(act, backend="vulkan")(np.ones(4, np.float32))
    msg = str(e.value)
    assert "failed to compile" in msg and e.value.kernel in msg       # the kernel ...
    assert "+* 1.0" in msg and "line " in msg                         # ... and its GLSL line
    assert line_of(act, "vnp.tanh(x)") in msg                         # the user's line
    assert str(e.value.saved) in msg and e.value.saved.read_text().count("+* 1.0") == 1
    assert "glslangValidator -V" in msg
    monkeypatch.undo()
    out = vg.jit(act, backend="vulkan")(np.ones(4, np.float32))       # fixed: compiles, runs
    np.testing.assert_allclose(np.asarray(out), np.tanh(np.ones(4)) * 3.0, rtol=1e-6)


# ----------------------------------------------------------------------------- faults: threads

def test_calls_from_four_threads_are_safe():
    """4 threads x 50 calls, each uploading its own data (device_put, or a numpy argument):
    without the device's lock, two threads' uploads met in Kompute's shared transfer sequence
    ("Sequence begin called when sequence still running")."""
    step = vg.jit(lambda w, x: (x * 0.5 + vnp.tanh(x @ w), vnp.sum(x @ w)), backend="vulkan")
    rng = np.random.default_rng(0)
    w = rng.standard_normal((3, 3)).astype(np.float32)
    xs = [rng.standard_normal((2, 3)).astype(np.float32) for _ in range(4)]
    step(w, xs[0])                                       # compiled once, before the threads
    errors, bad = [], []

    def worker(i):
        try:
            for k in range(50):
                x = xs[i] + k
                xd = vg.device_put(x)
                a, s = step(w, xd if k % 2 else x)
                if not (np.allclose(np.asarray(a), x * 0.5 + np.tanh(x @ w), atol=1e-4)
                        and np.isclose(float(s), np.sum(x @ w), rtol=1e-4, atol=1e-3)
                        and np.array_equal(np.asarray(xd), x)):
                    bad.append((i, k))
        except Exception as e:        # noqa: BLE001  (reported below, with its thread)
            errors.append((i, repr(e)))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and not bad


def test_a_trace_in_one_thread_never_sees_another_threads_operations():
    """Thread A traces a function that blocks mid-trace; meanwhile thread B's eager ops and
    jitted call run concretely, and A's program holds only A's two eqns."""
    started, release = threading.Event(), threading.Event()
    result = {}

    def traced(x):
        y = x * 2.0
        started.set()
        release.wait(30)
        return y + 1.0

    def thread_a():
        try:
            result["program"] = vg.make_ir(traced)(np.ones(3, np.float32))
        except Exception as e:        # noqa: BLE001  (reported below)
            result["error"] = repr(e)

    a = threading.Thread(target=thread_a)
    a.start()
    try:
        assert started.wait(30)
        s = vnp.sum(np.arange(4.0, dtype=np.float32))                 # B: eager, while A traces
        out = vg.jit(lambda v: vnp.tanh(v) * 3.0, backend="vulkan")(np.ones(2, np.float32))
        assert not isinstance(s, Tracer) and float(s) == 6.0
        np.testing.assert_allclose(np.asarray(out), np.tanh(np.ones(2)) * 3.0, rtol=1e-6)
    finally:
        release.set()
        a.join()
    assert "error" not in result, result.get("error")
    assert [e.prim.name for e in result["program"].eqns] == ["mul", "add"]


def test_threads_racing_the_first_call_of_new_shapes_all_succeed():
    """4 threads call one jitted function at once, each with a shape not compiled yet: each
    traces in its own thread (before, one of them was pulled into another's trace and raised a
    ConcretizationError)."""
    step = vg.jit(lambda x: vnp.sum(x * x) + 1.0, backend="vulkan")
    barrier = threading.Barrier(4)
    got, errors = {}, []

    def worker(n):
        try:
            x = np.arange(n, dtype=np.float32)
            barrier.wait(30)
            got[n] = float(step(x))
        except Exception as e:        # noqa: BLE001  (reported below, with its thread)
            errors.append((n, repr(e)))

    threads = [threading.Thread(target=worker, args=(n,)) for n in (2, 3, 4, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert got == {n: float(np.sum(np.arange(n) ** 2) + 1) for n in (2, 3, 4, 5)}


# ----------------------------------------------------------------------------- faults: no device

def test_no_vulkan_driver_falls_back_to_the_interpreter_with_a_message():
    env = {k: v for k, v in os.environ.items() if k != "VKGRAD_BACKEND"}
    env.update(VK_ICD_FILENAMES="/nonexistent/icd.json", VK_DRIVER_FILES="/nonexistent/icd.json")
    code = ("import numpy as np, vkgrad as vg\n"
            "print(vg.jit(lambda x: x * 2.0)(np.ones(3, np.float32)), vg.default_backend())\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["[2.", "2.", "2.]", "numpy"]
    assert "no Vulkan device" in r.stderr and "running on the numpy interpreter" in r.stderr
    assert "apt-get install libvulkan1 mesa-vulkan-drivers" in r.stderr    # what to do
    assert "<string>:2: FallbackWarning" in r.stderr                       # the user's line
