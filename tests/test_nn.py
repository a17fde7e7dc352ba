"""The vg.nn building blocks train: a transformer block (flash attention) and a Mamba block
(selective scan), each as ONE jitted training step per call on Vulkan, with falling loss and the
interpreter's trajectory; the blocks' gradients against finite differences in float64."""

import warnings

import numpy as np
import pytest

import vkgrad as vg
import vkgrad.nn as nn
import vkgrad.numpy as vnp
from vkgrad.runtime import counters
from vkgrad.tracer.pytree import tree_map

BLOCKS = {
    "attention": (lambda rng: nn.init_attention_block(rng, 32, 64),
                  lambda p, x: nn.attention_block(p, x, heads=2)),
    "mamba": (lambda rng: nn.init_mamba_block(rng, 16, d_state=4),
              nn.mamba_block),
}


def training_step(apply, opt):
    def loss_fn(params, x, y):
        return vnp.mean(vnp.square(apply(params, x) - y))

    def step(params, state, x, y):
        loss, grads = vg.value_and_grad(loss_fn)(params, x, y)
        updates, state = opt.update(grads, state, params)
        params = vg.optim.apply_updates(params, updates)
        return params, state, loss
    return step


@pytest.mark.parametrize("name", BLOCKS)
def test_block_trains_as_one_submission_per_step(name):
    init, apply = BLOCKS[name]
    rng = np.random.default_rng(0)
    params = init(rng)
    d = 32 if name == "attention" else 16
    x = rng.standard_normal((2, 19, d)).astype(np.float32)
    y = np.tanh(x[:, ::-1]).astype(np.float32)          # something to learn across positions
    opt = vg.optim.adam(1e-2)
    step = training_step(apply, opt)
    gpu = vg.jit(step, donate_argnums=(0, 1), backend="vulkan")
    ref = vg.jit(step, backend="numpy")
    assert gpu.lower(params, opt.init(params), x, y).stats()["fallback"] is None
    p, s = params, opt.init(params)
    pr, sr = params, opt.init(params)
    losses, ref_losses = [], []
    for i in range(12):
        sub = counters["submissions"]
        p, s, loss = gpu(p, s, x, y)
        if i:
            assert counters["submissions"] == sub + 1, "one submission per training step"
        losses.append(float(loss))
        pr, sr, lr = ref(pr, sr, x, y)
        ref_losses.append(float(lr))
    assert losses[-1] < 0.7 * losses[0], losses
    np.testing.assert_allclose(losses, ref_losses, rtol=2e-3, atol=1e-5)


@pytest.mark.parametrize("name", BLOCKS)
def test_block_gradients_match_finite_differences(name):
    init, apply = BLOCKS[name]
    rng = np.random.default_rng(1)
    params = tree_map(lambda a: np.asarray(a, np.float64), init(rng))
    d = 32 if name == "attention" else 16
    x = rng.standard_normal((2, 7, d))
    # forward mode is derived from the backward; the scan's backward has no VJP of its own
    modes = ("fwd", "rev") if name == "attention" else ("rev",)
    vg.check_grads(lambda p, x: vnp.mean(vnp.square(apply(p, x))), (params, x), modes=modes)


def test_flash_attention_layouts_and_errors():
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal((1, 5, 2, 16)).astype(np.float32) for _ in range(3))
    blhd = nn.flash_attention(q, k, v, causal=True, layout="BLHD")
    t = lambda a: np.transpose(a, (0, 2, 1, 3))
    bhld = nn.flash_attention(t(q), t(k), t(v), causal=True)
    np.testing.assert_allclose(blhd, t(bhld), rtol=1e-6)
    with pytest.raises(vg.ShapeError, match="k .* and v .* must have the same shape"):
        nn.flash_attention(q, k, v[:, :, :1])
    with pytest.raises(vg.ShapeError, match=r"q must be \[batch, heads, length, head_dim\]"):
        nn.flash_attention(q[0], k, v)
    with pytest.raises(vg.DTypeError, match="q must be a float array"):
        nn.flash_attention(q.astype(np.int32), k, v)


def test_causal_mask_is_bottom_right_aligned():
    """With Lq < Lk the last query sees every key; with Lq > Lk the first Lq - Lk see none."""
    rng = np.random.default_rng(3)
    k, v = (rng.standard_normal((1, 1, 6, 16)).astype(np.float32) for _ in range(2))
    q = rng.standard_normal((1, 1, 2, 16)).astype(np.float32)
    o = nn.flash_attention(q, k, v, causal=True)
    np.testing.assert_allclose(o[0, 0, -1], nn.flash_attention(q, k, v)[0, 0, -1], rtol=1e-6)
    q = rng.standard_normal((1, 1, 9, 16)).astype(np.float32)
    o = nn.flash_attention(q, k, v, causal=True)
    assert np.all(o[0, 0, :3] == 0) and np.all(np.abs(o[0, 0, 3:]).sum(-1) > 0)


