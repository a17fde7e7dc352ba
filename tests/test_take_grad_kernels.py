"""The embedding gradient's kernels (take_grad: scatter_add): the sort-based plan for any
table (take_grad.comp) and the one-launch plan for small tables (take_grad_rows.comp), planned
by vkgrad/lowering/kernels.py. The planners alone for Target.lavapipe() and Target.h200(), and
the kernels on the real device (lavapipe in CI) against numpy, outputs and temporaries poisoned
first (kernel_runs.run_plan).
"""

import numpy as np
import pytest

from kernel_runs import run_plan
from vkgrad.lowering.kernels import (_rows_loop_iterations,
                                     plan_take_grad, plan_take_grad_rows, take_grad_rows_layout,
                                     take_grad_rows_tests)
from vkgrad.runtime import get_device
from vkgrad.target import Target


@pytest.fixture(scope="module")
def dev():
    return get_device()


def take_grad_ref(g, idx, N):
    """float32 scatter-add in the sort plan's order: each bucket's entries in increasing j
    summed TAKE_GRAD_CHUNK at a time (from 0.0), then those sums in order (from 0.0)."""
    from vkgrad.lowering.kernels import TAKE_GRAD_CHUNK as CH
    A, J, B = g.shape
    dx = np.zeros((A, N, B), np.float32)
    bucket = np.clip(idx, 0, N - 1)
    for n in np.unique(bucket):
        js = np.flatnonzero(bucket == n)
        total = np.zeros((A, B), np.float32)
        for c in range(0, len(js), CH):
            part = np.zeros((A, B), np.float32)
            for j in js[c:c + CH]:
                part += g[:, j]
            total += part
        dx[:, n] = total
    return dx


def exact_sum(g, idx, N):
    """The order-independent sum (float64; exact for small integers in float32)."""
    out = np.zeros((g.shape[0], N, g.shape[2]))
    np.add.at(out, (slice(None), np.clip(idx, 0, N - 1)), g.astype(np.float64))
    return out


def run_take_grad(dev, g, idx, N, plan=None, **kw):
    A, J, B = g.shape
    plan = plan or plan_take_grad(A, N, B, J, target=dev.target, **kw)
    out = run_plan(dev, plan, {"g": g, "idx": idx}, {"dx": A * N * B})["dx"]
    return out.reshape(A, N, B)


# ---------------------------------------------------------------- the sort plan

@pytest.mark.parametrize("A, N, B, J", [(1, 7, 1, 33), (3, 130, 7, 257), (2, 33, 8, 130),
                                        (1, 257, 130, 1000), (2, 5000, 3, 600)])
