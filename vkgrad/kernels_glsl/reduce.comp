#version 450
// Reduction (sum / max / min) of an input viewed as [A, R, B] into [A, B]; planned by
// vkgrad/lowering/kernels.py:plan_reduce, which documents the views it sends.
//
// Defines: OP (0 sum, 1 max, 2 min); VEC (1: float elements, 4: vec4 elements); HREDUCE (1: with
// VEC 4, the 4 lanes of a vec4 are consecutive elements of R and are combined into one float
// before the workgroup reduction); SUBGROUPS (see reduce_common.glsl); NOUT (default 1): reduce
// NOUT operands of one shape in the same pass (a multi-output fusion: each thread loads element
// i of all of them through the generated VKG_LOADN_B0 and keeps NOUT accumulators; VEC 1 then).
// NOUT > 1 without hooks reads/writes output o at o * XSTRIDE / o * YSTRIDE (split partials).
// MEMBERS (a horizontal group, plan_horizontal_reduce): reductions of any shapes in one launch.
// The generated `Params vkg_member(uint g)` gives workgroup g's member, the member's first
// workgroup, its offset in the partials and the push constants below for it; member m's
// element i loads through the generated VKG_LOADM_B0(m, i) (else x[off + i]: the partials of
// a first launch) and its results store through VKG_STOREN_B1(m, i, v), or, when the member is
// split (S > 1) and SPLIT_OUT is 1, into the partials at binding 2 at off + i. VEC 1 then.
// Spec constant 0: the workgroup size WG (a power of two).
//
// A workgroup is a TB x TR grid of threads (TB * TR = WG, both powers of two): TB threads along
// B, the fastest-moving index, so a subgroup's loads are contiguous in memory, and TR threads
// striding along R. Each workgroup reduces one (a, tile of TB b's, chunk of R) and writes
// y[(a * S + split) * B + b]: with S = 1 that is the output [A, B]; with S > 1 it is the partials
// [A, S, B] that a second launch of this same shader reduces (R := S).
// Element addresses are x[a * sA + r * sR + b * sB] (units of elements of type T), which also
// lets the planner run small rows as one thread per row (b := row, sB := R).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x_id = 0) in;
#include "reduce_common.glsl"
#define REDUCE_PARAMS                                                                  \
    uint R;       /* reduced length (elements of T) of the whole row */                  \
    uint sA;      /* strides of a, r, b (elements of T) */                               \
    uint sR;                                                                             \
    uint sB;                                                                             \
    uint B;       /* b extent (elements of T); also the row length of y */               \
    uint chunk;   /* R elements per split */                                             \
    uint S;       /* splits */                                                           \
    uint nbt;     /* b tiles: ceil(B / TB) */                                            \
    uint TB;      /* threads along b: a power of two dividing WG */                      \
    uint total;   /* workgroups that do work: A * S * nbt */
#ifdef MEMBERS
struct Params { uint member; uint first; uint off; REDUCE_PARAMS };   // vkg_member(g): generated
#endif
// VKGRAD_FUSION_HOOKS

#ifndef OP
#define OP 0
#endif
#ifndef HREDUCE
#define HREDUCE 0
#endif

#if OP == 0
#define COMBINE(a, b) ((a) + (b))
#define IDENT 0.0
#define SUBGROUP_OP subgroupAdd
#elif OP == 1
#define COMBINE(a, b) vkg_max(a, b)
#define IDENT VKG_NEG_INF
#define SUBGROUP_OP vkg_subgroup_max
#elif OP == 2
#define COMBINE(a, b) vkg_min(a, b)
#define IDENT VKG_POS_INF
#define SUBGROUP_OP vkg_subgroup_min
#else
#error "OP must be 0 (sum), 1 (max) or 2 (min)"
#endif

#include "vec.glsl"

#if HREDUCE
#if VEC != 4
#error "HREDUCE needs VEC 4"
#endif
#define AT float
#define TO_AT(v) COMBINE(COMBINE((v).x, (v).y), COMBINE((v).z, (v).w))
#else
#define AT T
#define TO_AT(v) (v)
#endif

layout(set = 0, binding = 0) readonly buffer X { T x[]; };
layout(set = 0, binding = 1) writeonly buffer Y { AT y[]; };

// Loads of x and stores of y, through fused producers / epilogues when the lowering made them
// (fusion.glsl).
#include "fusion.glsl"
#ifdef VKG_LOAD_B0
#define LOAD_X(i) VKG_LOAD_T(VKG_LOAD_B0, i)
#else
#define LOAD_X(i) x[i]
#endif
#ifdef VKG_STORE_B1
#if HREDUCE
#define STORE_Y(i, v) VKG_STORE_B1(i, v)
#else
#define STORE_Y(i, v) VKG_STORE_T(VKG_STORE_B1, i, v)
#endif
#else
#define STORE_Y(i, v) y[i] = (v)
#endif

// LOADN(i, v): element i of each of the NOUT operands into v[o]; STOREN(o, i, v): result o.
#ifndef NOUT
#define NOUT 1
#endif
#ifdef MEMBERS
#if VEC != 1 || NOUT != 1
#error "MEMBERS needs VEC 1 and NOUT 1"
#endif
#ifdef VKG_LOADM_B0
#define LOADN(i, v) v[0] = VKG_LOADM_B0(p.member, i)
#define LOAD4(i, s, v0, v1, v2, v3) VKG_LOADM4_B0(p.member, i, s, v0[0], v1[0], v2[0], v3[0])
#else
#define LOADN(i, v) v[0] = x[p.off + (i)]
#endif
#if SPLIT_OUT
layout(set = 0, binding = 2) writeonly buffer Partials { float partials[]; };
#define STOREN(o, i, v) { if (p.S > 1u) partials[p.off + (i)] = (v);                     \
                          else VKG_STOREN_B1(p.member, i, v); }
