"""How many workgroups a multiprocessor holds at once, measured, against shared memory and
registers: each workgroup of a spin kernel writes the device clock (GL_EXT_shader_realtime_clock)
at its start and end, and the most intervals open at one time, over the device's
multiprocessors, is its residency. The driver's statistics (bench/pipestats.py) give each
variant's registers, so the table says whether shared memory or registers bound it.

Why: on the H200 the coop matmul and attention kernels ran about half as fast once their shared
memory passed ~20-32 KB a workgroup although registers allowed two or more workgroups a
multiprocessor (BENCHMARKS.md, issue 25). This measures the rule instead of inferring it.

    python3 bench/occupancy_probe.py [--out occupancy.json] [--sms 132]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from vkgrad.runtime.shaders import compile_glsl  # noqa: E402

SOURCE = r"""
#version 460
#extension GL_EXT_shader_realtime_clock : require
#extension GL_ARB_gpu_shader_int64 : require
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x = WG) in;
layout(std430, binding = 0) buffer Out { uint o[]; };
layout(std430, binding = 1) buffer In { float inp[]; };
layout(push_constant) uniform P { uint spin; } p;
#if SHMEM > 0
shared float sh[SHMEM / 4];
#endif
void main() {
    uint64_t t0 = clockRealtimeEXT();
    uint lid = gl_LocalInvocationID.x;
    float acc[NACC];
    [[unroll]] for (int i = 0; i < NACC; ++i) acc[i] = inp[(lid * 7 + i) & 1023];
#if SHMEM > 0
    for (uint i = lid; i < SHMEM / 4; i += WG) sh[i] = float(i & 7);
    barrier();
#endif
    for (uint it = 0; it < p.spin; ++it) {
        [[unroll]] for (int i = 0; i < NACC; ++i) acc[i] = fma(acc[i], 0.999, acc[(i + 1) % NACC]);
#if SHMEM > 0
        acc[0] += sh[(it * 33u + lid) % uint(SHMEM / 4)];
#endif
    }
    float s = 0.0;
    [[unroll]] for (int i = 0; i < NACC; ++i) s += acc[i];
    uint64_t t1 = clockRealtimeEXT();
    if (lid == 0) {
        uint g = gl_WorkGroupID.x * 5u;
        o[g] = uint(t0); o[g + 1] = uint(t0 >> 32); o[g + 2] = uint(t1); o[g + 3] = uint(t1 >> 32);
        o[g + 4] = floatBitsToUint(s);
    }
}
"""

# (shared bytes a workgroup, accumulators a thread, threads a workgroup)
VARIANTS = ([(s, 8, 128) for s in (0, 6144, 7168, 8192, 10240, 12288, 16384, 20480, 24576,
                                    26624, 28672, 32768, 49152)]
            + [(s, 200, 128) for s in (0, 16384, 24576, 26624, 28672)]
            + [(s, 100, 128) for s in (0, 12288, 16384, 20480)]
            + [(s, 8, 256) for s in (0, 16384, 24576, 32768)])


def residency(ts: np.ndarray) -> tuple[int, float]:
    """The most intervals [t0, t1) open at once, and the mean number open over the first half
    of the run (the steady state before the tail)."""
    starts, ends = ts[:, 0], ts[:, 1]
    ev = np.concatenate([np.stack([starts, np.ones_like(starts)], 1),
                         np.stack([ends, -np.ones_like(ends)], 1)])
    ev = ev[np.lexsort((ev[:, 1], ev[:, 0]))]     # ends before starts at equal times
    open_ = np.cumsum(ev[:, 1])
    t = ev[:, 0]
    half = t[0] + (t[-1] - t[0]) // 2
    keep = t < half
    dt = np.diff(t[keep], append=half)
    mean = float((open_[keep] * dt).sum() / max(dt.sum(), 1))
    return int(open_.max()), mean


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path)
    ap.add_argument("--sms", type=int, default=132, help="multiprocessors (H200: 132)")
    ap.add_argument("--groups-per-sm", type=int, default=24)
    ap.add_argument("--spin", type=int, default=4000)
    args = ap.parse_args()
    import kp
    mgr = kp.Manager(0, [], ["VK_KHR_shader_clock"])
    try:
        from pipestats import build_pipestats, statistics_line
        tmp = Path(tempfile.mkdtemp())
        exe = build_pipestats(tmp)
    except Exception as e:   # noqa: BLE001 (a dev aid: the table goes on without registers)
        print(f"no pipestats: {e}")
        exe = None
    groups = args.sms * args.groups_per_sm
    rows = []
    inp = mgr.tensor_t(np.random.default_rng(0).random(1024).astype(np.float32))
    for shmem, nacc, wg in VARIANTS:
        spirv = compile_glsl(SOURCE, {"SHMEM": shmem, "NACC": nacc, "WG": wg},
                             name="occupancy", target_env="vulkan1.3")
        regs = ""
        if exe is not None:
            spv = tmp / f"occ_{shmem}_{nacc}_{wg}.spv"
            spv.write_bytes(spirv)
            try:
                regs = statistics_line(exe, spv, 2, 4, "v")
            except RuntimeError as e:
                regs = str(e)[:120]
        out = mgr.tensor_t(np.zeros(groups * 5, np.uint32))
        spin = max(200, args.spin * 8 // nacc)
        algo = mgr.algorithm([out, inp], spirv, (groups, 1, 1), [],
                             np.array([spin], np.uint32))
        seq = mgr.sequence()
        seq.record(kp.OpTensorSyncDevice([inp]))
        seq.record(kp.OpAlgoDispatch(algo))
        seq.record(kp.OpTensorSyncLocal([out]))
        t = time.perf_counter()
        seq.eval()
        wall = time.perf_counter() - t
        raw = out.data().view(np.uint32).reshape(groups, 5).astype(np.uint64)
        ts = np.stack([raw[:, 0] | (raw[:, 1] << np.uint64(32)),
                       raw[:, 2] | (raw[:, 3] << np.uint64(32))], 1).astype(np.int64)
        most, mean = residency(ts)
        per_wg = float(np.median(ts[:, 1] - ts[:, 0]))
        row = dict(shared=shmem, acc=nacc, threads=wg, most_open=most,
                   per_sm_most=most / args.sms, per_sm_mean=mean / args.sms,
                   group_ticks_median=per_wg, wall_s=wall, stats=regs)
        rows.append(row)
        print(f"shared {shmem:6d} B  acc {nacc:3d}  threads {wg}: resident a multiprocessor "
              f"{most / args.sms:5.2f} (most), {mean / args.sms:5.2f} (mean)   {regs}",
              flush=True)
    if args.out:
        device = mgr.get_device_properties()["device_name"]
        args.out.write_text(json.dumps(dict(date=time.strftime("%Y-%m-%d %H:%M"), device=device,
                                            rows=rows), indent=1))


if __name__ == "__main__":
    main()
