"""vg.check_kernels: does each Vulkan kernel of a jitted program agree with the interpreter?

    print(vg.check_kernels(step, params, x, y))

The numpy interpreter runs the plan's program (the fused program, eqn by eqn) and keeps every
value. Then each kernel runs ALONE on the device, its inputs uploaded from the interpreter's
values of them, and its outputs are compared with the interpreter's values of the same outputs:
each row measures one kernel, never the error the kernels before it accumulated. One row per
kernel (an eqn of the fused program; a kernel of several dispatches, such as a split-K matmul,
is one row): kernel, part (forward/backward), primitives, shapes, placement, max abs and max rel
error, GPU us (vg.profile's median over a few runs). A row whose error is beyond float32
tolerance is flagged with the user's lines the kernel computes (file:line,line: a fused kernel
computes several eqns in one shader, and only its outputs can be compared).

The relative error of an element is |device - reference| / (|reference| + floor), the floor
being 1% of the output's largest magnitude (and at least 1e-6), so near-zero elements of a
large output (a matmul's cancellations) do not count as disagreements; NaN and Inf agree where
the reference has the same. Integer and bool results must be equal.
"""

from __future__ import annotations

import argparse

import numpy as np

from vkgrad.dtypes import np_dtype
from vkgrad.dump import check_arity, load_function, parse_args_spec
from vkgrad.errors import VkgradError
from vkgrad.execution.jit import Jitted, jit
from vkgrad.execution.profile import _describe, profile
from vkgrad.ir.core import Literal, Var
from vkgrad.ir.interpreter import apply
from vkgrad.lowering.contracts import Concat
from vkgrad.primitives.compiler import fused_p
from vkgrad.runtime.vulkan import Executable, device_dtype
from vkgrad.tracer.core import ShapeDtype
from vkgrad.tracer.pytree import tree_map

RTOL = 1e-3
COLUMNS = ("kernel", "part", "primitives", "shapes", "placement", "max_abs", "max_rel",
           "gpu_us", "ok", "source")


class KernelTable:
    """The rows of vg.check_kernels, as dicts (keys: COLUMNS); str() is the aligned table."""

    def __init__(self, name, rows, rtol):
        self.name, self.rows, self.rtol = name, rows, rtol

    @property
    def flagged(self) -> list:
        return [r for r in self.rows if not r["ok"]]

    def _cells(self):
        head = ["kernel", "part", "primitives", "shapes", "placement", "max abs", "max rel",
                "GPU us", ""]
        body = []
        for r in self.rows:
            prims = r["primitives"] if len(r["primitives"]) <= 40 else r["primitives"][:37] + "..."
            body.append([r["kernel"], r["part"], prims, r["shapes"], r["placement"],
                         _num(r["max_abs"]), _num(r["max_rel"]),
                         "-" if r["gpu_us"] is None else f"{r['gpu_us']:.1f}",
                         "" if r["ok"] else f"DISAGREES at {r['source']}"])
        return head, body

    def summary(self) -> str:
        bad = self.flagged
        if not bad:
            return (f"{self.name}: {len(self.rows)} kernels, all agree with the interpreter "
                    f"(max rel error <= {self.rtol:g})")
        return (f"{self.name}: {len(bad)} of {len(self.rows)} kernels disagree with the "
                f"interpreter (max rel error > {self.rtol:g}): " +
                ", ".join(f"{r['kernel']} ({r['source']})" for r in bad))

    def __str__(self):
        head, body = self._cells()
        widths = [max(len(str(c)) for c in col) for col in zip(head, *body)]
        right = {5, 6, 7}
        lines = ["  ".join(f"{c:>{w}}" if i in right else f"{c:<{w}}"
                           for i, (c, w) in enumerate(zip(row, widths))).rstrip()
                 for row in [head, *body]]
        return "\n".join(lines + [self.summary()])

    __repr__ = __str__

    def _repr_markdown_(self) -> str:
        head, body = self._cells()
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |"
                  for row in body]
        return "\n".join(lines) + f"\n\n**{self.summary()}**\n"


def _size(v) -> int:
    return int(np.prod(v.shape))


def _num(x) -> str:
    return "-" if x is None else f"{x:.2e}"


