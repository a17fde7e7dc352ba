#version 450
// Winograd F(2x2, 3x3) for a 3x3, stride-1, undilated, ungrouped fp32 convolution (Lavin and
// Gray 2015; correlation, as a CNN's): its three transforms, one WG_MODE each, around a batched
// GEMM that the matmul kernel runs (lowering/winograd.py plans all four):
//     y[n, o, 2i + a, 2j + b] = (A^T [ sum_c U[., c, o] * V[., c, t] ] A)[a, b]
//     U[e, c, o] = (G w[o, c] G^T)[e]                 (e = xi * 4 + nu: 16 matrices)
//     V[e, c, t] = (B^T d[t, c] B)[e]                 d: tile t's 4 x 4 input patch of channel c
//     M[e, o, t] = sum_c U[e, c, o] V[e, c, t]        (the GEMM: [16, O, Tp] = U^T V, or
//                                                       with WG_MT [16, Tp, O] = V^T U)
// t = (n, i, j) over N x TH x TW tiles of 2 x 2 outputs, TH = ceil(OH / 2), TW = ceil(OW / 2);
// tile t reads input rows 2i - ph .. 2i - ph + 3 and columns 2j - pw .. + 3, 0 outside x (the
// padding, and the tiles past an odd edge: their outputs past OH, OW are not stored). V and M
// hold Tp >= T columns (T rounded up to 4: vec4 loads in the GEMM); columns past T are 0.
// WG_MODE 0, the weights, a thread per (c, o): w [O, C, 3, 3] (WG_WL 0), or w0 [C, O, 3, 3]
//   with its window flipped (WG_WL 1: an input gradient's kernel read in place, as
//   conv_gemm.comp's CG_WL 1 with one group: w[o, c, r] = w0[c, o, 8 - r]). Bindings 0 w, 1 U.
// WG_MODE 1, the input, a thread per (c, t): x [N, C, H, W]. Bindings 0 x, 1 V.
// WG_MODE 2, the output, a thread per (o, t) (WG_MT: per (t, o)): out [N, O, OH, OW].
//   Bindings 0 M, 1 out.
// The weight gradient, by the same algebra transposed (y = A^T (U . V) A is linear in the
// weights: dL/dw = G^T [(A dy A^T) . V] G, summed over tiles and the batch):
//     Y[e, o, t] = (A dy[t, o] A^T)[e]                dy: tile t's 2 x 2 output gradient
//     M[e, o, c] = sum_t Y[e, o, t] V[e, c, t]         (the GEMM: [16, O, C] = Y V^T; tall K)
//     dw[c, o] = G^T M[., o, c] G                      (3 x 3; [C, O, 3, 3]: the weight
//                                                      gradient's convolution's own result)
// WG_MODE 3, the output gradient, a thread per (o, t): dy [N, O, OH, OW] (0 past its edges).
//   Bindings 0 dy, 1 Y.
// WG_CN (modes 1 and 3): x is [C, N, H, W], dy [O, N, OH, OW] (the weight gradient's
//   convolution's operands in their own layouts, not read as views of x and dy).
// WG_MODE 4, the weight gradient, a thread per (o, c): bindings 0 M, 1 dw.
// Grid: lowering/launch.py's grid() over ceil(threads / 256) groups.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// VKGRAD_FUSION_HOOKS
// VKG_STORE_B1 (fusion.glsl): WG_MODE 2's and 4's outputs go through a fused epilogue.

layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer In { float src[]; };
layout(std430, binding = 1) writeonly buffer Out { float dst[]; };
layout(push_constant) uniform Push {
    uint N; uint C; uint H; uint W; uint O; uint OH; uint OW; int ph; int pw;
    uint TH; uint TW; uint Tp;
} p;

// (v0 - v2, v1 + v2, v2 - v1, v1 - v3): B^T v
vec4 bt(vec4 v) { return vec4(v.x - v.z, v.y + v.z, v.z - v.y, v.y - v.w); }
// (v0, (v0 + v1 + v2) / 2, (v0 - v1 + v2) / 2, v2): G v
vec4 gv(vec3 v) { return vec4(v.x, 0.5 * (v.x + v.y + v.z), 0.5 * (v.x - v.y + v.z), v.z); }
// (v0 + v1 + v2, v1 - v2 - v3): A^T v
vec2 at(vec4 v) { return vec2(v.x + v.y + v.z, v.y - v.z - v.w); }
// (v0, v0 + v1, v0 - v1, -v1): A v
vec4 av(vec2 v) { return vec4(v.x, v.x + v.y, v.x - v.y, -v.y); }
// (v0 + (v1 + v2) / 2, (v1 - v2) / 2, (v1 + v2) / 2 + v3): G^T v
vec3 gt(vec4 v) {
    return vec3(v.x + 0.5 * (v.y + v.z), 0.5 * (v.y - v.z), 0.5 * (v.y + v.z) + v.w);
}

