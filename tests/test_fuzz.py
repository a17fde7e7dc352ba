"""Differential fuzzing: random well-typed programs (tests/fuzz_programs.py) on Vulkan against
the interpreter, values and gradients.

CI runs FUZZ_EXAMPLES programs, derandomized (the same ones every run). Longer runs explore:
    VKGRAD_FUZZ_EXAMPLES=2000 [VKGRAD_FUZZ_OPS=10] .venv/bin/python -m pytest tests/test_fuzz.py -x
(randomized then; hypothesis's database under .hypothesis/ replays a failure first next time).

Bugs found, each fixed and kept below as a regression test that failed before its fix (what;
where the fix is; the test):

1. An elementwise output reading more than 32 buffers (a global norm over 40 arrays) sent the
   whole program to the interpreter. lowering/lower.py, split_bindings writes operands to
   scratch first. test_regression_global_norm_of_40_arrays_runs_on_vulkan, ..._sum_of_40_...
2. take of i32/bool values (x[::-1] of ints) sent the whole program to the interpreter.
   kernels_glsl/take.comp (INT), lowering/kernels.py, lowering/lower.py.
   test_regression_int_and_bool_gathers_run_on_vulkan
3. Donation: a kernel moved for one donated input broke the plan made for another, and an
   input was overwritten before its last read. lowering/donation.py.
   test_regression_donation_plan_survives_a_later_move
4. max/min over an axis of length 0: -inf on Vulkan, a crash inside numpy on the interpreter
   (softmax of empty rows too). primitives/lax.py (the reduce shape rule raises, as numpy and
   JAX do; softmax impls). test_regression_max_of_an_empty_axis_is_an_error_everywhere
5. concatenate with an empty operand: a shader that does not compile (a read clamped into
   [0, -1]); then, with the first fix, all operands empty. lowering/elementwise.py.
   test_regression_concatenate_with_an_empty_operand
6. 0**0 == 0 and 0**-y == 0 on Vulkan (GLSL's pow is undefined there); d(x**0)/dx was nan on
   every backend. lowering/glsl.py (vkg_pow), primitives/lax.py (pow VJP).
   test_regression_pow_at_zero_base,
   test_special_values_of_every_elementwise_primitive_match_interpreter
7. x / 0.0 gave garbage on lavapipe (Vulkan leaves division by zero undefined).
   lowering/glsl.py (div template). test_regression_division_by_a_literal_zero
8. asin and acos outside [-1, 1] and acosh below 1 gave 0 (numpy: nan), atan2(0, 0) gave
   +-3pi/4 (numpy: +-0 or +-pi), sinh, asinh and atanh of tiny arguments lost them
   (sinh(1e-30) was 3e-8), asinh and acosh of 1e30 overflowed to inf. lowering/glsl.py
   (each a GLSL function of its own). test_special_values_of_every_elementwise_primitive_...
9. A take of i32 or bool values with a fused producer or epilogue did not compile (the
   generated hooks compute in float): the take contract (lowering/kernels.py).
   test_regression_int_and_bool_gathers_run_on_vulkan
10. NaN was dropped: maximum(nan, 0), relu, clip, sign and the max/min reductions gave a number
   on Vulkan (GLSL's max/min return the other operand), argmax/argmin of a row with a NaN gave
   n (out of range) on both backends, the interpreter's flash attention turned a NaN query row
   into zeros, and x * 0.0, 0.0 / x (a literal zero) and x - x gave 0 on lavapipe for an
   infinite or NaN x. kernels_glsl/ieee.glsl (vkg_max/vkg_min, SignedZeroInfNanPreserve),
   lowering/glsl.py (literal zeros), vkgrad/numpy/reductions.py (argmax), primitives/attention.py.
   test_nan_and_infinities_through_choosing_ops, test_a_nan_query_row_stays_nan_...
11. With special values in the fuzzed programs: nan**nan was 0, (-2)**inf and 0**nan wrong,
   1e-40**0.5 was 7.7e-20 and log(1e-40) -88.0 (numpy -92.1) on lavapipe (its pow and log read a
   subnormal's exponent as the smallest normal's). lowering/glsl.py (vkg_pow, vkg_log).
   test_random_program_on_special_values_..., test_special_values_of_every_...
On the H200 the special values also showed NVIDIA's sin, tan and pow within the Vulkan spec's
bounds but off numpy by more than 1e-5 (sin(88), 0.5**100): the tolerances below follow the spec.
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import vkgrad as vg
import vkgrad.numpy as vnp
from fuzz_programs import Program, check, check_special, flush_subnormals, programs
from vkgrad.errors import ShapeError, VkgradError
from vkgrad.ir.core import TensorType, abstract_eval_rules
from vkgrad.lowering.glsl import code_for_op
from vkgrad.lru import LRU
from vkgrad.runtime import get_device
from vkgrad.runtime.vulkan import MAX_PIPELINES
from vkgrad.runtime.device import default_device_index, list_devices
from vkgrad.tracer.core import bind

_ENV_EXAMPLES = os.environ.get("VKGRAD_FUZZ_EXAMPLES")
FUZZ_EXAMPLES = int(_ENV_EXAMPLES or 25)
FUZZ_OPS = int(os.environ.get("VKGRAD_FUZZ_OPS", 6))   # ops per program, at most


def _device_keeps_nan() -> bool:
    """Does the Vulkan device honour SignedZeroInfNanPreserve (kp patch 0009 reports it)?"""
    return list_devices()[default_device_index()].nan_preserve


@settings(max_examples=FUZZ_EXAMPLES, derandomize=_ENV_EXAMPLES is None, deadline=None,
          suppress_health_check=list(HealthCheck), print_blob=True)
@given(program=programs(max_ops=FUZZ_OPS))
def test_random_program_on_vulkan_matches_interpreter(program):
    check(program)


@settings(max_examples=FUZZ_EXAMPLES, derandomize=_ENV_EXAMPLES is None, deadline=None,
          suppress_health_check=list(HealthCheck), print_blob=True)
@given(program=programs(max_ops=FUZZ_OPS, special=True))
def test_random_program_on_special_values_on_vulkan_matches_interpreter(program):
    """The same programs on inputs with NaN, +-Inf, +-0, subnormals and huge values. Needs a
    device that keeps NaN (without SignedZeroInfNanPreserve lavapipe folds x - x to 0)."""
    if not _device_keeps_nan():
        pytest.skip("the device does not honour SignedZeroInfNanPreserve (or kp lacks patch 0009)")
    check_special(program)


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
                         "v1 = vnp.where(vnp.take(x1, np.array([7, 0]), axis=1) == 2, 1.0, "
                         "v0[:, :2])"),
                  outputs=("v1", "v0")))


def test_regression_donation_plan_survives_a_later_move():
    """Donating both arguments: the plan gave x0's buffer to the take's output (it ran after
    the last read of x0), then, for x1, moved the kernel reading x0 after the take: x0 was
    overwritten before it was read. Fixed in lowering/donation.py (moves treat an output and
    the donated buffer it took as one)."""
    check(Program(inputs=(("x0", (7, 3), "f"), ("x1", (21,), "f")),
                  lines=("v0 = (x0 * 2.0).reshape((21,))", "v1 = x1.reshape((7, 3))[::-1]"),
                  outputs=("v0", "v1")))


def test_regression_pow_at_zero_base():
    """x ** y at x == 0: GLSL's pow is undefined there (lavapipe gave 0**0 == 0), so the value
    x**0 and the gradient y * x**(y-1) at y == 1 came out 0 instead of 1. Fixed in
    lowering/glsl.py (vkg_pow). And the gradient of x**0 at x == 0 was nan on every
    backend (0 * 0**-1): it is 0 now (lax.py's pow VJP)."""
    inputs = (("x0", (4, 7), "t"), ("x1", (4, 7), ("i", 5)))   # seed 1: zeros of x0 meet
    for exponent in ("vnp.minimum(x1, 2)", "vnp.minimum(x1, 1) + 1"):   # exponents 0 and 1
        check(Program(inputs, (f"v0 = x0 ** ({exponent}).astype(np.float32)",), ("v0",), 1))


def test_regression_division_by_a_literal_zero():
    """x / 0.0 gave garbage on lavapipe (1e27, or 0: Vulkan leaves division by zero undefined
    and the driver folds the literal); numpy gives inf, -inf or nan. Fixed in
    lowering/glsl.py (the div template divides by zero itself)."""
    x = np.float32([1.0, -2.0, 0.0, 3.0, np.inf, np.nan])

    def fun(x):
        return x / 0.0, x / -0.0, x[:4].astype(np.int32) / 0

    for got, want in zip(vg.jit(fun, backend="vulkan")(x), vg.jit(fun, backend="numpy")(x)):
        np.testing.assert_array_equal(np.asarray(got), want)


def test_regression_max_of_an_empty_axis_is_an_error_everywhere():
    """max/min over an axis of length 0: Vulkan gave -inf/+inf, the interpreter failed inside
    numpy (an IRError naming an implementation bug), and softmax over rows of length 0 failed
    there too. Now the shape rule raises ShapeError as numpy and JAX do, on every backend, and
    softmax of empty rows is empty (primitives/lax.py)."""
    empty = np.zeros((0, 3), np.float32)
    for backend in ("vulkan", "numpy"):
        with pytest.raises(ShapeError, match="length 0"):
            vg.jit(lambda a: vnp.max(a, axis=0), backend=backend)(empty)
        with pytest.raises(ShapeError, match="length 0"):
            vg.jit(lambda a: vnp.argmin(a, axis=0), backend=backend)(empty)
    check(Program(inputs=(("x0", (3, 4), "f"),),
                  lines=("v0 = vnp.log_softmax(x0[:, 2:2], axis=1)", "v1 = vnp.max(v0, axis=0)",
                         "v2 = vnp.sum(vnp.softmax(x0[1:1], axis=0), axis=0) + x0"),
                  outputs=("v1", "v2")))


def test_regression_concatenate_with_an_empty_operand():
    """concatenate([x, x[:0]]) in a fused kernel: the empty operand's read was clamped into
    [0, -1]; read at a constant position (here [2]), glslangValidator rejects the index -1 and
    the shader failed to compile. Fixed in lowering/elementwise.py (_concatenate skips empty
    operands)."""
    check(Program(inputs=(("x0", (6,), "f"), ("x1", (6,), ("i", 5))),
                  lines=("v0 = vnp.concatenate([x0[:0], x0 * 2.0, x0[3:3]], axis=0)[2] * x0",
                         "v1 = vnp.where(vnp.concatenate([x1, x1[:0]], axis=0)[2] == 2, v0, 0.5)"),
                  outputs=("v1",)))
    # ... and every operand empty (the fix's first version failed on it: the fuzzer again)
    check(Program(inputs=(("x0", (1, 1), "f"), ("x1", (0,), ("i", 5))),
                  lines=("v0 = x0[:, -1][-1:-2] * "
                         "vnp.concatenate([x1, x1[:0]]).astype(np.float32)",),
                  outputs=("v0",)))


# ----------------------------------------------------------------------------- special values
# The programs above stay in safe ranges. Here every elementwise primitive meets zeros, signed
# zeros, infinities, NaN, huge and tiny values, each pair for the binary ones, in ONE program
# (two generated kernels, whatever the number of primitives).

SPECIAL = np.float32([0.0, -0.0, 1, -1, 0.5, -0.5, 2, -2, 3, -3, 1e-3, 20, 88, -88, 100, -100,
                      1e30, -1e30, 1e-30, 1e-40, -1e-40, np.inf, -np.inf, np.nan])
_nan = np.isnan

# Where Vulkan may differ from numpy, by primitive: operand tuple -> True when excused. Each is
# either left undefined by the Vulkan spec or a driver's choice, and none matters inside the
# ranges the kernels are tested in (the fuzzed programs above).
EXCUSED = {
    # lavapipe computes tanh from exps, an absolute error of ~3e-8 near 0 (the Vulkan spec's
    # precision for tanh)
    "tanh": lambda x: abs(x) < 1e-2,
    # the Vulkan spec bounds sin/cos errors on [-pi, pi] only (NVIDIA: sin(88) off by 4e-6)
    "sin": lambda x: abs(x) > np.pi,
    "cos": lambda x: abs(x) > np.pi,
    "tan": lambda x: abs(x) > np.pi,
}
# The Vulkan spec bounds atan's error by 4096 ulp (lavapipe's is ~2e-5 relative), and asin and
# acos are computed from it (lowering/glsl.py); pow's is exp2's of y*log2(x), 3 + 2|y log2 x| ulp
# (NVIDIA: 0.5**100 off by 1e-5); sin's and cos's is 2^-11 absolute on [-pi, pi] (NVIDIA:
# sin(1e-30) == 0), tan's theirs. Those compare with these tolerances.
RTOL = {"atan": 3e-4, "atan2": 3e-4, "asin": 3e-4, "acos": 3e-4, "pow": 1e-4}
ATOL = {"sin": 2.0 ** -11, "cos": 2.0 ** -11, "tan": 2.0 ** -11}


def _special_operands(arity):
    if arity == 1:
        return (SPECIAL,)
    return np.repeat(SPECIAL, len(SPECIAL)), np.tile(SPECIAL, len(SPECIAL))


def test_special_values_of_every_elementwise_primitive_match_interpreter():
    """Failed before the pow fix (0**0 was 0, 0**-1 was 0 on lavapipe: GLSL's pow is undefined
    there; lowering/glsl.py's vkg_pow handles a zero base and a zero exponent)."""
    _check_special_values()


def test_special_values_on_a_device_without_the_preserve_mode(without_nan_preserve):
    _check_special_values()
    assert len(without_nan_preserve._by_launch), "no pipeline was built without the mode"


def _check_special_values():
    prims = []
    for p in sorted(code_for_op, key=lambda p: p.name):
        if p.name in ("select", "convert", "stop_gradient"):   # not float -> float maps
            continue
        arity = next((n for n in (1, 2) if _takes(p, n)), None)
        if arity is None:   # not a map of f32 values (the PRNG's bit ops: tests/test_random.py)
            continue
        prims.append((p, arity))

    def fun(x, a, b):
        return tuple(bind(p, *((x,) if arity == 1 else (a, b))) for p, arity in prims)

    args = (SPECIAL,) + _special_operands(2)
    got = vg.jit(lambda *a: fun(*a), backend="vulkan")(*args)    # a new program each call
    want = vg.jit(fun, backend="numpy")(*args)
    # a device that may flush subnormals (its Target): the values on flushed operands, flushed
    flushes = not get_device().target.denorm_preserve
    want_ftz = vg.jit(fun, backend="numpy")(*map(flush_subnormals, args)) if flushes else want
    failures = []
    for (p, arity), g, w, wf in zip(prims, got, want, want_ftz):
        g, w, wf = np.asarray(g), np.asarray(w), np.asarray(wf)
        ops = _special_operands(arity)

        def same(w, g=g, p=p):
            if w.dtype == bool:
                return g == w
            return (g == w) | (_nan(g) & _nan(w)) | np.isclose(
                g, w, rtol=RTOL.get(p.name, 1e-5), atol=ATOL.get(p.name, 1e-37))
        ok = same(w)
        if flushes:
            ok |= same(flush_subnormals(wf), flush_subnormals(g))
        excuse = EXCUSED.get(p.name, lambda *a: False)
        for k in np.flatnonzero(~ok):
            operands = tuple(o[k] for o in ops)
            if not excuse(*operands):
                failures.append(f"{p.name}{operands}: vulkan {g[k]!r}, interpreter {w[k]!r}")
    assert not failures, "\n".join(failures)


# The same values through the ops that choose or order (maximum, relu, clip, the reductions,
# argmax, sort) and the arithmetic a driver may fold (0 * x, x - x, 0 / x): NaN propagates as
# numpy and JAX have it (maximum(nan, 0) = nan; max of a row with a NaN is NaN; argmax is the
# first NaN; sort puts NaN last), on the interpreter (against numpy) and on Vulkan (against the
# interpreter). GLSL's max/min drop a NaN and lavapipe folds x * 0.0 to 0 (kernels_glsl/ieee.glsl).
IEEE = np.float32([np.inf, np.nan, -np.inf, 2, -0.0, 0.0])
IEEE_ROWS = np.stack([IEEE, IEEE[::-1], np.float32([1, -1, 3, -np.inf, 0, 2]),
                      np.float32([np.nan, 1, np.nan, np.inf, -0.0, 2])])
_rng = np.random.default_rng(19)
WIDE = _rng.standard_normal((5, 300)).astype(np.float32)   # past a subgroup and a vec4 row
WIDE[1, 7] = WIDE[3, 299] = np.nan
WIDE[2, 100] = np.inf
WIDE[4, 0] = -np.inf
IEEE_OPS = {   # name: (function, numpy's, operand)
    "0*x": (lambda x: 0.0 * x, lambda x: np.float32(0) * x, IEEE_ROWS),
    "x*-0": (lambda x: x * -0.0, lambda x: x * np.float32(-0.0), IEEE_ROWS),
    "x-x": (lambda x: x - x, lambda x: x - x, IEEE_ROWS),
    "0/x": (lambda x: 0.0 / x, lambda x: np.float32(0) / x, IEEE_ROWS),
    "relu": (lambda x: vg.nn.relu(x), lambda x: np.maximum(x, np.float32(0)), IEEE_ROWS),
    "maximum": (lambda x: vnp.maximum(x, x[::-1]), lambda x: np.maximum(x, x[::-1]), IEEE_ROWS),
    "minimum": (lambda x: vnp.minimum(x, 0.5), lambda x: np.minimum(x, np.float32(0.5)),
                IEEE_ROWS),
    "clip": (lambda x: vnp.clip(x, -1.0, 1.0), lambda x: np.clip(x, np.float32(-1), np.float32(1)),
             IEEE_ROWS),
    "max": (lambda x: vnp.max(x, axis=1), lambda x: np.max(x, axis=1), IEEE_ROWS),
    "min": (lambda x: vnp.min(x, axis=1), lambda x: np.min(x, axis=1), IEEE_ROWS),
    "max_axis0": (lambda x: vnp.max(x, axis=0), lambda x: np.max(x, axis=0), IEEE_ROWS),
    "max_wide": (lambda x: vnp.max(x, axis=1), lambda x: np.max(x, axis=1), WIDE),
    "min_wide": (lambda x: vnp.min(x, axis=1), lambda x: np.min(x, axis=1), WIDE),
    "max_all_wide": (lambda x: vnp.max(x), lambda x: np.max(x), WIDE),
    "argmax": (lambda x: vnp.argmax(x, axis=1), lambda x: np.argmax(x, axis=1), IEEE_ROWS),
    "argmin": (lambda x: vnp.argmin(x, axis=1), lambda x: np.argmin(x, axis=1), IEEE_ROWS),
    "argmax_wide": (lambda x: vnp.argmax(x, axis=1), lambda x: np.argmax(x, axis=1), WIDE),
    "sort": (lambda x: vnp.sort(x, axis=1), lambda x: np.sort(x, axis=1), IEEE_ROWS),
    "argsort": (lambda x: vnp.argsort(x, axis=1),
                lambda x: np.argsort(x, axis=1, kind="stable"), IEEE_ROWS),
    "sum": (lambda x: vnp.sum(x, axis=1), lambda x: np.sum(x, axis=1), IEEE_ROWS),
    "softmax": (lambda x: vnp.softmax(x, axis=1), None, IEEE_ROWS),
    "relu_log": (lambda x: vg.nn.relu(vnp.log(x)) + 1.0,
                 lambda x: np.maximum(np.log(x), np.float32(0)) + np.float32(1), IEEE_ROWS),
}


def _same(got, want) -> np.ndarray:
    """Equal (floats within rounding: softmax), NaN where NaN, a zero's sign aside."""
    got, want = np.asarray(got), np.asarray(want)
    if got.dtype.kind != "f":
        return got == want
    return (got == want) | (np.isnan(got) & np.isnan(want)) | np.isclose(got, want, 1e-5, 1e-7)


@pytest.mark.parametrize("name", sorted(IEEE_OPS))
def test_nan_and_infinities_through_choosing_ops(name):
    fun, numpy_fun, x = IEEE_OPS[name]
    interp = np.asarray(vg.jit(fun, backend="numpy")(x))
    if numpy_fun is not None:
        with np.errstate(all="ignore"):
            want = numpy_fun(x)
        assert interp.dtype.kind == want.dtype.kind and _same(interp, want).all(), (interp, want)
    got = np.asarray(vg.jit(fun, backend="vulkan")(x))
    assert _same(got, interp).all(), (got, interp)


@pytest.fixture
def without_nan_preserve(monkeypatch):
    """The Vulkan device as one that lacks SignedZeroInfNanPreserve: its Target says so and its
    shaders compile with the mode left out (ieee.glsl), into a pipeline cache of their own.
    Without the mode lavapipe folded x - x, x*x - x*x and (x+1) - (x+1) to 0 for x = inf, nan
    (ieee.glsl's vkg_add keeps them)."""
    dev = get_device()
    monkeypatch.setattr(dev, "defines",
                        tuple(d for d in dev.defines if d[0] != "VKGRAD_NAN_PRESERVE"))
    monkeypatch.setattr(dev, "target", dataclasses.replace(dev.target, nan_preserve=False))
    monkeypatch.setattr(dev, "_by_launch", LRU(MAX_PIPELINES))
    return dev


FOLDED = {"x*x-x*x": lambda x: x * x - x * x, "(x+1)-(x+1)": lambda x: (x + 1.0) - (x + 1.0),
          "exp(x)-exp(x)": lambda x: vnp.exp(x) - vnp.exp(x), "x-x+1": lambda x: x - x + 1.0}


@pytest.mark.parametrize("name", sorted(IEEE_OPS) + sorted(FOLDED))
def test_nan_and_infinities_on_a_device_without_the_preserve_mode(name, without_nan_preserve):
    fun, x = FOLDED.get(name), IEEE_ROWS
    if fun is None:
        fun, _, x = IEEE_OPS[name]
    fresh = lambda x: fun(x)           # noqa: E731  (a new function: compiled for this device)
    got = np.asarray(vg.jit(fresh, backend="vulkan")(x))
    assert len(without_nan_preserve._by_launch), "no pipeline was built without the mode"
    interp = np.asarray(vg.jit(fun, backend="numpy")(x))
    assert _same(got, interp).all(), (got, interp)


@pytest.mark.parametrize("causal", [False, True])
def test_a_nan_query_row_stays_nan_through_flash_attention(causal):
    """Failed before on the interpreter: a NaN query row gave zeros and a zero gradient (its lse
    was taken for an empty row's -inf); the kernel keeps NaN, masked keys get p = 0."""
    rng = np.random.default_rng(5)
    q, k, v = (rng.standard_normal((1, 1, n, 16)).astype(np.float32) for n in (4, 5, 5))
    q[0, 0, 1, 3] = np.nan
    f = lambda q, k, v: vg.nn.flash_attention(q, k, v, causal=causal)
    g = vg.grad(lambda q, k, v: vnp.sum(f(q, k, v)), argnums=(0, 1, 2))
    o = np.asarray(vg.jit(f, backend="numpy")(q, k, v))
    assert np.isnan(o[0, 0, 1]).all() and np.isfinite(np.delete(o[0, 0], 1, 0)).all()
    on = {be: [vg.jit(f, backend=be)(q, k, v), *vg.jit(g, backend=be)(q, k, v)]
          for be in ("numpy", "vulkan")}
    for want, got in zip(on["numpy"], on["vulkan"]):
        np.testing.assert_array_equal(np.isnan(np.asarray(got)), np.isnan(np.asarray(want)))
        np.testing.assert_allclose(np.nan_to_num(np.asarray(got)), np.nan_to_num(np.asarray(want)),
                                   rtol=1e-4, atol=1e-5)


def test_a_nan_in_a_selective_scan_stays_nan_from_its_step_on():
    rng = np.random.default_rng(6)
    u, z = (rng.standard_normal((1, 2, 8)).astype(np.float32) for _ in range(2))
    delta = rng.uniform(0.1, 1, (1, 2, 8)).astype(np.float32)
    A = -rng.uniform(0.5, 1, (2, 16)).astype(np.float32)
    B, C = (rng.standard_normal((1, 16, 8)).astype(np.float32) for _ in range(2))
    u[0, 0, 3] = delta[0, 1, 2] = np.nan
    f = lambda u, delta: vg.nn.selective_scan(u, delta, A, B, C, None, z, delta_softplus=True)
    g = vg.grad(lambda u, delta: vnp.sum(f(u, delta)), argnums=(0, 1))
    y = np.asarray(vg.jit(f, backend="numpy")(u, delta))
    assert np.isnan(y[0, 0, 3:]).all() and np.isfinite(y[0, 0, :3]).all()
    assert np.isnan(y[0, 1, 2:]).all() and np.isfinite(y[0, 1, :2]).all()
    on = {be: [vg.jit(f, backend=be)(u, delta), *vg.jit(g, backend=be)(u, delta)]
          for be in ("numpy", "vulkan")}
    for want, got in zip(on["numpy"], on["vulkan"]):
        np.testing.assert_array_equal(np.isnan(np.asarray(got)), np.isnan(np.asarray(want)))


def _takes(prim, n) -> bool:
    try:
        abstract_eval_rules[prim](*[TensorType((1,), "f32")] * n)
        return True
    except (VkgradError, TypeError):   # TypeError: a primitive with required params
        return False
