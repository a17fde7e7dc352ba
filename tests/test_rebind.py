"""New argument arrays every call (a new batch each training step) cost no recording and no
allocation: each recorded copy of a program has its own argument slots, host data is uploaded
into them and device arrays are copied in through their device addresses by a recorded dispatch
(vkgrad/runtime/runners.py, "Argument slots"; docs/runtime.md, "Rebinding arguments")."""

import os
import subprocess
import sys

import numpy as np
import pytest

import vkgrad as vg
import vkgrad.numpy as vnp
from child_env import ROOT, child_env
from vkgrad.pipeline import Options, run_stages
from vkgrad.runtime import counters, get_device
from vkgrad.target import Target
from vkgrad.tracer.pytree import tree_leaves
from vkgrad.runtime.inflight import max_in_flight, set_max_in_flight
from test_jit import D_IN, batch, init_params, make_step   # the MLP training step

sys.path.insert(0, os.path.join(ROOT, "examples"))
import train_lm  # noqa: E402

EVENTS = ("recordings", "allocations", "pool_misses")


def batches(n, seed=1):
    rng = np.random.default_rng(seed)
    return [batch(rng) for _ in range(n)]


@pytest.fixture
def bound():
    old = max_in_flight()
    yield set_max_in_flight
    set_max_in_flight(old)


def events():
    return {k: counters[k] for k in EVENTS}


def grew(before):
    return {k: counters[k] - before[k] for k in EVENTS}


def reference_losses(data, opt):
    ref = vg.jit(make_step(opt), backend="numpy")
    params = init_params(np.random.default_rng(3))
    state, out = opt.init(params), []
    for x, y in data:
        params, state, loss = ref(params, state, x, y)
        out.append(float(loss))
    return out


@pytest.mark.parametrize("kind", ["numpy", "device_put", "jitted"])
def test_a_new_batch_every_call_records_and_allocates_nothing_after_two_calls(kind):
    """20 calls of a donated Adam step, each with a new batch: numpy arrays, arrays put on the
    device (all kept alive, so every call gets new buffers), or the results of another jitted
    function made just before the step (a data pipeline on the device; the step reads them
    while they may still be in flight). After the first two calls: no recording, no
    allocation, no pool miss; every loss is the interpreter's."""
    if kind != "numpy" and not get_device().addresses:
        pytest.skip("this kp build has no buffer device addresses (kp patch 0008)")
    opt = vg.optim.adam(1e-2)
    step = vg.jit(make_step(opt), backend="vulkan", donate_argnums=(0, 1))
    make = vg.jit(lambda x, y: (x * 1.0, y + 0), backend="vulkan")
    data = batches(20)
    params = vg.device_put(init_params(np.random.default_rng(3)))
    state = vg.device_put(opt.init(init_params(np.random.default_rng(3))))
    kept = vg.device_put(data) if kind == "device_put" else None
    losses = []
    for i, (x, y) in enumerate(data):
        if i == 2:
            before = events()
        if kind == "device_put":
            x, y = kept[i]
        elif kind == "jitted":
            x, y = make(x, y)
        old = params
        params, state, loss = step(params, state, x, y)
        assert old["w1"].is_deleted()  # donated: consumed, updated in place
        losses.append(float(loss))     # read every step, as a training loop does
    assert grew(before) == dict.fromkeys(EVENTS, 0)
    np.testing.assert_allclose(losses, reference_losses(data, opt), rtol=2e-3, atol=1e-4)
    runner = step.lower(params, state, *data[0]).runner
    assert sum(len(c) for c in runner.variants.values()) <= 2


def test_device_batches_are_copied_in_not_recorded():
    """From the second new device buffer on, the batch is copied into the program's own slot
    (one copy-in per argument per call) and the recorded sequence is replayed. (A batch
    dropped before the next is put gives its pooled buffer to the next one, which then binds
    the same buffer: the batches here stay alive.)"""
    if not get_device().addresses:
        pytest.skip("this kp build has no buffer device addresses (kp patch 0008)")
    f = vg.jit(lambda w, x: vnp.sum(x @ w), backend="vulkan")
    w = vg.device_put(np.ones((D_IN, 3), np.float32))
    xs = [x for x, _ in batches(6)]
    outs, kept = [], []
    for i, x in enumerate(xs):
        if i == 2:
            rec, copies = counters["recordings"], counters["copy_ins"]
        kept.append(vg.device_put(x))
        outs.append(float(f(w, kept[-1])))
    assert counters["recordings"] == rec
    assert counters["copy_ins"] == copies + 4   # x only: w is the same buffer every call
    np.testing.assert_allclose(outs, [x.sum() * 3 for x in xs], rtol=1e-4)


def heavy_loss(w, x):
    for _ in range(3):
        x = vnp.tanh(x @ w)
    return vnp.sum(x * x)


