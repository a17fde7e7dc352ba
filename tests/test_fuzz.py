"""Differential fuzzing: random well-typed programs (tests/fuzz_programs.py) on Vulkan against
the interpreter, values and gradients.

CI runs FUZZ_EXAMPLES programs, derandomized (the same ones every run). Longer runs explore:
    VKGRAD_FUZZ_EXAMPLES=2000 [VKGRAD_FUZZ_OPS=10] .venv/bin/python -m pytest tests/test_fuzz.py -x
(randomized then; hypothesis's database under .hypothesis/ replays a failure first next time).
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings

from fuzz_programs import Program, check, programs

_ENV_EXAMPLES = os.environ.get("VKGRAD_FUZZ_EXAMPLES")
FUZZ_EXAMPLES = int(_ENV_EXAMPLES or 25)
FUZZ_OPS = int(os.environ.get("VKGRAD_FUZZ_OPS", 6))   # ops per program, at most


@settings(max_examples=FUZZ_EXAMPLES, derandomize=_ENV_EXAMPLES is None, deadline=None,
          suppress_health_check=list(HealthCheck), print_blob=True)
@given(program=programs(max_ops=FUZZ_OPS))
def test_random_program_on_vulkan_matches_interpreter(program):
    check(program)


# ----------------------------------------------------------------------------- regressions
# Programs the fuzzer found failing, minimized; each failed before the fix named beside it.

def test_regression_global_norm_of_40_arrays_runs_on_vulkan():
    """40 scalars added in one elementwise kernel read 40 buffers, past lavapipe's 32: the
    whole program fell back to the interpreter. Fixed in lowering/lower.py (split_bindings
    writes operands to scratch first)."""
    xs = tuple((f"x{i}", (3,), "f") for i in range(41))
    norm = " + ".join(f"vnp.sum(x{i} * x{i})" for i in range(1, 41))
    check(Program(inputs=xs, lines=(f"v0 = x0 / vnp.sqrt({norm} + 1.0)",), outputs=("v0",)))


def test_regression_sum_of_40_arrays_runs_on_vulkan():
    """The same through a chain of 40 adds of broadcast operands (one fused output)."""
    xs = (("x0", (4, 3), "f"),) + tuple((f"x{i}", (3,) if i % 2 else (4, 1), "f")
                                        for i in range(1, 41))
    check(Program(inputs=xs, lines=("v0 = " + " - ".join(n for n, _, _ in xs),),
                  outputs=("v0",)))


def test_regression_int_and_bool_gathers_run_on_vulkan():
    """x[::-1] of an int array (a take with iota indices) made the whole program fall back to
    the interpreter: the take kernel moved only f32. Fixed in kernels_glsl/take.comp (INT),
    lowering/kernels.py (plan_take ints=) and lowering/lower.py (_take)."""
    check(Program(inputs=(("x0", (7,), "f"), ("x1", (7,), ("i", 5))),
                  lines=("v0 = x0 * (vnp.maximum((x1 * 3 - 7)[::-1], 1)).astype(np.float32)",),
                  outputs=("v0",)))
    check(Program(inputs=(("x0", (3, 8), "f"), ("x1", (3, 8), ("i", 5))),
                  lines=("v0 = vnp.where(vnp.take(x1 > 1, np.array([2, 0, 2]), axis=0), x0, -x0)",
                         "v1 = vnp.where(vnp.take(x1, np.array([7, 0]), axis=1) == 2, 1.0, v0[:, :2])"),
                  outputs=("v1", "v0")))
