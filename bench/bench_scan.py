"""vkgrad's Mamba selective scan (forward + backward kernels) against JAX's lax.associative_scan,
measured in the same process.

On the NVIDIA device machine, from the repo root (with .gpu carried):
    source bench/gpu_env.sh && python3 bench/bench_scan.py [--sweep]
Shape: batch 8, dim 1024, N 16, L 2048; variable B and C; D, z, delta_bias, softplus on.
Prints per-kernel GPU time (median of REPS runs after warm-up, from Vulkan timestamps), the
memory-traffic floors at 4.8 TB/s, JAX's time for the same math (forward + backward via vjp,
jitted, fp32, matmul precision "highest", block_until_ready), and the relative error of every
vkgrad output against JAX's. Writes $OUT/scan.json.
--sweep: also times candidate chunks and tiles (forward and backward separately, each checked
against JAX) and prints the fastest combination, so one GPU run tunes the planner's table.
--quick: a small shape (lavapipe, to check the script; JAX on the CPU if installed).
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

from vkgrad.lowering.scan import (ScanTile, plan_selective_scan,  # noqa: E402
                                  plan_selective_scan_bwd, scan_states_shape)
from vkgrad.runtime import Executable, get_device  # noqa: E402

FULL = dict(batch=8, dim=1024, L=2048, N=16)
QUICK = dict(batch=2, dim=64, L=256, N=16)
FLAGS = dict(variable_B=True, variable_C=True, has_D=True, has_z=True, has_bias=True,
             softplus=True)
HBM_TBS = 4.8
REPS = 10
BUDGET_S = 180          # the sweep stops starting new candidates after this much wall time
TOL = 1e-3              # relative L2 error vs JAX (both fp32; sums over up to 16k terms)

# Sweep candidates (chunk, then tiles). Forward: states per thread x d's per workgroup x staged
# steps; backward: states per thread x d's per workgroup (x keep a_t in registers).
CHUNKS = (16, 32, 8)       # the default first: the budget may stop the sweep early
FWD_CANDIDATES = [ScanTile(s, g, tf) for s, g, tf in
                  [(4, 32, 32), (2, 32, 32), (2, 16, 32), (1, 16, 32), (4, 32, 64), (2, 32, 64),
                   (8, 32, 32), (4, 64, 32), (4, 16, 32)]]
BWD_CANDIDATES = [ScanTile(s, g, 0, a) for s, g, a in
                  [(2, 16, True), (2, 16, False), (4, 32, False), (4, 16, True), (4, 16, False),
                   (2, 32, False), (1, 16, True), (1, 32, True), (2, 8, True), (4, 8, True)]]


# ---------------------------------------------------------------- inputs and the memory floor

def make_inputs(batch, dim, L, N, seed=0):
    rng = np.random.default_rng(seed)
    f32 = lambda a: np.ascontiguousarray(a, np.float32)
    ins = dict(u=f32(rng.standard_normal((batch, dim, L))),
               delta=f32(rng.uniform(-4.0, -1.0, (batch, dim, L))),
               A=f32(-np.exp(rng.uniform(-1.0, 1.5, (dim, N)))),
               B=f32(rng.standard_normal((batch, N, L))),
               C=f32(rng.standard_normal((batch, N, L))),
               D=f32(rng.standard_normal(dim)),
               z=f32(rng.standard_normal((batch, dim, L))),
               delta_bias=f32(rng.uniform(-0.5, 0.5, dim)))
    dout = f32(rng.standard_normal((batch, dim, L)))
    return ins, dout


def traffic_bytes(batch, dim, L, N, chunk, bwd_dims):
    """Bytes each pass must move: 'essential' (operands read once, results written once) and
    this design's (plus the saved states and the dB / dC partials of `bwd_dims` d's per
    workgroup)."""
    big = batch * dim * L * 4
    bc = batch * N * L * 4
    small = (dim * N + 3 * dim) * 4
    states = batch * -(-L // chunk) * dim * N * 4
    partials = 2 * -(-dim // bwd_dims) * bc + batch * dim * N * 4
    fwd = 3 * big + 2 * bc + small + big                      # u, delta, z, B, C; out
    bwd = 4 * big + 2 * bc + small + 3 * big + 2 * bc + small  # u, delta, z, dout, B, C; du,
    return {"fwd_essential": fwd, "bwd_essential": bwd,      # ddelta, dz, dB, dC, dA...
            "fwd_design": fwd + states, "bwd_design": bwd + states + 2 * partials}


# ---------------------------------------------------------------- vkgrad

class Runner:
    """Device buffers for every role, uploaded once; plans bound and timed on them."""

    def __init__(self, dev, ins, dout):
        self.dev = dev
        self.batch, self.dim, self.L = ins["u"].shape
        self.N = ins["A"].shape[1]
        self.bufs = {}
        uploads = []
        for role, arr in {**ins, "dout": dout}.items():
            self.bufs[role] = dev.buffer(arr.size)
            uploads.append((self.bufs[role], arr))
        size = ins["u"].size
        for role, n in [("out", size), ("du", size), ("ddelta", size), ("dz", size),
                        ("dA", ins["A"].size), ("dB", ins["B"].size), ("dC", ins["C"].size),
                        ("dD", self.dim), ("ddelta_bias", self.dim)]:
            self.bufs[role] = dev.buffer(n)
        self._scratch = {}
        Executable(dev, []).run(uploads=uploads)

    def buffers_for(self, plan, chunk):
        bufs = dict(self.bufs)
        shape = scan_states_shape(self.batch, self.dim, self.L, self.N, chunk)
        bufs["states"] = self._buffer(("states", chunk), int(np.prod(shape)))
        for t in plan.temps:
            bufs[t.role] = self._buffer(("temp", t.role, t.size), t.size)
        return bufs

    def _buffer(self, key, size):
        if key not in self._scratch:
            self._scratch[key] = self.dev.buffer(size, kind="scratch")
        return self._scratch[key]

    def plans(self, chunk=None, fwd_tile=None, bwd_tile=None):
        kw = dict(target=self.dev.target, chunk=chunk, **FLAGS)
        return (plan_selective_scan(self.batch, self.dim, self.L, self.N, tile=fwd_tile, **kw),
                plan_selective_scan_bwd(self.batch, self.dim, self.L, self.N, tile=bwd_tile,
                                        **kw))

    def time_plans(self, plans, chunk, reps=REPS):
        """Median GPU microseconds per kernel name over `reps` runs (after two warm-ups)."""
        dispatches = []
        for plan in plans:
            bufs = self.buffers_for(plan, chunk)
            dispatches += [self.dev.dispatch(launch, [bufs[r] for r in roles])
                           for launch, roles in plan.steps]
        ex = Executable(self.dev, dispatches, timestamps=True, name="bench_scan")
        ex.run()
        ex.run()
        per = {}
        wall = []
        for _ in range(reps):
            t0 = time.perf_counter()
            ex.run()
            wall.append((time.perf_counter() - t0) * 1e6)
            for label, us in ex.last_timings_us or []:
                per.setdefault(label, []).append(us)
        ex.release()
        if not per:                                   # no timestamps: whole-submission wall time
            per = {"submission(wall)": wall}
        return {k: statistics.median(v) for k, v in per.items()}

    def read(self, roles):
        out = {}
        for r in roles:
            out[r] = self.bufs[r].download()
        return out


# ---------------------------------------------------------------- JAX

def jax_scan(jax):
    jnp, lax = jax.numpy, jax.lax

    def scan(u, delta, A, B, C, D, z, delta_bias):
        dt = jax.nn.softplus(delta + delta_bias[:, None])                  # [b, d, L]
        dA = jnp.exp(dt[..., None] * A[None, :, None, :])                  # [b, d, L, N]
        dBu = (dt * u)[..., None] * jnp.swapaxes(B, 1, 2)[:, None]         # [b, d, L, N]

        def combine(x, y):                                                 # h -> a2 * h + b2
            return x[0] * y[0], y[0] * x[1] + y[1]
        _, h = lax.associative_scan(combine, (dA, dBu), axis=2)
        y = jnp.einsum("bdln,bln->bdl", h, jnp.swapaxes(C, 1, 2)) + D[:, None] * u
        return y * jax.nn.silu(z)

    @jax.jit
    def fwd_bwd(args, g):
        out, vjp = jax.vjp(scan, *args)
        return out, vjp(g)

    return jax.jit(scan), fwd_bwd


def time_jax(jax, fn, *args, reps=REPS):
    jax.block_until_ready(fn(*args))
    jax.block_until_ready(fn(*args))
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(times)


GRAD_ROLES = ("du", "ddelta", "dA", "dB", "dC", "dD", "dz", "ddelta_bias")
ARG_ORDER = ("u", "delta", "A", "B", "C", "D", "z", "delta_bias")
GRAD_OF = dict(du="u", ddelta="delta", dA="A", dB="B", dC="C", dD="D", dz="z",
               ddelta_bias="delta_bias")


def rel_errors(got: dict, want: dict) -> dict:
    errs = {}
    for k, w in want.items():
        g = np.asarray(got[k], np.float64).reshape(-1)
        w = np.asarray(w, np.float64).reshape(-1)
        errs[k] = float(np.linalg.norm(g - w) / max(np.linalg.norm(w), 1e-30))
    return errs


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sweep", action="store_true", help="time candidate chunks and tiles")
    ap.add_argument("--quick", action="store_true", help="small shape (lavapipe)")
    ap.add_argument("--no-jax", action="store_true")
    ap.add_argument("--budget", type=float, default=BUDGET_S,
                    help="seconds after which the sweep starts no new candidate")
    args = ap.parse_args()
    t_start = time.perf_counter()
    shape = QUICK if args.quick else FULL
    batch, dim, L, N = shape["batch"], shape["dim"], shape["L"], shape["N"]

    jax = None
    if not args.no_jax:
        # JAX would take 75% of the GPU's memory up front; leave room for Vulkan's buffers.
        os.environ.setdefault("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.5")
        try:
            import jax
            jax.config.update("jax_default_matmul_precision", "highest")
        except ImportError:
            jax = None
    dev = get_device()
    print(f"vkgrad device: {dev.info.name}; JAX: "
          f"{jax.devices()[0] if jax is not None else 'not available'}; shape {shape}, "
          f"flags {FLAGS}", flush=True)

    ins, dout = make_inputs(batch, dim, L, N)
    run = Runner(dev, ins, dout)
    result = {"date": time.strftime("%Y-%m-%d %H:%M"), "device": dev.info.name, "shape": shape,
              "flags": FLAGS, "unit": "us (median GPU time per kernel)"}

    # JAX first: its outputs are the reference every vkgrad variant is checked against.
    want = None
    if jax is not None:
        scan, fwd_bwd = jax_scan(jax)
        jargs = tuple(jax.device_put(ins[k]) for k in ARG_ORDER)
        jg = jax.device_put(dout)
        out, grads = fwd_bwd(jargs, jg)
        want = {"out": np.asarray(out)}
        want.update({r: np.asarray(grads[ARG_ORDER.index(GRAD_OF[r])]) for r in GRAD_ROLES})
        jf = time_jax(jax, scan, *jargs)
        jfb = time_jax(jax, fwd_bwd, jargs, jg)
        result["jax"] = {"fwd_us": jf, "fwd_bwd_us": jfb, "method": "lax.associative_scan"}
        print(f"JAX associative_scan: forward {jf:9.1f} us, forward+backward {jfb:9.1f} us",
              flush=True)
        del out, grads

    def check(roles):
        if want is None:
            return {}
        return rel_errors(run.read(roles), {r: want[r] for r in roles})

    # The planner's choice: forward and backward in one executable.
    fwd, bwd = run.plans()
    chunk = fwd.steps[0][0].spec[1]
    bwd_G = bwd.steps[0][0].spec[0] // (N // dict(bwd.steps[0][0].defines)["S"])
    t = run.time_plans((fwd, bwd), None)
    errs = check(("out",) + GRAD_ROLES)
    total = sum(v for k, v in t.items() if k.startswith("scan"))
    floors = traffic_bytes(batch, dim, L, N, chunk, bwd_G)
    print("\nvkgrad, planner's tiles:")
    for launch, _ in fwd.steps + bwd.steps:
        print(f"  {launch.name:>14}: {t.get(launch.name, float('nan')):9.1f} us   "
              f"spec {launch.spec} S={dict(launch.defines)['S']}")
    fwd_us = t.get("scan_fwd", float("nan"))
    bwd_us = total - fwd_us
    print(f"  {'total':>14}: {total:9.1f} us  (forward {fwd_us:.1f}, backward {bwd_us:.1f})")
    for k, v in floors.items():
        print(f"  floor {k:>13}: {v / 1e6:8.1f} MB  {v / (HBM_TBS * 1e6):7.1f} us at "
              f"{HBM_TBS} TB/s")
    for kind, us in (("fwd", fwd_us), ("bwd", bwd_us)):
        print(f"  {kind}: {floors[kind + '_essential'] / us / 1e6:5.2f} TB/s of essential "
              f"traffic, {floors[kind + '_design'] / us / 1e6:5.2f} TB/s of this design's")
    ess = (floors["fwd_essential"] + floors["bwd_essential"]) / (HBM_TBS * 1e6)
    print(f"  fwd+bwd vs essential floor {ess:.1f} us: {total / ess:.2f}x;"
          + (f" JAX / vkgrad = {result['jax']['fwd_bwd_us'] / total:.1f}x" if jax else ""))
    if errs:
        bad = {k: v for k, v in errs.items() if v > TOL}
        print("  rel. error vs JAX: " + ", ".join(f"{k} {v:.1e}" for k, v in errs.items())
              + ("  OK" if not bad else f"  TOO LARGE: {sorted(bad)}"))
    result["vkgrad"] = {"kernels_us": t, "total_us": total, "fwd_us": fwd_us, "bwd_us": bwd_us,
                        "chunk": chunk, "rel_err_vs_jax": errs,
                        "launches": [dict(name=l.name, spec=l.spec, defines=dict(l.defines),
                                          groups=l.groups) for l, _ in fwd.steps + bwd.steps]}
    result["floors_bytes"] = floors
    result["floors_us"] = {k: v / (HBM_TBS * 1e6) for k, v in floors.items()}

    if args.sweep:
        result["sweep"] = sweep(run, check, N, t_start, args.budget)

    if not os.environ.get("OUT"):
        return
    out_dir = Path(os.environ["OUT"])
    (out_dir / "scan.json").write_text(json.dumps(result, indent=1, default=str))
    print(f"wrote {out_dir / 'scan.json'} ({time.perf_counter() - t_start:.0f} s)")


def sweep(run, check, N, t_start, budget):
    rows = {"fwd": [], "bwd": []}
    for chunk in CHUNKS:
        # States for this chunk (the backward reads them): the default forward at this chunk.
        fwd0, _ = run.plans(chunk=chunk)
        run.time_plans((fwd0,), chunk, reps=1)
        for kind, cands in (("fwd", FWD_CANDIDATES), ("bwd", BWD_CANDIDATES)):
            for tile in cands:
                if time.perf_counter() - t_start > budget:
                    print("  sweep: time budget reached, stopping", flush=True)
                    return _best(rows)
                label = f"chunk {chunk:>2} {kind} S={tile.states} G={tile.dims} " \
                        f"steps={tile.steps} store_a={int(tile.store_a)}"
                try:
                    fwd, bwd = run.plans(chunk, tile if kind == "fwd" else None,
                                         tile if kind == "bwd" else None)
                    plan = fwd if kind == "fwd" else bwd
                    t = run.time_plans((plan,), chunk, reps=REPS)
                    errs = check(("out",) if kind == "fwd" else GRAD_ROLES)
                except Exception as e:  # a candidate that does not fit or build is reported
                    print(f"  {label}: FAILED {type(e).__name__}: {e}", flush=True)
                    continue
                us = sum(v for k, v in t.items() if k.startswith("scan"))
                worst = max(errs.values()) if errs else float("nan")
                spec = plan.steps[0][0].spec
                rows[kind].append(dict(chunk=chunk, tile=tile.__dict__, spec=spec, us=us,
                                       kernels=t, max_rel_err=worst))
                print(f"  {label}: {us:9.1f} us  spec {spec}  max rel err {worst:.1e}"
                      + ("" if not errs or worst <= TOL else "  WRONG"), flush=True)
    return _best(rows)


def _best(rows):
    best = None
    for chunk in CHUNKS:
        f = [r for r in rows["fwd"] if r["chunk"] == chunk and not r["max_rel_err"] > TOL]
        b = [r for r in rows["bwd"] if r["chunk"] == chunk and not r["max_rel_err"] > TOL]
        if f and b:
            bf, bb = min(f, key=lambda r: r["us"]), min(b, key=lambda r: r["us"])
            if best is None or bf["us"] + bb["us"] < best["us"]:
                best = {"chunk": chunk, "fwd": bf, "bwd": bb, "us": bf["us"] + bb["us"]}
    if best is not None:
        print(f"\nfastest: chunk {best['chunk']}: forward {best['fwd']['tile']} "
              f"{best['fwd']['us']:.1f} us + backward {best['bwd']['tile']} "
              f"{best['bwd']['us']:.1f} us = {best['us']:.1f} us", flush=True)
    return {"rows": rows, "best": best}


if __name__ == "__main__":
    main()
