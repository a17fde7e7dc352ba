"""Long runs on Vulkan (lavapipe in CI): nothing grows (docs/long_runs.md).

A 2,000-step donated, asynchronous training loop keeps every runtime counter (vg.runtime_stats)
and the Python object count equal, and RSS within a small bound, from step 200 to step 2,000;
a jitted function called with a new shape every call keeps at most MAX_PROGRAMS programs, and
its pipelines and buffers stay bounded; the buffer pool gives a large computation's buffers back
to Vulkan once recent calls no longer need them, and keeps them while they do.
"""

import gc
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import vkgrad as vg
import vkgrad.numpy as vnp
from vkgrad.execution import jit
from vkgrad.runtime import get_device, pool, vulkan
from vkgrad.runtime.pool import pool_of

ROOT = Path(__file__).resolve().parent.parent
OBJECT_COUNTS = ("programs", "executables", "sequences", "descriptor_sets", "pipelines",
                 "jit_programs")


def stats():
    gc.collect()
    return vg.runtime_stats()


def test_runtime_stats_count_what_a_program_creates():
    get_device()     # open (device counts are zeros before: the numpy backend opens none)
    before = stats()
    assert before["sequences"] >= 1          # the device's own, for one-off transfers
    f = vg.jit(lambda x: vnp.tanh(x) * 3.0)
    x = np.linspace(-1, 1, 37, dtype=np.float32)
    np.testing.assert_allclose(np.asarray(f(x)), np.tanh(x) * 3.0, rtol=1e-5)
    after = stats()
    assert after["jit_programs"] == before["jit_programs"] + 1
    assert after["programs"] == before["programs"] + 1
    # one executable: one dispatch (its descriptor set) and one recorded sequence
    assert after["executables"] == before["executables"] + 1
    assert after["sequences"] == before["sequences"] + 1
    assert after["descriptor_sets"] - before["descriptor_sets"] == \
        1 + after["pipelines"] - before["pipelines"]
    assert after["rss_bytes"] > 0
    del f
    gone = stats()
    assert gone["programs"] == before["programs"]
    assert gone["executables"] == before["executables"]
    assert gone["jit_programs"] == before["jit_programs"]


