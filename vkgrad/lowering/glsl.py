"""The GLSL of each elementwise primitive: the lowering's table, keyed by primitive (tinygrad's
`code_for_op`). A fused kernel renders these inside one shared kernel template
(vkgrad/lowering/elementwise.py, and the fused loads and stores of vkgrad/lowering/hooks.py).

    code_for_op[p]   an expression template over the operands `{0}`, `{1}`, ... (already
                     converted to the result's GLSL type), e.g. `"exp({0})"`
    functions[p]     the GLSL functions the template calls, by name (their sources are
                     `HELPERS[name]`, emitted once per kernel, in HELPERS' order)

Template conventions:
* arithmetic operands share the result's type; comparisons (lt, le, eq, ne) take two operands of
  one type and give `bool` (`"({0} < {1})"`); select's `{0}` is the bool condition;
* `{T}` is the GLSL type of the result (`float`, `int`, `bool`): convert is `"{T}({0})"`;
* a template may use an operand more than once (pow, log1p): operands are rendered as
  identifiers or temporaries, never as expressions with side effects or large cost;
* operands broadcast numpy-style; the template sees scalars, the kernel does the indexing;
* GLSL 450 has no double-precision exp/log/sin/cos/tanh/pow, so those templates are float-only
  (f64 programs run on the interpreter);
* the primitive's params are there by name (`{word}`), for params that are plain ints.

What an op means is its numpy reference (vkgrad/primitives/); what is here is how to get that
value out of GLSL on real drivers: each workaround has the measurement that made it beside it.
NaN and the infinities are kept as numpy keeps them: GLSL's max/min/clamp return either operand
when one is NaN, so max and min are `vkg_max`/`vkg_min` (kernels_glsl/ieee.glsl, which every
shader includes), and the float tests read the bits. Whether the driver may fold `x - x` to 0 is
the device's (the SignedZeroInfNanPreserve execution mode, declared where the device honours it:
ieee.glsl); where it does not, add is `vkg_add`, IEEE's sum from the bits for an operand that is
not finite. `x * 0.0` and `0.0 / x` of a literal zero, which lavapipe folds even under the mode,
are written out (`_literal_zero`).
"""

from __future__ import annotations

import math

from vkgrad.errors import MissingRuleError
from vkgrad.ir.core import Literal
from vkgrad.primitives import lax as L
from vkgrad.primitives import random as R

_NAN = "uintBitsToFloat(0x7fc00000u)"
_INF = "uintBitsToFloat(0x7f800000u)"
_LN2 = "0.69314718"

