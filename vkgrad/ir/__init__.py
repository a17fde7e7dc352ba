"""The IR (core.py), its primitives (primitives.py), the numpy interpreter, reverse mode
(autodiff.py), printer/parser/verifier, the networkx view (graph.py) and passes (passes/).

Kept import-light: vkgrad/__init__.py imports the pieces in dependency order.
"""

from vkgrad.ir.core import (DTYPES, PRIMITIVES, Eqn, Literal, Params, Primitive, Program,
                            TensorType, Var)

__all__ = ["DTYPES", "PRIMITIVES", "Eqn", "Literal", "Params", "Primitive", "Program",
           "TensorType", "Var"]
