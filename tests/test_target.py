"""The Target: one object says what the device can do, and plans for a device that is not here
are golden-tested, so GPU-only plan behaviour (split-K, the hook policy, one-dispatch Adam)
is checked in CI without a GPU.

Golden plans: tests/golden/plans/<program>.<target>.txt. After a change that is meant to
change a plan, regenerate them with `VKGRAD_UPDATE_GOLDEN=1 pytest tests/test_target.py` and
read the diff."""

import ast
import dataclasses
import os
from pathlib import Path

import numpy as np
import pytest

import vkgrad as vg
import vkgrad.numpy as vnp
from examples import train_steps as ts
from vkgrad.pipeline import Options, run_stages
from vkgrad.runtime import DeviceInfo, get_device
from vkgrad.target import GENERIC, Target

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden" / "plans"
TARGETS = {"lavapipe": Target.lavapipe(), "h200": Target.h200()}


def _info(kind, **kw):
    base = dict(index=0, name="x", type=kind, api_version=(1, 3, 0), timestamp_period_ns=1.0,
                max_shared_memory=49152, max_workgroup_invocations=1024,
                max_storage_buffer_range=2 ** 31, max_storage_buffers=64, timestamps=True)
    return DeviceInfo(**(base | kw))


def test_a_target_comes_from_the_device_properties():
    cpu, gpu = Target.from_device(_info("CPU")), Target.from_device(_info("discrete GPU"))
    for t in (cpu, gpu):
        assert t.max_shared_memory == 49152 and t.max_storage_buffers == 64
    # lavapipe: no split-K, tiles chosen by padding, no prefetch, rolled loops, the drain
    # before compiles, numpy by default, a loop iteration cap
    assert (cpu.split_k, cpu.matmul_tiles, cpu.prefetch, cpu.unroll_loops) == \
        (False, "padding", False, False)
    assert cpu.drain_before_compile and cpu.interpreter_faster and cpu.pipeline_threads == 1
    assert cpu.max_loop_iterations == 65535
    assert (gpu.split_k, gpu.matmul_tiles, gpu.prefetch, gpu.unroll_loops) == \
        (True, "waves", True, True)
    assert not gpu.drain_before_compile and not gpu.interpreter_faster
    assert gpu.max_loop_iterations is None
    assert gpu.matmul_load_hook_max_flops < cpu.matmul_load_hook_max_flops
    # the presets are what from_device makes of those devices
    lava = Target.lavapipe()
    same = Target.from_device(_info("CPU", name=lava.name, max_shared_memory=32768,
                                    max_storage_buffer_range=2 ** 27, max_storage_buffers=32,
                                    device_local_bytes=2 ** 31, subgroup_size=8,
                                    features=tuple(dict.fromkeys(LAVAPIPE_FEATURES, True).items())))
    assert same == lava
    h200 = Target.h200()
    assert h200.cooperative_shape("f16", "f32") is not None and lava.cooperative_shape("f16", "f32") is None


# what kp patch 0010 reports on lavapipe (Mesa 22.3), besides what it lacks (cooperative_matrix)
LAVAPIPE_FEATURES = ("storage_buffer_16bit_access", "shader_float16", "shader_int8",
                     "vulkan_memory_model")


def test_the_device_has_its_target():
    dev = get_device()
    assert dev.target == Target.from_device(dev.info)


def test_no_module_asks_what_kind_of_device_it_is():
    """Only vkgrad/target.py (and the device listing that names the kinds) reads a device's
    type: every decision reads a Target field."""
    allowed = {"target.py", "runtime/device.py", "runtime/vulkan.py", "__main__.py"}
    found = []
    for path in (ROOT / "vkgrad").rglob("*.py"):
        rel = path.relative_to(ROOT / "vkgrad").as_posix()
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value in ("CPU", "discrete GPU"):
                if rel not in allowed:
                    found.append(f"{rel}:{node.lineno}")
            if isinstance(node, ast.Attribute) and node.attr == "type" and \
                    isinstance(node.value, ast.Attribute) and node.value.attr == "info":
                if rel not in allowed:
                    found.append(f"{rel}:{node.lineno}")
    assert not found, f"device-kind checks outside the Target: {found}"
    # and where the runtime names the type, it only prints it
    src = (ROOT / "vkgrad/runtime/vulkan.py").read_text()
    assert src.count("info.type") == 1 and "__repr__" in src


