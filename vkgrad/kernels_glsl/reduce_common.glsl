// reduce_common.glsl: helpers of the reduction, softmax and take kernels
// (planned by vkgrad/lowering/kernels.py).
//
// Include it AFTER the shader's `layout(local_size_x_id = 0) in;` line: the helpers size their
// shared memory by gl_WorkGroupSize.x (a specialization constant). Workgroups are 1-D, with a
// power-of-two size.
//
// SUBGROUPS (default 1) uses KHR subgroup operations (Vulkan 1.1): a workgroup reduction is one
// subgroupAdd/Max/Min, a write per subgroup into shared memory, one barrier and a read of the
// (at most 32 on NVIDIA at 1024 threads) subgroup partials, instead of log2(WG) barrier steps of a
// shared-memory tree. SUBGROUPS=0 is the portable fallback (the tests run both).
//
// Assumed, as by every desktop implementation (and ggml-vulkan): subgroup sizes are powers of two
// and, when the workgroup size is a multiple of the subgroup size, subgroups are full. Code that
// relies on WHICH threads share a subgroup uses vkg_tid() (below), which numbers threads in
// subgroup order, never gl_LocalInvocationIndex.

#include "ieee.glsl"

#ifndef SUBGROUPS
#define SUBGROUPS 1
#endif

#if SUBGROUPS
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#endif

#define VKG_WG gl_WorkGroupSize.x
#define VKG_NEG_INF uintBitsToFloat(0xff800000u)
#define VKG_POS_INF uintBitsToFloat(0x7f800000u)

// One slot per thread: enough for the subgroup partials and for the SUBGROUPS=0 tree.
shared float vkg_red[VKG_WG];

// Workgroups are launched on a (x, y) grid because a dimension holds at most 65535 groups;
// the planner sends the real count and surplus groups return at once (a uniform exit).
uint vkg_group_index() { return gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x; }

// This thread's index in 0..WG-1, in subgroup order (see above).
uint vkg_tid() {
#if SUBGROUPS
    return gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID;
#else
    return gl_LocalInvocationIndex;
#endif
}

// Threads of one subgroup that actually exist (a workgroup smaller than the subgroup leaves
// the rest of its lanes empty).
uint vkg_subgroup_width() {
#if SUBGROUPS
    return min(gl_SubgroupSize, VKG_WG);
#else
    return 1u;
#endif
}

// float NAME(float v): every thread of the workgroup gets COMBINE over all threads' v, combined in
// the same order in every thread. Call from uniform control flow. Starts with a barrier so back to
// back calls never overwrite vkg_red while another thread still reads it.
#if SUBGROUPS
#define VKG_WG_REDUCE(NAME, SUBGROUP_OP, COMBINE)                                         \
    float NAME(float v) {                                                                 \
        v = SUBGROUP_OP(v);                                                               \
        if (gl_NumSubgroups == 1u) return v;                                              \
        barrier();                                                                        \
        if (subgroupElect()) vkg_red[gl_SubgroupID] = v;                                  \
        barrier();                                                                        \
        float r = vkg_red[0];                                                             \
        for (uint i = 1u; i < gl_NumSubgroups; ++i) r = COMBINE(r, vkg_red[i]);           \
        return r;                                                                         \
    }
#else
#define VKG_WG_REDUCE(NAME, SUBGROUP_OP, COMBINE)                                         \
    float NAME(float v) {                                                                 \
        uint t = gl_LocalInvocationIndex;                                                 \
        barrier();                                                                        \
        vkg_red[t] = v;                                                                   \
        for (uint h = VKG_WG / 2u; h > 0u; h >>= 1u) {                                    \
            barrier();                                                                    \
            if (t < h) vkg_red[t] = COMBINE(vkg_red[t], vkg_red[t + h]);                  \
        }                                                                                 \
        barrier();                                                                        \
        return vkg_red[0];                                                                \
    }
#endif

#if SUBGROUPS
// subgroupMax/Min of a NaN are undefined in SPIR-V: a NaN anywhere in the subgroup is the result
// (numpy's max), found with one subgroupOr beside the max.
float vkg_subgroup_max(float v) {
    return subgroupOr(uint(vkg_isnan(v))) != 0u ? VKG_NAN : subgroupMax(v);
}
float vkg_subgroup_min(float v) {
    return subgroupOr(uint(vkg_isnan(v))) != 0u ? VKG_NAN : subgroupMin(v);
}
vec4 vkg_subgroup_max(vec4 v) {
    return mix(subgroupMax(v), vec4(VKG_NAN), notEqual(subgroupOr(uvec4(vkg_isnan(v))), uvec4(0u)));
}
vec4 vkg_subgroup_min(vec4 v) {
    return mix(subgroupMin(v), vec4(VKG_NAN), notEqual(subgroupOr(uvec4(vkg_isnan(v))), uvec4(0u)));
}
#endif

VKG_WG_REDUCE(vkg_wg_sum, subgroupAdd, vkg_add)
VKG_WG_REDUCE(vkg_wg_max, vkg_subgroup_max, vkg_max)
VKG_WG_REDUCE(vkg_wg_min, vkg_subgroup_min, vkg_min)
