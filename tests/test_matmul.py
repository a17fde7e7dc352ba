"""The matmul kernel on the real Vulkan device (lavapipe in CI) against numpy in float64.

Shapes are distinct in m, k, n (a square shape hides swapped operands) and awkward (1, 7, 33,
130, 257); every transpose combination, batched with strides and broadcasts, and every tile
variant the planner can pick is run, each at a shape with ragged edges and at one that is a
multiple of its tile (the kernel then leaves out its range checks). The output buffer is
poisoned with NaN first, so an element the kernel never writes fails the check.
"""

import itertools

import numpy as np
import pytest

from vkgrad.lowering.launch import dispatch
from vkgrad.lowering.matmul import VARIANTS, Tile, choose_variant, plan_matmul
from vkgrad.runtime import DeviceInfo, Executable, get_device

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
    launch = plan_matmul(batch, m, k, n, ta, tb, sa, sb, dev.info, **plan)
    bufs = (dev.buffer(a.size), dev.buffer(b.size), dev.buffer(max(batch * m * n, 1)))
    ex = Executable(dev, [dispatch(dev, launch, bufs)])
    ex.run(uploads=[(bufs[0], a), (bufs[1], b),
                    (bufs[2], np.full(bufs[2].size, np.nan, np.float32))],
           downloads=[bufs[2]])
    out = bufs[2].read_staging()[: batch * m * n].reshape(batch, m, n)
    ref = np.empty((batch, m, n))
    for i in range(batch):
        ai = a[i * sa: i * sa + m * k].astype(np.float64).reshape((k, m) if ta else (m, k))
        bi = b[i * sb: i * sb + k * n].astype(np.float64).reshape((n, k) if tb else (k, n))
        ref[i] = (ai.T if ta else ai) @ (bi.T if tb else bi)
    ex.release()
    return out, ref, launch


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
    return DeviceInfo(index=0, name="x", type=kind, api_version=(1, 3, 0), timestamp_period_ns=1.0,
                      max_shared_memory=49152, max_workgroup_invocations=1024,
                      max_storage_buffer_range=2**31, timestamps=True)


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
    assert choose_variant(8, 512, 512, gpu) == "medium"
    assert choose_variant(1, 256, 1024, gpu) == "small"     # the MLP step's shapes
    assert choose_variant(1, 256, 1024, cpu) == "large"     # lavapipe: big tiles, little padding
    assert choose_variant(1, 256, 10, cpu) == "cpu"
    assert plan_matmul(1, 4096, 4096, 4096, False, False, 0, 0, gpu).spec[14] is False


def test_planner_rejects_bad_input():
    gpu = _info("discrete GPU")
    for bad in [dict(batch=0), dict(m=-1), dict(k=2.5), dict(a_batch_stride=-4)]:
        args = dict(batch=1, m=4, k=4, n=4, transpose_a=False, transpose_b=False,
                    a_batch_stride=0, b_batch_stride=0) | bad
        with pytest.raises(ValueError):
            plan_matmul(**args, device_info=gpu)
    with pytest.raises(ValueError, match="variant"):
        plan_matmul(1, 4, 4, 4, False, False, 0, 0, gpu, variant="huge")
    with pytest.raises(ValueError, match="not valid"):
        plan_matmul(1, 4, 4, 4, False, False, 0, 0, gpu, tile=Tile(64, 64, 8, 6, 8))
    with pytest.raises(ValueError, match="shared memory"):
        plan_matmul(1, 4, 4, 4, False, False, 0, 0, gpu, tile=Tile(128, 128, 32, 8, 8))
