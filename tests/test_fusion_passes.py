"""Golden text for the passes that fuse into kernels and decide what the backward saves:
input IR -> parse -> pass -> expected IR, each also run on the interpreter against its input
(a pass must not change what a program computes), and the verifier after each (conftest)."""

import numpy as np
import pytest

import vkgrad as vg
from vkgrad.errors import ArgumentError
from vkgrad.ir.parser import parse_program
from vkgrad.ir.verifier import verify
from vkgrad.pipeline import PASSES, disabled_passes, fuse_program

CASES = {}

# ---------------------------------------------------------------- producer fusion
# sum(x * y) never writes x * y: the reduction computes it in its loads. relu(x + b) feeding a
# matmul is cheap (2 ops, one full-size input), so the matmul computes it as it loads A.
CASES["fuse_producers"] = ("""
program f(%0: f32[4,6], %1: f32[4,6], %2: f32[6,3], %3: f32[6]) -> (f32[4], f32[4,3]) {
  %4: f32[4,6] = fused %0, %1 {
      %4: f32[4,6] = mul %0, %1
  }
  %5: f32[4] = reduce_sum[axes=(1,)] %4
  %6: f32[4,6] = fused %0, %3 {
      %7: f32[4,6] = add %0, %3
      %6: f32[4,6] = max %7, 0.0:f32
  }
  %8: f32[4,3] = matmul %6, %2
  return %5, %8
}
""", """
program f(%0: f32[4,6], %1: f32[4,6], %2: f32[6,3], %3: f32[6]) -> (f32[4], f32[4,3]) {
  %4: f32[4] = fused[kind=input] %0, %1 {
      %5: f32[4,6] = mul %0, %1
      %4: f32[4] = reduce_sum[axes=(1,)] %5
  }
  %6: f32[4,3] = fused[kind=input] %0, %3, %2 {
      %7: f32[4,6] = add %0, %3
      %8: f32[4,6] = max %7, 0.0:f32
      %6: f32[4,3] = matmul %8, %2
  }
  return %4, %6
}
""")

# ---------------------------------------------------------------- epilogue fusion
# bias, activation and a residual add at the matmul's store; it writes the pre-activation too
# (a result the program returns, as a backward would read it), not its own raw result.
CASES["fuse_epilogues"] = ("""
program f(%0: f32[4,5], %1: f32[5,6], %2: f32[6], %3: f32[4,6]) -> (f32[4,6], f32[4,6]) {
  %4: f32[4,6] = matmul %0, %1
  %5: f32[4,6], %6: f32[4,6] = fused %4, %2, %3 {
      %5: f32[4,6] = add %4, %2
      %7: f32[4,6] = max %5, 0.0:f32
      %6: f32[4,6] = add %7, %3
  }
  return %5, %6
}
""", """
program f(%0: f32[4,5], %1: f32[5,6], %2: f32[6], %3: f32[4,6]) -> (f32[4,6], f32[4,6]) {
  %4: f32[4,6], %5: f32[4,6] = fused[kind=output] %0, %1, %2, %3 {
      %6: f32[4,6] = matmul %0, %1
      %4: f32[4,6] = add %6, %2
      %7: f32[4,6] = max %4, 0.0:f32
      %5: f32[4,6] = add %7, %3
  }
  return %4, %5
}
""")

# ---------------------------------------------------------------- row fusion
# x * sum(x) + w and its row max: a reduction, the loop kernel that reads its result at its
# own row, a reduction of that: one row kernel that writes the two results. (A value of a
# row read at another row keeps today's kernels: tests/test_row_kernels.py.)
CASES["fuse_rows"] = ("""
program f(%0: f32[4,6], %1: f32[6]) -> (f32[4,6], f32[4]) {
  %2: f32[4] = reduce_sum[axes=(1,)] %0
  %3: f32[4,6] = fused %2, %0, %1 {
      %4: f32[4,1] = reshape[shape=(4,1)] %2
      %5: f32[4,6] = mul %0, %4
      %3: f32[4,6] = add %5, %1
  }
  %6: f32[4] = reduce_max[axes=(1,)] %3
  return %3, %6
}
""", """
program f(%0: f32[4,6], %1: f32[6]) -> (f32[4,6], f32[4]) {
  %2: f32[4,6], %3: f32[4] = fused[kind=row] %0, %1 {
      %4: f32[4] = reduce_sum[axes=(1,)] %0
      %5: f32[4,1] = reshape[shape=(4,1)] %4
      %6: f32[4,6] = mul %0, %5
      %2: f32[4,6] = add %6, %1
      %3: f32[4] = reduce_max[axes=(1,)] %2
  }
  return %2, %3
}
""")

