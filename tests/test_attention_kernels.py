"""Flash attention forward and backward (vkgrad/lowering/attention.py, flash_attention.comp) on
the real Vulkan device (lavapipe in CI) against a float64 numpy reference.

Each case runs the forward plan, then the backward plan on the forward's own o and lse (as a
training step would). Outputs and the "delta" temp are poisoned with NaN first, so an element
a kernel forgets to write fails the check. Shapes are awkward (1, 7, 130, 257 rows; Lq != Lk
both ways; fully masked causal rows when Lq > Lk) and the scale is not 1/sqrt(D), so a swapped
operand or a mis-folded constant shows. Pipelines compile lazily on lavapipe (about a second
each), so the cases share a few tile configurations: the planner's own lavapipe tiles, plus
forced ones for the GPU's code paths (register prefetch, unrolled loops, threads per row wider
than lavapipe's 8-lane subgroups, which takes the shared-memory reduction path, the ONE_COL and
ROW_REGS variants, and the H200's D = 128 tiles, run at D = 64).
"""

from dataclasses import replace

import numpy as np
import pytest

from vkgrad.lowering.attention import (ALTERNATIVES, SUPPORTED_HEAD_DIMS, TILES, FlashTile,
                                       choose_tile, dq_partials_bound, fused_backward_planned,
                                       fused_backward_tile,
                                       plan_flash_attention, plan_flash_attention_bwd)
from kernel_runs import bind
from vkgrad.lowering.kernels import OpPlan
from vkgrad.runtime import DeviceInfo, Executable, get_device
from vkgrad.target import Target

RTOL = 1e-4     # of the sum of absolute terms (error_bounds): exp() turns an error of ~1e-7 |s| in
                # a score s into a relative error of P, seen up to 2e-5 with scores ~15 (scale 1.7)


@pytest.fixture(scope="module")
def dev():
    return get_device()


# ---------------------------------------------------------------- float64 reference

def _mask(Lq, Lk, causal):
    """True where query i may NOT attend key j (bottom-right aligned causal mask)."""
    if not causal:
        return np.zeros((Lq, Lk), bool)
    return np.arange(Lk)[None, :] > np.arange(Lq)[:, None] + (Lk - Lq)


