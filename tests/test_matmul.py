"""The matmul kernel on the real Vulkan device (lavapipe in CI) against numpy in float64.

Shapes are distinct in m, k, n (a square shape hides swapped operands) and awkward (1, 7, 33,
130, 257); every transpose combination, batched with strides and broadcasts, and every tile
variant the planner can pick is run, each at a shape with ragged edges and at one that is a
multiple of its tile (the kernel then leaves out its range checks). The output buffer is
poisoned with NaN first, so an element the kernel never writes fails the check.

Split-K (`plan_matmul_op`: partial products over K slices into a temp, then a sum) is forced
with `splits=` on lavapipe, where the planner itself never picks it; its temps are poisoned too.
"""

import itertools

import numpy as np
import pytest

from kernel_runs import bind

from vkgrad.lowering.matmul import (VARIANTS, Tile, choose_splits, choose_variant, plan_matmul,
                                    plan_matmul_op, split_count)
from vkgrad.runtime import DeviceInfo, Executable, get_device
from vkgrad.target import Target

TRANSPOSES = list(itertools.product((False, True), repeat=2))
RTOL = 1e-5


@pytest.fixture(scope="module")
def dev():
    return get_device()


@pytest.fixture(scope="module")
def rng():
    return np.random.default_rng(1234)


def run_matmul(dev, rng, batch, m, k, n, ta=False, tb=False, sa=None, sb=None, **plan):
    """Run one matmul on the device; return (result [batch, m, n], float64 reference, launch)."""
    sa = m * k if sa is None else sa
    sb = k * n if sb is None else sb
    a = rng.standard_normal(max((batch - 1) * sa + m * k, 1)).astype(np.float32)
    b = rng.standard_normal(max((batch - 1) * sb + k * n, 1)).astype(np.float32)
    launch = plan_matmul(batch, m, k, n, ta, tb, sa, sb, dev.target, **plan)
    bufs = (dev.buffer(a.size), dev.buffer(b.size), dev.buffer(max(batch * m * n, 1)))
    ex = Executable(dev, [dev.dispatch(launch, bufs)])
    ex.run(uploads=[(bufs[0], a), (bufs[1], b),
                    (bufs[2], np.full(bufs[2].size, np.nan, np.float32))],
           downloads=[bufs[2]])
    out = bufs[2].read_staging()[: batch * m * n].reshape(batch, m, n)
    ref = reference(a, b, batch, m, k, n, ta, tb, sa, sb)
    ex.release()
    return out, ref, launch


def reference(a, b, batch, m, k, n, ta, tb, sa, sb):
    """float64 C[i] = op(A[i]) @ op(B[i]) from the flat, batch-strided operands."""
    ref = np.empty((batch, m, n))
    for i in range(batch):
        ai = a[i * sa: i * sa + m * k].astype(np.float64).reshape((k, m) if ta else (m, k))
        bi = b[i * sb: i * sb + k * n].astype(np.float64).reshape((n, k) if tb else (k, n))
        ref[i] = (ai.T if ta else ai) @ (bi.T if tb else bi)
    return ref


def run_matmul_op(dev, rng, batch, m, k, n, ta=False, tb=False, sa=None, sb=None, target=None,
                  **plan):
    """Like run_matmul, through plan_matmul_op (roles a, b, c and temps); returns the OpPlan."""
    sa = m * k if sa is None else sa
    sb = k * n if sb is None else sb
    a = rng.standard_normal(max((batch - 1) * sa + m * k, 1)).astype(np.float32)
    b = rng.standard_normal(max((batch - 1) * sb + k * n, 1)).astype(np.float32)
    op = plan_matmul_op(batch, m, k, n, ta, tb, sa, sb, target or dev.target, **plan)
    bufs = {"a": dev.buffer(a.size), "b": dev.buffer(b.size),
            "c": dev.buffer(max(batch * m * n, 1))}
    uploads = [(bufs["a"], a), (bufs["b"], b),
               (bufs["c"], np.full(bufs["c"].size, np.nan, np.float32))]
    for t in op.temps:
        assert t.dtype == "float32"
        bufs[t.role] = dev.buffer(t.size)
        uploads.append((bufs[t.role], np.full(t.size, np.nan, np.float32)))
    ex = Executable(dev, bind(dev, op, bufs))
    ex.run(uploads=uploads, downloads=[bufs["c"]])
    out = bufs["c"].read_staging()[: batch * m * n].reshape(batch, m, n)
    ref = reference(a, b, batch, m, k, n, ta, tb, sa, sb)
    ex.release()
    return out, ref, op


