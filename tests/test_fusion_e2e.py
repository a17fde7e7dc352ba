"""The fusion targets on whole training steps (examples/train_steps.py): dispatch counts and
peak memory of the MLP step with the passes on and off, equal results either way for the MLP
and the transformer block step, and what `stats()`, the plan and the dump show."""

import os
import subprocess
import sys

import numpy as np
import pytest
from child_env import child_env

import vkgrad as vg
from examples import train_steps as ts
from vkgrad.pipeline import Options, run_stages
from vkgrad.pipeline import LOOP_FUSION_ONLY, disabled_passes
from vkgrad.runtime import get_device
from vkgrad.target import Target
from vkgrad.tracer.pytree import tree_flatten

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ALL_OFF = "fuse,remat,cse,simplify"


def plan_of(step, args, disable="", target=None):
    """The plan (no shader compiled) of a jitted step for `target` (None: the default
    device's)."""
    program = vg.make_ir(step)(*args)
    values = run_stages(program, "plan", Options(target=target or get_device().target,
                                                 disabled=disabled_passes(disable)))
    return values["plan"]


# Per Target: the most dispatches of the MLP step, and of loop kernels in it. The H200 runs
# the three skinny matmuls split-K (a second dispatch each: the sum over the K slices).
MLP_LIMITS = {"lavapipe": (14, 2), "h200": (19, 4)}


@pytest.mark.parametrize("target", sorted(MLP_LIMITS))
def test_mlp_step_targets(target):
    """784-256-256-10, batch 128, cross-entropy, Adam: at most 14 dispatches on lavapipe (19 on
    the H200), at most a third of those with the passes off, and no more memory."""
    t = {"lavapipe": Target.lavapipe(), "h200": Target.h200()}[target]
    most, most_loops = MLP_LIMITS[target]
    opt, step = ts.mlp_step()
    params, x, y = ts.mlp_data([784, 256, 256, 10], 128)
    args = (params, opt.init(params), x, y)
    on, off, loops = (plan_of(step, args, d, t) for d in ("", ALL_OFF, ",".join(LOOP_FUSION_ONLY)))
    assert len(on.steps) <= most, on.text()
    assert 3 * len(on.steps) <= len(off.steps)
    assert len(on.steps) < len(loops.steps)
    assert on.memory()["peak"] <= off.memory()["peak"]
    assert on.memory()["peak"] <= loops.memory()["peak"]
    kinds = [s.eqn.params.get("kind") for s in on.steps if s.eqn.prim.name == "fused"]
    assert kinds.count("multi_output") == 3            # dW and db of each layer: one pass
    # the whole Adam update: one kernel per 32 buffers lavapipe binds (one on a GPU)
    assert kinds.count("horizontal") + kinds.count("loop") <= most_loops


def _steps(step, args, n, disable, donate=True):
    j = vg.jit(step, donate_argnums=(0, 1) if donate else (), disable_passes=disable)
    params, state, x, y = args
    losses = []
    for _ in range(n):
        params, state, loss = j(params, state, x, y)
        losses.append(float(loss))
    return losses, [np.asarray(a) for a in tree_flatten(params)[0]], j


@pytest.mark.parametrize("disable", [ALL_OFF, ",".join(LOOP_FUSION_ONLY), "memory",
                                     "fuse_horizontal,fuse_multi_output"])
def test_mlp_step_same_results_with_passes_off(disable):
    opt, step = ts.mlp_step(lr=1e-2)
    params, x, y = ts.mlp_data([24, 32, 16, 10], 16)
    args = (params, opt.init(params), x, y)
    l_on, p_on, j = _steps(step, args, 3, "")
    l_off, p_off, _ = _steps(step, args, 3, disable)
    np.testing.assert_allclose(l_on, l_off, rtol=1e-5, atol=1e-6)
    for a, b in zip(p_on, p_off):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
    assert j.compiles == 1


def test_transformer_step_same_results_with_passes_off():
    params, x, y = ts.transformer_data(16, 2, 8, 2)
    grads = {}
    for disable in ("", ALL_OFF):
        f = vg.jit(vg.value_and_grad(lambda p, x, y: ts.transformer_loss(p, x, y, 2)),
                   disable_passes=disable)
        grads[disable] = tree_flatten(f(params, x, y))[0]
    for a, b in zip(grads[""], grads[ALL_OFF]):
        # (the key bias's gradient is 0 up to rounding: softmax ignores a shift of a row)
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-3, atol=1e-6)
    # the whole step with Adam: the same losses (Adam turns rounding-sized gradients, as the
    # key bias's, into full steps of either sign, so parameters are compared above, as grads)
    opt, step = ts.transformer_step(heads=2)
    args = (params, opt.init(params), x, y)
    l_on, _, j = _steps(step, args, 2, "", donate=False)
    l_off, _, _ = _steps(step, args, 2, ALL_OFF, donate=False)
    np.testing.assert_allclose(l_on, l_off, rtol=1e-4, atol=1e-6)
    low = j.lower(*args)
    st = low.stats()
    # the mask and scale of the scores happen in the softmax's loads
    assert not any(s.eqn.prim.name == "fused" and s.eqn.params.get("kind") == "loop" and
                   any(b.prim.name == "select" for b in s.eqn.params["body"].eqns)
                   for s in low.lowered.steps)
    assert st["dispatches"] < j.lower(*args).stats()["eqns"] // 5


