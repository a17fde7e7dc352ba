#version 450
// fp32 1-D and 2-D convolution (no lhs dilation) as an implicit GEMM on the matmul kernel's
// tiling (matmul.comp; the product step is gemm_tile.glsl's, shared): for each group g,
//     C[f, q] = sum_k W[f, k] X[k, q]
//     f  an output feature of the group (Og of them), the GEMM's rows
//     q = (n, oh, ow), an output position (N * OH * OW), the GEMM's columns
//     k   an input feature c and window offset (kh, kw) (I * KH * KW)
//     W[f, k] = w[g*Og + f, c, kh, kw]       (CG_CIN: w[g*Og + f, kh, kw, c])
//     X[k, q] = x[n, g*I + c, oh*sh + kh*rd_h - ph, ow*sw + kw*rd_w - pw]  (0 outside x)
//     out[n, g*Og + f, oh, ow] = C[f, q]
// Layouts as conv.comp's (vkgrad/primitives/convolution.py): x [N, C, H, W], w [O, I, KH, KW],
// out [N, O, OH, OW]; a 1-D convolution has H = KH = OH = 1. Planned by vkgrad/lowering/conv.py
// for the forward and both gradients (convolutions too).
//
// Scheme (matmul.comp's `large`): a workgroup of TX x TY threads computes a BM x BN block of C,
// each thread TM x TN accumulators in 4 x 4 strips read from shared memory as vec4s; K advances
// BK at a time through two shared stages: while the threads compute on one, the next step's
// elements load into registers and are stored to the other afterwards (one barrier per step).
// CG_ALWAYS_PREFETCH: no branch around the prefetch (the step past the end loads zeros), a
// per-tile choice as the matmul's (lowering/matmul.py: it sped up `large`, slowed `medium`).
//
// Loads: each thread loads LA (LB) slots of 4 consecutive k for one row (column) and stores
// them transposed into the k-major tiles. What does not change along k is decoded once per
// slot before the loop: the feature's row of w, the position's image plane and window origin.
// Out-of-range elements load index 0 and are replaced by 0 (no load outside a buffer, whatever
// the compiler makes of the selects). The k order is a define:
// - CG_CIN = 1 (I % BK == 0): k = (kh, kw, c), channels innermost. A k step is BK channels at
//   one window offset, the same for the whole workgroup, so a position's padding test is one
//   per slot and step (not per element), and the window offset moves on only every I / BK
//   steps; x's 4 elements of a slot are H*W apart; w comes relaid out [O, KH, KW, I] by
//   conv_relayout.comp (the planner's first dispatch), so its 4 are one vec4.
// - CG_CIN = 0: k = (c, kh, kw), w's storage order: w's 4 elements of a slot are one vec4 when
//   K % 4 == 0 (CG_VEC_W); each element of x is tested on its own. For long windows (a weight
//   gradient, whose window is the output gradient: x's elements are then contiguous along k).
// Operand layouts (defines; lowering/conv_layouts.py finds them): the convolution's operands
// may be views of other buffers, read in place instead of copied first:
// - CG_XL = 1: x is x0 [I, G*N, H, W] viewed [N, G*I, H, W] (x[n, g*I + c] = x0[c, g*N + n]:
//   a weight gradient's input, the batch its channels): a channel is G*N planes on.
// - CG_WL = 1: w [G*Og, I, KH, KW] is w0 [G*I, Og, KH, KW] with (O, I) swapped per group and
//   every spatial axis flipped (an input gradient's kernel): w[g*Og + f, c, r] =
//   w0[g*I + c, f, KP-1-r]. CG_WL = 2: w is w0 [I, O, KH, KW] with its first two axes swapped
//   (a weight gradient's output gradient): w[f, c, r] = w0[c, f, r].
// With CG_CIN, conv_relayout.comp reads those layouts (w comes relaid out), unless CG_W_DIRECT:
// then the A tile loads w in its own layout, 4 scalars a slot.
// Split-K: workgroup z = s * G + g sums k in [s * chunk, (s + 1) * chunk) and writes slice s of
// out, [splits, N, O, OH, OW], which a reduction then sums (chunk >= K: no split).
// Defines: CG_BM, CG_BN, CG_BK, CG_TM, CG_TN, CG_ALWAYS_PREFETCH (the tile), CG_CIN,
// CG_VEC_W (vec4 loads of w), CG_VEC_O (vec4 stores: OH * OW % 4 == 0), CG_XL, CG_WL,
// CG_W_DIRECT (the layouts). Bindings: 0 x, 1 w (relaid out with CG_CIN but not CG_W_DIRECT),
// 2 out. Grid: (ceil(N*OH*OW / BN), ceil(Og / BM), splits * G).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// VKGRAD_FUSION_HOOKS
// VKG_STORE_B2 (fusion.glsl): out's elements go through a fused epilogue (bias, activation).