# ---------------------------------------------------------------- multi-output fusion
# the bias gradient (column sum of g) and the weight gradient x^T g: one pass over g.
CASES["fuse_multi_output"] = ("""
program f(%0: f32[8,5], %1: f32[8,6]) -> (f32[5,6], f32[6]) {
  %2: f32[5,6] = matmul[transpose_a=True] %0, %1
  %3: f32[6] = reduce_sum[axes=(0,)] %1
  return %2, %3
}
""", """
program f(%0: f32[8,5], %1: f32[8,6]) -> (f32[5,6], f32[6]) {
  %2: f32[5,6], %3: f32[6] = fused[kind=multi_output] %0, %1 {
      %2: f32[5,6] = matmul[transpose_a=True] %0, %1
      %3: f32[6] = reduce_sum[axes=(0,)] %1
  }
  return %2, %3
}
""")

# sibling reductions (a layer norm's backward: sum(g * w) and sum(g * w * xhat) over each row):
# one reduction kernel with two accumulators, g and w loaded once per element.
CASES["fuse_multi_output:siblings"] = ("""
program ln_bwd(%0: f32[4,6], %1: f32[6], %2: f32[4,6]) -> (f32[4], f32[4]) {
  %3: f32[4] = fused[kind=input] %0, %1 {
      %4: f32[4,6] = mul %0, %1
      %3: f32[4] = reduce_sum[axes=(1,)] %4
  }
  %5: f32[4] = fused[kind=input] %0, %1, %2 {
      %6: f32[4,6] = mul %0, %1
      %7: f32[4,6] = mul %6, %2
      %5: f32[4] = reduce_sum[axes=(1,)] %7
  }
  return %3, %5
}
""", """
program ln_bwd(%0: f32[4,6], %1: f32[6], %2: f32[4,6]) -> (f32[4], f32[4]) {
  %3: f32[4], %4: f32[4] = fused[kind=multi_output] %0, %1, %2 {
      %5: f32[4,6] = mul %0, %1
      %3: f32[4] = reduce_sum[axes=(1,)] %5
      %6: f32[4,6] = mul %0, %1
      %7: f32[4,6] = mul %6, %2
      %4: f32[4] = reduce_sum[axes=(1,)] %7
  }
  return %3, %4
}
""")

# ---------------------------------------------------------------- horizontal fusion
# two parameters' updates of different shapes: one dispatch. The step count's update stays a
# kernel of its own: the others read the count, which it may overwrite in place.
CASES["fuse_horizontal"] = ("""
program adam(%0: f32[], %1: f32[4,5], %2: f32[4,5], %3: f32[3], %4: f32[3]) -> (f32[4,5], f32[3], f32[]) {
  %5: f32[4,5] = fused %0, %1, %2 {
      %6: f32[] = add %0, 1.0:f32
      %7: f32[4,5] = mul %2, %6
      %5: f32[4,5] = add %1, %7
  }
  %8: f32[3] = fused %0, %3, %4 {
      %9: f32[] = add %0, 1.0:f32
      %10: f32[3] = mul %4, %9
      %8: f32[3] = add %3, %10
  }
  %11: f32[] = fused %0 {
      %11: f32[] = add %0, 1.0:f32
  }
  return %5, %8, %11
}
""", """
program adam(%0: f32[], %1: f32[4,5], %2: f32[4,5], %3: f32[3], %4: f32[3]) -> (f32[4,5], f32[3], f32[]) {
  %5: f32[4,5], %6: f32[3] = fused[kind=horizontal] %0, %2, %1, %4, %3 {
      %7: f32[] = add %0, 1.0:f32
      %8: f32[4,5] = mul %2, %7
      %5: f32[4,5] = add %1, %8
      %9: f32[] = add %0, 1.0:f32
      %10: f32[3] = mul %4, %9
      %6: f32[3] = add %3, %10
  }
  %11: f32[] = fused %0 {
      %11: f32[] = add %0, 1.0:f32
  }
  return %5, %6, %11
}
""")

