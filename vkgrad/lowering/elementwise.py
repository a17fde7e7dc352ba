"""GLSL for a fused group: one thread per output element, every operand read by index arithmetic.

A `fused` eqn's body holds elementwise eqns (each primitive's expression template is
`code_for_op[prim]`, the table of vkgrad/lowering/glsl.py) and layout eqns (broadcast_to,
reshape, transpose, slice, pad, concatenate, iota), whose rules are in `index_rules` below: each
says where an element of its output comes from in its operand. So `x.T + b` is one kernel that
reads `x` transposed and `b` broadcast; nothing is materialized but the outputs.

Shapes are static, so sizes and strides are compile-time constants in the source (the driver
folds the index arithmetic); a distinct shape is a distinct shader, compiled once and cached.

16-bit floats (f16, bf16) live two to a 32-bit word (kernels_glsl/half.glsl): a read unpacks
its element and every value computes in f32; a 16-bit intermediate keeps its f32 value inside
the kernel (excess precision, XLA's GPU default) and is rounded to its dtype at an explicit
convert and where it is stored (docs/kernels.md, "16-bit storage", says why; the interpreter
rounds every op, so the two agree to a few 16-bit ulps). Two threads must not write halves of
one word, so a kernel with a 16-bit output gives each thread two neighbouring elements
(`PAIR`): it computes both, stores its 32-bit outputs one by one and each 16-bit output as one
packed word.
"""

from __future__ import annotations

import math

import numpy as np

from vkgrad import primitives as P
from vkgrad.dtypes import is_half
from vkgrad.ir.core import Eqn, Literal, Program, Var
from vkgrad.lowering import glsl
from vkgrad.target import target_of
from vkgrad.lowering.launch import Launch, cdiv, grid

WORKGROUP = 256

GLSL_TYPE = {"f32": "float", "i32": "int", "bool": "bool", "f16": "float", "bf16": "float"}
# bool lives as uint32; the 16-bit floats two to a uint32 (kernels_glsl/half.glsl)
STORAGE_TYPE = {"f32": "float", "i32": "int", "bool": "uint", "f16": "uint", "bf16": "uint"}
PAIR = 2     # elements per thread in a kernel that stores 16-bit values


def supports(dtype: str) -> bool:
    return dtype in GLSL_TYPE


def glsl_literal(value, dtype: str) -> str:
    if dtype == "bool":
        return "true" if value else "false"
    if dtype == "i32":
        return f"({int(value)})" if value < 0 else str(int(value))
    f = np.float32(value)
    if np.isfinite(f):
        text = repr(float(f))   # shortest decimal that reads back as this float32 ...
        if np.float32(float(text)) == f:     # ... through the same double -> float rounding
            return f"({text})" if f < 0 else text
    return f"uintBitsToFloat(0x{int(f.view(np.uint32)):08x}u)"   # inf, nan, or inexact


def strides(shape) -> list[int]:
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return out[::-1]


class Index:
    """A multi-index into a value of `shape`: a GLSL int expression per dimension, and the flat
    row-major offset when it is known without recomputing it (the thread's own element)."""
    __slots__ = ("shape", "dims", "flat")

    def __init__(self, shape, dims, flat=None):
        self.shape, self.dims, self.flat = tuple(shape), tuple(dims), flat

    def key(self):
        return self.dims if self.flat is None else ("flat", self.flat, self.shape)


class KernelTooLarge(ValueError):
    """A generated kernel past its line budget (MAX_TEMPS)."""


