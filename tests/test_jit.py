"""vg.jit on Vulkan: training steps, residency, submission counts, the cache, donation, fallback."""

import numpy as np
import pytest

import vkgrad as vg
import vkgrad.numpy as vnp
from vkgrad.runtime import counters, get_device
from vkgrad.tracer.pytree import tree_flatten, tree_leaves

RNG = np.random.default_rng(7)
D_IN, D_H, D_OUT, BATCH = 20, 33, 7, 16


def init_params(rng):
    return {"w1": (rng.standard_normal((D_IN, D_H)) * 0.3).astype(np.float32),
            "b1": np.zeros(D_H, np.float32),
            "w2": (rng.standard_normal((D_H, D_OUT)) * 0.3).astype(np.float32),
            "b2": np.zeros(D_OUT, np.float32)}


def mlp_loss(params, x, y):
    h = vnp.maximum(x @ params["w1"] + params["b1"], 0.0)
    logits = h @ params["w2"] + params["b2"]
    return -vnp.mean(vnp.sum(vnp.one_hot(y, D_OUT) * vnp.log_softmax(logits, axis=-1), axis=-1))


def batch(rng):
    x = rng.standard_normal((BATCH, D_IN)).astype(np.float32)
    y = (np.abs(x[:, :D_OUT]).argmax(1)).astype(np.int32)   # learnable labels
    return x, y


def close(a, b, rtol=1e-4, atol=1e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol)


def test_value_and_grad_of_mlp_matches_interpreter():
    params, (x, y) = init_params(RNG), batch(RNG)
    vg_fn = vg.value_and_grad(mlp_loss)
    (loss, grads) = vg.jit(vg_fn, backend="vulkan")(params, x, y)
    (loss_ref, grads_ref) = vg_fn(params, x, y)
    close(loss, loss_ref)
    assert set(grads) == set(params)
    for k in params:
        assert isinstance(grads[k], vg.Array) and grads[k].shape == params[k].shape
        close(grads[k], grads_ref[k])


def make_step(opt):
    def step(params, opt_state, x, y):
        loss, grads = vg.value_and_grad(mlp_loss)(params, x, y)
        updates, opt_state = opt.update(grads, opt_state, params)
        params = vg.optim.apply_updates(params, updates)
        return params, opt_state, loss
    return step


def test_training_step_adam_donated_one_submission_no_param_upload():
    opt = vg.optim.adam(3e-2)
    step = make_step(opt)
    gpu = vg.jit(step, donate_argnums=(0, 1), backend="vulkan")
    ref = vg.jit(step, backend="numpy")
    rng = np.random.default_rng(0)
    params = init_params(rng)
    p_gpu, s_gpu = params, opt.init(params)
    p_ref, s_ref = params, opt.init(params)
    data = [batch(rng) for _ in range(2)]
    batches = [data[i % 2] for i in range(20)]   # a small dataset, seen 10 times
    losses, ref_losses = [], []
    for i, (x, y) in enumerate(batches):
        sub, up = counters["submissions"], counters["uploads"]
        old = p_gpu
        p_gpu, s_gpu, loss = gpu(p_gpu, s_gpu, x, y)
        if i > 0:
            assert counters["submissions"] == sub + 1, "one submission per training step"
            assert counters["uploads"] == up + 2, "only the batch (x, y) is uploaded"
            assert old["w1"].is_deleted()                      # donated: consumed
        losses.append(float(loss))                             # small: read with no submission
        if i > 0:
            assert counters["submissions"] == sub + 1
        p_ref, s_ref, l_ref = ref(p_ref, s_ref, x, y)
        ref_losses.append(float(l_ref))
    assert gpu.compiles == 1
    assert losses[-1] < 0.5 * losses[0], losses
    np.testing.assert_allclose(losses, ref_losses, rtol=2e-3, atol=1e-4)
    for k in params:
        close(p_gpu[k], p_ref[k], rtol=2e-3, atol=2e-4)
    # the donated parameters were updated in place: one recorded buffer set for the whole loop
    runner = gpu.lower(p_gpu, s_gpu, *batches[0]).runner
    assert len(runner.variants) == 1


