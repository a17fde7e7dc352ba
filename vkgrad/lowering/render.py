"""How the late stages print: the `plan` (dispatches, buffers, memory, saved residuals), the
`glsl` listing (every generated shader source, headed by the eqns it computes), and Graphviz
DOT for any stage (built as a networkx graph: nodes coloured by the kernel that computes them,
forward and backward in separate clusters), rendered to SVG by the `dot` program when present.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import networkx as nx

from vkgrad.errors import ArgumentError
from vkgrad.ir.core import Program, Var, format_eqns, type_str, value_names
from vkgrad.primitives.compiler import fused_p
from vkgrad.lowering.memory import value_bytes
from vkgrad.primitives.control_flow import describe
from vkgrad.lowering.loops import replay_order


def fmt_bytes(n: int) -> str:
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n} B"


def _what(e) -> str:
    """`fused[output]: matmul, add, max` / `log_softmax` / `fused: add, mul`."""
    if e.prim is fused_p:
        prims = ", ".join(dict.fromkeys(b.prim.name for b in e.params["body"].eqns))
        k = e.params.get("kind", "loop")
        return f"fused[{k}]: {prims}" if k != "loop" else f"fused: {prims}"
    return e.prim.name


def _sources(e) -> list:
    """The user's lines an eqn computes (a fused kernel's: its body's), each file once with its
    lines in order: ["model.py:18,19", "Cell In[3], line 2"]."""
    body = e.params["body"].eqns if e.prim is fused_p else (e,)
    lines: dict = {}
    for b in body:
        if b.source:
            path, sep, line = b.source.rpartition(":")
            path, line = (path, line) if sep and line.isdigit() else (b.source, "")
            lines.setdefault(path, {})[line] = None
    return [f"{p}:{','.join(sorted(ls, key=int))}" if all(ls) else p for p, ls in lines.items()]


def _types(xs) -> str:
    return " ".join(type_str(x.shape, x.dtype) for x in xs if isinstance(x, Var)) or "-"


def plan_text(lw) -> str:
    names = value_names(lw.program)
    donation = lw.donation
    mem = lw.memory()
    n = lambda v: names.get(v, "temp") if isinstance(v, Var) else "temp"
    recorded = len(replay_order(len(lw.steps), lw.loops)) if lw.loops else len(lw.steps)
    per_call = f" ({recorded} run per call: a loop runs its body once per step)" if lw.loops else ""
    lines = [f"plan {lw.program.name}: {len(lw.steps)} dispatches{per_call}, "
             f"{len(lw.slots)} buffers, "
             f"peak {fmt_bytes(mem['peak'])} (arguments {fmt_bytes(mem['arguments'])}, "
             f"outputs {fmt_bytes(mem['outputs'])}, scratch {fmt_bytes(mem['scratch'])}"
             + (f", consts {fmt_bytes(mem['consts'])}" if mem["consts"] else "") + "), "
             f"saved for the backward {fmt_bytes(lw.saved_bytes())}",
             "dispatches, in order (kernel, phase, what it computes, operands -> results, "
             "workgroups, buffers, the user's lines it computes):"]
    loop_at = {first: (end, n) for first, end, n in lw.loops}
    for i, st in enumerate(lw.steps):
        if i in loop_at:
            end, trips = loop_at[i]
            scan = next((s.eqn for s in lw.steps[i:end] if s.eqn.prim.name == "scan"), st.eqn)
            what = describe(scan) if scan.prim.name == "scan" else f"{trips} steps"
            lines.append(f"  loop: k{i}-k{end - 1} run {trips} times ({what}"
                         f"{', ' + scan.source if scan.source else ''})")
        e = st.eqn
        g = "x".join(map(str, st.launch.groups))
        lines.append(f"  k{i:<3} {st.launch.name:<22} {e.phase}  {_what(e)}")
        lines.append(f"        {_types(e.inputs)} -> {_types(e.outputs)}  groups {g}  "
                     f"({', '.join(f'b{s}' for s in st.slots)})")
        if _sources(e):
            lines.append(f"        at {', '.join(_sources(e))}")
    lines.append("buffers (elements, bytes, kind, the values each holds and the dispatches "
                 "from first write to last read):")
    # lifetimes are in the memory plan's order; the runner may have moved a dispatch since
    # (donation), so they are shown in the order the dispatches run
    at = {st.index: i for i, st in enumerate(lw.steps)}
    inputs = {s: i for i, s in enumerate(lw.input_slots)}
    outputs = {}
    for j, s in enumerate(lw.output_slots):
        outputs.setdefault(s, j)
    for i, s in enumerate(lw.slots):
        kind = s.kind
        if i in inputs:
            kind += f" {inputs[i]}"
        if i in outputs:
            kind = f"{kind}, result {outputs[i]}" if s.kind != "output" else f"result {outputs[i]}"
        if donation and i in donation:
            kind += f" (over argument {donation[i]})"
        elif i in lw.carried:
            kind += " (replaces a donated argument; kept on the device)"
        spans = [(n(v), min(at.get(a, a), at.get(b, b)), max(at.get(a, a), at.get(b, b)))
                 for v, a, b in s.values]
        held = ", ".join(f"{v} k{a}" + (f"-k{b}" if b != a else "") for v, a, b in spans)
        lines.append(f"  b{i:<3} {s.dtype}[{s.size}]".ljust(22) +
                     f" {fmt_bytes(s.nbytes):>10}  {kind:<22} {held}")
    if lw.saved:
        lines.append("saved residuals (forward values the backward reads; buffer, value, "
                     "shape, source line):")
        for slot, v, src in lw.saved:
            lines.append(f"  b{slot:<3} {n(v):<6} {type_str(v.shape, v.dtype):<16} "
                         f"{fmt_bytes(value_bytes(v)):>10}  {src or '?'}")
    outs = ", ".join("literal" if s is None else f"b{s}" for s in lw.output_slots)
    lines.append(f"return {outs}")
    return "\n".join(lines) + "\n"


KERNELS_DIR = Path(__file__).resolve().parent.parent / "kernels_glsl"


def shader_source(launch) -> str:
    """The complete source a launch compiles: a hand-written kernel's file (with its generated
    loads and stores spliced in, if any) and its defines as #define lines after #version, or a
    generated kernel's source. It compiles as it is with `-I vkgrad/kernels_glsl` (the device
    may add VKGRAD_NAN_PRESERVE / VKGRAD_DENORM_PRESERVE; specialization constants keep their
    defaults unless given)."""
    src = (KERNELS_DIR / launch.shader).read_text() if launch.is_file else launch.shader
    if not launch.defines:
        return src
    lines = src.split("\n")
    at = next((k + 1 for k, ln in enumerate(lines) if ln.startswith("#version")), 0)
    return "\n".join(lines[:at] + [f"#define {k} {v}" for k, v in launch.defines] + lines[at:])


def glsl_text(lw) -> str:
    """Every dispatch's complete shader (`shader_source`), headed by the eqns it computes; a
    source already shown is named, not repeated."""
    names = value_names(lw.program)
    out, seen = [], {}
    for i, st in enumerate(lw.steps):
        la, e = st.launch, st.eqn
        defines = " ".join(f"{k}={v}" for k, v in la.defines)
        head = [f"// ==== k{i}: {la.name} ({_what(e)}), groups {'x'.join(map(str, la.groups))}"]
        body_eqns = e.params["body"].eqns if e.prim is fused_p else (e,)
        head.append("// computes:")
        head += format_eqns(body_eqns, names, indent="//   ")
        if la.is_file or la.base:
            head.append(f"// hand-written kernel vkgrad/kernels_glsl/{la.base or la.shader}"
                        + (f", defines {defines}" if defines else "")
                        + (f", specialization {la.spec}" if la.spec else "")
                        + (", with generated loads/stores at its // VKGRAD_FUSION_HOOKS line"
                           if la.base else ""))
        source = shader_source(la)
        if source in seen:
            head.append(f"// (same source as k{seen[source]})")
            out.append("\n".join(head))
            continue
        seen[source] = i
        out.append("\n".join(head + [source.rstrip()]))
    return "\n\n".join(out) + "\n"


# ------------------------------------------------------------------------------ graphs

PALETTE = ("#8dd3c7", "#ffffb3", "#bebada", "#fb8072", "#80b1d3", "#fdb462", "#b3de69",
           "#fccde5", "#d9d9d9", "#bc80bd", "#ccebc5", "#ffed6f")


def program_graph(program: Program) -> nx.DiGraph:
    """Eqns as nodes (an eqn inside a fused kernel is a node of that kernel: `kernel` is the
    top-level eqn's index, colouring), values as edges, program inputs and outputs as nodes."""
    names = value_names(program)
    g = nx.DiGraph(name=program.name)
    where: dict = {}                      # value -> node that produces it
    for i, v in enumerate(program.inputs):
        node = f"in{i}"
        g.add_node(node, label=f"{names[v]}: {type_str(v.shape, v.dtype)}", shape="box",
                   phase="io", kernel=None)
        where[v] = node
    for i, (v, _) in enumerate(program.consts):
        node = f"const{i}"
        g.add_node(node, label=f"{names[v]} const", shape="box", phase="io", kernel=None)
        where[v] = node

    def add_eqn(e, node, k):
        outs = ", ".join(names.get(o, "?") for o in e.outputs)
        g.add_node(node, label=f"{outs} = {e.prim.name}", shape="ellipse", phase=e.phase,
                   kernel=k)

    for k, e in enumerate(program.eqns):
        if e.prim is fused_p:
            local = {}
            for j, b in enumerate(e.params["body"].eqns):
                node = f"k{k}e{j}"
                add_eqn(b, node, k)
                for x in b.inputs:
                    src = local.get(x) or where.get(x)
                    if isinstance(x, Var) and src:
                        g.add_edge(src, node, label=names.get(x, ""))
                for o in b.outputs:
                    local[o] = node
            for o in e.outputs:
                where[o] = local[o]
        else:
            node = f"k{k}"
            add_eqn(e, node, k)
            for x in e.inputs:
                if isinstance(x, Var) and x in where:
                    g.add_edge(where[x], node, label=names.get(x, ""))
            for o in e.outputs:
                where[o] = node
    for i, o in enumerate(program.outputs):
        node = f"out{i}"
        g.add_node(node, label=f"result {i}", shape="box", phase="io", kernel=None)
        if isinstance(o, Var) and o in where:
            g.add_edge(where[o], node, label=names.get(o, ""))
    return g


def plan_graph(lw) -> nx.DiGraph:
    """Dispatches as nodes, an edge where one reads what another wrote (labelled by buffer)."""
    g = nx.DiGraph(name=lw.program.name)
    writer: dict = {}
    for i, st in enumerate(lw.steps):
        g.add_node(f"k{i}", label=f"k{i} {st.launch.name}\n{_what(st.eqn)}", shape="box",
                   phase=st.phase, kernel=i)
        for s in st.reads:
            if s in writer and writer[s] != i:
                g.add_edge(f"k{writer[s]}", f"k{i}", label=f"b{s}")
        for s in st.writes:
            writer[s] = i
    return g


def _q(text) -> str:
    return '"' + str(text).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def to_dot(g: nx.DiGraph) -> str:
    """Graphviz DOT text of a graph from program_graph/plan_graph: fill colour by kernel,
    forward and backward as two clusters."""
    lines = [f"digraph {_q(g.graph.get('name', 'program'))} {{",
             '  rankdir=TB; node [style=filled, fontname="monospace", fontsize=10];',
             '  edge [fontname="monospace", fontsize=8];']
    clusters = {"fwd": [], "bwd": [], "io": []}
    for node, a in g.nodes(data=True):
        k = a.get("kernel")
        color = "white" if k is None else PALETTE[k % len(PALETTE)]
        clusters.setdefault(a.get("phase", "io"), []).append(
            f"{_q(node)} [label={_q(a.get('label', node))}, shape={a.get('shape', 'ellipse')}, "
            f"fillcolor={_q(color)}];")
    for phase, title in (("fwd", "forward"), ("bwd", "backward")):
        if clusters[phase]:
            lines.append(f"  subgraph cluster_{phase} {{ label={_q(title)}; style=dashed;")
            lines += ["    " + ln for ln in clusters[phase]]
            lines.append("  }")
    lines += ["  " + ln for ln in clusters["io"]]
    for u, v, a in g.edges(data=True):
        label = a.get("label")
        lines.append(f"  {_q(u)} -> {_q(v)}" + (f" [label={_q(label)}]" if label else "") + ";")
    lines.append("}")
    return "\n".join(lines) + "\n"


def dot_svg(dot: str) -> str:
    """SVG of DOT text, by Graphviz's `dot` program."""
    exe = shutil.which("dot")
    if exe is None:
        raise ArgumentError("--format svg needs Graphviz's `dot` program, which is not "
                            "installed: `apt-get install graphviz` (or `brew install graphviz`), "
                            "or use --format dot and render the text elsewhere")
    res = subprocess.run([exe, "-Tsvg"], input=dot, capture_output=True, text=True)
    if res.returncode != 0:
        raise ArgumentError(f"dot failed: {res.stderr.strip()}")
    return res.stdout
