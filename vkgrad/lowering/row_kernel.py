"""GLSL for a `fused[kind=row]` eqn (lowering/fusion/rows.py makes them): the body's code
written into the row kernel's template (kernels_glsl/row.comp), one workgroup per row.

A row kernel's body works on one row shape F = L + (n,): its reductions are over F's last
axis (results of shape L), its other values are either *element* values (shape F, or any
shape broadcast into F: a weight of shape (n,), a scalar) or *row* values (shape L or
L + (1,): a mean, a variance, 1 / sqrt(var + eps)). The pass guarantees that every row
value is read only at the row being computed, so the code is written in two contexts:

  * the row context (`_RowValues`): a row value once per thread, in `main` between the
    reductions (a reduction's result is a variable there once its workgroup reduction ran);
  * an element context (`_ElementValues`, one per reduction and one for the outputs): the
    code inside a loop over the thread's NV elements of the row (element `e = base + c`),
    which asks the row context for any row value it reads.

Body inputs of shape F read at the thread's own element are loaded into registers once,
before the first reduction (`x<k>[i]`), so a row is read from memory once however many
reductions and outputs read it; other reads (a weight, a transposed operand) go to memory
where they are needed, as a loop kernel's do (lowering/elementwise.py's FusedSource, which
both contexts are).
"""

from __future__ import annotations

import dataclasses
import math
import re

from vkgrad import primitives as P
from vkgrad.dtypes import type_str
from vkgrad.ir.core import Program, Var
from vkgrad.lowering import glsl
from vkgrad.lowering.elementwise import (GLSL_TYPE, FusedSource, Index, buffer_declarations,
                                         strides)
from vkgrad.lowering.kernels import ROWS
from vkgrad.lowering.launch import Launch
from vkgrad.lowering.render import KERNELS_DIR

# reduction -> (workgroup reduction of reduce_common.glsl, identity, combine)
REDUCE = {
    P.reduce_sum_p: ("vkg_wg_sum", "0.0", "{0} + {1}"),
    P.reduce_max_p: ("vkg_wg_max", "VKG_NEG_INF", "vkg_max({0}, {1})"),
    P.reduce_min_p: ("vkg_wg_min", "VKG_POS_INF", "vkg_min({0}, {1})"),
}
MARKERS = ("// VKGRAD_ROW_BUFFERS", "// VKGRAD_ROW_HELPERS", "// VKGRAD_ROW_BODY")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")


def row_reduction(e) -> bool:
    """A reduction over the last axis alone."""
    return e.prim in REDUCE and e.inputs[0].ndim >= 1 and \
        tuple(e.params["axes"]) == (e.inputs[0].ndim - 1,)


def same_rows(s, shape) -> bool:
    """Is `s` the row shape F up to a reshape of its leading axes ([8192, 256] for
    [32, 256, 256]): the same elements at the same flat index, in the same rows?"""
    return len(s) >= 1 and s[-1] == shape[-1] and math.prod(s) == math.prod(shape)


def _aligned(x_shape, out_shape, shape) -> bool:
    """Does an operand of x_shape, broadcast into out_shape, read only its own row?"""
    padded = (1,) * (len(out_shape) - len(x_shape)) + tuple(x_shape)
    return padded == tuple(out_shape) or (tuple(out_shape) == tuple(shape) and
                                          padded == tuple(shape[:-1]) + (1,))


