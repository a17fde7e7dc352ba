"""Horizontal fusion of reductions (fuse_horizontal_reductions,
lowering/fusion/horizontal_reductions.py; the kernel's plan_horizontal_reduce in
lowering/kernels.py): independent reductions of one op and any shapes as one dispatch, and a
second one for the members split over workgroups.

The planner alone (no device) for lavapipe and the H200, the pass's groups and binding limit,
the values on Vulkan (lavapipe) against the interpreter, the same bits twice, the dispatch
counts of training steps that clip by the global norm, and what the dump shows."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from child_env import child_env

import vkgrad as vg
import vkgrad.numpy as vnp
from examples import train_steps as ts
from vkgrad.lowering.kernels import (HORIZONTAL_GROUP_ELEMENTS, MEMBER_FIELDS, PUSH_FIELDS,
                                     plan_horizontal_reduce)
from vkgrad.pipeline import Options, disabled_passes, run_stages
from vkgrad.primitives.compiler import fused_p
from vkgrad.target import Target

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RNG = np.random.default_rng(20)
TARGETS = {"lavapipe": Target.lavapipe(), "h200": Target.h200()}
# leaves of a gradient: odd sizes, a scalar, one split over workgroups (> 8192 elements)
LEAF_SHAPES = [(24, 32), (32,), (7,), (), (3, 5, 9), (1, 1), (1000,), (33, 65), (20000,)]


def leaves(shapes=LEAF_SHAPES):
    return [RNG.standard_normal(s).astype(np.float32) for s in shapes]


def stage(fn, args, name, target=None, disable=""):
    program = vg.make_ir(fn)(*args)
    return run_stages(program, name, Options(target=target or TARGETS["lavapipe"],
                                             disabled=disabled_passes(disable)))[name]


def groups(fused):
    return [e for e in fused.eqns if e.prim is fused_p and
            e.params.get("kind") == "horizontal_reduce"]


def on_vulkan(fn, *args):
    """fn jitted on Vulkan (no fallback to the interpreter) and its plan."""
    jitted = vg.jit(fn)
    low = jitted.lower(*args)
    assert low.backend == "vulkan" and low.fallback_reason is None, low.fallback_reason
    out = jitted(*args)
    return [np.asarray(o) for o in (out if isinstance(out, (list, tuple)) else [out])], low


# ---------------------------------------------------------------- the planner, no device

def table(launch):
    """The generated member table of a launch: one dict per row."""
    fields = MEMBER_FIELDS + PUSH_FIELDS
    rows = []
    for line in launch.hooks.splitlines():
        if "return Params(" in line:
            args = line.split("Params(")[1].rstrip(");").split(",")
            rows.append(dict(zip(fields, (int(a.strip().rstrip("u")) for a in args))))
    return rows


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_plan_covers_every_member_once(target):
    views = [(1, 768, 1), (1, 7, 1), (1, 300000, 1), (4, 5000, 3), (3, 9, 5), (9, 4, 1),
             (0, 5, 3), (2, 0, 2)]
    plan = plan_horizontal_reduce("sum", views, target=TARGETS[target])
    first, final = plan.launches
    assert (first.name, final.name) == ("reduce_sum_horizontal", "reduce_sum_horizontal_final")
    rows = table(first)
    assert [r["member"] for r in rows] == [0, 1, 2, 3, 4, 5, 7]   # member 6 has no output
    g = 0
    for r in rows:                       # consecutive ranges of workgroups, one per member
        assert r["first"] == g
        g += r["total"]
    assert first.groups[0] * first.groups[1] >= g
    split = [r for r in rows if r["S"] > 1]
    assert [r["member"] for r in split] == [2, 3]  # only members with large tiles split
    for r in split:
        assert r["chunk"] * min(r["TB"], r["B"]) <= HORIZONTAL_GROUP_ELEMENTS
    # the second launch reduces exactly the split members' partials, which do not overlap
    second = table(final)
    assert [r["member"] for r in second] == [2, 3]
    s2, s3 = split[0]["S"], split[1]["S"]
    assert [r["off"] for r in second] == [r["off"] for r in split] == [0, s2]
    assert plan.temps[0].size == s2 + 4 * s3 * 3
    assert [r["R"] for r in second] == [r["S"] for r in split]
    assert first.bindings == 3 and final.bindings == 2
    assert dict(first.defines)["MEMBERS"] == 7 and dict(first.defines)["SPLIT_OUT"] == 1


def test_plan_without_splits_is_one_launch():
    plan = plan_horizontal_reduce("max", [(1, 100, 1), (5, 3, 2)])
    assert len(plan.steps) == 1 and plan.temps == ()
    assert plan.steps[0][1] == ("x", "out")
    assert dict(plan.launches[0].defines)["SPLIT_OUT"] == 0
    assert plan_horizontal_reduce("sum", [(0, 3, 1)]).steps == ()
    with pytest.raises(ValueError, match="reduce op 'prod'"):
        plan_horizontal_reduce("prod", [(1, 3, 1)])


def global_norm_of_many(*xs):
    return vg.optim.global_norm(list(xs))


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_groups_fit_the_binding_limit(target):
    """40 leaves: one group on the H200; groups of at most 32 bindings on lavapipe."""
    t = TARGETS[target]
    xs = leaves([(i + 1, 3) for i in range(40)])
    fused = stage(global_norm_of_many, xs, "fused", t)
    gs = groups(fused)
    assert sum(len(g.outputs) for g in gs) == 40
    if target == "h200":
        assert len(gs) == 1
    else:
        assert len(gs) == 3
        for g in gs:                     # its operands, results and the kernel's own three
            assert 3 + len(g.inputs) + len(g.outputs) <= t.max_storage_buffers


def test_the_pass_groups_only_independent_reductions_of_one_op():
    def f(a, b, c, d):
        s = vnp.sum(a * a)
        t = vnp.sum(b * s)               # reads s: not in s's group
        return s, t, vnp.sum(c, axis=0), vnp.max(d, axis=1), vnp.max(a, axis=0)
    fused = stage(f, leaves([(5, 6), (7,), (4, 3), (3, 8)]), "fused")
    gs = groups(fused)
    ops = sorted(tuple(sorted({b.prim.name for b in g.params["body"].eqns
                               if not b.prim.fusible})) for g in gs)
    assert ops == [("reduce_max",), ("reduce_sum",)]
    members = {len(g.outputs) for g in gs}
    assert members == {2}                # sum(a*a) with sum(c); the two maxes


# ---------------------------------------------------------------- on Vulkan

def test_sums_and_maxes_of_many_shapes_against_the_interpreter():
    xs = leaves()

    def f(*xs):
        sq = [vnp.sum(x * x) for x in xs]
        rows = [vnp.max(x, axis=-1) for x in xs if x.ndim]     # a max group, rows
        cols = [vnp.sum(xs[0], axis=0), vnp.sum(xs[4], axis=(0, 1)), vnp.sum(xs[7], axis=0)]
        return sq + rows + cols

    got, low = on_vulkan(f, *xs)
    want = vg.run_program(vg.make_ir(f)(*xs), *xs)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=1e-5)
    # each group and its second launch (for the 20000-element leaf), and the scalar's square
    names = [s.launch.name for s in low.lowered.steps]
    assert sorted(names) == ["fused_0", "reduce_max_horizontal", "reduce_max_horizontal_final",
                             "reduce_sum_horizontal", "reduce_sum_horizontal_final"]
    assert low.stats()["kernels"]["reduce_sum[horizontal]"] == 2


def test_epilogues_empty_and_zero_length_members():
    """Means (a scale in the store), a reduction over an axis of length 0 (the identity) and
    an empty result beside ordinary members."""
    xs = leaves([(6, 10), (3, 0), (0, 4), (100,), (2, 3, 4)])

    def f(a, b, c, d, e):
        return (vnp.mean(a, axis=1), vnp.sum(b, axis=1), vnp.sum(c, axis=1),
                vnp.mean(d * 2.0), vnp.sum(e, axis=1) + 1.0)

    got, low = on_vulkan(f, *xs)
    want = vg.run_program(vg.make_ir(f)(*xs), *xs)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=1e-5)
    assert groups(low.stages["fused"])


def test_global_norm_is_the_same_bits_twice():
    xs = leaves([(300, 70), (70,), (70, 9), (9,), ()])
    got1, low = on_vulkan(global_norm_of_many, *xs)
    got2, _ = on_vulkan(global_norm_of_many, *xs)
    assert got1[0].tobytes() == got2[0].tobytes()
    again = vg.jit(global_norm_of_many)(*xs)
    assert np.asarray(again).tobytes() == got1[0].tobytes()
    ref = np.sqrt(sum(np.sum(x.astype(np.float64) ** 2) for x in xs))
    np.testing.assert_allclose(got1[0], ref, rtol=1e-5)
    assert len(groups(low.stages["fused"])) == 1


# ---------------------------------------------------------------- training steps

def clipped_mlp_step():
    opt = vg.optim.chain(vg.optim.clip_by_global_norm(1.0), vg.optim.adam(1e-2))

    def step(params, opt_state, x, y):
        loss, grads = vg.value_and_grad(ts.mlp_loss)(params, x, y)
        updates, opt_state = opt.update(grads, opt_state, params)
        return vg.optim.apply_updates(params, updates), opt_state, loss
    return opt, step


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_clipped_mlp_step_dispatches(target):
    """The six leaves' sums of squares (and the loss's sum) are one dispatch: the MLP step's
    plan drops by about the leaf count."""
    opt, step = clipped_mlp_step()
    params, x, y = ts.mlp_data([24, 32, 16, 10], 16)
    args = (params, opt.init(params), x, y)
    on = stage(step, args, "plan", TARGETS[target])
    off = stage(step, args, "plan", TARGETS[target], "fuse_horizontal_reductions")
    assert len(off.steps) - len(on.steps) >= 6 - 1
    names = [s.launch.name for s in on.steps]
    assert names.count("reduce_sum_horizontal") == 1


def test_clipped_mlp_step_trains_the_same_on_vulkan():
    opt, step = clipped_mlp_step()
    params, x, y = ts.mlp_data([24, 32, 16, 10], 16)
    results = {}
    for disable in ("", "fuse_horizontal_reductions"):
        p, s = params, opt.init(params)
        j = vg.jit(step, disable_passes=disable)
        losses = []
        for _ in range(3):
            p, s, loss = j(p, s, x, y)
            losses.append(float(loss))
        results[disable] = losses, [np.asarray(a) for a in vg.tree_util.tree_leaves(p)]
    (l_on, p_on), (l_off, p_off) = results.values()
    np.testing.assert_allclose(l_on, l_off, rtol=1e-5, atol=1e-6)
    for a, b in zip(p_on, p_off):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def test_tiny_lm_step_dispatches():
    """examples/train_lm.py's tiny transformer step (clipping at global norm 1.0): its 28
    leaves' sums of squares become one group on the H200 (two dispatches: the largest
    leaves are split), the bias gradients' column sums another."""
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    import train_lm
    cfg = train_lm.make_config("transformer", "tiny", steps=10)
    step, _ = train_lm.make_steps(cfg)
    params = train_lm.init_params(cfg)
    x, y = train_lm.train_batch(train_lm.load_text()[0], cfg, 0)
    program = vg.make_ir(step)(params, train_lm.optimizer(cfg).init(params), x, y)
    n_leaves = len(vg.tree_util.tree_leaves(params))
    for target, most_groups in (("h200", 2), ("lavapipe", 4)):
        plans = [run_stages(program, "plan", Options(target=TARGETS[target],
                                                     disabled=disabled_passes(d)))["plan"]
                 for d in ("", "fuse_horizontal_reductions")]
        on, off = (len(p.steps) for p in plans)
        fused = plans[0].program
        gs = groups(fused)
        assert len(gs) <= most_groups
        assert off - on >= n_leaves - 2 * len(gs), (target, on, off)


