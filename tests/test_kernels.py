"""Hand-written reduction, softmax and take kernels (vkgrad/lowering/kernels.py) on the real
Vulkan device (lavapipe in CI) against numpy, on awkward shapes.

Outputs and temporaries are poisoned before each run (NaN, junk ints), so an element a kernel
forgets to write, or a temporary it forgets to clear, shows up.
"""

import numpy as np
import pytest

from kernel_runs import run_plan
from vkgrad.lowering.launch import MAX_GROUPS_X
from vkgrad.lowering.kernels import (OpPlan, plan_reduce, plan_softmax,
                                     plan_softmax_grad, plan_take)
from vkgrad.runtime import Executable, get_device


@pytest.fixture(scope="module")
def dev():
    return get_device()


# ---------------------------------------------------------------- reductions

NP_REDUCE = {"sum": np.sum, "max": np.max, "min": np.min}


def check_reduce(dev, op, A, R, B, seed=0, **kw):
    x = np.random.default_rng(seed).standard_normal((A, R, B)).astype(np.float32)
    plan = plan_reduce(op, A, R, B, **kw)
    out = run_plan(dev, plan, {"x": x}, {"out": A * B})["out"].reshape(A, B)
    if op == "sum":
        ref = x.astype(np.float64).sum(axis=1)
        tol = 1e-6 * np.abs(x).astype(np.float64).sum(axis=1) + 1e-6
        assert np.all(np.abs(out - ref) <= tol), (np.abs(out - ref) - tol).max()
    else:
        np.testing.assert_array_equal(out, NP_REDUCE[op](x, axis=1))
    return plan


@pytest.mark.parametrize("op, A, R, B", [
    ("sum", 1, 1, 1),
    ("max", 7, 33, 1),          # one workgroup per row, scalar loads
    ("min", 130, 257, 1),
    ("sum", 3, 3000, 1),        # rows much longer than the workgroup (vec4)
    ("max", 2, 3001, 1),        # ... scalar loads, 256 threads
    ("sum", 257, 7, 1),         # short rows: one thread per row
    ("max", 130, 8, 1),         # ... vec4
    ("sum", 7, 33, 130),        # B > 1: threads along B
    ("max", 1, 257, 3),         # small B: many threads along R share a b
    ("min", 3, 7, 257),
    ("sum", 1, 130, 8),         # vec4 along B
    ("min", 33, 1, 7),
    ("sum", 130, 7, 3),         # short R, small B: a 64-thread workgroup
])
def test_reduce(dev, op, A, R, B):
    plan = check_reduce(dev, op, A, R, B)
    assert len(plan.steps) == 1


@pytest.mark.parametrize("op, A, R, B, splits", [
    ("sum", 3, 3000, 1, 5),     # vec4 rows, scalar partials
    ("max", 2, 1001, 12, 7),    # vec4 along B
    ("min", 1, 257, 130, 3),
    ("sum", 2, 33, 7, 33),      # one R element per split
])
def test_reduce_two_pass(dev, op, A, R, B, splits):
    plan = check_reduce(dev, op, A, R, B, splits=splits)
    assert len(plan.steps) == 2 and plan.temps[0].role == "partials"


@pytest.mark.parametrize("op, R", [("sum", 10**6), ("max", 300001)])
def test_reduce_long_to_scalar(dev, op, R):
    """A full reduction of a long vector splits R over many workgroups, then a final pass."""
    plan = check_reduce(dev, op, 1, R, 1)
    assert len(plan.steps) == 2
    assert plan.steps[0][0].groups[0] > 100


@pytest.mark.parametrize("op, A, R, B", [("sum", 7, 300, 1), ("max", 3, 130, 5)])
def test_reduce_without_subgroups(dev, op, A, R, B):
    check_reduce(dev, op, A, R, B, subgroups=False)
    check_reduce(dev, op, A, R, B, subgroups=False, splits=3)


def test_reduce_plans():
    """Which path each view gets: no device needed."""
    (launch, roles), = plan_reduce("sum", 4096, 4096, 1).steps       # a row per workgroup
    assert roles == ("x", "out") and launch.groups == (4096, 1, 1)
    assert dict(launch.defines)["HREDUCE"] == 1
    first, second = plan_reduce("sum", 1, 4096, 4096).steps          # few outputs: split R
    assert first[1] == ("x", "partials") and second[1] == ("partials", "out")
    assert first[0].groups[0] >= 256
    (launch, _), = plan_reduce("max", 10**6, 7, 1).steps             # a thread per row
    assert launch.groups[0] * launch.groups[1] == 10**6 // 256 + 1


def test_reduce_empty(dev):
    out = run_plan(dev, plan_reduce("sum", 3, 0, 5), {"x": np.zeros(0, np.float32)},
                   {"out": 15})["out"]
    np.testing.assert_array_equal(out, np.zeros(15, np.float32))
    assert plan_reduce("max", 0, 5, 3).steps == ()


# ---------------------------------------------------------------- softmax

