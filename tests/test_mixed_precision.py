"""vg.mp (jmp's policies and loss scales): casts over pytrees, the dynamic loss scale's rules,
an overflow that skips the step and halves the scale inside ONE jitted step on Vulkan, and the
LM trained in f16 and bf16 ending near its f32 loss."""

import sys
from pathlib import Path

import numpy as np
import pytest

import vkgrad as vg
import vkgrad.numpy as vnp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
import train_lm  # noqa: E402


POLICIES = [
    ("params=float32,compute=float16,output=float32", ("f32", "f16", "f32")),
    ("p=f32,c=bf16,o=f32", ("f32", "bf16", "f32")),
    ("bfloat16", ("bf16", "bf16", "bf16")),
    ("half", ("f16", "f16", "f16")),
    ("compute=bf16", ("f32", "bf16", "f32")),
]


@pytest.mark.parametrize("spec,want", POLICIES, ids=[p for p, _ in POLICIES])
def test_get_policy_reads_jmps_spelling(spec, want):
    p = vg.mp.get_policy(spec)
    assert (p.param_dtype, p.compute_dtype, p.output_dtype) == want
    assert vg.mp.get_policy(str(p)) == p


@pytest.mark.parametrize("spec", ["params=float32,compute=int32x", "weights=f32", "", "int32"])
def test_get_policy_refuses_what_it_cannot_read(spec):
    with pytest.raises(vg.ArgumentError, match="get_policy"):
        vg.mp.get_policy(spec)


def test_casts_touch_only_floating_leaves():
    p = vg.mp.get_policy("params=float32,compute=bfloat16,output=float32")
    tree = {"w": np.ones((2, 3), np.float32), "ids": np.arange(3, dtype=np.int32),
            "mask": np.ones(2, bool)}
    c = p.cast_to_compute(tree)
    assert c["w"].dtype == vnp.bfloat16 and c["ids"].dtype == np.int32 and c["mask"].dtype == bool
    assert p.cast_to_param(c)["w"].dtype == np.float32


# (finite flags in order, period) -> (scale, counter) after them, by jmp's and GradScaler's rule
ADJUST = [
    ([False], 4, 512.0, 0),                     # overflow: halve, restart the count
    ([True, True, True], 4, 1024.0, 3),
    ([True] * 4, 4, 2048.0, 0),                 # period clean steps: double
    ([True, True, False, True], 4, 512.0, 1),
    ([False] * 12, 4, 1.0, 0),                  # never below min_loss_scale
]


@pytest.mark.parametrize("flags,period,scale,counter", ADJUST)
def test_dynamic_loss_scale_rules(flags, period, scale, counter):
    s = vg.mp.DynamicLossScale(1024.0, period=period)
    adjust = vg.jit(lambda s, f: s.adjust(f), backend="numpy")
    for f in flags:
        s = adjust(s, np.asarray(f))
    assert float(np.asarray(s.loss_scale)) == scale and int(np.asarray(s.counter)) == counter


def test_all_finite_and_select_tree():
    tree = {"a": np.ones(3, np.float32), "b": np.array([1.0, np.inf], np.float16),
            "i": np.arange(2, dtype=np.int32)}
    assert not bool(np.asarray(vg.jit(vg.mp.all_finite, backend="numpy")(tree)))
    tree["b"] = np.ones(2, np.float16)
    assert bool(np.asarray(vg.mp.all_finite(tree)))


def _tiny_step(precision):
    cfg = train_lm.make_config("transformer", "tiny", steps=10, batch=2, seq=16,
                               precision=precision)
    cfg.update(d_model=32, layers=1, heads=2)
    return cfg, train_lm.make_steps(cfg)[0], train_lm.init_params(cfg)