def test_training_without_donation_keeps_old_arrays_valid():
    opt = vg.optim.sgd(0.1, momentum=0.9)
    step = vg.jit(make_step(opt), backend="vulkan")
    params = init_params(np.random.default_rng(3))
    state = opt.init(params)
    x, y = batch(np.random.default_rng(4))
    p1, s1, l1 = step(params, state, x, y)
    w1_after_one = np.array(p1["w1"])
    p2, s2, l2 = step(p1, s1, x, y)
    p3, s3, l3 = step(p2, s2, x, y)
    # p1 is still what it was: the later calls wrote other buffers
    np.testing.assert_array_equal(np.asarray(p1["w1"]), w1_after_one)
    assert float(l3) < float(l1)
    assert len(step.lower(p3, s3, x, y).runner.variants) <= 3


def test_one_submission_per_call_and_cache(capfd, monkeypatch):
    monkeypatch.setenv("VKGRAD_LOG_COMPILES", "1")
    f = vg.jit(lambda a, b: vnp.tanh(a @ b).sum(axis=0), backend="vulkan")
    a, b = RNG.standard_normal((7, 5)).astype(np.float32), RNG.standard_normal((5, 3)).astype(np.float32)
    f(a, b)
    sub = counters["submissions"]
    out = f(a, b)
    assert counters["submissions"] == sub + 1 and f.compiles == 1
    close(out, np.tanh(a @ b).sum(0))
    f(np.ones((9, 5), np.float32), b)
    assert f.compiles == 2
    err = capfd.readouterr().err
    assert "compiling lambda for vulkan (first call)" in err
    assert "leaf 0: f32[7,5] -> f32[9,5]" in err
    # the time of every compile stage, one line per compile
    stages = [l for l in err.splitlines() if l.startswith("vkgrad: compiled lambda: trace ")]
    assert len(stages) == 2
    for word in ("optimized", "fused", "plan", "shaders", "pipelines", "total"):
        assert f" {word} " in stages[0], stages[0]


def test_static_argnums_and_kwargs():
    f = vg.jit(lambda x, n, scale=1.0: vnp.sum(x ** n) * scale, static_argnums=(1,), backend="vulkan")
    x = RNG.uniform(0.5, 1.5, 33).astype(np.float32)
    close(f(x, 2), np.sum(x ** 2))
    close(f(x, 3, scale=2.0), 2 * np.sum(x ** 3))
    assert f.compiles == 2


def test_a_static_argument_passed_by_keyword_is_static_and_named():
    f = vg.jit(lambda x, n, scale=1.0: vnp.sum(x ** n) * scale, static_argnums=(1,), backend="vulkan")
    x = RNG.uniform(0.5, 1.5, 9).astype(np.float32)
    close(f(x, n=2), np.sum(x ** 2))
    close(f(x, scale=2.0, n=2), 2 * np.sum(x ** 2))
    close(f(x, 2), np.sum(x ** 2))
    assert f.compiles == 2                          # n=2 by keyword and by position: one program
    g = vg.jit(lambda x, n: x * n["a"], static_argnums=1, backend="vulkan")
    with pytest.raises(vg.ArgumentError, match="static argument 'n' of lambda is a dict") as e:
        g(x, n={"a": 2.0})
    assert "test_jit.py" in str(e.value)
    h = vg.jit(lambda x, *, n: x * n, static_argnums=1, backend="vulkan")
    with pytest.raises(vg.ArgumentError, match="keyword argument.*n are traced, not static"):
        h(x, n=2)


def test_static_argnames_as_jax_names_them():
    """JAX's control-flow guide: a Python `while` on a static argument named by static_argnames,
    by position or by keyword, as a decorator too."""
    @vg.jit(static_argnames=["n"], backend="vulkan")
    def g(x, n):
        i = 0
        while i < n:
            i += 1
        return x + i
    x = np.float32([1.0, 2.0])
    close(g(x, 20), x + 20)
    close(g(x, n=20), x + 20)
    close(g(x, 3), x + 3)
    assert g.compiles == 2                          # n=20 by keyword and by position: one program
    f = vg.jit(lambda x, n, scale: x * n * scale, static_argnums=2, static_argnames="n",
               backend="vulkan")
    close(f(x, 2, 3), x * 6)
    with pytest.raises(vg.ArgumentError, match="static_argnames='m': lambda has no parameter "
                                               "'m'") as e:
        vg.jit(lambda x, n: x, static_argnames="m")
    assert "test_jit.py" in str(e.value)


def test_jit_of_a_non_function_is_an_argument_error():
    with pytest.raises(vg.ArgumentError, match="vg.jit expects a function, got int 5") as e:
        vg.jit(5)
    assert "test_jit.py" in str(e.value)