def row_values(body: Program, shape) -> set | None:
    """The body's row values for row shape F = `shape`: its reductions' results, the values of
    shape L + (1,) (n > 1), and those of shape L computed from a reduction; None where the
    body cannot run as a row kernel (a reduction over anything but F's last axis, a row value
    or a value computed from a reduction read at another row, an output of another shape).

    A row value is read only by elementwise eqns whose result has its shape (or, as
    L + (1,), broadcast along the row into F), by reshapes between L and L + (1,), by
    broadcast_to into F; a value computed from a reduction is F up to a reshape of its
    leading axes (`same_rows`) or a row value. Values of shape L computed from no reduction
    are not row values: with n == prod(L) they may be a weight of shape (n,)."""
    lead = tuple(shape[:-1])
    shapes = {lead, lead + (1,)}
    if any(not same_rows(o.shape, shape) and o.shape not in shapes for o in body.outputs):
        return None
    wide = lead + (1,) if shape[-1] != 1 else None
    rows = {v for v in body.inputs if v.shape == wide}
    tainted: set = set()            # computed from a reduction or a row value
    reductions = 0
    for e in body.eqns:
        if not e.prim.fusible:
            if not row_reduction(e) or e.inputs[0].shape != tuple(shape) or \
                    e.inputs[0].dtype != "f32":
                return None
            rows.add(e.out)
            tainted.add(e.out)
            reductions += 1
            continue
        rel = [x for x in e.inputs if isinstance(x, Var) and (x in rows or x in tainted)]
        out = e.out.shape
        if rel:
            if e.prim is P.reshape_p:
                x = rel[0].shape
                if not ((x in shapes and out in shapes) or
                        (same_rows(x, shape) and same_rows(out, shape))):
                    return None
            elif e.prim.elementwise or e.prim is P.broadcast_to_p:
                if not all(_aligned(x.shape, out, shape) for x in rel):
                    return None
            else:
                return None
            tainted.update(e.outputs)
        if out == wide or (out == lead and rel):
            rows.update(e.outputs)
    return rows if reductions else None


def row_shape(body: Program) -> tuple:
    """F: the shape the body's reductions reduce over its last axis."""
    return next(b for b in body.eqns if not b.prim.fusible).inputs[0].shape


def row_shapes(shape) -> set:
    """The shapes of a row's values for row shape F: L and L + (1,)."""
    lead = tuple(shape[:-1])
    return {lead, lead + (1,)}


def _digit(flat: str, d: int, s: int, first: bool) -> str:
    """The index along an axis of size d and stride s of the element at `flat`."""
    q = flat if s == 1 else f"{flat} / {s}"
    return q if first else f"({q}) % {d}" if s != 1 else f"{q} % {d}"


class _RowValues(FusedSource):
    """Row values, once per thread, written straight into `main`'s lines."""

    def __init__(self, body, arrays, shape, lines):
        lead = tuple(shape[:-1])
        super().__init__(body, arrays, own_size=math.prod(lead), tmp_prefix="r")
        self.lines = lines
        self.reduced: dict = {}
        self.names = {"row", "c", "e"}     # what an index before the row's loop may use
        self.dims = []
        for i, (d, s) in enumerate(zip(lead, strides(lead))):
            if d == 1:
                self.dims.append("0")
                continue
            if len(lead) == 1:
                self.dims.append("row")
                continue
            lines.append(f"    int row{i} = {_digit('row', d, s, i == 0)};")
            self.dims.append(f"row{i}")
            self.names.add(f"row{i}")
        self.declared = len(lines)          # the row's indices: before anything reads them

    def index(self, shape) -> Index:
        return Index(shape, self.dims + ["0"] * (len(shape) - len(self.dims)), "row")

    def value(self, x, idx):
        if isinstance(x, Var) and x in self.reduced:
            return self.reduced[x]
        return super().value(x, idx)


class _ElementValues(FusedSource):
    """Element values at the thread's element `e` of the row (inside the loop over its NV
    elements); row values come from the row context, own-element reads of row-shaped inputs
    from the registers loaded first."""

    def __init__(self, body, arrays, shape, row, registers, prefix, rows):
        super().__init__(body, arrays, own_size=math.prod(shape), tmp_prefix=prefix)
        self.shape, self.row, self.registers, self.rows = tuple(shape), row, registers, rows

    def index(self, shape=None) -> Index:
        """The thread's element `e` of a value of the row shape, or of a reshape of it that
        keeps the rows (the same flat index: column c of row `row`)."""
        if shape is None or tuple(shape) == self.shape:
            return Index(self.shape, self.row.dims + ["c"], "e")
        lead = tuple(shape[:-1])
        return Index(shape, [_digit("row", d, s, i == 0)
                             for i, (d, s) in enumerate(zip(lead, strides(lead)))] + ["c"], "e")

    def value(self, x, idx):
        if isinstance(x, Var) and x in self.rows:
            return self.row.value(x, self.row.index(x.shape))
        p = self.producer.get(x)
        if idx.flat == "e" and p is not None and p.prim is P.reshape_p and \
                same_rows(p.inputs[0].shape, self.shape):   # the same element, by row and column
            return self.value(p.inputs[0], self.index(p.inputs[0].shape))
        return super().value(x, idx)

    def load(self, x, flat):
        """A read at an index of the thread's element alone (its row and column: the row
        itself, a weight, a positional table) comes from a register loaded once; others
        (at an index computed in the loop) from memory."""
        flat = "e" if flat == "e" or (same_rows(x.shape, self.shape) and flat == "base + c") \
            else flat
        if set(_IDENTIFIER.findall(flat)) <= self.row.names:
            return self.registers.setdefault((x, flat), f"x{len(self.registers)}") + "[i]"
        return super().load(x, flat)


