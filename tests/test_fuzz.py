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
