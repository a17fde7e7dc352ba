"""Fusion into hand-written kernels: the GLSL a kernel includes to load computed operands and to
store through an epilogue (vkgrad/kernels_glsl/fusion.glsl says what the kernels expect).

A fused kernel eqn (`fused[kind=input|output|multi_output]`, vkgrad/passes/) has a body with one
hand-written kernel eqn (the *anchor*; a matmul and the column sum of its B operand for
multi_output) and elementwise/layout eqns around it:
  * a *prologue*: an anchor operand computed inside the body from the body's inputs. The kernel
    calls `VKG_LOAD_BN(i)` for element i of the operand it binds at N, which computes it by
    index arithmetic (lowering/elementwise.py), so the operand is never written to memory;
  * an *epilogue*: body outputs computed from an anchor result at the same element. The kernel
    calls `VKG_STORE_BN(i, v)` with result element i; the hook computes the epilogue outputs
    at element i and writes them (and the result itself when the body returns it).

`HookWriter` writes that GLSL for one launch of the kernel: the declarations of the extra
buffers (numbered after the kernel's own bindings), one function per hooked binding, and the
defines that switch the kernel's accesses over to them. `splice(shader_file, hooks)` inserts it
at the kernel's `// VKGRAD_FUSION_HOOKS` line. The shader variants stay generated: the
hand-written file is the same, only the hooks differ.
"""

from __future__ import annotations

import math

from vkgrad.dtypes import is_half
from vkgrad.ir.core import Program, Var
from vkgrad.lowering import glsl
from vkgrad.lowering.elementwise import GLSL_TYPE, STORAGE_TYPE, FusedSource

MARKER = "// VKGRAD_FUSION_HOOKS"
HALF_STORES = "#extension GL_EXT_shader_16bit_storage : require"


