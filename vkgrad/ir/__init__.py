"""The IR as data: types, Var/Literal/Eqn/Program, the primitive registry and rule tables, the
text form (core.py); the parser, the verifier, the numpy interpreter (the executable meaning of
every primitive) and a networkx view (graph.py, imported on demand: it needs networkx).

Nothing here imports any layer above it (see docs/compiler.md, "Layers").
"""

from vkgrad.ir.core import (DTYPES, PRIMITIVES, Eqn, Literal, Params, Primitive, Program,
                            TensorType, Var)

__all__ = ["DTYPES", "PRIMITIVES", "Eqn", "Literal", "Params", "Primitive", "Program",
           "TensorType", "Var"]
