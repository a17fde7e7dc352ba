"""float16 flash attention on cooperative matrices (lowering/attention_coop.py, the kernels
flash_attention_coop{,_dq,_dkdv}.comp): what the planner chooses for Target.h200() and
Target.lavapipe() without a device, and f16 attention's gradients on the device against the
interpreter. On a device with cooperative matrices (the H200) those are the coop kernels; on
lavapipe, which has none, the same programs run widened to f32 (the scalar path), and the test
says which ran."""

import dataclasses

import numpy as np
import pytest

import vkgrad as vg
import vkgrad.numpy as vnp
from vkgrad.lowering import attention_coop
from vkgrad.lowering.attention import scores_path
from vkgrad.lowering.contracts import CONTRACTS, Unsupported
from vkgrad.passes import optimize
from vkgrad.pipeline import fuse_program
from vkgrad.primitives.attention import flash_attention_bwd_p, flash_attention_p
from vkgrad.runtime import get_device
from vkgrad.target import Target
from vkgrad.tracer.core import ShapeDtype

H200, LAVAPIPE = Target.h200(), Target.lavapipe()


def _loss(causal):
    return lambda q, k, v: vnp.sum(vnp.sin(vg.nn.flash_attention(q, k, v, causal=causal)))


def _grads(causal):
    return vg.grad(_loss(causal), argnums=(0, 1, 2))


def _eqns(q_shape, k_shape, dtype, causal, target):
    args = [ShapeDtype(q_shape, dtype)] + [ShapeDtype(k_shape, dtype)] * 2
    program = fuse_program(optimize(vg.make_ir(_grads(causal))(*args), final=True),
                           target=target)
    out = []
    for e in program.eqns:
        body = e.params.get("body") if e.prim.name == "fused" else None
        out += list(body.eqns) if body is not None else [e]
    return out


def test_it_takes_f16_at_whole_blocks_on_devices_with_cooperative_matrices():
    q = (2, 4, 256, 64)
    assert attention_coop.takes(q, q, "f16", H200)
    assert not attention_coop.takes(q, q, "f16", LAVAPIPE)          # no cooperative matrices
    assert not attention_coop.takes(q, q, "bf16", H200)             # its kernels compute in f16
    assert not attention_coop.takes(q, q, "f32", H200)
    assert not attention_coop.takes((2, 4, 96, 64), q, "f16", H200)      # Lq not 64 rows
    assert not attention_coop.takes(q, (2, 4, 200, 64), "f16", H200)     # Lk not 64 rows
    assert attention_coop.takes((2, 4, 256, 32), (2, 4, 256, 32), "f16", H200)
    assert not attention_coop.takes((2, 4, 256, 16), (2, 4, 256, 16), "f16", H200)
    assert not attention_coop.takes(q, q, "f16", dataclasses.replace(H200, subgroup_size=64))


@pytest.mark.parametrize("q_shape, k_shape, causal", [
    ((2, 2, 256, 64), (2, 2, 256, 64), False),
    ((1, 2, 256, 128), (1, 2, 256, 128), True),
    ((1, 2, 128, 64), (1, 2, 320, 64), True),        # fewer queries than keys
    ((1, 1, 256, 64), (1, 1, 128, 64), True)])       # more: rows that see no key
def test_the_h200_plans_f16_attention_on_the_coop_kernels(q_shape, k_shape, causal):
    """Forward and backward stay flash attention in f16 (no converts around them), planned as
    the coop forward and the backward's two passes with an f32 delta between them."""
    eqns = _eqns(q_shape, k_shape, "f16", causal, H200)
    flash = [e for e in eqns if e.prim in (flash_attention_p, flash_attention_bwd_p)]
    assert [e.prim for e in flash] == [flash_attention_p, flash_attention_bwd_p], eqns
    assert all(x.dtype == "f16" for e in flash for x in (*e.inputs, *e.outputs))
    assert not any(e.prim.name == "matmul" for e in eqns)
    b, h, lq, d = q_shape
    lk = k_shape[2]
    fwd, _ = CONTRACTS[flash_attention_p].plan(flash[0], H200)
    (launch, roles), = fwd.steps
    defs = dict(launch.defines)
    assert launch.shader == "flash_attention_coop.comp" and roles == ("q", "k", "v", "o", "lse")
    assert defs["D"] == d and defs["LSE16"] == 1 and ("CAUSAL" in defs) == causal
    assert launch.groups == (lq // (64 * defs["MR"]), b * h, 1)
    bwd, _ = CONTRACTS[flash_attention_bwd_p].plan(flash[1], H200)
    (dq, dq_roles), (dkdv, dkdv_roles) = bwd.steps
    assert (dq.shader, dkdv.shader) == ("flash_attention_coop_dq.comp",
                                        "flash_attention_coop_dkdv.comp")
    assert dq_roles[6:8] == ("dq", "delta") and dkdv_roles[5:] == ("delta", "dk", "dv")
    assert dq.groups == (lq // 64, b * h, 1) and dkdv.groups == (lk // 64, b * h, 1)
    assert [(t.role, t.size, t.dtype) for t in bwd.temps] == [("delta", b * h * lq, "float32")]


def test_a_known_zero_dlse_is_not_read():
    e = next(e for e in _eqns((1, 1, 128, 64), (1, 1, 128, 64), "f16", False, H200)
             if e.prim is flash_attention_bwd_p)
    plan, roles = attention_coop.plan_eqn(e, H200, dlse_zero=True)
    (dq, dq_roles), _ = plan.steps
    assert "dlse" not in roles and "dlse" not in dq_roles and "DLSE" not in dict(dq.defines)
    plan, roles = attention_coop.plan_eqn(e, H200)
    (dq, dq_roles), _ = plan.steps
    assert dq_roles[-1] == "dlse" and dict(dq.defines)["DLSE"] == 1 and dq.bindings == 9


def test_what_the_coop_kernels_do_not_take_runs_as_before():
    """bf16, and f16 attention at a head dim the coop kernels do not take (256), are written out
    on the H200 (matmuls on the tensor cores); f16 at 96 queries too; lavapipe's f16 attention
    is widened to f32 (converts around the f32 flash kernels)."""
    for q, dtype in (((1, 2, 256, 64), "bf16"), ((1, 2, 256, 256), "f16"),
                     ((1, 2, 96, 64), "f16")):
        assert scores_path(q, q, dtype, False, H200), (q, dtype)
        names = [e.prim.name for e in _eqns(q, q, dtype, False, H200)]
        assert "flash_attention" not in names and "matmul" in names, names
    eqns = _eqns((1, 2, 128, 64), (1, 2, 128, 64), "f16", True, LAVAPIPE)
    flash = [e for e in eqns if e.prim in (flash_attention_p, flash_attention_bwd_p)]
    assert flash and all(x.dtype == "f32" for e in flash for x in e.inputs), flash


def test_the_planner_refuses_what_the_kernels_cannot_run():
    """An f16 attention eqn at 96 queries (not whole 64-row blocks), planned for the H200:
    a clear Unsupported, not a launch that reads past its operands."""
    q = ShapeDtype((1, 1, 96, 64), "f16")
    program = vg.make_ir(lambda q, k, v: vg.nn.flash_attention(q, k, v))(q, q, q)
    e = next(e for e in program.eqns if e.prim is flash_attention_p)
    with pytest.raises(Unsupported, match="cooperative matrices"):
        attention_coop.plan_eqn(e, H200)


def _operands(b, h, lq, lk, d, seed):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float16)
            for s in ((b, h, lq, d), (b, h, lk, d), (b, h, lk, d))]


