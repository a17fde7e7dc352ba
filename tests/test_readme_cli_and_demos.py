"""A newcomer's first run: the command line (help, dump) helps, the demos run for any step
count and backend, the default backend on a CPU-only Vulkan machine. (The README's blocks run
as pasted: tests/test_readme_blocks.py.)"""

import os
import re
import subprocess
import sys

import numpy as np
import pytest

import vkgrad as vg
from child_env import child_env
from vkgrad.execution import compiled
from vkgrad.runtime import get_device

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = open(os.path.join(ROOT, "README.md")).read()


def run(args, env=None, **kw):
    return subprocess.run(args, capture_output=True, text=True, cwd=ROOT,
                          env=child_env(**(env or {})), timeout=300, **kw)


def test_readme_mentions_profile_and_the_training_step_learns():
    """The README's blocks run and print what it shows: tests/test_readme_blocks.py."""
    assert "print(vg.profile(" in README and "`vg.profile(step, *args)` prints" not in README
    losses = [float(v) for v in re.findall(r"^[0-2] ([0-9.]+)$", README, re.M)[:3]]
    assert len(losses) == 3 and losses[2] < losses[0]


def test_vkgrad_command_help_and_no_arguments():
    r = run([sys.executable, "-m", "vkgrad", "--help"])
    assert r.returncode == 0 and "vkgrad dump" in r.stdout and not r.stderr
    r = run([sys.executable, "-m", "vkgrad"])
    assert r.returncode == 2 and "no command given" in r.stderr and "vkgrad devices" in r.stderr
    assert ".venv/bin/vkgrad" in README


@pytest.mark.parametrize("steps", [1, 3])
def test_demo_runs_for_few_steps(steps):
    r = run([sys.executable, "examples/demo.py", "--steps", str(steps)])
    assert r.returncode == 0, r.stderr + r.stdout
    assert f"mean loss of the first {steps} steps" in r.stdout


@pytest.mark.skipif(not os.path.exists(os.path.join(ROOT, ".venv", ".vkgrad-setup")),
                    reason="make runs the set-up first, which needs a package registry: the "
                           "GPU machine has none and its checkout no .venv")
def test_mlp_demo_on_the_numpy_backend_through_make():
    r = run(["make", "demo-mlp", "DEMO_ARGS=--steps 60"], env={"VKGRAD_BACKEND": "numpy"})
    assert r.returncode == 0, r.stderr + r.stdout
    assert "backend: the numpy interpreter" in r.stdout and "AssertionError" not in r.stderr
    assert re.search(r"then [0-9.]+ ms/step over steps 1-59", r.stdout)
    assert "mean loss of the first 10 steps" in r.stdout and ": falling" in r.stdout


def test_dump_arity_pytrees_and_dtype_policy(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("import vkgrad.numpy as vnp\n"
                 "def loss(params, x, extra):\n"
                 "    return vnp.sum(x @ params['w'] + params['b']) + vnp.sum(extra[1])\n")
    r = run([sys.executable, "-m", "vkgrad", "dump", f"{f}:loss", "--args", "f32[3,2], f32[4,3]"])
    assert r.returncode == 1
    assert "takes 3 argument(s) (params, x, extra), but --args gives 2 type(s)" in r.stderr
    r = run([sys.executable, "-m", "vkgrad", "dump", f"{f}:loss", "--args",
             "{w: f32[3,2], b: f32[2]}, f32[4,3], [f32[2], i64[5]]", "--grad"])
    assert r.returncode == 0, r.stderr
    assert "%4: i32[5]" in r.stdout                       # i64 is stored as i32
    assert "# inputs: %0 params['b'], %1 params['w'], %2 x, %3 extra[0], %4 extra[1]" in r.stdout
    assert "-> (f32[], f32[2], f32[3,2])" in r.stdout     # both leaves of params differentiated


def test_default_backend_on_a_cpu_only_vulkan_machine(monkeypatch, capsys):
    if get_device().info.type != "CPU":
        pytest.skip("this machine has a Vulkan GPU")
    monkeypatch.delenv("VKGRAD_BACKEND", raising=False)
    monkeypatch.delenv("VKGRAD_DEVICE", raising=False)
    monkeypatch.setattr(compiled, "_noticed_cpu_device", False)
    assert vg.default_backend() == "numpy"
    assert vg.default_backend() == "numpy"
    err = capsys.readouterr().err
    assert err.count("vkgrad: running on the numpy interpreter") == 1          # one line, once
    assert "VKGRAD_BACKEND=vulkan" in err and err.count("\n") == 1
    assert vg.jit(lambda x: x * 2)(np.ones(3, np.float32)).__class__ is vg.Array
    monkeypatch.setenv("VKGRAD_DEVICE", "0")               # asking for the device: Vulkan
    assert vg.default_backend() == "vulkan"
    monkeypatch.setenv("VKGRAD_BACKEND", "vulkan")
    assert vg.default_backend() == "vulkan"
