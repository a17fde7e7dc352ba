"""vg.distributed and the collectives (docs/distributed.md).

Two ranks: each test starts `mpirun -n 2` (MPICH from the `distributed` extra, in the venv's
bin/) on a script of tests/distributed/ with a timeout, on the interpreter and on Vulkan
(lavapipe); the split step needs them (over a world of one nothing splits). One process: the
world of one (the plain jitted step), vmap's named axes, the errors.
"""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from child_env import child_env

import vkgrad as vg
import vkgrad.numpy as vnp
from vkgrad.runtime import counters
from vkgrad.runtime.runners import VulkanRunner
from vkgrad.runtime.device import DeviceInfo, preferred_index

SCRIPTS = Path(__file__).resolve().parent / "distributed"
BACKENDS = ["numpy", "vulkan"]


def mpirun() -> str:
    """MPICH's launcher beside this Python (the `distributed` extra installs it there)."""
    path = Path(sys.executable).parent / "mpirun"
    assert path.exists(), (f"no {path}: install vkgrad's distributed extra (make setup, or "
                           "pip install -e '.[distributed]')")
    return str(path)


def launch(script, *args, n=2, backend="numpy", timeout=120):
    """Run tests/distributed/<script> on n ranks (n=None: alone, not under MPI)."""
    cmd = [sys.executable, str(SCRIPTS / script), *map(str, args)]
    if n is not None:
        cmd = [mpirun(), "-n", str(n)] + cmd
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          env=child_env(VKGRAD_BACKEND=backend))


def ok(run):
    assert run.returncode == 0, run.stdout + run.stderr
    return run


# ----------------------------------------------------------------------------- two ranks

@pytest.mark.parametrize("backend,buckets", [("numpy", ()), ("vulkan", ()),
                                             ("vulkan", ("buckets",))])
