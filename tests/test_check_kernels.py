"""vg.check_kernels and `vkgrad check`: each Vulkan kernel of a plan run alone on lavapipe from
the interpreter's values of its inputs, compared with the interpreter's values of its outputs."""

import inspect

import numpy as np
import pytest

import vkgrad as vg
import vkgrad.nn as nn
import vkgrad.numpy as vnp
from vkgrad.__main__ import main
from vkgrad.lowering.glsl import code_for_op
from vkgrad.primitives.lax import exp_p


def mlp_loss(p, x, y):
    h = nn.relu(x @ p["w1"] + p["b1"])
    return nn.cross_entropy(h @ p["w2"] + p["b2"], y)


def mlp_step(p, x, y):
    value, g = vg.value_and_grad(mlp_loss)(p, x, y)
    return value, vg.tree_util.tree_map(lambda w, d: w - 0.1 * d, p, g)


def mlp_args():
    rng = np.random.default_rng(0)
    p = {"w1": rng.standard_normal((5, 7)).astype(np.float32), "b1": np.zeros(7, np.float32),
         "w2": rng.standard_normal((7, 3)).astype(np.float32), "b2": np.zeros(3, np.float32)}
    return p, rng.standard_normal((4, 5)).astype(np.float32), np.array([0, 2, 1, 1], np.int32)


def scaled_exp(x, w):
    h = x @ w
    e = vnp.exp(h) * 2.0
    return vnp.sum(e, axis=1)


def test_an_mlp_step_agrees_kernel_by_kernel():
    args = mlp_args()
    table = vg.check_kernels(mlp_step, *args)
    plan = vg.jit(mlp_step, backend="vulkan").lower(*args).lowered
    kernels = list(dict.fromkeys(id(st.eqn) for st in plan.steps))
    assert len(table.rows) == len(kernels)          # one row per kernel
    assert not table.flagged and all(r["ok"] for r in table.rows)
    assert all(r["placement"] == "device" and r["gpu_us"] > 0 for r in table.rows)
    assert all(r["max_rel"] <= 1e-3 for r in table.rows)
    names = " ".join(r["kernel"] + " " + r["primitives"] for r in table.rows)
    for what in ("matmul", "log_softmax", "reduce_sum", "max"):
        assert what in names
    assert {r["part"] for r in table.rows} >= {"forward", "backward"}
    text = str(table)
    assert text.splitlines()[0].split()[:3] == ["kernel", "part", "primitives"]
    assert len(text.splitlines()) == len(table.rows) + 2
    assert "all agree with the interpreter" in text.splitlines()[-1]
    assert table._repr_markdown_().count("\n|") == len(table.rows) + 1


def test_a_wrong_kernel_is_flagged_with_its_source_line(monkeypatch):
    x = np.full((3, 4), 0.1, np.float32)
    w = np.ones((4, 2), np.float32)
    assert not vg.check_kernels(scaled_exp, x, w).flagged
    monkeypatch.setitem(code_for_op, exp_p, "(exp({0}) * 1.5)")   # a wrong exp kernel
    table = vg.check_kernels(scaled_exp, x, w)
    (bad,) = table.flagged
    assert "exp" in bad["primitives"] and bad["max_rel"] > 0.1
    lines, first = inspect.getsourcelines(scaled_exp)
    exp_line = first + next(i for i, s in enumerate(lines) if "vnp.exp" in s)
    path, _, numbers = bad["source"].rpartition(":")
    assert path.endswith("test_check_kernels.py") and str(exp_line) in numbers.split(",")
    assert [r["ok"] for r in table.rows].count(True) == len(table.rows) - 1
    assert f"DISAGREES at {bad['source']}" in str(table)
    assert "1 of 2 kernels disagree" in str(table).splitlines()[-1]


def test_a_program_on_the_interpreter_says_why(x64):
    table = vg.check_kernels(lambda x: vnp.sin(x) * 2.0, np.ones(3, np.float64))
    assert table.rows and all(r["placement"].startswith("interpreter: ") and r["ok"]
                              for r in table.rows)
    assert "f64" in table.rows[0]["placement"]


def test_the_check_command(tmp_path, capsys):
    src = tmp_path / "model.py"
    src.write_text(inspect.getsource(mlp_loss).replace("nn.", "vg.nn."), encoding="utf-8")
    src.write_text("import vkgrad as vg\n\n" + src.read_text(encoding="utf-8"), encoding="utf-8")
    rc = main(["check", f"{src}:mlp_loss", "--args",
               "{w1: f32[5,7], b1: f32[7], w2: f32[7,3], b2: f32[3]}, f32[4,5], i32[4]",
               "--int-high", "3"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "mlp_loss: 4 kernels, all agree" in out and "log_softmax" in out