def _loop(lines: list) -> list:
    """`lines` for each of the thread's elements of the row (columns t, t + WG, ...)."""
    return ["    [[unroll]] for (int i = 0; i < NV; ++i) {",
            "        int c = t + i * int(VKG_WG);",
            "        if (c < N) {",
            "            int e = base + c;",
            *("        " + ln for ln in lines),
            "        }",
            "    }"]


def generate_body(body: Program) -> str:
    """The code of `main` after `base` for a row kernel's body: the registers loaded, the
    reductions, the outputs stored."""
    shape = row_shape(body)
    arrays = {v: f"in{i}" for i, v in enumerate(body.inputs)}
    slot = {o: j for j, o in enumerate(body.outputs)}
    lines: list = []
    row = _RowValues(body, arrays, shape, lines)
    registers: dict = {}
    rows = row_values(body, shape)
    if rows is None:
        raise ValueError(f"this body is not a row kernel over rows of {shape}")
    reductions = [b for b in body.eqns if not b.prim.fusible]
    for k, r in enumerate(reductions):
        fn, ident, combine = REDUCE[r.prim]
        el = _ElementValues(body, arrays, shape, row, registers, f"e{k}_", rows)
        v = el.value(r.inputs[0], el.index())
        lines.append(f"    // reduction {k}: {r.prim.name} over the row")
        lines.append(f"    float acc{k} = {ident};")
        lines += _loop(el.lines + [f"    acc{k} = {combine.format(f'acc{k}', v)};"])
        lines.append(f"    float red{k} = {fn}(acc{k});")
        row.reduced[r.out] = f"red{k}"
    elements = [o for o in body.outputs if o.shape not in row_shapes(shape)]
    lines.append("    // outputs")
    if elements:
        el = _ElementValues(body, arrays, shape, row, registers, "o_", rows)
        stores = [f"    out{slot[o]}[e] = {el.store_expr(el.value(o, el.index(o.shape)), o.dtype)};"
                  for o in elements]
        lines += _loop(el.lines + stores)
    for o in body.outputs:
        if o not in elements:
            v = row.value(o, row.index(o.shape))
            lines.append(f"    if (t == 0) out{slot[o]}[row] = {row.store_expr(v, o.dtype)};")
    loads = [f"    {GLSL_TYPE[x.dtype]} {name}[NV];" for (x, _), name in registers.items()]
    if registers:
        src = FusedSource(body, arrays)
        loads += ["    // the row's elements (and what else the thread reads at them), loaded once",
                  *_loop([f"    {name}[i] = {src.load(x, flat)};"
                          for (x, flat), name in registers.items()])]
    return "\n".join(lines[:row.declared] + loads + lines[row.declared:])


def launch(e, target, name: str) -> Launch:
    """The launch of row-kernel eqn `e`: the contract's plan (kernels.py:plan_rows) with the
    body's code in the template. Bindings: the body's inputs, then its outputs."""
    plan, _ = ROWS.plan(e, target)
    (template, _), = plan.steps
    body = e.params["body"]
    code = generate_body(body)
    helpers = "\n".join(glsl.helpers(b.prim for b in body.eqns))
    src = (KERNELS_DIR / template.shader).read_text()
    shapes = ", ".join(str(o.type) for o in body.outputs)
    src = src.replace("#version 450", f"#version 450\n// {name}: a row kernel of {len(body.eqns)} "
                      f"eqns over {type_str(row_shape(body), 'f32')} rows, writing {shapes}", 1)
    for marker, text in zip(MARKERS, ("\n".join(buffer_declarations(body)), helpers, code)):
        src = src.replace(marker, text, 1)
    return dataclasses.replace(template, name=name, shader=src)