const uint BM = CG_BM, BN = CG_BN, BK = CG_BK, TM = CG_TM, TN = CG_TN;
const uint TX = BN / TN, TY = BM / TM, T1 = TX * TY;
layout(local_size_x = T1) in;
const uint SA = BM / 4u + 1u, SB = BN / 4u + 1u;
const uint STAGE = BK * (SA + SB);        // one stage of A and B tiles, in vec4s
const uint LA = (BM * BK / 4u) / T1;      // slots of 4 k per thread: A, B
const uint LB = (BN * BK / 4u) / T1;
const bool CIN = CG_CIN != 0, VEC_W = CG_VEC_W != 0, VEC_O = CG_VEC_O != 0;
const bool ALWAYS_PREFETCH = CG_ALWAYS_PREFETCH != 0;
const uint XL = CG_XL;
// w's layout as the A tile reads it: relaid out (plain) where CIN reads conv_relayout's copy
const bool W_DIRECT = CG_W_DIRECT != 0;
const uint WL = CIN && !W_DIRECT ? 0u : CG_WL;
shared vec4 smem[2u * STAGE];
#include "gemm_tile.glsl"

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Wf { float w[]; };
layout(std430, binding = 1) readonly buffer Wv { vec4 w_v[]; };
layout(std430, binding = 2) writeonly buffer Of { float o[]; };
layout(std430, binding = 2) writeonly buffer Ov { vec4 o_v[]; };

#include "conv_common.glsl"     // push constants p, input_at