code_for_op: dict = {
    # arithmetic
    # vkg_add (ieee.glsl): a driver that may assume no NaN/Inf folds x + (-x) to 0
    L.add_p: "vkg_add({0}, {1})",
    L.mul_p: "({0} * {1})",
    # Vulkan leaves x / 0 undefined (lavapipe folds x / 0.0 to garbage): divide by zero as
    # numpy does, x times an infinity of the zero's sign (0 / 0 is nan).
    L.div_p: ("(({1}) == 0.0 ? ({0}) * uintBitsToFloat((floatBitsToUint({1}) & 0x80000000u) | "
              "0x7f800000u) : ({0}) / ({1}))"),
    # GLSL's pow is undefined for a negative base, a zero base, NaN and infinities: vkg_pow
    L.pow_p: "vkg_pow({0}, {1})",
    # numpy's maximum/minimum: NaN if either operand is NaN (GLSL's max/min drop it: lavapipe
    # and the H200 gave max(nan, 0) == 0, so relu(nan) was 0)
    L.max_p: "vkg_max({0}, {1})",
    L.min_p: "vkg_min({0}, {1})",
    L.neg_p: "(-{0})",
    L.exp_p: "exp({0})",
    # lavapipe's log of a subnormal is off (log(1e-40) gave -88.02, numpy -92.10: the exponent
    # is read as the smallest normal's): it is scaled into the normal range first
    L.log_p: "vkg_log({0})",
    # GLSL has no log1p; log(1 + x) loses all digits of a small x. Below |x| < 1e-2 a 4-term
    # series is exact to ~x^5/5; it needs no (1+x)-1 trick that fast-math may reassociate.
    L.log1p_p: ("(abs({0}) < 1e-2 ? ({0}) * (1.0 - ({0}) * (0.5 - ({0}) * (1.0 / 3.0 - 0.25 * "
                "({0})))) : log(1.0 + ({0})))"),
    # some drivers compute tanh as a ratio of exps: inf/inf = nan past |x|~44, so the argument
    # is clamped to +-15 (tanh(15) rounds to 1.0f); clamp drops a NaN, which is kept first
    L.tanh_p: "(vkg_isnan({0}) ? ({0}) : tanh(clamp({0}, -15.0, 15.0)))",
    L.sin_p: "sin({0})",
    L.cos_p: "cos({0})",
    L.abs_p: "abs({0})",
    # GLSL's sign of a NaN is 0 on lavapipe; numpy's is NaN
    L.sign_p: "vkg_sign({0})",
    L.sqrt_p: "sqrt({0})",
    L.stop_gradient_p: "{0}",
    # comparisons (bool results)
    # (IEEE with a NaN operand on every device: ieee.glsl)
    L.lt_p: "vkg_lt({0}, {1})",
    L.le_p: "vkg_le({0}, {1})",
    L.eq_p: "vkg_eq({0}, {1})",
    L.ne_p: "vkg_ne({0}, {1})",
    L.select_p: "({0} ? {1} : {2})",
    # bitwise (int): GLSL leaves a shift by 32 or more (or a negative amount) undefined
    L.and_p: "({0} & {1})",
    L.or_p: "({0} | {1})",
    L.xor_p: "({0} ^ {1})",
    L.shift_left_p: "(uint({1}) < 32u ? {0} << {1} : 0)",
    L.shift_right_p: "({0} >> (uint({1}) < 32u ? {1} : 31))",
    L.convert_p: "{T}({0})",   # {T}: the GLSL type of the result
    # rounding
    L.floor_p: "floor({0})",
    L.ceil_p: "ceil({0})",
    L.round_p: "roundEven({0})",
    # The inverse and hyperbolic functions below are GLSL functions of their own (HELPERS):
    # GLSL leaves asin/acos outside [-1, 1], acosh below 1 and atan(0, 0) undefined (lavapipe
    # gave 0 where numpy gives nan, 3pi/4 for atan2(0, 0)), and the formulas drivers use lose
    # small arguments (sinh(1e-30) was 3e-8, asinh(1e-30) 0) and overflow large ones
    # (asinh(1e30) was inf). Each is numpy's value now within the Vulkan spec's 4096-ulp bound
    # for atan (lavapipe's atan is off by ~2e-5 relative); found by tests/test_fuzz.py's
    # special values.
    L.tan_p: "tan({0})",
    L.sinh_p: "vkg_sinh({0})",
    L.cosh_p: "cosh({0})",
    L.asin_p: "vkg_asin({0})",
    L.acos_p: "vkg_acos({0})",
    # GLSL's atan need not keep a NaN (lavapipe: atan(nan) == 0)
    L.atan_p: "(vkg_isnan({0}) ? ({0}) : atan({0}))",
    L.asinh_p: "vkg_asinh({0})",
    L.acosh_p: "vkg_acosh({0})",
    L.atanh_p: "vkg_atanh({0})",
    L.atan2_p: "vkg_atan2({0}, {1})",
    # float tests on the bits: a driver that assumes no NaN may fold isnan(x) to false
    L.isnan_p: "vkg_isnan({0})",
    L.isinf_p: "((floatBitsToUint({0}) & 0x7fffffffu) == 0x7f800000u)",
    # random bits
    R.threefry2x32_p: "vkg_threefry2x32({0}, {1}, {2}, {3}, {word})",
    R.bits_to_unit_p: "(uintBitsToFloat((uint({0}) >> 9u) | 0x3F800000u) - 1.0)",
    R.randint_from_bits_p: "vkg_randint({0}, {1}, {2}, {3})",
}


def _unary(name: str, body: str) -> str:
    return f"float {name}(float x) {{\n{body}\n}}\n"


