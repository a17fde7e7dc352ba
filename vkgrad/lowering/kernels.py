"""Planners for the hand-written reduction, softmax and take kernels (vkgrad/kernels_glsl/).

A planner is a pure function from shapes and params (and, optionally, the device's `DeviceInfo`,
which only caps the workgroup size) to an `OpPlan`; it touches no device, so it is tested and
printed without one.

## The buffer convention

An `OpPlan` holds
- `steps`: `((Launch, roles), ...)`, to run in this order in one sequence (vkgrad's runtime puts a
  barrier between dispatches). `roles[i]` names the buffer bound at binding i of that launch;
- `temps`: `(Temp(role, size, dtype), ...)`, temporary buffers the plan needs besides the op's
  operands, `size` in elements, dtype "float32" or "int32". Their contents on entry do not
  matter (the plan clears what it counts in), and they are dead after the last step, so the
  lowering may share them with other ops' temporaries ("scratch" buffers).

Operand roles, all dense row-major with no offset (whole buffers):

- plan_reduce:       reads "x" [A, R, B]; writes "out" [A, B]; two-pass plans add the temp
                     "partials" float32 [A, S, B]
- plan_horizontal_reduce: member m reads "x"[m] [A_m, R_m, B_m] and writes "out"[m] [A_m, B_m],
                     through fusion hooks only; with split members the temp "partials"
- plan_softmax:      reads "x" [rows, cols]; writes "y" [rows, cols]
- plan_softmax_grad: reads "y", "g" [rows, cols]; writes "dx" [rows, cols]
- plan_take:         reads "x" [A, N, B], "idx" [J]; writes "out" [A, J, B]
- plan_take_grad:    reads "g" [A, J, B], "idx" [J]; writes "dx" [A, N, B]; the sort plan's
                     temps int32 "counts" [N], "offsets" and "coffsets" [N + 1], "perm" [J],
                     "order" [J], float32 "partial" [A, chunks, B]; the rows plan's none, or
                     with J split float32 "partials" [splits, A, N, B]

`idx` is int32. A plan with no steps means the output is empty (nothing to run).

Every kernel writes every element of its output, so outputs need no clearing; outputs must not
alias inputs. Index math is 32-bit: each operand must hold fewer than 2**32 elements
(maxStorageBufferRange limits us first). Pass `target=device.target` to cap workgroup sizes by the
device (every size used is at most 1024, Vulkan's usual limit, and at least 32).

What the lowering arranges before calling these: a reduction's reduced axes must be one
contiguous block of a row-major array (else transpose first); mean is sum times 1/R afterwards;
softmax is over the last axis; negative take indices are wrapped (idx + N) beforehand, and
out-of-range ones are clamped; max/min of NaN follow GLSL's max/min (a NaN may be dropped),
not numpy's propagation; sum over R == 0 gives 0 (max/min give -inf/+inf).

## On a real GPU (softmax f32 [20480,4096]: 3.98 TB/s on the H200; BENCHMARKS.md)

Everything here is memory-bound; the figure of merit is bytes moved / time against ~4 TB/s.
- reduce: reads are coalesced in every path (threads along B when B > 1; along R when B == 1),
  vec4 when B % 4 == 0 (or, for B == 1, R % 4 == 0), four loads in flight per thread.
  When the outputs alone give fewer than TARGET_GROUPS workgroups, R is split over workgroups
  and a second launch reduces the partials (a full sum of 10**6 elements: 245 workgroups, then
  one). Expect near-copy bandwidth for large inputs; for small ones the launch (~2 us) dominates.
  Measure: sum over axis 0/1/both of 4096x4096, and of 10**8 elements to a scalar.
  A horizontal group (plan_horizontal_reduce) runs many small reductions of any shapes in one
  launch, float loads, splitting members rather than leaving one workgroup a long loop:
  bench/bench_hreduce.py.
- softmax: one workgroup per row; rows up to 8192 vec4 (32768 floats, forward) or 4096 vec4
  (backward) are held in registers, so each element is read once: 8 bytes per element forward,
  12 backward, the minimum. Longer rows stream twice (forward: an online max+sum pass, then the
  output: 12 bytes per element). The target is 3.5 TB/s on 4096x4096x5 (ggml: 2.1 TB/s).
  Measure: 20480x4096, 4096x50257 (a vocabulary), and rows of 64 or 128 (one small workgroup per
  row: if those are slow, pack several rows per workgroup).
- take: a copy: one thread per output vec4, contiguous rows.
- take_grad, two plans chosen by the id tests the rows plan would make (Target
  .take_grad_rows_max_tests). Small tables (rows plan, take_grad_rows.comp): one launch, a
  workgroup per block of rows testing every id against them (ids from L2: 32 KB for 8,192) and
  adding the matching g rows, 8-16 threads along J per row so a frequent id is summed in
  parallel; J split over workgroups, and a second launch, only when a table is tiny. Large
  tables (sort plan, take_grad.comp): O(J) index work in small launches (histogram with int
  atomics, a one-workgroup scan over N, bucket fill, per-bucket ranking by j: a team of 32
  threads per index, so a bucket of thousands costs thousands / 32 steps) and the sums: chunks
  of at most 32 entries of one bucket (one thread each), then each dx element the sum of its
  bucket's chunk sums: seven launches, 35.5 us at the LM's [256, 256] from 8,192 ids on the
  H200 (BENCHMARKS.md). Measure: bench/bench_take_grad.py (both plans, and rows layouts).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from vkgrad import primitives as P
from vkgrad.lowering.contracts import (Each, KernelContract, Members, Unsupported, need_f32,
                                       register)
from vkgrad.lowering.launch import Launch, cdiv, grid
from vkgrad.target import target_of

# Workgroups that keep an H200 busy: 132 SMs x 8 resident 256-thread groups ~ 1056.
TARGET_GROUPS = 1024
# Below this many input elements a reduction is never split: the second launch (~2 us) would
# cost more than the parallelism gains.
SPLIT_MIN_ELEMENTS = 1 << 18
# Loop iterations (vec4 or float loads) a thread should at least do in a split reduction.
MIN_ITERS = 4
# A single pass over fewer workgroups than this narrows its column tiles (see _reduce_pass)
FEW_GROUPS = 64
# B == 1 rows up to this long are reduced by one thread each (instead of one workgroup each).
SMALL_ROW = 32

REDUCE_OPS = {"sum": 0, "max": 1, "min": 2}


@dataclass(frozen=True)
class Temp:
    role: str
    size: int          # elements
    dtype: str         # "float32" | "int32"


@dataclass(frozen=True)
class OpPlan:
    steps: tuple       # ((Launch, roles), ...): roles[i] is the buffer at binding i
    temps: tuple = ()  # (Temp, ...)

    @property
    def launches(self) -> tuple:
        return tuple(launch for launch, _ in self.steps)


# ---------------------------------------------------------------- helpers

def _pow2_ceil(n: int) -> int:
    return 1 << max(0, (int(n) - 1).bit_length())


def _wg(wanted: int, target=None) -> int:
    """`wanted` (a power of two), capped by the device's largest workgroup."""
    cap = 1 << (int(target_of(target).max_workgroup_invocations).bit_length() - 1)
    return min(wanted, cap)


