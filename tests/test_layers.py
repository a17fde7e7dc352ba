"""The layering rule: a module imports only from its own layer or below, at the top of its file.

Layers, bottom to top (docs/compiler.md, "Layers"):
    1 errors, dtypes, config, target  2 the IR as data  3 the trace core (and vg.Array)
    4 primitives              5 transforms, passes, vkgrad.numpy, nn, optim, checkpoint
    6 lowering (and its kernel fusion)  7 the pipeline (stages, pass lists)
    8 runtime                 9 execution (jit, device Arrays, ...), dump, CLI

An import of a vkgrad module inside a function is refused too: it is how a cycle hides.
"""

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest
from child_env import child_env

PKG = Path(__file__).resolve().parent.parent / "vkgrad"

LAYERS = {
    "vkgrad.errors": 1, "vkgrad.dtypes": 1, "vkgrad.target": 1, "vkgrad.lru": 1, "vkgrad.config": 1,
    "vkgrad.traceback_util": 1,
    "vkgrad.ir": 2,
    "vkgrad.tracer": 3, "vkgrad.tree_util": 3, "vkgrad.tree": 3, "vkgrad.typing": 3,
    "vkgrad.primitives": 4,
    "vkgrad.transforms": 5, "vkgrad.passes": 5, "vkgrad.numpy": 5, "vkgrad.nn": 5,
    "vkgrad.optim": 5, "vkgrad.mixed_precision": 5, "vkgrad.serialization": 5, "vkgrad.random": 5,
    "vkgrad.lax": 5, "vkgrad.scipy": 5, "vkgrad.test_util": 5, "vkgrad.control_flow": 5,
    "vkgrad.ad_checkpoint": 5, "vkgrad.debug": 5, "vkgrad.initializers": 5,
    "vkgrad.lowering": 6,
    "vkgrad.pipeline": 7,
    "vkgrad.runtime": 8,
    "vkgrad.execution": 9, "vkgrad.dump": 9, "vkgrad.__main__": 9, "vkgrad.distributed": 9,
}
# The package's __init__ loads layers 1-5; the others through its lazy attributes (PEP 562).
ROOT_LAYER = 5


def module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> int | None:
    if module == "vkgrad":
        return ROOT_LAYER
    best = max((p for p in LAYERS if module == p or module.startswith(p + ".")), key=len,
               default=None)
    return LAYERS.get(best)


def is_module(name: str) -> bool:
    path = PKG.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def imported_modules(node, current: str, is_package: bool):
    """The vkgrad modules an Import/ImportFrom node loads."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.split(".")[0] == "vkgrad"]
    if node.level:   # relative: resolve against the current package
        base = current.split(".") if is_package else current.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    if target.split(".")[0] != "vkgrad":
        return []
    subs = [f"{target}.{a.name}" for a in node.names if is_module(f"{target}.{a.name}")]
    return subs or [target]


SOURCES = sorted(PKG.rglob("*.py"))


def test_every_module_has_a_layer():
    missing = [module_name(p) for p in SOURCES if layer_of(module_name(p)) is None]
    assert not missing, f"modules without a layer (add them to LAYERS and the docs): {missing}"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PKG.parent)))
def test_imports_go_down_and_sit_at_the_top(path):
    name = module_name(path)
    mine = layer_of(name)
    tree = ast.parse(path.read_text(), str(path))
    top = {id(n) for n in tree.body}
    problems = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        for target in imported_modules(node, name, path.name == "__init__.py"):
            if id(node) not in top:
                problems.append(f"line {node.lineno}: imports {target} inside a function or "
                                "class (an import placed there to dodge a cycle is the cycle)")
            theirs = layer_of(target)
            if theirs is not None and theirs > mine and target != "vkgrad":
                problems.append(f"line {node.lineno}: layer {mine} module imports {target} "
                                f"(layer {theirs})")
    assert not problems, f"{name}:\n  " + "\n  ".join(problems)


def test_the_ir_alone_loads_no_device_layer():
    code = ("import sys, vkgrad.ir.core\n"
            "bad = sorted(m for m in sys.modules if m.startswith(('vkgrad.lowering', "
            "'vkgrad.runtime', 'vkgrad.execution')) or m == 'kp')\n"
            "print(','.join(bad))")
    env = child_env()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         check=True).stdout.strip()
    assert out == "", f"importing vkgrad.ir.core loaded {out}"


def test_eager_ops_do_not_depend_on_import_order():
    """vnp on a device Array runs on its device whether or not anything imported the jit (a
    result this large stays on the device)."""
    code = ("import numpy as np, vkgrad.numpy as vnp\n"
            "from vkgrad.execution.device_put import device_put\n"
            "x = device_put(np.arange(5000, dtype=np.float32) / 5000)\n"
            "y = vnp.exp(x) + 1\n"
            "print(type(y).__name__, y._owned is not None, np.allclose(np.asarray(y), "
            "np.exp(np.arange(5000) / 5000) + 1))")
    env = child_env()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["Array", "True", "True"]
