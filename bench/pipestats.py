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