def _programs():
    opt, step = ts.mlp_step()
    params, x, y = ts.mlp_data([784, 256, 256, 10], 128)
    yield "mlp_step", lambda: vg.make_ir(step)(params, opt.init(params), x, y)
    rng = np.random.default_rng(0)

    def wgrad(w, x):
        return vnp.sum(vnp.maximum(x @ w, 0.0) ** 2)
    w = rng.standard_normal((64, 48)).astype(np.float32)
    xs = rng.standard_normal((8192, 64)).astype(np.float32)
    yield "tall_k_weight_gradient", lambda: vg.make_ir(vg.grad(wgrad))(w, xs)

    def attn(q, k, v):
        return vnp.sum(vg.nn.flash_attention(q, k, v, causal=True) ** 2)
    q = rng.standard_normal((2, 4, 64, 32)).astype(np.float32)
    yield "flash_attention_grad", lambda: vg.make_ir(vg.grad(attn, argnums=(0, 1, 2)))(q, q, q)


PROGRAMS = dict(_programs())


@pytest.fixture(scope="module")
def traced():
    return {name: make() for name, make in PROGRAMS.items()}


@pytest.mark.parametrize("target", sorted(TARGETS))
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_golden_plan(traced, name, target):
    text = run_stages(traced[name], "plan", Options(target=TARGETS[target]))["plan"].text()
    path = GOLDEN / f"{name}.{target}.txt"
    if os.environ.get("VKGRAD_UPDATE_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text()


def test_gpu_only_plan_behaviour(traced):
    """What the two Targets' plans differ in, said in words."""
    plans = {t: run_stages(traced["tall_k_weight_gradient"], "plan", Options(target=TARGETS[t]))
             ["plan"] for t in TARGETS}
    names = {t: [s.launch.name for s in p.steps] for t, p in plans.items()}
    assert any("splitk" in n for n in names["h200"])          # few tiles over K = 8192
    assert not any("splitk" in n for n in names["lavapipe"])
    # a matmul of 2^28 flops takes a fused load (relu(x + b)) on lavapipe; on the H200 only
    # matmuls up to 2^26 flops do (fused loads cost its large tiles their vec4 loads)
    rng = np.random.default_rng(1)
    x, b, w = (rng.standard_normal(s).astype(np.float32) for s in ((512, 512), (512,), (512, 512)))
    p = vg.make_ir(lambda x, b, w: vnp.maximum(x + b, 0.0) @ w)(x, b, w)
    kinds = {t: [e.params.get("kind", "kernel") for e in
                 run_stages(p, "fused", Options(target=TARGETS[t]))["fused"].eqns] for t in TARGETS}
    assert kinds["lavapipe"] == ["input"]
    assert kinds["h200"] == ["loop", "kernel"]
    # the whole Adam update: one dispatch where the device binds enough buffers, a dispatch
    # per 32 buffers on lavapipe
    mlp = {t: run_stages(traced["mlp_step"], "fused", Options(target=TARGETS[t]))["fused"]
           for t in TARGETS}
    adam = {t: [e.params.get("kind") for e in p.eqns if e.prim.name == "fused"].count("horizontal")
            for t, p in mlp.items()}
    assert adam["h200"] == 1


def test_an_unknown_device_plans_with_the_guaranteed_limits():
    assert GENERIC.max_shared_memory == 32768 and GENERIC.max_storage_buffers == 32
    assert dataclasses.replace(GENERIC, split_k=False) != GENERIC
