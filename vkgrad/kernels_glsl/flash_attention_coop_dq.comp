#version 450
// Flash attention's backward on cooperative matrices (the tensor cores), first of two passes:
// dq = scale dS k and delta = rowsum(do o) - dlse, where dS = P (dP - delta), P = exp(scale q k^T - lse)
// (masked) and dP = do v^T; f16 q, k, v, o, do, dq, f32 lse, delta, scores and accumulators.
// Deterministic: each query row's dq is summed by one subgroup, in key order (no atomics).
// flash_attention_coop_dkdv.comp, the second pass, reads the delta this one writes.
//
// A workgroup takes BR = 64 MR query rows of one (batch, head), four subgroups of RS = 16 MR;
// each keeps its Q and dO rows as fragments (loaded once), its dQ as accumulators, and its
// rows' lse and delta as matrices of the scores' type. The subgroups walk the keys BC at a
// time: the block's K and V rows go into shared memory (loaded into registers first; with
// PREFETCH, the next block's while this one computes, into a second pair of tiles); each
// subgroup multiplies Q K^T and dO V^T (column-major fragment loads: K^T, V^T) into 16 x BC
// f32 scores, makes dS from them element by element in registers (the masks from tables of a
// matrix's columns and column - row, loaded only for blocks that mask), stores it in f16 into
// its own shared rows and loads it back as the A operand of dQ += dS K (KHR cooperative
// matrices turn no accumulator into an operand).
//
// Defines: D (32, 64 or 128), BC (16 or 32), MR (1 or 2), NSG (4 or 8), SG (32), PREFETCH,
// CAUSAL (query i sees key j iff j <= i + Lk - Lq), LSE16 (lse and dlse in f16), DLSE (read
// dlse; else it is 0). Bindings: 0 q [BH, Lq, D], 1 k, 2 v [BH, Lk, D], 3 o, 4 do [BH, Lq, D]
// f16, 5 lse [BH, Lq] f32 (the forward's; -inf: a row that sees no key), 6 dq [BH, Lq, D] f16,
// 7 delta [BH, Lq] f32, 8 dlse [BH, Lq] (lse's cotangent, with DLSE). Push: Lq, Lk, the
// scale's float bits. Lq a multiple of BR; Lk any.
#extension GL_GOOGLE_include_directive : require
#include "flash_coop_common.glsl"

#if TILE_BUFS * 2 * BC * KROW * 2 + NSG * RS * SROW * 4 + 2048 > 49152
#error flash_attention_coop_dq: the tiles need more than 48 KB of shared memory
#endif

layout(local_size_x = NT) in;
layout(push_constant) uniform Push { uint Lq, Lk, scale_bits; } p;

layout(set = 0, binding = 0) readonly buffer Q { float16_t q[]; };
layout(set = 0, binding = 1) readonly buffer K4 { uvec4 k4[]; };
layout(set = 0, binding = 2) readonly buffer V4 { uvec4 v4[]; };
layout(set = 0, binding = 3) readonly buffer O { float16_t o[]; };
layout(set = 0, binding = 4) readonly buffer DO { float16_t dout[]; };
layout(set = 0, binding = 5) readonly buffer LSE { LSE_T lse[]; };
layout(set = 0, binding = 6) writeonly buffer DQ { float16_t dq[]; };
layout(set = 0, binding = 7) writeonly buffer DELTA { float delta[]; };
#ifdef DLSE
layout(set = 0, binding = 8) readonly buffer DLSE_ { LSE_T dlse[]; };
#endif

shared uvec4 shK[TILE_BUFS * TILE_BUF];
shared uvec4 shV[TILE_BUFS * TILE_BUF];
shared float shS[NSG * RS * SROW];      // each subgroup's rows: lse and delta, then dS in f16
shared float shRows[256];               // row numbers of a 16 x 16 matrix
shared float shDiag[256];               // column - row of a 16 x 16 matrix

