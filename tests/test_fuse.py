"""Golden text for the fusion pass: parse, canonicalize + fuse, print; plus its contract."""

import numpy as np

import vkgrad as vg
from vkgrad.ir.parser import parse_program
from vkgrad.passes.fuse import canonicalize_for_lowering, fuse
from vkgrad.ir.verifier import verify

SOURCE = """program f(%0: f32[4,5], %1: f32[5,6], %2: f32[6]) -> (f32[], f32[5,6]) {
  %3: f32[4,6] = matmul %0, %1
  %4: f32[4,6] = add %3, %2
  %5: f32[4,6] = max %4, 0.0:f32
  %6: f32[] = reduce_sum[axes=(0,1)] %5
  %7: bool[4,6] = lt 0.0:f32, %4
  %8: f32[4,6] = select %7, %5, 0.0:f32
  %9: f32[5,6] = matmul[transpose_a=True] %0, %8
  %10: f32[6,5] = transpose[perm=(1,0)] %9
  %11: f32[30] = reshape[shape=(30,)] %10
  %12: f32[] = reduce_sum[axes=(0,)] %11
  %13: f32[5,6] = reshape[shape=(5,6)] %9
  return %6, %13
}
"""

# Reading it: a value read by a kernel (matmul, reduce_sum) or returned is materialized; every
# other elementwise/layout value is recomputed inside the fused kernels that need it (add, max
# appear in two kernels); a reshape of a materialized value is an alias (no kernel); kernels run
# as late as possible (the relu for the sum runs after the weight-gradient matmul).
EXPECTED = """program f(%0: f32[4,5], %1: f32[5,6], %2: f32[6]) -> (f32[], f32[5,6]) {
  %3: f32[4,6] = matmul %0, %1
  %4: f32[4,6] = fused %3, %2 {
      %5: f32[4,6] = add %3, %2
      %6: f32[4,6] = max %5, 0.0:f32
      %7: bool[4,6] = lt 0.0:f32, %5
      %4: f32[4,6] = select %7, %6, 0.0:f32
  }
  %8: f32[5,6] = matmul[transpose_a=True] %0, %4
  %9: f32[5,6] = reshape[shape=(5,6)] %8
  %6: f32[4,6] = fused %3, %2 {
      %5: f32[4,6] = add %3, %2
      %6: f32[4,6] = max %5, 0.0:f32
  }
  %10: f32[30] = fused %8 {
      %11: f32[6,5] = transpose[perm=(1,0)] %8
      %10: f32[30] = reshape[shape=(30,)] %11
  }
  %12: f32[] = reduce_sum[axes=(0,1)] %6
  %13: f32[] = reduce_sum[axes=(0,)] %10
  return %12, %9
}
"""


def test_fuse_golden():
    fused = fuse.apply(canonicalize_for_lowering.apply(parse_program(SOURCE)))
    verify(fused)
    assert str(fused) == EXPECTED


def test_fused_program_computes_the_same():
    p = parse_program(SOURCE)
    fused = fuse.apply(canonicalize_for_lowering.apply(p))
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(v.shape).astype(np.float32) for v in p.inputs]
    for a, b in zip(vg.run_program(p, *args), vg.run_program(fused, *args)):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_reduction_over_outer_axes_is_canonicalized():
    p = parse_program("""program g(%0: f32[3,4,5]) -> f32[4] {
  %1: f32[4] = reduce_sum[axes=(0,2)] %0
  return %1
}
""")
    c = canonicalize_for_lowering.apply(p)
    assert str(c) == """program g(%0: f32[3,4,5]) -> f32[4] {
  %1: f32[4,3,5] = transpose[perm=(1,0,2)] %0
  %2: f32[4] = reduce_sum[axes=(1,2)] %1
  return %2
}
"""
    x = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    np.testing.assert_allclose(vg.run_program(c, x)[0], x.sum((0, 2)))


def test_dump_fused_and_plan_stages(capsys):
    from vkgrad.dump import main
    args = ["examples/model.py:loss", "--args", "f32[784,10], f32[64,784], i32[64]", "--grad"]
    assert main(args + ["--stage", "fused"]) == 0
    text = capsys.readouterr().out
    assert " = fused" in text and "log_softmax" in text
    assert main(args + ["--stage", "plan"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("plan loss: ") and "matmul" in text and "return" in text