def test_an_overflow_skips_the_step_and_halves_the_scale_in_one_submission():
    """A loss scale of 2^120 overflows f32 gradients: the step changes no parameter and no
    optimizer moment, and the next scale is 2^119, on Vulkan in one jitted call."""
    cfg, step, params = _tiny_step("f16")
    state = train_lm.optimizer(cfg).init(params)
    big = vg.mp.DynamicLossScale(2.0 ** 120, period=cfg["steps"])
    state = vg.mp.LossScaledState(state.inner, big)
    x = np.arange(32, dtype=np.int32).reshape(2, 16) % 7
    on_gpu = vg.jit(step.fun, backend="vulkan")
    on_gpu(params, state, x, x)                      # compiled, recorded
    before = vg.runtime_stats()["submissions"]
    new_params, new_state, loss, _ = vg.block_until_ready(on_gpu(params, state, x, x))
    assert vg.runtime_stats()["submissions"] - before == 1   # the skip is a select on the device
    assert on_gpu.lower(params, state, x, x).fallback_reason is None
    assert float(np.asarray(new_state.loss_scale.loss_scale)) == 2.0 ** 119
    for a, b in zip(vg.tree.leaves((new_params, new_state.inner)),
                    vg.tree.leaves((params, state.inner))):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert np.isfinite(float(np.asarray(loss)))
    # at a sane scale the same step is taken: the optimizer's count and moments move (the
    # parameters not yet: the warm-up's first learning rate is 0)
    state = vg.mp.LossScaledState(state.inner, vg.mp.DynamicLossScale(2.0 ** 10))
    _, taken, _, _ = on_gpu(params, state, x, x)
    assert float(np.asarray(taken.loss_scale.loss_scale)) == 2.0 ** 10
    assert any(not np.array_equal(np.asarray(a), np.asarray(b))
               for a, b in zip(vg.tree.leaves(taken.inner), vg.tree.leaves(state.inner)))


def _train(precision, steps, data):
    cfg = train_lm.make_config("transformer", "tiny", steps=steps, batch=4, seq=32,
                               precision=precision)
    step = vg.jit(train_lm.make_steps(cfg)[0].fun, backend="numpy")
    params = train_lm.init_params(cfg)
    state = train_lm.optimizer(cfg).init(params)
    losses = []
    for i in range(steps):
        x, y = train_lm.train_batch(data, cfg, i)
        params, state, loss, _ = step(params, state, x, y)
        losses.append(float(np.asarray(loss)))
    return np.mean(losses[-10:])      # the last ten steps: one batch's noise averaged out


@pytest.mark.parametrize("precision", ["f16", "bf16"])
def test_lm_in_16_bits_ends_near_its_f32_loss(precision):
    """The tiny transformer LM (batch 4 x 32 bytes, 60 steps, on the interpreter: lavapipe
    would take minutes) in mixed precision ends within 2% of its f32 loss.
    bench/bench_mixed_precision.py runs the 200-step comparison at the preset's size."""
    data = train_lm.load_text(300_000)[0]
    f32 = _train("f32", 60, data)
    half = _train(precision, 60, data)
    assert abs(half - f32) <= 0.02 * f32, (precision, half, f32)


def test_nn_models_take_a_policy():
    """The f32 parameters are cast to the compute dtype inside the model: its matmuls run in
    bf16, its logits come out in the output dtype."""
    cfg, _, params = _tiny_step("bf16")
    ids = np.zeros((2, 16), np.int32)
    prog = vg.make_ir(lambda p: vg.nn.transformer_lm(p, ids, 2, policy="p=f32,c=bf16,o=f32"))(
        params)
    matmuls = [e for e in prog.eqns if e.prim.name == "matmul"]
    assert matmuls and all(x.dtype == "bf16" for e in matmuls for x in e.inputs)
    assert prog.outputs[0].dtype == "f32"
    block = params["blocks"][0]
    x = np.ones((1, 4, 32), np.float32)
    y = vg.nn.attention_block(block, x, 2, policy=vg.mp.get_policy("params=f32,compute=f16,"
                                                                   "output=f16"))
    assert np.asarray(y).dtype == np.float16


def test_a_loss_scaled_state_goes_through_a_checkpoint(tmp_path):
    cfg, _, params = _tiny_step("f16")
    state = train_lm.optimizer(cfg).init(params)
    state = vg.mp.LossScaledState(state.inner, vg.mp.DynamicLossScale(256.0, 7, period=50))
    vg.save(tmp_path / "s.safetensors", state)
    back = vg.load(tmp_path / "s.safetensors", like=state)
    assert isinstance(back.loss_scale, vg.mp.DynamicLossScale) and back.loss_scale.period == 50
    assert float(back.loss_scale.loss_scale) == 256.0 and int(back.loss_scale.counter) == 7