void main() {
    const uint tid = gl_LocalInvocationID.x, sg = gl_SubgroupID, lane = gl_SubgroupInvocationID;
    const uint bh = gl_WorkGroupID.y, q0 = gl_WorkGroupID.x * BR;
    const uint Lq = p.Lq, Lk = p.Lk;
    const float scale = uintBitsToFloat(p.scale_bits), scale2 = scale * float(LOG2E);

    FRAG_A qf[MR][FD];
    FRAG_A df[MR][FD];   // (one declarator a line: glslang 13 drops a coopmat's use from the second)
    ACC dqf[MR][FD];
    const uint qrow0 = q0 + sg * RS;
    [[unroll]] for (uint r = 0; r < MR; r++) {
        [[unroll]] for (uint f = 0; f < FD; f++) {
            uint at = (bh * Lq + qrow0 + r * 16) * D + f * 16;
            coopMatLoad(qf[r][f], q, at, D, gl_CooperativeMatrixLayoutRowMajor);
            coopMatLoad(df[r][f], dout, at, D, gl_CooperativeMatrixLayoutRowMajor);
            dqf[r][f] = ACC(0.0);
        }
    }

    // this invocation's row: delta = rowsum(do o) (LPR invocations a row) and lse in exp2's terms
    const uint srow = lane / LPR, part = lane % LPR;
    const uint qi = qrow0 + srow, row_at = bh * Lq + qi;
    float dl = 0.0;
    for (uint c = part * (D / LPR); c < (part + 1) * (D / LPR); c++) {
        dl += float(dout[row_at * D + c]) * float(o[row_at * D + c]);
    }
#if LPR == 2
    dl += subgroupShuffleXor(dl, 1);
#endif
#ifdef DLSE
    dl -= float(dlse[row_at]);
#endif
    if (part == 0) delta[row_at] = dl;
    const float lse_row = float(lse[row_at]);
    const bool live = lse_row != NEG_INF;         // -inf: the row sees no key (NaN stays NaN)
    const float l2 = lse_row * float(LOG2E);
    const uint sbase = sg * RS * SROW;
    // a matrix's rows and columns (for the masks), loaded where a block needs them
    for (uint i = tid; i < 256; i += NT) {
        shRows[i] = float(i / 16);
        shDiag[i] = float(i % 16) - float(i / 16);
    }
    // each row's lse and delta as matrices of the scores' type (written a row at a time into
    // this subgroup's score rows, then loaded: KHR cooperative matrices say no element's place,
    // but every matrix of one type spreads its elements over the invocations the same way)
    ACC l2m[MR];
    ACC dlm[MR];
    [[unroll]] for (uint c = part * (16 / LPR); c < (part + 1) * (16 / LPR); c++)
        shS[sbase + srow * SROW + c] = live ? l2 : 1.0 / 0.0;   // +inf: P = 0
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    [[unroll]] for (uint r = 0; r < MR; r++)
        coopMatLoad(l2m[r], shS, sbase + r * 16 * SROW, SROW, gl_CooperativeMatrixLayoutRowMajor);
    subgroupBarrier();
    [[unroll]] for (uint c = part * (16 / LPR); c < (part + 1) * (16 / LPR); c++)
        shS[sbase + srow * SROW + c] = dl;
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    [[unroll]] for (uint r = 0; r < MR; r++)
        coopMatLoad(dlm[r], shS, sbase + r * 16 * SROW, SROW, gl_CooperativeMatrixLayoutRowMajor);
    barrier();

    uint kend = Lk;
#ifdef CAUSAL
    kend = uint(clamp(int(q0 + BR) + int(Lk) - int(Lq), 0, int(Lk)));
#endif
    uvec4 ta[TILE_REGS];
    uvec4 tb[TILE_REGS];
#define STEP_LOAD(r0) LOAD_TILES(ta, tb, k4, v4, r0, Lk)
#define STEP_STORE(buf) STORE_TILES(shK, shV, ta, tb, (buf) * TILE_BUF)
    STEP_FIRST(kend > 0, 0)
    for (uint j0 = 0, t = 0; j0 < kend; j0 += BC, t++) {
        const uint kb = (t % TILE_BUFS) * TILE_BUF;      // this step's K and V tiles
        const bool more = j0 + BC < kend;
        STEP_PREFETCH(more, j0 + BC)

        // S = Q K^T (scaled into exp2's terms) and dP = dO V^T, 16 x BC each
        ACC sf[MR][FC];
        ACC pf[MR][FC];
        [[unroll]] for (uint r = 0; r < MR; r++) {
            [[unroll]] for (uint c = 0; c < FC; c++) {
                sf[r][c] = ACC(0.0);
                pf[r][c] = ACC(0.0);
            }
        }
        [[unroll]] for (uint f = 0; f < FD; f++) {
            [[unroll]] for (uint c = 0; c < FC; c++) {
                FRAG_B kt;
                FRAG_B vt;
                coopMatLoad(kt, shK, kb + TILE_AT(c, f), TILE_STRIDE, gl_CooperativeMatrixLayoutColumnMajor);
                coopMatLoad(vt, shV, kb + TILE_AT(c, f), TILE_STRIDE, gl_CooperativeMatrixLayoutColumnMajor);
                [[unroll]] for (uint r = 0; r < MR; r++) {
                    sf[r][c] = coopMatMulAdd(qf[r][f], kt, sf[r][c]);
                    pf[r][c] = coopMatMulAdd(df[r][f], vt, pf[r][c]);
                }
            }
        }
        // dS = P (dP - delta), P = exp2(S - lse) where the key is seen (else 0), element by
        // element in registers; written in f16 into this subgroup's rows
        bool edge = j0 + BC > Lk;                      // some key of the block masked
#ifdef CAUSAL
        edge = edge || int(j0 + BC - 1) > int(qrow0) + int(Lk) - int(Lq);
#endif
        [[unroll]] for (uint r = 0; r < MR; r++) {
            [[unroll]] for (uint c = 0; c < FC; c++) {
                ACC ds = sf[r][c] * scale2 - l2m[r];
                ACC dp = pf[r][c] - dlm[r];
                if (edge) {
                    ACC cm;                            // columns
                    ACC dg;                            // column - row: key - query
                    coopMatLoad(cm, shRows, 0, 16, gl_CooperativeMatrixLayoutColumnMajor);
                    coopMatLoad(dg, shDiag, 0, 16, gl_CooperativeMatrixLayoutRowMajor);
                    const float first = float(j0 + c * 16);
                    const float last = float(int(qrow0 + r * 16) + int(Lk) - int(Lq) - int(j0 + c * 16));
                    for (uint e = 0; e < ds.length(); e++) {
                        bool seen = first + cm[e] < float(Lk);
#ifdef CAUSAL
                        seen = seen && dg[e] <= last;
#endif
                        ds[e] = seen ? exp2(ds[e]) * dp[e] : 0.0;
                    }
                } else {
                    for (uint e = 0; e < ds.length(); e++) ds[e] = exp2(ds[e]) * dp[e];
                }
                coopMatStore(ACC16(ds), shS, HALF_AT(sbase, r, c), HALF_STRIDE,
                             gl_CooperativeMatrixLayoutRowMajor);
            }
        }
        subgroupMemoryBarrierShared();
        subgroupBarrier();

        // dQ += dS K
        [[unroll]] for (uint c = 0; c < FC; c++) {
            FRAG_A dsf[MR];
            [[unroll]] for (uint r = 0; r < MR; r++) {
                coopMatLoad(dsf[r], shS, HALF_AT(sbase, r, c), HALF_STRIDE,
                            gl_CooperativeMatrixLayoutRowMajor);
            }
            [[unroll]] for (uint f = 0; f < FD; f++) {
                FRAG_B kf;
                coopMatLoad(kf, shK, kb + TILE_AT(c, f), TILE_STRIDE, gl_CooperativeMatrixLayoutRowMajor);
                [[unroll]] for (uint r = 0; r < MR; r++) dqf[r][f] = coopMatMulAdd(dsf[r], kf, dqf[r][f]);
            }
        }
        STEP_NEXT(more, j0 + BC, t)
    }

    [[unroll]] for (uint r = 0; r < MR; r++) {
        [[unroll]] for (uint f = 0; f < FD; f++) {
            ACC16 out16 = ACC16(dqf[r][f] * scale);
            coopMatStore(out16, dq, (bh * Lq + qrow0 + r * 16) * D + f * 16, D,
                         gl_CooperativeMatrixLayoutRowMajor);
        }
    }
}