def test_reading_a_donated_array_is_a_clear_error():
    f = vg.jit(lambda x: x * 2.0, donate_argnums=0, backend="vulkan")
    a = f(np.ones(4, np.float32))
    b = f(a)
    with pytest.raises(vg.DeletedArrayError, match="donated") as e:
        np.asarray(a)
    assert "test_jit.py" in str(e.value)
    close(b, np.full(4, 4.0))


def test_outputs_read_lazily_large_ones_on_demand():
    f = vg.jit(lambda x: (x + 1.0, vnp.sum(x)), backend="vulkan")
    x = np.arange(10_000, dtype=np.float32)
    big, small = f(x)
    down = counters["downloads"]
    assert float(small) == pytest.approx(x.sum(), rel=1e-6)
    assert counters["downloads"] == down          # came back inside the call's submission
    close(big, x + 1.0)
    assert counters["downloads"] == down + 1      # read on demand, once
    close(big, x + 1.0)
    assert counters["downloads"] == down + 1


def test_fallback_whole_program_and_strict_mode(x64, monkeypatch):
    x = np.linspace(0, 1, 5)   # float64: no Vulkan kernel computes in f64
    f = vg.jit(lambda x: vnp.exp(x) + 1.0, backend="vulkan")
    before = vg.fallbacks()
    with pytest.warns(vg.FallbackWarning, match="float64"):
        out = f(x)
    assert out.dtype == np.float64
    close(out, np.exp(x) + 1.0)
    after = vg.fallbacks()
    assert sum(after.values()) == sum(before.values()) + 1
    assert any("f64" in reason for reason in after)
    monkeypatch.setenv("VKGRAD_STRICT", "1")
    with pytest.raises(vg.VkgradError, match="VKGRAD_STRICT"):
        vg.jit(lambda x: vnp.exp(x) * 2.0, backend="vulkan")(x)


def test_eager_ops_on_arrays_run_on_the_device():
    a = vg.jit(lambda x: x * 1.0, backend="vulkan")(np.arange(12, dtype=np.float32).reshape(3, 4))
    b = vnp.exp(a) @ a.T + 1.0
    assert isinstance(b, vg.Array)
    an = np.arange(12, dtype=np.float32).reshape(3, 4)
    close(b, np.exp(an) @ an.T + 1.0, rtol=1e-5)
    g = vg.grad(lambda w: vnp.sum(vnp.tanh(w) * w))(a)   # the joint program, on the device
    assert isinstance(g, vg.Array)
    close(g, np.tanh(an) + an * (1 - np.tanh(an) ** 2), rtol=1e-5)


def test_lower_stages_and_stats():
    params, (x, y) = init_params(RNG), batch(RNG)
    low = vg.jit(vg.value_and_grad(mlp_loss), backend="vulkan").lower(params, x, y)
    assert "# ---- backward ----" in low.as_text("traced")
    assert "fused" in low.as_text("fused")
    text = low.as_text("plan")
    assert text.startswith("plan ") and "matmul" in text and "log_softmax" in text
    assert low.as_text("lowered") == text          # the stage's older name
    st = low.stats()
    assert st["backend"] == "vulkan"
    assert sum(n for k, n in st["kernels"].items() if "matmul" in k) == 5
    # 2 forward + 3 backward matmuls (dW2, dh, dW1), and no transpose: the flags do it
    assert " = transpose" not in low.as_text("optimized")
    with pytest.raises(vg.VkgradError, match="stage"):
        low.as_text("nonsense")


def test_profile_table():
    params, (x, y) = init_params(RNG), batch(RNG)
    prof = vg.profile(vg.jit(vg.value_and_grad(mlp_loss), backend="vulkan"), params, x, y, runs=3)
    text = str(prof)
    assert "matmul" in text and "GPU us" in text and prof.total_us > 0
    assert abs(sum(r.percent for r in prof.rows) - 100.0) < 1e-6
    assert all(r.us >= 0 for r in prof.rows)


def test_numpy_backend_and_default_backend(monkeypatch):
    monkeypatch.setenv("VKGRAD_BACKEND", "numpy")
    f = vg.jit(lambda x: x * 2.0)
    out = f(np.ones(3, np.float32))
    assert isinstance(out, vg.Array) and out.buffer is None
    close(out, np.full(3, 2.0))
    monkeypatch.setenv("VKGRAD_BACKEND", "cuda")
    with pytest.raises(vg.VkgradError, match="VKGRAD_BACKEND"):
        vg.jit(lambda x: x)(np.ones(3, np.float32))


