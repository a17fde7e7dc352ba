"""GLSL for a fused group: one thread per output element, every operand read by index arithmetic.

A `fused` eqn's body holds elementwise eqns (each primitive's expression template is
`glsl_elementwise[prim]`, vkgrad.ir.core's table, registered beside the primitive) and layout eqns (broadcast_to,
reshape, transpose, slice, pad, concatenate, iota), whose rules are in `index_rules` below: each
says where an element of its output comes from in its operand. So `x.T + b` is one kernel that
reads `x` transposed and `b` broadcast; nothing is materialized but the outputs.

Shapes are static, so sizes and strides are compile-time constants in the source (the driver
folds the index arithmetic); a distinct shape is a distinct shader, compiled once and cached.
"""

from __future__ import annotations

import math

import numpy as np

from vkgrad import primitives as P
from vkgrad.ir.core import Literal, Program, Var, glsl_elementwise
from vkgrad.lowering.launch import Launch, cdiv, grid

WORKGROUP = 256

GLSL_TYPE = {"f32": "float", "i32": "int", "bool": "bool"}
STORAGE_TYPE = {"f32": "float", "i32": "int", "bool": "uint"}   # bool lives as uint32


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


class FusedSource:
    """Writes one fused kernel's GLSL source, line by line; see `generate`."""

    def __init__(self, body: Program):
        self.body = body
        self.producer = {o: e for e in body.eqns for o in e.outputs}
        self.binding = {v: i for i, v in enumerate(body.inputs)}
        self.lines: list[str] = []
        self.memo: dict = {}
        self.identity_reads: dict[Var, bool] = {v: True for v in body.inputs}

    def tmp(self, gtype: str, expr: str) -> str:
        name = f"t{len(self.memo) + len(self.lines)}"
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
        key = (x, idx.key())
        if key in self.memo:
            return self.memo[key]
        if x in self.binding:
            flat = self.flat_of(idx)
            if flat != "gid" or x.shape != self.body.outputs[0].shape:
                self.identity_reads[x] = False
            load = f"in{self.binding[x]}[{flat}]"
            expr = f"({load} != 0u)" if x.dtype == "bool" else load
        else:
            e = self.producer[x]
            if e.prim in index_rules:
                expr = index_rules[e.prim](self, e, idx)
            else:
                args = [self.value(a, broadcast_index(idx, a.shape)) for a in e.inputs]
                expr = glsl_elementwise[e.prim].format(*args, T=GLSL_TYPE[x.dtype])
        name = self.tmp(GLSL_TYPE[x.dtype], expr)
        self.memo[key] = name
        return name


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
            conds.append(f"({t} % {it + 1} == 0)")
            t = f"({t} / {it + 1})"
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

def generate(body: Program, name: str = "fused") -> tuple[Launch, dict]:
    """The Launch of one fused kernel (bindings: body inputs, then body outputs), and for each
    input whether every read of it is the thread's own element (then an output may overwrite
    it in place)."""
    out_shape = body.outputs[0].shape
    n = math.prod(out_shape)
    k = FusedSource(body)
    it = Index(out_shape, [("0" if d == 1 else
                            (f"gid / {s}" if i == 0 else f"(gid / {s}) % {d}"))
                           for i, (d, s) in enumerate(zip(out_shape, strides(out_shape)))], "gid")
    # name the index of each dimension once
    dims = []
    for i, d in enumerate(it.dims):
        if d == "0":
            dims.append("0")
        else:
            k.lines.append(f"    int i{i} = {d};")
            dims.append(f"i{i}")
    it = Index(out_shape, dims, "gid")
    stores = []
    for j, o in enumerate(body.outputs):
        v = k.value(o, it)
        stores.append(f"    out{j}[gid] = {'uint(' + v + ')' if o.dtype == 'bool' else v};")

    gx, gy, _ = grid(max(1, cdiv(n, WORKGROUP)))
    decl = []
    for i, v in enumerate(body.inputs):
        decl.append(f"layout(std430, set = 0, binding = {i}) readonly buffer In{i} "
                    f"{{ {STORAGE_TYPE[v.dtype]} in{i}[]; }};")
    for j, o in enumerate(body.outputs):
        decl.append(f"layout(std430, set = 0, binding = {len(body.inputs) + j}) writeonly "
                    f"buffer Out{j} {{ {STORAGE_TYPE[o.dtype]} out{j}[]; }};")
    src = "\n".join([
        "#version 450",
        f"// {name}: {len(body.eqns)} eqns, {', '.join(str(o.type) for o in body.outputs)}",
        f"layout(local_size_x = {WORKGROUP}) in;",
        *decl,
        "void main() {",
        f"    int gid = int(gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * {gx * WORKGROUP}u);",
        f"    if (gid >= {n}) return;",
        *k.lines,
        *stores,
        "}",
        "",
    ])
    launch = Launch(name=name, shader=src, bindings=len(body.inputs) + len(body.outputs),
                    groups=(gx, gy, 1))
    return launch, k.identity_reads