class FusedSource:
    """Writes the GLSL that computes values of a body element by element, line by line.

    `arrays` names the GLSL array each body input is read from (`in0`, ... in a generated
    kernel); `own` gives values known at the thread's own element (a kernel's result in a store
    epilogue, lowering/hooks.py), which may be read only there: `own_size` is the size of the
    element space whose flat index is `gid`. `identity_reads[v]` ends up True when every read of
    input v was the thread's own element (then a result may overwrite v in place)."""

    def __init__(self, body: Program, arrays: dict | None = None, own: dict | None = None,
                 own_size: int | None = None, tmp_prefix: str = "t", budget: int | None = None):
        self.body = body
        self.budget = budget      # the most lines before KernelTooLarge (None: no bound)
        self.producer = {o: e for e in body.eqns for o in e.outputs}
        self.arrays = arrays if arrays is not None else \
            {v: f"in{i}" for i, v in enumerate(body.inputs)}
        self.own = own or {}
        self.own_size = own_size if own_size is not None else \
            math.prod(body.outputs[0].shape) if body.outputs else 1
        self.prefix = tmp_prefix
        self.lines: list[str] = []
        self.memo: dict = {}
        self.identity_reads: dict[Var, bool] = {v: True for v in self.arrays}
        self.reads: set = set()

    def tmp(self, gtype: str, expr: str) -> str:
        if self.budget is not None and len(self.lines) > self.budget:
            raise KernelTooLarge(f"over {self.budget} lines")
        name = f"{self.prefix}{len(self.memo) + len(self.lines)}"
        self.lines.append(f"    {gtype} {name} = {expr};")
        return name

    def flat_of(self, idx: Index) -> str:
        if idx.flat is not None:
            return idx.flat
        terms = [f"{d} * {s}" if s != 1 else d
                 for d, s, n in zip(idx.dims, strides(idx.shape), idx.shape) if n != 1 and d != "0"]
        return " + ".join(terms) or "0"

    def value(self, x, idx: Index) -> str:
        """A GLSL expression (identifier or literal) for element `idx` of `x`."""
        if isinstance(x, Literal):
            return glsl_literal(x.value, x.dtype)
        if x in self.own:
            if self.flat_of(idx) != "gid" or math.prod(x.shape) != self.own_size:
                raise ValueError(f"a fused epilogue reads the kernel's result {x.type} at another "
                                 "element than the one being stored")
            return self.own[x]
        key = (x, idx.key())
        if key in self.memo:
            return self.memo[key]
        if x in self.arrays:
            flat = self.flat_of(idx)
            self.reads.add(x)
            if flat != "gid" or math.prod(x.shape) != self.own_size:
                self.identity_reads[x] = False
            expr = self.load(x, flat)
        else:
            e = self.producer.get(x)
            if e is None or (e.prim not in index_rules and not e.prim.elementwise):
                raise ValueError(f"{x.type} ({e.prim.name if e else 'not in this body'}) cannot be "
                                 "computed element by element here")
            if e.prim in index_rules:
                expr = index_rules[e.prim](self, e, idx)
            else:
                self._operands_first(e, idx)
                args = [self.value(a, broadcast_index(idx, a.shape)) for a in e.inputs]
                expr = glsl.expression(e, args, GLSL_TYPE[x.dtype], "fused kernel GLSL")
                if is_half(x.dtype) and e.prim is P.convert_p:   # an explicit cast rounds
                    expr = f"vkg_round_{x.dtype}({expr})"
        name = self.tmp(GLSL_TYPE[x.dtype], expr)
        self.memo[key] = name
        return name

    def load(self, x: Var, flat: str) -> str:
        """Element `flat` of body input x, from its array."""
        array = self.arrays[x]
        if is_half(x.dtype):
            if not flat.isidentifier() and not flat.isdigit():
                flat = self.tmp("int", flat)
            return f"vkg_{x.dtype}_at({array}[{flat} >> 1], {flat})"
        load = f"{array}[{flat}]"
        return f"({load} != 0u)" if x.dtype == "bool" else load

    def _operands_first(self, e: Eqn, idx: Index) -> None:
        """Compute e's operands, and down a chain of elementwise producers theirs, bottom-up
        with an explicit stack, in the order value()'s recursion takes them (so the source is
        the same): a body of 3,000 chained ops otherwise recursed past Python's 1,000 frames."""
        todo = [(a, broadcast_index(idx, a.shape), False) for a in reversed(e.inputs)]
        while todo:
            x, i, ready = todo.pop()
            if isinstance(x, Literal) or (x, i.key()) in self.memo:
                continue
            p = None if x in self.own or x in self.arrays else self.producer.get(x)
            if ready or p is None or p.prim in index_rules or p.prim not in glsl.code_for_op:
                self.value(x, i)   # its operands are computed: one level deep
                continue
            todo.append((x, i, True))
            todo.extend((a, broadcast_index(i, a.shape), False) for a in reversed(p.inputs))

    def own_index(self, shape, prefix: str = "i") -> Index:
        """The thread's own element of a value of `shape` (flat index `gid`), naming the index of
        each dimension once."""
        dims = []
        for i, (d, s) in enumerate(zip(shape, strides(shape))):
            if d == 1:
                dims.append("0")
                continue
            name = f"{prefix}{i}"
            expr = f"gid / {s}" if i == 0 else f"(gid / {s}) % {d}"
            self.lines.append(f"    int {name} = {expr};")
            dims.append(name)
        return Index(shape, dims, "gid")

    def store_expr(self, v: str, dtype: str) -> str:
        return f"uint({v})" if dtype == "bool" else v