def softmax64(x):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def log_softmax64(x):
    x = x.astype(np.float64)
    z = x - x.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def check_softmax(dev, rows, cols, log, seed=0, **kw):
    rng = np.random.default_rng(seed)
    x = (3 * rng.standard_normal((rows, cols))).astype(np.float32)
    if cols > 8:
        x[0, :5] = -np.inf                     # masked entries, leading the row
    plan = plan_softmax(rows, cols, log=log, **kw)
    y = run_plan(dev, plan, {"x": x}, {"y": rows * cols})["y"].reshape(rows, cols)
    ref = log_softmax64(x) if log else softmax64(x)
    np.testing.assert_allclose(y, ref, rtol=2e-5, atol=1e-6)

    # backward, from the float32 forward output
    yf = ref.astype(np.float32)
    g = rng.standard_normal((rows, cols)).astype(np.float32)
    if log:
        yf[~np.isfinite(yf)] = -1e30           # exp(-inf) is 0; keep the reference finite
    y64, g64 = yf.astype(np.float64), g.astype(np.float64)
    if log:
        dref = g64 - np.exp(y64) * g64.sum(axis=-1, keepdims=True)
    else:
        dref = y64 * (g64 - (g64 * y64).sum(axis=-1, keepdims=True))
    plan = plan_softmax_grad(rows, cols, log=log, **kw)
    dx = run_plan(dev, plan, {"y": yf, "g": g}, {"dx": rows * cols})["dx"].reshape(rows, cols)
    scale = np.abs(g64).sum(axis=-1, keepdims=True)
    np.testing.assert_allclose(dx, dref, rtol=1e-5, atol=1e-6 * scale.max())


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize("rows, cols", [(1, 1), (3, 7), (2, 33), (5, 130), (3, 257), (2, 3000),
                                        (1, 12), (2, 32768)])
def test_softmax(dev, rows, cols, log):
    check_softmax(dev, rows, cols, log)


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize("cols", [7, 3000, 4099])
def test_softmax_streaming(dev, cols, log):
    """Rows longer than the register cache: online max+sum, then the output pass."""
    check_softmax(dev, 3, cols, log, stream=True)


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_softmax_without_subgroups(dev, log):
    check_softmax(dev, 3, 257, log, subgroups=False)


def test_softmax_plans():
    """Which variant each row length gets (registers vs streaming), and the row grid."""
    defs = lambda plan: dict(plan.steps[0][0].defines)
    assert defs(plan_softmax(4, 4096)) == {"MODE": 0, "VEC": 4, "NV": 4, "SUBGROUPS": 1}
    assert plan_softmax(4, 4096).steps[0][0].spec == (256,)
    assert defs(plan_softmax(4, 32768))["NV"] == 8
    assert defs(plan_softmax(4, 32772))["NV"] == 0
    assert defs(plan_softmax_grad(4, 16384, log=True))["NV"] == 4
    assert defs(plan_softmax_grad(4, 16388))["NV"] == 0
    x, y, _ = plan_softmax(200000, 8).steps[0][0].groups
    assert x <= MAX_GROUPS_X and x * y >= 200000


def test_softmax_many_rows(dev):
    """More rows than one grid dimension holds."""
    check_softmax(dev, MAX_GROUPS_X + 7, 3, log=False)


# ---------------------------------------------------------------- take (take_grad: test_take_grad_kernels.py)

@pytest.mark.parametrize("A, N, B, J", [(1, 7, 1, 33), (3, 130, 7, 257), (2, 33, 8, 130),
                                        (1, 257, 130, 7), (7, 1, 3, 5)])
def test_take(dev, A, N, B, J):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((A, N, B)).astype(np.float32)
    idx = rng.integers(-3, N + 3, J).astype(np.int32)          # some out of range: clamped
    out = run_plan(dev, plan_take(A, N, B, J), {"x": x, "idx": idx}, {"out": A * J * B})["out"]
    np.testing.assert_array_equal(out.reshape(A, J, B), np.take(x, idx, axis=1, mode="clip"))


# ---------------------------------------------------------------- argsort

def test_argsort_plans():
    from types import SimpleNamespace
    from vkgrad.lowering.sort import max_row, plan_argsort
    (launch, roles), = plan_argsort(3, 33).steps
    assert roles == ("x", "out") and launch.groups == (3, 1, 1) and launch.push == (3, 33)
    assert dict(launch.defines) == {"NP": 64, "DESCENDING": 0} and launch.spec == (32,)
    assert dict(plan_argsort(1, 4096, descending=True).launches[0].defines)["DESCENDING"] == 1
    assert plan_argsort(0, 5).steps == ()
    assert max_row(None) == 4096 and max_row(SimpleNamespace(max_shared_memory=49152)) == 4096
    assert max_row(SimpleNamespace(max_shared_memory=65536, max_workgroup_invocations=1024)) \
        == 8192
    with pytest.raises(ValueError, match="at most 4096"):
        plan_argsort(2, 4097)


@pytest.mark.parametrize("rows, n", [(1, 1), (2, 4096), (70000, 3)])
def test_argsort_on_the_device(rows, n):
    """The longest row the kernel holds, and more rows than one grid dimension."""
    import vkgrad as vg
    import vkgrad.numpy as vnp
    x = np.random.default_rng(n).integers(0, 50, (rows, n)).astype(np.float32)
    f = vg.jit(lambda x: vnp.argsort(x, axis=1), backend="vulkan")
    got = np.asarray(f(x))
    assert f.lower(x).fallback_reason is None
    np.testing.assert_array_equal(got, np.argsort(x, axis=1, kind="stable"))
