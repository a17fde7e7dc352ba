"""Planners for Mamba's selective scan, forward and backward (vkgrad/kernels_glsl/selective_scan.comp,
which explains the kernels' work decomposition and why it is sequential inside a chunk).

Semantics: mamba's `selective_scan_ref` in float32. With delta' = softplus(delta + delta_bias)
(bias and softplus optional; softplus(x) = x above 20, as mamba):

    h_t[n] = exp(delta'_t A[d, n]) h_{t-1}[n] + delta'_t B_t[n] u_t,  h_{-1} = 0
    y_t    = sum_n C_t[n] h_t[n] + D[d] u_t,  out = y * silu(z)   (D, z optional)

## Roles (dense row-major float32, whole buffers, no offsets; outputs must not alias inputs)

- plan_selective_scan: reads "u", "delta" [batch, dim, L]; "A" [dim, N]; "B", "C" each
  [batch, N, L] (variable) or [dim, N] (fixed); optionally "D" [dim], "z" [batch, dim, L],
  "delta_bias" [dim]. Writes "out" [batch, dim, L] and "states" [batch, n_chunks, dim, N]
  (`scan_states_shape`): states[b, c, d, :] is h at the end of chunk c, i.e. at
  t = min((c + 1) * chunk, L) - 1; the last one is the final state h_{L-1} (mamba's last_state).
  The backward restarts every chunk from these, so the forward primitive returns "states" as
  its second output and the backward reads it.
- plan_selective_scan_bwd: reads the forward's inputs, "states" and "dout" [batch, dim, L];
  writes "du", "ddelta" (w.r.t. the delta INPUT, through bias and softplus), "dz" (with z)
  [batch, dim, L]; "dA" [dim, N]; "dB", "dC" in the form of B, C; "dD", "ddelta_bias" [dim]
  (with D, with delta_bias). Temp: "partials" float32 (per-workgroup partial sums, summed by
  the plan's last launch in a fixed order: no float atomics, bit-identical run to run).

Both planners must be given the same `chunk` (None: the default for L): it fixes the states'
layout. Index math is 32-bit (each operand under 2**32 elements).

## Why save states rather than recompute

The backward needs h at the start of every chunk it walks in reverse. Saving them costs
batch * dim * N * L / chunk floats written once and read once: at chunk 16 and the benchmark
shape (batch 8, dim 1024, N 16, L 2048) 67 MB each way, ~28 us at 4.8 TB/s. Recomputing instead
(a first backward pass that re-runs the forward recurrence to regenerate them) would re-read u
and delta (134 MB, ~28 us) AND repeat every exp of the forward (batch * dim * N * L = 268M exp2,
~64 us of the H200's special-function units alone), so saving is cheaper; a longer chunk makes
states cheaper still but costs backward registers (h for `chunk * states` values per thread).

## Expected cost on the H200 (designed for; measure with bench/bench_scan.py)

At the benchmark shape every [batch, dim, L] array is 67 MB and B, C are 1 MB each.
Essential traffic (each operand read once, each result written once): forward u, delta, z, B, C
in, out out: 270 MB, 56 us at 4.8 TB/s; backward u, delta, z, dout, B, C in, du, ddelta, dz,
dB, dC out: 474 MB, 99 us; together 155 us. This design adds the saved states (67 MB written,
67 MB read at chunk 16) and the variable dB / dC partials: 2 x (dim / G) x batch x N x L floats
written and read again, 268 MB at the backward's default G = 16 (134 MB at G = 32): about 238 us
in all. Compute: one exp2 per state and step in the forward, one in the backward with store_a
(a_t kept in registers; two without), 268M each, ~64 us apiece on the SFUs, plus a few exp /
log per (d, t) for softplus and silu.
"""

from __future__ import annotations

from dataclasses import dataclass

from vkgrad import primitives as P
from vkgrad.lowering.contracts import KernelContract, Unsupported, need_f32, register
from vkgrad.lowering.kernels import OpPlan, Temp, _defines, _pow2_ceil
from vkgrad.target import target_of
from vkgrad.lowering.launch import Launch, cdiv, grid
from vkgrad.primitives.scan import SCAN_CHUNK as CHUNK
from vkgrad.primitives.scan import operand_names

# d_state sizes the kernels are built for; other sizes run on the interpreter (a counted
# fallback naming this limit).
SUPPORTED_N = (1, 2, 4, 8, 16, 32, 64)
# Steps the forward stages at once (CHUNK, the steps between saved states, is the primitive's:
# it fixes the shape of the `states` output); both are shortened to the next power of two >= L
# for short sequences.
STAGE = 32
MAX_WG = 1024
SUMS_WG = 256