def broadcast_index(idx: Index, shape) -> Index:
    """Index of an operand of `shape` broadcast (numpy-style, from the right) to idx.shape."""
    shape = tuple(shape)
    if shape == idx.shape:
        return idx
    lead = len(idx.shape) - len(shape)
    return Index(shape, [("0" if n == 1 else idx.dims[lead + j]) for j, n in enumerate(shape)])


# ------------------------------------------------------------------ layout eqns: where from

def _broadcast_to(k, e, idx):
    return k.value(e.inputs[0], broadcast_index(idx, e.inputs[0].shape))


def _reshape(k, e, idx):
    x = e.inputs[0]
    flat = k.flat_of(idx)
    if flat not in ("gid", "0") and not flat.isidentifier():
        flat = k.tmp("int", flat)
    dims = [("0" if n == 1 else (f"{flat} / {s}" if i == 0 else f"({flat} / {s}) % {n}"))
            for i, (n, s) in enumerate(zip(x.shape, strides(x.shape)))]
    return k.value(x, Index(x.shape, dims, flat))


def _transpose(k, e, idx):
    x, perm = e.inputs[0], e.params["perm"]
    dims = [None] * len(perm)
    for i, p in enumerate(perm):
        dims[p] = idx.dims[i]
    return k.value(x, Index(x.shape, dims))


def _slice(k, e, idx):
    x, start, step = e.inputs[0], e.params["start"], e.params["step"]
    dims = [(f"{b} + {d} * {s}" if s != 1 else f"{b} + {d}") if b else
            (f"{d} * {s}" if s != 1 else d) for d, b, s in zip(idx.dims, start, step)]
    return k.value(x, Index(x.shape, [f"({d})" for d in dims]))


def _pad(k, e, idx):
    """Inside the operand's (strided) footprint read it, else zero. Reads are clamped into range
    so no thread reads out of bounds, then the result is selected."""
    x = e.inputs[0]
    conds, dims = [], []
    for d, lo, n, it in zip(idx.dims, e.params["low"], x.shape, e.params["interior"]):
        t = f"({d} - {lo})" if lo else d
        if it:
            # t >= 0 first: GLSL leaves % of a negative undefined, and -1 / 3 is 0, so where
            # -1 % 3 came out 0 the element before the footprint read x[0]. A transposed
            # convolution (its phases interleaved by interior padding) was wrong on the H200
            # and right on lavapipe (C's %); this is the suspected cause, not yet re-measured.
            conds.append(f"({t} >= 0 && {t} % {it + 1} == 0 && {t} / {it + 1} < {n})")
            dims.append(f"clamp({t} / {it + 1}, 0, {n - 1})")
            continue
        conds.append(f"({t} >= 0 && {t} < {n})")
        dims.append(f"clamp({t}, 0, {n - 1})")
    inside = k.value(x, Index(x.shape, dims))
    outside = glsl_literal(0, x.dtype)
    return f"(({' && '.join(conds) or 'true'}) ? {inside} : {outside})"