def test_device_put_then_no_upload():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    a = vg.device_put(x)
    f = vg.jit(lambda a: (a * 2.0).sum(axis=0), backend="vulkan")
    f(a)
    up = counters["uploads"]
    close(f(a), (x * 2).sum(0))
    assert counters["uploads"] == up                # bound where it lives: nothing uploaded
    assert vg.device_put(np.ones(3)).dtype == np.float32   # x64 off: float64 data is float32
    with vg.enable_x64(), pytest.raises(vg.VkgradError, match="float64"):
        vg.device_put(np.ones(3))                    # no f64 storage on the device: said plainly


def test_donating_a_shared_buffer_does_not_clobber_the_other_array():
    keep = vg.jit(lambda x: x, backend="vulkan")          # returns its input: shares the buffer
    a = vg.device_put(np.arange(6, dtype=np.float32))
    b = keep(a)
    assert b.buffer is a.buffer
    step = vg.jit(lambda x: x * 10.0, donate_argnums=0, backend="vulkan")
    c = step(a)                                           # a is consumed; b must keep its values
    close(c, np.arange(6) * 10.0)
    close(b, np.arange(6))
    assert a.is_deleted() and not b.is_deleted()


def test_kernels_bind_no_more_buffers_than_the_device_allows():
    """Adam over many parameters of one shape is one fused group of 7 buffers per parameter;
    past the device's limit per kernel (lavapipe: 32) the lowering splits it, where binding
    them all crashed the driver."""
    from vkgrad.runtime import get_device
    params = {f"p{i}": np.full(33, i, np.float32) for i in range(8)}
    opt = vg.optim.adam(0.1)

    def step(params, state):
        grads = vg.grad(lambda p: sum(vnp.sum(v * v) for v in p.values()))(params)
        updates, state = opt.update(grads, state, params)
        return vg.optim.apply_updates(params, updates), state

    state = opt.init(params)
    fast = vg.jit(step, backend="vulkan")
    lowered = fast.lower(params, state)
    limit = get_device().info.max_storage_buffers
    assert max(st.launch.bindings for st in lowered.lowered.steps) <= limit
    got = fast(params, state)
    want = vg.jit(step, backend="numpy")(params, state)
    for a, b in zip(tree_flatten(got)[0], tree_flatten(want)[0]):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-5, atol=1e-6)
def test_a_step_over_many_parameters_runs_within_the_binding_limit():
    """AdamW with clipping by global norm over 24 parameters of one shape: unsplit, one kernel
    would bind ~170 buffers, and the norm's sum one element of 24 reductions, which crashed
    lavapipe (it allows 32); the lowering splits them (vkgrad/lowering/lower.py)."""
    rng = np.random.default_rng(2)
    params = [rng.standard_normal(5).astype(np.float32) for _ in range(24)]
    opt = vg.optim.chain(vg.optim.clip_by_global_norm(1.0), vg.optim.adamw(
        vg.optim.warmup_cosine_decay_schedule(0.0, 1e-2, 2, 10), weight_decay=0.1))

    def step(params, opt_state, x):
        loss, grads = vg.value_and_grad(lambda ps: sum(vnp.sum(vnp.tanh(p * x)) for p in ps))(params)
        norm = vg.optim.global_norm(grads)
        updates, opt_state = opt.update(grads, opt_state, params)
        params = vg.optim.apply_updates(params, updates)
        return params, opt_state, loss, norm

    x = rng.standard_normal(5).astype(np.float32)
    on_gpu = vg.jit(step, backend="vulkan")
    lw = on_gpu.lower(params, opt.init(params), x)
    assert lw.fallback_reason is None
    assert max(s.launch.bindings for s in lw.lowered.steps) <= \
        get_device().info.max_storage_buffers
    got = on_gpu(params, opt.init(params), x)
    want = vg.jit(step, backend="numpy")(params, opt.init(params), x)
    for g, w in zip(tree_leaves(got), tree_leaves(want)):
        close(g, w)