# Reductions of one op at the same point of the schedule, any shapes: one kernel. The max (another
# op) reads the first sum, so the column sum after it starts a second group, which the last sum
# joins (it reads the first group's result, not its own group's).
CASES["fuse_horizontal_reductions"] = ("""
program norms(%0: f32[4,5], %1: f32[3], %2: f32[2,3,4], %3: f32[3]) -> (f32[], f32[], f32[], f32[2,4], f32[]) {
  %4: f32[] = fused[kind=input] %0 {
      %5: f32[4,5] = mul %0, %0
      %4: f32[] = reduce_sum[axes=(0,1)] %5
  }
  %6: f32[] = fused[kind=input] %1 {
      %7: f32[3] = mul %1, %1
      %6: f32[] = reduce_sum[axes=(0,)] %7
  }
  %8: f32[] = fused[kind=input] %3, %4 {
      %9: f32[3] = mul %3, %4
      %8: f32[] = reduce_max[axes=(0,)] %9
  }
  %10: f32[2,4] = reduce_sum[axes=(1,)] %2
  %11: f32[] = fused[kind=input] %3, %6 {
      %12: f32[3] = mul %3, %6
      %11: f32[] = reduce_sum[axes=(0,)] %12
  }
  return %4, %6, %8, %10, %11
}
""", """
program norms(%0: f32[4,5], %1: f32[3], %2: f32[2,3,4], %3: f32[3]) -> (f32[], f32[], f32[], f32[2,4], f32[]) {
  %4: f32[], %5: f32[] = fused[kind=horizontal_reduce] %0, %1 {
      %6: f32[4,5] = mul %0, %0
      %4: f32[] = reduce_sum[axes=(0,1)] %6
      %7: f32[3] = mul %1, %1
      %5: f32[] = reduce_sum[axes=(0,)] %7
  }
  %8: f32[] = fused[kind=input] %3, %4 {
      %9: f32[3] = mul %3, %4
      %8: f32[] = reduce_max[axes=(0,)] %9
  }
  %10: f32[2,4], %11: f32[] = fused[kind=horizontal_reduce] %2, %3, %5 {
      %10: f32[2,4] = reduce_sum[axes=(1,)] %2
      %12: f32[3] = mul %3, %5
      %11: f32[] = reduce_sum[axes=(0,)] %12
  }
  return %4, %5, %8, %10, %11
}
""")

# ---------------------------------------------------------------- save or recompute
# The backward needs tanh(x @ w + b) (its derivative) and exp of a slice of another product.
# The min cut saves the first matmul's result (a kernel's result: written anyway) and
# recomputes add and tanh in the backward; the slice is smaller than the matmul it comes from,
# so exp(slice) is saved (`save`) instead.
CASES["remat"] = ("""
program f(%0: f32[8,5], %1: f32[5,6], %2: f32[6], %3: f32[8,6], %4: f32[5,8]) -> (f32[5,6], f32[2,8]) {
  %5: f32[8,6] = matmul %0, %1
  %6: f32[8,6] = add %5, %2
  %7: f32[8,6] = tanh %6
  %8: f32[8,8] = matmul %0, %4
  %9: f32[2,8] = slice[limit=(2,8), start=(0,0), step=(1,1)] %8
  %10: f32[2,8] = exp %9
  # ---- backward ----
  %11: f32[8,6] = mul %7, %7
  %12: f32[8,6] = mul %11, %3
  %13: f32[5,6] = matmul[transpose_a=True] %0, %12
  %14: f32[2,8] = mul %10, 2.0:f32
  return %13, %14
}
""", """
program f(%0: f32[8,5], %1: f32[5,6], %2: f32[6], %3: f32[8,6], %4: f32[5,8]) -> (f32[5,6], f32[2,8]) {
  %5: f32[8,6] = matmul %0, %1
  %6: f32[8,6] = add %5, %2
  %7: f32[8,6] = tanh %6
  %8: f32[8,8] = matmul %0, %4
  %9: f32[2,8] = slice[limit=(2,8), start=(0,0), step=(1,1)] %8
  %10: f32[2,8] = exp %9
  %11: f32[2,8] = save %10
  # ---- backward ----
  %12: f32[8,6] = add %5, %2
  %13: f32[8,6] = tanh %12
  %14: f32[8,6] = mul %13, %13
  %15: f32[8,6] = mul %14, %3
  %16: f32[5,6] = matmul[transpose_a=True] %0, %15
  %17: f32[2,8] = mul %11, 2.0:f32
  return %16, %17
}
""")


def _args(p, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(v.shape).astype(np.float32) for v in p.inputs]