@pytest.mark.parametrize("kind", ["numpy", "device_put"])
def test_calls_in_flight_keep_their_own_argument_slots(bound, kind):
    """Several calls in flight at once, each with its own batch: no call sees a later call's
    batch in its slots (each in-flight call has its own recorded copy and slots)."""
    bound(3)
    n = 128                            # a few 128^3 matmuls: long enough to stay in flight
    rng = np.random.default_rng(5)
    w = (rng.standard_normal((n, n)) / np.sqrt(n)).astype(np.float32)
    xs = [rng.standard_normal((n, n)).astype(np.float32) for _ in range(9)]
    f = vg.jit(heavy_loss, backend="vulkan")
    dw = vg.device_put(w)
    float(f(dw, xs[0]))
    float(f(dw, vg.device_put(xs[1])))
    args = xs if kind == "numpy" else vg.device_put(xs)   # (device_put waits for the queue)
    outs, most = [], 0
    for x in args:
        outs.append(f(dw, x))
        most = max(most, len(get_device().inflight))
    want = [float(vg.jit(heavy_loss, backend="numpy")(w, x)) for x in xs]
    np.testing.assert_allclose([float(o) for o in outs], want, rtol=1e-3)
    assert most >= 2 or get_device().info.type != "CPU"   # lavapipe: they do overlap


def test_without_device_addresses_a_new_device_buffer_records_again(monkeypatch):
    """Where the device cannot give addresses, a new device buffer is bound directly and the
    program recorded again for it (the results are the same)."""
    monkeypatch.setattr(get_device(), "addresses", False)
    f = vg.jit(lambda w, x: vnp.sum(x * w) + 1.0, backend="vulkan")
    w = vg.device_put(np.full(D_IN, 2.0, np.float32))
    xs = [x[0] for x, _ in batches(4)]
    rec, kept = counters["recordings"], [vg.device_put(x) for x in xs]
    outs = [float(f(w, x)) for x in kept]
    assert counters["recordings"] >= rec + 3
    np.testing.assert_allclose(outs, [2 * x.sum() + 1 for x in xs], rtol=1e-5)
    # host data still goes into the slots: no recording
    rec = counters["recordings"]
    outs = [float(f(w, x)) for x in xs]
    assert counters["recordings"] <= rec + 1
    np.testing.assert_allclose(outs, [2 * x.sum() + 1 for x in xs], rtol=1e-5)


def _undonated(cfg) -> int:
    """How many of the LM step's parameter and optimizer-state arguments this device's plan
    cannot write over (their results go to new buffers, which the next call copies in)."""
    step, _ = train_lm.make_steps(cfg)
    params = train_lm.init_params(cfg)
    opt = train_lm.optimizer(cfg).init(params)
    x = np.zeros((cfg["batch"], cfg["seq"]), np.int32)
    lowered = step.lower(params, opt, x, x).lowered
    donated = len(tree_leaves(params)) + len(tree_leaves(opt))
    return donated - len(set(lowered.donation.values()))


def test_step_time_bench_runs_a_tiny_lm_step_with_new_batches():
    """bench/step_time.py, which the H200 runs at the small preset, at the tiny one: a new
    device batch every step costs no recording and no allocation; what is copied in is the
    batch (x and y) and any argument the device's plan could not donate (lavapipe: none)."""
    out = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "step_time.py"),
                          "--preset", "tiny", "--steps", "2", "--batches", "device"],
                         capture_output=True, text=True, timeout=600, check=True,
                         env=child_env()).stdout
    assert "transformer tiny, device batches: host call" in out, out
    if get_device().addresses:
        copies = 2 + _undonated(train_lm.make_config("transformer", "tiny"))
        assert f"recordings 0, allocations 0, pool_misses 0, copy_ins {copies}" in out, out


def test_the_same_array_donated_twice_is_not_overwritten_by_either_result():
    """Two donated arguments that are one Array: its buffer is not the call's to overwrite for
    two results (the runner's per-result path, not the all-donations-safe one)."""
    step = vg.jit(lambda a, b: (a * 2.0, b + 1.0), donate_argnums=(0, 1), backend="vulkan")
    x = vg.device_put(np.arange(4, dtype=np.float32))
    p, q = step(x, x)
    np.testing.assert_allclose(np.asarray(p), np.arange(4) * 2.0)
    np.testing.assert_allclose(np.asarray(q), np.arange(4) + 1.0)
    assert p.buffer is not q.buffer