def _defines(**kw) -> tuple:
    return tuple(sorted((k, int(v)) for k, v in kw.items()))


def _check_sizes(**sizes) -> None:
    for k, v in sizes.items():
        if int(v) != v or v < 0:
            raise ValueError(f"{k} = {v!r} must be a non-negative integer")


# ---------------------------------------------------------------- reductions

def plan_reduce(op: str, A: int, R: int, B: int, *, target=None, splits: int | None = None,
                subgroups: bool = True, nout: int = 1) -> OpPlan:
    """out[a, b] = op over r of x[a, r, b], for op in "sum", "max", "min".

    Roles: "x" (A*R*B floats), "out" (A*B floats); two-pass plans add the temp "partials".
    `splits` forces how many workgroups share one row's R (None: chosen by size; 1: one pass).
    R == 0 gives the identity (0, -inf, +inf). `nout` > 1 reduces that many operands of this
    shape in one pass (a multi-output fusion): "x" and "out" are then read and written only
    through fusion hooks (lowering/hooks.py), float by float (no vec4), and "partials" holds
    nout blocks of [A, S, B].
    """
    if op not in REDUCE_OPS:
        raise ValueError(f"reduce op {op!r} is not one of {sorted(REDUCE_OPS)}")
    _check_sizes(A=A, R=R, B=B)
    if A * B == 0:
        return OpPlan(())
    first, S = _reduce_pass(op, A, R, B, "x", "out", target, splits, subgroups, nout)
    if S == 1:
        return OpPlan((first,))
    tmp = Temp("partials", nout * A * S * B, "float32")
    stride = (("YSTRIDE", A * S * B),) if nout > 1 else ()
    first = (dataclasses.replace(first[0], defines=first[0].defines + stride), ("x", "partials"))
    second, _ = _reduce_pass(op, A, S, B, "partials", "out", target, 1, subgroups, nout)
    stride = (("XSTRIDE", A * S * B),) if nout > 1 else ()
    second = (dataclasses.replace(second[0], defines=second[0].defines + stride), second[1])
    return OpPlan((first, second), (tmp,))


