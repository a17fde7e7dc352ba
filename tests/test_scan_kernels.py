"""Mamba selective-scan kernels (vkgrad/lowering/scan.py) on the real Vulkan device (lavapipe in
CI) against a float64 numpy reference of mamba's `selective_scan_ref` and an explicit
reverse-mode loop for its backward, itself checked by central finite differences.

Outputs and temporaries are poisoned with NaN before each run, so an element a kernel forgets to
write shows up. Shapes are small (lavapipe compiles each unrolled variant once, in seconds) but
awkward: dim not a power of two and not a multiple of the workgroup's d's, L not a multiple of
the chunk, batch > 1.
"""

import numpy as np
import pytest

from kernel_runs import run_plan
from vkgrad.lowering.scan import (CHUNK, SUPPORTED_N, TILES, ScanTile, plan_selective_scan,
                                  plan_selective_scan_bwd, scan_chunk, scan_states_shape)
from vkgrad.runtime import get_device
from vkgrad.target import Target


@pytest.fixture(scope="module")
def dev():
    return get_device()


# ---------------------------------------------------------------- float64 reference

def _softplus(x):
    return np.where(x > 20.0, x, np.log1p(np.exp(np.minimum(x, 20.0))))


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _at(X, t):
    """B or C at step t, broadcastable to [batch, dim, N]: variable [b, N, L] or fixed [d, N]."""
    return X[:, None, :, t] if X.ndim == 3 else X[None]


def selective_scan_reference(u, delta, A, B, C, D=None, z=None, delta_bias=None,
                             delta_softplus=False, return_cache=False):
    """mamba's selective_scan_ref in float64: out [batch, dim, L]."""
    u, delta, A, B, C = (np.asarray(x, np.float64) for x in (u, delta, A, B, C))
    x = delta + (0.0 if delta_bias is None else np.asarray(delta_bias, np.float64)[:, None])
    dt = _softplus(x) if delta_softplus else x
    batch, dim, L = u.shape
    h = np.zeros((batch, dim, A.shape[1]))
    hs, y = [], np.empty((batch, dim, L))
    for t in range(L):
        h = np.exp(dt[..., t, None] * A) * h + (dt[..., t] * u[..., t])[..., None] * _at(B, t)
        hs.append(h)
        y[..., t] = (h * _at(C, t)).sum(-1)
    if D is not None:
        y = y + np.asarray(D, np.float64)[:, None] * u
    out = y * (z * _sigmoid(z)) if z is not None else y
    if return_cache:
        return out, dict(x=x, dt=dt, hs=hs, y=y)
    return out


def selective_scan_reference_bwd(dout, u, delta, A, B, C, D=None, z=None, delta_bias=None,
                                 delta_softplus=False):
    """Gradients of sum(out * dout) by an explicit reverse-mode loop, float64: a dict with du,
    ddelta, dA, dB, dC and, where the input exists, dD, dz, ddelta_bias."""
    dout = np.asarray(dout, np.float64)
    u, A, B, C = (np.asarray(v, np.float64) for v in (u, A, B, C))
    _, c = selective_scan_reference(u, delta, A, B, C, D, z, delta_bias, delta_softplus,
                                    return_cache=True)
    x, dt, hs, y = c["x"], c["dt"], c["hs"], c["y"]
    g = {}
    if z is not None:
        z = np.asarray(z, np.float64)
        sg = _sigmoid(z)
        dy = dout * z * sg
        g["dz"] = dout * y * sg * (1.0 + z * (1.0 - sg))
    else:
        dy = dout
    du = np.zeros_like(u) if D is None else dy * np.asarray(D, np.float64)[:, None]
    if D is not None:
        g["dD"] = (dy * u).sum(axis=(0, 2))
    ddt = np.zeros_like(u)
    dA, dB, dC = np.zeros_like(A), np.zeros_like(B), np.zeros_like(C)
    carry = np.zeros_like(hs[0])                  # a_{t+1} * dh_{t+1}
    for t in reversed(range(u.shape[2])):
        Bt, Ct = _at(B, t), _at(C, t)
        dh = carry + dy[..., t, None] * Ct
        a = np.exp(dt[..., t, None] * A)
        hprev = hs[t - 1] if t > 0 else np.zeros_like(hs[0])
        da = dh * hprev                            # d/da_t of a_t * h_{t-1}
        ddt[..., t] += (da * a * A).sum(-1) + (dh * Bt).sum(-1) * u[..., t]
        du[..., t] += (dh * Bt).sum(-1) * dt[..., t]
        dA += (da * a * dt[..., t, None]).sum(0)
        dBt = dh * (dt[..., t] * u[..., t])[..., None]
        dCt = dy[..., t, None] * hs[t]
        if B.ndim == 3:
            dB[..., t] = dBt.sum(1)
        else:
            dB += dBt.sum(0)
        if C.ndim == 3:
            dC[..., t] = dCt.sum(1)
        else:
            dC += dCt.sum(0)
        carry = a * dh
    ddelta = ddt * (np.where(x > 20.0, 1.0, _sigmoid(x)) if delta_softplus else 1.0)
    g.update(du=du, ddelta=ddelta, dA=dA, dB=dB, dC=dC)
    if delta_bias is not None:
        g["ddelta_bias"] = ddelta.sum(axis=(0, 2))
    return g