def _concatenate(k, e, idx):
    axis = e.params["axis"]
    d = idx.dims[axis]
    parts, offset = [], 0
    for x in e.inputs:
        n = x.shape[axis]
        if n == 0:   # contributes nothing (and clamp(i, 0, -1) does not compile; test_fuzz.py)
            continue
        dims = list(idx.dims)
        dims[axis] = f"clamp({d} - {offset}, 0, {n - 1})"
        parts.append((offset + n, k.value(x, Index(x.shape, dims))))
        offset += n
    if not parts:    # all empty: so is the result (no thread reads it)
        return glsl_literal(0, e.out.dtype)
    expr = parts[-1][1]
    for end, v in reversed(parts[:-1]):
        expr = f"({d} < {end} ? {v} : {expr})"
    return expr


def _iota(k, e, idx):
    return f"{GLSL_TYPE[e.out.dtype]}({idx.dims[e.params['dimension']]})"


index_rules = {
    P.broadcast_to_p: _broadcast_to,
    P.reshape_p: _reshape,
    P.transpose_p: _transpose,
    P.slice_p: _slice,
    P.pad_p: _pad,
    P.concatenate_p: _concatenate,
    P.iota_p: _iota,
}


# ------------------------------------------------------------------ the kernel

# Storage buffers one kernel may bind: the Target's maxPerStageDescriptorStorageBuffers (32 on
# lavapipe and where the device is not known; NVIDIA and AMD allow far more). Binding more than
# the device allows crashed lavapipe, so a fused kernel with more is split.
def max_bindings(target) -> int:
    return target_of(target).max_storage_buffers


class _Cuts:
    """A body with some of its values written to memory (`leaves`: its inputs, then the values
    cut out of it): the cone of eqns and leaves each value needs, and sub-bodies."""

    def __init__(self, body: Program):
        self.body = body
        self.producer = {o: e for e in body.eqns for o in e.outputs}
        self.leaves = dict.fromkeys(body.inputs)        # values read from memory (ordered)
        self.order = {e: i for i, e in enumerate(body.eqns)}

    def cone(self, outputs):
        eqns, ins, stack = set(), set(), list(outputs)
        while stack:
            v = stack.pop()
            if v in self.leaves:
                ins.add(v)
            elif v in self.producer and self.producer[v] not in eqns:
                eqns.add(self.producer[v])
                stack += [x for x in self.producer[v].inputs if isinstance(x, Var)]
        return eqns, ins

    def sub(self, outputs) -> Program:
        eqns, ins = self.cone(outputs)
        return self.body.replace(inputs=tuple(v for v in self.leaves if v in ins),
                                 outputs=tuple(outputs),
                                 eqns=tuple(sorted(eqns, key=self.order.__getitem__)))

    def size(self, outputs) -> int:
        return len(self.cone(outputs)[1]) + len(outputs)

    def cut(self, v) -> Program:
        """v's own kernel; v is read from memory from now on."""
        part = self.sub([v])
        self.leaves[v] = None
        return part


def split_bindings(body: Program, cap: int) -> list[Program]:
    """`body` as sub-bodies, in dependency order, of at most `cap` bindings (inputs + outputs)
    each. An output whose element reads too many buffers (a sum of 40 reductions: a global
    gradient norm) first gets intermediates written to memory, each the widest sub-expression
    that fits; then whole segments (outputs of one shape: a parameter's update) stay together
    where they fit. Raises ValueError when one operation alone reads too many."""
    c = _Cuts(body)
    if c.size(list(body.outputs)) <= cap:
        return [body]
    narrowed = []
    for o in body.outputs:                     # 1. narrow the elements that read too much
        while o in c.producer and c.size([o]) > cap:
            fits = [v for e in c.cone([o])[0] for v in e.outputs if v is not o and
                    c.size([v]) <= cap]
            if not fits:
                raise ValueError(f"an element reads {c.size([o]) - 1} buffers; the device "
                                 f"allows {cap} per kernel")
            v = max(fits, key=lambda v: (c.size([v]), -c.order[c.producer[v]]))
            narrowed.append(c.cut(v))
    parts, outs = [], []                       # 2. group outputs, segment by segment
    for seg in segments_of(body):
        if outs and c.size(outs + seg) > cap:
            parts.append(outs)
            outs = []
        for o in seg:                          # a segment too large for one kernel is cut
            if outs and c.size(outs + [o]) > cap:
                parts.append(outs)
                outs = []
            outs.append(o)
    parts.append(outs)
    return narrowed + [c.sub(p) for p in parts]