def test_split_bindings_keeps_every_part_within_the_limit():
    """A sum of many materialized values gets intermediates written to memory, an update of
    many same-shaped values is cut into several kernels; the parts compute the same."""
    from vkgrad.ir.verifier import verify
    from vkgrad.lowering.elementwise import split_bindings
    from vkgrad.passes.fuse import canonicalize_for_lowering, fuse

    def many(xs, ys):
        total = sum(vnp.sum(x * x) for x in xs)               # one element reading 20 sums
        part = sum(vnp.sum(y) for y in ys[:6])                # a root inside total2's cone
        total2 = total + part + sum(vnp.sum(y * y) for y in ys)
        return total, part, total2, [x - 0.1 * y * total for x, y in zip(xs, ys)]

    rng = np.random.default_rng(1)
    xs = [rng.standard_normal(3).astype(np.float32) for _ in range(20)]
    ys = [rng.standard_normal(3).astype(np.float32) for _ in range(20)]
    program = fuse.apply(canonicalize_for_lowering.apply(vg.make_ir(many)(xs, ys)))
    bodies = [e.params["body"] for e in program.eqns if e.prim.name == "fused"]
    assert max(len(b.inputs) + len(b.outputs) for b in bodies) > 40
    for body in bodies:
        parts = split_bindings(body, 8)
        assert max(len(p.inputs) + len(p.outputs) for p in parts) <= 8
        for p in parts:
            verify(p)
        # run the parts in order, each reading what earlier ones wrote
        rng2 = np.random.default_rng(2)
        env = {v: rng2.standard_normal(v.shape).astype(np.float32) for v in body.inputs}
        for p in parts:
            env.update(zip(p.outputs, vg.run_program(p, *[env[v] for v in p.inputs])))
        want = vg.run_program(body, *[env[v] for v in body.inputs])
        for o, w in zip(body.outputs, want):
            np.testing.assert_allclose(env[o], w, rtol=1e-5)


def test_a_kernel_whose_source_would_grow_with_the_product_of_its_reads_is_cut():
    """Each level reads the one before at three indices (two rolls and itself), so one fused
    kernel would compute sin(x) 3**7 times over (over 200,000 GLSL lines, lowering/
    elementwise.py, MAX_TEMPS): the lowering gives the values repeated most kernels of their
    own until each kernel is within the bound, and the result is the interpreter's."""
    from vkgrad.lowering.elementwise import MAX_TEMPS

    def f(x):
        v = vnp.sin(x)
        for _ in range(7):
            v = vnp.roll(v, 1) * 0.5 + vnp.roll(v, 3) * 0.25 + v * 0.25
        return v

    x = np.linspace(-1, 1, 16).astype(np.float32)
    low = vg.jit(f, backend="vulkan").lower(x)
    kernels = low.as_text("glsl").split("// ==== k")[1:]
    assert len(kernels) == low.stats()["dispatches"] > 1
    assert max(k.count("\n") for k in kernels) < MAX_TEMPS + 200
    np.testing.assert_allclose(np.asarray(vg.jit(f, backend="vulkan")(x)),
                               np.asarray(vg.jit(f, backend="numpy")(x)), rtol=1e-6, atol=1e-7)


def test_new_argument_buffers_reuse_the_recorded_dispatches_that_do_not_read_them():
    """A loop over batches already on the device binds new buffers every call: the copy of the
    program recorded for them (the batch's own slots, tests/test_rebind.py; or, without device
    addresses, the new buffers themselves) looks up no pipeline anew, and every dispatch that
    reads none of the buffers that differ keeps its op (and descriptor set)."""
    opt = vg.optim.sgd(0.1)
    step = vg.jit(make_step(opt), backend="vulkan", donate_argnums=(0, 1))
    params = vg.device_put(init_params(np.random.default_rng(3)))
    state = vg.device_put(opt.init(params))
    rng = np.random.default_rng(4)
    batches = [tuple(vg.device_put(a) for a in batch(rng)) for _ in range(3)]
    params, state, _ = step(params, state, *batches[0])
    runner = step.lower(params, state, *batches[0]).runner
    # the first new batch may build the device's one copy pipeline (copy_slot.comp, made on
    # first use, once per device: whether an earlier test in this process made it decides)
    params, state, _ = step(params, state, *batches[1])
    pipelines = counters["pipelines"]
    for x, y in batches[2:] + batches[:2]:
        params, state, loss = step(params, state, x, y)
        float(loss)
    assert counters["pipelines"] == pipelines
    first, *rest = [c.ex for cs in runner.variants.values() for c in cs]
    for ex in rest:
        batch_bufs = {id(b) for d in ex.dispatches for b in d.buffers} - \
            {id(b) for d in first.dispatches for b in d.buffers}
        for d, op, d0, op0 in zip(ex.dispatches, ex._ops, first.dispatches, first._ops):
            reads_new = any(id(b) in batch_bufs for b in d.buffers)
            assert (op is op0) == (not reads_new and d == d0)
        assert any(op is op0 for op, op0 in zip(ex._ops, first._ops))
