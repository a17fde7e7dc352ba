"""The cooperative-matrix matmul (kernels_glsl/matmul_coop.comp, lowering/matmul_coop.py): the
planner for Target.h200() and Target.lavapipe() without a device, a float16 program's plan on
each (the tensor-core kernel there, converts around the f32 kernel here), and, on a device with
cooperative matrices, the kernel against the interpreter (lavapipe has none: CI runs the f16
programs on the scalar path, tests/test_float16.py)."""

import re

import numpy as np
import pytest

import vkgrad as vg
import vkgrad.numpy as vnp
from vkgrad.lowering.contracts import Unsupported
from vkgrad.lowering.matmul_coop import plan_matmul_coop, runs_on
from vkgrad.pipeline import Options, run_stages
from vkgrad.runtime import get_device
from vkgrad.target import Target

H200, LAVAPIPE = Target.h200(), Target.lavapipe()


def test_it_runs_where_the_target_has_the_shape():
    assert runs_on(H200) and not runs_on(LAVAPIPE)
    with pytest.raises(Unsupported, match="has none"):
        plan_matmul_coop(1, 64, 64, 64, False, False, 0, 0, LAVAPIPE)


@pytest.mark.parametrize("ta, tb", [(False, False), (True, False), (False, True), (True, True)])
def test_the_plan(ta, tb):
    (launch, roles), = plan_matmul_coop(3, 200, 72, 136, ta, tb, 200 * 72, 0, H200).steps
    d = dict(launch.defines)
    assert roles == ("a", "b", "c") and launch.spirv_env == "vulkan1.3"
    assert launch.groups == (2, 2, 3)                          # 128 x 128 blocks, the batch
    assert d["SG"] == 32 and d["OUT_F16"] == 1 and d["VEC"] == 1
    assert ("TRANS_A" in d, "TRANS_B" in d) == (ta, tb)
    lda, ldb = (200 if ta else 72), (72 if tb else 136)
    assert launch.push == (200, 136, 72, lda, ldb, 136, 200 * 72, 0, 200 * 136)
    # rows that do not start on 8 halves: element loads
    (odd, _), = plan_matmul_coop(1, 131, 45, 77, ta, tb, 0, 0, H200).steps
    assert "VEC" not in dict(odd.defines)


def _f16_program():
    def f(a, b):
        return vnp.tanh(a @ b)
    a = np.ones((64, 48), np.float16)
    b = np.ones((48, 40), np.float16)
    return vg.make_ir(f)(a, b)


def test_a_float16_matmul_is_the_tensor_core_kernel_on_the_h200_and_widened_on_lavapipe():
    plans = {name: run_stages(_f16_program(), "plan", Options(target=t))["plan"].text()
             for name, t in (("h200", H200), ("lavapipe", LAVAPIPE))}
    kernels = {name: re.findall(r"^  k\d+\s+(\S+)\s+\S+\s+(.*)$", text, re.M)
               for name, text in plans.items()}
    # the H200: the tensor-core kernel on the f16 operands, then tanh (and the round to f16)
    assert [k for k, _ in kernels["h200"]][0] == "matmul_coop"
    assert not any("convert" in what for k, what in kernels["h200"][:1])
    # lavapipe: the f32 kernel, its operands widened in its loads
    assert "matmul_coop" not in [k for k, _ in kernels["lavapipe"]]
    assert any("convert" in what and "matmul" in what for _, what in kernels["lavapipe"])


needs_coop = pytest.mark.skipif(not runs_on(get_device().target),
                                reason="the device has no cooperative matrices (lavapipe: the "
                                       "f16 programs run on the scalar path, test_float16.py)")


@needs_coop
@pytest.mark.parametrize("shape, ta, tb", [((2, 200, 72, 136), False, False),
                                           ((1, 131, 45, 77), True, False),
                                           ((1, 96, 64, 80), False, True),
                                           ((3, 40, 24, 56), True, True)])
def test_the_kernel_against_the_interpreter(shape, ta, tb):
    batch, m, k, n = shape
    rng = np.random.default_rng(0)
    a = rng.standard_normal((batch, k, m) if ta else (batch, m, k)).astype(np.float16)
    b = rng.standard_normal((batch, n, k) if tb else (batch, k, n)).astype(np.float16)

    def f(a, b):
        return (vnp.swapaxes(a, 1, 2) if ta else a) @ (vnp.swapaxes(b, 1, 2) if tb else b)

    got = np.asarray(vg.jit(f, backend="vulkan")(a, b)).astype(np.float32)
    want = np.asarray(vg.jit(f, backend="numpy")(a, b)).astype(np.float32)
    assert vg.fallbacks() == {} or all("matmul" not in r for r in vg.fallbacks())
    np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-3 * np.abs(want).max())