# The most GLSL temporaries one generated kernel may have. A value read at several indices is
# computed once per index (FusedSource's memo is by value and index), so a chain that reads
# values at many indices, each of them computed from others read at many, grows with the
# product: vg.random.multinomial's three outcomes, before it kept each count in memory, made
# one kernel of 121,858 lines that lavapipe had not compiled after 10 minutes. The largest
# kernel of the LM steps is far below this.
MAX_TEMPS = 20000


def instantiations(body: Program, budget: int) -> tuple[dict, bool]:
    """How many times generate() computes each value of `body` (once per distinct index it is
    read at), over every segment, and whether that is all of them: counting stops past
    `budget` temporaries (the values a kernel that large repeats most are repeated in its
    first lines already)."""
    counts: dict = {}
    complete = True
    for seg in segments_of(body):
        k = FusedSource(body, own_size=math.prod(seg[0].shape), budget=budget)
        try:
            it = k.own_index(seg[0].shape)
            for o in seg:
                k.value(o, it)
        except KernelTooLarge:
            complete = False
        for v, _ in k.memo:
            counts[v] = counts.get(v, 0) + 1
        if not complete:
            break
    return counts, complete


def split_size(body: Program, limit: int = MAX_TEMPS) -> list[Program]:
    """`body` as sub-bodies, in dependency order, each generating at most about `limit`
    temporaries. While it is larger, the value whose repeated computation costs the most (the
    times it is computed x the eqns it needs) gets a kernel of its own, computed once an
    element and then read (and split the same way itself)."""
    c = _Cuts(body)
    parts = []
    counts, complete = instantiations(body, 2 * limit)
    while not complete or sum(counts.values()) > limit:
        outs = set(body.outputs)
        cost = {v: n * len(c.cone([v])[0]) for v, n in counts.items()
                if n > 1 and v in c.producer and v not in outs and v not in c.leaves}
        if not cost:
            break
        parts += split_size(c.cut(max(cost, key=cost.get)), limit)
        counts, complete = instantiations(c.sub(list(body.outputs)), 2 * limit)
    return parts + [c.sub(list(body.outputs))]


def _paired(lines: list, halves: list, slot: dict, size: int) -> list:
    """A segment's lines for thread t computing elements 2t and 2t + 1: the element's lines in
    a loop, each 16-bit output kept (h<j>[e]) and stored after it as one word."""
    out = [f"    float h{slot[o]}[{PAIR}] = float[{PAIR}](0.0, 0.0);" for o in halves]
    out.append(f"    for (int e = 0; e < {PAIR}; e++) {{")
    out.append(f"        int gid = {PAIR} * t + e;")
    if size % PAIR:
        out.append(f"        if (gid >= {size}) break;")
    out += ["    " + ln for ln in lines]
    out.append("    }")
    out += [f"    out{slot[o]}[t] = vkg_pack_{o.dtype}(h{slot[o]}[0], h{slot[o]}[1]);"
            for o in halves]
    return out


def segments_of(body: Program) -> list[list]:
    """The body's outputs grouped by shape, in order: one segment of a kernel's index space each
    (a horizontal fusion has several)."""
    segs: dict = {}
    for o in body.outputs:
        segs.setdefault(tuple(o.shape), []).append(o)
    return list(segs.values())