HELPERS: dict[str, str] = {
    # numpy's power. GLSL's pow is undefined for a negative base (numpy's is defined for
    # integral exponents) and for a zero base with y <= 0 (lavapipe: 0**0 == 0, 0**-1 == 0;
    # numpy: x**0 == 1, 0**y == inf for y < 0), and it need not keep NaN or follow IEEE for
    # infinities (lavapipe: nan**nan == 0); lavapipe's is off for a subnormal base (1e-40**0.5
    # gave 7.7e-20, numpy 1.0e-20; 1e-40**-1 was finite), which is scaled by 2^24 first (the two
    # factors never underflow and overflow at once). Found by tests/test_fuzz.py's special values.
    "vkg_pow": f"""\
float vkg_pow(float x, float y) {{
    if (y == 0.0) return 1.0;
    if (vkg_isnan(x) || vkg_isnan(y)) return x == 1.0 ? 1.0 : VKG_NAN;
    float a = abs(x);
    if ((floatBitsToUint(y) & 0x7fffffffu) == 0x7f800000u)
        return a == 1.0 ? 1.0 : (a > 1.0) == (y > 0.0) ? {_INF} : 0.0;
    bool integral = y == floor(y), odd = integral && mod(y, 2.0) == 1.0;
    bool neg = (floatBitsToUint(x) & 0x80000000u) != 0u;
    float r;
    if (a == 0.0 || (floatBitsToUint(a) == 0x7f800000u)) r = (a == 0.0) == (y < 0.0) ? {_INF} : 0.0;
    else if (neg && !integral) return VKG_NAN;
    else if (a < 1.17549435e-38) r = pow(a * 16777216.0, y) * exp2(-24.0 * y);
    else r = pow(a, y);
    return neg && odd ? -r : r;
}}
""",
    "vkg_log": _unary("vkg_log", "    return x > 0.0 && x < 1.17549435e-38 ? log(x * 16777216.0) - "
                      "16.63553233 : log(x);   // 2^24, 24 ln 2"),
    "vkg_sign": _unary("vkg_sign", "    return vkg_isnan(x) ? x : sign(x);") +
                "int vkg_sign(int x) { return sign(x); }\n",
    "vkg_sinh": _unary("vkg_sinh", "    float t = x * x;\n    return abs(x) < 0.05 ? "
                       "x * (1.0 + t * (1.0 / 6.0 + t / 120.0)) : sinh(x);"),
    # asin and acos through atan: lavapipe's asin/acos were off by 3e-4 (relative, measured on
    # 257 points in [-0.9, 0.9]), its atan by 2e-6.
    "vkg_asin": _unary("vkg_asin",
                       f"    return abs(x) <= 1.0 ? atan(x / sqrt(1.0 - x * x)) : {_NAN};"),
    "vkg_acos": _unary("vkg_acos", "    return abs(x) <= 1.0 ? 2.0 * atan(sqrt((1.0 - x) / "
                       f"(1.0 + x))) : {_NAN};"),
    # written out: some drivers compute asinh as log(x + sqrt(x^2+1)), which cancels for x << 0
    "vkg_asinh": _unary("vkg_asinh",
                        "    float a = abs(x), t = a * a;\n"
                        "    float r = a < 0.05 ? a * (1.0 - t * (1.0 / 6.0 - t * 0.075))\n"
                        f"            : a > 1e18 ? log(a) + {_LN2} : log(a + sqrt(t + 1.0));\n"
                        "    return x < 0.0 ? -r : x > 0.0 ? r : x;"),
    "vkg_acosh": _unary("vkg_acosh", f"    return !(x >= 1.0) ? {_NAN} : x > 1e18 ? log(x) + "
                        f"{_LN2} : acosh(x);"),
    "vkg_atanh": _unary("vkg_atanh", "    float t = x * x;\n"
                        "    return abs(x) < 0.05 ? x * (1.0 + t * (1.0 / 3.0 + t / 5.0)) : "
                        "atanh(x);"),
    # atan2(y, x): GLSL's two-argument atan is undefined at y == x == 0, where numpy gives +-0
    # (x >= +0) or +-pi (x <= -0), the sign y's; lavapipe's gave nan for a subnormal and a zero
    # (atan(1e-40, 0.0)), so two tiny operands are scaled by 2^24 first (the angle is the same)
    "vkg_atan2": """\
float vkg_atan2(float y, float x) {
    if (vkg_isnan(y) || vkg_isnan(x)) return VKG_NAN;
    if (max(abs(y), abs(x)) < 1.17549435e-38) { y *= 16777216.0; x *= 16777216.0; }
    if (y != 0.0 || x != 0.0) return atan(y, x);
    uint sy = floatBitsToUint(y) & 0x80000000u;
    return (floatBitsToUint(x) & 0x80000000u) != 0u ? uintBitsToFloat(sy | 0x40490fdbu) : y;
}
""",
    # x * 0.0 and 0.0 / x of a literal zero, as IEEE has them (see _literal_zero)
    "vkg_times_zero": """\
float vkg_times_zero(float x, uint zero_sign) {
    uint b = floatBitsToUint(x);     // NaN and infinities: exponent all ones
    if ((b & 0x7f800000u) == 0x7f800000u) return VKG_NAN;
    return uintBitsToFloat((b & 0x80000000u) ^ zero_sign);
}
""",
    "vkg_zero_over": """\
float vkg_zero_over(uint zero_sign, float y) {
    uint b = floatBitsToUint(y);
    if (vkg_isnan(y) || (b & 0x7fffffffu) == 0u) return VKG_NAN;
    return uintBitsToFloat((b & 0x80000000u) ^ zero_sign);
}
""",
    "vkg_randint": """\
int vkg_randint(int higher, int lower, int lo, int hi) {
    // JAX's randint (jax/_src/random.py _randint), in uint arithmetic (int <-> uint keeps bits)
    uint span = hi <= lo ? 1u : uint(hi) - uint(lo);
    uint m = 65536u % span;
    m = (m * m) % span;
    uint offset = ((uint(higher) % span) * m + uint(lower) % span) % span;
    return int(uint(lo) + offset);
}
""",
    "vkg_threefry2x32": """\
int vkg_threefry2x32(int key0, int key1, int ctr0, int ctr1, int word) {
    // Threefry-2x32, 20 rounds, in uint arithmetic (int <-> uint keeps the bits)
    const uint rot[8] = uint[8](13u, 15u, 26u, 6u, 17u, 29u, 16u, 24u);
    uint ks[3] = uint[3](uint(key0), uint(key1), uint(key0) ^ uint(key1) ^ 0x1BD11BDAu);
    uint x0 = uint(ctr0) + ks[0], x1 = uint(ctr1) + ks[1];
    for (int i = 0; i < 5; i++) {
        for (int j = 0; j < 4; j++) {
            uint r = rot[(i & 1) * 4 + j];
            x0 += x1;
            x1 = ((x1 << r) | (x1 >> (32u - r))) ^ x0;
        }
        x0 += ks[(i + 1) % 3];
        x1 += ks[(i + 2) % 3] + uint(i + 1);
    }
    return int(word == 0 ? x0 : word == 1 ? x1 : x0 ^ x1);
}
""",
}