@dataclass(frozen=True)
class ScanTile:
    """One kernel's tile: `states` per thread (S, divides N), `dims` d's per workgroup (G, a
    power of two), `steps`: forward TF (steps staged at once, a multiple of the chunk) or
    backward Q (steps per reduce-scatter of variable dB / dC); 0 picks it. `store_a` (backward)
    keeps a_t in registers instead of recomputing its exp2 in the reverse pass."""
    states: int
    dims: int
    steps: int = 0
    store_a: bool = True


# N -> (forward tile, backward tile), 128 threads per workgroup. More states per thread amortize
# a thread's per-step shared loads (delta/u, B, C) and the y reduce-scatter over more states;
# fewer give more threads: at N 16 (batch 8, dim 1024) 2 states per thread make 512 workgroups,
# about 4 per SM of an H200 (16 warps), where 4 states would leave 2 (8 warps). Backward: h (and
# a) for chunk x states values live in registers, so 2 states per thread at chunk 16 (64
# registers with store_a); G <= 32 so the dB / dC reduce-scatter over d stays inside one NVIDIA
# subgroup (32 lanes). Measured for N = 16 on the H200 (batch 8, dim 1024, L 2048; bench/results/
# scan_sweep_2026-11-30.json): 4 states per thread with 64 d's per forward workgroup (256
# threads) 285 us at chunk 8, and 4 states with 32 d's, a_t recomputed, in the backward 897 us,
# against 340 + 1691 us for the first guess (2 states, 16 d's, chunk 16); the other N are
# still the designed guesses.
TILES = {
    1: (ScanTile(1, 128), ScanTile(1, 32)),
    2: (ScanTile(2, 128), ScanTile(1, 32)),
    4: (ScanTile(4, 128), ScanTile(2, 32)),
    8: (ScanTile(4, 64), ScanTile(2, 32)),
    16: (ScanTile(4, 64), ScanTile(4, 32, store_a=False)),   # measured: see below
    32: (ScanTile(4, 16), ScanTile(4, 16)),
    64: (ScanTile(4, 8), ScanTile(4, 8)),
}


def _check(batch, dim, L, N):
    for k, v in dict(batch=batch, dim=dim, L=L, N=N).items():
        if int(v) != v or v < 0:
            raise ValueError(f"selective scan: {k} = {v!r} must be a non-negative integer")
    if L < 1:
        raise ValueError(f"selective scan: L = {L} must be at least 1")
    if N not in SUPPORTED_N:
        raise ValueError(f"selective scan: d_state N = {N} is not supported; supported: "
                         f"{', '.join(map(str, SUPPORTED_N))}")
    if batch * dim * max(L, N) >= 2**32 or dim * N >= 2**32:
        raise ValueError("selective scan: an operand has 2**32 or more elements (32-bit indices)")


def _check_states(batch, nC, dim, N):
    if batch * nC * dim * N >= 2**32:
        raise ValueError("selective scan: the saved states would hold 2**32 or more elements "
                         "(32-bit indices); pass a longer chunk")


def scan_chunk(L: int, chunk: int | None = None) -> int:
    """Steps between saved states: `chunk` (a power of two) or the default, capped near L."""
    tc = CHUNK if chunk is None else int(chunk)
    if tc < 1 or tc & (tc - 1):
        raise ValueError(f"selective scan: chunk = {chunk} must be a power of two")
    return min(tc, _pow2_ceil(L))


def scan_states_shape(batch: int, dim: int, L: int, N: int, chunk: int | None = None) -> tuple:
    """Shape of the forward's saved "states": (batch, n_chunks, dim, N)."""
    return (batch, cdiv(L, scan_chunk(L, chunk)), dim, N)