def _reduce_pass(op, A, R, B, src, dst, target, splits, subgroups, nout=1, floats=False):
    """One launch of reduce.comp; returns ((Launch, roles), S) where S > 1 means it writes
    partials [A, S, B] instead of [A, B]. `floats`: float loads only (no vec4)."""
    wg = _wg(256, target)
    vec_ok = nout == 1 and not floats
    if B == 1 and R <= SMALL_ROW:
        # One thread per row: the workgroup's threads run along the rows (b := a).
        vec = 4 if R % 4 == 0 and R > 0 and vec_ok else 1
        Rv = R // vec
        view = dict(A=1, R=Rv, sA=0, sR=1, sB=Rv, B=A)
        hreduce = vec == 4
        tb = min(_pow2_ceil(A), wg)
        S = 1
    elif B == 1:
        vec = 4 if R % 4 == 0 and vec_ok else 1
        Rv = R // vec
        if Rv < 1024:
            wg = _wg(64, target)
        view = dict(A=A, R=Rv, sA=Rv, sR=1, sB=0, B=1)
        hreduce = vec == 4
        tb = 1
        S = None
    else:
        vec = 4 if B % 4 == 0 and vec_ok else 1
        Bv = B // vec
        view = dict(A=A, R=R, sA=R * Bv, sR=Bv, sB=1, B=Bv)
        hreduce = False
        tb = min(_pow2_ceil(Bv), wg)
        if splits == 1 and A * cdiv(Bv, tb) < FEW_GROUPS:
            # One pass forced (a split reduction's second pass) over few workgroups' worth of
            # columns: 32-column tiles spread them over more workgroups and R over 8 threads
            # each. With one 256-column workgroup, a LayerNorm's gamma/beta gradients' second
            # pass over 264 partial rows took 64 us (the first pass 10), latency-bound (small
            # LM, H200, 2026-12-01).
            tb = min(tb, 32)
        # Short R: fewer threads along R (at least 64 threads, a whole subgroup everywhere).
        wg = min(wg, max(_wg(64, target), tb * _pow2_ceil(max(R, 1))))
        S = None

    nbt = cdiv(view["B"], tb)
    out_groups = view["A"] * nbt
    Rv = view["R"]
    if S is None:
        if splits is not None:
            S = max(1, min(int(splits), max(Rv, 1)))
        elif out_groups >= TARGET_GROUPS or A * R * B < SPLIT_MIN_ELEMENTS:
            S = 1
        else:
            tr = wg // tb
            S = max(1, min(cdiv(TARGET_GROUPS, out_groups), cdiv(Rv, tr * MIN_ITERS)))
    chunk = max(cdiv(Rv, S), 1)
    S = max(cdiv(Rv, chunk), 1)
    total = out_groups * S
    push = (Rv, view["sA"], view["sR"], view["sB"], view["B"], chunk, S, nbt, tb, total)
    name = f"reduce_{op}" + ("_partial" if S > 1 else "")
    more = {"NOUT": nout} if nout > 1 else {}
    launch = Launch(name=name, shader="reduce.comp", bindings=2, groups=grid(total), push=push,
                    spec=(wg,), defines=_defines(OP=REDUCE_OPS[op], VEC=vec, HREDUCE=hreduce,
                                                 SUBGROUPS=subgroups, **more))
    return (launch, (src, dst)), S


def plan_split_sum(partial: Launch, inputs: tuple, out: str, splits: int, total: int, *,
                   target=None) -> OpPlan:
    """A split-K plan: `partial` (binding the roles `inputs`, then the temp "partials":
    `splits` slices of `total` floats) and the sum over the slices into the role `out`, in a
    fixed order (deterministic). The matmul and conv planners' second dispatch."""
    red = plan_reduce("sum", 1, splits, total, target=target, splits=1)
    rename = {"x": "partials", "out": out, "partials": "reduce_partials"}
    steps = ((partial, tuple(inputs) + ("partials",)),) + tuple(
        (launch, tuple(rename[r] for r in roles)) for launch, roles in red.steps)
    temps = (Temp("partials", splits * total, "float32"),) + tuple(
        Temp(rename[t.role], t.size, t.dtype) for t in red.temps)
    return OpPlan(steps, temps)


# ---------------------------------------------------------------- horizontal reductions

# Elements of one output tile a workgroup of a horizontal group reduces at most: a larger member
# is split over workgroups (its partials reduced by the group's second launch, one for all
# members). A workgroup's slice is latency-bound: the global norm of the small LM's 52
# gradient leaves (bench/bench_hreduce.py, H200) took 333 us as 61 dispatches, and as one
# group 23.6 / 21.5 / 24.3 / 99.6 / 292 us at 2048 / 4096 / 8192 / 16384 / 65536 elements
# (its three dispatches).
HORIZONTAL_GROUP_ELEMENTS = 4096
# What a horizontal group's launches bind besides the members' hooks: the members' operands and
# results (through VKG_LOADM_B0 and VKG_STOREN_B1) and, when a member is split, the partials.
HORIZONTAL_ROLES = ("x", "out", "partials")
# The generated table's fields, before reduce.comp's push constants (REDUCE_PARAMS there).
MEMBER_FIELDS = ("member", "first", "off")
PUSH_FIELDS = ("R", "sA", "sR", "sB", "B", "chunk", "S", "nbt", "TB", "total")