def make_inputs(rng, batch, dim, L, N, *, variable_B, variable_C, has_D, has_z, has_bias,
                softplus=True):
    """Mamba-like magnitudes: A < 0 (S4D-real-ish) and delta' in about 0.02..0.35 (as raw
    values before softplus, or directly), so states neither vanish nor blow up over L."""
    f32 = lambda a: np.asarray(a, np.float32)
    lo, hi = (-4.0, -1.0) if softplus else (0.02, 0.3)
    ins = dict(
        u=f32(rng.standard_normal((batch, dim, L))),
        delta=f32(rng.uniform(lo, hi, (batch, dim, L))),
        A=f32(-np.exp(rng.uniform(-1.0, 1.5, (dim, N)))),
        B=f32(rng.standard_normal((batch, N, L) if variable_B else (dim, N))),
        C=f32(rng.standard_normal((batch, N, L) if variable_C else (dim, N))))
    if has_D:
        ins["D"] = f32(rng.standard_normal(dim))
    if has_z:
        ins["z"] = f32(rng.standard_normal((batch, dim, L)))
    if has_bias:
        ins["delta_bias"] = f32(rng.uniform(-0.5, 0.5, dim) if softplus else
                                rng.uniform(0.0, 0.05, dim))
    return ins


def _ref_kwargs(ins, softplus):
    return dict(D=ins.get("D"), z=ins.get("z"), delta_bias=ins.get("delta_bias"),
                delta_softplus=softplus)


# ---------------------------------------------------------------- the reference itself

@pytest.mark.parametrize("variable_B, variable_C", [(True, True), (False, True), (True, False),
                                                    (False, False)])
def test_reference_backward_by_finite_differences(variable_B, variable_C):
    """The explicit reverse loop equals central differences of the forward (float64)."""
    rng = np.random.default_rng(1)
    batch, dim, L, N = 2, 3, 5, 2
    ins = {k: v.astype(np.float64) for k, v in make_inputs(
        rng, batch, dim, L, N, variable_B=variable_B, variable_C=variable_C, has_D=True,
        has_z=True, has_bias=True).items()}
    ins["delta"][0, 0, 0] = 21.0                       # one delta past softplus's threshold
    W = rng.standard_normal((batch, dim, L))

    def loss(v):
        return float((selective_scan_reference(
            v["u"], v["delta"], v["A"], v["B"], v["C"], v["D"], v["z"], v["delta_bias"],
            delta_softplus=True) * W).sum())

    g = selective_scan_reference_bwd(W, ins["u"], ins["delta"], ins["A"], ins["B"], ins["C"],
                                     ins["D"], ins["z"], ins["delta_bias"], delta_softplus=True)
    eps = 1e-6
    for name, grad_name in [("u", "du"), ("delta", "ddelta"), ("A", "dA"), ("B", "dB"),
                            ("C", "dC"), ("D", "dD"), ("z", "dz"),
                            ("delta_bias", "ddelta_bias")]:
        num = np.zeros_like(ins[name])
        for i in np.ndindex(ins[name].shape):
            plus = {k: v.copy() for k, v in ins.items()}
            minus = {k: v.copy() for k, v in ins.items()}
            plus[name][i] += eps
            minus[name][i] -= eps
            num[i] = (loss(plus) - loss(minus)) / (2 * eps)
        np.testing.assert_allclose(g[grad_name], num, rtol=1e-6, atol=1e-7, err_msg=grad_name)