def test_shapes_the_kernels_do_not_take():
    """A head dim or state size the Vulkan kernels are not built for is a limit of the kernel,
    not of the op: attention at head_dim 12 runs written out (matmul, softmax, matmul:
    lowering/attention_scores.py) on Vulkan; a selective scan's d_state 5 falls back to the
    interpreter with a FallbackWarning naming the kernel's limit. A causal attention with
    more queries than keys (rows that see no key) at head_dim 12 falls back too."""
    rng = np.random.default_rng(5)
    q, k, v = (rng.standard_normal((1, 2, 3, 12)).astype(np.float32) for _ in range(3))
    s = np.einsum("bhqd,bhkd->bhqk", q, k) / np.sqrt(12)
    p = np.exp(s - s.max(-1, keepdims=True))
    want = np.einsum("bhqk,bhkd->bhqd", p / p.sum(-1, keepdims=True), v)
    np.testing.assert_allclose(nn.flash_attention(q, k, v), want, rtol=1e-5, atol=1e-6)
    f = vg.jit(lambda q, k, v: nn.flash_attention(q, k, v), backend="vulkan")
    with warnings.catch_warnings():
        warnings.simplefilter("error", vg.FallbackWarning)
        got = f(q, k, v)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)
    names = [st.launch.name for st in f.lower(q, k, v).lowered.steps]
    assert any(n.startswith("matmul") for n in names) and "softmax" in names, names
    with pytest.warns(vg.FallbackWarning, match=r"head_dim 12 .*16, 32, 64, 128"):
        vg.jit(lambda q, k: nn.flash_attention(q, k, k, causal=True),
               backend="vulkan")(q, k[:, :, :2])
    u = rng.standard_normal((2, 3, 5)).astype(np.float32)
    A = -np.ones((3, 5), np.float32)
    B = rng.standard_normal((2, 5, 5)).astype(np.float32)
    ref = nn.selective_scan(u, u, A, B, B)
    with pytest.warns(vg.FallbackWarning, match="d_state N = 5"):
        got = vg.jit(lambda u, A, B: nn.selective_scan(u, u, A, B, B))(u, A, B)
    np.testing.assert_allclose(np.asarray(got), ref, rtol=1e-5, atol=1e-6)


def test_selective_scan_errors_name_the_argument():
    rng = np.random.default_rng(4)
    u = rng.standard_normal((2, 3, 5)).astype(np.float32)
    A = -np.ones((3, 4), np.float32)
    B = rng.standard_normal((2, 4, 5)).astype(np.float32)
    with pytest.raises(vg.ShapeError, match=r"B .* fits neither form"):
        nn.selective_scan(u, u, A, B[:, :, :2], B)
    with pytest.raises(vg.ShapeError, match=r"u must be \[batch, dim, L\]"):
        nn.selective_scan(u[0], u, A, B, B)
    with pytest.raises(vg.ShapeError, match=r"D must be \[dim\]"):
        nn.selective_scan(u, u, A, B, B, D=np.ones(4, np.float32))
    with pytest.raises(vg.DTypeError, match="delta must be a float array"):
        nn.selective_scan(u, u.astype(np.int32), A, B, B)


def test_selective_scan_of_no_steps_is_empty_on_both_backends():
    """L = 0: the empty result and empty gradients, alike on the interpreter and on Vulkan (the
    kernel needs a step, and raised a plain ValueError)."""
    rng = np.random.default_rng(6)
    u = rng.standard_normal((2, 3, 0)).astype(np.float32)
    A, D = -np.ones((3, 4), np.float32), np.ones(3, np.float32)
    B = rng.standard_normal((2, 4, 0)).astype(np.float32)
    f = lambda u, A, B: nn.selective_scan(u, u, A, B, B, D=D, z=u, delta_bias=D,
                                          delta_softplus=True)
    loss = lambda u, A, B: vnp.sum(f(u, A, B) ** 2)
    for run in (f, vg.jit(f, backend="vulkan")):
        out = np.asarray(run(u, A, B))
        assert out.shape == (2, 3, 0) and out.dtype == np.float32
    for grad in (vg.grad(loss, argnums=(0, 1, 2)), vg.jit(vg.grad(loss, argnums=(0, 1, 2)),
                                                         backend="vulkan")):
        du, dA, dB = (np.asarray(g) for g in grad(u, A, B))
        assert du.shape == (2, 3, 0) and dB.shape == (2, 4, 0)
        np.testing.assert_array_equal(dA, np.zeros((3, 4), np.float32))
    with pytest.raises(vg.ShapeError, match="B .* fits neither form") as err:
        nn.selective_scan(u, u, -np.ones((3, 5), np.float32), B, B)
    assert "test_nn.py" in str(err.value)


