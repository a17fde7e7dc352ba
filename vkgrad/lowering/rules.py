"""Lowering tables, keyed by primitive, filled in beside each primitive's definition.

`glsl_elementwise[prim]` is a GLSL expression template over the operands `{0}`, `{1}`, ... (already
converted to the result's GLSL type), e.g. `"exp({0})"`. Fused elementwise kernels render these
inside one shared kernel template (see vkgrad/lowering/, the jit issue).
"""

glsl_elementwise: dict = {}
