"""Neural-network building blocks, written with vkgrad.numpy; attention and Mamba's selective
scan run on their own primitives (vkgrad/primitives/attention.py, scan.py), each a hand-written
kernel pair (forward, backward) on Vulkan.

Layers are plain functions of a params pytree (dicts of arrays) and inputs, as in JAX: the
`init_*` functions make the params from a numpy Generator (float32), the apply functions are
traced, differentiated and jitted like any other vnp code.

Recurrent cells and layers (RNN, GRU, LSTM) run on vg.lax.scan. Three language models close
the file (token ids in, next-token logits out): a pre-norm transformer, a Mamba LM and a
character GRU LM, each a dozen lines over the blocks above. They live here rather than
in an example so that examples/train_lm.py, its tests and bench/bench_lm.py train one
definition, and a user can build on them.
"""

from __future__ import annotations

import math
import sys

import numpy as np

from vkgrad import control_flow
from vkgrad import initializers
from vkgrad import lax
from vkgrad import numpy as vnp
from vkgrad import primitives as P
from vkgrad import random
from vkgrad.errors import ArgumentError, DTypeError, ShapeError
from vkgrad.mixed_precision import Policy, get_policy
from vkgrad.scipy.special import erf
from vkgrad.numpy import log_softmax, logsumexp, one_hot, softmax  # noqa: F401
from vkgrad.numpy.util import normalize_axes as vnp_axes
from vkgrad.traceback_util import wrap_namespace
from vkgrad.tracer.core import Tracer, user_source
from vkgrad.transforms import custom_jvp

# jax.nn.initializers: also `import vkgrad.nn.initializers` and `from vkgrad.nn.initializers
# import lecun_normal`, as JAX's
sys.modules[__name__ + ".initializers"] = initializers

__all__ = ["relu", "relu6", "leaky_relu", "hard_tanh", "elu", "sigmoid", "silu", "gelu",
           "softplus", "swish", "identity", "tanh", "log_sigmoid", "selu", "celu", "glu",
           "hard_sigmoid", "hard_silu", "hard_swish", "mish", "soft_sign", "squareplus",
           "sparse_plus", "sparse_sigmoid", "log1mexp", "logmeanexp", "standardize",
           "initializers", "softmax", "log_softmax", "logsumexp", "one_hot",
           "cross_entropy", "mse", "dropout", "layer_norm", "rms_norm", "embedding", "linear",
           "flash_attention", "dot_product_attention", "attention_block",
           "init_attention_block", "selective_scan",
           "causal_conv1d", "mamba_block", "init_mamba_block", "init_transformer_lm",
           "transformer_lm", "init_mamba_lm", "mamba_lm", "init_conv", "conv", "max_pool",
           "avg_pool", "init_batch_norm", "batch_norm", "group_norm", "instance_norm",
           "init_resnet", "resnet", "rnn_cell", "gru_cell", "lstm_cell", "init_rnn_cell",
           "init_gru_cell", "init_lstm_cell", "recurrent", "rnn", "gru", "lstm", "init_gru_lm",
           "gru_lm"]


def relu(x):
    """max(x, 0), with JAX's derivative at 0: 0 (jax.nn.relu's custom rule; maximum's tie
    rule would give 1/2). NaN stays NaN."""
    return vnp.where(x <= 0, 0, x)


def relu6(x):
    """min(max(x, 0), 6), with JAX's derivative: 0 at both kinks (jax.nn.relu6)."""
    return vnp.where(x <= 0, 0, vnp.where(x >= 6, 6, x))


def leaky_relu(x, negative_slope=1e-2):
    """x where x >= 0, negative_slope * x elsewhere (jax.nn.leaky_relu; derivative 1 at 0)."""
    return vnp.where(x >= 0, x, negative_slope * x)


def hard_tanh(x):
    """x clipped to [-1, 1] (jax.nn.hard_tanh; derivative 1 at the bounds, as JAX's)."""
    return vnp.where(x > 1, 1, vnp.where(x < -1, -1, x))


def elu(x, alpha=1.0):
    """x where x > 0, alpha * (exp(x) - 1) elsewhere (jax.nn.elu); the exp of the positive
    side is never taken, so a large x sends no inf * 0 into the gradient."""
    return vnp.where(x > 0, x, alpha * vnp.expm1(vnp.where(x > 0, 0.0, x)))


def sigmoid(x):
    # 1/(1+exp(-x)) overflows exp for x << 0; the tanh form is bounded everywhere.
    return 0.5 * (vnp.tanh(0.5 * x) + 1)


def silu(x):
    """x * sigmoid(x) (swish)."""
    return x * sigmoid(x)