def test_stats_plan_and_glsl():
    opt, step = ts.mlp_step()
    params, x, y = ts.mlp_data([12, 16, 8, 10], 8)
    low = vg.jit(step, donate_argnums=(0, 1)).lower(params, opt.init(params), x, y)
    st = low.stats()
    for key in ("eqns", "kernels", "dispatches", "buffers", "peak_bytes", "saved_bytes",
                "traced_eqns", "optimized_eqns", "scratch_bytes", "fallback"):
        assert key in st
    assert 0 < st["saved_bytes"] < st["peak_bytes"]
    plan = low.as_text("plan")
    assert plan.startswith(f"plan step: {st['dispatches']} dispatches, {st['buffers']} buffers")
    assert "saved residuals" in plan and "train_steps.py:" in plan     # the user's source line
    assert "over argument" in plan                     # donated parameters updated in place
    glsl = low.as_text("glsl")
    assert glsl.count("// ==== k") == st["dispatches"]
    assert "vkg_store_b2" in glsl and "// computes:" in glsl and "void main()" in glsl
    assert "**backend vulkan" in low._repr_markdown_()


def test_dot_graph_of_every_program_stage():
    low = vg.jit(vg.value_and_grad(ts.mlp_loss)).lower(*ts.mlp_data([6, 5, 4], 3))
    for stage in ("traced", "optimized", "fused", "plan"):
        dot = low.as_text(stage, format="dot")
        assert dot.startswith("digraph") and dot.rstrip().endswith("}")
        assert "cluster_fwd" in dot and "cluster_bwd" in dot and "fillcolor" in dot
    with pytest.raises(vg.VkgradError, match="glsl"):
        low.as_text("glsl", format="dot")


def test_program_renders_in_a_notebook():
    p = vg.make_ir(lambda x: x * 2.0)(np.ones(3, np.float32))
    assert p._repr_markdown_().startswith("```\nprogram")


def dump(*args):
    return subprocess.run([sys.executable, "-m", "vkgrad", "dump", *args], cwd=ROOT,
                          capture_output=True, text=True, env=child_env())


def test_dump_command_line_stages_and_formats():
    target = ["examples/model.py:loss", "--args", "f32[784,10], f32[64,784], i32[64]", "--grad"]
    plan = dump(*target, "--stage", "plan")
    assert plan.returncode == 0, plan.stderr
    # the same text from Python, through the same stage table, for the same device
    from examples.model import loss
    args = (np.zeros((784, 10), np.float32), np.zeros((64, 784), np.float32),
            np.zeros(64, np.int32))
    low = vg.jit(vg.value_and_grad(loss)).lower(*args)
    assert low.as_text("plan").splitlines()[1:] == plan.stdout.splitlines()[1:]
    lines = plan.stdout.splitlines()
    n = int(lines[0].split(": ")[1].split()[0])
    # each dispatch lists the user's lines it computes (the loss's lines of examples/model.py)
    ats = [ln.strip() for ln in lines if ln.startswith("        at ")]
    assert len(ats) == n and all(a.startswith("at examples/model.py:") for a in ats), ats
    # the dispatch count is the device's: 5 on lavapipe
    lava = plan_of(vg.value_and_grad(loss), args, target=Target.lavapipe())
    assert len(lava.steps) == 5
    assert n == len(plan_of(vg.value_and_grad(loss), args).steps)
    glsl = dump(*target, "--stage", "glsl")
    assert glsl.returncode == 0 and "hand-written kernel vkgrad/kernels_glsl/softmax.comp" in \
        glsl.stdout
    dot = dump(*target, "--stage", "fused", "--format", "dot")
    assert dot.returncode == 0 and dot.stdout.startswith("digraph")
    off = dump(*target, "--stage", "plan", "--disable", "fuse")
    assert off.returncode == 0 and f"plan loss: {n} dispatches" not in off.stdout
    svg = dump(*target, "--stage", "fused", "--format", "svg")
    if svg.returncode:
        assert "Graphviz" in svg.stderr and "apt-get install graphviz" in svg.stderr
    else:
        assert "<svg" in svg.stdout