# ---------------------------------------------------------------- the kernels

def run_scan(dev, ins, N, softplus, *, chunk=None, fwd_tile=None, bwd_tile=None,
             subgroups=True, dout=None, target=None):
    """Forward then backward plans on the device; returns (out, states, grads) as float32."""
    batch, dim, L = ins["u"].shape
    flags = dict(variable_B=ins["B"].ndim == 3, variable_C=ins["C"].ndim == 3,
                 has_D="D" in ins, has_z="z" in ins, has_bias="delta_bias" in ins,
                 softplus=softplus, target=target, chunk=chunk, subgroups=subgroups)
    fwd = plan_selective_scan(batch, dim, L, N, tile=fwd_tile, **flags)
    shape = scan_states_shape(batch, dim, L, N, chunk)
    res = run_plan(dev, fwd, ins, {"out": batch * dim * L, "states": int(np.prod(shape))})
    out = res["out"].reshape(batch, dim, L)
    states = res["states"].reshape(shape)
    bwd = plan_selective_scan_bwd(batch, dim, L, N, tile=bwd_tile, **flags)
    size = ins["u"].size
    outputs = {"du": size, "ddelta": size, "dA": dim * N, "dB": ins["B"].size,
               "dC": ins["C"].size}
    if "z" in ins:
        outputs["dz"] = size
    if "D" in ins:
        outputs["dD"] = dim
    if "delta_bias" in ins:
        outputs["ddelta_bias"] = dim
    grads = run_plan(dev, bwd, {**ins, "states": states.reshape(-1), "dout": dout}, outputs)
    shapes = {"du": ins["u"].shape, "ddelta": ins["u"].shape, "dz": ins["u"].shape,
              "dA": ins["A"].shape, "dB": ins["B"].shape, "dC": ins["C"].shape, "dD": (dim,),
              "ddelta_bias": (dim,)}
    return out, states, {k: v.reshape(shapes[k]) for k, v in grads.items()}


def _close(name, got, ref, scale, rtol=1e-4):
    """|got - ref| <= rtol * (|ref| + scale), scale the array's mean magnitude: an element that
    is small by cancellation is judged against the array's size, not its own. The worst seen
    over this file's cases is 2.1e-5 (ddelta), float32 against float64."""
    assert got.shape == ref.shape, (name, got.shape, ref.shape)
    assert np.all(np.isfinite(got)), f"{name}: not every element written (NaN poison left)"
    # + 1e-7: an array that is exactly zero (dA at L = 1: h_{-1} = 0) gets float32 noise
    # from a GPU's fused multiply-adds (1.2e-9 seen on the H200), which no scale would allow
    err = np.abs(got - ref) - rtol * (np.abs(ref) + scale) - 1e-7
    assert err.max() <= 0, (f"{name}: max excess {err.max():.3g} at "
                            f"{np.unravel_index(err.argmax(), err.shape)}; "
                            f"got {got.flat[err.argmax()]}, want {ref.flat[err.argmax()]}")