def gelu(x, approximate: bool = True):
    """GELU (jax.nn.gelu): the tanh form by default (GPT-2's, JAX's default), the exact
    x * Phi(x) = x/2 (1 + erf(x / sqrt(2))) with approximate=False."""
    if not approximate:
        return 0.5 * x * (1.0 + erf(x * 0.7071067811865476))
    return 0.5 * x * (1.0 + vnp.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


def softplus(x):
    """log(1 + exp(x)) (jax.nn.softplus), as logaddexp(x, 0): no overflow for large x."""
    return vnp.logaddexp(x, 0.0)


swish = silu


def identity(x):
    """x as an array (jax.nn.identity)."""
    return vnp.asarray(x)


def tanh(x):
    """jax.nn.tanh: vnp.tanh."""
    return vnp.tanh(x)


def log_sigmoid(x):
    """log(sigmoid(x)) = -softplus(-x) (jax.nn.log_sigmoid): no log(0) for x << 0."""
    return -softplus(-vnp.asarray(x))


def selu(x):
    """scale * elu(x, alpha) with SELU's constants (jax.nn.selu)."""
    return 1.0507009873554804934193349852946 * elu(x, 1.6732632423543772848170429916717)


def celu(x, alpha=1.0):
    """max(x, 0) + alpha * expm1(min(x, 0) / alpha) (jax.nn.celu; derivative 1 at 0: the
    maximum's and the minimum's tie halves add up)."""
    return vnp.maximum(x, 0.0) + alpha * vnp.expm1(vnp.minimum(x, 0.0) / alpha)


def glu(x, axis: int = -1):
    """x1 * sigmoid(x2) of x's two halves along axis (jax.nn.glu)."""
    x = vnp.asarray(x)
    if x.shape[axis] % 2:
        raise ShapeError(f"glu: axis {axis} of {_shape_str(x.dtype, x.shape)} has odd size "
                         f"{x.shape[axis]}; it must split in two halves", source=user_source())
    x1, x2 = vnp.split(x, 2, axis)
    return x1 * sigmoid(x2)


def hard_sigmoid(x):
    """relu6(x + 3) / 6 (jax.nn.hard_sigmoid)."""
    return relu6(x + 3.0) / 6.0


def hard_silu(x):
    """x * hard_sigmoid(x) (jax.nn.hard_silu, also hard_swish)."""
    x = vnp.asarray(x)
    return x * hard_sigmoid(x)


hard_swish = hard_silu


def mish(x):
    """x * tanh(softplus(x)) (jax.nn.mish)."""
    x = vnp.asarray(x)
    return x * vnp.tanh(softplus(x))


def soft_sign(x):
    """x / (|x| + 1) (jax.nn.soft_sign)."""
    x = vnp.asarray(x)
    return x / (vnp.abs(x) + 1)


def squareplus(x, b=4):
    """(x + sqrt(x^2 + b)) / 2 (jax.nn.squareplus)."""
    x = vnp.asarray(x)
    return (x + vnp.sqrt(vnp.square(x) + b)) / 2


def sparse_plus(x):
    """0 for x <= -1, x for x >= 1, (x + 1)^2 / 4 between (jax.nn.sparse_plus)."""
    x = vnp.asarray(x)
    return vnp.where(x <= -1.0, 0.0, vnp.where(x >= 1.0, x, (x + 1.0) ** 2 / 4))


def sparse_sigmoid(x):
    """clip(x + 1, 0, 2) / 2 (jax.nn.sparse_sigmoid)."""
    return 0.5 * vnp.clip(vnp.asarray(x) + 1.0, 0.0, 2.0)


@custom_jvp
def log1mexp(x):
    """log(1 - exp(-x)) (jax.nn.log1mexp): the expm1 form below log 2, the log1p form above;
    its derivative is JAX's rule 1 / expm1(x) (the untaken branch's 0/0 never reaches it)."""
    x = vnp.asarray(x)
    return vnp.where(x < math.log(2.0), vnp.log(-vnp.expm1(-x)), vnp.log1p(-vnp.exp(-x)))


log1mexp.defjvps(lambda g, ans, x: g / vnp.expm1(x))


def logmeanexp(x, axis=None, where=None, keepdims: bool = False):
    """log(mean(exp(x))) = logsumexp - log(count) (jax.nn.logmeanexp); `where` masks elements
    out of both."""
    x = vnp.asarray(x)
    if where is None:
        count = math.prod(x.shape[a] for a in vnp_axes(axis, x.ndim))
        return logsumexp(x, axis, keepdims=keepdims) - math.log(count) if count else \
            vnp.full(vnp.sum(x, axis, keepdims=keepdims).shape, np.nan, x.dtype)
    w = vnp.broadcast_to(where, x.shape)
    lse = logsumexp(vnp.where(w, x, -np.inf), axis, keepdims=keepdims)
    # the count summed in lse's float dtype: the reduction kernels are float32
    return lse - vnp.log(vnp.sum(vnp.astype(w, lse.dtype), axis, keepdims=keepdims))


def standardize(x, axis=-1, mean=None, variance=None, epsilon=1e-5, where=None, *,
                algorithm: str = "fast"):
    """(x - mean) / sqrt(variance + epsilon) over axis (jax.nn.standardize): variance
    mean(x^2) - mean^2 clipped at 0 ("fast", JAX's default) or mean((x - mean)^2) ("stable")."""
    x = vnp.asarray(x)
    if algorithm not in ("fast", "stable"):
        raise ArgumentError(f"standardize: unknown algorithm {algorithm!r}; expected 'fast' or "
                            "'stable'", source=user_source())
    if mean is None:
        mean = vnp.mean(x, axis, keepdims=True, where=where)
    if variance is None:
        if algorithm == "stable":
            variance = vnp.mean(vnp.square(x - mean), axis, keepdims=True, where=where)
        else:
            variance = vnp.clip(vnp.mean(vnp.square(x), axis, keepdims=True, where=where)
                                - vnp.square(mean), 0)
    return (x - mean) * lax.rsqrt(variance + epsilon)


def cross_entropy(logits, labels):
    """Mean over the batch of -log softmax(logits)[label], the class axis last. labels:
    integer class ids of the logits' shape without the class axis (optax's
    softmax_cross_entropy_with_integer_labels), or float one-hot labels / probabilities of the
    logits' own shape, giving the mean of -sum(labels * log softmax(logits)) (optax's
    softmax_cross_entropy). A label in [-classes, 0) counts from the end, as JAX's
    take_along_axis reads it; concrete labels outside [-classes, classes) raise an
    ArgumentError; under a trace (jit, grad of traced labels) the ids are not known, and one
    out of range makes the loss NaN, as JAX's take_along_axis fills it (its example's logits
    get a zero gradient, as in JAX)."""
    logits, labels = vnp.asarray(logits), vnp.asarray(labels)
    if logits.ndim == 0:
        raise ShapeError("cross_entropy: logits need a class axis (the last), got a scalar",
                         source=user_source())
    logp = vnp.log_softmax(logits, axis=-1)
    shape, classes, ldt = tuple(logits.shape), logits.shape[-1], P.dtype_of(labels)
    if tuple(labels.shape) == shape:                  # one-hot (any dtype) or probabilities
        return -vnp.mean(vnp.sum(logp * vnp.astype(labels, logp.dtype), axis=-1))
    if tuple(labels.shape) != shape[:-1]:
        raise ShapeError(
            f"cross_entropy: labels {_shape_str(ldt, labels.shape)} do not fit logits "
            f"{_shape_str(P.dtype_of(logits), shape)}: give integer class ids of shape "
            f"{list(shape[:-1])}, or one-hot / probability labels of shape {list(shape)}",
            source=user_source())
    if ldt != "i32":
        raise DTypeError(
            f"cross_entropy: labels of shape {list(labels.shape)} are class ids and must be "
            f"integers, got {ldt}: convert them (labels.astype(np.int32)), or give one-hot / "
            f"probability labels of the logits' shape {list(shape)}", source=user_source())
    if not isinstance(labels, Tracer):
        ids = np.asarray(labels)
        bad = (ids < -classes) | (ids >= classes)
        if bad.any():
            at = tuple(int(i) for i in np.argwhere(bad)[0])
            raise ArgumentError(
                f"cross_entropy: {int(bad.sum())} label(s) outside the {classes} classes "
                f"[-{classes}, {classes}) of logits {_shape_str(P.dtype_of(logits), shape)}: "
                f"labels{list(at)} = {int(ids[at])}", source=user_source())
    traced = isinstance(labels, Tracer)
    ids = vnp.where(labels < 0, labels + classes, labels) if traced or \
        (np.asarray(labels) < 0).any() else labels
    picked = logp * vnp.one_hot(ids, classes, dtype=logp.dtype)
    if traced:   # NaN where no class is picked (JAX's fill value), added: no gradient there
        bad = (labels < -classes) | (labels >= classes)
        picked = picked + vnp.where(vnp.expand_dims(bad, -1), np.nan, 0.0)
    return -vnp.mean(vnp.sum(picked, axis=-1))


def _shape_str(dtype, shape) -> str:
    return f"{dtype}[{','.join(map(str, shape))}]"


def mse(pred, target):
    return vnp.mean(vnp.square(pred - target))


def dropout(key, x, rate: float):
    """Each element of x zeroed with probability `rate`, the others scaled by 1 / (1 - rate)
    (inverted dropout: the expectation is x, so evaluation uses x as it is). The mask is drawn
    from `key` with vg.random.bernoulli: inside vg.jit it is one more fused kernel."""
    if not 0.0 <= rate <= 1.0:
        raise ArgumentError(f"dropout: rate {rate!r} is not in [0, 1]")
    x = vnp.asarray(x)
    if rate == 0.0:
        return x
    if rate == 1.0:
        return vnp.zeros_like(x)
    keep = random.bernoulli(key, 1.0 - rate, x.shape)
    return vnp.where(keep, x / (1.0 - rate), 0.0)


# ----------------------------------------------------------------------------------- layers

def layer_norm(x, weight=None, bias=None, eps: float = 1e-5):
    """Normalize over the last axis to zero mean and unit variance, then scale and shift."""
    mu = vnp.mean(x, axis=-1, keepdims=True)
    d = x - mu
    y = d / vnp.sqrt(vnp.mean(d * d, axis=-1, keepdims=True) + eps)
    if weight is not None:
        y = y * weight
    return y + bias if bias is not None else y


def rms_norm(x, weight=None, eps: float = 1e-6):
    """x / sqrt(mean(x^2) + eps) over the last axis, then scaled (Mamba's and LLaMA's norm)."""
    y = x / vnp.sqrt(vnp.mean(x * x, axis=-1, keepdims=True) + eps)
    return y * weight if weight is not None else y


def embedding(table, ids):
    """Rows of `table` [vocab, d] at integer `ids` (any shape): [*ids.shape, d]."""
    return vnp.take(table, ids, axis=0)


def linear(params, x):
    """x @ params["w"] (+ params["b"] when present)."""
    y = x @ params["w"]
    return y + params["b"] if "b" in params else y


# ----------------------------------------------------------------------------------- attention

def flash_attention(q, k, v, causal: bool = False, scale: float | None = None,
                    layout: str = "BHLD"):
    """softmax(scale * q k^T, masked) v without materializing the scores (FlashAttention-2).

    layout "BHLD" (default): q [batch, heads, Lq, head_dim], k and v [batch, heads, Lk,
    head_dim]; "BLHD": [batch, length, heads, head_dim] (the layout a projection reshaped to
    heads gives), transposed to BHLD and back (two copies a fused kernel makes).
    scale defaults to 1/sqrt(head_dim). The Vulkan kernel takes head_dim 16, 32, 64 or 128 in
    float32; other head dims run on the interpreter (a FallbackWarning says so).
    causal: query i sees key j iff j <= i + (Lk - Lq), the mask aligned at the bottom right
    (flash-attn >= 2.1): with Lq == Lk the usual lower triangle; queries that see no key (Lq >
    Lk) give 0."""
    if layout not in ("BHLD", "BLHD"):
        raise ArgumentError(f"flash_attention: layout={layout!r}; use 'BHLD' or 'BLHD'")
    q, k, v = vnp.asarray(q), vnp.asarray(k), vnp.asarray(v)
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not vnp.issubdtype(t.dtype, np.floating):
            raise DTypeError(f"flash_attention: {name} must be a float array, got {t.dtype}")
    if layout == "BLHD":
        q, k, v = (vnp.transpose(t, (0, 2, 1, 3)) if t.ndim == 4 else t for t in (q, k, v))
    d = q.shape[-1] if q.ndim else 1
    o, _ = P.flash_attention(q, k, v, causal, 1.0 / math.sqrt(d) if scale is None else scale)
    return vnp.transpose(o, (0, 2, 1, 3)) if layout == "BLHD" else o


IMPLEMENTATIONS = (None, "xla", "cudnn")


def dot_product_attention(query, key, value, bias=None, mask=None, *, scale=None,
                          is_causal: bool = False, query_seq_lengths=None,
                          key_value_seq_lengths=None, local_window_size=None,
                          implementation=None):
    """jax.nn.dot_product_attention: softmax(scale q k^T + bias, masked) v, q [B, T, N, H] (or
    [T, N, H]), k and v [B, S, K, H] with N a multiple of K (grouped-query attention when K <
    N), in JAX's layout and with JAX's meaning of every argument: bias and the boolean mask
    (True = attend) broadcast to [B, N, T, S]; is_causal masks as tril(ones(T, S)) (top-left
    aligned); query_seq_lengths / key_value_seq_lengths [B] mask padding (with both, padded
    query rows give 0); local_window_size (left, right) or an int; masked logits take a large
    negative value (-0.7 * the dtype's max), so a fully masked row averages v, as JAX's.
    implementation: None (vkgrad picks: the flash kernels where nothing but a causal mask with
    T == S applies, which the compiler writes out as matmul, softmax, matmul where the Target
    says that is faster; else the written-out form), "xla" (always written out, as JAX's),
    "cudnn" (the fused kernel, vkgrad's flash attention standing in for cuDNN's: bias, masks,
    lengths and windows are refused, as JAX's cudnn path refuses what it cannot run)."""
    if implementation not in IMPLEMENTATIONS:
        raise ArgumentError(f"dot_product_attention: implementation={implementation!r}; use "
                            "None, 'xla' or 'cudnn'", source=user_source())
    q, k, v = (vnp.asarray(t) for t in (query, key, value))
    out_shape = q.shape
    q, k, v = (t[None] if t.ndim == 3 else t for t in (q, k, v))
    _check_attention(q, k, v, mask, query_seq_lengths, key_value_seq_lengths)
    h = q.shape[-1]
    scale = 1.0 / math.sqrt(h) if scale is None else float(scale)
    masked = (bias is not None or mask is not None or query_seq_lengths is not None or
              key_value_seq_lengths is not None or local_window_size is not None)
    square = q.shape[1] == k.shape[1]
    if implementation == "cudnn" and (masked or (is_causal and not square)):
        raise ArgumentError("dot_product_attention(implementation='cudnn'): vkgrad's fused "
                            "kernel takes no bias, mask, sequence lengths or window, and a "
                            "causal mask only with as many queries as keys; use "
                            "implementation=None or 'xla'", source=user_source())
    groups = q.shape[2] // k.shape[2]
    if groups > 1:                          # grouped-query attention: each k/v head serves G
        k, v = vnp.repeat(k, groups, axis=2), vnp.repeat(v, groups, axis=2)
    if implementation != "xla" and not masked and (square or not is_causal):
        out = flash_attention(q, k, v, causal=is_causal, scale=scale, layout="BLHD")
    else:
        out = _attention_written_out(q, k, v, bias, mask, scale, is_causal, query_seq_lengths,
                                     key_value_seq_lengths, local_window_size)
    return vnp.reshape(out, out_shape)


def _check_attention(q, k, v, mask, q_lengths, kv_lengths):
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        raise ShapeError(f"dot_product_attention: query {q.shape}, key {k.shape}, value "
                         f"{v.shape}; expected [batch, length, heads, head_dim] (or without "
                         "batch) for all three", source=user_source())
    b, s, kh, h = k.shape
    if v.shape != k.shape:
        raise ShapeError(f"dot_product_attention: value {v.shape} must have key's shape "
                         f"{k.shape}", source=user_source())
    if q.shape[0] != b or q.shape[3] != h:
        raise ShapeError(f"dot_product_attention: query {q.shape} and key {k.shape} differ in "
                         "batch or head_dim", source=user_source())
    if q.shape[2] % kh:
        raise ShapeError(f"dot_product_attention: {q.shape[2]} query heads are not a multiple "
                         f"of {kh} key/value heads", source=user_source())
    if mask is not None and P.dtype_of(vnp.asarray(mask)) != "bool":
        raise DTypeError(f"dot_product_attention: mask must be boolean (True = attend), got "
                         f"{P.dtype_of(vnp.asarray(mask))}; pass an additive mask as bias",
                         source=user_source())
    for name, t in (("query_seq_lengths", q_lengths), ("key_value_seq_lengths", kv_lengths)):
        if t is not None and tuple(vnp.shape(t)) != (b,):
            raise ShapeError(f"dot_product_attention: {name} has shape {tuple(vnp.shape(t))}; "
                             f"expected ({b},), one length per batch element", source=user_source())


def _attention_written_out(q, k, v, bias, mask, scale, is_causal, q_lengths, kv_lengths,
                           window):
    """JAX's xla path: logits [B, N, T, S], masked with a large negative value, softmax in
    float32, then the values."""
    t, s = q.shape[1], k.shape[1]
    logits = vnp.einsum("btnh,bsnh->bnts", q, k) * scale
    if bias is not None:
        logits = logits + vnp.asarray(bias)
    keep = None

    def both(a, b):
        return b if a is None else vnp.logical_and(a, b)
    if mask is not None:
        keep = vnp.asarray(mask)
    rows, cols = np.arange(t)[:, None], np.arange(s)[None, :]
    if is_causal:
        keep = both(keep, rows >= cols)
    if window is not None:
        left, right = (window, window) if isinstance(window, int) else window
        keep = both(keep, (rows <= cols + left) & (rows >= cols - right))
    if q_lengths is not None:
        keep = both(keep, (vnp.arange(t)[None, :, None] <
                           vnp.asarray(q_lengths)[:, None, None])[:, None])
    if kv_lengths is not None:
        keep = both(keep, (vnp.arange(s)[None, None, :] <
                           vnp.asarray(kv_lengths)[:, None, None])[:, None])
    dtype = logits.dtype
    if keep is not None:
        logits = vnp.where(keep, logits, -0.7 * float(np.finfo(dtype).max))
    probs = softmax(logits.astype(np.float32), axis=-1).astype(v.dtype)
    out = vnp.einsum("bnts,bsnh->btnh", probs, v)
    if q_lengths is not None and kv_lengths is not None:
        pad = vnp.arange(t)[None, :] < vnp.asarray(q_lengths)[:, None]
        out = out * pad[:, :, None, None].astype(out.dtype)
    return out


def init_attention_block(rng: np.random.Generator, d_model: int, d_ff: int | None = None):
    """Params of a pre-norm transformer block: attention and a GELU MLP, each with its norm."""
    d_ff = d_ff or 4 * d_model
    w = lambda i, o: (rng.standard_normal((i, o)) / math.sqrt(i)).astype(np.float32)
    zeros = lambda n: np.zeros(n, np.float32)
    ones = lambda n: np.ones(n, np.float32)
    return {"ln1": {"w": ones(d_model), "b": zeros(d_model)},
            "qkv": {"w": w(d_model, 3 * d_model), "b": zeros(3 * d_model)},
            "proj": {"w": w(d_model, d_model), "b": zeros(d_model)},
            "ln2": {"w": ones(d_model), "b": zeros(d_model)},
            "fc": {"w": w(d_model, d_ff), "b": zeros(d_ff)},
            "out": {"w": w(d_ff, d_model), "b": zeros(d_model)}}


def _in_policy(policy, params, x):
    """params and x in the policy's compute dtype (jmp: a module computes in it); None: as
    they are."""
    if policy is None:
        return params, x
    policy = get_policy(policy)
    return policy.cast_to_compute(params), policy.cast_to_compute(x)


def _out_policy(policy, y):
    return y if policy is None else get_policy(policy).cast_to_output(y)


def attention_block(params, x, heads: int, causal: bool = True,
                    policy: Policy | str | None = None):
    """One pre-norm transformer block on x [batch, L, d_model]:
        x + proj(attention(ln1(x))), then + out(gelu(fc(ln2(.)))).
    policy (vg.mp.Policy or its text): compute in its compute dtype, return its output dtype."""
    params, x = _in_policy(policy, params, x)
    b, length, d = x.shape
    if d % heads:
        raise ArgumentError(f"attention_block: d_model {d} is not a multiple of heads {heads}")
    h = layer_norm(x, params["ln1"]["w"], params["ln1"]["b"])
    qkv = linear(params["qkv"], h).reshape(b, length, 3, heads, d // heads)
    q, k, v = (vnp.transpose(qkv[:, :, i], (0, 2, 1, 3)) for i in range(3))
    a = flash_attention(q, k, v, causal=causal)
    x = x + linear(params["proj"], vnp.transpose(a, (0, 2, 1, 3)).reshape(b, length, d))
    h = layer_norm(x, params["ln2"]["w"], params["ln2"]["b"])
    return _out_policy(policy, x + linear(params["out"], gelu(linear(params["fc"], h))))


# ----------------------------------------------------------------------------------- Mamba

def selective_scan(u, delta, A, B, C, D=None, z=None, delta_bias=None,
                   delta_softplus: bool = False):
    """Mamba's selective scan, exactly `selective_scan_ref` of state-spaces/mamba:
        dt = delta + delta_bias, softplus'd if delta_softplus
        h_t = exp(dt_t A) h_{t-1} + dt_t B_t u_t;  y_t = C_t . h_t + D u_t;  out = y * silu(z)
    u, delta, z: [batch, dim, L]; A: [dim, N]; B, C: [batch, N, L] (input-dependent) or
    [dim, N] (fixed); D, delta_bias: [dim]. Returns out [batch, dim, L]. The Vulkan kernels take N
    (d_state) in (1, 2, 4, 8, 16, 32, 64); other sizes run on the interpreter."""
    args = [vnp.asarray(x) if x is not None else None
            for x in (u, delta, A, B, C, D, z, delta_bias)]
    out, _ = P.selective_scan(*args[:5], D=args[5], z=args[6], delta_bias=args[7],
                              softplus=delta_softplus)
    return out


def causal_conv1d(x, weight, bias=None):
    """Depthwise causal convolution along the middle axis of x [batch, L, channels] with
    weight [channels, K] and bias [channels]: y[:, t] = sum_k weight[:, k] * x[:, t - K + 1 + k]
    (zeros before the start), as Mamba's short convolution. One fused kernel: K shifted reads
    of x."""
    x, weight = vnp.asarray(x), vnp.asarray(weight)
    if x.ndim != 3 or weight.ndim != 2 or weight.shape[0] != x.shape[2] or weight.shape[1] < 1 \
            or (bias is not None and tuple(vnp.shape(bias)) != (x.shape[2],)):
        got = f"x {_shape_str(P.dtype_of(x), x.shape)}, weight " \
              f"{_shape_str(P.dtype_of(weight), weight.shape)}" + (
                  "" if bias is None else
                  f", bias {_shape_str(P.dtype_of(vnp.asarray(bias)), vnp.shape(bias))}")
        c = x.shape[2] if x.ndim == 3 else "channels"
        raise ShapeError(f"causal_conv1d: {got}; expected x [batch, L, channels], weight "
                         f"[{c}, K] with K >= 1 and bias [{c}]", source=user_source())
    b, length, c = x.shape
    k = weight.shape[1]
    xp = P.pad(x, (0, k - 1, 0), (0, 0, 0)) if k > 1 else x
    y = sum(xp[:, i:i + length, :] * weight[:, i] for i in range(k))
    return y + bias if bias is not None else y


# ------------------------------------------------------------------ convolutional layers
# Channels first (N, C, spatial...) by default: the convolution primitive's own layout
# (primitives/convolution.py), so a network of these layers has no transposes around its convs;
# channels_last=True takes flax's (N, spatial..., C).

def _tuple(v, n: int) -> tuple:
    return tuple(v) if isinstance(v, (tuple, list)) else (int(v),) * n


def init_conv(rng: np.random.Generator, in_features: int, out_features: int, kernel_size,
              feature_group_count: int = 1, bias: bool = True, spatial: int = 2):
    """{"w": [out, in / groups, *kernel] (He-uniform, as torch's Conv), "b": [out]}."""
    kernel = _tuple(kernel_size, spatial)
    fan_in = in_features // feature_group_count * math.prod(kernel)
    bound = 1.0 / math.sqrt(fan_in)
    w = rng.uniform(-bound, bound, (out_features, in_features // feature_group_count) + kernel)
    params = {"w": w.astype(np.float32)}
    if bias:
        params["b"] = rng.uniform(-bound, bound, out_features).astype(np.float32)
    return params


def conv(params, x, strides=1, padding="SAME", dilation=1, feature_group_count: int = 1,
         channels_last: bool = False):
    """A convolution layer: x [N, C, *spatial] (or [N, *spatial, C]) convolved with params["w"]
    [O, C / groups, *kernel], plus params["b"] [O] when present."""
    w = params["w"]
    nd = vnp.ndim(w) - 2
    spec = "DHW"[3 - nd:] if nd <= 3 else None
    if spec is None:
        raise ShapeError(f"nn.conv: a kernel of rank {vnp.ndim(w)}: 1 to 3 spatial dims",
                         source=user_source())
    dn = ("N" + spec + "C", "OI" + spec, "N" + spec + "C") if channels_last else None
    # x is kept for the weight gradient (a save, as lax.optimization_barrier's, but with the
    # cotangent left fusible: primitives/compiler.py), as XLA and PyTorch
    # keep a convolution's input: the convolution kernels compute no producer in their loads,
    # so x is in memory anyway, and the weight gradient reads it there (lowering/
    # conv_layouts.py). Recomputed instead (passes/remat.py: it is cheap elementwise work from
    # the saved conv output), a loop kernel wrote it again, transposed: in the ResNet-18 step
    # on the H200 one 200 us kernel rewrote every block's input (bench_conv.py, 2026-12-02).
    x = P.save(x)
    y = lax.conv_general_dilated(x, w, _tuple(strides, nd), padding,
                                 rhs_dilation=_tuple(dilation, nd), dimension_numbers=dn,
                                 feature_group_count=feature_group_count)
    if "b" not in params:
        return y
    b = params["b"]
    return y + (b if channels_last else vnp.reshape(b, (-1,) + (1,) * nd))


def _pool(x, init, fn, window_shape, strides, padding, channels_last):
    x = vnp.asarray(x)
    nd = len(window_shape)
    if x.ndim != nd + 2:
        raise ShapeError(f"pooling a {nd}-D window over an array of rank {x.ndim}: expected "
                         f"[batch, {'spatial..., channels' if channels_last else 'channels, spatial...'}]",
                         source=user_source())
    strides = tuple(strides) if strides is not None else (1,) * nd
    pads = padding if isinstance(padding, str) else tuple(padding)
    place = (lambda t, v: (v,) + tuple(t) + (v,)) if channels_last else \
        (lambda t, v: (v, v) + tuple(t))
    if not isinstance(pads, str):
        pads = place(pads, (0, 0))
    return lax.reduce_window(x, init, fn, place(window_shape, 1), place(strides, 1), pads)


def max_pool(x, window_shape, strides=None, padding="VALID", channels_last: bool = False):
    """The maximum over each window of the spatial axes (flax's max_pool; padding pads with
    -inf). The gradient goes to the first maximum of each window, as JAX's."""
    return _pool(x, -np.inf, vnp.maximum, tuple(window_shape), strides, padding, channels_last)


def avg_pool(x, window_shape, strides=None, padding="VALID", count_include_pad: bool = True,
             channels_last: bool = False):
    """The mean over each window of the spatial axes (flax's avg_pool): padding counts as zeros,
    or with count_include_pad=False the mean is over the window's elements inside x."""
    window_shape = tuple(window_shape)
    total = _pool(x, 0.0, vnp.add, window_shape, strides, padding, channels_last)
    if count_include_pad:
        return total / math.prod(window_shape)
    ones = np.ones((1,) + tuple(vnp.shape(x))[1:], np.float32)
    return total / _pool(ones, 0.0, np.add, window_shape, strides, padding, channels_last)


def init_batch_norm(features: int):
    """(params, state): params {"scale": ones, "bias": zeros}; state, the running statistics
    that evaluation uses, {"mean": zeros, "var": ones} (float32 [features])."""
    return ({"scale": np.ones(features, np.float32), "bias": np.zeros(features, np.float32)},
            {"mean": np.zeros(features, np.float32), "var": np.ones(features, np.float32)})


def _feature_view(v, ndim: int, axis: int):
    shape = [1] * ndim
    shape[axis] = -1
    return vnp.reshape(v, shape)


def batch_norm(params, state, x, training: bool, momentum: float = 0.9, eps: float = 1e-5,
               axis: int = 1):
    """Batch normalization over every axis but the feature axis (`axis`; 1 for channels
    first). Training: normalized by the batch's mean and (biased) variance, and returns the
    new running statistics, state * momentum + batch * (1 - momentum) (flax's BatchNorm), as
    explicit state to carry through a jitted step: `y, state = batch_norm(params, state, x,
    True)`. Evaluation: normalized by state's statistics, which come back unchanged."""
    x = vnp.asarray(x)
    axis = axis % x.ndim
    others = tuple(a for a in range(x.ndim) if a != axis)
    if training:
        # One pass over x for both statistics (flax's use_fast_variance, shifted): the mean
        # and the mean square of d = x - K, sibling reductions of one kernel, with K each
        # feature's first element (a sample of the batch, so E[d^2] - E[d]^2 does not cancel
        # when the mean is far from 0; a constant to the gradient). The two-pass form (the
        # mean, then the mean of (x - mean)^2) was 388 dispatches in the ResNet-18 step
        # against this form's 314; its reductions and elementwise kernels took 2.45 of the
        # step's 12.2 GPU ms (H200, bench_conv.py, 2026-12-01).
        shift = lax.stop_gradient(x[tuple(slice(None) if a == axis else 0
                                          for a in range(x.ndim))])
        d = x - _feature_view(shift, x.ndim, axis)
        mean_d = vnp.mean(d, axis=others)
        var = vnp.maximum(vnp.mean(vnp.square(d), axis=others) - vnp.square(mean_d), 0.0)
        mean = mean_d + shift
        keep = lambda old, new: momentum * old + (1 - momentum) * new  # noqa: E731
        state = {"mean": keep(state["mean"], mean), "var": keep(state["var"], var)}
    else:
        mean, var = state["mean"], state["var"]
    inv = params["scale"] / vnp.sqrt(var + eps)
    y = (x - _feature_view(mean, x.ndim, axis)) * _feature_view(inv, x.ndim, axis)
    return y + _feature_view(params["bias"], x.ndim, axis), state


def group_norm(x, num_groups: int, weight=None, bias=None, eps: float = 1e-5,
               channels_last: bool = False):
    """Normalize each example over groups of channels (and all spatial positions), then scale
    and shift per channel (weight, bias [C]); torch's GroupNorm, flax's with channels_last."""
    x = vnp.asarray(x)
    c = x.shape[-1] if channels_last else x.shape[1]
    if c % num_groups:
        raise ShapeError(f"group_norm: {num_groups} groups do not divide {c} channels of "
                         f"{tuple(x.shape)}", source=user_source())
    xc = vnp.moveaxis(x, -1, 1) if channels_last else x
    g = vnp.reshape(xc, (xc.shape[0], num_groups, -1))
    mu = vnp.mean(g, axis=2, keepdims=True)
    d = g - mu
    y = vnp.reshape(d / vnp.sqrt(vnp.mean(d * d, axis=2, keepdims=True) + eps), xc.shape)
    view = (-1,) + (1,) * (x.ndim - 2)
    if weight is not None:
        y = y * vnp.reshape(weight, view)
    if bias is not None:
        y = y + vnp.reshape(bias, view)
    return vnp.moveaxis(y, 1, -1) if channels_last else y


def instance_norm(x, weight=None, bias=None, eps: float = 1e-5, channels_last: bool = False):
    """group_norm with a group per channel: each example's channel over its spatial positions."""
    c = vnp.shape(x)[-1] if channels_last else vnp.shape(x)[1]
    return group_norm(x, c, weight, bias, eps, channels_last)


def _init_conv_bn(rng, cin: int, cout: int, k: int):
    bn, bn_state = init_batch_norm(cout)
    return {"conv": init_conv(rng, cin, cout, k, bias=False), "bn": bn}, {"bn": bn_state}


def _conv_bn(params, state, x, strides, training):
    y, bn_state = batch_norm(params["bn"], state["bn"], conv(params["conv"], x, strides),
                             training)
    return y, {"bn": bn_state}


def init_resnet(rng: np.random.Generator, in_channels: int, classes: int,
                widths=(64, 128, 256, 512), blocks=(2, 2, 2, 2)):
    """(params, state) of a ResNet of basic blocks (He et al. 2016) for small images: a 3x3
    stem, stages of `blocks[i]` blocks of `widths[i]` channels (each stage after the first
    halves the resolution in its first block, whose shortcut is a 1x1 projection), global
    average pooling and a linear head. ResNet-18 for 32x32 images: the defaults. state holds
    the batch norms' running statistics."""
    params, state = {}, {}
    params["stem"], state["stem"] = _init_conv_bn(rng, in_channels, widths[0], 3)
    params["stages"], state["stages"] = [], []
    cin = widths[0]
    for s, (width, n) in enumerate(zip(widths, blocks)):
        ps, ss = [], []
        for b in range(n):
            p, st = {}, {}
            p["a"], st["a"] = _init_conv_bn(rng, cin, width, 3)
            p["b"], st["b"] = _init_conv_bn(rng, width, width, 3)
            if cin != width or (s > 0 and b == 0):
                p["proj"], st["proj"] = _init_conv_bn(rng, cin, width, 1)
            ps.append(p), ss.append(st)
            cin = width
        params["stages"].append(ps), state["stages"].append(ss)
    bound = 1.0 / math.sqrt(cin)
    params["head"] = {"w": rng.uniform(-bound, bound, (cin, classes)).astype(np.float32),
                      "b": np.zeros(classes, np.float32)}
    return params, state


def resnet(params, state, x, training: bool):
    """(logits [N, classes], new state) of init_resnet's network for images x [N, C, H, W];
    training uses and updates the batch statistics, evaluation the running ones."""
    new = {"stages": []}
    h, new["stem"] = _conv_bn(params["stem"], state["stem"], x, 1, training)
    h = relu(h)
    for s, (ps, ss) in enumerate(zip(params["stages"], state["stages"])):
        out_states = []
        for b, (p, st) in enumerate(zip(ps, ss)):
            strides = 2 if s > 0 and b == 0 else 1
            y, st_a = _conv_bn(p["a"], st["a"], h, strides, training)
            y, st_b = _conv_bn(p["b"], st["b"], relu(y), 1, training)
            nst = {"a": st_a, "b": st_b}
            if "proj" in p:
                h, nst["proj"] = _conv_bn(p["proj"], st["proj"], h, strides, training)
            h = relu(y + h)
            out_states.append(nst)
        new["stages"].append(out_states)
    pooled = vnp.mean(h, axis=(2, 3))
    return linear(params["head"], pooled), new


def init_mamba_block(rng: np.random.Generator, d_model: int, d_state: int = 16,
                     expand: int = 2, d_conv: int = 4, dt_rank: int | None = None):
    """Params of a Mamba block (Gu & Dao 2023, mamba_simple.py's layout and initialisation)."""
    d_inner = expand * d_model
    dt_rank = dt_rank or -(-d_model // 16)
    w = lambda i, o: (rng.standard_normal((i, o)) / math.sqrt(i)).astype(np.float32)
    # dt's bias: softplus^-1 of a log-uniform dt in [1e-3, 1e-1], as mamba initialises it
    dt = np.exp(rng.uniform(np.log(1e-3), np.log(1e-1), d_inner))
    return {"norm": {"w": np.ones(d_model, np.float32)},
            "in_proj": {"w": w(d_model, 2 * d_inner)},
            "conv": {"w": (rng.standard_normal((d_inner, d_conv)) / math.sqrt(d_conv))
                     .astype(np.float32), "b": np.zeros(d_inner, np.float32)},
            "x_proj": {"w": w(d_inner, dt_rank + 2 * d_state)},
            "dt_proj": {"w": w(dt_rank, d_inner),
                        "b": (dt + np.log(-np.expm1(-dt))).astype(np.float32)},
            "A_log": np.log(np.tile(np.arange(1, d_state + 1, dtype=np.float32), (d_inner, 1))),
            "D": np.ones(d_inner, np.float32),
            "out_proj": {"w": w(d_inner, d_model)}}


def mamba_block(params, x, policy: Policy | str | None = None):
    """One pre-norm residual Mamba block on x [batch, L, d_model]: rms_norm, in_proj to
    (x, z), causal depthwise conv + silu, x_proj to (dt, B, C), dt_proj, the selective scan
    with D, z gating and softplus(dt + bias), out_proj, residual add. policy: as
    attention_block's."""
    params, x = _in_policy(policy, params, x)
    b, length, _ = x.shape
    d_inner = params["D"].shape[0]
    d_state = params["A_log"].shape[1]
    dt_rank = params["dt_proj"]["w"].shape[0]
    h = rms_norm(x, params["norm"]["w"])
    xz = h @ params["in_proj"]["w"]
    xi, z = xz[..., :d_inner], xz[..., d_inner:]
    xi = silu(causal_conv1d(xi, params["conv"]["w"], params["conv"]["b"]))
    dbc = xi @ params["x_proj"]["w"]
    dt = dbc[..., :dt_rank] @ params["dt_proj"]["w"]                    # [b, L, d_inner]
    B = vnp.transpose(dbc[..., dt_rank:dt_rank + d_state], (0, 2, 1))    # [b, N, L]
    C = vnp.transpose(dbc[..., dt_rank + d_state:], (0, 2, 1))
    to_bdl = lambda t: vnp.transpose(t, (0, 2, 1))
    y = selective_scan(to_bdl(xi), to_bdl(dt), -vnp.exp(params["A_log"]), B, C, D=params["D"],
                       z=to_bdl(z), delta_bias=params["dt_proj"]["b"], delta_softplus=True)
    return _out_policy(policy, x + to_bdl(y) @ params["out_proj"]["w"])


# ----------------------------------------------------------------------------------- recurrent
# Cells are functions (params, carry, x) -> (carry, y) of one step; a layer runs its cell over
# the time axis of x [batch, L, d] with vg.lax.scan (one loop eqn whatever L is). The input's
# projections for every step are one matmul before the loop ([batch * L, d] @ [d, gates * H]);
# the loop does only what needs the previous state (h @ w_h). Gate order and equations are
# PyTorch's (torch.nn.RNN, GRU, LSTM), biases in both projections as there.

def _init_recurrent(rng: np.random.Generator, d_in: int, hidden: int, gates: int) -> dict:
    bound = 1.0 / math.sqrt(hidden)     # PyTorch's uniform(-1/sqrt(H), 1/sqrt(H))
    u = lambda *shape: rng.uniform(-bound, bound, shape).astype(np.float32)
    return {"w_x": u(d_in, gates * hidden), "w_h": u(hidden, gates * hidden),
            "b_x": u(gates * hidden), "b_h": u(gates * hidden)}


def init_rnn_cell(rng: np.random.Generator, d_in: int, hidden: int) -> dict:
    """Params of `rnn_cell` (Elman: h' = tanh(x w_x + b_x + h w_h + b_h))."""
    return _init_recurrent(rng, d_in, hidden, 1)


def init_gru_cell(rng: np.random.Generator, d_in: int, hidden: int) -> dict:
    """Params of `gru_cell`: the reset, update and new gates side by side (3 * hidden)."""
    return _init_recurrent(rng, d_in, hidden, 3)


def init_lstm_cell(rng: np.random.Generator, d_in: int, hidden: int) -> dict:
    """Params of `lstm_cell`: the input, forget, cell and output gates (4 * hidden)."""
    return _init_recurrent(rng, d_in, hidden, 4)


def _split(v, n: int):
    h = v.shape[-1] // n
    return [v[..., i * h:(i + 1) * h] for i in range(n)]


def rnn_cell(params, h, x, *, projected: bool = False):
    """One Elman step: (h', h'). `projected`: x is already x @ w_x + b_x."""
    xp = x if projected else x @ params["w_x"] + params["b_x"]
    h = vnp.tanh(xp + h @ params["w_h"] + params["b_h"])
    return h, h


def gru_cell(params, h, x, *, projected: bool = False):
    """One GRU step (torch.nn.GRU): r, z = sigmoid(...); n = tanh(x_n + r * (h w_hn + b_hn));
    h' = (1 - z) * n + z * h. Returns (h', h')."""
    xr, xz, xn = _split(x if projected else x @ params["w_x"] + params["b_x"], 3)
    hr, hz, hn = _split(h @ params["w_h"] + params["b_h"], 3)
    r, z = sigmoid(xr + hr), sigmoid(xz + hz)
    n = vnp.tanh(xn + r * hn)
    h = (1.0 - z) * n + z * h
    return h, h


def lstm_cell(params, carry, x, *, projected: bool = False):
    """One LSTM step (torch.nn.LSTM) on carry (h, c): ((h', c'), h')."""
    h, c = carry
    g = (x if projected else x @ params["w_x"] + params["b_x"]) + h @ params["w_h"] + \
        params["b_h"]
    i, f, gg, o = _split(g, 4)
    c = sigmoid(f) * c + sigmoid(i) * vnp.tanh(gg)
    h = sigmoid(o) * vnp.tanh(c)
    return (h, c), h


def recurrent(cell, params, x, carry, *, reverse: bool = False):
    """`cell` (rnn_cell, gru_cell, lstm_cell) over the time axis of x [batch, L, d] from
    `carry`: (final carry, outputs [batch, L, hidden]). One vg.lax.scan over L."""
    xp = x @ params["w_x"] + params["b_x"]               # every step's input projection
    xs = vnp.swapaxes(xp, 0, 1)                           # time first: the scanned axis
    carry, ys = control_flow.scan(lambda c, xt: cell(params, c, xt, projected=True), carry,
                                  xs, reverse=reverse)
    return carry, vnp.swapaxes(ys, 0, 1)


def _zeros_state(x, params):
    return vnp.zeros((x.shape[0], params["w_h"].shape[0]), x.dtype)


def rnn(params, x, h0=None, *, reverse: bool = False):
    """An Elman RNN layer on x [batch, L, d]: (h_L, outputs [batch, L, hidden])."""
    return recurrent(rnn_cell, params, x, _zeros_state(x, params) if h0 is None else h0,
                     reverse=reverse)


def gru(params, x, h0=None, *, reverse: bool = False):
    """A GRU layer on x [batch, L, d]: (h_L, outputs [batch, L, hidden])."""
    return recurrent(gru_cell, params, x, _zeros_state(x, params) if h0 is None else h0,
                     reverse=reverse)


def lstm(params, x, carry=None, *, reverse: bool = False):
    """An LSTM layer on x [batch, L, d]: ((h_L, c_L), outputs [batch, L, hidden])."""
    if carry is None:
        carry = (_zeros_state(x, params), _zeros_state(x, params))
    return recurrent(lstm_cell, params, x, carry, reverse=reverse)


# ----------------------------------------------------------------------------------- language models

def _init_lm(rng: np.random.Generator, vocab: int, d_model: int, blocks: list, norm: dict,
             tied: bool) -> dict:
    # GPT-2's 0.02: a tied table is also the output projection, so the first logits stay small
    params = {"embed": (0.02 * rng.standard_normal((vocab, d_model))).astype(np.float32),
              "blocks": blocks, "norm_f": norm}
    if not tied:
        params["head"] = {"w": (rng.standard_normal((d_model, vocab)) / math.sqrt(d_model))
                          .astype(np.float32)}
    return params


def _lm_head(params, x):
    """Logits from the final hidden states: the embedding table transposed when tied (one
    matmul with a transpose flag), else the head's own matrix."""
    return x @ params["head"]["w"] if "head" in params else x @ params["embed"].T


def init_transformer_lm(rng: np.random.Generator, vocab: int, d_model: int, layers: int,
                        max_len: int, d_ff: int | None = None, tied: bool = True) -> dict:
    """Params of `transformer_lm`: token and learned position embeddings, `layers` pre-norm
    blocks (init_attention_block), the final layer norm, and an output head unless tied."""
    blocks = [init_attention_block(rng, d_model, d_ff) for _ in range(layers)]
    params = _init_lm(rng, vocab, d_model, blocks, {"w": np.ones(d_model, np.float32),
                                                   "b": np.zeros(d_model, np.float32)}, tied)
    params["pos"] = (0.02 * rng.standard_normal((max_len, d_model))).astype(np.float32)
    return params


def transformer_lm(params, ids, heads: int, policy: Policy | str | None = None):
    """Next-token logits [batch, L, vocab] of a GPT-style model on integer ids [batch, L]
    (L <= max_len): embeddings + positions, causal flash-attention blocks, layer norm, head.
    policy (vg.mp): the f32 params cast to its compute dtype, the logits to its output dtype."""
    params, ids = _in_policy(policy, params, ids)
    length = ids.shape[1]
    x = embedding(params["embed"], ids) + params["pos"][:length]
    for block in params["blocks"]:
        x = attention_block(block, x, heads, causal=True)
    x = layer_norm(x, params["norm_f"]["w"], params["norm_f"]["b"])
    return _out_policy(policy, _lm_head(params, x))


def init_mamba_lm(rng: np.random.Generator, vocab: int, d_model: int, layers: int,
                  d_state: int = 16, expand: int = 2, d_conv: int = 4,
                  tied: bool = True) -> dict:
    """Params of `mamba_lm`: the embedding, `layers` Mamba blocks (init_mamba_block), the final
    rms norm, and an output head unless tied (MambaLMHeadModel ties them)."""
    blocks = [init_mamba_block(rng, d_model, d_state, expand, d_conv) for _ in range(layers)]
    return _init_lm(rng, vocab, d_model, blocks, {"w": np.ones(d_model, np.float32)}, tied)


def mamba_lm(params, ids, policy: Policy | str | None = None):
    """Next-token logits [batch, L, vocab] of a Mamba LM on integer ids [batch, L]: embedding,
    residual Mamba blocks (each rms_norm first), rms_norm, head. No positions: the causal
    convolution and the scan see the order. policy: as transformer_lm's."""
    params, ids = _in_policy(policy, params, ids)
    x = embedding(params["embed"], ids)
    for block in params["blocks"]:
        x = mamba_block(block, x)
    return _out_policy(policy, _lm_head(params, rms_norm(x, params["norm_f"]["w"])))


def init_gru_lm(rng: np.random.Generator, vocab: int, d_model: int, layers: int,
                tied: bool = True) -> dict:
    """Params of `gru_lm`: the embedding, `layers` residual GRU layers (each with its rms norm;
    hidden = d_model), the final rms norm, and an output head unless tied."""
    blocks = [{"norm": {"w": np.ones(d_model, np.float32)},
               "gru": init_gru_cell(rng, d_model, d_model)} for _ in range(layers)]
    return _init_lm(rng, vocab, d_model, blocks, {"w": np.ones(d_model, np.float32)}, tied)


def gru_lm(params, ids, policy: Policy | str | None = None):
    """Next-token logits [batch, L, vocab] of a character GRU LM on integer ids [batch, L]:
    embedding, residual GRU layers (rms_norm first; each one vg.lax.scan over L), rms_norm,
    head; computed in the policy's compute dtype (None: as the params are)."""
    params, ids = _in_policy(policy, params, ids)
    x = embedding(params["embed"], ids)
    for block in params["blocks"]:
        x = x + gru(block["gru"], rms_norm(x, block["norm"]["w"]))[1]
    return _out_policy(policy, _lm_head(params, rms_norm(x, params["norm_f"]["w"])))


wrap_namespace(globals())   # tracebacks without vkgrad's frames (vkgrad/traceback_util.py)
