"""vg.optim has optax's contract: init/update(grads, state, params) -> (updates, state), then
apply_updates. A few steps of each optimizer against optax's formulas written out here in
float64 numpy; the schedules against theirs; bad input as errors naming the problem; a jitted
step with any of them is one submission."""

import math

import numpy as np
import pytest

import vkgrad as vg
import vkgrad.numpy as vnp
from vkgrad.errors import ArgumentError, DTypeError
from vkgrad.runtime import counters

optim = vg.optim
RNG = np.random.default_rng(0)
PARAMS = {"w": RNG.standard_normal((3, 2)).astype(np.float32),
          "b": [RNG.standard_normal(2).astype(np.float32)]}
GRADS = [{"w": RNG.standard_normal((3, 2)).astype(np.float32),
          "b": [RNG.standard_normal(2).astype(np.float32)]} for _ in range(4)]


def leaves(t):
    return [np.asarray(x, np.float64) for x in vg.tree.leaves(t)]


# --------------------------------------------------------- references (optax's formulas, f64)

def ref_sgd(lr, momentum=None, nesterov=False):
    def run(p, gs):
        t = np.zeros_like(p)
        for g in gs:
            if momentum is None:
                u = g
            else:
                t = g + momentum * t
                u = g + momentum * t if nesterov else t
            p = p - lr * u
        return p
    return run


def ref_adam(lr, b1=0.9, b2=0.999, eps=1e-8, wd=0.0, sched=None):
    def run(p, gs):
        m = v = np.zeros_like(p)
        for k, g in enumerate(gs):
            m = (1 - b1) * g + b1 * m
            v = (1 - b2) * g * g + b2 * v
            u = (m / (1 - b1 ** (k + 1))) / (np.sqrt(v / (1 - b2 ** (k + 1))) + eps)
            rate = sched(k) if sched else lr
            p = p - rate * (u + wd * p)
        return p
    return run


def ref_lion(lr, b1=0.9, b2=0.99, wd=1e-3):
    def run(p, gs):
        m = np.zeros_like(p)
        for g in gs:
            u = np.sign((1 - b1) * g + b1 * m)
            m = (1 - b2) * g + b2 * m
            p = p - lr * (u + wd * p)
        return p
    return run


def warmup_cosine_ref(k, init, peak, warm, decay, end):
    if k < warm:
        return init + (peak - init) * k / warm
    c = min(k - warm, decay - warm)
    return end + (peak - end) * 0.5 * (1 + math.cos(math.pi * c / (decay - warm)))


CASES = {
    "sgd": (lambda: optim.sgd(0.1), ref_sgd(0.1)),
    "sgd_momentum": (lambda: optim.sgd(0.1, momentum=0.9), ref_sgd(0.1, 0.9)),
    "sgd_nesterov": (lambda: optim.sgd(0.1, momentum=0.9, nesterov=True),
                     ref_sgd(0.1, 0.9, True)),
    "adam": (lambda: optim.adam(1e-2), ref_adam(1e-2)),
    "adam_b": (lambda: optim.adam(1e-2, b1=0.8, b2=0.9, eps=1e-3),
               ref_adam(1e-2, 0.8, 0.9, 1e-3)),
    "adamw": (lambda: optim.adamw(1e-2, weight_decay=0.1), ref_adam(1e-2, wd=0.1)),
    "adamw_default_decay": (lambda: optim.adamw(1e-2), ref_adam(1e-2, wd=1e-4)),
    "adam_schedule": (
        lambda: optim.adam(optim.warmup_cosine_decay_schedule(0.0, 1e-2, 2, 4, 1e-3)),
        ref_adam(None, sched=lambda k: warmup_cosine_ref(k, 0.0, 1e-2, 2, 4, 1e-3))),
    "lion": (lambda: optim.lion(1e-2), ref_lion(1e-2)),
    "lion_wd": (lambda: optim.lion(1e-2, b1=0.5, b2=0.9, weight_decay=0.1),
                ref_lion(1e-2, 0.5, 0.9, 0.1)),
}


def run_steps(opt, params, grads):
    state = opt.init(params)
    for g in grads:
        updates, state = opt.update(g, state, params)
        params = optim.apply_updates(params, updates)
    return params, state


@pytest.mark.parametrize("name", CASES)
def test_optimizer_matches_optax_formulas(name):
    make, ref = CASES[name]
    got, _ = run_steps(make(), PARAMS, GRADS)
    for k, (p, g) in enumerate(zip(leaves(PARAMS), zip(*[leaves(g) for g in GRADS]))):
        np.testing.assert_allclose(leaves(got)[k], ref(p, g), rtol=2e-5, atol=1e-6,
                                   err_msg=name)
    assert all(np.asarray(x).dtype == np.float32 for x in vg.tree.leaves(got))


def test_updates_are_what_to_add_and_state_is_optax_shaped():
    opt = optim.adam(0.1)
    state = opt.init(PARAMS)
    assert isinstance(state[0], optim.ScaleByAdamState) and state[0].count.dtype == np.int32
    assert isinstance(state[1], optim.EmptyState)
    updates, state = opt.update(GRADS[0], state, PARAMS)
    # the first Adam step is -lr * sign(g) (up to eps): updates, not new parameters
    np.testing.assert_allclose(updates["w"], -0.1 * np.sign(GRADS[0]["w"]), rtol=1e-5)
    assert int(state[0].count) == 1
    # update without params works for a transformation that does not need them
    u2, _ = opt.update(GRADS[1], state)
    assert u2["w"].shape == (3, 2)


