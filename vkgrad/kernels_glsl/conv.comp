#version 450
// fp32 convolution as an implicit GEMM (no im2col buffer): for each group g,
//     C[m, o] = sum_k A[m, k] B[k, o]
//     m = (n, od, oh, ow)  over N * OD * OH * OW        (an output position)
//     k = (c, kd, kh, kw)  over I * KD * KH * KW        (an input feature and window offset)
//     A[m, k] = x[n, g*I + c, id, ih, iw]  at the dilated, padded position
//               od * stride + kd * rhs_dilation - pad_low, when lhs_dilation divides it
//               (else the zero between dilated elements) and it lies inside x; else 0
//     B[k, o] = w[g*Og + o, c, kd, kh, kw]
//     out[n, g*Og + o, od, oh, ow] = C[m, o]
// Layouts (vkgrad/primitives/convolution.py): x [N, C, D, H, W], w [O, I, KD, KH, KW],
// out [N, O, OD, OH, OW], C = G*I, O = G*Og; 1-D and 2-D convolutions have D (and H) = 1.
// Planned by vkgrad/lowering/conv.py, which also uses it for both gradients (they are
// convolutions too: primitives/convolution.py).
//
// Scheme (the matmul kernel's, kernels_glsl/matmul.comp, without its variants): a workgroup
// of TX x TY threads computes a BM x BN block of C (BM = TX*RM, BN = TY*RN); each thread holds
// RM x RN accumulators for rows A_ROW(i) and columns B_COL(j) (below: runs of 4 read as vec4s
// where RM, RN allow), so a warp's stores run along m, which is contiguous in `out` (along ow). K advances BK at a time through tiles in shared
// memory, k-major (As[k][m], Bs[k][n]); the next step's elements are gathered from global
// memory into registers while the threads compute on the current tiles. The gathers decode m
// once per thread (before the k loop), and k once per slot, then step it on by carries.
// Split-K: workgroup z = s * G + g sums k in [s * chunk, (s + 1) * chunk) and writes slice s
// of out, [splits, N, O, OD, OH, OW], which a reduction then sums (chunk >= K: no split).
// Defines: CV_TX, CV_TY, CV_RM, CV_RN, CV_BK (the variant; the planner's VARIANTS).
// Bindings: 0 x, 1 w, 2 out. Grid: (ceil(M / BM), ceil(Og / BN), splits * G).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// VKGRAD_FUSION_HOOKS
// VKG_STORE_B2 (fusion.glsl): out's elements go through a fused epilogue (bias, activation).

const uint TX = CV_TX, TY = CV_TY, RM = CV_RM, RN = CV_RN, BK = CV_BK;
const uint NT = TX * TY, BM = TX * RM, BN = TY * RN;
layout(local_size_x = NT) in;

// A's gathers: thread t takes rows (t % BM) + NT * r for RA rows when NT < BM, or row t % BM at
// KA k offsets apart when NT >= BM (one of RA, KA is 1); LA elements per step.
const uint RA = BM > NT ? BM / NT : 1u;
const uint KA = BM > NT ? 1u : NT / BM;
const uint LA = (BM * BK) / NT;
const uint LB = (BN * BK + NT - 1u) / NT;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Wt { float w[]; };
layout(std430, binding = 2) writeonly buffer Out { float o[]; };

#include "conv_common.glsl"     // push constants p, input_at

// The tiles as vec4s: a thread reads its RM rows (RN columns) of a k step as RM/4 (RN/4)
// 16-byte loads when RM (RN) is a multiple of 4; its rows are then tx*RM + i (columns ty*RN + j),
// else tx + TX*i (ty + TY*j) read one float at a time. With 4 x 4 per thread that is 2 shared
// loads per 16 fmas instead of 8 (the scalar reads bound the kernel by shared memory: 16
// TFLOP/s at ResNet's shapes on the H200, bench/bench_conv.py).
const bool VA = RM % 4u == 0u, VB = RN % 4u == 0u;
shared vec4 As[BK * BM / 4];
shared vec4 Bs[(BK * BN + 3) / 4];
#define A_ROW(i) (VA ? tx * RM + (i) : tx + TX * (i))
#define B_COL(j) (VB ? ty * RN + (j) : ty + TY * (j))
#define SET(arr, i, v) { uint q_ = (i); arr[q_ >> 2u][q_ & 3u] = (v); }