@pytest.mark.parametrize("lq, lk, d, causal", [
    (128, 128, 64, False), (128, 128, 64, True), (128, 192, 128, True), (192, 64, 64, True),
    (128, 128, 32, True)])
def test_f16_attention_gradients_match_the_interpreter(lq, lk, d, causal):
    """The loss and q, k, v's gradients on the device (the coop kernels where the device has
    cooperative matrices, else the f32 flash kernels through converts) against the interpreter
    (f32 math, results rounded to f16)."""
    args = _operands(1, 2, lq, lk, d, seed=lq + lk + d)
    fn = vg.value_and_grad(_loss(causal), argnums=(0, 1, 2))
    got = vg.jit(fn, backend="vulkan")(*args)
    want = vg.jit(fn, backend="numpy")(*args)
    for g, w in zip(vg.tree_util.tree_leaves(got), vg.tree_util.tree_leaves(want)):
        g, w = np.asarray(g, np.float32), np.asarray(w, np.float32)
        np.testing.assert_allclose(g, w, rtol=2e-2, atol=2e-2 * max(1.0, np.abs(w).max()))
    names = {s.launch.name for s in vg.jit(fn, backend="vulkan").lower(*args).lowered.steps}
    coop = {"flash_attention_coop", "flash_attention_coop_dq", "flash_attention_coop_dkdv"}
    if attention_coop.takes((1, 2, lq, d), (1, 2, lk, d), "f16", get_device().target):
        assert coop <= names, names
    else:
        assert not coop & names, names


@pytest.mark.parametrize("d", attention_coop.HEAD_DIMS)
@pytest.mark.parametrize("causal", [False, True])
def test_every_kernel_the_planner_chooses_compiles(d, causal):
    """The planner's launches compile with glslang 13 (CI has no device that runs them: the
    H200's runs are in the device test above and bench/coop_attention_bwd_probe.py)."""
    from vkgrad.runtime.shaders import compile_file
    plans = [attention_coop.plan_forward(2, 256, 192, d, causal=causal, scale=0.125),
             attention_coop.plan_forward(2, 192, 192, d, causal=causal, scale=0.125)]
    plans += [attention_coop.plan_backward(2, 256, 192, d, causal=causal, scale=0.125,
                                           dlse_zero=z) for z in (False, True)]
    launches = {(l.shader, l.defines) for p in plans for l in p.launches}
    assert len(launches) == 5                      # forward MR 2 and 1; dq with and without dlse
    for shader, defines in launches:
        assert compile_file(shader, dict(defines), target_env="vulkan1.3")[:4] == \
            b"\x03\x02\x23\x07"                     # SPIR-V's magic number


def test_a_nan_reaches_the_loss_and_the_gradients_it_touches():
    """A NaN in q makes its row's output NaN, so the loss, and every gradient element that
    reads that row (dq's row, all of dk and dv), as the interpreter computes; the other rows of
    dq stay finite (no silent zeros, no NaN where none belongs). Unmasked: under a causal mask
    the interpreter's dk = dS^T q multiplies a masked 0 by the NaN (NaN in every row of dk),
    where the kernels skip the keys the NaN's row does not see."""
    q, k, v = _operands(1, 1, 128, 128, 64, seed=3)
    q[0, 0, 5, 7] = np.nan
    fn = vg.value_and_grad(_loss(False), argnums=(0, 1, 2))
    got = vg.jit(fn, backend="vulkan")(q, k, v)
    want = vg.jit(fn, backend="numpy")(q, k, v)
    for g, w in zip(vg.tree_util.tree_leaves(got), vg.tree_util.tree_leaves(want)):
        np.testing.assert_array_equal(np.isnan(np.asarray(g)), np.isnan(np.asarray(w)))
    assert np.isnan(float(got[0]))