def check_kernels(fun, *args, rtol: float = RTOL, runs: int = 3, **kwargs) -> KernelTable:
    """Run `fun`'s Vulkan plan kernel by kernel against the interpreter (module docstring)."""
    if not isinstance(fun, Jitted):
        fun = jit(fun, backend="vulkan")
    elif fun.backend is None:   # the default backend may be numpy (lavapipe): check Vulkan
        fun = jit(fun.fun, static_argnums=fun.static_argnums, backend="vulkan")
    entry, leaves = fun._compiled(args, kwargs)
    name = entry.stages["traced"].name
    if entry.backend != "vulkan":   # the whole program runs on the interpreter: say why
        why = f"interpreter: {entry.fallback_reason or 'numpy backend'}"
        rows = [_row("-", e, why, None, None, None, True, None)
                for e in entry.stages["optimized"].eqns]
        return KernelTable(name, rows, rtol)
    lw = entry.lowered
    if lw is None:
        raise VkgradError("vg.check_kernels checks one Vulkan plan; this program's while loop "
                          "runs as several, driven from the host (vkgrad/execution/segmented.py)"
                          ": check its body as a function of its own")
    values = _interpret(lw.program, [np.asarray(x) for x in leaves])
    try:
        times = [r.us for r in profile(fun, *args, runs=runs, **kwargs).rows]
    except VkgradError:          # a device without timestamps
        times = [None] * len(lw.steps)
    device = entry.runner.device
    bufs = [device.buffer(s.size, np_dtype(s.dtype), "device") for s in lw.slots]
    for slot, value in lw.const_values.items():
        bufs[slot].upload(value.reshape(-1))
    where = _places(lw)
    rows = []
    for steps, us, e, loops in _kernels(lw, times):
        uploads = [(bufs[where[x][0]], _padded(lw, where, x, values[x]))
                   for x in dict.fromkeys(_root_inputs(lw, e, where)) if x in where]
        outs = [o for o in e.outputs if o in where]
        ex = Executable(device, [device.dispatch(st.launch, [bufs[s] for s in st.slots])
                                 for st in steps], name=f"check {steps[0].launch.name}",
                        loops=loops)
        ex.run(uploads, list(dict.fromkeys(bufs[where[o][0]] for o in outs)))
        errs = [_errors(_read(bufs, where, o), values[o]) for o in outs]
        ex.release()
        max_abs = max((a for a, _ in errs), default=0.0)
        max_rel = max((r for _, r in errs), default=0.0)
        kernel = "+".join(dict.fromkeys(st.launch.name for st in steps))
        rows.append(_row(kernel, e, "device", max_abs, max_rel, us, max_rel <= rtol,
                         _source_of(e)))
    return KernelTable(name, rows, rtol)


def _row(kernel, e, placement, max_abs, max_rel, us, ok, source) -> dict:
    prims, shapes = _describe(e)
    body = e.params["body"].eqns if e.prim is fused_p else (e,)
    phases = {b.phase for b in body}
    part = "+".join(name for p, name in (("fwd", "forward"), ("bwd", "backward")) if p in phases)
    return {"kernel": kernel, "part": part, "primitives": prims, "shapes": shapes,
            "placement": placement, "max_abs": max_abs, "max_rel": max_rel, "gpu_us": us,
            "ok": ok, "source": source}


def _interpret(program, args) -> dict:
    """The interpreter's value of every top-level value of `program`."""
    env = dict(zip(program.inputs, args))
    env.update(program.consts)
    for e in program.eqns:
        xs = [x.array() if isinstance(x, Literal) else env[x] for x in e.inputs]
        env.update(zip(e.outputs, apply(e.prim, xs, e.params, [o.type for o in e.outputs])))
    return env


def _kernels(lw, times):
    """(steps of one top-level eqn, their GPU us, the eqn, its loops over those steps) per
    kernel, in dispatch order. A scan's steps (its moves and its body's
    kernels, lowering/loops.py) are one kernel: the body's values are not the program's."""
    owner = [st.eqn for st in lw.steps]
    for e in {st.eqn for st in lw.steps if st.eqn.prim.name == "scan"}:
        at = [i for i, st in enumerate(lw.steps) if st.eqn is e]
        for i in range(at[0], at[-1] + 1):
            owner[i] = e
    out = []
    for i, (st, us) in enumerate(zip(lw.steps, times)):
        if out and out[-1][2] is owner[i]:
            out[-1][0].append(st)
            if us is not None:
                out[-1][1] += us
        else:
            out.append([[st], us, owner[i], i])
    groups = []
    for steps, us, e, first in out:
        loops = [(a - first, b - first, n) for a, b, n in lw.loops
                 if first <= a and b <= first + len(steps)]
        groups.append((steps, us, e, loops))
    return groups