def test_2000_donated_async_steps_grow_nothing(tmp_path):
    """bench/long_run.py in a process of its own (so RSS is the loop's): 2,000 steps of the
    bench_mlp step on a tiny MLP, counters every 200 steps."""
    out = tmp_path / "long_run.json"
    # one submission in flight: a runner records another copy of the step when every copy
    # is still running (up to VKGRAD_MAX_IN_FLIGHT, 3), so with more in flight the counts
    # may rise by a copy whenever the queue first gets that deep (on the H200: executables 3
    # -> 4 between steps 200 and 2000); bounded, but not what this test is for
    env = dict(os.environ, VKGRAD_BACKEND="vulkan", VKGRAD_MAX_IN_FLIGHT="1")
    res = subprocess.run([sys.executable, str(ROOT / "bench" / "long_run.py"), "--tiny",
                          "--steps", "2000", "--every", "200", "--out", str(out)],
                         capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    run = json.loads(out.read_text())
    assert run["backend"] == "vulkan"
    at = {r["step"]: r for r in run["records"]}
    first, last = at[200], at[2000]
    for key in (*OBJECT_COUNTS, "buffers", "buffer_bytes", "pooled_buffers", "pooled_bytes"):
        assert first[key] == last[key], (key, first[key], last[key], res.stdout)
    # which results are still pending when the counters are read moves a few objects either
    # way (and caches still settling free a few); one object a step kept would be 1,800
    assert last["python_objects"] - first["python_objects"] <= 10, res.stdout
    assert abs(last["rss_bytes"] - first["rss_bytes"]) < 2 << 20, res.stdout
    assert first["programs"] == 1 and first["pipelines"] > 0
    assert last["loss"] < at[0]["loss"]     # it trained


@pytest.fixture
def small_limits(monkeypatch):
    monkeypatch.setattr(jit, "MAX_PROGRAMS", 8)        # read by each new jitted function
    device = get_device()
    for cache in (device._kernels, device._by_launch):  # the device's, made when it opened
        monkeypatch.setattr(cache, "maxsize", 8)


def test_a_new_shape_every_call_keeps_programs_pipelines_and_buffers_bounded(small_limits):
    f = vg.jit(lambda x: vnp.tanh(x) * 2.0 + 1.0)
    seen = {}
    for n in range(1, 41):          # 40 batch sizes, 5x the limit of 8 programs
        x = np.full((n, 3), n / 40, np.float32)
        np.testing.assert_allclose(np.asarray(f(x)), np.tanh(x) * 2.0 + 1.0, rtol=1e-5)
        if n in (20, 40):
            seen[n] = stats()
    assert len(f._cache) == 8 and f.compiles == 40
    mid, end = seen[20], seen[40]
    # (other tests' objects live in this process too, the pool may free some, and how many
    # recorded copies a live program holds depends on which pooled buffers its uploads got:
    # a few either way; one object kept per new shape would be 20 or more)
    for key in OBJECT_COUNTS:
        assert end[key] - mid[key] < 20, (key, mid[key], end[key])
    assert end["jit_programs"] == mid["jit_programs"]
    # free buffers: at most the pool's mark in number, plus the last call's two
    assert end["pooled_buffers"] <= end["pool_mark_buffers"] + 2
    assert end["buffers"] - end["pooled_buffers"] <= mid["buffers"] - mid["pooled_buffers"]
    # an evicted shape compiles again and still gives the right answer
    x = np.ones((1, 3), np.float32)
    np.testing.assert_allclose(np.asarray(f(x)), np.tanh(x) * 2.0 + 1.0, rtol=1e-5)
    assert f.compiles == 41 and len(f._cache) == 8


def test_the_pool_gives_a_large_computations_buffers_back(monkeypatch):
    monkeypatch.setattr(pool, "KEEP_BYTES", 1 << 20)
    monkeypatch.setattr(pool, "RECENT_CALLS", 10)
    big = vg.jit(lambda x: x * 2.0)
    small = vg.jit(lambda x: x + 1.0)
    xs = np.ones(16, np.float32)
    xb = np.ones(1 << 20, np.float32)      # 4 MiB in, 4 MiB out
    for _ in range(25):                     # the mark follows the small calls only
        small(xs)
    before = stats()
    np.testing.assert_array_equal(np.asarray(big(xb))[:3], [2.0, 2.0, 2.0])
    after_big = stats()
    # the result is back in the pool (the argument is in the program's own slot, runners.py)
    assert after_big["pooled_bytes"] >= 4 << 20
    assert after_big["pool_mark_bytes"] >= 16 << 20  # twice the big call's footprint
    # while the big call is recent, its buffers stay pooled: calling it again takes the same
    # one, allocating none
    def pooled_big():
        return {id(b) for b in pool_of(get_device()).order if b.nbytes == 4 << 20}
    one = pooled_big()
    assert len(one) == 1
    allocations = vulkan.counters["allocations"]
    np.testing.assert_array_equal(np.asarray(big(xb))[:3], [2.0, 2.0, 2.0])
    gc.collect()
    assert pooled_big() == one and vulkan.counters["allocations"] == allocations
    for _ in range(25):                     # two windows of small calls later...
        np.testing.assert_array_equal(np.asarray(small(xs)), xs + 1)
    end = stats()
    # ... they are freed: the pool, and the recorded sequence that bound them (with the
    # argument's slot), let them go
    assert end["pooled_bytes"] <= end["pool_mark_bytes"] == 1 << 20
    assert end["buffer_bytes"] <= before["buffer_bytes"] + (1 << 20)
    assert end["executables"] <= before["executables"]   # others' may go too
    # and the big program still runs, recording again on new buffers
    np.testing.assert_array_equal(np.asarray(big(xb))[:3], [2.0, 2.0, 2.0])
    assert pool_of(get_device()).free_bytes >= 4 << 20