@pytest.mark.parametrize("name", sorted(CASES))
def test_pass_golden(name):
    source, expected = CASES[name]
    p = parse_program(source)
    out = PASSES[name.split(":")[0]].apply(p)
    verify(out)
    assert str(out) == expected.lstrip("\n")
    args = _args(p)
    for a, b in zip(vg.run_program(p, *args), vg.run_program(out, *args)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_expensive_chain_stays_out_of_matmul_loads():
    """gelu before a matmul is too much work to redo in every tile's loads: it stays a loop
    kernel (written once), while a reduction takes any chain."""
    p = parse_program("""
program g(%0: f32[4,6], %1: f32[6,3]) -> f32[4,3] {
  %2: f32[4,6] = fused %0 {
      %3: f32[4,6] = mul %0, %0
      %4: f32[4,6] = mul %3, %0
      %5: f32[4,6] = mul %4, 0.044715:f32
      %6: f32[4,6] = add %0, %5
      %7: f32[4,6] = tanh %6
      %8: f32[4,6] = add %7, 1.0:f32
      %2: f32[4,6] = mul %8, %0
  }
  %9: f32[4,3] = matmul %2, %1
  return %9
}
""")
    assert str(PASSES["fuse_producers"].apply(p)) == str(p)


def test_epilogue_does_not_take_an_optimizer_update():
    """Three more full-size inputs at a matmul's store is a kernel of its own."""
    p = parse_program("""
program h(%0: f32[4,5], %1: f32[5,6], %2: f32[4,6], %3: f32[4,6], %4: f32[4,6]) -> f32[4,6] {
  %5: f32[4,6] = matmul %0, %1
  %6: f32[4,6] = fused %5, %2, %3, %4 {
      %7: f32[4,6] = mul %5, %2
      %8: f32[4,6] = mul %7, %3
      %6: f32[4,6] = add %8, %4
  }
  return %6
}
""")
    assert str(PASSES["fuse_epilogues"].apply(p)) == str(p)


def test_disable_switch_names(monkeypatch):
    assert disabled_passes("fuse, remat") == {"fuse", "remat"}
    monkeypatch.setenv("VKGRAD_DISABLE_PASSES", "cse,simplify")
    assert disabled_passes() == {"cse", "simplify"}
    with pytest.raises(ArgumentError, match="unknown pass.*fusion"):
        disabled_passes("fusion")


MODEL_FUSED = """\
program loss(%0: f32[784,10], %1: f32[64,784], %2: i32[64]) -> (f32[], f32[784,10]) {
  %3: f32[64,10] = matmul %1, %0
  %4: f32[64,10] = log_softmax[axis=1] %3
  # ---- backward ----
  %5: f32[64,10] = fused[kind=input] %2, %4 {
      # ---- backward ----
      %6: i32[64,1] = reshape[shape=(64,1)] %2
      %7: i32[10] = iota[dimension=0, dtype=i32, shape=(10,)]
      %8: bool[64,10] = eq %6, %7
      %9: f32[64,10] = convert[dtype=f32] %8
      %10: f32[64,10] = mul -0.015625:f32, %9
      %5: f32[64,10] = log_softmax_bwd[axis=1] %4, %10
  }
  # ---- forward ----
  %11: f32[] = fused[kind=output] %2, %4 {
      %12: i32[64,1] = reshape[shape=(64,1)] %2
      %13: i32[10] = iota[dimension=0, dtype=i32, shape=(10,)]
      %14: bool[64,10] = eq %12, %13
      %15: f32[64,10] = convert[dtype=f32] %14
      %16: f32[64,10] = mul %15, %4
      %17: f32[] = reduce_sum[axes=(0,1)] %16
      %18: f32[] = mul %17, 0.015625:f32
      %11: f32[] = neg %18
  }
  # ---- backward ----
  %19: f32[784,10] = matmul[transpose_a=True] %1, %5
  return %11, %19
}
"""


def test_whole_pipeline_on_the_readme_model():
    """The README's model, forward and backward: 4 kernels. The one-hot of the labels is
    recomputed where it is needed (the loss reduction's loads, the backward's), the loss
    scaling is the reduction's epilogue, and nothing elementwise is a kernel of its own."""
    from examples.model import loss
    p = vg.make_ir(vg.value_and_grad(loss))(vg.ShapeDtype((784, 10), "f32"),
                                           vg.ShapeDtype((64, 784), "f32"),
                                           vg.ShapeDtype((64,), "i32"))
    from vkgrad.passes import optimize
    fused = fuse_program(optimize(p))
    assert str(fused) == MODEL_FUSED