void main() {
    const uint t = gl_LocalInvocationIndex;
    const uint tx = t % TX, ty = t / TX;
    const uint G = p.C / p.I;
    const uint g = gl_WorkGroupID.z % G, split = gl_WorkGroupID.z / G;
    const uint P = p.OD * p.OH * p.OW;
    const uint M = p.N * P;
    const uint KP = p.KD * p.KH * p.KW;
    const uint K = p.I * KP;
    const uint kbegin = split * p.chunk, kend = min(K, kbegin + p.chunk);
    const uint obase = split * p.N * p.O * P;
    const uint DHW = p.D * p.H * p.W;
    const uint m0 = gl_WorkGroupID.x * BM, n0 = gl_WorkGroupID.y * BN;

    // this thread's A rows, decoded once: where the row's input plane starts, and the
    // window's first position (in the dilated, padded input) per spatial axis
    uint xbase[RA];
    int d0[RA], h0[RA], w0[RA];
    bool live[RA];
    [[unroll]] for (uint r = 0u; r < RA; r++) {
        uint m = m0 + (t % BM) + NT * r;
        live[r] = m < M;
        uint mm = live[r] ? m : 0u;
        uint n = mm / P, q = mm % P;
        uint ow = q % p.OW, oh = (q / p.OW) % p.OH, od = q / (p.OW * p.OH);
        xbase[r] = (n * p.C + g * p.I) * DHW;
        d0[r] = int(od * p.sd) - p.pd;
        h0[r] = int(oh * p.sh) - p.ph;
        w0[r] = int(ow * p.sw) - p.pw;
    }

    float ra[LA], rb[LB];
    float acc[RM][RN];
    [[unroll]] for (uint i = 0u; i < RM; i++)
        [[unroll]] for (uint j = 0u; j < RN; j++) acc[i][j] = 0.0;

    // gather step `k0`'s elements into registers
    // Each gather slot's k, decoded into (c, kd, kh, kw) once, then advanced by BK per step
    // digit by digit with carries (BK's digits are push constants): no division in the loop.
    uint dc[LA], dd[LA], dh[LA], dw[LA];
    [[unroll]] for (uint l = 0u; l < LA; l++) {
        uint k = kbegin + (t / BM) + KA * (l / RA);
        uint kp = k % KP;
        dc[l] = k / KP;
        dw[l] = kp % p.KW;
        dh[l] = (kp / p.KW) % p.KH;
        dd[l] = kp / (p.KW * p.KH);
    }

    // gather step `k0`'s elements into registers, and move the slots on to the next step
#define GATHER(k0) { \
    [[unroll]] for (uint l = 0u; l < LA; l++) { \
        uint r = l % RA, kl = (t / BM) + KA * (l / RA); \
        uint k = (k0) + kl; \
        float v = 0.0; \
        if (live[r] && k < kend) { \
            int id = input_at(d0[r] + int(dd[l] * p.rd_d), p.ld_d, p.D); \
            int ih = input_at(h0[r] + int(dh[l] * p.rd_h), p.ld_h, p.H); \
            int iw = input_at(w0[r] + int(dw[l] * p.rd_w), p.ld_w, p.W); \
            if (id >= 0 && ih >= 0 && iw >= 0) \
                v = x[xbase[r] + dc[l] * DHW + (uint(id) * p.H + uint(ih)) * p.W + uint(iw)]; \
        } \
        ra[l] = v; \
        dw[l] += p.bk_w; \
        if (dw[l] >= p.KW) { dw[l] -= p.KW; dh[l] += 1u; } \
        dh[l] += p.bk_h; \
        if (dh[l] >= p.KH) { dh[l] -= p.KH; dd[l] += 1u; } \
        dd[l] += p.bk_d; \
        if (dd[l] >= p.KD) { dd[l] -= p.KD; dc[l] += 1u; } \
        dc[l] += p.bk_c; \
    } \
    [[unroll]] for (uint l = 0u; l < LB; l++) { \
        uint idx = t + NT * l; \
        uint kl = idx % BK, nl = idx / BK; \
        uint k = (k0) + kl, on = n0 + nl; \
        rb[l] = (idx < BN * BK && k < kend && on < p.Og) ? w[(g * p.Og + on) * K + k] : 0.0; \
    } }

#define STORE_TILES() { \
    [[unroll]] for (uint l = 0u; l < LA; l++) \
        SET(As, ((t / BM) + KA * (l / RA)) * BM + (t % BM) + NT * (l % RA), ra[l]) \
    [[unroll]] for (uint l = 0u; l < LB; l++) { \
        uint idx = t + NT * l; \
        if (idx < BN * BK) SET(Bs, (idx % BK) * BN + idx / BK, rb[l]) \
    } }

    GATHER(kbegin)
    STORE_TILES()
    barrier();
    for (uint k0 = kbegin; k0 < kend; k0 += BK) {
        bool more = k0 + BK < kend;
        if (more) GATHER(k0 + BK)
        [[unroll]] for (uint kk = 0u; kk < BK; kk++) {
            float a[RM], b[RN];
            if (VA) {
                [[unroll]] for (uint i = 0u; i < RM; i += 4u) {
                    vec4 v = As[(kk * BM + tx * RM + i) >> 2u];
                    a[i] = v.x; a[i + 1u] = v.y; a[i + 2u] = v.z; a[i + 3u] = v.w;
                }
            } else {
                [[unroll]] for (uint i = 0u; i < RM; i++) {
                    uint q = kk * BM + tx + TX * i;
                    a[i] = As[q >> 2u][q & 3u];
                }
            }
            if (VB) {
                [[unroll]] for (uint j = 0u; j < RN; j += 4u) {
                    vec4 v = Bs[(kk * BN + ty * RN + j) >> 2u];
                    b[j] = v.x; b[j + 1u] = v.y; b[j + 2u] = v.z; b[j + 3u] = v.w;
                }
            } else {
                [[unroll]] for (uint j = 0u; j < RN; j++) {
                    uint q = kk * BN + ty + TY * j;
                    b[j] = Bs[q >> 2u][q & 3u];
                }
            }
            [[unroll]] for (uint i = 0u; i < RM; i++)
                [[unroll]] for (uint j = 0u; j < RN; j++) acc[i][j] = fma(a[i], b[j], acc[i][j]);
        }
        barrier();
        if (more) STORE_TILES()
        barrier();
    }

    [[unroll]] for (uint i = 0u; i < RM; i++) {
        uint m = m0 + A_ROW(i);
        if (m >= M) continue;
        uint n = m / P, q = m % P;
        [[unroll]] for (uint j = 0u; j < RN; j++) {
            uint on = n0 + B_COL(j);
            if (on >= p.Og) continue;
#ifdef VKG_STORE_B2
            VKG_STORE_B2(obase + (n * p.O + g * p.Og + on) * P + q, acc[i][j]);
#else
            o[obase + (n * p.O + g * p.Og + on) * P + q] = acc[i][j];
#endif
        }
    }
}