def _shared_bytes(mode, G, NG, N, TC, TX, nvar, has_z, softplus, S):
    """Shared memory of a MODE 0 / 1 workgroup (TX: TF or Q), as selective_scan.comp declares it
    (plus reduce_common.glsl's NT floats)."""
    NT, GP = G * NG, G + 1
    if mode == 0:
        rs = min(max(TX // 2, 1), 8) * NT
        return 4 * (4 * TX * GP + (2 * TX * N if nvar else 0) + rs + NT)
    rs = min(max(nvar * TX * S // 2, 1), 8) * NT if nvar else 0
    return 4 * (TC * GP * (4 + int(softplus) + int(has_z)) + (2 * TC * N if nvar else 0)
                + NG * TC * GP * (2 + int(has_z)) + G + rs + NT)


def _fit(mode, tile, N, dim, TC, TF, nvar, has_z, softplus, target):
    """(S, NG, G, TF): the tile with G capped by dim, then G halved (and, at G = 1, the
    forward's TF) until the workgroup and its shared memory fit the device."""
    S = tile.states
    if S < 1 or N % S:
        raise ValueError(f"selective scan: {S} states per thread do not divide N = {N}")
    NG = N // S
    if tile.dims < 1 or tile.dims & (tile.dims - 1):
        raise ValueError(f"selective scan: {tile.dims} d's per workgroup is not a power of two")
    G = min(tile.dims, _pow2_ceil(dim))
    max_wg = min(MAX_WG, target_of(target).max_workgroup_invocations)
    shared = target_of(target).max_shared_memory

    def fits(g, tf):
        tx = tf if mode == 0 else _q(tile, g, nvar, S, TC)
        return g * NG <= max_wg and \
            _shared_bytes(mode, g, NG, N, TC, tx, nvar, has_z, softplus, S) <= shared
    while not fits(G, TF):
        if G > 1:
            G //= 2
        elif mode == 0 and TF > TC:
            TF //= 2
        else:
            raise ValueError(f"selective scan: no workgroup with {S} states per thread fits this "
                             f"device (N = {N}, chunk {TC})")
    return S, NG, G, TF


def _q(tile, G, nvar, S, TC):
    """Backward steps per dB / dC reduce-scatter: at least max(G, 16) values per thread, so each
    of the G lanes ends with whole values and the shuffles come in long unrolled runs (fewer,
    larger reduce-scatters: the same shuffles, less code)."""
    q = tile.steps or _pow2_ceil(cdiv(max(G, 16), max(1, nvar * S)))
    return min(q, TC)


def _operand_roles(has_D, has_z, has_bias):
    return (("u", "delta", "A", "B", "C") + (("D",) if has_D else ()) +
            (("z",) if has_z else ()) + (("delta_bias",) if has_bias else ()))


def _flags(variable_B, variable_C, has_D, has_z, has_bias, softplus, subgroups):
    return dict(VARIABLE_B=variable_B, VARIABLE_C=variable_C, HAS_D=has_D, HAS_Z=has_z,
                HAS_BIAS=has_bias, SOFTPLUS=softplus, SUBGROUPS=subgroups)


def plan_selective_scan(batch: int, dim: int, L: int, N: int, *, variable_B: bool,
                        variable_C: bool, has_D: bool, has_z: bool, has_bias: bool,
                        softplus: bool, target=None, chunk: int | None = None,
                        tile: ScanTile | None = None, subgroups: bool = True) -> OpPlan:
    """The forward: "out" and the saved "states" (see the module docstring for roles)."""
    _check(batch, dim, L, N)
    if batch * dim == 0:
        return OpPlan(())
    TC = scan_chunk(L, chunk)
    tile = tile or TILES[N][0]
    nvar = int(variable_B) + int(variable_C)
    TF = max(TC, min(tile.steps or STAGE, _pow2_ceil(L)))
    if TF % TC or TF & (TF - 1):
        raise ValueError(f"selective scan: forward steps {TF} must be a power-of-two multiple "
                         f"of the chunk {TC}")
    S, NG, G, TF = _fit(0, tile, N, dim, TC, TF, nvar, has_z, softplus, target)
    ndg = cdiv(dim, G)
    nC = cdiv(L, TC)
    _check_states(batch, nC, dim, N)
    total = batch * ndg
    launch = Launch(
        name="scan_fwd", shader="selective_scan.comp", groups=grid(total),
        bindings=len(_operand_roles(has_D, has_z, has_bias)) + 2,
        push=(batch, dim, L, nC, ndg, total, 0, 0, 0, 0, 0), spec=(G * NG, TC, TF),
        defines=_defines(MODE=0, N=N, S=S, **_flags(variable_B, variable_C, has_D, has_z,
                                                    has_bias, softplus, subgroups)))
    return OpPlan(((launch, _operand_roles(has_D, has_z, has_bias) + ("out", "states")),))


def plan_selective_scan_bwd(batch: int, dim: int, L: int, N: int, *, variable_B: bool,
                            variable_C: bool, has_D: bool, has_z: bool, has_bias: bool,
                            softplus: bool, target=None, chunk: int | None = None,
                            tile: ScanTile | None = None, subgroups: bool = True) -> OpPlan:
    """The backward: du, ddelta, dz, dA, dB, dC, dD, ddelta_bias from the forward's inputs, its
    "states" and "dout" (see the module docstring for roles)."""
    _check(batch, dim, L, N)
    TC = scan_chunk(L, chunk)
    tile = tile or TILES[N][1]
    nvar = int(variable_B) + int(variable_C)
    S, NG, G, _ = _fit(1, tile, N, dim, TC, 0, nvar, has_z, softplus, target)
    Q = _q(tile, G, nvar, S, TC)
    if Q & (Q - 1):
        raise ValueError(f"selective scan: backward steps Q = {Q} must be a power of two")
    ndg = cdiv(dim, G)
    nC = cdiv(L, TC)
    _check_states(batch, nC, dim, N)

    # Partials, one section per gradient: (P partials of M elements each), summed over P.
    fixed = (batch, dim * N)
    sections = [fixed,                                              # dA
                (ndg, batch * N * L) if variable_B else fixed,      # dB
                (ndg, batch * N * L) if variable_C else fixed,      # dC
                (batch, dim) if has_D else (0, 0),                  # dD
                (batch, dim) if has_bias else (0, 0)]               # ddelta_bias
    offs, size = [], 0
    for n_rows, M in sections:
        offs.append(size)
        size += n_rows * M
    if size >= 2**32:
        raise ValueError("selective scan: the backward's partials exceed 2**32 elements")
    flags = _flags(variable_B, variable_C, has_D, has_z, has_bias, softplus, subgroups)
    operands = _operand_roles(has_D, has_z, has_bias)
    steps = []
    if batch * dim > 0:                    # else only the sums run: P = 0 partials give zeros
        total = batch * ndg
        main_roles = operands + ("states", "dout", "du", "ddelta") + \
            (("dz",) if has_z else ()) + ("partials",)
        steps.append((Launch(
            name="scan_bwd", shader="selective_scan.comp", groups=grid(total),
            bindings=len(main_roles), push=(batch, dim, L, nC, ndg, total, *offs),
            spec=(G * NG, TC, Q),
            defines=_defines(MODE=1, N=N, S=S, STORE_A=tile.store_a, **flags)), main_roles))
    M = [m for _, m in sections]
    total = sum(M)
    sum_roles = ("partials", "dA", "dB", "dC") + (("dD",) if has_D else ()) + \
        (("ddelta_bias",) if has_bias else ())
    steps.append((Launch(
        name="scan_bwd_sums", shader="selective_scan.comp", groups=grid(cdiv(total, SUMS_WG)),
        bindings=len(sum_roles), push=(total, *offs, *[P for P, _ in sections], *M),
        spec=(SUMS_WG, 1, 1), defines=_defines(MODE=2, N=N, S=1, HAS_D=has_D,
                                               HAS_BIAS=has_bias, SUBGROUPS=subgroups)),
        sum_roles))
    return OpPlan(tuple(steps), (Temp("partials", max(size, 1), "float32"),))


__all__ = ["SUPPORTED_N", "TILES", "ScanTile", "plan_selective_scan", "plan_selective_scan_bwd",
           "scan_chunk", "scan_states_shape"]


# ------------------------------------------------------------------ the contract

def plan_eqn(e, target):
    need_f32(e, *e.inputs)
    p = e.params
    names = operand_names(p["has_D"], p["has_z"], p["has_bias"])
    roles = dict(zip(names, e.inputs))
    batch, dim, L = roles["u"].shape
    kw = dict(variable_B=roles["B"].ndim == 3, variable_C=roles["C"].ndim == 3,
              has_D=p["has_D"], has_z=p["has_z"], has_bias=p["has_bias"],
              softplus=p["softplus"], target=target, chunk=p["chunk"])
    N = roles["A"].shape[1]
    if N not in SUPPORTED_N:
        raise Unsupported(f"{e.prim.name} with d_state N = {N} (the kernel takes N in "
                          f"{SUPPORTED_N})", e)
    if e.prim is P.selective_scan_bwd_p:
        roles.update(states=e.inputs[-2], dout=e.inputs[-1])
        roles.update(zip(["d" + n for n in names], e.outputs))
        return plan_selective_scan_bwd(batch, dim, L, N, **kw), roles
    roles.update(out=e.outputs[0], states=e.outputs[1])
    return plan_selective_scan(batch, dim, L, N, **kw), roles


CONTRACT = register(KernelContract(
    name="selective_scan", shader="selective_scan.comp",
    primitives=(P.selective_scan_p, P.selective_scan_bwd_p), plan=plan_eqn,
    limits=f"f32; state sizes {', '.join(map(str, SUPPORTED_N))}"))