# ---------------------------------------------------------------- the dump

def test_dump_shows_the_group(tmp_path):
    src = tmp_path / "norm.py"
    src.write_text(textwrap.dedent("""\
        import vkgrad.numpy as vnp

        def norm(a, b, c):
            return [vnp.sum(x * x) for x in (a, b, c)]
        """))
    args = ["--args", "f32[24,32], f32[7], f32[20000]"]

    def dump(stage):
        out = subprocess.run([sys.executable, "-m", "vkgrad", "dump", f"{src}:norm", *args,
                              "--stage", stage], cwd=ROOT, capture_output=True, text=True,
                             env=child_env())
        assert out.returncode == 0, out.stderr
        return out.stdout

    fused = dump("fused")
    assert "fused[kind=horizontal_reduce]" in fused
    assert fused.count("reduce_sum[") == 3
    plan = dump("plan")
    assert "reduce_sum_horizontal " in plan and "reduce_sum_horizontal_final" in plan
    assert "fused[horizontal_reduce]: mul, reduce_sum" in plan
    assert "f32[24,32] f32[7] f32[20000] -> f32[] f32[] f32[]" in plan
    glsl = dump("glsl")
    assert "the members' table" in glsl and "Params vkg_member(uint g)" in glsl
    assert "float vkg_loadm_b0(uint m, uint e)" in glsl