#else
#define STOREN(o, i, v) VKG_STOREN_B1(p.member, i, v)
#endif
#elif NOUT == 1
#define LOADN(i, v) v[0] = LOAD_X(i)
#define STOREN(o, i, v) STORE_Y(i, v)
#else
#if VEC != 1
#error "NOUT > 1 needs VEC 1"
#endif
#ifdef VKG_LOADN_B0
#define LOADN(i, v) VKG_LOADN_B0(i, v)
#else
#define LOADN(i, v) [[unroll]] for (uint o_ = 0u; o_ < NOUT; ++o_) v[o_] = x[o_ * XSTRIDE + (i)]
#endif
#ifdef VKG_STOREN_B1
#define STOREN(o, i, v) VKG_STOREN_B1(o, i, v)
#else
#define STOREN(o, i, v) y[(o) * YSTRIDE + (i)] = (v)
#endif
#endif

#ifndef LOAD4      // LOAD4(i, s, v0, v1, v2, v3): elements i, i + s, i + 2s, i + 3s
#define LOAD4(i, s, v0, v1, v2, v3) \
    LOADN(i, v0); LOADN((i) + (s), v1); LOADN((i) + 2u * (s), v2); LOADN((i) + 3u * (s), v3)
#endif

#ifndef MEMBERS
layout(push_constant) uniform Push { REDUCE_PARAMS } p;
#endif

shared AT sh[VKG_WG];

void main() {
    uint g = vkg_group_index();
#ifdef MEMBERS
    Params p = vkg_member(g);                         // uniform: one member per workgroup
    g -= p.first;
#endif
    if (g >= p.total) return;                         // uniform: the whole workgroup leaves
    uint bt = g % p.nbt;
    uint q = g / p.nbt;
    uint split = q % p.S;
    uint a = q / p.S;

    uint tid = vkg_tid();
    uint TB = p.TB;
    uint lgTB = uint(findLSB(TB));
    uint tb = tid & (TB - 1u);
    uint tr = tid >> lgTB;
    uint TR = VKG_WG >> lgTB;
    uint b = bt * TB + tb;
    uint r0 = split * p.chunk;
    uint r1 = min(p.R, r0 + p.chunk);

    // Four independent accumulators (per operand): four loads in flight per thread per iteration.
    T acc0[NOUT], acc1[NOUT], acc2[NOUT], acc3[NOUT];
    [[unroll]] for (uint o = 0u; o < NOUT; ++o) {
        acc0[o] = T(IDENT); acc1[o] = T(IDENT); acc2[o] = T(IDENT); acc3[o] = T(IDENT);
    }
    if (b < p.B) {
        uint r = r0 + tr;
        uint step = TR * p.sR;
        uint i = a * p.sA + b * p.sB + r * p.sR;
        T v0[NOUT], v1[NOUT], v2[NOUT], v3[NOUT];
        for (; r + 3u * TR < r1; r += 4u * TR, i += 4u * step) {
            LOAD4(i, step, v0, v1, v2, v3);
            [[unroll]] for (uint o = 0u; o < NOUT; ++o) {
                acc0[o] = COMBINE(acc0[o], v0[o]);
                acc1[o] = COMBINE(acc1[o], v1[o]);
                acc2[o] = COMBINE(acc2[o], v2[o]);
                acc3[o] = COMBINE(acc3[o], v3[o]);
            }
        }
        for (; r < r1; r += TR, i += step) {
            LOADN(i, v0);
            [[unroll]] for (uint o = 0u; o < NOUT; ++o) acc0[o] = COMBINE(acc0[o], v0[o]);
        }
    }
    [[unroll]] for (uint o = 0u; o < NOUT; ++o) {
        AT acc = TO_AT(COMBINE(COMBINE(acc0[o], acc1[o]), COMBINE(acc2[o], acc3[o])));

        // Combine the TR threads of each b: first inside subgroups (threads tid and tid ^ m,
        // m >= TB, share b), then a shared-memory tree over what is left.
        uint n = VKG_WG;                                  // partials in sh, TB per row
#if SUBGROUPS
        uint W = vkg_subgroup_width();
        if (TB < W) {
            if (TB == 1u) {
                acc = SUBGROUP_OP(acc);
            } else {
                for (uint m = TB; m < W; m <<= 1u) acc = COMBINE(acc, subgroupShuffleXor(acc, m));
            }
            n = gl_NumSubgroups * TB;
            if (gl_SubgroupInvocationID < TB) sh[gl_SubgroupID * TB + gl_SubgroupInvocationID] = acc;
        } else {
            sh[tid] = acc;
        }
#else
        sh[tid] = acc;
#endif
        barrier();
        for (uint h = n >> 1u; h >= TB; h >>= 1u) {
            if (tid < h) sh[tid] = COMBINE(sh[tid], sh[tid + h]);
            barrier();
        }
        if (tid < TB && b < p.B) STOREN(o, (a * p.S + split) * p.B + b, sh[tid]);
        if (NOUT > 1) barrier();                          // sh is the next operand's
    }
}
