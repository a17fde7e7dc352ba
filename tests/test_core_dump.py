"""`vkgrad dump`: golden output for each stage, source lines, errors, and the real command line."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from child_env import child_env
import vkgrad as vg
import vkgrad.numpy as vnp
from vkgrad.runtime.shaders import compile_glsl

from vkgrad.dump import main
from vkgrad.pipeline import STAGE_NAMES
from vkgrad.errors import ArgumentError, GradError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = "examples/grad_notebook.py"
TARGET = f"{EXAMPLE}:loss"
ARGS = ["--args", "f32[8,6], f32[6,3], f32[3], i32[8]"]

TRACED = """\
program loss(%0: f32[8,6], %1: f32[6,3], %2: f32[3], %3: i32[8]) -> f32[] {
  %4: f32[8,3] = matmul %0, %1
  %5: f32[8,3] = add %4, %2
  %6: f32[8,3] = log_softmax[axis=1] %5
  %7: bool[8] = lt %3, 0:i32
  %8: i32[8] = add %3, 3:i32
  %9: i32[8] = select %7, %8, %3
  %10: i32[8,1] = reshape[shape=(8,1)] %9
  %11: i32[3] = iota[dimension=0, dtype=i32, shape=(3,)]
  %12: bool[8,3] = eq %10, %11
  %13: f32[8,3] = convert[dtype=f32] %12
  %14: f32[8,3] = mul %6, %13
  %15: bool[8] = lt %3, -3:i32
  %16: bool[8] = le 3:i32, %3
  %17: bool[8] = select %15, True:bool, %16
  %18: bool[8,1] = reshape[shape=(8,1)] %17
  %19: f32[8,1] = select %18, nan:f32, 0.0:f32
  %20: f32[8,3] = add %14, %19
  %21: f32[8] = reduce_sum[axes=(1,)] %20
  %22: f32[] = reduce_sum[axes=(0,)] %21
  %23: f32[] = mul %22, 0.125:f32
  %24: f32[] = neg %23
  return %24
}
"""

GRAD_OPTIMIZED = """\
program loss(%0: f32[8,6], %1: f32[6,3], %2: f32[3], %3: i32[8]) -> (f32[], f32[6,3], f32[3]) {
  %4: f32[8,3] = matmul %0, %1
  %5: f32[8,3] = add %4, %2
  %6: f32[8,3] = log_softmax[axis=1] %5
  %7: bool[8] = lt %3, 0:i32
  %8: i32[8] = add %3, 3:i32
  %9: i32[8] = select %7, %8, %3
  %10: i32[8,1] = reshape[shape=(8,1)] %9
  %11: i32[3] = iota[dimension=0, dtype=i32, shape=(3,)]
  %12: bool[8,3] = eq %10, %11
  %13: f32[8,3] = convert[dtype=f32] %12
  %14: f32[8,3] = mul %6, %13
  %15: bool[8] = lt %3, -3:i32
  %16: bool[8] = le 3:i32, %3
  %17: bool[8] = select %15, True:bool, %16
  %18: bool[8,1] = reshape[shape=(8,1)] %17
  %19: f32[8,1] = select %18, nan:f32, 0.0:f32
  %20: f32[8,3] = add %14, %19
  %21: f32[] = reduce_sum[axes=(0,1)] %20
  %22: f32[] = mul %21, 0.125:f32
  %23: f32[] = neg %22
  # ---- backward ----
  %24: f32[8,3] = mul -0.125:f32, %13
  %25: f32[8,3] = log_softmax_bwd[axis=1] %6, %24
  %26: f32[3] = reduce_sum[axes=(0,)] %25
  %27: f32[6,3] = matmul[transpose_a=True] %0, %25
  return %23, %27, %26
}
"""


@pytest.fixture(autouse=True)
def at_repo_root(monkeypatch):
    monkeypatch.chdir(ROOT)   # source paths print relative to the working directory


def dump(capsys, *argv):
    assert main([TARGET, *ARGS, *argv]) == 0
    return capsys.readouterr().out


def test_traced_golden(capsys):
    assert dump(capsys) == TRACED
    assert dump(capsys, "--stage", "traced") == TRACED


def test_grad_golden(capsys):
    assert dump(capsys, "--grad", "--argnums", "1,2") == GRAD_OPTIMIZED
    assert dump(capsys, "--grad", "--argnums", "1,2", "--stage", "optimized") == GRAD_OPTIMIZED


def test_unoptimized_grad_stage(capsys):
    out = dump(capsys, "--stage", "grad", "--argnums", "1")
    fwd, bwd = out.split("  # ---- backward ----\n")
    assert fwd.startswith(TRACED.split("  return")[0].replace(" -> f32[] {",
                                                              " -> (f32[], f32[6,3]) {"))
    assert "log_softmax_bwd[axis=1]" in bwd and "matmul[transpose_a=True]" in bwd
    assert out.count("\n") > GRAD_OPTIMIZED.count("\n")       # the passes have work to do


def test_optimized_without_grad(capsys):
    out = dump(capsys, "--stage", "optimized")
    assert "backward" not in out and "reduce_sum[axes=(0,1)]" in out


def test_source_lines(capsys):
    out = dump(capsys, "--source")
    with open(os.path.join(ROOT, EXAMPLE)) as f:
        lines = f.read().splitlines()
    n_matmul = lines.index("    logits = x @ w + b") + 1
    n_ce = lines.index("    return nn.cross_entropy(logits, labels)") + 1
    rows = out.splitlines()
    assert rows[1].startswith("  %4: f32[8,3] = matmul %0, %1")
    assert rows[1].endswith(f"# {EXAMPLE}:{n_matmul}")
    assert rows[3].endswith(f"# {EXAMPLE}:{n_ce}")


def test_stages_are_an_extensible_table():
    assert list(STAGE_NAMES)[:3] == ["traced", "grad", "optimized"]


def test_errors():
    with pytest.raises(ArgumentError, match="FILE.py:FUNCTION"):
        main(["no_colon_here", *ARGS])
    with pytest.raises(ArgumentError, match="no function named 'nope'"):
        main([f"{EXAMPLE}:nope", *ARGS])
    with pytest.raises(ArgumentError, match="--args"):
        main([TARGET, "--args", "f32[8,6], float[3]"])
    with pytest.raises(GradError, match="input 3 of type i32"):
        main([TARGET, *ARGS, "--grad", "--argnums", "3"])


def test_command_line(tmp_path):
    env = child_env()
    run = subprocess.run([sys.executable, "-m", "vkgrad", "dump", TARGET, *ARGS, "--grad",
                          "--argnums", "1,2"], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout == GRAD_OPTIMIZED
    bad = tmp_path / "model.py"
    bad.write_text(textwrap.dedent("""
        def f(a, b):
            return a @ b
    """))
    run = subprocess.run([sys.executable, "-m", "vkgrad", "dump", f"{bad}:f", "--args",
                          "f32[3,4], f32[5,6]"], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 1
    assert "matmul of f32[3,4] by f32[5,6]" in run.stderr and "model.py:3" in run.stderr


def test_the_glsl_stage_prints_each_kernel_complete_and_compilable():
    """`--stage glsl` prints the shader each dispatch compiles: a hand-written kernel's file
    with its defines and spliced loads/stores, not only its name."""
    def f(x, w, b):
        return vnp.sum(vnp.log_softmax(vnp.maximum(x @ w + b, 0.0), axis=-1))
    args = [np.ones(s, np.float32) for s in ((8, 16), (16, 12), (12,))]
    text = vg.jit(f, backend="vulkan").lower(*args).as_text("glsl")
    kernels = text.split("// ==== ")[1:]
    assert kernels and "hand-written kernel vkgrad/kernels_glsl/" in text
    for k in kernels:
        if "(same source as" in k:
            continue
        source = k[k.index("#version"):]
        assert compile_glsl(source, name="dumped")   # as printed, with -I kernels_glsl