def n_splits(op) -> int:
    """K slices of an OpPlan's matmul launch (1: no split-K)."""
    spec = op.launches[0].spec
    return spec[16] if len(spec) > 16 else 1


def assert_close(out, ref, what):
    assert np.isfinite(out).all(), f"{what}: unwritten (NaN) or non-finite elements"
    scale = max(np.linalg.norm(ref), 1e-30)
    err = np.linalg.norm(out - ref) / scale
    assert err < RTOL, f"{what}: relative error {err:.2e}"


@pytest.mark.parametrize("ta,tb", TRANSPOSES)
@pytest.mark.parametrize("m,k,n", [(7, 33, 130), (130, 7, 33), (33, 257, 1), (1, 130, 257),
                                   (257, 1, 7)])
def test_shapes_planner(dev, rng, m, k, n, ta, tb):
    out, ref, launch = run_matmul(dev, rng, 1, m, k, n, ta, tb)
    assert_close(out, ref, f"{launch.name} m={m} k={k} n={n} ta={ta} tb={tb}")


@pytest.mark.parametrize("ta,tb", TRANSPOSES)
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_variant(dev, rng, variant, ta, tb):
    t = VARIANTS[variant]
    # Ragged in every dimension (several tiles plus a partial one), then a whole multiple of the
    # tile, where the range checks are compiled out.
    for m, k, n in [(t.bm + 33, 2 * t.bk * t.ks + 7, t.bn + 5),
                    (2 * t.bm, 3 * t.bk * t.ks, t.bn)]:
        out, ref, launch = run_matmul(dev, rng, 1, m, k, n, ta, tb, variant=variant)
        assert launch.name == f"matmul_{variant}"
        assert_close(out, ref, f"{variant} m={m} k={k} n={n} ta={ta} tb={tb}")


@pytest.mark.parametrize("ta,tb", TRANSPOSES)
def test_batched_strides_and_broadcast(dev, rng, ta, tb):
    b, m, k, n = 3, 33, 20, 12
    # Packed batch entries (vec4 loads where the layout allows).
    out, ref, _ = run_matmul(dev, rng, b, m, k, n, ta, tb)
    assert_close(out, ref, f"packed ta={ta} tb={tb}")
    # Padded strides that are not multiples of 4 (scalar loads).
    out, ref, _ = run_matmul(dev, rng, b, m, k, n, ta, tb, sa=m * k + 3, sb=k * n + 5)
    assert_close(out, ref, f"padded ta={ta} tb={tb}")
    # One operand broadcast over the batch (stride 0), either side.
    out, ref, _ = run_matmul(dev, rng, b, m, k, n, ta, tb, sa=0)
    assert_close(out, ref, f"broadcast A ta={ta} tb={tb}")
    out, ref, _ = run_matmul(dev, rng, b, m, k, n, ta, tb, sb=0)
    assert_close(out, ref, f"broadcast B ta={ta} tb={tb}")


def test_batched_variant_broadcast(dev, rng):
    """A K-sliced GPU variant, batched, with B broadcast (as a shared weight is)."""
    out, ref, launch = run_matmul(dev, rng, 2, 40, 70, 72, False, True, sb=0, variant="small")
    assert launch.groups[2] == 2
    assert_close(out, ref, "small batched broadcast")


def test_custom_tiles(dev, rng):
    """Tile options no default variant uses: warp arrangement, phased prefetch, 4 K slices
    (with and without the branch-free prefetch), each ragged and exact."""
    for tile in (Tile(64, 64, 8, 8, 8, warp_x=8), Tile(64, 64, 16, 8, 8, phases=2),
                 Tile(32, 32, 8, 4, 4, ks=4), Tile(32, 32, 8, 4, 4, ks=4, always_prefetch=True)):
        for m, k, n in [(70, 45, 66), (64, 96, 64)]:
            out, ref, launch = run_matmul(dev, rng, 2, m, k, n, True, False, tile=tile)
            assert launch.name == "matmul_custom"
            assert_close(out, ref, f"{tile} m={m} k={k} n={n}")