def check_scan(dev, batch, dim, L, N, *, variable_B=True, variable_C=True, has_D=True,
               has_z=True, has_bias=True, softplus=True, seed=0, **kw):
    rng = np.random.default_rng(seed)
    ins = make_inputs(rng, batch, dim, L, N, variable_B=variable_B, variable_C=variable_C,
                      has_D=has_D, has_z=has_z, has_bias=has_bias, softplus=softplus)
    dout = rng.standard_normal((batch, dim, L)).astype(np.float32)
    out, states, grads = run_scan(dev, ins, N, softplus, dout=dout, **kw)
    kwargs = _ref_kwargs(ins, softplus)
    ref, cache = selective_scan_reference(ins["u"], ins["delta"], ins["A"], ins["B"], ins["C"],
                                          return_cache=True, **kwargs)
    _close("out", out, ref, np.abs(ref).mean())
    # states[b, c] = h at the end of chunk c
    TC = scan_chunk(L, kw.get("chunk"))
    ends = [min((c + 1) * TC, L) - 1 for c in range(states.shape[1])]
    want = np.stack([cache["hs"][t] for t in ends], axis=1)
    _close("states", states, want, np.abs(want).mean())
    g = selective_scan_reference_bwd(dout, ins["u"], ins["delta"], ins["A"], ins["B"], ins["C"],
                                     **kwargs)
    assert sorted(grads) == sorted(g)
    for k, v in g.items():
        _close(k, grads[k], v, np.abs(v).mean())
    return out, states, grads


# The case table: (N, batch, dim, L, variable_B, variable_C, D, z, bias, softplus, chunk,
# forward tile, backward tile). Short chunks (4: many chunk boundaries in a short L) and small
# tiles keep lavapipe's compile of each unrolled variant near a second; test_scan_default runs
# the planner's own tiles. On lavapipe (8-lane subgroups) NG = 16 threads per d (forward) and
# G >= 16 d's (backward) also take the reduce-scatters' shared-memory steps.
T = ScanTile
CASES = [
    (1, 2, 3, 7, True, True, True, True, True, True, 4, T(1, 4, 8), T(1, 4)),
    (4, 2, 5, 130, True, False, True, False, True, True, 4, T(2, 4, 8), T(1, 8)),
    (16, 2, 37, 257, True, True, True, True, True, True, 4, T(1, 4, 8), T(2, 16)),
    (16, 3, 37, 130, False, False, True, True, False, False, 8, T(4, 8, 16), T(4, 8)),
    (16, 1, 3, 1, False, True, False, True, False, False, 4, T(4, 4, 8), T(2, 4)),   # L = 1
    (64, 2, 3, 130, True, True, False, False, True, True, 4, T(4, 2, 8), T(4, 2)),
    (64, 1, 2, 7, False, False, True, False, False, True, 4, T(4, 2, 8), T(4, 2)),
    (4, 3, 5, 7, False, False, False, False, False, False, 4, T(4, 4, 4), T(4, 4)),  # bare
    (1, 1, 130, 257, False, True, False, False, True, False, 4, T(1, 32, 8), T(1, 32)),
    (4, 2, 9, 37, True, True, True, True, True, True, 4, T(1, 4, 4),                # a_t
     T(2, 4, 2, store_a=False)),                                                    # recomputed
]


@pytest.mark.parametrize("N, batch, dim, L, vb, vc, has_D, has_z, has_bias, softplus, chunk, "
                         "fwd_tile, bwd_tile", CASES)
def test_scan(dev, N, batch, dim, L, vb, vc, has_D, has_z, has_bias, softplus, chunk,
              fwd_tile, bwd_tile):
    check_scan(dev, batch, dim, L, N, variable_B=vb, variable_C=vc, has_D=has_D, has_z=has_z,
               has_bias=has_bias, softplus=softplus, chunk=chunk, fwd_tile=fwd_tile,
               bwd_tile=bwd_tile, target=dev.target)


def test_scan_default(dev):
    """The planner's own tiles and chunk for the benchmark's configuration (N 16, everything
    on), capped by this device's limits."""
    check_scan(dev, 2, 6, 130, 16, target=dev.target)


def test_scan_without_subgroups(dev):
    """SUBGROUPS=0: every reduce-scatter step goes through shared memory."""
    check_scan(dev, 2, 9, 37, 16, subgroups=False, chunk=4, fwd_tile=T(2, 4, 8),
               bwd_tile=T(2, 8))