def _horizontal_splits(op, A, R, B, target, subgroups) -> int:
    """Workgroups sharing one output tile's R in a horizontal group's first launch."""
    launch = _reduce_pass(op, A, R, B, "x", "out", target, 1, subgroups, floats=True)[0][0]
    Rv, tb, wg = launch.push[0], launch.push[8], launch.spec[0]
    per_tile = Rv * min(tb, launch.push[4])
    return max(1, min(cdiv(per_tile, HORIZONTAL_GROUP_ELEMENTS), cdiv(Rv, (wg // tb) * MIN_ITERS)))


def plan_horizontal_reduce(op: str, views, *, target=None, subgroups: bool = True) -> OpPlan:
    """Reductions of any shapes in one launch (a horizontal group: fuse_horizontal_reductions,
    vkgrad/lowering/fusion/horizontal_reductions.py): for member m with views[m] = (A, R, B),
    out_m[a, b] = op over r of x_m[a, r, b]. Every workgroup finds its member and its slice in
    a generated table (`member_table`, in the launch's `hooks`: one row per member, its first
    workgroup and reduce.comp's push constants for it). A member with more than
    HORIZONTAL_GROUP_ELEMENTS elements per output tile is split over workgroups that write
    partials, and a second launch reduces every split member's partials: each member's sum in
    a fixed order (deterministic; no atomics).

    Roles: "x" and "out" (one operand and one result per member: read and written only
    through the fusion hooks VKG_LOADM_B0 and VKG_STOREN_B1, lowering/hooks.py); with splits
    the temp "partials" (the split members' [A, S, B], one after the other), which the second
    launch reads at binding 0."""
    if op not in REDUCE_OPS:
        raise ValueError(f"reduce op {op!r} is not one of {sorted(REDUCE_OPS)}")
    first, second, off = [], [], 0
    for m, (A, R, B) in enumerate(views):
        _check_sizes(A=A, R=R, B=B)
        if A * B == 0:
            continue
        S = _horizontal_splits(op, A, R, B, target, subgroups)
        (launch, _), S = _reduce_pass(op, A, R, B, "x", "out", target, S, subgroups, floats=True)
        first.append((m, off, launch))
        if S > 1:
            (final, _), _ = _reduce_pass(op, A, S, B, "partials", "out", target, 1, subgroups,
                                         floats=True)
            second.append((m, off, final))
            off += A * S * B
    if not first:
        return OpPlan(())
    split = bool(second)
    steps = [(_members_launch(op, "horizontal", first, subgroups, split),
              HORIZONTAL_ROLES if split else HORIZONTAL_ROLES[:2])]
    if split:
        steps.append((_members_launch(op, "horizontal_final", second, subgroups, False),
                      ("partials", "out")))
    return OpPlan(tuple(steps), (Temp("partials", off, "float32"),) if split else ())


def _members_launch(op, what, rows, subgroups, split_out) -> Launch:
    """One launch of reduce.comp over the members `rows` ((member, partials offset, the
    member's own Launch), in order)."""
    table, g = [], 0
    for m, off, launch in rows:
        table.append((m, g, off) + tuple(launch.push))
        g += launch.push[9]
    wg = max(launch.spec[0] for _, _, launch in rows)
    bindings = len(HORIZONTAL_ROLES if split_out else HORIZONTAL_ROLES[:2])
    return Launch(name=f"reduce_{op}_{what}", shader="reduce.comp", bindings=bindings,
                  groups=grid(g), spec=(wg,), hooks=member_table(table),
                  defines=_defines(OP=REDUCE_OPS[op], VEC=1, HREDUCE=0, SUBGROUPS=subgroups,
                                   MEMBERS=len(rows), SPLIT_OUT=split_out))


def member_table(rows) -> str:
    """reduce.comp's `Params vkg_member(uint g)` (MEMBERS): the row of the member that
    workgroup g works for, rows in order of their first workgroup."""
    fields = MEMBER_FIELDS + PUSH_FIELDS
    lines = ["// the members' table (lowering/kernels.py, plan_horizontal_reduce): "
             + ", ".join(fields), "Params vkg_member(uint g) {"]
    for n, row in enumerate(rows):
        args = ", ".join(f"{v}u" for v in row)
        end = row[1] + row[3 + PUSH_FIELDS.index("total")]
        test = f"if (g < {end}u) " if n < len(rows) - 1 else ""
        lines.append(f"    {test}return Params({args});")
    lines.append("}")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- softmax

def _softmax_launch(name, mode, rows, cols, target, stream, subgroups, max_nv):
    vec = 4 if cols % 4 == 0 else 1
    C = cols // vec
    wg_cap = _wg(1024, target)
    wg = min(max(_pow2_ceil(cdiv(C, 4)), 32), wg_cap)
    nv = _pow2_ceil(cdiv(C, wg))
    if stream or nv > max_nv:
        nv, wg = 0, wg_cap
    return Launch(name=name, shader="softmax.comp", bindings=2 if mode < 2 else 3,
                  groups=grid(rows), push=(rows, C), spec=(wg,),
                  defines=_defines(MODE=mode, VEC=vec, NV=nv, SUBGROUPS=subgroups))


def plan_softmax(rows: int, cols: int, *, log: bool = False, target=None, stream: bool = False,
                 subgroups: bool = True) -> OpPlan:
    """y = softmax(x) (log=True: log_softmax(x)) over the last axis of [rows, cols].

    Roles: "x", "y". `stream=True` forces the two-pass streaming variant (for tests).
    """
    _check_sizes(rows=rows, cols=cols)
    if rows * cols == 0:
        return OpPlan(())
    name = "log_softmax" if log else "softmax"
    launch = _softmax_launch(name, int(log), rows, cols, target, stream, subgroups, max_nv=8)
    return OpPlan(((launch, ("x", "y")),))


def plan_softmax_grad(rows: int, cols: int, *, log: bool = False, target=None,
                      stream: bool = False, subgroups: bool = True) -> OpPlan:
    """dx from y (the forward's output) and g = dL/dy, over the last axis of [rows, cols]:
    softmax dx = y * (g - sum(g * y)); log_softmax dx = g - exp(y) * sum(g).

    Roles: "y", "g", "dx".
    """
    _check_sizes(rows=rows, cols=cols)
    if rows * cols == 0:
        return OpPlan(())
    name = "log_softmax_bwd" if log else "softmax_bwd"   # the IR's names for these ops
    # Backward keeps two values per element in registers: half as many as the forward.
    launch = _softmax_launch(name, 2 + int(log), rows, cols, target, stream, subgroups, max_nv=4)
    return OpPlan(((launch, ("y", "g", "dx")),))


# ---------------------------------------------------------------- row kernels

# Elements of a row each thread keeps in registers (row.comp's NV), which sets the workgroup:
# n / ROW_NV threads. Fewer threads with more elements each ran faster at every size measured
# on the H200 (bench/bench_rows.py, 2026-12-02; GPU us at NV 2 / 4 / 8, fuse_rows off):
# layer norm [8192, 1024] 218 / 109 / 86 (215), its value and gradient 669 / 440 / 381 (656),
# a jnp softmax [4096, 4096] - / 662 / 241 (479), layer norm [8192, 256] 11.5 / 11.5 / 11.3
# (28.7): with 1024 threads a row (NV 4 at 4096) the softmax was slower than the three kernels
# it replaces.
ROW_NV = 8
# The longest row a row kernel takes: the longest measured to pay (4096: 512 threads of 8).
# Longer rows run as today's reduction and loop kernels.
ROW_MAX = 4096


def row_layout(n: int, target=None) -> tuple:
    """(workgroup size, elements per thread) of a row kernel over rows of `n` elements: about
    ROW_NV elements a thread, at least a 32-thread workgroup (a subgroup everywhere).
    Unsupported past row_max."""
    if n > row_max(target):
        raise Unsupported(f"a row kernel over rows of {n} elements: at most "
                          f"{row_max(target)} fit one workgroup's registers")
    wg = min(max(_pow2_ceil(cdiv(n, ROW_NV)), 32), _wg(1024, target))
    return wg, max(1, cdiv(n, wg))


def row_max(target=None) -> int:
    """The longest row a row kernel takes on `target`."""
    return min(ROW_MAX, ROW_NV * _wg(1024, target))


def plan_rows(rows: int, n: int, bindings: int, *, target=None, subgroups: bool = True) -> Launch:
    """The launch of a row kernel over [rows, n] (row.comp; its generated code is the
    lowering's, vkgrad/lowering/row_kernel.py): one workgroup per row."""
    _check_sizes(rows=rows, n=n)
    wg, nv = row_layout(n, target)
    return Launch(name="row", shader="row.comp", bindings=bindings, groups=grid(max(rows, 1)),
                  spec=(wg,), defines=_defines(ROWS=rows, N=n, NV=nv, SUBGROUPS=subgroups))


def _row_shape(e):
    body = e.params["body"]
    r = next(b for b in body.eqns if not b.prim.fusible)
    return r.inputs[0].shape


def plan_row_eqn(e, target):
    """A `fused[kind=row]` eqn's one launch (its template: the lowering fills it in) and its
    roles, the body's inputs then outputs in binding order."""
    shape = _row_shape(e)
    body = e.params["body"]
    vs = list(body.inputs) + list(body.outputs)
    launch = plan_rows(math.prod(shape[:-1]), shape[-1], len(vs), target=target)
    return OpPlan(((launch, tuple(f"b{i}" for i in range(len(vs)))),)), \
        {f"b{i}": v for i, v in enumerate(vs)}


# Not keyed by a primitive (a row kernel is a group, not an op): the row fusion pass
# (lowering/fusion/rows.py) and the lowering (row_kernel.py) use it by name.
ROWS = register(KernelContract(
    name="row", shader="row.comp", primitives=(), plan=plan_row_eqn,
    limits=f"reductions over the last axis of one [rows, n] shape, n up to {ROW_MAX} (and "
           f"{ROW_NV} x the largest workgroup); f32 reductions, no 16-bit values"))


# ---------------------------------------------------------------- take and its gradient

def plan_take(A: int, N: int, B: int, J: int, *, target=None, ints: bool = False) -> OpPlan:
    """out[a, j, b] = x[a, clamp(idx[j], 0, N-1), b]. Roles: "x", "idx", "out".

    Out-of-range indices are clamped (numpy's mode="clip"); Python-style negative indices must
    be wrapped (idx + N) by the caller first. `ints`: x holds i32 or bool (32-bit) values.
    """
    _check_sizes(A=A, N=N, B=B, J=J)
    if A * J * B == 0:
        return OpPlan(())
    if N == 0:
        raise ValueError("take from an axis of length 0 with indices: nothing to clamp them to")
    vec = 4 if B % 4 == 0 else 1
    Bv = B // vec
    wg = _wg(256, target)
    total = A * J * Bv
    launch = Launch(name="take", shader="take.comp", bindings=3,
                    groups=grid(cdiv(total, wg)), push=(N, J, Bv, total), spec=(wg,),
                    defines=_defines(VEC=vec, **({"INT": 1} if ints else {})))
    return OpPlan(((launch, ("x", "idx", "out")),))


_TAKE_GRAD_STAGES = (  # (stage, name, roles)
    (0, "take_grad_clear", ("counts",)),
    (1, "take_grad_hist", ("idx", "counts")),
    (2, "take_grad_scan", ("counts", "offsets", "coffsets")),
    (3, "take_grad_fill", ("idx", "offsets", "counts", "perm")),
    (4, "take_grad_rank", ("idx", "offsets", "perm", "order")),
    (5, "take_grad_chunks", ("g", "offsets", "coffsets", "order", "partial")),
    (6, "take_grad_accum", ("coffsets", "partial", "dx")),
)
TAKE_GRAD_CHUNK = 32    # entries of a bucket one thread sums (take_grad.comp's CHUNK)
TAKE_GRAD_TEAM = 32     # threads that rank one entry in its bucket (take_grad.comp's TEAM)


def plan_take_grad_sort(A: int, N: int, B: int, J: int, *, target=None,
                        subgroups: bool = True) -> OpPlan:
    """take_grad for any table (take_grad.comp), the ids sorted by value: each bucket's
    entries in increasing j, summed TAKE_GRAD_CHUNK at a time, then those sums in order
    (deterministic; no float atomics). Roles: "g", "idx", "dx"; int32 temps "counts" [N],
    "offsets" [N+1], "coffsets" [N+1], "perm" [J], "order" [J], and the chunk sums "partial"
    [A, chunks, B] (see take_grad.comp for the stages)."""
    _check_sizes(A=A, N=N, B=B, J=J)
    if A * N * B == 0:
        return OpPlan(())
    vec = 4 if B % 4 == 0 else 1
    Bv = B // vec
    wg = _wg(256, target)
    chunks = cdiv(J, TAKE_GRAD_CHUNK) + min(N, J)    # each bucket's last chunk may be partial
    threads = {0: N, 1: J, 3: J, 4: J * TAKE_GRAD_TEAM, 5: A * chunks * Bv, 6: A * N * Bv}
    steps = []
    for stage, name, roles in _TAKE_GRAD_STAGES:
        if stage == 2:
            swg, groups = _wg(1024, target), (1, 1, 1)     # one workgroup scans all of N
        elif threads[stage] == 0:
            continue                                    # J == 0: nothing to bucket
        else:
            swg, groups = wg, grid(cdiv(threads[stage], wg))
        defines = dict(STAGE=stage, SUBGROUPS=subgroups)
        if stage >= 5:
            defines["VEC"] = vec
        steps.append((Launch(name=name, shader="take_grad.comp", bindings=len(roles),
                             groups=groups, push=(N, J, Bv, threads.get(stage, 0), chunks),
                             spec=(swg,), defines=_defines(**defines)), roles))
    temps = (Temp("counts", N, "int32"), Temp("offsets", N + 1, "int32"),
             Temp("coffsets", N + 1, "int32"), Temp("perm", max(J, 1), "int32"),
             Temp("order", max(J, 1), "int32"), Temp("partial", max(A * chunks * B, 1), "float32"))
    return OpPlan(tuple(steps), temps)


# The small-table plan (take_grad_rows.comp) is one launch, but each workgroup tests every id of
# its span against its rows: (row blocks x column blocks x A) x J id tests, which
# Target.take_grad_rows_max_tests bounds (measured on lavapipe, estimated for a GPU). The sort
# plan (take_grad.comp) is seven dependent launches whatever the size: 35.5 us at [256, 256]
# from 8,192 ids on the H200, launch-bound (BENCHMARKS.md, "Embedding gradient"). GPT-2's
# [50257, 768] from 16,384 ids would be 8.2e8 tests.

# Workgroups of up to 1024 threads the H200 holds at once: 132 SMs x 2.
RESIDENT_GROUPS = 264
TAKE_GRAD_ROWS_MAX_COLS = 256      # columns (T's) one workgroup covers
TAKE_GRAD_ROWS_MASK_WORDS = 1024   # take_grad_rows.comp's MASK_WORDS (a round: 32 x that / ROWS)
TAKE_GRAD_ROWS_UNROLL = 4          # take_grad_rows.comp's UNROLL
# Threads along J that sum one row at least (when a workgroup has room): a frequent id (a space
# in text: 1,407 of 8,192 ids) is then 8 or more threads' sums of 4 loads in flight each.
TAKE_GRAD_ROWS_SLICES = 8
# J is split over workgroups when a slice would sum more ids of its row than this on average:
# 16 dependent steps of 4 loads from L2, estimated at the cost of the second launch (a small
# launch measures about 5 us on the H200: take_grad_clear in BENCHMARKS.md).
TAKE_GRAD_ROWS_SPLIT_IDS = 64
TAKE_GRAD_ROWS_MIN_SPAN = 1024     # ids a split of J gets at least


@dataclass(frozen=True)
class RowsLayout:
    """How plan_take_grad_rows lays out its workgroups (take_grad_rows.comp's spec constants)."""
    rows: int        # rows of dx per workgroup
    slices: int      # slices of the matching ids per row, summed in parallel
    cols: int        # columns (T's) per workgroup, one per thread
    splits: int      # spans of J over workgroups (> 1: a second launch sums them)

    @property
    def wg(self) -> int:
        return self.rows * self.slices * self.cols


def _rows_blocks(A, N, Bv, layout) -> int:
    return A * cdiv(N, layout.rows) * cdiv(Bv, layout.cols)


def take_grad_rows_tests(A: int, N: int, B: int, J: int, *, target=None) -> int:
    """The id tests plan_take_grad_rows's default layout makes: its cost model."""
    vec = 4 if B % 4 == 0 else 1
    layout = take_grad_rows_layout(A, N, B, J, target=target)
    return _rows_blocks(A, N, B // vec, layout) * J


def _rows_loop_iterations(span: int, layout: RowsLayout) -> int:
    """An upper bound on one thread's counted loop iterations (take_grad_rows.comp's comment)."""
    per_round = 32 * (TAKE_GRAD_ROWS_MASK_WORDS // layout.rows)
    ids = min(span, per_round)
    u = TAKE_GRAD_ROWS_UNROLL
    round_cost = (3 + cdiv(TAKE_GRAD_ROWS_MASK_WORDS, layout.wg)
                  + cdiv(ids, layout.wg * u) * (1 + 2 * u)
                  + cdiv(cdiv(ids, 32), layout.slices) * (1 + 32 // u))
    return cdiv(span, per_round) * round_cost + layout.slices


def _pow2_floor(n: int) -> int:
    return 1 << max(0, int(n).bit_length() - 1)


def take_grad_rows_layout(A: int, N: int, B: int, J: int, *, target=None, rows=None,
                          slices=None, splits=None) -> RowsLayout:
    """The workgroup layout of plan_take_grad_rows (any of rows, slices, splits forced).

    Columns: all of B's T's up to TAKE_GRAD_ROWS_MAX_COLS; the rest of a 1024-thread workgroup
    is rows x slices. Rows: one per workgroup while that gives at most 2 RESIDENT_GROUPS
    workgroups, more (powers of two, leaving TAKE_GRAD_ROWS_SLICES slices) when it gives more,
    so fewer workgroups test each id. Slices: the rest, at most one per 4 words of a round's
    mask. Splits of J (Target.split_k): when a slice would sum more than
    TAKE_GRAD_ROWS_SPLIT_IDS ids on average, up to RESIDENT_GROUPS workgroups, each split
    TAKE_GRAD_ROWS_MIN_SPAN ids or more; on any device, enough for each thread's loops to stay
    under Target.max_loop_iterations."""
    target = target_of(target)
    Bv = B // (4 if B % 4 == 0 else 1)
    cols = max(1, min(Bv, TAKE_GRAD_ROWS_MAX_COLS))
    room = max(1, _wg(1024, target) // cols)
    if rows is None:
        blocks = A * N * cdiv(Bv, cols)
        rows = min(_pow2_floor(max(1, blocks // RESIDENT_GROUPS)),
                   _pow2_floor(max(1, room // TAKE_GRAD_ROWS_SLICES)), _pow2_ceil(N))
    if slices is None:
        words = cdiv(min(J, 32 * TAKE_GRAD_ROWS_MASK_WORDS // rows), 32)
        slices = max(1, min(room // rows, _pow2_floor(max(1, words // 4))))
    layout = RowsLayout(rows, slices, cols, 1)
    if splits is None:
        splits = 1
        blocks = _rows_blocks(A, N, Bv, layout)
        if target.split_k:
            splits = max(1, min(cdiv(J, N * slices * TAKE_GRAD_ROWS_SPLIT_IDS),
                                RESIDENT_GROUPS // blocks, J // TAKE_GRAD_ROWS_MIN_SPAN))
        limit = target.max_loop_iterations
        while limit and _rows_loop_iterations(cdiv(J, splits), layout) > limit:
            splits += 1
    return dataclasses.replace(layout, splits=max(1, min(int(splits), max(J, 1))))


def plan_take_grad_rows(A: int, N: int, B: int, J: int, *, target=None, rows=None,
                        slices=None, splits=None) -> OpPlan:
    """take_grad in one launch for small tables (take_grad_rows.comp): workgroups own blocks
    of rows of dx and test the ids against them; each row's ids in increasing j over `slices`
    interleaved slices, the slices' sums in order (deterministic; no float atomics). Roles:
    "g", "idx", "dx"; with J split over workgroups (`splits` > 1) the temp "partials"
    [splits, A, N, B] and a second launch summing them in order (plan_split_sum)."""
    _check_sizes(A=A, N=N, B=B, J=J)
    if A * N * B == 0:
        return OpPlan(())
    vec = 4 if B % 4 == 0 else 1
    Bv = B // vec
    lay = take_grad_rows_layout(A, N, B, J, target=target, rows=rows, slices=slices,
                                splits=splits)
    span = cdiv(J, lay.splits) if J else 0
    splits = cdiv(J, span) if J else 1                 # none empty
    if lay.wg > _wg(1024, target) or lay.rows > TAKE_GRAD_ROWS_MASK_WORDS:
        raise ValueError(f"take_grad_rows: {lay} needs more than a workgroup's "
                         f"{_wg(1024, target)} threads or {TAKE_GRAD_ROWS_MASK_WORDS} mask words")
    groups = splits * _rows_blocks(A, N, Bv, lay)
    launch = Launch(name="take_grad_rows", shader="take_grad_rows.comp", bindings=3,
                    groups=grid(groups),
                    push=(N, J, Bv, A, span, cdiv(Bv, lay.cols), cdiv(N, lay.rows), groups),
                    spec=(lay.wg, lay.rows, lay.slices, lay.cols), defines=_defines(VEC=vec))
    if splits == 1:
        return OpPlan(((launch, ("g", "idx", "dx")),))
    return plan_split_sum(launch, ("g", "idx"), "dx", splits, A * N * B, target=target)


def plan_take_grad(A: int, N: int, B: int, J: int, *, target=None, method=None,
                   subgroups: bool = True) -> OpPlan:
    """dx[a, n, b] = sum over j with clamp(idx[j], 0, N-1) == n of g[a, j, b], deterministic.
    Roles "g", "idx", "dx" and the chosen plan's temps. `method`: "rows" (plan_take_grad_rows)
    or "sort" (plan_take_grad_sort); None chooses by size: rows while its id tests are at most
    the Target's take_grad_rows_max_tests."""
    if method is None:
        method = "rows" if take_grad_rows_tests(A, N, B, J, target=target) <= \
            target_of(target).take_grad_rows_max_tests else "sort"
    if method == "rows":
        return plan_take_grad_rows(A, N, B, J, target=target)
    if method == "sort":
        return plan_take_grad_sort(A, N, B, J, target=target, subgroups=subgroups)
    raise ValueError(f"take_grad method {method!r} is not 'rows', 'sort' or None")


# ---------------------------------------------------------------- the contracts

REDUCTION_OPS = {P.reduce_sum_p: "sum", P.reduce_max_p: "max", P.reduce_min_p: "min"}


def _reduction_axes(e):
    x, axes = e.inputs[0], e.params["axes"]
    a0 = axes[0] if axes else x.ndim
    a1 = a0 + len(axes)
    return math.prod(x.shape[:a0]), math.prod(x.shape[a0:a1]), math.prod(x.shape[a1:])


def plan_reduction_eqn(e, target):
    need_f32(e, e.inputs[0])
    return (plan_reduce(REDUCTION_OPS[e.prim], *_reduction_axes(e), target=target),
            {"x": e.inputs[0], "out": e.out})


def plan_reductions_group(anchors, target, root, body=None):
    """One reduction with fused loads or stores, or sibling reductions of one shape, op and
    axes: one pass over the operands (plan_reduce's nout); any other group of one op, or more
    siblings than accumulators: a horizontal group (plan_horizontal_group)."""
    first = anchors[0]
    if not all(a.prim is first.prim and a.prim in REDUCTION_OPS for a in anchors):
        return None
    if len(anchors) == 1:
        return plan_reduction_eqn(first, target)
    if len(anchors) > REDUCTIONS.siblings or \
            any(a.inputs[0].shape != first.inputs[0].shape or a.params != first.params
                for a in anchors):
        return plan_horizontal_group(anchors, target)
    need_f32(first, *(a.inputs[0] for a in anchors))
    plan = plan_reduce(REDUCTION_OPS[first.prim], *_reduction_axes(first), target=target,
                       nout=len(anchors))
    return plan, {"x": Each(a.inputs[0] for a in anchors), "out": Each(a.out for a in anchors)}


def plan_horizontal_group(anchors, target):
    """Reductions of one op and any shapes, one per member of a horizontal group
    (plan_horizontal_reduce)."""
    need_f32(anchors[0], *(x for a in anchors for x in (a.inputs[0], a.out)))
    plan = plan_horizontal_reduce(REDUCTION_OPS[anchors[0].prim],
                                  [_reduction_axes(a) for a in anchors], target=target)
    return plan, {"x": Members(a.inputs[0] for a in anchors),
                  "out": Members(a.out for a in anchors)}


REDUCTIONS = register(KernelContract(
    name="reduce", shader="reduce.comp", primitives=tuple(REDUCTION_OPS),
    plan=plan_reduction_eqn, plan_group=plan_reductions_group,
    fused_loads={p: (0,) for p in REDUCTION_OPS}, fused_stores=frozenset(REDUCTION_OPS),
    siblings=4,      # operands one dispatch accumulates at once (registers: four accumulators)
    limits="f32; reduced axes adjacent and trailing (canonicalize_for_lowering makes them so)"))

_SOFTMAX_LOG = {P.softmax_p: False, P.log_softmax_p: True,
                P.softmax_bwd_p: False, P.log_softmax_bwd_p: True}


def plan_softmax_eqn(e, target):
    need_f32(e, *e.inputs)
    x = e.inputs[0]
    rows, cols = math.prod(x.shape[:-1]), x.shape[-1]
    log = _SOFTMAX_LOG[e.prim]
    if e.prim in (P.softmax_p, P.log_softmax_p):
        return plan_softmax(rows, cols, log=log, target=target), {"x": x, "y": e.out}
    y, g = e.inputs
    return (plan_softmax_grad(rows, cols, log=log, target=target),
            {"y": y, "g": g, "dx": e.out})


SOFTMAX = register(KernelContract(
    name="softmax", shader="softmax.comp", primitives=tuple(_SOFTMAX_LOG),
    plan=plan_softmax_eqn,
    fused_loads={P.softmax_p: (0,), P.log_softmax_p: (0,), P.softmax_bwd_p: (0, 1),
                 P.log_softmax_bwd_p: (0, 1)},
    fused_stores=frozenset(_SOFTMAX_LOG), limits="f32; over the last axis"))


def plan_take_eqn(e, target):
    x, idx = e.inputs
    if x.dtype not in ("i32", "bool"):   # a gather moves 32-bit words: ints and bools too
        need_f32(e, x)                  # (x[::-1] of ints fell back before; tests/test_fuzz.py)
    ax = e.params["axis"]
    plan = plan_take(math.prod(x.shape[:ax]), x.shape[ax], math.prod(x.shape[ax + 1:]),
                     math.prod(idx.shape), target=target, ints=x.dtype != "f32")
    return plan, {"x": x, "idx": idx, "out": e.out}


def _take_takes_hooks(e, target=None, loads=False) -> bool:
    return e.inputs[0].dtype == "f32"    # the generated hooks compute in float


TAKE = register(KernelContract(
    name="take", shader="take.comp", primitives=(P.take_p,), plan=plan_take_eqn,
    fused_loads={P.take_p: (0, 1)}, fused_stores=frozenset({P.take_p}),
    takes_hooks=_take_takes_hooks, dtypes=("f32", "i32", "bool"),
    limits="hooks only when the values are f32"))


def plan_scatter_add_eqn(e, target):
    g, idx = e.inputs
    need_f32(e, g)
    ax, shape = e.params["axis"], e.params["shape"]
    plan = plan_take_grad(math.prod(shape[:ax]), shape[ax], math.prod(shape[ax + 1:]),
                          math.prod(idx.shape), target=target)
    return plan, {"g": g, "idx": idx, "dx": e.out}


TAKE_GRAD = register(KernelContract(
    name="take_grad", shader="take_grad.comp", primitives=(P.scatter_add_p,),
    plan=plan_scatter_add_eqn,
    limits="f32 values, i32 indices; small tables run take_grad_rows.comp (plan_take_grad)"))