functions: dict = {
    L.log_p: ("vkg_log",), L.pow_p: ("vkg_pow",),
    L.mul_p: ("vkg_times_zero",), L.div_p: ("vkg_zero_over",),   # for literal zeros only
    L.sign_p: ("vkg_sign",), L.sinh_p: ("vkg_sinh",), L.asin_p: ("vkg_asin",),
    L.acos_p: ("vkg_acos",), L.asinh_p: ("vkg_asinh",), L.acosh_p: ("vkg_acosh",),
    L.atanh_p: ("vkg_atanh",), L.atan2_p: ("vkg_atan2",),
    R.threefry2x32_p: ("vkg_threefry2x32",), R.randint_from_bits_p: ("vkg_randint",),
}

# Defined by kernels_glsl/ieee.glsl, which every kernel includes (generated ones through
# `PREAMBLE`): vkg_isnan, vkg_max, vkg_min.
PREAMBLE = ("#extension GL_GOOGLE_include_directive : require\n"
            '#include "ieee.glsl"')


def _literal_zero(eqn, args):
    """`x * 0.0` and `0.0 / x` where the zero is a literal: lavapipe (Mesa 22.3) folds both to
    0 even under SignedZeroInfNanPreserve (0 * inf gave 0; a zero read at run time gave nan),
    so the product is written out: nan for a NaN or infinite x, else a zero of the product's
    sign. None where the rule does not apply."""
    if eqn.out.dtype != "f32" or eqn.prim not in (L.mul_p, L.div_p):
        return None
    zeros = [i for i, a in enumerate(eqn.inputs) if isinstance(a, Literal) and a.value == 0.0]
    if len(zeros) != 1 or (eqn.prim is L.div_p and zeros[0] != 0):
        return None
    i = zeros[0]
    sign = "0x80000000u" if math.copysign(1.0, eqn.inputs[i].value) < 0 else "0u"
    if eqn.prim is L.mul_p:
        return f"vkg_times_zero({args[1 - i]}, {sign})"
    return f"vkg_zero_over({sign}, {args[1]})"


def expression(eqn, args, result_type: str, stage: str = "lowering") -> str:
    """The GLSL expression of elementwise `eqn` over the operand expressions `args`."""
    special = _literal_zero(eqn, args)
    if special is not None:
        return special
    template = code_for_op.get(eqn.prim)
    if template is None:
        raise MissingRuleError(f"primitive '{eqn.prim.name}' has no GLSL expression "
                               f"(vkgrad/lowering/glsl.py: code_for_op) ({stage})",
                               primitive=eqn.prim.name, stage=stage)
    return template.format(*args, T=result_type, **eqn.params)


def helpers(prims) -> list[str]:
    """The sources of the GLSL functions the templates of `prims` call, once each, in
    HELPERS' order."""
    names = {n for p in prims for n in functions.get(p, ())}
    return [src for name, src in HELPERS.items() if name in names]