def test_scan_deterministic(dev):
    """Two runs give bit-identical results (no atomics anywhere). The variant of a CASES row
    (N 16, batch 2, dim 37, L 257), so nothing new is compiled."""
    rng = np.random.default_rng(3)
    batch, dim, L, N = 2, 37, 257, 16
    ins = make_inputs(rng, batch, dim, L, N, variable_B=True, variable_C=True, has_D=True,
                      has_z=True, has_bias=True)
    dout = rng.standard_normal((batch, dim, L)).astype(np.float32)
    runs = [run_scan(dev, ins, N, True, dout=dout, chunk=4, fwd_tile=T(1, 4, 8),
                     bwd_tile=T(2, 16), target=dev.target) for _ in range(2)]
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    np.testing.assert_array_equal(runs[0][1], runs[1][1])
    for k in runs[0][2]:
        np.testing.assert_array_equal(runs[0][2][k], runs[1][2][k], err_msg=k)


def test_scan_empty_batch(dev):
    """batch 0: the forward has nothing to do; the backward's weight gradients are zeros."""
    flags = dict(variable_B=False, variable_C=True, has_D=True, has_z=False, has_bias=True,
                 softplus=True)
    assert plan_selective_scan(0, 3, 5, 4, **flags).steps == ()
    plan = plan_selective_scan_bwd(0, 3, 5, 4, **flags)
    assert [launch.name for launch in plan.launches] == ["scan_bwd_sums"]
    got = run_plan(dev, plan, {}, {"dA": 12, "dB": 12, "dC": 0, "dD": 3, "ddelta_bias": 3})
    for k, v in got.items():
        np.testing.assert_array_equal(v, np.zeros_like(v), err_msg=k)


# ---------------------------------------------------------------- plans, no device

def test_scan_plans():
    flags = dict(variable_B=True, variable_C=True, has_D=True, has_z=True, has_bias=True,
                 softplus=True)
    fwd = plan_selective_scan(8, 1024, 2048, 16, **flags)
    (launch, roles), = fwd.steps
    assert roles == ("u", "delta", "A", "B", "C", "D", "z", "delta_bias", "out", "states")
    assert launch.bindings == len(roles)
    bwd = plan_selective_scan_bwd(8, 1024, 2048, 16, **flags)
    (main, mroles), (sums, sroles) = bwd.steps
    assert mroles == ("u", "delta", "A", "B", "C", "D", "z", "delta_bias", "states", "dout",
                      "du", "ddelta", "dz", "partials")
    assert sroles == ("partials", "dA", "dB", "dC", "dD", "ddelta_bias")
    assert [t.role for t in bwd.temps] == ["partials"]
    assert scan_states_shape(8, 1024, 2048, 16) == (8, 2048 // CHUNK, 1024, 16)
    lean = dict(variable_B=False, variable_C=False, has_D=False, has_z=False, has_bias=False,
                softplus=False)
    (_, roles), = plan_selective_scan(2, 3, 5, 4, **lean).steps
    assert roles == ("u", "delta", "A", "B", "C", "out", "states")
    assert plan_selective_scan_bwd(2, 3, 5, 4, **lean).steps[1][1] == ("partials", "dA", "dB",
                                                                       "dC")


def test_scan_plans_respect_device_limits():
    """Shared memory and workgroup size shrink the tile (G halves), never the chunk."""
    flags = dict(variable_B=True, variable_C=True, has_D=True, has_z=True, has_bias=True,
                 softplus=True)
    small = Target(max_shared_memory=16384, max_workgroup_invocations=128)
    for N in SUPPORTED_N:
        for plan in (plan_selective_scan(4, 1000, 300, N, target=small, **flags),
                     plan_selective_scan_bwd(4, 1000, 300, N, target=small, **flags)):
            launch = plan.steps[0][0]
            assert launch.spec[0] <= 128
            assert launch.spec[1] == CHUNK                         # the chunk is a contract
    with pytest.raises(ValueError, match="supported: 1, 2, 4, 8, 16, 32, 64"):
        plan_selective_scan(1, 1, 1, 3, **flags)
    with pytest.raises(ValueError, match="power of two"):
        plan_selective_scan(1, 1, 8, 4, chunk=12, **flags)
    assert set(TILES) == set(SUPPORTED_N)
