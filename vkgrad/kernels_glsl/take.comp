#version 450
// take (gather along one axis): x viewed as [A, N, B], idx [J] (int32), out [A, J, B],
// out[a, j, b] = x[a, clamp(idx[j], 0, N - 1), b]; planned by vkgrad/lowering/kernels.py:plan_take.
// Out-of-range indices are CLAMPED (numpy's mode="clip"): negative ones read row 0, too large
// ones row N - 1. Python-style negative indices must be wrapped by the caller beforehand.
//
// One thread per output element (a vec4 of them when VEC 4, i.e. B % 4 == 0): consecutive
// threads write consecutive addresses and read one contiguous row of x per (a, j).
// Defines: VEC (1 or 4); INT (1: the values are i32 or bool, moved as 32-bit ints, bit for bit).
// Spec constant 0: the workgroup size.
// Bindings: 0: x, 1: idx, 2: out.
#extension GL_GOOGLE_include_directive : require
layout(local_size_x_id = 0) in;
#include "reduce_common.glsl"
// VKGRAD_FUSION_HOOKS

#include "vec.glsl"

#if defined(INT) && INT
#undef T
#if VEC == 4
#define T ivec4
#else
#define T int
#endif
#endif

layout(set = 0, binding = 0) readonly buffer X { T x[]; };
layout(set = 0, binding = 1) readonly buffer I { int idx[]; };
layout(set = 0, binding = 2) writeonly buffer O { T o[]; };

#include "fusion.glsl"
#ifdef VKG_LOAD_B0
#define LOAD_X(i) VKG_LOAD_T(VKG_LOAD_B0, i)
#else
#define LOAD_X(i) x[i]
#endif
#ifdef VKG_LOAD_B1
#define LOAD_IDX(j) VKG_LOAD_B1(j)
#else
#define LOAD_IDX(j) idx[j]
#endif
#ifdef VKG_STORE_B2
#define STORE_O(i, v) VKG_STORE_T(VKG_STORE_B2, i, v)
#else
#define STORE_O(i, v) o[i] = (v)
#endif

layout(push_constant) uniform Push {
    uint N;
    uint J;
    uint B;        // row length in elements of T
    uint total;    // A * J * B
} p;

void main() {
    uint i = vkg_group_index() * VKG_WG + gl_LocalInvocationIndex;
    if (i >= p.total) return;
    uint row = i / p.B;
    uint b = i - row * p.B;
    uint a = row / p.J;
    uint j = row - a * p.J;
    uint n = uint(clamp(LOAD_IDX(j), 0, int(p.N) - 1));
    STORE_O(i, LOAD_X((a * p.N + n) * p.B + b));
}