def test_data_parallel_mlp_matches_one_process_and_ranks_agree_bit_for_bit(backend, buckets,
                                                                           tmp_path):
    ok(launch("mlp.py", tmp_path / "two.npz", *buckets, backend=backend))
    ok(launch("mlp.py", tmp_path / "one.npz", *buckets, n=None, backend=backend))
    two, one = np.load(tmp_path / "two.npz"), np.load(tmp_path / "one.npz")
    for k in ("w1", "b1", "w2"):
        np.testing.assert_array_equal(two[f"{k}_0"], two[f"{k}_1"], err_msg=k)
        np.testing.assert_allclose(two[f"{k}_0"], one[f"{k}_0"], rtol=1e-5, atol=1e-6,
                                   err_msg=k)
    np.testing.assert_allclose(two["loss"], one["loss"], rtol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_collectives_on_two_ranks_match_numpy(backend):
    run = ok(launch("collectives.py", backend=backend))
    assert "ok rank 0" in run.stdout and "ok rank 1" in run.stdout, run.stdout


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_rank_that_raises_ends_the_job_naming_the_rank_and_the_cause(backend):
    """On Vulkan rank 0 waits for the all-reduce on the split step's collectives thread."""
    run = launch("faults.py", "raise", backend=backend, timeout=120)
    assert run.returncode != 0
    assert ("rank 1 of 2 failed: ValueError: the data loader of rank 1 found a corrupt record"
            in run.stderr), run.stderr
    assert "rank 0 step 1 done" not in run.stdout and "finished" not in run.stdout


def test_ranks_with_other_shapes_are_stopped_at_the_first_step():
    run = launch("faults.py", "shapes", timeout=120)
    assert run.returncode != 0
    assert "step 0 done" not in run.stdout, run.stdout      # stopped at the first step
    assert ("data_parallel(step): rank 1 calls it with other shapes than rank 0 (array "
            "argument 1: f32[4,3] vs f32[3,3])" in run.stderr), run.stderr
    assert "faults.py:" in run.stderr          # the user's line
    assert "finished" not in run.stdout


def test_ranks_with_other_static_arguments_are_stopped_at_the_first_step():
    run = launch("faults.py", "static", timeout=120)
    assert run.returncode != 0
    assert "step 0 done" not in run.stdout, run.stdout      # stopped at the first step
    assert ("data_parallel(step): static argument 2 ('lr') differs between the ranks (0.1 on "
            "rank 0; 0.2 on rank 1); every rank must run the same program" in run.stderr), \
        run.stderr
    assert "faults.py:" in run.stderr          # the user's line
    assert "finished" not in run.stdout


@pytest.fixture(scope="module")
def split_run(tmp_path_factory) -> list:
    """tests/distributed/split.py on 2 ranks on Vulkan: one record per rank."""
    out = tmp_path_factory.mktemp("split") / "split.json"
    ok(launch("split.py", out, backend="vulkan", timeout=180))
    records = json.loads(out.read_text())
    assert [(r["rank"], r["size"]) for r in records] == [(0, 2), (1, 2)]
    return records


def test_a_collective_splits_a_vulkan_program_into_three_submissions(split_run):
    """On Vulkan the step's program runs as the part before the pmean (one submission), the
    gradients read back in one more (both gradients: one read), the pmean on the host, and the
    part after it (the optimizer, its inputs uploaded with it)."""
    for r in split_run:
        three = r["three"]
        assert three["steps"] == ["run", "host", "run"] and three["fallback"] is None, r
        assert three["submissions"] == 3, r
        assert three["error"] <= 1, r


def test_a_donated_buffer_another_argument_still_needs_is_not_written_over(split_run):
    """The same Array passed as a donated argument and as one a later part reads: the part that
    reads the donated one last must not write over it (the call then does without)."""
    for r in split_run:
        d = r["donated"]
        assert d["steps"] == ["run", "host", "run", "host", "run"], r
        assert d["error"] <= 1, r
        assert "was donated to a jitted call" in d["reused"], r


def test_gradients_are_reduced_in_buckets_in_the_order_the_backward_computes_them(split_run):
    """Each bucket's collective sits right after its last gradient, so its all-reduce runs
    while the later gradients compute: with BUCKET_BYTES = 1 every gradient is its own bucket,
    the last layer's first."""
    for r in split_run:
        b = r["buckets"]
        assert b["steps"] == ["run", "host"] * 3 + ["run"], r
        assert b["buckets"] == [["f32[6,2]"], ["f32[5,6]"], ["f32[4,5]"]], r
        assert b["error"] <= 1, r


def donation(tmp_path, mode, *extra, n=2) -> list:
    out = tmp_path / f"{mode}{''.join(extra)}.json"
    ok(launch("donation.py", out, mode, *extra, n=n, backend="vulkan"))
    return json.loads(out.read_text())


@pytest.mark.parametrize("buckets", [(), ("buckets",)])
def test_donated_state_is_written_in_place_by_the_split_step(buckets, tmp_path):
    """The optimizer's part writes the donated parameters and Adam state over their own
    buffers, so a data-parallel step holds what one jitted program of the step holds, plus:
    the gradients (results of the backward's part, read back and uploaded again, where one
    program keeps them in its scratch), the backward parts' own scratch (one program packs its
    activations into its gradients' buffers), and, with a bucket per gradient, the activations
    between the backward's parts (each read back, and uploaded again). Without donation it
    holds a second copy of the state and more. The donated Arrays are deleted."""
    single, = donation(tmp_path, "single", n=None)
    for r in donation(tmp_path, "split", *buckets):
        assert r["parts"] == (5 if buckets else 2)
        assert r["bytes"] <= (single["bytes"] + r["gradient_bytes"] + r["scratch_bytes"]
                              + 2 * r["crossing_bytes"]), r
        assert r["reused"].startswith("this f32[256,256] Array was donated to a jitted call"), r
    if not buckets:
        for kept in donation(tmp_path, "kept"):
            assert kept["bytes"] > single["bytes"] + kept["gradient_bytes"] + kept["state_bytes"]
            assert kept["reused"] == "no error"


# ----------------------------------------------------------------------------- one process

def test_without_a_launcher_the_world_is_one_process_and_mpi_is_not_loaded():
    code = ("import sys, numpy as np, vkgrad as vg\n"
            "d = vg.distributed\n"
            "x = d.all_reduce({'a': np.ones(2, np.float32)}, op='mean')['a']\n"
            "b = d.broadcast(np.arange(3, dtype=np.int32))\n"
            "print(d.rank(), d.size(), d.local_rank(), type(x).__name__, x.tolist(),"
            " b.tolist(), 'mpi4py' in sys.modules)")
    env = child_env(VKGRAD_BACKEND="numpy")
    for v in ("PMI_RANK", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK"):
        env.pop(v, None)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=60)
    assert out.stdout.split() == ["0", "1", "0", "Array", "[1.0,", "1.0]", "[0,", "1,", "2]",
                                  "False"], out.stderr


def _mlp_step(reduce):
    """An Adam step of a small MLP, its gradients and loss passed through `reduce`."""
    opt = vg.optim.adam(1e-2)

    def loss_fn(p, x, y):
        return vnp.mean((vnp.tanh(x @ p["w1"] + p["b1"]) @ p["w2"] - y) ** 2)

    def step(p, state, x, y):
        loss, g = reduce(vg.value_and_grad(loss_fn)(p, x, y))
        updates, state = opt.update(g, state, p)
        return vg.optim.apply_updates(p, updates), state, loss
    return step, opt


def test_in_a_world_of_one_the_step_is_the_plain_jitted_step():
    """Over a world of one process a collective is the identity: the optimized program of the
    data-parallel step is the plain jitted step's (the traced one still shows the pmean), it
    runs as ONE submission, not split, and gives the same bits."""
    plain, opt = _mlp_step(lambda t: t)
    parallel, _ = _mlp_step(lambda t: vg.lax.pmean(t, "batch"))
    rng = np.random.default_rng(3)
    p = {"w1": rng.standard_normal((6, 8)).astype(np.float32) / 3,
         "b1": rng.standard_normal(8).astype(np.float32),
         "w2": rng.standard_normal((8, 2)).astype(np.float32) / 3}
    x, y = rng.standard_normal((5, 6)).astype(np.float32), rng.standard_normal((5, 2))
    y = y.astype(np.float32)
    results, texts = [], []
    for train in (vg.jit(plain, donate_argnums=(0, 1), backend="vulkan"),
                  vg.distributed.data_parallel(parallel, donate_argnums=(0, 1),
                                               backend="vulkan")):
        params, state = vg.device_put(p), vg.device_put(opt.init(p))
        params, state, _ = train(params, state, x, y)       # compiles
        lowered = train.lower(params, state, x, y)
        assert type(lowered.runner) is VulkanRunner and lowered.fallback_reason is None
        texts.append({s: lowered.as_text(s) for s in ("traced", "optimized")})
        before = counters["submissions"]
        for _ in range(3):
            params, state, loss = train(params, state, x, y)
            float(loss)
        assert counters["submissions"] - before == 3       # one a step
        results.append(vg.tree_util.tree_leaves((params, state, loss)))
    assert "psum[axes=(batch,), axis_size=1]" in texts[1]["traced"]
    assert "psum" not in texts[1]["optimized"]
    assert texts[1]["optimized"] == texts[0]["optimized"]
    for a, b in zip(*results):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_the_optimizer_removes_collectives_over_one_member():
    """The sum (max, min) over one member is its value: the simplification pass removes a
    collective over the world of one, and the psum over a vmap's axis and the world leaves a
    reduction over the mapped axis (the world's part is removed with the vmap's program)."""
    def f(x):
        both = vg.vmap(lambda r: vg.lax.psum(r, ("i", "batch")), axis_name="i")(x)
        return both * vg.lax.pmax(x, "batch")

    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    lowered = vg.distributed.data_parallel(f, backend="numpy").lower(x)
    assert "%3: f32[3,2] = pmax[axes=(batch,), axis_size=1] %0" in lowered.as_text("traced")
    assert lowered.as_text("optimized") == (
        "program f(%0: f32[3,2]) -> f32[3,2] {\n"
        "  %1: f32[2] = reduce_sum[axes=(0,)] %0\n"
        "  %2: f32[3,2] = mul %1, %0\n"
        "  return %2\n"
        "}\n")
    np.testing.assert_array_equal(np.asarray(vg.distributed.data_parallel(f)(x)),
                                  x.sum(0) * x)


def test_vmap_axis_name_reduces_over_the_mapped_axis():
    x = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    lax = vg.lax
    f = vg.vmap(lambda v: (lax.psum(v, "i"), lax.pmean(v, "i"), lax.pmax(v, "i"),
                           lax.pmin(v, "i"), lax.psum(2, "i")), axis_name="i")
    s, m, hi, lo, n = f(x)
    for got, want in [(s, x.sum(0)), (m, x.mean(0)), (hi, x.max(0)), (lo, x.min(0))]:
        np.testing.assert_allclose(np.asarray(got), np.broadcast_to(want, x.shape), rtol=1e-6)
    assert np.asarray(n).tolist() == [10] * 5
    # JAX's positions: vmap(fun, in_axes, out_axes, axis_name, axis_size); nested named axes
    inner = vg.vmap(lambda v: lax.psum(v, ("i", "j")), 0, 0, "j")
    np.testing.assert_allclose(np.asarray(vg.vmap(inner, 0, 0, "i")(x)),
                               np.full(x.shape, x.sum()), rtol=1e-5)
    outer_only = vg.vmap(vg.vmap(lambda v: lax.psum(v, "i"), axis_name="j"), axis_name="i")
    np.testing.assert_allclose(np.asarray(outer_only(x)), np.broadcast_to(x.sum(0), x.shape),
                               rtol=1e-6)
    # a value the same for every example (closed over: unmapped) summed over the 5 of them
    w = np.arange(3, dtype=np.float32)
    same = vg.vmap(lambda v: (v + lax.psum(w, "i"), lax.pmax(w, "i")), axis_name="i")(x)
    np.testing.assert_allclose(np.asarray(same[0]), x + 5 * w, rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(same[1]), np.broadcast_to(w, x.shape))


def test_gradient_through_a_vmapped_pmean_matches_numpy():
    x = np.random.default_rng(1).standard_normal((4, 3)).astype(np.float32)
    center = vg.vmap(lambda v: v - vg.lax.pmean(v, "i"), axis_name="i")
    g = vg.grad(lambda x: vnp.sum(center(x) ** 2))(x)
    np.testing.assert_allclose(np.asarray(g), 2 * (x - x.mean(0)), rtol=1e-5, atol=1e-6)


def test_an_unbound_axis_name_is_an_error_at_the_users_line():
    with pytest.raises(vg.ArgumentError) as e:
        vg.vmap(lambda v: vg.lax.psum(v, "batch"), axis_name="i")(np.ones((2, 3), np.float32))
    assert "unbound axis name: 'batch' (bound here: ['i'])" in str(e.value)
    assert "test_distributed.py:" in e.value.source
    with pytest.raises(vg.ArgumentError, match="unbound axis name: 'i'"):
        vg.jit(lambda v: vg.lax.pmean(v, "i"))(np.ones(3, np.float32))


def test_bad_host_collective_arguments_are_clear_errors():
    with pytest.raises(vg.ArgumentError, match=r"all_reduce: op='prod': choose one of sum, "
                                                "mean, max, min"):
        vg.distributed.all_reduce(np.ones(2), op="prod")
    with pytest.raises(vg.ArgumentError, match="broadcast: root=1 is not a rank of this world "
                                               "of 1"):
        vg.distributed.broadcast(np.ones(2), root=1)


# ----------------------------------------------------------------------------- train_lm

def train_lm(out, *extra, n=2):
    args = ["--data-parallel", "--steps", "2", "--batch", "4", "--seq", "16", "--eval-every",
            "1", "--sample", "0", "--out", out, *extra]
    return ok(launch(Path("..", "..", "examples", "train_lm.py"), *args, n=n, timeout=180))


def losses(out) -> list:
    return [json.loads(line)["loss"] for line in (out / "log.jsonl").read_text().splitlines()]


def test_train_lm_data_parallel_follows_one_process_and_resumes_on_any_number_of_ranks(
        tmp_path):
    two, one = tmp_path / "two", tmp_path / "one"
    run = train_lm(two)
    assert "2 data-parallel ranks" in run.stdout and run.stdout.count("wrote ") == 1
    train_lm(one, n=None)
    np.testing.assert_allclose(losses(two), losses(one), rtol=1e-5)
    assert sorted(p.name for p in two.iterdir()) == ["checkpoint.safetensors", "log.jsonl",
                                                     "loss.png"]
    # the two ranks' checkpoint resumed alone, the one process' on two ranks
    train_lm(two, "--resume", "--steps", "3", n=None)
    train_lm(one, "--resume", "--steps", "3")
    assert len(losses(two)) == len(losses(one)) == 3
    np.testing.assert_allclose(losses(two), losses(one), rtol=1e-5)


def test_the_local_rank_picks_one_of_the_preferred_devices():
    def info(i, kind):
        return DeviceInfo(index=i, name=f"d{i}", type=kind, api_version=(1, 3),
                          timestamp_period_ns=1.0,
                          max_shared_memory=1, max_workgroup_invocations=1,
                          max_storage_buffer_range=1, max_storage_buffers=1, timestamps=False)

    machine = [info(0, "CPU"), info(1, "discrete GPU"), info(2, "integrated GPU"),
               info(3, "discrete GPU")]
    assert [preferred_index(machine, r) for r in range(4)] == [1, 3, 1, 3]
    assert preferred_index(machine[:1], 5) == 0     # one device: every rank shares it
