"""Lowering tables, keyed by primitive, filled in beside each primitive's definition.

`glsl_elementwise[prim]` is a GLSL expression template over the operands `{0}`, `{1}`, ... (already
converted to the result's GLSL type), e.g. `"exp({0})"`. Fused elementwise kernels render these
inside one shared kernel template (see vkgrad/lowering/, the jit issue).

Conventions of the entries the compiler core registers (vkgrad/ir/primitives.py):
* arithmetic operands share the result's type; comparisons (lt, le, eq, ne) take two operands of
  one type and give `bool` (`"({0} < {1})"`); select's `{0}` is the bool condition
  (`"({0} ? {1} : {2})"`);
* `{T}` is the GLSL type of the result (`float`, `double`, `int`, `bool`): convert is `"{T}({0})"`;
* a template may use an operand more than once (pow, log1p): render operands as identifiers or
  temporaries, never as expressions with side effects or large cost;
* operands broadcast numpy-style (aligned from the right, size-1 dims stretch); the template
  sees scalars, the kernel does the index arithmetic;
* GLSL 450 has no double-precision exp/log/sin/cos/tanh/pow, so those templates are float-only
  (f64 programs run on the interpreter), and GLSL's min/max do not propagate NaN as numpy's do.
"""

glsl_elementwise: dict = {}