def test_a_repeated_call_still_checks_donations_and_new_arguments():
    """A call whose arguments are the last call's (but the slotted batch) skips the per-argument
    checks (runners.py, _Repeat); a second Array made on a donated buffer since, and a batch
    that is a donated Array itself, still keep the donation from overwriting what an Array
    reads."""
    if not get_device().addresses:
        pytest.skip("this kp build has no buffer device addresses (kp patch 0008)")
    step = vg.jit(lambda w, x: (w * 0.5 + vnp.sum(x), vnp.sum(w)), donate_argnums=0,
                  backend="vulkan")
    keep = vg.jit(lambda a: a, backend="vulkan")      # returns its input: shares the buffer
    xs = [np.full(4, i, np.float32) for i in range(8)]
    kept = vg.device_put(xs)
    w, want = vg.device_put(np.ones(4, np.float32)), np.ones(4, np.float32)
    for i in range(8):
        if i == 4:
            shared, at = keep(w), want.copy()
        if i == 6:   # the batch is the donated Array: the per-result path
            w, s = step(w, w)
            want, got_sum = want * 0.5 + want.sum(), want.sum()
        else:
            w, s = step(w, kept[i])
            want, got_sum = want * 0.5 + xs[i].sum(), want.sum()
        np.testing.assert_allclose(np.asarray(w), want, rtol=1e-6)
        np.testing.assert_allclose(float(s), got_sum, rtol=1e-6)
        assert (step.lower(w, kept[0]).runner._repeat is None) == (i in (4, 6))
    np.testing.assert_allclose(np.asarray(shared), at)   # never overwritten


def test_a_program_keeps_no_argument_buffer_alive_after_its_call():
    """What a runner keeps of the last call's arguments for the next one (_Repeat) does not keep
    them: once the Arrays are gone, their buffers go back to the pool."""
    import weakref
    f = vg.jit(lambda w, x: (w * 2.0, vnp.sum(x)), donate_argnums=0, backend="vulkan")
    w, x = vg.device_put(np.ones(8, np.float32)), vg.device_put(np.ones(3, np.float32))
    for _ in range(3):
        w, s = f(w, x)
    float(s)
    refs = [weakref.ref(w._owned), weakref.ref(x._owned)]
    assert f.lower(w, x).runner._repeat is not None
    del w, x, s
    get_device().inflight.wait_all()
    assert [r() for r in refs] == [None, None]


def test_a_repeat_trusts_its_argument_ids_only_while_their_buffers_live():
    """A repeat remembers the last call's arguments by id; once one of them is gone (an id may
    then come again for another object) the next call takes the full check, and computes
    right on new arguments that may sit where the old ones were."""
    from vkgrad.runtime.pool import watched_deaths
    f = vg.jit(lambda w, x: (w * 2.0, vnp.sum(x * w)), donate_argnums=0, backend="vulkan")
    x = vg.device_put(np.ones(4, np.float32))
    w = vg.device_put(np.ones(4, np.float32))
    for _ in range(3):
        w, s = f(w, x)
    rep = f.lower(w, x).runner._repeat
    assert rep is not None and rep.matches([w._owned, x._owned], rep.setting)
    deaths = watched_deaths[0]
    del w, s
    get_device().inflight.wait_all()
    assert watched_deaths[0] > deaths
    for k in range(3):   # new arguments: full checks, then a repeat of the new ones
        w = vg.device_put(np.full(4, k, np.float32))
        w2, s = f(w, x)
        assert w.is_deleted()
        np.testing.assert_allclose(np.asarray(w2), np.full(4, 2.0 * k))
        assert float(s) == 4.0 * k
        del w2, s
    assert not rep.matches([None, x._owned], rep.setting)


def test_a_call_fed_host_results_in_its_slots_repeats_too():
    """A small result that is not donated comes back as host data (a counter, say); fed back,
    it goes into its argument slot, and the call still repeats the last one's bindings."""
    f = vg.jit(lambda w, c: (w * 2.0, c + 1.0), donate_argnums=0, backend="vulkan")
    w, c = vg.device_put(np.ones(8, np.float32)), np.zeros((), np.float32)
    for i in range(5):
        w, c = f(w, c)
        assert float(c) == i + 1
    np.testing.assert_allclose(np.asarray(w), np.full(8, 32.0))
    assert f.lower(w, c).runner._repeat is not None


