"""vkgrad's convolutions (forward, input gradient, weight gradient; fp32) against torch cuDNN
(TF32 off) and JAX (precision HIGHEST), and a ResNet-18 training step against JAX's, measured
in interleaved rounds in one process.

On the NVIDIA device machine, from the repo root (with .gpu carried):
    source bench/gpu_env.sh && python3 bench/bench_conv.py [--rounds 5] [--quick]
Prints JSON (and writes $OUT/conv.json, or ./conv.json without $OUT; --direct: the same
with lowering/conv.py's CIN_RELAYOUT off, into conv_direct.json).

Convolutions (NCHW / OIHW, 'SAME' padding): ResNet's 3x3 at N32 C64 56x56, C128 28x28, C256
14x14, each at stride 1 and 2; a depthwise 3x3 (N32 C256 28x28, groups = C); Mamba's causal
conv1d (k = 4, depthwise, N8 C1024 L2048). Each as three programs: y = conv(x, w);
dx = vjp over x of g; dw = vjp over w of g.
  vkgrad: GPU time of the whole jitted program (vg.profile: Vulkan timestamps, median of 10
          runs), so dx counts its kernel flip and dw its transposes and split-K sum;
  torch:  F.conv2d / F.conv1d and aten.convolution_backward (one output mask each), CUDA
          events around each call, median of ITERS;
  JAX:    jax.lax.conv_general_dilated (and jax.vjp), jitted, ITERS calls then one
          block_until_ready, per call.
The ratio reported is peer time / vkgrad time (>= 1: vkgrad faster); the issue's target is
0.8x cuDNN or better for forward + both gradients (the sum) at the ResNet shapes.

ResNet-18 step (vg.nn.resnet at its defaults, 32x32 synthetic images, 10 classes, batch 64,
SGD with momentum 0.9, batch norm in training mode): vkgrad's jitted step (parameters,
statistics and optimizer state donated) against the same network and step in JAX
(bench/bench_conv.py's jax_resnet, op for op), rounds of STEPS steps with one sync at the end.
The target: 1.0x JAX or better. Both sides print their first loss (same init: same loss).

The step's own convolutions (bench_conv.STEP_CONVS, named r18_<what>_c<C>_<spatial>: the stem,
the 3x3 stride-1 and stride-2 convolutions and the 1x1 stride-2 shortcuts at 32x32 to 4x4, batch
64, 'SAME' padding as vg.nn.conv's) run with --only r18_ (or their names); the default runs the
ImageNet shapes above.

Every round alternates vkgrad, torch, JAX; medians and ranges over rounds are reported.
--sweep: also times vkgrad with each kernel variant forced (vkgrad/lowering/conv.py's
GEMM_VARIANTS, conv_gemm.comp's tiles, and "<name>@<g>": split-K aiming at g 256-thread
workgroups on the tiles that split; see sweep_variants), per conv and mode ("sweep_us";
"sweep_kernels_us" the same per kernel name, so the convolution kernels' own time shows apart
from transposes and split-K sums), so the planner's choice can follow the measurement; and
the forward and input gradient on the Winograd path with its GEMM on each matmul tile
("winograd.<tile>", sweep_winograd); --variants a,b sweeps only those. The JSON is
rewritten after each conv.
--quick: small shapes and a tiny ResNet (runs on lavapipe, to check the script itself).
--check: every conv's relative error against the float64 interpreter ("errors_vs_float64",
else only for small ones): a planner path switched on with --set checked at the real shapes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import vkgrad as vg  # noqa: E402
import vkgrad.nn as nn  # noqa: E402
from vkgrad import lax  # noqa: E402
from vkgrad.lowering import conv as conv_lowering  # noqa: E402
from vkgrad.lowering import kernels as kernel_planners  # noqa: E402
from vkgrad.lowering import winograd  # noqa: E402

from peers import cuda_torch  # noqa: E402

# (name, N, C, spatial, O, kernel, stride, groups)
CONVS = [
    ("c64_56_s1", 32, 64, (56, 56), 64, 3, 1, 1),
    ("c64_56_s2", 32, 64, (56, 56), 64, 3, 2, 1),
    ("c128_28_s1", 32, 128, (28, 28), 128, 3, 1, 1),
    ("c128_28_s2", 32, 128, (28, 28), 128, 3, 2, 1),
    ("c256_14_s1", 32, 256, (14, 14), 256, 3, 1, 1),
    ("c256_14_s2", 32, 256, (14, 14), 256, 3, 2, 1),
    ("depthwise_c256_28", 32, 256, (28, 28), 256, 3, 1, 256),
    ("conv1d_k4_c1024_l2048", 8, 1024, (2048,), 1024, 4, 1, 1024),
]
QUICK = [("c8_9_s1", 2, 8, (9, 9), 16, 3, 1, 1), ("c8_9_s2", 2, 8, (9, 9), 8, 3, 2, 1),
         ("c32_9_s2", 2, 32, (9, 9), 32, 3, 2, 1),           # conv_gemm.comp's sizes
         ("depthwise_c8_16", 8, 8, (16, 16), 8, 3, 1, 8), ("conv1d_k4", 2, 8, (33,), 8, 4, 1, 8)]
ITERS = 20
MODES = ("fwd", "dx", "dw")
STEP_PREFIX = "r18_"          # the ResNet-18 step's own convolutions (step_convs), 'SAME' padded


def step_convs(widths=(64, 128, 256, 512), blocks=(2, 2, 2, 2), batch=64, size=32, channels=3,
               prefix=STEP_PREFIX):
    """The distinct convolutions of vg.nn.resnet's network (init_resnet's structure) at this
    batch and image size, as CONVS rows named <prefix><what><C>_<spatial>: "stem", "s1"
    (3x3 stride 1), "s2" (3x3 stride 2, C -> 2C), "proj" (the 1x1 stride-2 shortcut). Each runs
    as often in the step as the network has such layers; the sweep times each once."""
    rows, cin = {}, channels
    rows[f"{prefix}stem_c{channels}_{size}"] = (batch, channels, size, widths[0], 3, 1)
    cin = widths[0]
    for s, (width, n) in enumerate(zip(widths, blocks)):
        for b in range(n):
            stride = 2 if s > 0 and b == 0 else 1
            kind = "s2" if stride == 2 else "s1"
            rows.setdefault(f"{prefix}{kind}_c{cin}_{size}", (batch, cin, size, width, 3, stride))
            if cin != width or stride == 2:
                rows.setdefault(f"{prefix}proj_c{cin}_{size}", (batch, cin, size, width, 1,
                                                                stride))
            size //= stride
            cin = width
            rows.setdefault(f"{prefix}s1_c{width}_{size}", (batch, width, size, width, 3, 1))
    return [(name, n, c, (hw, hw), o, k, s, 1) for name, (n, c, hw, o, k, s) in rows.items()]


STEP_CONVS = step_convs()                          # --only r18_ (a name ending in _: a prefix)
QUICK_STEP_CONVS = step_convs((32, 64), (1, 1), 2, 16, prefix="r18q_")   # --quick --only r18q_


def padding(case):
    """Explicit (lo, hi) pads: causal for 1-D; the step's convolutions as vg.nn.conv's 'SAME'
    (lax.padtype_to_pads: a stride-2 3x3 at an even size pads (0, 1)); else (k-1)//2, k//2."""
    name, _, _, spatial, _, k, s, _ = case
    if len(spatial) == 1:                      # causal: the window ends at the output
        return ((k - 1, 0),)
    if name.startswith(("r18_", "r18q_")):
        return tuple(lax.padtype_to_pads(spatial, (k,) * len(spatial), (s,) * len(spatial),
                                         "SAME"))
    return tuple(((k - 1) // 2, k // 2) for _ in spatial)


def operands(case, rng):
    name, n, c, spatial, o, k, s, g = case
    x = rng.standard_normal((n, c) + spatial).astype(np.float32)
    w = (rng.standard_normal((o, c // g) + (k,) * len(spatial)) / np.sqrt(c // g * k ** len(spatial))
         ).astype(np.float32)
    return x, w


def out_shape(case):
    name, n, c, spatial, o, k, s, g = case
    pads = padding(case)
    return (n, o) + tuple((d + lo + hi - k) // s + 1 for d, (lo, hi) in zip(spatial, pads))


def flops(case):
    name, n, c, spatial, o, k, s, g = case
    return 2.0 * np.prod(out_shape(case)) * (c // g) * k ** len(spatial)


# ------------------------------------------------------------------------------- vkgrad

def vkgrad_programs(case):
    _, _, _, spatial, _, _, s, g = case
    strides, pads = (s,) * len(spatial), padding(case)
    conv = lambda x, w: lax.conv_general_dilated(x, w, strides, pads, feature_group_count=g)  # noqa
    return {"fwd": (lambda x, w, gy: conv(x, w)),
            "dx": (lambda x, w, gy: vg.vjp(lambda x: conv(x, w), x)[1](gy)[0]),
            "dw": (lambda x, w, gy: vg.vjp(lambda w: conv(x, w), w)[1](gy)[0])}


def time_vkgrad(fns, args, kernels=None):
    """{mode: GPU us of the program}; `kernels`, a dict, gets {mode: {kernel: us}} (a kernel
    name's dispatches summed: the convolution kernels apart from transposes and split-K sums)."""
    out = {}
    for m, f in fns.items():
        prof = vg.profile(vg.jit(f, backend="vulkan"), *args, runs=10)
        out[m] = prof.total_us
        if kernels is not None:
            per = kernels.setdefault(m, {})
            for row in prof.rows:
                per[row.kernel] = per.get(row.kernel, 0.0) + row.us
    return out


GEMM_KERNELS = ("conv", "conv_gemm")     # what the forced variants change
# --set's modules: the convolution planner, the reduction planner (batch-norm statistics,
# split-K sums) and the Winograd path's
SET_MODULES = {"conv": conv_lowering, "kernels": kernel_planners, "winograd": winograd}


# split-K targets the sweep tries (in 256-thread workgroups: lowering/conv.py's
# SPLIT_TARGET_THREADS / 256), on the tiles that split: "<tile>@<groups>"
SPLIT_SWEEP = (132, 528, 1056)
SPLIT_TILES = ("gemm_large", "gemm_f64w", "gemm_f64")
DIRECT_TILES = ("gemm_f64", "gemm_large", "gemm_64x192", "gemm_128x96")
FORCED_SPLITS = (("gemm_large", 2), ("gemm_large", 3), ("gemm_64x192", 2), ("gemm_128x96", 2),
                 ("gemm_f64", 2), ("gemm_f64", 4), ("gemm_medium", 2), ("gemm_medium", 4),
                 ("gemm_small", 2), ("gemm_small", 4))   # the last five: the step's 8x8, 4x4


def plan_key(programs, args):
    """What a variant's programs dispatch (kernel, workgroups, defines, push constants): two
    labels with the same key run the same kernels, so the sweep times the first only."""
    return tuple((s.launch.name, s.launch.groups, s.launch.defines, s.launch.push)
                 for f in programs.values()
                 for s in vg.jit(f, backend="vulkan").lower(*args).lowered.steps)


def sweep_variants(case, args, names=None):
    """({variant: {mode: us}}, {variant: {mode: {kernel: us}}}) with every convolution of the
    programs forced to that variant: conv_gemm.comp's (GEMM_VARIANTS; a convolution that
    kernel cannot run takes conv.comp's choice), these also as "<name>@<g>": split-K aiming at
    g 256-thread workgroups (SPLIT_SWEEP), as "<name>.cin": channels innermost in k
    whatever the window (a weight gradient's: the output gradient's spatial size), and as
    "<name>.direct": with channels innermost, w read in place (lowering/conv.py's
    CIN_RELAYOUT off: no conv_relayout dispatch, 4 scalar loads a slot; "<name>.cin.direct"
    both), and as
    "<name>/s<n>": K split in n slices whatever the workgroups (FORCED_SPLITS: a forward's
    waves against the split sum's pass); below
    GEMM_MIN_FEATURES features per group also conv.comp's (VARIANTS) and the GEMM tiles as
    "<name>.worder" (k in w's storage order wherever the planner would put channels
    innermost). Depthwise convolutions whose weight gradient sums in workgroups:
    sweep_depthwise. Nothing for programs with no GEMM convolution; `names` restricts the
    variants. A label that plans what an earlier one did (plan_key) gets its times, and
    {"same_as": that label} for its kernels."""
    programs = vkgrad_programs(case)
    planned = {s.launch.name for f in programs.values()
               for s in vg.jit(f, backend="vulkan").lower(*args).lowered.steps}
    if planned & {"conv_depthwise_split", "conv_depthwise_reduce"}:
        return sweep_depthwise(case, args, names)
    if not planned & set(GEMM_KERNELS):
        return {}, {}
    saved = {k: getattr(conv_lowering, k) for k in
             ("choose_variant", "CIN_MAX_WINDOW", "CIN_TILES", "SPLIT_TARGET_THREADS",
              "SPLIT_TARGET_TILE_THREADS", "CIN_RELAYOUT", "choose_splits", "WGRAD_WAVE_GROUPS",
              "WINOGRAD_MIN_CHANNELS", "WINOGRAD_WGRAD_MIN_CHANNELS")}
    o, g = case[4], case[7]
    # conv.comp's tiles ran 1.2-7x slower than the best GEMM tile at ResNet's 64-256 features
    # (the 2026-12-01 sweep, BENCHMARKS.md), and w's k order (".worder") was measured there on
    # every GEMM tile: neither is timed again where the GEMM kernel runs
    gemm = o // g >= conv_lowering.GEMM_MIN_FEATURES
    window, threads = saved["CIN_MAX_WINDOW"], saved["SPLIT_TARGET_THREADS"]
    cin = saved["CIN_TILES"]
    variants = [(v, window, cin, threads) for v in conv_lowering.GEMM_VARIANTS] + \
        [(f"{v}@{n}", window, cin, n * 256) for v in SPLIT_TILES for n in SPLIT_SWEEP] + \
        [(v + ".cin", 1 << 30, cin, threads) for v in SPLIT_TILES] + \
        [(v + ".cin.direct", 1 << 30, cin, threads) for v in SPLIT_TILES] + \
        [(v + ".direct", window, cin, threads) for v in DIRECT_TILES] + \
        [(f"{v}/s{n}", window, cin, threads) for v, n in FORCED_SPLITS]
    if not gemm:
        variants += [(v, window, cin, threads) for v in conv_lowering.VARIANTS]
        variants += [(v + ".worder", 0, cin, threads) for v in conv_lowering.GEMM_VARIANTS]
    out, kernels, seen = {}, {}, {}
    try:
        for label, cin_window, cin_tiles, split_threads in variants:
            if names and label not in names:
                continue
            for k, v in saved.items():
                setattr(conv_lowering, k, v)
            name = label.split(".")[0].split("@")[0].split("/")[0]
            conv_lowering.choose_variant = lambda og, m, k=0, name=name: name
            # the forced tile for every convolution: no wave rule, no Winograd path
            conv_lowering.WGRAD_WAVE_GROUPS = 0
            conv_lowering.WINOGRAD_MIN_CHANNELS = conv_lowering.WINOGRAD_WGRAD_MIN_CHANNELS = \
                1 << 30
            conv_lowering.CIN_MAX_WINDOW = cin_window
            conv_lowering.CIN_TILES = cin_tiles
            conv_lowering.SPLIT_TARGET_THREADS = split_threads
            conv_lowering.CIN_RELAYOUT = not label.endswith(".direct")
            if "/s" in label:
                n = int(label.split("/s")[1])
                conv_lowering.choose_splits = lambda *a, n=n, **k: n
            if "@" in label:             # the label's target for every tile
                conv_lowering.SPLIT_TARGET_TILE_THREADS = {}
            programs = vkgrad_programs(case)                     # new plans
            if ".cin" in label:              # only a weight gradient has such a window
                programs = {"dw": programs["dw"]}
            key = plan_key(programs, args)
            if key in seen:
                out[label], kernels[label] = out[seen[key]], {"same_as": seen[key]}
                continue
            seen[key], kernels[label] = label, {}
            out[label] = time_vkgrad(programs, args, kernels[label])
    finally:
        for k, v in saved.items():
            setattr(conv_lowering, k, v)
    return out, kernels


WINOGRAD_GEMMS = ("large", "large64", "medium")    # lowering/matmul.py's VARIANTS


def sweep_winograd(case, args, names=None):
    """({label: {mode: us}}, {label: {mode: {kernel: us}}}) for the forward and input gradient
    on the Winograd path (lowering/winograd.py, switched on whatever WINOGRAD_MIN_CHANNELS
    says) with its batched GEMM on each matmul tile: "winograd.<tile>" (WINOGRAD_GEMMS), and
    "winograd" with the matmul planner's choice. Nothing for convolutions it does not run."""
    _, n, c, spatial, o, k, s, g = case
    if not winograd.applies((n, c) + spatial, (o, c, k, k), (s,) * len(spatial),
                            (1,) * len(spatial), (1,) * len(spatial), g, 0, 0):
        return {}, {}
    saved = conv_lowering.WINOGRAD_MIN_CHANNELS, winograd.GEMM_VARIANT
    out, kernels = {}, {}
    try:
        conv_lowering.WINOGRAD_MIN_CHANNELS = 1
        for variant in (None,) + WINOGRAD_GEMMS:
            label = "winograd" + (f".{variant}" if variant else "")
            if names and label not in names:
                continue
            winograd.GEMM_VARIANT = variant
            programs = {m: f for m, f in vkgrad_programs(case).items() if m != "dw"}
            kernels[label] = {}
            out[label] = time_vkgrad(programs, args, kernels[label])
    finally:
        conv_lowering.WINOGRAD_MIN_CHANNELS, winograd.GEMM_VARIANT = saved
    return out, kernels


DW_SPLIT_SWEEP = (132, 264, 528, 1056)


def sweep_depthwise(case, args, names=None):
    """sweep_variants for a depthwise convolution whose weight gradient sums in workgroups
    (lowering/conv_depthwise.py): "dw_split@<g>", the split form aiming at g workgroups, and
    "dw_reduce", a workgroup per weight (the form before it)."""
    from vkgrad.lowering import conv_depthwise
    saved = {k: getattr(conv_depthwise, k) for k in ("SPLIT_TARGET_GROUPS", "SPLIT_MAX_OUTPUTS")}
    variants = [(f"dw_split@{n}", n, saved["SPLIT_MAX_OUTPUTS"]) for n in DW_SPLIT_SWEEP]
    variants.append(("dw_reduce", saved["SPLIT_TARGET_GROUPS"], 0))
    out, kernels = {}, {}
    try:
        for label, groups, max_outputs in variants:
            if names and label not in names:
                continue
            conv_depthwise.SPLIT_TARGET_GROUPS = groups
            conv_depthwise.SPLIT_MAX_OUTPUTS = max_outputs
            kernels[label] = {}
            out[label] = time_vkgrad({"dw": vkgrad_programs(case)["dw"]}, args, kernels[label])
    finally:
        for k, v in saved.items():
            setattr(conv_depthwise, k, v)
    return out, kernels


# ------------------------------------------------------------------------------- torch

def torch_programs(torch, case, x, w, gy):
    import torch.nn.functional as F
    _, _, _, spatial, _, _, s, g = case
    pads = padding(case)
    dev = lambda a: torch.from_numpy(a).cuda()   # noqa: E731
    tx, tw, tg = dev(x), dev(w), dev(gy)
    nd = len(spatial)
    torch_pad = [lo for lo, _ in pads]
    if any(lo != hi for lo, hi in pads):        # torch pads symmetrically: pad x first
        tx = F.pad(tx, [p for lo, hi in reversed(pads) for p in (lo, hi)])
        torch_pad = [0] * nd
    conv = F.conv1d if nd == 1 else F.conv2d
    fwd = lambda: conv(tx, tw, stride=s, padding=torch_pad, groups=g)   # noqa: E731

    def bwd(mask):
        return lambda: torch.ops.aten.convolution_backward(
            tg, tx, tw, None, [s] * nd, torch_pad, [1] * nd, False, [0] * nd, g, mask)
    return {"fwd": fwd, "dx": bwd([True, False, False]), "dw": bwd([False, True, False])}


def time_torch(torch, fns):
    out = {}
    for m, f in fns.items():
        f()
        torch.cuda.synchronize()
        times = []
        for _ in range(ITERS):
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            f()
            e1.record()
            torch.cuda.synchronize()
            times.append(e0.elapsed_time(e1) * 1000.0)
        out[m] = statistics.median(times)
    return out


# ------------------------------------------------------------------------------- JAX

def get_jax():
    try:
        import jax
    except ImportError:
        return None
    if not any(d.platform == "gpu" for d in jax.devices()):
        return None
    jax.config.update("jax_default_matmul_precision", "highest")
    return jax


def jax_programs(jax, case):
    _, _, _, spatial, _, _, s, g = case
    strides, pads = (s,) * len(spatial), padding(case)
    hi = jax.lax.Precision.HIGHEST
    conv = lambda x, w: jax.lax.conv_general_dilated(  # noqa: E731
        x, w, strides, pads, feature_group_count=g, precision=hi)
    return {"fwd": jax.jit(lambda x, w, gy: conv(x, w)),
            "dx": jax.jit(lambda x, w, gy: jax.vjp(lambda x: conv(x, w), x)[1](gy)[0]),
            "dw": jax.jit(lambda x, w, gy: jax.vjp(lambda w: conv(x, w), w)[1](gy)[0])}


def time_jax(fns, args):
    out = {}
    for m, f in fns.items():
        f(*args).block_until_ready()
        t0 = time.perf_counter()
        for _ in range(ITERS):
            r = f(*args)
        r.block_until_ready()
        out[m] = (time.perf_counter() - t0) * 1e6 / ITERS
    return out


# ------------------------------------------------------------------------------- ResNet-18

def vkgrad_resnet_step():
    def loss_fn(weights, stats, x, y):
        logits, stats = nn.resnet(weights, stats, x, training=True)
        return nn.cross_entropy(logits, y), stats

    opt = vg.optim.sgd(0.05, momentum=0.9)

    def step(weights, stats, opt_state, x, y):
        (loss, stats), grads = vg.value_and_grad(loss_fn, has_aux=True)(weights, stats, x, y)
        updates, opt_state = opt.update(grads, opt_state, weights)
        return vg.optim.apply_updates(weights, updates), stats, opt_state, loss

    return opt, vg.jit(step, donate_argnums=(0, 1, 2), backend="vulkan")


def jax_resnet(jax, weights, stats, x, training):
    """vg.nn.resnet in JAX, op for op (NCHW / OIHW)."""
    jnp = jax.numpy
    hi = jax.lax.Precision.HIGHEST

    def conv_bn(p, st, h, s):
        h = jax.lax.conv_general_dilated(h, p["conv"]["w"], (s, s), "SAME", precision=hi)
        mean, var = jnp.mean(h, (0, 2, 3)), jnp.var(h, (0, 2, 3))
        new = {"mean": 0.9 * st["bn"]["mean"] + 0.1 * mean, "var": 0.9 * st["bn"]["var"] + 0.1 * var}
        inv = p["bn"]["scale"] / jnp.sqrt(var + 1e-5)
        return ((h - mean[:, None, None]) * inv[:, None, None] + p["bn"]["bias"][:, None, None],
                {"bn": new})

    new = {"stages": []}
    h, new["stem"] = conv_bn(weights["stem"], stats["stem"], x, 1)
    h = jax.nn.relu(h)
    for si, (ps, ss) in enumerate(zip(weights["stages"], stats["stages"])):
        outs = []
        for b, (p, st) in enumerate(zip(ps, ss)):
            s = 2 if si > 0 and b == 0 else 1
            y, sa = conv_bn(p["a"], st["a"], h, s)
            y, sb = conv_bn(p["b"], st["b"], jax.nn.relu(y), 1)
            nst = {"a": sa, "b": sb}
            if "proj" in p:
                h, nst["proj"] = conv_bn(p["proj"], st["proj"], h, s)
            h = jax.nn.relu(y + h)
            outs.append(nst)
        new["stages"].append(outs)
    logits = jnp.mean(h, (2, 3)) @ weights["head"]["w"] + weights["head"]["b"]
    return logits, new


def jax_resnet_step(jax):
    jnp = jax.numpy

    def loss_fn(weights, stats, x, y):
        logits, stats = jax_resnet(jax, weights, stats, x, True)
        logp = jax.nn.log_softmax(logits, -1)
        return -jnp.mean(jnp.take_along_axis(logp, y[:, None], 1)), stats

    def step(weights, stats, mom, x, y):
        (loss, stats), grads = jax.value_and_grad(loss_fn, has_aux=True)(weights, stats, x, y)
        mom = jax.tree_util.tree_map(lambda m, g: 0.9 * m + g, mom, grads)
        weights = jax.tree_util.tree_map(lambda w, m: w - 0.05 * m, weights, mom)
        return weights, stats, mom, loss

    return jax.jit(step, donate_argnums=(0, 1, 2))


def resnet_rounds(args, jax, quick):
    widths, blocks, batch = ((8, 16), (1, 1), 4) if quick else ((64, 128, 256, 512), (2, 2, 2, 2), 64)
    weights, stats = nn.init_resnet(np.random.default_rng(0), 3, 10, widths, blocks)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((batch, 3, 32, 32)).astype(np.float32)
    y = rng.integers(0, 10, batch).astype(np.int32)
    opt, step = vkgrad_resnet_step()
    vk_state = [vg.device_put(t) for t in (weights, stats, opt.init(weights))]
    xd, yd = vg.device_put(x), vg.device_put(y)
    t0 = time.perf_counter()
    *vk_state, loss = step(*vk_state, xd, yd)
    first = {"vkgrad": float(loss), "vkgrad_compile_s": time.perf_counter() - t0}
    if jax is not None:
        jstep = jax_resnet_step(jax)
        js = [jax.tree_util.tree_map(jax.numpy.asarray, t) for t in (weights, stats)]
        js.append(jax.tree_util.tree_map(jax.numpy.zeros_like, js[0]))
        jx, jy = jax.numpy.asarray(x), jax.numpy.asarray(y)
        t0 = time.perf_counter()
        *js, jloss = jstep(*js, jx, jy)
        first["jax"], first["jax_compile_s"] = float(jloss), time.perf_counter() - t0
    per = {"vkgrad": [], "jax": []}
    for _ in range(args.rounds):
        t0 = time.perf_counter()
        for _ in range(args.steps):
            *vk_state, loss = step(*vk_state, xd, yd)
        float(loss)
        per["vkgrad"].append((time.perf_counter() - t0) * 1e3 / args.steps)
        if jax is not None:
            t0 = time.perf_counter()
            for _ in range(args.steps):
                *js, jloss = jstep(*js, jx, jy)
            float(jloss)
            per["jax"].append((time.perf_counter() - t0) * 1e3 / args.steps)
    out = {"widths": widths, "blocks": blocks, "batch": batch, "first_loss": first,
           "ms_per_step": {k: summary(v) for k, v in per.items() if v},
           "vkgrad_kernels": step_kernels(step, (*vk_state, xd, yd))}
    if per["jax"]:
        out["jax_over_vkgrad"] = statistics.median(per["jax"]) / statistics.median(per["vkgrad"])
    return out


def step_kernels(step, args, top=300):
    """The step's GPU time by kernel family (vg.profile: the launch name without its number,
    so fused_3 and fused_7 are "fused"; a fused kernel also by its primitives) and its `top`
    dearest dispatches: what besides the convolutions costs."""
    prof = vg.profile(step, *args, runs=5)
    family, fused = {}, {}
    for r in prof.rows:
        name = r.kernel.rstrip("0123456789").rstrip("_")
        family[name] = family.get(name, 0.0) + r.us
        if name == "fused":
            fused[r.primitives] = fused.get(r.primitives, 0.0) + r.us
    rows = sorted(prof.rows, key=lambda r: -r.us)[:top]
    return {"total_us": prof.total_us, "dispatches": len(prof.rows),
            "by_family_us": dict(sorted(family.items(), key=lambda kv: -kv[1])),
            "fused_by_primitives_us": dict(sorted(fused.items(), key=lambda kv: -kv[1])[:30]),
            "top": [[r.kernel, r.primitives, r.shapes, round(r.us, 1)] for r in rows]}


# ------------------------------------------------------------------------------- the update

def update_rounds(quick):
    """The step's last kernel alone: SGD with momentum over every ResNet-18 parameter (one
    horizontal kernel, fuse_horizontal), GPU us and the bytes it must move (read w, m, g;
    write w, m: 20 bytes a parameter) as TB/s, in three forms: "as_step", the gradients of the
    convolution kernels given as the step computes them ([I, O, kh, kw], read through a
    transpose, as the step's weight gradients are: primitives/convolution.py's _grad_rhs);
    "plain", in their own layout; "per_shape", plain with horizontal fusion off (a kernel per
    group of same-shaped parameters). What makes the step's kernel slower than its floor."""
    widths, blocks = ((32, 64), (1, 1)) if quick else ((64, 128, 256, 512), (2, 2, 2, 2))
    weights, _ = nn.init_resnet(np.random.default_rng(0), 3, 10, widths, blocks)
    opt = vg.optim.sgd(0.05, momentum=0.9)
    flip = lambda a: vg.numpy.transpose(a, (1, 0, 2, 3)) if a.ndim == 4 else a  # noqa: E731

    def update(transposed):
        def f(w, state, g):
            if transposed:
                g = vg.tree_util.tree_map(flip, g)
            upd, state = opt.update(g, state, w)
            return vg.optim.apply_updates(w, upd), state
        return f

    leaves = vg.tree_util.tree_leaves(weights)
    params = sum(int(np.prod(a.shape)) for a in leaves)
    grads = vg.tree_util.tree_map(
        lambda a: np.ascontiguousarray(np.transpose(a, (1, 0, 2, 3))) if a.ndim == 4 else a,
        weights)
    out = {"parameters": params, "arrays": len(leaves), "floor_bytes": 20 * params}
    for label, transposed, disable in (("as_step", True, ()), ("plain", False, ()),
                                       ("per_shape", False, ("fuse_horizontal",))):
        g = grads if transposed else weights
        fn = vg.jit(update(transposed), backend="vulkan", disable_passes=disable)
        prof = vg.profile(fn, weights, opt.init(weights), g, runs=10)
        out[label] = {"us": prof.total_us, "dispatches": len(prof.rows),
                      "tb_s": 20 * params / prof.total_us / 1e6,
                      "kernels": [[r.kernel, round(r.us, 1)] for r in prof.rows]}
    return out


# ------------------------------------------------------------------------------- main

def summary(values):
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "rounds": len(values)}


def rel_err(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=20, help="ResNet steps per round")
    ap.add_argument("--quick", action="store_true", help="small shapes (for lavapipe)")
    ap.add_argument("--only", default="", help="comma-separated conv names ('' all but the "
                    "step's, 'none'; a name ending in _ a prefix: r18_ the step's convolutions)")
    ap.add_argument("--no-resnet", action="store_true")
    ap.add_argument("--check", action="store_true", help="every conv's relative error against "
                    "the float64 interpreter (\"errors_vs_float64\"; else only small ones)")
    ap.add_argument("--sweep", action="store_true", help="time every kernel variant too")
    ap.add_argument("--variants", default="", help="comma-separated variants to sweep ('' all)")
    ap.add_argument("--direct", action="store_true",
                    help="w read in place with channels innermost (CIN_RELAYOUT off; writes "
                         "conv_direct.json)")
    ap.add_argument("--update", action="store_true",
                    help="time the step's optimizer kernel alone (update_rounds) into the JSON")
    ap.add_argument("--set", action="append", default=[], metavar="[MODULE.]NAME=VALUE",
                    help="set an integer constant of lowering/conv.py (or of MODULE, one of "
                         "SET_MODULES: kernels.TARGET_GROUPS=256) for the whole run: the "
                         "step under another planner rule (writes conv_NAME-VALUE.json)")
    args = ap.parse_args()
    conv_lowering.CIN_RELAYOUT = not args.direct
    for item in args.set:
        name, value = item.split("=")
        module, _, name = name.rpartition(".")
        owner = SET_MODULES[module or "conv"]
        if not isinstance(getattr(owner, name, None), int):
            raise SystemExit(f"--set {item}: {owner.__name__}.{name} is not an integer")
        setattr(owner, name, int(value))
    torch, jax = cuda_torch(), get_jax()
    cases = QUICK if args.quick else CONVS
    if args.only:
        cases += QUICK_STEP_CONVS if args.quick else STEP_CONVS
        only = args.only.split(",")
        cases = [c for c in cases if any(c[0] == o or o.endswith("_") and c[0].startswith(o)
                                         for o in only)]
    rng = np.random.default_rng(0)
    result = {"device": vg.devices()[0].name, "rounds": args.rounds,
              "cin_relayout": conv_lowering.CIN_RELAYOUT, "set": args.set, "convs": {}}
    for case in cases:
        x, w = operands(case, rng)
        gy = rng.standard_normal(out_shape(case)).astype(np.float32)
        fns = vkgrad_programs(case)
        # correctness: vkgrad on Vulkan against the float64 interpreter
        errs = {m: rel_err(vg.jit(f, backend="vulkan")(x, w, gy),
                           vg.jit(f, backend="numpy")(x.astype(np.float64), w.astype(np.float64),
                                                      gy.astype(np.float64)))
                for m, f in fns.items()} \
            if args.quick or args.check or case[1] * case[2] < 2 ** 12 else {}
        tfns = torch_programs(torch, case, x, w, gy) if torch is not None else None
        jfns = jax_programs(jax, case) if jax is not None else None
        jargs = tuple(jax.numpy.asarray(a) for a in (x, w, gy)) if jax is not None else None
        times = {"vkgrad": [], "torch": [], "jax": []}
        kernels = {}
        for _ in range(args.rounds):
            kernels.clear()
            times["vkgrad"].append(time_vkgrad(fns, (x, w, gy), kernels))
            if tfns is not None:
                times["torch"].append(time_torch(torch, tfns))
            if jfns is not None:
                times["jax"].append(time_jax(jfns, jargs))
        row = {"flops": flops(case), "errors_vs_float64": errs, "us": {},
               "vkgrad_kernels_us": kernels}     # the last round's, per kernel name
        for who, rounds in times.items():
            if not rounds:
                continue
            row["us"][who] = {m: summary([r[m] for r in rounds]) for m in MODES}
            row["us"][who]["total"] = summary([sum(r[m] for m in MODES) for r in rounds])
        vk = row["us"]["vkgrad"]
        row["tflops_vkgrad"] = {m: flops(case) / vk[m]["median"] / 1e6 for m in MODES}
        for peer in ("torch", "jax"):
            if peer in row["us"]:
                row[f"{peer}_over_vkgrad"] = {m: row["us"][peer][m]["median"] / vk[m]["median"]
                                              for m in (*MODES, "total")}
        if args.sweep:
            names = [v for v in args.variants.split(",") if v]
            row["sweep_us"], row["sweep_kernels_us"] = sweep_variants(case, (x, w, gy), names)
            wino_us, wino_kernels = sweep_winograd(case, (x, w, gy), names)
            row["sweep_us"].update(wino_us)
            row["sweep_kernels_us"].update(wino_kernels)
        result["convs"][case[0]] = row
        print(json.dumps({case[0]: row}), flush=True)
        write(result)                        # after each case: a run cut short keeps its rows
    if args.update:
        result["update"] = update_rounds(args.quick)
        print(json.dumps({"update": result["update"]}), flush=True)
        write(result)
    if not args.no_resnet:
        result["resnet18_step" if not args.quick else "resnet_tiny_step"] = \
            resnet_rounds(args, jax, args.quick)
    print(write(result))


def write(result) -> str:
    """$OUT/conv.json (./conv.json without $OUT; conv_direct.json with --direct, and
    conv_NAME-VALUE.json with --set); returns the text."""
    text = json.dumps(result, indent=1)
    out = Path(os.environ.get("OUT", "."))
    out.mkdir(parents=True, exist_ok=True)
    name = "_".join(["conv"] + ([] if result["cin_relayout"] else ["direct"]) +
                    [item.replace("=", "-") for item in result["set"]]) + ".json"
    (out / name).write_text(text)
    return text


if __name__ == "__main__":
    main()
