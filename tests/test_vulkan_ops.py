"""Every row of the table (tests/cases.py) on Vulkan (lavapipe in CI) against the numpy
interpreter.

Each row runs through vg.jit on the Vulkan backend and on the numpy backend, in float32;
results must agree within the row's tolerance. The lowering's stages are checked too: no row may
fall back to the interpreter, and together the rows reach every primitive on the Vulkan path.
"""

import numpy as np
import pytest

import vkgrad as vg
import vkgrad.numpy as vnp
from cases import (BY_NAME, CASES, HOST_DRIVEN, REMOVED_BEFORE_LOWERING, VULKAN_CASES,
                   all_primitives, ids,
                   primitives_in)
from vkgrad import primitives as P
from vkgrad.ir.core import PRIMITIVES
from vkgrad.passes import optimize

_jitted: dict = {}


def on_vulkan(case):
    """The row's vg.jit for Vulkan, kept so the completeness test reuses its compiled program."""
    if case.name not in _jitted:
        _jitted[case.name] = vg.jit(case.fun, backend="vulkan")
    return _jitted[case.name]


def _close(got, want, case):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, case.name
    if want.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want, err_msg=case.name)
    else:
        scale = max(1.0, float(np.max(np.abs(want))) if want.size else 1.0)
        np.testing.assert_allclose(got, want, rtol=case.vk_rtol, atol=case.vk_rtol / 10 * scale,
                                   err_msg=case.name)


@pytest.mark.parametrize("case", VULKAN_CASES, ids=ids(VULKAN_CASES))
def test_op_on_vulkan_matches_interpreter(case):
    args = case.args32()
    on_gpu = on_vulkan(case)
    want = vg.jit(case.fun, backend="numpy")(*args)
    got = on_gpu(*args)
    lowered = on_gpu.lower(*args)
    assert lowered.fallback_reason is None, lowered.fallback_reason
    flat_got = got if isinstance(got, (tuple, list)) else [got]
    flat_want = want if isinstance(want, (tuple, list)) else [want]
    assert len(flat_got) == len(flat_want)
    for g, w in zip(flat_got, flat_want):
        assert isinstance(g, vg.Array)
        _close(g, w, case)


def _on_vulkan_primitives(case) -> set:
    """What the row runs on Vulkan: none if it falls back (its own test says why)."""
    stages = on_vulkan(case).lower(*case.args32()).stages
    return primitives_in(stages["fused"]) if "fused" in stages else set()


COVERED = [c for c in CASES if isinstance(c.vulkan, str)]


@pytest.mark.parametrize("case", COVERED, ids=ids(COVERED))
def test_a_row_left_off_vulkan_names_a_row_that_covers_it(case):
    """A row that names another instead of running on Vulkan: that row runs there, and runs
    every kernel and layout primitive of this one's optimised program. (Elementwise primitives
    all share one template; each runs on Vulkan somewhere, checked below.)"""
    other = BY_NAME.get(case.vulkan)
    assert other is not None and other.vulkan is True, \
        f"{case.name}: vulkan={case.vulkan!r} must name a row that runs on Vulkan"
    mine = {p for p in primitives_in(optimize(vg.make_ir(case.fun)(*case.args32())))
            if not PRIMITIVES[p].elementwise} - REMOVED_BEFORE_LOWERING
    missing = mine - _on_vulkan_primitives(other)
    assert not missing, f"{case.name}: {other.name} does not run {sorted(missing)} on Vulkan"


def test_every_primitive_has_a_vulkan_lowering():
    """The table reaches every primitive on the Vulkan path (fused or kernel)."""
    seen = set().union(*(_on_vulkan_primitives(c) for c in VULKAN_CASES))
    assert P.stop_gradient_p.name not in seen   # the optimizer removes it before lowering
    assert "stop_gradient" in primitives_in(vg.make_ir(BY_NAME["stop_gradient"].fun)(
        *BY_NAME["stop_gradient"].args32()))     # ... from a row that has it
    missing = all_primitives() - seen - REMOVED_BEFORE_LOWERING - HOST_DRIVEN
    assert not seen & REMOVED_BEFORE_LOWERING
    if missing:
        off = {p: [c.name for c in CASES if c.vulkan is not True and p in primitives_in(
            vg.make_ir(c.fun)(*c.args32()))] for p in sorted(missing)}
        pytest.fail("primitives never run on Vulkan by the table (add rows to tests/cases.py "
                    f"that run them there): {sorted(missing)}; rows that have them but do not "
                    f"run on Vulkan: {off}")


def test_a_program_the_kernels_cannot_run_falls_back_counted_and_strict_refuses(monkeypatch):
    """Sorting rows longer than the argsort kernel holds (4096 on lavapipe's 32 KiB of shared
    memory): the program runs on the interpreter, the reason counted in vg.fallbacks();
    VKGRAD_STRICT=1 turns the fallback into a StrictModeError."""
    from vkgrad.lowering.sort import max_row
    n = max_row(vg.devices()[0]) + 1
    x = np.random.default_rng(0).standard_normal((2, n)).astype(np.float32)
    reason = f"argsort of rows longer than {n - 1} (the kernel sorts a row in shared memory)"
    before = vg.fallbacks().get(reason, 0)
    f = vg.jit(lambda x: vnp.sort(x, axis=1), backend="vulkan")
    np.testing.assert_array_equal(np.asarray(f(x)), np.sort(x, axis=1))
    assert f.lower(x).backend == "numpy" and f.lower(x).fallback_reason == reason
    assert vg.fallbacks()[reason] == before + 1
    monkeypatch.setenv("VKGRAD_STRICT", "1")
    with pytest.raises(vg.StrictModeError, match="argsort of rows longer"):
        vg.jit(lambda x: vnp.sort(x, axis=1), backend="vulkan")(x)
