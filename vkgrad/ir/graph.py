"""A networkx view of a program, for analyses that want a graph (fusion grouping, plots).

Nodes: ('input', i), ('const', i), ('eqn', i) and ('output', i). Each node has `label` (the
printed name or primitive); eqn nodes also `prim`, `params`, `phase`, `source`. An edge u -> v
carries the value flowing along it: `value` (its printed name, e.g. '%5') and `type`
('f32[3,4]'). Literals are not nodes (they are part of the eqn that uses them).
"""

from __future__ import annotations

import networkx as nx

from vkgrad.ir.core import Program, Var, type_str


def program_graph(program: Program) -> nx.DiGraph:
    g = nx.DiGraph(name=program.name)
    producer: dict[Var, tuple] = {}
    names: dict[Var, str] = {}

    def name(v):
        return names.setdefault(v, f"%{len(names)}")

    for i, v in enumerate(program.inputs):
        producer[v] = ("input", i)
        g.add_node(("input", i), label=name(v), type=type_str(v.shape, v.dtype))
    for i, (v, _) in enumerate(program.consts):
        producer[v] = ("const", i)
        g.add_node(("const", i), label=name(v), type=type_str(v.shape, v.dtype))

    def edge(x, dst):
        if isinstance(x, Var) and x in producer:
            g.add_edge(producer[x], dst, value=name(x), type=type_str(x.shape, x.dtype))

    for i, e in enumerate(program.eqns):
        node = ("eqn", i)
        g.add_node(node, label=e.prim.name, prim=e.prim, params=e.params, phase=e.phase,
                   source=e.source)
        for x in e.inputs:
            edge(x, node)
        for o in e.outputs:
            name(o)
            producer[o] = node
    for i, o in enumerate(program.outputs):
        g.add_node(("output", i), label=f"out{i}")
        edge(o, ("output", i))
    return g
