#version 450
// softmax / log_softmax over the last axis of [rows, cols], forward and backward; planned by
// vkgrad/lowering/kernels.py:plan_softmax and plan_softmax_grad. One workgroup per row.
//
// Defines:
//   MODE  0 softmax forward       y  = exp(x - max) / sum(exp(x - max))
//         1 log_softmax forward   y  = (x - max) - log(sum(exp(x - max)))
//         2 softmax backward      dx = y * (g - sum(g * y))
//         3 log_softmax backward  dx = g - exp(y) * sum(g)
//   VEC   4: rows are read as vec4 (cols % 4 == 0), else 1.
//   NV    > 0: each thread keeps its NV elements (of type T) of the row in registers, so the row
//         is read from memory once (8 bytes moved per element forward, 12 backward);
//         0: rows too long for that are streamed twice (forward: an online max-and-sum pass, then
//         the output pass; backward: the dot pass, then the output pass).
//   SUBGROUPS (see reduce_common.glsl).
// Spec constant 0: the workgroup size.
// Bindings: forward (0: x, 1: y); backward (0: y, 1: g, 2: dx).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x_id = 0) in;
#include "reduce_common.glsl"
// VKGRAD_FUSION_HOOKS

#ifndef MODE
#define MODE 0
#endif
#ifndef NV
#define NV 1
#endif

#include "vec.glsl"

#define FORWARD (MODE == 0 || MODE == 1)

#if FORWARD
layout(set = 0, binding = 0) readonly buffer X { T x[]; };
layout(set = 0, binding = 1) writeonly buffer Y { T y[]; };
#else
layout(set = 0, binding = 0) readonly buffer Y { T y[]; };
layout(set = 0, binding = 1) readonly buffer G { T g[]; };
layout(set = 0, binding = 2) writeonly buffer DX { T dx[]; };
#endif

// Every access goes through these: a fused producer or epilogue replaces it (fusion.glsl).
#include "fusion.glsl"
#ifdef VKG_LOAD_B0
#define LOAD_B0(i) VKG_LOAD_T(VKG_LOAD_B0, i)
#elif FORWARD
#define LOAD_B0(i) x[i]
#else
#define LOAD_B0(i) y[i]
#endif
#if FORWARD
#ifdef VKG_STORE_B1
#define STORE_OUT(i, v) VKG_STORE_T(VKG_STORE_B1, i, v)
#else
#define STORE_OUT(i, v) y[i] = (v)
#endif
#else
#ifdef VKG_LOAD_B1
#define LOAD_G(i) VKG_LOAD_T(VKG_LOAD_B1, i)
#else
#define LOAD_G(i) g[i]
#endif
#ifdef VKG_STORE_B2
#define STORE_OUT(i, v) VKG_STORE_T(VKG_STORE_B2, i, v)
#else
#define STORE_OUT(i, v) dx[i] = (v)
#endif
#endif

layout(push_constant) uniform Push {
    uint rows;
    uint C;        // row length in elements of T
} p;