void main() {
    const uint stid = gl_LocalInvocationID.x;
    const uint tx = stid % TX, ty = stid / TX;
    const uint G = p.C / p.I;
    const uint g = gl_WorkGroupID.z % G, split = gl_WorkGroupID.z / G;
    const uint P = p.OH * p.OW, M = p.N * P;
    const uint KP = p.KH * p.KW, K = p.I * KP;
    const uint HW = p.H * p.W;
    const uint XC = XL == 1u ? G * p.N * HW : HW;               // x: from a channel to the next
    // w: from an input feature to the next, and a window offset's place (flipped: WL 1)
    const uint WC = WL == 0u ? KP : (WL == 1u ? p.Og * KP : p.O * KP);
#define W_TAP(r) (WL == 1u ? KP - 1u - (r) : (r))
    const uint kbegin = split * p.chunk, kend = min(K, kbegin + p.chunk);
    const uint q0 = gl_WorkGroupID.x * BN, f0 = gl_WorkGroupID.y * BM;
    // every slot of this thread has the same 4 k offsets in the step (T1 % (BK / 4) == 0)
    const uint kq = (stid % (BK / 4u)) * 4u;

    // A's slots: a feature's row of w (clamped in range; `a_live` zeroes it)
    uint a_r[LA], a_row[LA];
    bool a_live[LA];
    [[unroll]] for (uint l = 0u; l < LA; l++) {
        uint kk_;
        tile_pos(stid, l, BM, true, a_r[l], kk_);
        a_live[l] = f0 + a_r[l] < p.Og;
        const uint f = min(f0 + a_r[l], p.Og - 1u);
        a_row[l] = WL == 1u ? g * p.Og * K + f * KP : (g * p.Og + f) * (WL == 0u ? K : KP);
    }
    // B's slots: a position's input plane (channel 0 of the group) plus its window origin, and
    // the origin itself for the padding tests (a dead position's row is far outside)
    uint b_r[LB];
    int b_base[LB], b_h0[LB], b_w0[LB];
    [[unroll]] for (uint l = 0u; l < LB; l++) {
        uint kk_;
        tile_pos(stid, l, BN, true, b_r[l], kk_);
        uint q = q0 + b_r[l];
        bool live = q < M;
        q = live ? q : 0u;
        uint n = q / P, pp = q % P;
        int h0 = int((pp / p.OW) * p.sh) - p.ph, w0 = int((pp % p.OW) * p.sw) - p.pw;
        const uint plane = XL == 1u ? (g * p.N + n) * HW : (n * p.C + g * p.I) * HW;
        b_base[l] = int(plane) + h0 * int(p.W) + w0;
        b_h0[l] = live ? h0 : -(1 << 30);
        b_w0[l] = w0;
    }

    // The k state. CIN: the step's first channel and window offset (uniform). Else: this
    // thread's k = k0 + kq in (c, kh, kw), moved on by BK's digits with carries.
    uint sc, skh, skw;
    {
        uint k = kbegin + (CIN ? 0u : kq);
        uint kp = CIN ? k / p.I : k % KP;
        sc = CIN ? k % p.I : k / KP;
        skh = kp / p.KW;
        skw = kp % p.KW;
    }

    vec4 areg[LA], breg[LB];
    // Global -> registers for the step at k0, then the k state moves on to the next step.
#define LOAD_TILES(k0)                                                                          \
    if (CIN) {                                                                                  \
        const bool in_k = (k0) < kend;             /* whole steps: K, chunk multiples of BK */ \
        const uint wk = skh * p.KW + skw, dh = skh * p.rd_h, dw = skw * p.rd_w;                 \
        const uint c = sc + kq;                                                                 \
        [[unroll]] for (uint l = 0u; l < LA; l++) {                                             \
            const bool ok = in_k && a_live[l];                                                  \
            if (!W_DIRECT) {                /* conv_relayout's copy: [O, KH, KW, I] */          \
                const vec4 v = w_v[ok ? (a_row[l] + wk * p.I + c) >> 2u : 0u];                  \
                areg[l] = ok ? v : vec4(0.0);                                                   \
            } else {                                                                            \
                const uint at = ok ? a_row[l] + c * WC + W_TAP(wk) : 0u;                        \
                const vec4 v = vec4(w[at], w[at + WC], w[at + 2u * WC], w[at + 3u * WC]);       \
                areg[l] = ok ? v : vec4(0.0);                                                   \
            }                                                                                   \
        }                                                                                       \
        [[unroll]] for (uint l = 0u; l < LB; l++) {                                             \
            const bool ok = in_k && uint(b_h0[l] + int(dh)) < p.H                               \
                                 && uint(b_w0[l] + int(dw)) < p.W;                              \
            const uint at = ok ? uint(b_base[l] + int(c * XC + dh * p.W + dw)) : 0u;            \
            const vec4 v = vec4(x[at], x[at + XC], x[at + 2u * XC], x[at + 3u * XC]);           \
            breg[l] = ok ? v : vec4(0.0);                                                       \
        }                                                                                       \
        sc += BK;                                                                               \
        if (sc >= p.I) {                                                                        \
            sc = 0u; skw++;                                                                     \
            if (skw == p.KW) { skw = 0u; skh++; }                                               \
        }                                                                                       \
    } else {                                                                                    \
        const uint k = (k0) + kq;                                                               \
        if (VEC_W) {          /* (WL 2: KP % 4 == 0, so a slot's 4 k share their c) */       \
            const uint wk = WL == 0u ? k : sc * WC + skh * p.KW + skw;                          \
            [[unroll]] for (uint l = 0u; l < LA; l++) {                                         \
                const bool ok = k < kend && a_live[l];                                          \
                const vec4 v = w_v[ok ? (a_row[l] + wk) >> 2u : 0u];                            \
                areg[l] = ok ? v : vec4(0.0);                                                   \
            }                                                                                   \
        }                                                                                       \
        uint c = sc, kh = skh, kw = skw;                                                        \
        [[unroll]] for (uint j = 0u; j < 4u; j++) {                                             \
            const uint dh = kh * p.rd_h, dw = kw * p.rd_w;                                      \
            const uint off = c * XC + dh * p.W + dw;                                            \
            if (!VEC_W) {                                                                       \
                const uint wk = WL == 0u ? k + j : c * WC + W_TAP(kh * p.KW + kw);              \
                [[unroll]] for (uint l = 0u; l < LA; l++) {                                     \
                    const bool ok = k + j < kend && a_live[l];                                  \
                    const float v = w[ok ? a_row[l] + wk : 0u];                                 \
                    areg[l][j] = ok ? v : 0.0;                                                  \
                }                                                                               \
            }                                                                                   \
            [[unroll]] for (uint l = 0u; l < LB; l++) {                                         \
                const bool ok = k + j < kend && uint(b_h0[l] + int(dh)) < p.H                   \
                                             && uint(b_w0[l] + int(dw)) < p.W;                  \
                const float v = x[ok ? uint(b_base[l] + int(off)) : 0u];                        \
                breg[l][j] = ok ? v : 0.0;                                                      \
            }                                                                                   \
            kw++;                                                                               \
            if (kw == p.KW) { kw = 0u; kh++; if (kh == p.KH) { kh = 0u; c++; } }                \
        }                                                                                       \
        skw += p.bk_w;                                                                          \
        if (skw >= p.KW) { skw -= p.KW; skh++; }                                                \
        skh += p.bk_h;                                                                          \
        if (skh >= p.KH) { skh -= p.KH; sc++; }                                                 \
        sc += p.bk_c;                                                                           \
    }

    // Registers -> shared stage `st`, k-major (the slots' 4 k become 4 rows).
#define STORE_TILES(st)                                                                         \
    [[unroll]] for (uint l = 0u; l < LA; l++) {                                                 \
        const uint at = (st) * STAGE + kq * SA + a_r[l] / 4u;                                   \
        [[unroll]] for (uint c = 0; c < 4u; c++) smem[at + c * SA][a_r[l] % 4u] = areg[l][c];   \
    }                                                                                           \
    [[unroll]] for (uint l = 0u; l < LB; l++) {                                                 \
        const uint at = (st) * STAGE + BK * SA + kq * SB + b_r[l] / 4u;                         \
        [[unroll]] for (uint c = 0; c < 4u; c++) smem[at + c * SB][b_r[l] % 4u] = breg[l][c];   \
    }

    vec4 acc[TM][TN / 4u];
    [[unroll]] for (uint i = 0; i < TM; i++)
        [[unroll]] for (uint j = 0; j < TN / 4u; j++) acc[i][j] = vec4(0.0);

    const uint iters = kend > kbegin ? ceil_div(kend - kbegin, BK) : 0u;
    LOAD_TILES(kbegin)
    STORE_TILES(0u)
    barrier();
    for (uint s = 0u; s < iters; s++) {
        const uint cur = s & 1u;
        const uint abase = cur * STAGE + ty, bbase = cur * STAGE + BK * SA + tx;
        const bool more = ALWAYS_PREFETCH || s + 1u < iters;
        if (more) { LOAD_TILES(kbegin + (s + 1u) * BK) }
        [[unroll]] for (uint kk = 0u; kk < BK; kk++)
            GEMM_TILE_STEP(kk)
        if (more) { STORE_TILES(cur ^ 1u) }
        barrier();
    }

    // Thread (tx, ty) owns features f0 + i*4*TY + 4*ty + r and positions q0 + j*4*TX + 4*tx + c.
    const uint obase = split * p.N * p.O * P;
    [[unroll]] for (uint j = 0u; j < TN / 4u; j++) {
        const uint qb = q0 + j * 4u * TX + 4u * tx;
        uint at[4];                     // out's index of feature 0 of the group at qb + c
        [[unroll]] for (uint c = 0u; c < 4u; c++) {
            const uint q = min(qb + c, M - 1u);
            at[c] = obase + ((q / P) * p.O + g * p.Og) * P + q % P;
        }
        [[unroll]] for (uint i = 0u; i < TM / 4u; i++) {
            [[unroll]] for (uint r = 0u; r < 4u; r++) {
                const uint f = f0 + i * 4u * TY + 4u * ty + r;
                if (f >= p.Og) continue;
                const vec4 v = acc[i * 4u + r][j];
#ifdef VKG_STORE_B2
                [[unroll]] for (uint c = 0u; c < 4u; c++)
                    if (qb + c < M) VKG_STORE_B2(at[c] + f * P, v[c]);
#else
                if (VEC_O) {                    // P % 4 == 0: the 4 positions share an image
                    if (qb < M) o_v[(at[0] + f * P) >> 2u] = v;
                } else {
                    [[unroll]] for (uint c = 0u; c < 4u; c++)
                        if (qb + c < M) o[at[c] + f * P] = v[c];
                }
#endif
            }
        }
    }
}