def buffer_declarations(body: Program) -> list[str]:
    """A generated kernel's bindings: the body's inputs `in<i>`, then its outputs `out<j>`."""
    decl = []
    for i, v in enumerate(body.inputs):
        decl.append(f"layout(std430, set = 0, binding = {i}) readonly buffer In{i} "
                    f"{{ {STORAGE_TYPE[v.dtype]} in{i}[]; }};")
    for j, o in enumerate(body.outputs):
        decl.append(f"layout(std430, set = 0, binding = {len(body.inputs) + j}) writeonly "
                    f"buffer Out{j} {{ {STORAGE_TYPE[o.dtype]} out{j}[]; }};")
    return decl


def generate(body: Program, name: str = "fused", budget: int | None = None) -> tuple[Launch, dict]:
    """The Launch of one fused kernel (bindings: body inputs, then body outputs), and for each
    input whether every read of it is the thread's own element (then an output may overwrite
    it in place).

    Outputs of one shape: one thread per element (per `PAIR` of elements where an output is
    16-bit). Outputs of several shapes (a horizontal fusion): one dispatch over the
    concatenated index space, each shape a segment of it. With a `budget`, KernelTooLarge past
    that many lines (lowering/lower.py then cuts the body: split_size)."""
    segments = segments_of(body)
    slot = {o: j for j, o in enumerate(body.outputs)}
    per = PAIR if any(is_half(o.dtype) for o in body.outputs) else 1
    sizes = [math.prod(seg[0].shape) for seg in segments]
    threads = [cdiv(size, per) for size in sizes]
    n = sum(threads)
    arrays = {v: f"in{i}" for i, v in enumerate(body.inputs)}
    blocks, identity, seen = [], {v: True for v in body.inputs}, {}
    offset = 0
    for seg, size, count in zip(segments, sizes, threads):
        k = FusedSource(body, arrays, own_size=size, budget=budget)
        it = k.own_index(seg[0].shape)
        stores = []
        for o in seg:
            v = k.value(o, it)
            stores.append(f"    h{slot[o]}[e] = {v};" if is_half(o.dtype) else
                          f"    out{slot[o]}[gid] = {k.store_expr(v, o.dtype)};")
        for v in k.reads:
            seen[v] = seen.get(v, 0) + 1
            identity[v] = identity[v] and k.identity_reads[v]
        lines = k.lines + stores
        if per > 1:
            lines = _paired(lines, [o for o in seg if is_half(o.dtype)], slot, size)
        blocks.append((offset, count, lines))
        offset += count
    for v, count in seen.items():   # read by two segments: another thread reads it too
        if count > 1:
            identity[v] = False
    # An output may overwrite an input only where its own value reads it (lowering/lower.py,
    # _inputs_of_outputs): an input read by one segment pairs only with that segment's outputs,
    # even where another segment has the same size.
    own = "t" if per > 1 else "gid"     # the thread's index: its pair, or its element

    gx, gy, _ = grid(max(1, cdiv(n, WORKGROUP)))
    decl = buffer_declarations(body)
    index = f"int(gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * {gx * WORKGROUP}u)"
    if len(blocks) == 1:
        main = [f"    int {own} = {index};", f"    if ({own} >= {n}) return;", *blocks[0][2]]
    else:
        main = [f"    int g = {index};", f"    if (g >= {n}) return;"]
        for offset, size, lines in blocks:
            main.append(f"    if (g < {offset + size}) {{   // segment [{offset}, {offset + size})")
            main.append(f"        int {own} = g - {offset};" if offset else f"        int {own} = g;")
            main += ["    " + ln for ln in lines]
            main += ["        return;", "    }"]
    shapes = ", ".join(str(o.type) for o in body.outputs)
    src = "\n".join([
        "#version 450",
        f"// {name}: {len(body.eqns)} eqns, {shapes}",
        glsl.PREAMBLE,
        f"layout(local_size_x = {WORKGROUP}) in;",
        *decl,
        *glsl.helpers(e.prim for e in body.eqns),
        "void main() {",
        *main,
        "}",
        "",
    ])
    launch = Launch(name=name, shader=src, bindings=len(body.inputs) + len(body.outputs),
                    groups=(gx, gy, 1))
    return launch, identity