def test_take_grad(dev, A, N, B, J):
    rng = np.random.default_rng(2)
    g = rng.standard_normal((A, J, B)).astype(np.float32)
    if J >= N:     # every index value used, repeated, in shuffled order, some out of range
        idx = np.concatenate([np.arange(N), rng.integers(-2, N + 2, J - N)])
        rng.shuffle(idx)
    else:          # repeated indices, most values never used
        idx = rng.integers(0, N, J)
        idx[: J // 3] = idx[J // 3]
    idx = idx.astype(np.int32)
    dx = run_take_grad(dev, g, idx, N, method="sort")
    np.testing.assert_allclose(dx, exact_sum(g, idx, N), rtol=1e-5, atol=1e-5)
    # summed in the kernel's order: exactly that float32 result
    np.testing.assert_array_equal(dx, take_grad_ref(g, idx, N))


def test_take_grad_deterministic(dev):
    """Bucket order comes from int atomics; the sum order must not: two runs agree bitwise."""
    rng = np.random.default_rng(3)
    A, N, B, J = 1, 50, 4, 3000
    g = (rng.standard_normal((A, J, B)) * 10.0 ** rng.integers(-4, 4, (A, J, 1))).astype(np.float32)
    idx = rng.integers(0, N, J).astype(np.int32)
    idx[::2] = 7                                               # one bucket of half of J
    first = run_take_grad(dev, g, idx, N, method="sort")
    second = run_take_grad(dev, g, idx, N, method="sort")
    np.testing.assert_array_equal(first.view(np.uint32), second.view(np.uint32))
    np.testing.assert_array_equal(first, take_grad_ref(g, idx, N))


def test_take_grad_embedding_like(dev):
    """A vocabulary-sized N (the scan loops over many chunks), no subgroups in the scan."""
    rng = np.random.default_rng(4)
    A, N, B, J = 1, 50000, 4, 4096
    g = rng.standard_normal((A, J, B)).astype(np.float32)
    idx = np.minimum(rng.zipf(1.3, J), N - 1).astype(np.int32)
    for sub in (True, False):
        np.testing.assert_array_equal(
            run_take_grad(dev, g, idx, N, method="sort", subgroups=sub), take_grad_ref(g, idx, N))


def test_take_grad_no_indices(dev):
    g = np.zeros((2, 0, 3), np.float32)
    for method in ("sort", "rows"):
        dx = run_take_grad(dev, g, np.zeros(0, np.int32), 5, method=method)
        np.testing.assert_array_equal(dx, np.zeros((2, 5, 3), np.float32))


def test_take_grad_plan():
    plan = plan_take_grad(1, 50000, 512, 4096, method="sort")
    assert [launch.name for launch in plan.launches] == [
        "take_grad_clear", "take_grad_hist", "take_grad_scan", "take_grad_fill",
        "take_grad_rank", "take_grad_chunks", "take_grad_accum"]
    chunks = 4096 // 32 + 4096        # ceil(J / 32) + min(N, J)
    assert {(t.role, t.size, t.dtype) for t in plan.temps} == {
        ("counts", 50000, "int32"), ("offsets", 50001, "int32"), ("coffsets", 50001, "int32"),
        ("perm", 4096, "int32"), ("order", 4096, "int32"), ("partial", chunks * 512, "float32")}
    for launch, roles in plan.steps:
        assert launch.bindings == len(roles)
    accum = plan.steps[-1][0]
    assert dict(accum.defines)["VEC"] == 4 and accum.groups == (50000 * 128 // 256, 1, 1)
    rank = plan.steps[4][0]
    assert rank.groups == (4096 * 32 // 256, 1, 1)      # a team of 32 threads per index
    with pytest.raises(ValueError, match="'gather'"):
        plan_take_grad(1, 5, 5, 5, method="gather")


def test_take_grad_frequent_index_past_the_loop_limit(dev):
    """One index 70,000 times (a bucket longer than lavapipe's 65,535-iteration loops): the
    ranking and the sums are split, never truncated; the rows plan's walk too."""
    A, N, B, J = 1, 3, 4, 70_000
    rng = np.random.default_rng(5)
    g = rng.integers(-3, 4, (A, J, B)).astype(np.float32)     # exact sums in float32
    idx = np.ones(J, np.int32)
    idx[::1000] = 0
    np.testing.assert_array_equal(run_take_grad(dev, g, idx, N, method="sort"),
                                  take_grad_ref(g, idx, N))
    np.testing.assert_array_equal(run_take_grad(dev, g, idx, N, method="rows"),
                                  exact_sum(g, idx, N))


# ---------------------------------------------------------------- the small-table plan

ROWS_CASES = [  # A, N, B, J, forced layout
    (1, 7, 1, 33, {}),
    (3, 130, 7, 257, {}),             # odd B: scalar loads
    (2, 33, 8, 130, {}),              # B % 4 == 0: vec4
    (1, 257, 130, 1000, {}),          # slices = 1024 // 130 = 7: not a power of two
    (1, 1, 5, 300, {}),               # V = 1
    (2, 500, 3, 600, {}),             # two rows per workgroup
    (1, 40, 12, 2500, dict(rows=4, slices=2)),
    (2, 9, 5, 3000, dict(splits=3)),  # J over three workgroups, then their sum
    (1, 300, 300, 700, {}),           # columns over two blocks (256 + 44)
    (1, 6, 4, 40_000, dict(rows=8)),  # more rows per workgroup than the table has
]


@pytest.mark.parametrize("A, N, B, J, layout", ROWS_CASES)
def test_take_grad_rows(dev, A, N, B, J, layout):
    """Against the interpreter's order-independent sum: exactly for small integers (every
    order gives the same float32), to float32 rounding for normal values. Ids repeated, out
    of range on both sides (clamped as take clamps), most values unused when J < N."""
    rng = np.random.default_rng(6)
    idx = rng.integers(-2, N + 2, J).astype(np.int32)
    idx[: J // 3] = idx[J // 3]
    plan = plan_take_grad_rows(A, N, B, J, target=dev.target, **layout)
    assert plan.launches[0].name == "take_grad_rows"
    # J split over workgroups (forced, or chosen for the device: a GPU splits a tiny table's
    # many ids, the H200 this 6-row one; lavapipe by its loop limit) adds the in-order sum
    lay = take_grad_rows_layout(A, N, B, J, target=dev.target, **layout)
    assert len(plan.launches) == (2 if lay.splits > 1 else 1)
    assert "splits" not in layout or lay.splits == layout["splits"]
    ints = rng.integers(-3, 4, (A, J, B)).astype(np.float32)
    np.testing.assert_array_equal(run_take_grad(dev, ints, idx, N, plan), exact_sum(ints, idx, N))
    g = rng.standard_normal((A, J, B)).astype(np.float32)
    want = exact_sum(g, idx, N)
    bound = 2e-7 * exact_sum(np.abs(g), idx, N) * np.sqrt(max(J, 1)) + 1e-30
    assert np.all(np.abs(run_take_grad(dev, g, idx, N, plan) - want) <= bound)


def test_take_grad_rows_all_ids_equal(dev):
    """Every id names one row (the slices share its thousands of matches) or none in range."""
    A, N, B, J = 1, 64, 8, 5000
    g = np.random.default_rng(7).integers(-3, 4, (A, J, B)).astype(np.float32)
    for value in (17, -5, 900):
        idx = np.full(J, value, np.int32)
        np.testing.assert_array_equal(run_take_grad(dev, g, idx, N, method="rows"),
                                      exact_sum(g, idx, N))


def test_take_grad_rows_deterministic(dev):
    """Values of many magnitudes, where order matters: two runs agree bit for bit, split or
    not."""
    rng = np.random.default_rng(8)
    A, N, B, J = 1, 20, 8, 6000
    g = (rng.standard_normal((A, J, B)) * 10.0 ** rng.integers(-4, 4, (A, J, 1))).astype(np.float32)
    idx = rng.integers(0, N, J).astype(np.int32)
    idx[::2] = 7
    for splits in (1, 4):
        plan = plan_take_grad_rows(A, N, B, J, target=dev.target, splits=splits)
        first, second = (run_take_grad(dev, g, idx, N, plan) for _ in range(2))
        np.testing.assert_array_equal(first.view(np.uint32), second.view(np.uint32))
        np.testing.assert_allclose(first, exact_sum(g, idx, N), rtol=1e-4, atol=1e-3)


def test_take_grad_rows_splits_for_the_loop_limit(dev):
    """One thread per workgroup walking 300,000 ids would pass lavapipe's 65,535 loop
    iterations (its sum stopped at 36,760 of 100,000 ids): the planner splits J until each
    split's bound fits, and nothing is dropped."""
    A, N, B, J = 1, 2, 1, 300_000
    lay = take_grad_rows_layout(A, N, B, J, target=Target.lavapipe(), rows=1, slices=1)
    assert lay.splits > 1
    assert _rows_loop_iterations(-(-J // lay.splits), lay) <= 65535
    assert _rows_loop_iterations(-(-J // (lay.splits - 1)), lay) > 65535
    idx = np.ones(J, np.int32)
    idx[::7] = 0
    g = np.ones((A, J, B), np.float32)
    plan = plan_take_grad_rows(A, N, B, J, target=dev.target, rows=1, slices=1)
    np.testing.assert_array_equal(run_take_grad(dev, g, idx, N, plan), exact_sum(g, idx, N))


def test_take_grad_rows_chosen_on_the_device(dev):
    """plan_take_grad picks the rows plan for a small table on this device (2**16 id tests:
    within lavapipe's and a GPU's take_grad_rows_max_tests), and it runs."""
    A, N, B, J = 1, 32, 64, 2048
    rng = np.random.default_rng(9)
    idx = rng.integers(0, N, J).astype(np.int32)
    idx[rng.random(J) < 1 / 6] = 3                     # text-like: a space a sixth of the ids
    g = rng.integers(-3, 4, (A, J, B)).astype(np.float32)
    plan = plan_take_grad(A, N, B, J, target=dev.target)
    assert [launch.name for launch in plan.launches] == ["take_grad_rows"]
    np.testing.assert_array_equal(run_take_grad(dev, g, idx, N, plan), exact_sum(g, idx, N))


# ---------------------------------------------------------------- the choice, on both Targets

def test_take_grad_plan_choice():
    h200, lava = Target.h200(), Target.lavapipe()
    # the LM's [256, 256] embedding from 8,192 ids on the H200: one launch, a workgroup per
    # row, 16 slices of 64 vec4 columns
    plan = plan_take_grad(1, 256, 256, 8192, target=h200)
    (launch, roles), = plan.steps
    assert launch.name == "take_grad_rows" and roles == ("g", "idx", "dx") and plan.temps == ()
    assert launch.groups == (256, 1, 1) and launch.spec == (1024, 1, 16, 64)
    assert dict(launch.defines) == {"VEC": 4}
    assert take_grad_rows_tests(1, 256, 256, 8192, target=h200) == 256 * 8192
    # lavapipe tests ids on 2 cores: the sort plan ran faster there from 2**19 tests
    assert len(plan_take_grad(1, 256, 256, 8192, target=lava).steps) == 7
    assert plan_take_grad(1, 32, 64, 2048, target=lava).launches[0].name == "take_grad_rows"
    # GPT-2's [50257, 768] from 16,384 ids: a row scan would test 8e8 ids; the sort plan
    for target in (h200, lava):
        tests = take_grad_rows_tests(1, 50257, 768, 16384, target=target)
        assert tests == 50257 * 16384 > target.take_grad_rows_max_tests
        assert len(plan_take_grad(1, 50257, 768, 16384, target=target).steps) == 7
    # many rows from few ids on the H200: rows (3.2e6 tests)
    assert plan_take_grad(1, 50257, 768, 64, target=h200).launches[0].name == "take_grad_rows"


def test_take_grad_rows_splits_a_tiny_table_on_a_gpu():
    """V = 4 from 8,192 ids: 4 workgroups would each sum 2,048 ids of their row, 128 a slice;
    on the H200 J is split in two (64 a slice) and a second launch sums the splits in order;
    lavapipe (no split_k) keeps one launch. V = 1: split over 8 spans of 1,024 ids."""
    plan = plan_take_grad(1, 4, 256, 8192, target=Target.h200())
    assert [launch.name for launch in plan.launches] == ["take_grad_rows", "reduce_sum"]
    assert plan.launches[0].groups == (4 * 2, 1, 1)
    assert {t.role: t.size for t in plan.temps}["partials"] == 2 * 4 * 256
    assert take_grad_rows_layout(1, 1, 256, 8192, target=Target.h200()).splits == 8
    assert len(plan_take_grad(1, 4, 256, 8192, target=Target.lavapipe()).steps) == 1
    # the LM's table is not split: 2 ids per slice on average
    assert take_grad_rows_layout(1, 256, 256, 8192, target=Target.h200()).splits == 1


# ---------------------------------------------------------------- through vg.jit

@pytest.mark.parametrize("vocab, width, ids", [(40, 8, (3, 100)), (7, 5, (300,))])
def test_an_embedding_gradient_runs_the_rows_plan_under_jit(vocab, width, ids):
    """vg.grad of an embedding lookup on the Vulkan backend: scatter_add lowered to the rows
    plan (a small table on any Target), equal to the interpreter's; out-of-range ids clamped."""
    import vkgrad as vg
    import vkgrad.numpy as vnp
    rng = np.random.default_rng(10)
    table = rng.standard_normal((vocab, width)).astype(np.float32)
    idx = rng.integers(-2, vocab + 2, ids).astype(np.int32)
    f = vg.grad(lambda e, i: vnp.sum(vnp.sin(vnp.take(e, i, axis=0))))
    on_gpu = vg.jit(f, backend="vulkan")
    got, want = np.asarray(on_gpu(table, idx)), np.asarray(vg.jit(f, backend="numpy")(table, idx))
    lowered = on_gpu.lower(table, idx)
    assert lowered.fallback_reason is None
    assert "take_grad_rows" in [s.launch.name for s in lowered.lowered.steps]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