def test_results_that_replace_donated_arguments_stay_on_the_device():
    """A small result that replaces a donated argument whose buffer it could not take
    (lowered.carried: lavapipe's plan of this step increments the Adam step counts before
    their last readers; the H200's donates them all) stays on the device: as host data, the
    next call would wait for this one to finish and upload it again. The values are the
    interpreter's."""
    cfg = train_lm.make_config("transformer", "small", d_model=128, seq=16, batch=2)
    step, _ = train_lm.make_steps(cfg)
    ref_step = vg.jit(step.fun, backend="numpy")
    params = train_lm.init_params(cfg)
    opt = train_lm.optimizer(cfg).init(params)
    rng = np.random.default_rng(0)
    x, y = (rng.integers(0, 256, (2, 16)).astype(np.int32) for _ in range(2))
    program = vg.make_ir(step.fun)(params, opt, x, y)
    donated = frozenset(range(len(tree_leaves((params, opt)))))
    lavapipe = run_stages(program, "plan", Options(target=Target.lavapipe(), donated=donated))
    assert lavapipe["plan"].carried     # the case this is for, whatever this device plans
    p, s = vg.device_put(params), vg.device_put(opt)
    rp, rs = params, opt
    for _ in range(2):
        p, s, loss, _ = step(p, s, x, y)
        rp, rs, ref_loss, _ = ref_step(rp, rs, x, y)
    state = tree_leaves((p, s))
    assert all(a.buffer is not None for a in state)
    np.testing.assert_allclose(float(loss), float(ref_loss), rtol=1e-4)
    for a, r in zip(state, tree_leaves((rp, rs))):
        np.testing.assert_allclose(np.asarray(a), np.asarray(r), rtol=2e-3, atol=1e-5)


def test_a_repeat_with_pooled_results_in_slots_binds_as_a_fresh_call_would():
    """A repeated call whose results that are not donated go into pooled buffers through their
    result slots takes the last call's bindings as they are (runners.py, `_bound`): every
    result, kept or dropped, holds what a fresh binding computes, and new arguments after the
    repeats (a batch in another buffer, a new donated Array) still bind right."""
    if not get_device().addresses:
        pytest.skip("this kp build has no buffer device addresses (kp patch 0008)")
    f = vg.jit(lambda w, x: (w * 0.5 + 1.0, x * 3.0, vnp.sum(w)), donate_argnums=0,
               backend="vulkan")
    fresh = vg.jit(lambda w, x: (w * 0.5 + 1.0, x * 3.0, vnp.sum(w)), backend="vulkan")
    runner = f.lower(vg.device_put(np.ones(8, np.float32)),
                     vg.device_put(np.ones(5000, np.float32))).runner
    assert runner._pooled and runner._pooled_slotted   # the case this is for
    xs = vg.device_put([np.full(5000, i, np.float32) for i in range(4)])
    w, want, kept = vg.device_put(np.ones(8, np.float32)), np.ones(8, np.float32), []
    for i in range(12):
        if i == 5:
            before = {k: vg.runtime_stats()[k] for k in EVENTS}
        if i == 9:   # a new donated Array: the full check, then repeats again
            after = vg.runtime_stats()
            w, want = vg.device_put(np.full(8, 2.0, np.float32)), np.full(8, 2.0, np.float32)
        ref = fresh(w, xs[i % 4])
        old = w
        w, y, s = f(w, xs[i % 4])
        assert old.is_deleted()
        with pytest.raises(vg.DeletedArrayError):
            np.asarray(old)
        np.testing.assert_allclose(np.asarray(w), want * 0.5 + 1.0)
        np.testing.assert_allclose(float(s), want.sum(), rtol=1e-6)
        for got, r in zip((w, y, s), ref):
            np.testing.assert_allclose(np.asarray(got), np.asarray(r), rtol=1e-6)
        if i < 3:
            kept.append((y, i % 4))
        want = want * 0.5 + 1.0
        if i in (7, 8):
            assert runner._repeat is not None
    assert {k: after[k] - before[k] for k in EVENTS} == dict.fromkeys(EVENTS, 0)
    for y, k in kept:   # results of earlier calls keep their own values
        np.testing.assert_allclose(np.asarray(y), np.full(5000, 3.0 * k))


def test_one_array_donated_twice_on_a_repeat_is_deleted_once():
    """Two donated arguments in argument slots that are one Array, on a call that otherwise
    repeats the last one: the runner does not call the arguments distinct, so the Array is
    deleted once (its buffer's count of users does not go below zero), and later calls still
    compute right."""
    if not get_device().addresses:
        pytest.skip("this kp build has no buffer device addresses (kp patch 0008)")
    f = vg.jit(lambda w, a, b: (w * 2.0, vnp.sum(a) + vnp.sum(b)), donate_argnums=(0, 1, 2),
               backend="vulkan")
    w = vg.device_put(np.ones(4, np.float32))
    for i in range(6):
        a = vg.device_put(np.full(3, i, np.float32))
        b = a if i == 4 else vg.device_put(np.ones(3, np.float32))
        owned = a._owned
        w, s = f(w, a, b)
        assert a.is_deleted() and b.is_deleted()
        assert owned.users == 0
        assert float(s) == 3.0 * i + (3.0 * i if i == 4 else 3.0)
        np.testing.assert_allclose(np.asarray(w), np.full(4, 2.0 ** (i + 1)))
        with pytest.raises(vg.DeletedArrayError):
            np.asarray(b)