def test_flash_attention_with_no_keys_is_zero_on_both_backends():
    """Lk = 0: every query sees no key, so o = 0 (and lse = -inf), as for the queries a causal
    mask leaves without keys; the interpreter raised where the Vulkan kernel returned zeros."""
    rng = np.random.default_rng(7)
    q = rng.standard_normal((1, 2, 3, 16)).astype(np.float32)
    kv = np.zeros((1, 2, 0, 16), np.float32)
    for causal in (False, True):
        f = lambda q, k, v: nn.flash_attention(q, k, v, causal=causal)
        loss = lambda q, k, v: vnp.sum(f(q, k, v) * q)
        for run in (f, vg.jit(f, backend="vulkan")):
            np.testing.assert_array_equal(np.asarray(run(q, kv, kv)), np.zeros_like(q))
        for grad in (vg.grad(loss, argnums=(0, 1)), vg.jit(vg.grad(loss, argnums=(0, 1)),
                                                            backend="vulkan")):
            dq, dk = (np.asarray(g) for g in grad(q, kv, kv))
            np.testing.assert_array_equal(dq, np.zeros_like(q))
            assert dk.shape == kv.shape


def test_second_derivative_through_the_scan_is_a_clear_error():
    rng = np.random.default_rng(5)
    u = rng.standard_normal((1, 2, 4))
    A, B = -np.ones((2, 4)), rng.standard_normal((2, 4))
    f = lambda u: vnp.sum(nn.selective_scan(u, u, A, B, B) ** 2)
    with pytest.raises(vg.MissingRuleError, match="selective_scan_bwd.*second derivative"):
        vg.grad(lambda u: vnp.sum(vg.grad(f)(u)))(u)


# ------------------------------------------------------------------- messages in user terms

def test_cross_entropy_takes_one_hot_labels_and_names_bad_labels():
    from vkgrad.errors import ArgumentError, DTypeError, ShapeError
    logits = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    y = np.array([0, 2, 1, 1], np.int32)
    want = -np.mean(np.log(np.exp(logits) / np.exp(logits).sum(-1, keepdims=True))[range(4), y])
    onehot = np.eye(3, dtype=np.float32)[y]
    for labels in (y, onehot, onehot.astype(np.int32)):     # optax's two cross-entropies
        np.testing.assert_allclose(nn.cross_entropy(logits, labels), want, rtol=1e-5)
    soft = np.full((4, 3), 1 / 3, np.float32)
    np.testing.assert_allclose(nn.cross_entropy(logits, soft),
                               -np.mean(np.sum(soft * np.asarray(nn.log_softmax(logits)), -1)),
                               rtol=1e-5)
    with pytest.raises(ShapeError, match=r"labels i32\[3\] do not fit logits f32\[4,3\]: give "
                                         r"integer class ids of shape \[4\], or one-hot"):
        nn.cross_entropy(logits, y[:3])
    with pytest.raises(DTypeError, match="class ids and must be integers, got f32"):
        nn.cross_entropy(logits, y.astype(np.float32))
    with pytest.raises(ArgumentError, match=r"2 label\(s\) outside the 3 classes \[-3, 3\).*"
                                            r"labels\[1\] = 3"):
        nn.cross_entropy(logits, np.array([0, 3, 1, -4], np.int32))
    # -1 is the last class, as JAX's take_along_axis reads it (concrete or traced); under jit
    # the ids are not known, and one out of range makes the loss NaN (JAX's fill value)
    logp = np.asarray(nn.log_softmax(logits))
    wrapped = -(logp[0, 0] + logp[1, 2] + logp[2, 1] + logp[3, 1]) / 4
    ids = np.array([0, -1, 1, 1], np.int32)
    np.testing.assert_allclose(float(nn.cross_entropy(logits, ids)), wrapped, rtol=1e-5)
    jitted = vg.jit(nn.cross_entropy, backend="numpy")
    np.testing.assert_allclose(float(jitted(logits, ids)), wrapped, rtol=1e-5)
    assert np.isnan(float(jitted(logits, np.array([0, 3, 1, 1], np.int32))))


def test_causal_conv1d_names_the_shapes():
    from vkgrad.errors import ShapeError
    x = np.ones((2, 5, 4), np.float32)
    with pytest.raises(ShapeError, match=r"causal_conv1d: x f32\[2,5,4\], weight f32\[3,4\]; "
                                         r"expected x \[batch, L, channels\], weight \[4, K\]"):
        nn.causal_conv1d(x, np.ones((3, 4), np.float32))
    with pytest.raises(ShapeError, match=r"bias f32\[3\]"):
        nn.causal_conv1d(x, np.ones((4, 2), np.float32), np.zeros(3, np.float32))
    assert nn.causal_conv1d(x, np.ones((4, 3), np.float32)).shape == (2, 5, 4)