def _probabilities(q, k, causal, scale):
    """float64 P [BH, Lq, Lk] and lse [BH, Lq]; rows with no allowed key: P = 0, lse = -inf."""
    s = scale * np.einsum("bqd,bkd->bqk", q.astype(np.float64), k.astype(np.float64))
    s = np.where(_mask(q.shape[1], k.shape[1], causal)[None], -np.inf, s)
    m = s.max(axis=-1, initial=-np.inf, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(s - m)
    l = e.sum(axis=-1, keepdims=True)
    p = np.divide(e, l, out=np.zeros_like(e), where=l > 0)
    with np.errstate(divide="ignore"):
        lse = np.log(l[..., 0]) + m[..., 0]          # log(0) = -inf for rows with no key
    return p, lse


def attention_reference(q, k, v, causal, scale):
    """float64 (o [BH, Lq, D], lse [BH, Lq]) of softmax(scale q k^T + mask) v."""
    p, lse = _probabilities(q, k, causal, scale)
    return p @ v.astype(np.float64), lse


def attention_reference_bwd(q, k, v, do, causal, scale, dlse=None):
    """float64 (dq, dk, dv) for the upstream gradients do = dL/do and dlse = dL/dlse (lse's
    cotangent: d lse_i / d s_ij = P_ij adds dlse_i P_ij to dS)."""
    p, _ = _probabilities(q, k, causal, scale)
    do64, v64 = do.astype(np.float64), v.astype(np.float64)
    dv = np.einsum("bqk,bqd->bkd", p, do64)
    dp = np.einsum("bqd,bkd->bqk", do64, v64)
    delta = (dp * p).sum(axis=-1, keepdims=True)
    if dlse is not None:
        delta = delta - dlse.astype(np.float64)[..., None]
    ds = p * (dp - delta)
    dq = scale * ds @ k.astype(np.float64)
    dk = scale * np.einsum("bqk,bqd->bkd", ds, q.astype(np.float64))
    return dq, dk, dv


# ---------------------------------------------------------------- running plans

def run_plan(dev, plan: OpPlan, inputs: dict, outputs: dict) -> dict:
    """Run `plan` with `inputs` {role: array} and `outputs` {role: elements}; outputs and temps
    start as NaN. Returns {role: flat float32 array}."""
    bufs, uploads = {}, []
    for role, arr in inputs.items():
        bufs[role] = dev.buffer(max(arr.size, 1))
        uploads.append((bufs[role], arr.reshape(-1) if arr.size else np.zeros(1, np.float32)))
    for role, size in list(outputs.items()) + [(t.role, t.size) for t in plan.temps]:
        bufs[role] = dev.buffer(max(size, 1))
        uploads.append((bufs[role], np.full(max(size, 1), np.nan, np.float32)))
    ex = Executable(dev, bind(dev, plan, bufs))
    ex.run(uploads=uploads, downloads=[bufs[r] for r in outputs])
    result = {r: bufs[r].read_staging()[:n] for r, n in outputs.items()}
    ex.release()
    return result


def operands(BH, Lq, Lk, D, seed=0):
    rng = np.random.default_rng(seed)
    f = lambda *s: rng.standard_normal(s).astype(np.float32)   # noqa: E731
    return f(BH, Lq, D), f(BH, Lk, D), f(BH, Lk, D), f(BH, Lq, D)


def run_attention(dev, BH, Lq, Lk, D, causal, scale, seed=0, info="device", dlse=None,
                  fused=None, **tiles):
    """Forward then backward on the device: (o, lse, dq, dk, dv, operands). `info` "device"
    plans for this device; None plans as for an unknown GPU (unrolled loops, prefetch).
    `fused`: the backward's path (plan_flash_attention_bwd); `tiles`: tile, bwd_tile, dq_tile,
    dkdv_tile."""
    info = dev.target if info == "device" else info
    q, k, v, do = operands(BH, Lq, Lk, D, seed)
    fwd = plan_flash_attention(BH, Lq, Lk, D, causal=causal, scale=scale, target=info,
                               tile=tiles.get("tile"))
    out = run_plan(dev, fwd, {"q": q, "k": k, "v": v}, {"o": BH * Lq * D, "lse": BH * Lq})
    o, lse = out["o"].reshape(BH, Lq, D), out["lse"].reshape(BH, Lq)
    bwd = plan_flash_attention_bwd(BH, Lq, Lk, D, causal=causal, scale=scale, target=info,
                                   fused=fused, bwd_tile=tiles.get("bwd_tile"),
                                   dq_tile=tiles.get("dq_tile"), dkdv_tile=tiles.get("dkdv_tile"))
    names = {launch.name for launch in bwd.launches}
    assert fused is None or not names or fused == bool(names & {"flash_attn_bwd",
                                                                "flash_attn_bwd_dq_sum"})
    dlse = np.zeros((BH, Lq), np.float32) if dlse is None else dlse
    g = run_plan(dev, bwd, {"q": q, "k": k, "v": v, "o": o, "lse": lse, "do": do, "dlse": dlse},
                 {"dq": BH * Lq * D, "dk": BH * Lk * D, "dv": BH * Lk * D})
    return (o, lse, g["dq"].reshape(BH, Lq, D), g["dk"].reshape(BH, Lk, D),
            g["dv"].reshape(BH, Lk, D), (q, k, v, do))


def assert_close(out, ref, bound, what):
    """|out - ref| <= RTOL * bound elementwise, where `bound` is the same sum as the reference's
    taken over absolute values (what fp32 rounding scales with: an output that is ~0 by
    cancellation, like dq when a query sees one key, may keep rounding of its terms' size)."""
    assert np.isfinite(out).all(), f"{what}: {np.isnan(out).sum()} NaN / inf (unwritten?)"
    err = np.abs(out - ref)
    bad = err > RTOL * bound + 1e-30
    assert not bad.any(), (f"{what}: {bad.sum()} elements off, worst {err.max():.3g} "
                           f"(relative to the bound {(err / (bound + 1e-30)).max():.3g})")


def error_bounds(q, k, v, do, causal, scale):
    """The reference's sums taken over absolute values, which fp32 rounding scales with: P |V|
    for o; for the gradients dS -> P (|dO| |V|^T + rowsum(|dO| P |V|)), every operand in
    absolute value (dP and delta are dot products that may cancel; their rounding does not)."""
    p, _ = _probabilities(q, k, causal, scale)
    a = lambda x: np.abs(x.astype(np.float64))   # noqa: E731
    o_abs = p @ a(v)
    dp_abs = np.einsum("bqd,bkd->bqk", a(do), a(v))
    ds = p * (dp_abs + (a(do) * o_abs).sum(axis=-1, keepdims=True))
    return (o_abs, abs(scale) * ds @ a(k), abs(scale) * np.einsum("bqk,bqd->bkd", ds, a(q)),
            np.einsum("bqk,bqd->bkd", p, a(do)))


def check_attention(dev, BH, Lq, Lk, D, causal, scale, **kw):
    o, lse, dq, dk, dv, (q, k, v, do) = run_attention(dev, BH, Lq, Lk, D, causal, scale, **kw)
    ro, rlse = attention_reference(q, k, v, causal, scale)
    rdq, rdk, rdv = attention_reference_bwd(q, k, v, do, causal, scale, kw.get("dlse"))
    bo, bdq, bdk, bdv = error_bounds(q, k, v, do, causal, scale)
    case = f"BH={BH} Lq={Lq} Lk={Lk} D={D} causal={causal} scale={scale} {sorted(kw)}"
    assert_close(o, ro, bo, "o " + case)
    np.testing.assert_array_equal(np.isneginf(lse), np.isneginf(rlse), "lse -inf rows " + case)
    fin = np.isfinite(rlse)
    lse_scale = max(np.abs(rlse[fin]).max(initial=0), 1)
    assert np.abs(lse[fin] - rlse[fin]).max(initial=0) <= 1e-5 * lse_scale, "lse " + case
    dead = np.isneginf(rlse)                     # queries that see no key: exactly zero
    assert (o[dead] == 0).all() and (dq[dead] == 0).all(), "masked rows " + case
    assert_close(dq, rdq, bdq, "dq " + case)
    assert_close(dk, rdk, bdk, "dk " + case)
    assert_close(dv, rdv, bdv, "dv " + case)
    return lse


# ---------------------------------------------------------------- cases

# The backward's two paths (plan_flash_attention_bwd): fused (delta, one kernel for dK, dV and
# the dQ slices, the dQ sum) and two kernels (dQ, dK/dV).
PATHS = pytest.mark.parametrize("fused", [True, False], ids=["fused", "two-kernel"])


@PATHS
def test_lse_cotangent_shifts_delta(dev, fused):
    """A second derivative sends a cotangent into lse too (vkgrad/primitives/attention.py): the
    delta kernel (or the dQ kernel) subtracts it from delta."""
    dlse = np.random.default_rng(5).standard_normal((2, 33)).astype(np.float32)
    check_attention(dev, 2, 33, 20, 16, True, 0.5, dlse=dlse, fused=fused)
    check_attention(dev, 1, 20, 45, 64, False, 0.5, dlse=dlse[:1, :20], fused=fused)


# (BH, Lq, Lk, D, causal, scale): every head dim, both masks, awkward lengths both ways.
CASES = [
    (2, 7, 7, 16, False, 0.5),
    (1, 33, 20, 16, True, 0.5),         # Lq > Lk: 13 fully masked rows
    (3, 130, 7, 32, False, 0.25),
    (2, 7, 130, 32, True, 0.25),        # Lq < Lk: the diagonal starts at key 123
    (1, 1, 1, 64, False, 0.3),
    (1, 1, 257, 64, True, 0.3),         # one query that sees every key
    (2, 257, 1, 64, True, 0.3),         # one key: only the last query sees it
    (3, 130, 257, 64, False, 1.7),      # large scale: peaked softmax
    (2, 257, 130, 64, True, 0.125),     # Lq > Lk: 127 fully masked rows
    (1, 130, 130, 64, True, 0.125),
    (2, 66, 33, 128, False, 0.2),
    (1, 33, 66, 128, True, 0.2),
]


@PATHS
@pytest.mark.parametrize("BH, Lq, Lk, D, causal, scale", CASES)
def test_attention(dev, BH, Lq, Lk, D, causal, scale, fused):
    lse = check_attention(dev, BH, Lq, Lk, D, causal, scale, fused=fused)
    if causal and Lq > Lk:
        assert np.isneginf(lse[:, : Lq - Lk]).all() and np.isfinite(lse[:, Lq - Lk:]).all()


# The GPU's code paths, at tiles that fit lavapipe's 32 KiB and compile fast there (LLVM's time
# grows quickly with unrolled code and live registers): unrolled step loops with register
# prefetch (target=None plans as for a GPU), blocks of 8 rows per thread (two row slots), and 16
# threads per row group, wider than lavapipe's 8-lane subgroups (the shared-memory reduction).
# The ONE_COL tiles (column tiles taking turns in one shared buffer, the H200's tiles at D = 128)
# and the ROW_REGS tiles (the forward's Q, the dQ kernel's dO in registers; dK/dV runs the
# planner's tile, as does the fused backward) at every head dim, with and without the prefetch.
# Each: (head dim, planner keywords), run on both backward paths.
def _tiles(**kw):
    return dict(tile=FlashTile(**kw), dq_tile=FlashTile(**kw), dkdv_tile=FlashTile(**kw),
                bwd_tile=FlashTile(**kw))


def _row_regs(**kw):
    return dict(tile=FlashTile(row_regs=True, **kw), dq_tile=FlashTile(row_regs=True, **kw),
                dkdv_tile=FlashTile(row_regs=True, **kw))


FORCED = {
    "gpu-style": (16, dict(info=None, **_tiles(br=16, bc=8, tx=4, always_prefetch=True))),
    "tr8": (32, _tiles(br=32, bc=16, tr=8)),
    "tx16": (64, _tiles(br=16, bc=16, tx=16, prefetch=True)),
    "one_col-gpu-style": (16, dict(info=None, **_tiles(br=16, bc=8, tx=4, one_col=True,
                                                          always_prefetch=True))),
    "one_col-tr8": (32, _tiles(br=32, bc=16, tr=8, one_col=True, unroll=0)),
    "one_col-copy": (64, _tiles(br=32, bc=16, one_col=True, prefetch=False)),
    "one_col-tx16": (128, _tiles(br=16, bc=16, tx=16, one_col=True)),
    "row_regs-gpu-style": (16, _row_regs(br=16, bc=8, tx=4, always_prefetch=True, unroll=1)),
    "row_regs-tr8": (32, _row_regs(br=32, bc=8, tr=8, unroll=0)),
    "row_regs-copy": (64, _row_regs(br=32, bc=16, tx=4, prefetch=False)),
    "row_regs-one_col": (128, _row_regs(br=32, bc=16, one_col=True)),
}


@PATHS
@pytest.mark.parametrize("name", FORCED)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("Lq, Lk", [(130, 75), (75, 130)])
def test_attention_tiles(dev, name, causal, Lq, Lk, fused):
    D, kw = FORCED[name]
    check_attention(dev, 2, Lq, Lk, D, causal, 0.3, fused=fused, **kw)


# The fused backward's own parameters (FlashTile.ktg, dq_split), each: (head dim, tile, plan
# as for this device or, None, a GPU: prefetch, unrolled steps). Several key tiles per
# workgroup (what keeps the dQ slices under the bound): the later tiles add to the slice the
# earlier ones wrote, and a head's last group may have fewer (16-key tiles: 5 at Lk = 75, 9 at
# Lk = 130). dq_split lanes sharing each dQ output (lavapipe's subgroups have 8).
FUSED = {
    "ktg2": (32, FlashTile(16, 16, ktg=2), "device"),
    "ktg3-gpu-style": (16, FlashTile(16, 8, tx=4, ktg=3, always_prefetch=True), None),
    "split2": (32, FlashTile(32, 16, dq_split=2), "device"),
    "split4-ktg2": (64, FlashTile(32, 16, dq_split=4, ktg=2), "device"),
    "split8-prefetch": (32, FlashTile(32, 8, dq_split=8, always_prefetch=True), "device"),
    "128x8-split4": (16, FlashTile(128, 8, tx=4, dq_split=4), "device"),   # 128 threads
}


@pytest.mark.parametrize("name", FUSED)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("Lq, Lk", [(75, 130), (130, 75)])
def test_fused_backward_tiles(dev, name, causal, Lq, Lk):
    D, tile, info = FUSED[name]
    check_attention(dev, 2, Lq, Lk, D, causal, 0.3, fused=True, info=info, bwd_tile=tile)


@pytest.mark.parametrize("causal", [False, True])
def test_h200_tiles_for_d128(dev, causal):
    """The tiles the planner gives the H200 at D = 128 (ONE_COL, TX 16 in the backward, Q in
    registers in the forward), as the GPU runs them (prefetch; unrolled where the tile does not
    say rolled), at D = 64: at D = 128 the backward's need 46 KiB of shared memory and lavapipe
    has 32 (planned for the device: ROW_REGS needs its subgroup size; where the device's
    subgroups are narrower than a ROW_REGS tile's TX, 16 in the dK/dV kernel, that tile runs
    with TX as wide as they are)."""
    tiles = {mode: choose_tile(mode, 128, Target.h200()) for mode in ("fwd", "dq", "dkdv", "bwd")}
    assert all(t.one_col and t.prefetch for t in tiles.values()) and tiles["fwd"].row_regs
    assert tiles["dq"].row_regs and tiles["dkdv"].row_regs and tiles["dkdv"].tx == 16
    lanes = dev.target.subgroup_size or 0
    narrower = lambda t: replace(t, tx=lanes) if lanes else replace(t, row_regs=False)
    tiles = {mode: narrower(t) if t.row_regs and t.tx > lanes else t
             for mode, t in tiles.items()}
    for fused in (True, False):
        check_attention(dev, 2, 130, 75, 64, causal, 0.3, info="device", fused=fused,
                        tile=tiles["fwd"], bwd_tile=tiles["bwd"], dq_tile=tiles["dq"],
                        dkdv_tile=tiles["dkdv"])


def test_two_dimensional_grid(dev, monkeypatch):
    """Workgroup counts past a grid dimension's limit become an (x, y) grid whose surplus groups
    leave at once. Vulkan's limit (65535) takes 70000 workgroups to reach, too slow on lavapipe,
    so the planner's grid is cut at 4 per row here: the shader's side is the same."""
    from vkgrad.lowering import attention

    def small_grid(groups):
        y = -(-groups // 4)
        return (-(-groups // y), y, 1)

    monkeypatch.setattr(attention, "grid", small_grid)
    groups = 3 * -(-130 // choose_tile("fwd", 64, dev.target).br)   # 15 on lavapipe, 9 on a GPU
    gx, gy, _ = plan_flash_attention(3, 130, 75, 64, causal=False, scale=0.3,
                                     target=dev.target).launches[0].groups
    assert gx <= 4 and gx * gy >= groups > gx * (gy - 1)          # a 2-D grid, spares < a row
    for causal in (False, True):
        check_attention(dev, 3, 130, 75, 64, causal, 0.3)


@PATHS
def test_deterministic(dev, fused):
    """The same inputs give bit-identical results: no atomics, every sum in a fixed order."""
    first = run_attention(dev, 2, 130, 257, 64, True, 0.3, fused=fused)[:5]
    again = run_attention(dev, 2, 130, 257, 64, True, 0.3, fused=fused)[:5]
    for a, b in zip(first, again):
        assert a.tobytes() == b.tobytes()


@PATHS
def test_empty_sequences(dev, fused):
    """Lk == 0: o = 0, lse = -inf, dq = 0. Lq == 0: dk = dv = 0. BH == 0: nothing to run."""
    o, lse, dq, dk, dv, _ = run_attention(dev, 2, 5, 0, 64, False, 0.3, fused=fused)
    assert (o == 0).all() and np.isneginf(lse).all() and (dq == 0).all() and dk.size == 0
    o, lse, dq, dk, dv, _ = run_attention(dev, 2, 0, 6, 64, True, 0.3, fused=fused)
    assert o.size == 0 and (dk == 0).all() and (dv == 0).all() and dk.shape == (2, 6, 64)
    assert plan_flash_attention(2, 0, 6, 64, causal=False, scale=1.0).steps == ()
    assert plan_flash_attention_bwd(0, 5, 6, 64, causal=False, scale=1.0,
                                    fused=fused).steps == ()


# ---------------------------------------------------------------- the planner alone (no device)

def _info(shared, kind="discrete GPU"):
    return Target.from_device(DeviceInfo(
        index=0, name="x", type=kind, api_version=(1, 3, 0), timestamp_period_ns=1.0,
        max_shared_memory=shared, max_workgroup_invocations=1024,
        max_storage_buffer_range=2**31, max_storage_buffers=32, timestamps=True))


def test_planner_fits_the_device():
    for shared in (49152, 32768):
        for mode in TILES:
            for D in SUPPORTED_HEAD_DIMS:
                tile = choose_tile(mode, D, _info(shared))
                assert tile.shared_bytes(mode, D) <= shared and tile.threads <= 1024
                assert tile.problem(mode, D, _info(shared)) is None
    # The H200 (48 KiB) at D = 64: the tiles its sweep chose (vkgrad/lowering/attention.py).
    gpu = _info(49152)
    assert choose_tile("fwd", 64, gpu) == FlashTile(64, 32, unroll=0)
    assert choose_tile("dq", 64, gpu) == FlashTile(64, 16)
    assert choose_tile("dkdv", 64, gpu) == FlashTile(64, 8)
    # ... whose subgroups (32 lanes) also take the row tiles in registers (HEAD_DIM_TILES).
    h200 = Target.h200()
    assert choose_tile("dq", 64, h200) == FlashTile(64, 32, one_col=True, row_regs=True)
    assert choose_tile("dkdv", 64, h200) == FlashTile(64, 16, row_regs=True)
    assert choose_tile("dkdv", 128, h200) == FlashTile(64, 16, tx=16, one_col=True,
                                                       row_regs=True)
    # lavapipe's 8-lane subgroups: not the TX 16 one
    assert not choose_tile("dkdv", 128, Target.lavapipe()).row_regs
    # ... and at D = 128 the ONE_COL tiles: 64 queries forward, 128 threads in every kernel.
    big = {mode: choose_tile(mode, 128, gpu) for mode in ("fwd", "dq", "dkdv", "bwd")}
    assert big["fwd"].br == 64 and all(t.one_col and t.threads >= 128 for t in big.values())
    assert not any(choose_tile(mode, D, gpu).one_col for mode in TILES for D in (16, 32, 64))
    # The fused backward: at D = 32 the 32 x 16 tile the H200 ran fastest (HEAD_DIM_TILES), at
    # D = 64 the dK/dV kernel's, and at D = 128 the ONE_COL tile with rolled steps.
    assert [choose_tile("bwd", D, gpu) for D in (32, 64)] == [FlashTile(32, 16), FlashTile(64, 8)]
    assert choose_tile("bwd", 128, gpu).unroll == 0 and choose_tile("bwd", 16, gpu).br == 64
    assert choose_tile("bwd", 64, cpu := _info(32768, "CPU")).br == 32
    # lavapipe: no prefetch (nothing to hide on a CPU), rolled step loops.
    assert not choose_tile("fwd", 64, cpu).prefetch
    (launch, _), = plan_flash_attention(2, 10, 10, 64, causal=False, scale=1.0, target=cpu).steps
    assert dict(launch.defines)["UNROLL_STEPS"] == 0


def test_alternatives_fit_the_h200():
    """Every tile the sweep times (bench/bench_attention.py --sweep) runs at its head dim on the
    H200 (48 KiB of shared memory per workgroup, 32-lane subgroups)."""
    for D, modes in ALTERNATIVES.items():
        assert D in SUPPORTED_HEAD_DIMS
        for mode, tiles in modes.items():
            for name, tile in tiles.items():
                assert tile.problem(mode, D, Target.h200()) is None, (D, mode, name)


def test_plan_layout():
    gpu = _info(49152)
    (fwd, roles), = plan_flash_attention(32, 1024, 1000, 64, causal=True, scale=0.125,
                                         target=gpu).steps
    assert roles == ("q", "k", "v", "o", "lse") and fwd.bindings == 5
    assert fwd.groups == (32 * 16, 1, 1)                     # BH * ceil(1024 / 64)
    assert fwd.push[:5] == (1024, 1000, 32, 16, 32 * 16) and fwd.push[7] == 1
    assert abs(fwd.push[5] - 0.125 * np.log2(np.e)) < 1e-12 and fwd.push[6] == 0.125
    # threads, BR, BC, TR, TX, PREFETCH, ALWAYS_PREFETCH, ONE_COL, ROW_REGS, KTG, DQ_SPLIT
    assert fwd.spec == (128, 64, 32, 4, 8, True, False, False, False, 1, 1)
    assert dict(fwd.defines) == {"HEAD_DIM": 64, "MODE": 0, "UNROLL_STEPS": 0}   # rolled
    bwd = plan_flash_attention_bwd(32, 1024, 1000, 64, causal=False, scale=0.125, target=gpu,
                                   fused=False)
    (dq, dq_roles), (dkdv, dkdv_roles) = bwd.steps
    assert dq_roles == ("q", "k", "v", "o", "lse", "do", "dq", "delta", "dlse")
    assert dkdv_roles == ("q", "k", "v", "lse", "do", "delta", "dk", "dv")
    assert dq.groups == (32 * 16, 1, 1)                      # 1024 queries / 64
    assert dkdv.groups == (32 * 16, 1, 1)                    # 1000 keys / 64 -> 16
    assert [(t.role, t.size, t.dtype) for t in bwd.temps] == [("delta", 32 * 1024, "float32")]
    big = plan_flash_attention(4096, 1024, 1024, 64, causal=False, scale=1.0, target=gpu)
    groups = big.launches[0].groups
    assert groups[0] <= 65535 and groups[0] * groups[1] >= 4096 * 16   # a 2-D grid


def test_fused_backward_plan():
    """The fused backward: three dispatches (delta; dK, dV and the dQ slices; the dQ sum), its
    slices [key-tile groups, BH, Lq, D] a temp, and the two kernels where they would pass
    dq_partials_bound."""
    h200 = Target.h200()
    # The LM small preset's attention (B32 H8 L256 D32): 8 key tiles of 32, 8 slices of 8 MiB.
    bwd = plan_flash_attention_bwd(256, 256, 256, 32, causal=True, scale=0.125, target=h200)
    (delta, roles0), (main, roles1), (dq_sum, roles2) = bwd.steps
    assert [delta.name, main.name, dq_sum.name] == [
        "flash_attn_bwd_delta", "flash_attn_bwd", "flash_attn_bwd_dq_sum"]
    assert roles0 == ("o", "do", "dlse", "delta")
    assert roles1 == ("q", "k", "v", "lse", "do", "delta", "dk", "dv", "dqp")
    assert roles2 == ("dqp", "dq")
    assert [dict(x.defines)["MODE"] for x in bwd.launches] == [4, 3, 5]
    assert delta.groups == (256 * 4, 1, 1)                           # 64 rows each
    assert main.groups == (256 * 8, 1, 1)                            # 32-key tiles
    assert dq_sum.groups == (256 * 256 * 8 // 64, 1, 1)              # a thread per vec4 of dq
    assert main.spec == dq_sum.spec == (64, 32, 16, 4, 8, True, False, False, False, 1, 1)
    assert main.push[3] == dq_sum.push[3] == 8                       # slices per head
    assert [(t.role, t.size) for t in bwd.temps] == [("delta", 256 * 256),
                                                     ("dqp", 8 * 256 * 256 * 32)]
    # B4 H8 L1024 D128: 32 key tiles of 32 would take 512 MiB of slices; two per workgroup 256.
    assert dq_partials_bound(h200) == 256 << 20
    (_, _), (main, _), (_, _) = plan_flash_attention_bwd(32, 1024, 1024, 128, causal=True,
                                                         scale=0.1, target=h200,
                                                         fused=True).steps
    assert main.spec[9] == 2 and main.push[3] == 16 and main.groups == (32 * 16, 1, 1)
    # ... which the planner takes only up to FUSED_BACKWARD_MAX_HEAD_DIM (32): above, the two
    # kernels with their row tiles in registers (HEAD_DIM_TILES), unless a fused tile is forced.
    for D in (64, 128):
        two = plan_flash_attention_bwd(32, 1024, 1024, D, causal=True, scale=0.1, target=h200)
        assert [x.name for x in two.launches] == ["flash_attn_bwd_dq", "flash_attn_bwd_dkdv"]
        assert all(x.spec[8] for x in two.launches)                  # ROW_REGS
        assert fused_backward_planned(32, 1024, 1024, D, h200) is None
    assert fused_backward_planned(256, 256, 256, 32, h200) == FlashTile(32, 16)
    forced = plan_flash_attention_bwd(32, 1024, 1024, 64, causal=True, scale=0.1, target=h200,
                                      bwd_tile=FlashTile(64, 8))
    assert [x.name for x in forced.launches][1] == "flash_attn_bwd"
    # B4 H8 L4096 D64: 8 per workgroup would be needed: the two kernels.
    two = plan_flash_attention_bwd(32, 4096, 4096, 64, causal=True, scale=0.1, target=h200)
    assert [x.name for x in two.launches] == ["flash_attn_bwd_dq", "flash_attn_bwd_dkdv"]
    assert fused_backward_tile(32, 4096, 4096, 64, h200) is None
    with pytest.raises(ValueError, match="dQ slices .* exceed 268435456 bytes"):
        plan_flash_attention_bwd(32, 4096, 4096, 64, causal=True, scale=0.1, target=h200,
                                 fused=True)
    # lavapipe's bound is 16 MiB (1/8 of its 128 MiB buffers).
    assert dq_partials_bound(Target.lavapipe()) == 16 << 20


def test_planner_rejects_bad_input():
    with pytest.raises(ValueError, match="16, 32, 64, 128"):
        plan_flash_attention(1, 8, 8, 48, causal=False, scale=1.0)
    with pytest.raises(ValueError, match="non-negative"):
        plan_flash_attention_bwd(1, -1, 8, 64, causal=False, scale=1.0)
    with pytest.raises(ValueError, match="shared memory"):
        plan_flash_attention(1, 8, 8, 64, causal=False, scale=1.0, target=_info(32768),
                             tile=FlashTile(64, 32))
    with pytest.raises(ValueError, match="TX"):
        plan_flash_attention(1, 8, 8, 16, causal=False, scale=1.0, tile=FlashTile(32, 32, tx=8))
    with pytest.raises(ValueError, match="no tile fits"):
        choose_tile("dkdv", 128, _info(16384))
    with pytest.raises(ValueError, match="fused backward's dQ product reads its K tile"):
        plan_flash_attention_bwd(1, 8, 8, 64, causal=False, scale=1.0, target=Target.h200(),
                                 bwd_tile=FlashTile(32, 16, row_regs=True))
    with pytest.raises(ValueError, match="key tiles per workgroup"):
        plan_flash_attention(1, 8, 8, 64, causal=False, scale=1.0, tile=FlashTile(32, 16, ktg=2))
    with pytest.raises(ValueError, match="multiple of D/4 = 32"):
        plan_flash_attention_bwd(1, 8, 8, 128, causal=False, scale=1.0, target=Target.h200(),
                                 bwd_tile=FlashTile(16, 16, tx=4))
    with pytest.raises(ValueError, match="the fused backward's"):
        plan_flash_attention(1, 8, 8, 64, causal=False, scale=1.0, tile=FlashTile(32, 16, dq_split=2))
    with pytest.raises(ValueError, match="power of two dividing BR/4 = 8"):
        plan_flash_attention_bwd(1, 8, 8, 64, causal=False, scale=1.0,
                                 bwd_tile=FlashTile(32, 16, dq_split=3))
    with pytest.raises(ValueError, match="subgroups of at least 16 lanes"):
        plan_flash_attention_bwd(1, 8, 8, 32, causal=False, scale=1.0, target=Target.lavapipe(),
                                 bwd_tile=FlashTile(64, 16, dq_split=16))
    with pytest.raises(ValueError, match="subgroups of at least TX = 8"):
        plan_flash_attention(1, 8, 8, 64, causal=False, scale=1.0, target=_info(49152),
                             tile=FlashTile(32, 16, row_regs=True))