def test_chain_clip_then_scale():
    g = {"a": np.full(3, 2.0, np.float32)}
    opt = optim.chain(optim.clip_by_global_norm(1.0), optim.scale(-0.5))
    u, state = opt.update(g, opt.init(g))
    np.testing.assert_allclose(u["a"], -0.5 * 2 / np.sqrt(12), rtol=1e-6)
    assert state == (optim.EmptyState(), optim.EmptyState())


SCHEDULES = [
    (lambda: optim.constant_schedule(0.3), lambda k: 0.3),
    (lambda: optim.linear_schedule(1.0, 0.1, 10, transition_begin=2),
     lambda k: 1.0 + (0.1 - 1.0) * min(max(k - 2, 0), 10) / 10),
    (lambda: optim.cosine_decay_schedule(2.0, 8, alpha=0.1),
     lambda k: 2.0 * (0.9 * 0.5 * (1 + math.cos(math.pi * min(k, 8) / 8)) + 0.1)),
    (lambda: optim.cosine_decay_schedule(2.0, 8, exponent=2.0),
     lambda k: 2.0 * (0.5 * (1 + math.cos(math.pi * min(k, 8) / 8))) ** 2),
    (lambda: optim.warmup_cosine_decay_schedule(0.1, 1.0, 3, 13, 0.05),
     lambda k: warmup_cosine_ref(k, 0.1, 1.0, 3, 13, 0.05)),
    (lambda: optim.exponential_decay(1.0, 4, 0.5),
     lambda k: 1.0 * 0.5 ** (k / 4)),
    (lambda: optim.exponential_decay(1.0, 4, 0.5, transition_begin=3, staircase=True,
                                     end_value=0.3),
     lambda k: 1.0 if k <= 3 else max(0.3, 0.5 ** math.floor((k - 3) / 4))),
    (lambda: optim.join_schedules([optim.constant_schedule(1.0),
                                   optim.linear_schedule(1.0, 0.0, 4)], [5]),
     lambda k: 1.0 if k < 5 else 1.0 - min(k - 5, 4) / 4),
]


@pytest.mark.parametrize("i", range(len(SCHEDULES)))
def test_schedules_match_optax_formulas(i):
    make, ref = SCHEDULES[i]
    sched = make()
    for k in range(0, 20):
        assert float(sched(np.int32(k))) == pytest.approx(ref(k), rel=1e-5, abs=1e-7), k


def test_bad_input_is_a_clear_error():
    adam, sgd = optim.adam(0.1), optim.sgd(0.1, momentum=0.9)
    with pytest.raises(ArgumentError, match="another optimizer's state"):
        adam.update(GRADS[0], sgd.init(PARAMS), PARAMS)
    with pytest.raises(ArgumentError, match="another optimizer's state"):
        adam.update(GRADS[0], {"count": 0}, PARAMS)
    ints = {"w": np.ones((2, 2), np.int32)}
    with pytest.raises(DTypeError, match=r"\['w'\] has dtype int32"):
        adam.init(ints)
    state = adam.init({"w": np.ones((2, 2), np.float32)})
    with pytest.raises(DTypeError, match="int32"):
        adam.update(ints, state, ints)
    with pytest.raises(ArgumentError, match="needs the parameters"):
        w = optim.adamw(0.1)
        w.update(GRADS[0], w.init(PARAMS))
    with pytest.raises(ArgumentError, match="positive decay_steps"):
        optim.cosine_decay_schedule(1.0, 0)


@pytest.mark.parametrize("name", ["adamw", "lion", "sgd_momentum"])
def test_jitted_step_is_one_submission_and_matches_eager(name):
    make, _ = CASES[name]
    opt = optim.chain(optim.clip_by_global_norm(1.0), make())

    def step(params, state, x):
        grads = vg.grad(lambda p: vnp.sum(vnp.tanh(x @ p["w"] + p["b"][0])))(params)
        updates, state = opt.update(grads, state, params)
        return optim.apply_updates(params, updates), state

    x = RNG.standard_normal((4, 3)).astype(np.float32)
    fast = vg.jit(step, backend="vulkan", donate_argnums=(0, 1))
    p, s = vg.device_put(PARAMS), vg.device_put(opt.init(PARAMS))
    pr, sr = PARAMS, opt.init(PARAMS)
    for i in range(3):
        sub = counters["submissions"]
        p, s = fast(p, s, x)
        if i > 0:
            assert counters["submissions"] == sub + 1
        pr, sr = step(pr, sr, x)
    assert fast.compiles == 1
    for a, b in zip(leaves(p), leaves(pr)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_the_docs_example_fits():
    """docs/optim.md's example (run as pasted by tests/test_readme_blocks.py) reaches the fit
    it promises; its blocks through the same parser."""
    import doc_blocks
    scope = {}
    for b in doc_blocks.blocks("docs/optim.md"):
        if b.lang == "python":
            exec(compile(b.text, f"docs/optim.md:{b.line}", "exec"), scope)
    assert float(scope["value"]) < 1e-3