void main() {
    uint row = vkg_group_index();
    if (row >= p.rows) return;                        // uniform: the whole workgroup leaves
    uint t = gl_LocalInvocationIndex;
    uint base = row * p.C;

#if FORWARD
#if NV > 0
    T v[NV];
    float m = VKG_NEG_INF;
    [[unroll]] for (uint i = 0u; i < NV; ++i) {
        uint c = t + i * VKG_WG;
        v[i] = c < p.C ? LOAD_B0(base + c) : T(VKG_NEG_INF);
        m = vkg_max(m, HMAX(v[i]));
    }
    m = vkg_wg_max(m);
    float s = 0.0;
    [[unroll]] for (uint i = 0u; i < NV; ++i) {
        T e = exp(v[i] - m);                          // padding: exp(-inf) = 0
        s += HSUM(e);
#if MODE == 0
        v[i] = e;
#endif
    }
    s = vkg_wg_sum(s);
#if MODE == 0
    float inv = 1.0 / s;
    [[unroll]] for (uint i = 0u; i < NV; ++i) {
        uint c = t + i * VKG_WG;
        if (c < p.C) STORE_OUT(base + c, v[i] * inv);
    }
#else
    float ls = log(s);
    [[unroll]] for (uint i = 0u; i < NV; ++i) {
        uint c = t + i * VKG_WG;
        if (c < p.C) STORE_OUT(base + c, (v[i] - m) - ls);
    }
#endif
#else  // NV == 0: online max and sum (Milakov & Gimelshein 2018), then one output pass
    float m = VKG_NEG_INF, s = 0.0;
    uint c = t;
    for (; c + 3u * VKG_WG < p.C; c += 4u * VKG_WG) {
        T x0 = LOAD_B0(base + c), x1 = LOAD_B0(base + c + VKG_WG);
        T x2 = LOAD_B0(base + c + 2u * VKG_WG), x3 = LOAD_B0(base + c + 3u * VKG_WG);
        float mn = vkg_max(m, vkg_max(vkg_max(HMAX(x0), HMAX(x1)), vkg_max(HMAX(x2), HMAX(x3))));
        if (mn != VKG_NEG_INF) {                      // else every value so far is -inf: s stays 0
            s = s * exp(m - mn) + HSUM(exp(x0 - mn) + exp(x1 - mn) + exp(x2 - mn) + exp(x3 - mn));
            m = mn;
        }
    }
    for (; c < p.C; c += VKG_WG) {
        T x0 = LOAD_B0(base + c);
        float mn = vkg_max(m, HMAX(x0));
        if (mn != VKG_NEG_INF) {
            s = s * exp(m - mn) + HSUM(exp(x0 - mn));
            m = mn;
        }
    }
    float M = vkg_wg_max(m);
    s = vkg_wg_sum(m == VKG_NEG_INF ? 0.0 : s * exp(m - M));
#if MODE == 0
    float inv = 1.0 / s;
    for (c = t; c < p.C; c += VKG_WG) STORE_OUT(base + c, exp(LOAD_B0(base + c) - M) * inv);
#else
    float ls = log(s);
    for (c = t; c < p.C; c += VKG_WG) STORE_OUT(base + c, (LOAD_B0(base + c) - M) - ls);
#endif
#endif

#else  // backward
#if MODE == 2
#define DOT_TERM(yv, gv) HSUM((yv) * (gv))
#else
#define DOT_TERM(yv, gv) HSUM(gv)
#endif
#if MODE == 2
#define GRAD(yv, gv, d) ((yv) * ((gv) - (d)))
#else
#define GRAD(yv, gv, d) ((gv) - exp(yv) * (d))
#endif
#if NV > 0
    T yv[NV], gv[NV];
    float d = 0.0;
    [[unroll]] for (uint i = 0u; i < NV; ++i) {
        uint c = t + i * VKG_WG;
        yv[i] = c < p.C ? LOAD_B0(base + c) : T(0.0);
        gv[i] = c < p.C ? LOAD_G(base + c) : T(0.0);
        d += DOT_TERM(yv[i], gv[i]);
    }
    d = vkg_wg_sum(d);
    [[unroll]] for (uint i = 0u; i < NV; ++i) {
        uint c = t + i * VKG_WG;
        if (c < p.C) STORE_OUT(base + c, GRAD(yv[i], gv[i], d));
    }
#else
    float d = 0.0;
    for (uint c = t; c < p.C; c += VKG_WG) d += DOT_TERM(LOAD_B0(base + c), LOAD_G(base + c));
    d = vkg_wg_sum(d);
    for (uint c = t; c < p.C; c += VKG_WG)
        STORE_OUT(base + c, GRAD(LOAD_B0(base + c), LOAD_G(base + c), d));
#endif
#endif
}