def test_empty_k_gives_zeros(dev, rng):
    out, ref, _ = run_matmul(dev, rng, 2, 5, 0, 6)
    np.testing.assert_array_equal(out, np.zeros((2, 5, 6), np.float32))


# ---- the planner alone (no device) ----

def _info(kind):
    return Target.from_device(DeviceInfo(
        index=0, name="x", type=kind, api_version=(1, 3, 0), timestamp_period_ns=1.0,
        max_shared_memory=49152, max_workgroup_invocations=1024,
        max_storage_buffer_range=2**31, max_storage_buffers=32, timestamps=True))


def test_planner_layout():
    l = plan_matmul(2, 300, 50, 70, True, False, 300 * 50, 0, _info("discrete GPU"))
    t = VARIANTS[choose_variant(2, 300, 70, _info("discrete GPU"))]
    assert l.bindings == 3 and l.shader == "matmul.comp"
    assert l.groups == (-(-70 // t.bn), -(-300 // t.bm), 2)
    assert l.push == (300, 70, 50, 300 * 50, 0)
    # spec: threads, BM, BN, BK, TM, TN, TRANS_A, TRANS_B, VEC_A, VEC_B, VEC_C, KS, WARP_X,
    # PHASES, CHECK, ALWAYS_PREFETCH
    assert len(l.spec) == 16
    assert l.spec[:6] == (t.threads, t.bm, t.bn, t.bk, t.tm, t.tn)
    assert l.spec[6:11] == (True, False, True, False, False)   # A [50][300]: m % 4 == 0
    assert l.spec[11:14] == (t.ks, t.warp_x, t.phases)
    assert l.spec[14] is True                                  # ragged: range checks on
    assert l.spec[15] == t.always_prefetch


def test_planner_picks_by_shape_and_device():
    gpu, cpu = _info("discrete GPU"), _info("CPU")
    assert choose_variant(1, 4096, 4096, gpu) == "large"
    assert choose_variant(1, 1024, 1024, gpu) == "medium"
    assert choose_variant(8, 512, 512, gpu) == "large"      # 128 workgroups: one per SM
    assert choose_variant(1, 256, 1024, gpu) == "small"     # the MLP step's shapes
    assert choose_variant(1, 256, 1024, cpu) == "large"     # lavapipe: big tiles, little padding
    assert choose_variant(1, 256, 10, cpu) == "wide64"
    assert plan_matmul(1, 4096, 4096, 4096, False, False, 0, 0, gpu).spec[14] is False


def test_a_tall_k_weight_gradient_takes_the_large_tile_split_for_two_waves():
    """[1024, 256] = A^T B over 8,192 tokens: the large tile, K cut into 16 slices (16 blocks x
    16 = 256 workgroups, two a multiprocessor of the H200), summed by a second dispatch; a
    product whose K is not tall, and lavapipe, keep the rule by output size."""
    from vkgrad.lowering.matmul import plan_matmul_op, tall_k
    from vkgrad.target import Target
    h200, lava = Target.h200(), Target.lavapipe()
    (mm, _), (add, _) = plan_matmul_op(1, 1024, 8192, 256, True, False, 0, 0, h200).steps
    assert (mm.name, mm.groups) == ("matmul_large_splitk16", (2, 8, 16))
    assert add.name == "reduce_sum"
    assert tall_k(1, 256, 8192, 768, h200) and not tall_k(1, 784, 256, 1024, h200)
    assert not tall_k(1, 1024, 8192, 256, lava) and not tall_k(2, 256, 8192, 256, h200)
    assert [l.name for l, _ in plan_matmul_op(1, 784, 256, 1024, True, False, 0, 0,
                                              h200).steps] == ["matmul_medium"]


# (b, m, k, n, ta, tb) -> (the matmul launch, its workgroups) on the H200. The transformer
# block's and the LM's products as bench_matmul.py names them, then shapes the H200 already ran
# at 0.9x cuBLAS or better, whose plans must not move.
H200_PLANS = {
    # large would run 384 workgroups, 1.45 waves: large64, 768 of half the block
    "tf_qkv": ((1, 4096, 512, 1536, False, False), "matmul_large64", (24, 32, 1)),
    "lm_qkv": ((1, 8192, 256, 768, False, False), "matmul_large64", (12, 64, 1)),
    # N = 64: medium, a 64-wide block (large64 ran 29.2 TFLOP/s there, medium 34.1)
    "tf_pv": ((32, 1024, 1024, 64, False, False), "matmul_medium", (1, 8, 32)),
    # 128 workgroups of large (medium before); half a wave over K >= 1024: two K slices
    "tf_qkv_dX": ((1, 4096, 1536, 512, False, True), "matmul_large_splitk2", (4, 32, 2)),
    "tf_out": ((1, 4096, 2048, 512, False, False), "matmul_large_splitk2", (4, 32, 2)),
    "lm_down": ((1, 8192, 1024, 256, False, False), "matmul_large_splitk2", (2, 64, 2)),
    "lm_qkv_dX": ((1, 8192, 768, 256, False, True), "matmul_large", (2, 64, 1)),
    # tall K: one wave of large's K slices (48-64 blocks: the transformer's weight gradients)
    "tf_qkv_dW": ((1, 512, 4096, 1536, True, False), "matmul_large_splitk5", (12, 4, 5)),
    "tf_fc_dW": ((1, 512, 4096, 2048, True, False), "matmul_large_splitk4", (16, 4, 4)),
    "tf_out_dW": ((1, 2048, 4096, 512, True, False), "matmul_large_splitk4", (4, 16, 4)),
    "lm_qkv_dW": ((1, 256, 8192, 768, True, False), "matmul_large_splitk22", (6, 2, 22)),
    "lm_down_dW": ((1, 1024, 8192, 256, True, False), "matmul_large_splitk16", (2, 8, 16)),
    # unchanged
    "cube4096": ((1, 4096, 4096, 4096, False, False), "matmul_large", (32, 32, 1)),
    "cube2048": ((1, 2048, 2048, 2048, False, False), "matmul_large", (16, 16, 1)),
    "cube1024": ((1, 1024, 1024, 1024, False, False), "matmul_medium", (16, 8, 1)),
    "tf_fc": ((1, 4096, 512, 2048, False, False), "matmul_large", (16, 32, 1)),
    "tf_scores": ((32, 1024, 64, 1024, False, False), "matmul_large", (8, 8, 32)),
    "mlp_x@w1": ((1, 256, 784, 1024, False, False), "matmul_small", (16, 8, 1)),
    "mlp_dw2": ((1, 1024, 256, 1024, True, False), "matmul_medium", (16, 8, 1)),
    "mlp_dh": ((1, 256, 1024, 1024, False, True), "matmul_small", (16, 8, 1)),
    "mlp_dw1": ((1, 784, 256, 1024, True, False), "matmul_medium", (16, 7, 1)),
    "mlp_h@w3": ((1, 256, 1024, 10, False, False), "matmul_small_splitk16", (1, 8, 16)),
}


@pytest.mark.parametrize("label", sorted(H200_PLANS))
def test_h200_plans_of_the_model_shapes(label):
    (b, m, k, n, ta, tb), name, groups = H200_PLANS[label]
    mm = plan_matmul_op(b, m, k, n, ta, tb, m * k, k * n, Target.h200()).launches[0]
    assert (mm.name, mm.groups) == (name, groups)


def test_h200_plans_of_the_model_shapes_run_here(dev, rng):
    """The H200's new plans at small sizes of the same kind, on lavapipe: medium on N = 64,
    large64 between one and two waves, tall-K slices of large over a short K."""
    gpu = _info("discrete GPU")
    for b, m, k, n, ta, tb, name in [(64, 130, 70, 64, False, False, "matmul_medium"),
                                     (1, 2560, 40, 2048, True, True, "matmul_large64")]:
        out, ref, op = run_matmul_op(dev, rng, b, m, k, n, ta, tb, target=gpu)
        assert op.launches[0].name == name, (b, m, k, n)
        assert_close(out, ref, f"{name} b={b} m={m} k={k} n={n}")
    out, ref, op = run_matmul_op(dev, rng, 1, 256, 2100, 250, True, False, target=gpu)
    assert op.launches[0].name == "matmul_large_splitk8"
    assert_close(out, ref, "tall-K large split")


def test_planner_rejects_bad_input():
    gpu = _info("discrete GPU")
    for bad in [dict(batch=0), dict(m=-1), dict(k=2.5), dict(a_batch_stride=-4)]:
        args = dict(batch=1, m=4, k=4, n=4, transpose_a=False, transpose_b=False,
                    a_batch_stride=0, b_batch_stride=0) | bad
        with pytest.raises(ValueError):
            plan_matmul(**args, target=gpu)
    with pytest.raises(ValueError, match="variant"):
        plan_matmul(1, 4, 4, 4, False, False, 0, 0, gpu, variant="huge")
    with pytest.raises(ValueError, match="not valid"):
        plan_matmul(1, 4, 4, 4, False, False, 0, 0, gpu, tile=Tile(64, 64, 8, 6, 8))
    with pytest.raises(ValueError, match="shared memory"):
        plan_matmul(1, 4, 4, 4, False, False, 0, 0, gpu, tile=Tile(128, 128, 32, 8, 8))


# ---- split-K on the device (forced: lavapipe's planner never picks it) ----

@pytest.mark.parametrize("ta,tb", TRANSPOSES)
@pytest.mark.parametrize("variant", [None, "small"])
@pytest.mark.parametrize("m,k,n,splits", [(70, 300, 10, 4), (33, 257, 1, 3), (1, 130, 12, 5)])
def test_split_k(dev, rng, m, k, n, splits, variant, ta, tb):
    """Skinny outputs, every layout, the planner's lavapipe tile and the GPU's K-sliced one."""
    out, ref, op = run_matmul_op(dev, rng, 1, m, k, n, ta, tb, splits=splits, variant=variant)
    assert n_splits(op) == splits and len(op.steps) == 2
    assert [r for _, r in op.steps] == [("a", "b", "partials"), ("partials", "c")]
    assert op.temps[0].role == "partials" and op.temps[0].size == splits * m * n
    assert_close(out, ref, f"split-K {splits} {variant} m={m} k={k} n={n} ta={ta} tb={tb}")


@pytest.mark.parametrize("ta,tb", TRANSPOSES)
def test_split_k_batched(dev, rng, ta, tb):
    b, m, k, n = 3, 33, 200, 10
    for sa, sb, what in [(None, None, "packed"), (m * k + 3, k * n + 5, "padded"),
                         (0, None, "broadcast A"), (None, 0, "broadcast B")]:
        for variant in (None, "small"):
            out, ref, op = run_matmul_op(dev, rng, b, m, k, n, ta, tb, sa=sa, sb=sb, splits=3,
                                         variant=variant)
            assert n_splits(op) == 3 and op.launches[0].groups[2] == 3 * b
            assert_close(out, ref, f"split-K {what} {variant} ta={ta} tb={tb}")


def test_split_k_awkward_k(dev, rng):
    """K slices are whole steps of BK*KS (32 for `small`): k not a multiple of the slices or of
    the step, k shorter than splits * step (fewer slices than asked), one step (no split)."""
    for k, asked, got in [(1000, 3, 3), (100, 7, 4), (40, 4, 2), (33, 8, 2), (20, 4, 1),
                          (7, 3, 1)]:
        out, ref, op = run_matmul_op(dev, rng, 2, 37, k, 10, True, False, splits=asked,
                                     variant="small")
        assert n_splits(op) == got and len(op.steps) == (2 if got > 1 else 1), (k, asked)
        assert_close(out, ref, f"split-K k={k} splits={asked}")


def test_split_k_exact_tiles_and_baked(dev, rng):
    """Tile-multiple shapes (range checks compiled out; `large` also prefetches branch-free,
    clamped to its slice), and the baked (defines) form of a split launch."""
    for variant, (m, k, n) in [("large", (128, 512, 128)), ("small", (64, 256, 64)),
                               ("wide64", (64, 96, 64)), ("large64", (256, 384, 64))]:
        for ta, tb in [(False, False), (True, True)]:
            out, ref, op = run_matmul_op(dev, rng, 1, m, k, n, ta, tb, splits=4,
                                         variant=variant)
            assert op.launches[0].spec[14] is False, "exact shape: no range checks"
            assert_close(out, ref, f"split-K exact {variant} ta={ta} tb={tb}")
    out, ref, op = run_matmul_op(dev, rng, 2, 40, 300, 12, False, True, splits=5,
                                 variant="small", bake=True)
    assert ("MM_SPLITS", 5) in op.launches[0].defines and op.launches[0].spec == ()
    assert_close(out, ref, "split-K baked")


def test_split_k_as_planned_for_the_h200(dev, rng):
    """The plans the planner makes for the H200 (MLP's last layer, forward and dW), run here."""
    gpu = _info("discrete GPU")
    for m, k, n, ta in [(256, 1024, 10, False), (1024, 256, 10, True)]:
        out, ref, op = run_matmul_op(dev, rng, 1, m, k, n, ta, False, target=gpu)
        assert n_splits(op) > 1
        assert_close(out, ref, f"H200 plan m={m} k={k} n={n}")


# ---- split-K planning (no device) ----

def test_planner_split_k_on_gpu_only():
    gpu, cpu = _info("discrete GPU"), _info("CPU")
    # The MLP step's skinny products: h@W3 (8 workgroups of `small`), dW3 = h^T g (32).
    for args in [(1, 256, 1024, 10, False, False, 0, 0), (1, 1024, 256, 10, True, False, 0, 0)]:
        op = plan_matmul_op(*args, gpu)
        s = n_splits(op)
        assert s > 1 and len(op.steps) == 2, args
        mm, red = op.launches
        assert mm.name.startswith("matmul_small_splitk")
        assert op.steps[0][1] == ("a", "b", "partials") and op.steps[1][1] == ("partials", "c")
        assert red.shader == "reduce.comp" and red.name == "reduce_sum"
        _, m, _, n = args[:4]
        assert op.temps == (op.temps[0],) and op.temps[0].size == s * m * n
        assert op.temps[0].dtype == "float32"
        # about one workgroup per SM, each K slice at least two k steps
        assert 64 <= mm.groups[0] * mm.groups[1] * mm.groups[2] <= 160
        assert 4 <= s <= 16
        # lavapipe keeps one launch
        assert len(plan_matmul_op(*args, cpu).steps) == 1
    assert n_splits(plan_matmul_op(1, 256, 1024, 10, False, False, 0, 0, gpu)) == 16
    assert n_splits(plan_matmul_op(1, 1024, 256, 10, True, False, 0, 0, gpu)) == 4
    # Enough workgroups already, or too little K to be worth a second dispatch: one launch,
    # exactly what plan_matmul gives (so the pipelines of unsplit matmuls are unchanged).
    for args in [(1, 256, 1024, 1024, False, False, 0, 0),   # 128 workgroups of `small`
                 (1, 1024, 256, 1024, True, False, 0, 0),
                 (1, 256, 10, 1024, False, True, 0, 0),      # dh = g W3^T: k = 10
                 (1, 256, 128, 10, False, False, 0, 0),      # 4 k steps
                 (1, 4096, 4096, 4096, False, False, 0, 0)]:
        op = plan_matmul_op(*args, gpu)
        assert op.steps == ((plan_matmul(*args, gpu), ("a", "b", "c")),) and op.temps == ()
        assert len(op.launches[0].spec) == 16
    # splits=1 turns it off; batched outputs count all their workgroups
    assert len(plan_matmul_op(1, 256, 1024, 10, False, False, 0, 0, gpu, splits=1).steps) == 1
    assert len(plan_matmul_op(16, 256, 1024, 10, False, False, 0, 0, gpu).steps) == 1
    assert choose_splits(4, 256, 1024, 10, VARIANTS["small"], gpu) > 1


def test_planner_split_count_never_leaves_a_slice_empty():
    t = VARIANTS["small"]
    step = t.bk * t.ks
    for k in range(1, 40 * step, 7):
        steps = -(-k // step)
        for asked in range(1, 70):
            s = split_count(k, t, asked)
            assert 1 <= s <= min(asked, steps)
            if s > 1:
                per = -(-steps // s)                    # the shader's slice, in steps
                assert per == -(-steps // asked) or asked > steps
                assert (s - 1) * per < steps            # the last slice is not empty
                plan_matmul(1, 8, k, 8, False, False, 0, 0, variant="small", splits=s)


def test_planner_split_k_rejects_bad_input():
    gpu = _info("discrete GPU")
    with pytest.raises(ValueError, match="splits"):
        plan_matmul_op(1, 4, 64, 4, False, False, 0, 0, gpu, splits=0)
    with pytest.raises(ValueError, match="empty"):
        plan_matmul(1, 4, 64, 4, False, False, 0, 0, gpu, variant="small", splits=3)
    with pytest.raises(ValueError, match="32-bit"):
        plan_matmul(1, 2**16, 256, 2**14, False, False, 0, 0, gpu, variant="small", splits=4)