def _places(lw) -> dict:
    """Var -> (slot, element offset) for every value a buffer holds."""
    where = {}
    for k, slot in enumerate(lw.slots):
        for ref, _, _ in slot.values:
            if isinstance(ref, Var):
                where[ref] = (k, 0)
            elif isinstance(ref, Concat):   # C and its column sums, one after the other
                off = 0
                for v in ref:
                    where[v] = (k, off)
                    off += _size(v)
    return where


def _root_inputs(lw, e, where) -> list:
    """The values whose buffers eqn `e` reads (through reshape/save aliases)."""
    alias = {a.out: a.inputs[0] for a in lw.program.eqns if a.prim.name in ("reshape", "save")}
    out = []
    for x in e.inputs:
        while x in alias and x not in where:
            x = alias[x]
        if isinstance(x, Var):
            out.append(x)
    return out


def _padded(lw, where, v, value) -> np.ndarray:
    """The slot's contents with `value` at its place, in the slot buffer's dtype (bit copy:
    a scratch slot may hold values of other dtypes)."""
    slot, off = where[v]
    arr = np.zeros(lw.slots[slot].size, device_dtype(np_dtype(v.dtype)))
    arr[off:off + _size(v)] = np.asarray(value).reshape(-1)
    return arr.view(device_dtype(np_dtype(lw.slots[slot].dtype)))


def _read(bufs, where, v) -> np.ndarray:
    slot, off = where[v]
    raw = bufs[slot].read_staging().view(device_dtype(np_dtype(v.dtype)))
    got = raw[off:off + _size(v)].reshape(v.shape)
    return got.astype(bool) if v.dtype == "bool" else got


def _errors(got, want) -> tuple:
    """(max abs, max rel) error of `got` against the reference `want`."""
    if want.size == 0:
        return 0.0, 0.0
    if want.dtype.kind != "f":
        diff = np.abs(got.astype(np.int64) - want.astype(np.int64))
        return float(diff.max()), 0.0 if not diff.any() else float("inf")
    got, want = got.astype(np.float64), want.astype(np.float64)
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    diff = np.where(same, 0.0, np.abs(got - want))
    diff[np.isnan(diff)] = np.inf
    finite = np.abs(want[np.isfinite(want)])
    floor = max(0.01 * (finite.max() if finite.size else 0.0), 1e-6)
    return float(diff.max()), float((diff / (np.abs(np.nan_to_num(want)) + floor)).max())


def _source_of(e) -> str | None:
    """The user's lines a kernel computes (a fused kernel: its body's eqns), as file:l1,l2."""
    body = e.params["body"].eqns if e.prim is fused_p else (e,)
    lines: dict = {}
    for b in body:
        if b.source:
            path, _, line = b.source.rpartition(":")
            lines.setdefault(path, {})[line] = None
    return "; ".join(f"{p}:{','.join(ls)}" for p, ls in lines.items()) or None


def main(argv: list[str]) -> int:
    """`vkgrad check FILE.py:FN --args 'f32[4,5], i32[4]' [--seed S] [--int-high N]`."""
    ap = argparse.ArgumentParser(
        prog="vkgrad check", description="Run a function's Vulkan kernels one by one against "
        "the numpy interpreter on random arguments and print the per-kernel agreement table "
        "(vg.check_kernels). Floats are standard normal, ints uniform in [0, --int-high), "
        "bools fair coins.")
    ap.add_argument("target", help="FILE.py:FUNCTION")
    ap.add_argument("--args", required=True,
                    help="argument types, as for `vkgrad dump`: 'f32[4,5], i32[4]', pytrees "
                         "as {name: f32[3]} / [..] / (..)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--int-high", type=int, default=2, help="ints are drawn from [0, N)")
    opts = ap.parse_args(argv)
    fun = load_function(opts.target)
    specs = parse_args_spec(opts.args)
    check_arity(fun, specs, opts.target)
    rng = np.random.default_rng(opts.seed)

    def draw(s):
        dt = np_dtype(s.dtype)
        if dt.kind == "f":
            return rng.standard_normal(s.shape).astype(dt)
        if dt.kind == "b":
            return rng.random(s.shape) < 0.5
        return rng.integers(0, opts.int_high, s.shape).astype(dt)
    table = check_kernels(fun, *tree_map(draw, specs, is_leaf=lambda s: isinstance(s, ShapeDtype)))
    print(table)
    return 0 if not table.flagged else 1
