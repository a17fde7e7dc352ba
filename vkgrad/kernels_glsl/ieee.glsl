// ieee.glsl: IEEE-754 NaN and infinities as numpy keeps them. Every kernel includes it (the
// hand-written ones through common.glsl / reduce_common.glsl or directly, the generated ones
// through vkgrad/lowering/glsl.py's PREAMBLE), before its own code.
//
// VKGRAD_NAN_PRESERVE (defined by the compile when the device honours it: vkgrad/runtime/vulkan.py's
// Device, from shaderSignedZeroInfNanPreserveFloat32 as kp patch 0009 reports it) declares the SignedZeroInfNanPreserve execution
// mode for 32-bit floats (SPV_KHR_float_controls: execution mode 4461, capability 4466). Without
// it Vulkan lets a driver assume no NaN/Inf: on lavapipe (Mesa 22.3) and the H200, for
// x = [inf, nan, -inf, 2], `x - x` gave [0, 0, 0, 0] (IEEE: nan nan nan 0). Measured on lavapipe
// with the mode: `x - x` keeps the NaNs; `x * 0.0` and `0.0 / x` of a literal zero are still
// folded to 0 (with and without the mode, `precise` or not: vkgrad/lowering/glsl.py writes them
// out), while `x * z`, `z / x` of a zero z read at run time are IEEE with and without it.
//
// vkg_max / vkg_min are numpy's maximum / minimum: NaN when either operand is NaN (GLSL's
// max/min/clamp return either operand then; lavapipe and the H200 gave max(nan, 0) == 0). The
// NaN test is on the bits, which no driver may fold away.
#ifndef VKGRAD_IEEE_GLSL
#define VKGRAD_IEEE_GLSL

#if defined(VKGRAD_NAN_PRESERVE) || defined(VKGRAD_DENORM_PRESERVE)
#extension GL_EXT_spirv_intrinsics : require
#endif
#ifdef VKGRAD_NAN_PRESERVE
spirv_execution_mode(extensions = ["SPV_KHR_float_controls"], capabilities = [4466], 4461, 32);
#endif
// VKGRAD_DENORM_PRESERVE (shaderDenormPreserveFloat32): the DenormPreserve execution mode (4459,
// capability 4464) for 32-bit floats; a driver may flush subnormals to zero otherwise (the H200
// did: 0.0 / 1e-40 gave nan, 1e-40 == 0.0 was true).
#ifdef VKGRAD_DENORM_PRESERVE
spirv_execution_mode(extensions = ["SPV_KHR_float_controls"], capabilities = [4464], 4459, 32);
#endif

#define VKG_NAN uintBitsToFloat(0x7fc00000u)

#include "half.glsl"

bool vkg_isnan(float x) { return (floatBitsToUint(x) & 0x7fffffffu) > 0x7f800000u; }
bvec2 vkg_isnan(vec2 x) {
    return greaterThan(floatBitsToUint(x) & 0x7fffffffu, uvec2(0x7f800000u));
}
bvec4 vkg_isnan(vec4 x) {
    return greaterThan(floatBitsToUint(x) & 0x7fffffffu, uvec4(0x7f800000u));
}

// numpy: maximum(a, b) = a >= b || isnan(a) ? a : b (so a NaN b falls through to b)
// and where a == b the bits pick a zero's sign: max(-0, 0) = 0, min(0, -0) = -0 in either
// order, as JAX's (and the interpreter's, primitives/lax.py); on the bits because a driver
// without SignedZeroInfNanPreserve folds -0 + 0 to -0 (lavapipe did)
float vkg_max(float a, float b) {
    return a == b ? uintBitsToFloat(floatBitsToUint(a) & floatBitsToUint(b))
                  : (a > b || vkg_isnan(a) ? a : b);
}
float vkg_min(float a, float b) {
    return a == b ? uintBitsToFloat(floatBitsToUint(a) | floatBitsToUint(b))
                  : (a < b || vkg_isnan(a) ? a : b);
}
vec2 vkg_max(vec2 a, vec2 b) { return vec2(vkg_max(a.x, b.x), vkg_max(a.y, b.y)); }
vec2 vkg_min(vec2 a, vec2 b) { return vec2(vkg_min(a.x, b.x), vkg_min(a.y, b.y)); }
vec4 vkg_max(vec4 a, vec4 b) { return vec4(vkg_max(a.xy, b.xy), vkg_max(a.zw, b.zw)); }
vec4 vkg_min(vec4 a, vec4 b) { return vec4(vkg_min(a.xy, b.xy), vkg_min(a.zw, b.zw)); }
// vkg_add: numpy's a + b (and a - b, which the IR writes as a + (-b)). Without the mode a driver
// may fold x + (-x) to 0: lavapipe (Mesa 22.3) did, for x = inf and nan, in x - x, x*x - x*x and
// (x+1) - (x+1) (tests/test_reliability.py runs them with the mode left out). So on such a
// device an operand that is not finite takes IEEE's sum from its bits, which no driver may fold.
#ifdef VKGRAD_NAN_PRESERVE
float vkg_add(float a, float b) { return a + b; }
#else
float vkg_add(float a, float b) {
    uint ua = floatBitsToUint(a), ub = floatBitsToUint(b);
    bool sa = (ua & 0x7f800000u) == 0x7f800000u, sb = (ub & 0x7f800000u) == 0x7f800000u;
    if (!sa && !sb) return a + b;
    if (vkg_isnan(a)) return a;
    if (vkg_isnan(b)) return b;
    if (sa && sb) return ua == ub ? a : VKG_NAN;     // inf + inf, or inf - inf
    return sa ? a : b;
}
#endif
int vkg_add(int a, int b) { return a + b; }
// vkg_lt / vkg_le / vkg_eq / vkg_ne: IEEE comparisons (false with a NaN operand, but != true).
// Without the mode a driver may assume no NaN: on the H200, `x <= 0` of a NaN x was true
// (relu, written where(x <= 0, 0, x), gave 0 for NaN; tests/test_fuzz.py runs it without the
// mode). Integers and bools compare as they are.
#ifdef VKGRAD_NAN_PRESERVE
bool vkg_lt(float a, float b) { return a < b; }
bool vkg_le(float a, float b) { return a <= b; }
bool vkg_eq(float a, float b) { return a == b; }
#else
bool vkg_lt(float a, float b) { return !vkg_isnan(a) && !vkg_isnan(b) && a < b; }
bool vkg_le(float a, float b) { return !vkg_isnan(a) && !vkg_isnan(b) && a <= b; }
bool vkg_eq(float a, float b) { return !vkg_isnan(a) && !vkg_isnan(b) && a == b; }
#endif
bool vkg_ne(float a, float b) { return !vkg_eq(a, b); }
bool vkg_lt(int a, int b) { return a < b; }
bool vkg_le(int a, int b) { return a <= b; }
bool vkg_eq(int a, int b) { return a == b; }
bool vkg_ne(int a, int b) { return a != b; }
bool vkg_eq(bool a, bool b) { return a == b; }
bool vkg_ne(bool a, bool b) { return a != b; }

int vkg_max(int a, int b) { return max(a, b); }
int vkg_min(int a, int b) { return min(a, b); }
ivec4 vkg_max(ivec4 a, ivec4 b) { return max(a, b); }
ivec4 vkg_min(ivec4 a, ivec4 b) { return min(a, b); }

#endif
