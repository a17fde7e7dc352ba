"""Build bench/tools/pipestats.c (the driver's statistics of a compute pipeline: registers a
thread on NVIDIA) for the benchmarks that print them (bench_attention.py --stats,
coop_attention_bwd_probe.py --stats)."""

from __future__ import annotations

import subprocess
from pathlib import Path


def build_pipestats(tmp: Path):
    """The built tool's path in `tmp`, or None (with a note printed) when there is no C compiler
    or no Vulkan loader to link."""
    exe = tmp / "pipestats"
    source = Path(__file__).resolve().parent / "tools" / "pipestats.c"
    # -l:libvulkan.so.1: the device machine has the loader but maybe no libvulkan.so dev link.
    errors = []
    for lib in ("-l:libvulkan.so.1", "-lvulkan"):
        try:
            build = subprocess.run(["cc", "-O1", "-o", str(exe), str(source), lib],
                                   capture_output=True, text=True)
        except OSError as e:                    # no C compiler
            errors.append(str(e))
            break
        if build.returncode == 0:
            return exe
        errors.append(build.stderr.strip()[:300])
    print(f"--stats: could not build pipestats: {' | '.join(errors)}")
    return None


def statistics_line(exe: Path, spv: Path, bindings: int, push_bytes: int, label: str,
                    spec_words=()) -> str:
    """The driver's statistics of one pipeline, as pipestats prints them (`name=value;` ...)."""
    res = subprocess.run([str(exe), str(spv), str(bindings), str(push_bytes),
                          f"{label}:{','.join(str(int(w)) for w in spec_words)}"],
                         capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"pipestats failed: {res.stderr.strip()[:300]}")
    return res.stdout.strip().splitlines()[-1].split(":", 1)[1].strip()


# What bounds the workgroups one H200 multiprocessor holds (bench/occupancy_probe.py measured the
# shared memory: the resident workgroups share 49,152 bytes, whatever their registers allow)
H200_SHARED_PER_SM, H200_REGISTERS_PER_SM, H200_THREADS_PER_SM = 49152, 65536, 2048


def statistics(line: str) -> dict:
    """A statistics_line as {name: value}: {"Register Count": "184", ...}."""
    return dict(kv.strip().split("=", 1) for kv in line.split(";") if "=" in kv)


def resident(line: str, threads: int) -> str:
    """`line`'s (statistics_line) workgroups a multiprocessor of the H200 holds, and which limit
    decides: registers (allocated 8 a thread at a time), shared memory or threads."""
    stat = statistics(line)
    regs, shared = int(stat.get("Register Count", 0)), int(stat.get("Shared Memory Size", 0))
    limits = {"threads": H200_THREADS_PER_SM // threads}
    if regs:
        limits["registers"] = H200_REGISTERS_PER_SM // (threads * -(-regs // 8) * 8)
    if shared:
        limits["shared memory"] = H200_SHARED_PER_SM // shared
    by = min(limits, key=limits.get)
    return f"{limits[by]} a multiprocessor ({by})"