class HookWriter:
    """The generated GLSL of one launch. `extra` lists the values bound after the kernel's own
    bindings (inputs the hooks read, then outputs the epilogue writes), in binding order."""

    def __init__(self, body: Program, base_binding: int):
        self.body = body
        self.base = base_binding
        self.extra: list[Var] = []
        self.names: dict[Var, str] = {}
        self.decls: list[str] = []
        self.funcs: list[str] = []
        self.hooked: list[int] = []
        self.identity: dict[Var, bool] = {}   # input -> read only at the stored element
        self.loaded: set = set()               # inputs read by a load hook (anywhere)
        self.written: list[Var] = []

    def __bool__(self) -> bool:
        return bool(self.hooked)

    def _bind(self, v: Var, out: bool) -> str:
        if v in self.names:
            return self.names[v]
        binding = self.base + len(self.extra)
        name = f"vkg_{'out' if out else 'in'}{len(self.extra)}"
        access = "writeonly" if out else "readonly"
        storage = STORAGE_TYPE[v.dtype]
        if out and is_half(v.dtype):
            # a 16-bit result element by element: 16-bit stores (GL_EXT_shader_16bit_storage;
            # the epilogue fusion takes one only where the Target has 16-bit storage), never
            # two threads' halves of one word
            storage = "uint16_t"
            if HALF_STORES not in self.decls:
                self.decls.insert(0, HALF_STORES)
        self.decls.append(f"layout(std430, set = 0, binding = {binding}) {access} buffer "
                          f"Vkg{binding} {{ {storage} {name}[]; }};")
        self.extra.append(v)
        self.names[v] = name
        if out:
            self.written.append(v)
        return name

    def _arrays(self) -> dict:
        return {v: self._bind(v, False) for v in self.body.inputs}

    def _absorb(self, k: FusedSource, load: bool) -> None:
        for v in k.reads:
            self._bind(v, False)
            if load:
                self.loaded.add(v)
            self.identity[v] = self.identity.get(v, True) and k.identity_reads[v] and not load

    def load(self, binding: int, value: Var) -> None:
        """VKG_LOAD_B{binding}(i): element i (flat) of `value`, computed from the body's inputs."""
        k = FusedSource(self.body, _LazyArrays(self), own_size=math.prod(value.shape))
        it = k.own_index(value.shape)
        v = k.value(value, it)
        gtype = GLSL_TYPE[value.dtype]
        fn = f"vkg_load_b{binding}"
        self.funcs.append("\n".join([f"{gtype} {fn}(uint e) {{", "    int gid = int(e);", *k.lines,
                                     f"    return {v};", "}"]))
        self.funcs.append(f"#define VKG_LOAD_B{binding}(i) {fn}(i)")
        self._absorb(k, load=True)
        self.hooked.append(binding)

    def load_many(self, binding: int, values) -> None:
        """VKG_LOADN_B{binding}(i, v): element i of each of `values` (one shape) into v[0..]:
        the operands of a multi-output reduction, computed together (shared loads and
        subexpressions)."""
        k = FusedSource(self.body, _LazyArrays(self), own_size=math.prod(values[0].shape))
        it = k.own_index(values[0].shape)
        outs = [k.value(v, it) for v in values]
        fn = f"vkg_loadn_b{binding}"
        self.funcs.append("\n".join([f"void {fn}(uint e, out float v[{len(values)}]) {{",
                                     "    int gid = int(e);", *k.lines,
                                     *(f"    v[{o}] = {x};" for o, x in enumerate(outs)), "}"]))
        self.funcs.append(f"#define VKG_LOADN_B{binding}(i, v) {fn}(i, v)")
        self._absorb(k, load=True)
        self.hooked.append(binding)

    def load_each(self, binding: int, values) -> None:
        """VKG_LOADM_B{binding}(m, i): element i (flat) of values[m], each value in its own
        index space (the members of a horizontal group: any shapes); VKG_LOADM4_B{binding}(m,
        i, s, v0, v1, v2, v3): elements i, i + s, i + 2s, i + 3s of values[m]."""
        fn = f"vkg_loadm_b{binding}"
        for n, value in enumerate(values):
            k = FusedSource(self.body, _LazyArrays(self), own_size=math.prod(value.shape))
            v = k.value(value, k.own_index(value.shape))
            self.funcs.append("\n".join([f"float {fn}_{n}(uint e) {{", "    int gid = int(e);",
                                         *k.lines, f"    return {v};", "}"]))
            self._absorb(k, load=True)
        # m is the same in the whole workgroup: a switch is one jump per call where a chain of
        # ifs compares against every member; the four loads of a call have no branch between
        # them, so they are in flight together
        one = [f"    case {n}u: return {fn}_{n}(e);" for n in range(len(values))]
        four = [f"    case {n}u: v0 = {fn}_{n}(e); v1 = {fn}_{n}(e + s); "
                f"v2 = {fn}_{n}(e + 2u * s); v3 = {fn}_{n}(e + 3u * s); return;"
                for n in range(len(values))]
        self.funcs += [
            "\n".join([f"float {fn}(uint m, uint e) {{", "    switch (m) {", *one, "    }",
                       "    return 0.0;", "}"]),
            "\n".join([f"void {fn}x4(uint m, uint e, uint s, out float v0, out float v1, "
                       "out float v2, out float v3) {", "    v0 = v1 = v2 = v3 = 0.0;",
                       "    switch (m) {", *four, "    }", "}"]),
            f"#define VKG_LOADM_B{binding}(m, i) {fn}(m, i)",
            f"#define VKG_LOADM4_B{binding}(m, i, s, v0, v1, v2, v3) {fn}x4(m, i, s, v0, v1, v2, v3)"]
        self.hooked.append(binding)

    def store_many(self, binding: int, results, outputs) -> None:
        """VKG_STOREN_B{binding}(o, i, v): element i of result o (of a multi-output reduction),
        and its `outputs[o]` (the result itself and its epilogue's outputs)."""
        fn = f"vkg_storen_b{binding}"
        lines = [f"void {fn}(uint o, uint e, float v) {{", "    int gid = int(e);"]
        for n, (res, outs) in enumerate(zip(results, outputs)):
            lines += [f"    if (o == {n}u) {{", *("    " + ln for ln in self._epilogue(n, res, outs)),
                      "        return;", "    }"]
        lines.append("}")
        self.funcs.append("\n".join(lines))
        self.funcs.append(f"#define VKG_STOREN_B{binding}(o, i, v) {fn}(o, i, v)")
        self.hooked.append(binding)

    def store(self, binding: int, parts) -> None:
        """VKG_STORE_B{binding}(i, v): the kernel stores element i of its result, v. `parts` is
        [(result Var, offset, [outputs])]: element i belongs to the part with offset <= i <
        offset + size of its result (several parts: one kernel result holds several values, a
        matmul's C and its column sums), and each listed output (the result itself, or an
        epilogue output of the same size) is written at i - offset."""
        fn = f"vkg_store_b{binding}"
        lines = [f"void {fn}(uint e, float v) {{"]
        for n, (res, offset, outs) in enumerate(parts):
            size = math.prod(res.shape)
            body = ["    int gid = int(e)" + (f" - {offset}" if offset else "") + ";",
                    *self._epilogue(n, res, outs)]
            if len(parts) == 1:
                lines += body
            else:
                cond = f"e < {offset + size}u" if n < len(parts) - 1 else "true"
                lines += [f"    if ({cond}) {{", *("    " + ln for ln in body),
                          "        return;", "    }"]
        lines.append("}")
        self.funcs.append("\n".join(lines))
        self.funcs.append(f"#define VKG_STORE_B{binding}(i, v) {fn}(i, v)")
        self.hooked.append(binding)

    def _epilogue(self, n: int, res, outs) -> list:
        """Lines writing `outs` at element `gid` of kernel result `res` (whose value is `v`)."""
        k = FusedSource(self.body, _LazyArrays(self), own={res: "v"},
                        own_size=math.prod(res.shape), tmp_prefix=f"p{n}_")
        stores = []
        for o in outs:
            it = k.own_index(o.shape, prefix=f"p{n}_i{len(stores)}_")
            val = "v" if o is res else k.value(o, it)
            val = (f"uint16_t(vkg_{o.dtype}_bits({val}))" if is_half(o.dtype) else
                   k.store_expr(val, o.dtype))
            stores.append(f"    {self._bind(o, True)}[gid] = {val};")
        self._absorb(k, load=False)
        return k.lines + stores

    def in_place_inputs(self) -> set:
        """Inputs read only at the element being stored, and by no load: an epilogue output of
        their size may overwrite them."""
        return {v for v, ok in self.identity.items() if ok and v not in self.loaded}

    def text(self) -> str:
        # GLSL functions the fused primitives' templates call (vkg_threefry2x32 ...), once each
        helpers = glsl.helpers(e.prim for e in self.body.eqns)
        return "\n".join(["// generated by vkgrad (lowering/hooks.py): fused loads and stores",
                          *helpers, *self.decls, *self.funcs, ""])


class _LazyArrays(dict):
    """Body inputs -> array names, binding an input only when a hook reads it."""

    def __init__(self, writer: HookWriter):
        super().__init__()
        self.writer = writer
        self.inputs = set(writer.body.inputs)

    def __contains__(self, v) -> bool:
        return v in self.inputs

    def __getitem__(self, v) -> str:
        return self.writer._bind(v, False)

    def __iter__(self):
        return iter(self.writer.body.inputs)


def splice(shader_text: str, hooks: str) -> str:
    """The hand-written shader with the generated hooks at its `// VKGRAD_FUSION_HOOKS` line."""
    if MARKER not in shader_text:
        raise ValueError("this shader has no fusion hooks (no `// VKGRAD_FUSION_HOOKS` line)")
    return shader_text.replace(MARKER, hooks, 1)