void main() {
    const uint e = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256u
                   + gl_LocalInvocationID.x;
    const uint T = p.N * p.TH * p.TW;
#if WG_MODE == 0
    const uint CO = p.C * p.O;
    if (e >= CO) return;
    const uint c = e / p.O, o = e % p.O;
    float g[9];
    [[unroll]] for (uint r = 0u; r < 9u; r++)
        g[r] = WG_WL == 1 ? src[(c * p.O + o) * 9u + 8u - r] : src[(o * p.C + c) * 9u + r];
    // G g: a column of g at a time (its 3 rows), then G (G g)^T's rows
    vec4 col[3];
    [[unroll]] for (uint b = 0u; b < 3u; b++) col[b] = gv(vec3(g[b], g[3u + b], g[6u + b]));
    [[unroll]] for (uint xi = 0u; xi < 4u; xi++) {
        const vec4 u = gv(vec3(col[0][xi], col[1][xi], col[2][xi]));
        [[unroll]] for (uint nu = 0u; nu < 4u; nu++) dst[(xi * 4u + nu) * CO + e] = u[nu];
    }
#elif WG_MODE == 1
    const uint CT = p.C * p.Tp;
    if (e >= CT) return;
    const uint c = e / p.Tp, t = e % p.Tp;
    vec4 d[4];
    const uint tt = min(t, T - 1u), n = tt / (p.TH * p.TW), ij = tt % (p.TH * p.TW);
    const int h0 = int(2u * (ij / p.TW)) - p.ph, w0 = int(2u * (ij % p.TW)) - p.pw;
    const uint plane = (WG_CN == 1 ? c * p.N + n : n * p.C + c) * p.H * p.W;
    [[unroll]] for (uint a = 0u; a < 4u; a++) {
        [[unroll]] for (uint b = 0u; b < 4u; b++) {
            const int h = h0 + int(a), w = w0 + int(b);
            const bool ok = t < T && uint(h) < p.H && uint(w) < p.W;
            const float v = src[ok ? plane + uint(h) * p.W + uint(w) : 0u];
            d[a][b] = ok ? v : 0.0;
        }
    }
    // B^T d: rows combined as vec4s, then each row times B
    const vec4 r[4] = vec4[4](d[0] - d[2], d[1] + d[2], d[2] - d[1], d[1] - d[3]);
    [[unroll]] for (uint xi = 0u; xi < 4u; xi++) {
        const vec4 v = bt(r[xi]);
        [[unroll]] for (uint nu = 0u; nu < 4u; nu++) dst[(xi * 4u + nu) * CT + e] = v[nu];
    }
#elif WG_MODE == 3
    const uint OT = p.O * p.Tp;
    if (e >= OT) return;
    const uint o = e / p.Tp, t = e % p.Tp;
    const uint tt = min(t, T - 1u), n = tt / (p.TH * p.TW), ij = tt % (p.TH * p.TW);
    const uint h0 = 2u * (ij / p.TW), w0 = 2u * (ij % p.TW);
    const uint plane = (WG_CN == 1 ? o * p.N + n : n * p.O + o) * p.OH * p.OW;
    vec2 q[2];
    [[unroll]] for (uint a = 0u; a < 2u; a++) {
        [[unroll]] for (uint b = 0u; b < 2u; b++) {
            const bool ok = t < T && h0 + a < p.OH && w0 + b < p.OW;
            const float v = src[ok ? plane + (h0 + a) * p.OW + w0 + b : 0u];
            q[a][b] = ok ? v : 0.0;
        }
    }
    const vec2 r[4] = vec2[4](q[0], q[0] + q[1], q[0] - q[1], -q[1]);    // A q
    [[unroll]] for (uint xi = 0u; xi < 4u; xi++) {
        const vec4 v = av(r[xi]);
        [[unroll]] for (uint nu = 0u; nu < 4u; nu++) dst[(xi * 4u + nu) * OT + e] = v[nu];
    }
#elif WG_MODE == 4
    const uint CO = p.C * p.O;
    if (e >= CO) return;
    const uint o = e / p.C, c = e % p.C;
    vec4 m[4];
    [[unroll]] for (uint xi = 0u; xi < 4u; xi++)
        [[unroll]] for (uint nu = 0u; nu < 4u; nu++) m[xi][nu] = src[(xi * 4u + nu) * CO + e];
    const vec4 r[3] = vec4[3](m[0] + 0.5 * (m[1] + m[2]), 0.5 * (m[1] - m[2]),
                              0.5 * (m[1] + m[2]) + m[3]);                     // G^T m
    [[unroll]] for (uint a = 0u; a < 3u; a++) {
        const vec3 v = gt(r[a]);
        [[unroll]] for (uint b = 0u; b < 3u; b++) {
#ifdef VKG_STORE_B1
            VKG_STORE_B1((c * p.O + o) * 9u + a * 3u + b, v[b]);
#else
            dst[(c * p.O + o) * 9u + a * 3u + b] = v[b];
#endif
        }
    }
#else
    const uint OT = p.O * p.Tp;
    if (e >= OT) return;
    // WG_MT: M is [16, Tp, O] (the GEMM's columns the features: fewer than its 128-row
    // tile); a thread per (t, o) then, its loads contiguous
    const uint o = WG_MT == 1 ? e % p.O : e / p.Tp, t = WG_MT == 1 ? e / p.O : e % p.Tp;
    if (t >= T) return;
    vec4 m[4];
    [[unroll]] for (uint xi = 0u; xi < 4u; xi++)
        [[unroll]] for (uint nu = 0u; nu < 4u; nu++) m[xi][nu] = src[(xi * 4u + nu) * OT + e];
    const vec4 r0 = m[0] + m[1] + m[2], r1 = m[1] - m[2] - m[3];    // A^T m
    const vec2 y[2] = vec2[2](at(r0), at(r1));
    const uint n = t / (p.TH * p.TW), ij = t % (p.TH * p.TW);
    const uint h0 = 2u * (ij / p.TW), w0 = 2u * (ij % p.TW);
    const uint plane = (n * p.O + o) * p.OH * p.OW;
    [[unroll]] for (uint a = 0u; a < 2u; a++)
        [[unroll]] for (uint b = 0u; b < 2u; b++)
            if (h0 + a < p.OH && w0 + b < p.OW) {
#ifdef VKG_STORE_B1
                VKG_STORE_B1(plane + (h0 + a) * p.OW + w0 + b, y[a][b]);
#else
                dst[plane + (h0 + a) * p.OW + w0 + b] = y[a][b];
#endif
            }
#endif
}
