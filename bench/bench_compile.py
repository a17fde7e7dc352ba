"""Cold and warm compile of the transformer block training step: the time of its first call.

On the NVIDIA device machine, from the repo root (with .gpu carried):
    source bench/gpu_env.sh && python3 bench/bench_compile.py
Here (lavapipe):  python bench/bench_compile.py --small --no-run

The step: one pre-norm transformer block (d 512, 8 heads, L 1024, batch 4, causal; attention as
plain softmax(q k^T / sqrt(d)) v, which lowers to Vulkan today), a mean-squared loss, its
gradient and an Adam update, jitted with parameters and state donated. Each measurement is a
fresh Python process whose first call is timed until its result is ready:
  cold   an empty SPIR-V cache (VKGRAD_CACHE in a new folder) and an empty driver shader cache
         (__GL_SHADER_DISK_CACHE_PATH, NVIDIA's), so every kernel is compiled;
  warm   a second process on the caches the cold one filled.
VKGRAD_LOG_COMPILES=1 is set in both: the seconds per stage (trace, optimize, fuse, lower,
shaders, pipelines, buffers) are printed and kept. Writes $OUT/compile.json when $OUT is set.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def block_step(d, heads, length, batch):
    """The jitted step, its arguments (numpy), and the model's sizes."""
    import numpy as np
    import vkgrad as vg
    import vkgrad.numpy as vnp
    from vkgrad import nn

    rng = np.random.default_rng(0)
    params = nn.init_attention_block(rng, d)
    mask = np.tril(np.ones((length, length), bool))
    scale = float(1.0 / np.sqrt(d // heads))   # a Python float: a numpy float64 makes f64

    def block(p, x):
        b, n, _ = x.shape
        h = nn.layer_norm(x, p["ln1"]["w"], p["ln1"]["b"])
        qkv = nn.linear(p["qkv"], h).reshape(b, n, 3, heads, d // heads)
        q, k, v = (vnp.transpose(qkv[:, :, i], (0, 2, 1, 3)) for i in range(3))
        s = vnp.where(mask, (q @ vnp.swapaxes(k, -1, -2)) * scale, -1e9)
        a = vnp.softmax(s, axis=-1) @ v
        x = x + nn.linear(p["proj"], vnp.transpose(a, (0, 2, 1, 3)).reshape(b, n, d))
        h = nn.layer_norm(x, p["ln2"]["w"], p["ln2"]["b"])
        return x + nn.linear(p["out"], nn.gelu(nn.linear(p["fc"], h)))

    opt = vg.optim.adam(1e-4)

    def step(p, s, x, y):
        loss, g = vg.value_and_grad(lambda p: vnp.mean((block(p, x) - y) ** 2))(p)
        updates, s = opt.update(g, s, p)
        p = vg.optim.apply_updates(p, updates)
        return p, s, loss

    x = rng.standard_normal((batch, length, d)).astype(np.float32)
    y = rng.standard_normal((batch, length, d)).astype(np.float32)
    return vg.jit(step, donate_argnums=(0, 1)), (params, opt.init(params), x, y)


def child(args) -> None:
    """One process: build the step, compile it (step.lower), then time its first call (record
    and run); print a JSON line."""
    import vkgrad as vg
    t0 = time.perf_counter()
    step, a = block_step(args.d, args.heads, args.length, args.batch)
    t1 = time.perf_counter()
    entry = step.lower(*a)
    t2 = time.perf_counter()
    result = {"setup_s": t1 - t0, "compile_s": t2 - t1, "times": entry.times,
              "stats": {k: v for k, v in entry.stats().items() if k != "kernels"}}
    if not args.no_run:
        out = step(*a)
        result["loss"] = float(out[2])
        vg.block_until_ready(out)
        result["first_run_s"] = time.perf_counter() - t2
    result["first_call_s"] = time.perf_counter() - t1   # compile + the first run
    print(json.dumps(result))


def run(args, caches: Path) -> dict:
    env = dict(os.environ, VKGRAD_CACHE=str(caches / "vkgrad"), VKGRAD_LOG_COMPILES="1",
               __GL_SHADER_DISK_CACHE_PATH=str(caches / "driver"))
    (caches / "driver").mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, __file__, "--child", "--d", str(args.d), "--heads", str(args.heads),
           "--length", str(args.length), "--batch", str(args.batch)] + \
        (["--no-run"] if args.no_run else [])
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    if res.returncode != 0:
        raise SystemExit(res.stdout + res.stderr)
    result = json.loads(res.stdout.strip().splitlines()[-1])
    result["log"] = [l for l in res.stderr.splitlines() if l.startswith("vkgrad: compiled")]
    return result


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--d", type=int, default=512)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--length", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--small", action="store_true", help="d 64, 4 heads, L 64, batch 2")
    ap.add_argument("--no-run", action="store_true",
                    help="time the compile only (the step crashes lavapipe at base d8c62c2 too)")
    ap.add_argument("--child", action="store_true")
    args = ap.parse_args()
    if args.small:
        args.d, args.heads, args.length, args.batch = 64, 4, 64, 2
    if args.child:
        return child(args)
    with tempfile.TemporaryDirectory(prefix="vkgrad-compile-") as tmp:
        cold = run(args, Path(tmp))
        warm = run(args, Path(tmp))
    sizes = f"d {args.d}, {args.heads} heads, L {args.length}, batch {args.batch}"
    print(f"transformer block step ({sizes}), first call until its result is ready:")
    for name, r in (("cold", cold), ("warm", warm)):
        print(f"  {name}: first call {r['first_call_s']:.2f} s (compile {r['compile_s']:.2f} s)"
              f"\n    {r['log'][-1] if r['log'] else ''}")
    print(f"  {cold['stats']}")
    if os.environ.get("OUT"):
        (Path(os.environ["OUT"]) / "compile.json").write_text(json.dumps(
            {"date": time.strftime("%Y-%m-%d %H:%M"), "sizes": sizes, "cold": cold,
             "warm": warm, "cpus": os.cpu_count()}, indent=1))


if __name__ == "__main__":
    main()
