"""vg.nn.dot_product_attention against a float64 numpy transcription of jax.nn.dot_product_attention's
documented meaning (layout [B, T, N, H], grouped-query heads, bias, boolean mask, top-left causal
mask, sequence lengths, local windows, masked logits at -0.7 * the dtype's max), on the
interpreter and on the Vulkan device; its two implementations' gradients against each other."""

import numpy as np
import pytest

import vkgrad as vg
from vkgrad import nn

RNG = np.random.default_rng(11)


def _f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def reference(q, k, v, bias=None, mask=None, scale=None, is_causal=False, q_lengths=None,
              kv_lengths=None, window=None):
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    if q.ndim == 3:
        return reference(q[None], k[None], v[None], bias, mask, scale, is_causal, q_lengths,
                         kv_lengths, window)[0]
    b, t, n, h = q.shape
    s, kh = k.shape[1], k.shape[2]
    k, v = np.repeat(k, n // kh, axis=2), np.repeat(v, n // kh, axis=2)
    scale = 1 / np.sqrt(h) if scale is None else scale
    logits = np.einsum("btnh,bsnh->bnts", q, k) * scale
    if bias is not None:
        logits = logits + bias
    keep = np.ones((b, n, t, s), bool)
    if mask is not None:
        keep &= mask
    i, j = np.arange(t)[:, None], np.arange(s)[None, :]
    if is_causal:
        keep &= i >= j
    if window is not None:
        left, right = (window, window) if isinstance(window, int) else window
        keep &= (i <= j + left) & (i >= j - right)
    if q_lengths is not None:
        keep &= (np.arange(t)[None, :, None] < q_lengths[:, None, None])[:, None]
    if kv_lengths is not None:
        keep &= (np.arange(s)[None, None, :] < kv_lengths[:, None, None])[:, None]
    logits = np.where(keep, logits, -0.7 * np.finfo(np.float32).max)
    p = np.exp(logits - logits.max(-1, keepdims=True))
    out = np.einsum("bnts,bsnh->btnh", p / p.sum(-1, keepdims=True), v)
    if q_lengths is not None and kv_lengths is not None:
        out = out * (np.arange(t)[None, :] < q_lengths[:, None])[:, :, None, None]
    return out


LENGTHS = (np.array([3, 5], np.int32), np.array([4, 7], np.int32))
CASES = {
    "plain": dict(),
    "grouped query heads": dict(kh=2),
    "one key/value head": dict(kh=1),
    "causal, more keys than queries (top-left)": dict(kw=dict(is_causal=True)),
    "causal, square": dict(s=5, kw=dict(is_causal=True)),
    "bias": dict(kw=dict(bias=_f32(1, 4, 5, 7))),
    "mask": dict(kw=dict(mask=RNG.random((2, 1, 5, 7)) > 0.3)),
    "a fully masked row": dict(kw=dict(mask=np.arange(5)[None, None, :, None] > 0)),
    "sequence lengths": dict(kw=dict(query_seq_lengths=LENGTHS[0],
                                     key_value_seq_lengths=LENGTHS[1])),
    "key lengths only": dict(kw=dict(key_value_seq_lengths=LENGTHS[1])),
    "window": dict(kw=dict(local_window_size=(2, 1))),
    "symmetric window, scale": dict(kw=dict(local_window_size=1, scale=0.5)),
}


def _case(kh=4, s=7, h=16, kw=()):
    return (_f32(2, 5, 4, h), _f32(2, s, kh, h), _f32(2, s, kh, h)), dict(kw)


def _ref_kwargs(kw):
    names = {"query_seq_lengths": "q_lengths", "key_value_seq_lengths": "kv_lengths",
             "local_window_size": "window"}
    return {names.get(n, n): x for n, x in kw.items()}


@pytest.mark.parametrize("name", CASES)
def test_matches_jax_meaning(name):
    (q, k, v), kw = _case(**CASES[name])
    want = reference(q, k, v, **_ref_kwargs(kw))
    for impl in (None, "xla"):
        got = nn.dot_product_attention(q, k, v, implementation=impl, **kw)
        np.testing.assert_allclose(np.asarray(got), want, rtol=2e-5, atol=2e-6, err_msg=impl)


@pytest.mark.parametrize("name", ["plain", "causal, square", "mask", "sequence lengths"])
def test_on_vulkan(name):
    (q, k, v), kw = _case(**CASES[name])
    f = vg.jit(lambda q, k, v: nn.dot_product_attention(q, k, v, **kw), backend="vulkan")
    np.testing.assert_allclose(np.asarray(f(q, k, v)), reference(q, k, v, **_ref_kwargs(kw)),
                               rtol=2e-5, atol=2e-6)


def test_without_batch_axis():
    q, k, v = _f32(5, 2, 16), _f32(7, 2, 16), _f32(7, 2, 16)
    got = nn.dot_product_attention(q, k, v)
    assert got.shape == (5, 2, 16)
    np.testing.assert_allclose(np.asarray(got), reference(q, k, v), rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("backend", ["numpy", "vulkan"])
def test_the_flash_and_written_out_gradients_agree(backend):
    """implementation=None takes the flash kernels here (causal, T == S, no mask), 'xla' the
    written-out form: both gradients, on the interpreter and on the device."""
    q, k, v = _f32(1, 6, 2, 16), _f32(1, 6, 2, 16), _f32(1, 6, 2, 16)

    def grads(impl):
        loss = lambda q, k, v: vg.numpy.sum(vg.numpy.sin(nn.dot_product_attention(  # noqa
            q, k, v, is_causal=True, implementation=impl)))
        return vg.jit(vg.grad(loss, argnums=(0, 1, 2)), backend=backend)(q, k, v)

    for a, b in zip(grads(None), grads("xla")):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-6)


def test_bad_input_names_the_argument():
    q, k = _f32(2, 5, 4, 16), _f32(2, 7, 3, 16)
    with pytest.raises(vg.ShapeError, match="4 query heads are not a multiple of 3") as e:
        nn.dot_product_attention(q, k, k)
    assert "test_dot_product_attention.py" in str(e.value)
    k = _f32(2, 7, 2, 16)
    with pytest.raises(vg.DTypeError, match="mask must be boolean"):
        nn.dot_product_attention(q, k, k, mask=np.ones((1, 1, 5, 7), np.float32))
    with pytest.raises(vg.ShapeError, match=r"query_seq_lengths has shape \(3,\)"):
        nn.dot_product_attention(q, k, k, query_seq_lengths=np.ones(3, np.int32))
    with pytest.raises(vg.ArgumentError, match="implementation='flash'"):
        nn.dot_product_attention(q, k, k, implementation="flash")
    with pytest.raises(vg.ArgumentError, match="fused kernel takes no bias"):
        nn.dot_product_attention(q, k, k, bias=np.zeros((1, 4, 5, 7), np.float32),
                                 implementation="cudnn")
    with pytest.raises(vg.ShapeError, match="value"):
        nn.dot_product_attention(q, k, _f32(2, 6, 2, 16))
