#version 450
// Flash attention's backward on cooperative matrices (the tensor cores), second of two passes:
// dk = scale dS^T q and dv = P^T do, with P = exp(scale q k^T - lse) (masked), dS = P (dP - delta)
// and dP = do v^T; delta = rowsum(do o) from flash_attention_coop_dq.comp. f16 q, k, v, do, dk,
// dv; f32 lse, delta, scores and accumulators. Deterministic: each key row's dk and dv are
// summed by one subgroup, in query order.
//
// The transpose of the dq pass: a workgroup takes BR = 64 MR key rows of one (batch, head), four
// subgroups of RS = 16 MR, each keeping its K and V rows as fragments and its dK and dV as
// accumulators. The subgroups walk the queries BC at a time (in causal attention, from the
// first query that sees the workgroup's first key): the block's Q and dO rows, their lse (in
// exp2's terms) and delta go into shared memory; each subgroup multiplies K Q^T and V dO^T into
// 16 x BC f32 scores (S^T and dP^T), its invocations (LPR a key row) make P^T and dS^T and write
// them in f16 over the two, then dV += P^T dO and dK += dS^T Q.
//
// Defines: D (64 or 128), BC (queries a step: 16 or 32), MR (1 or 2), SG (32), CAUSAL, LSE16
// (lse in f16).
// Bindings: 0 q [BH, Lq, D], 1 k, 2 v [BH, Lk, D], 3 do [BH, Lq, D] f16, 4 lse, 5 delta [BH, Lq]
// f32, 6 dk, 7 dv [BH, Lk, D] f16. Push: Lq, Lk, the scale's float bits. Lk a multiple of BR;
// Lq any.
#extension GL_GOOGLE_include_directive : require
#include "flash_coop_common.glsl"

#if 2 * BC * KROW * 2 + 2 * NSG * RS * SROW * 4 + 2 * BC * 4 > 49152
#error flash_attention_coop_dkdv: the tiles need more than 48 KB of shared memory
#endif

layout(local_size_x = NT) in;
layout(push_constant) uniform Push { uint Lq, Lk, scale_bits; } p;

layout(set = 0, binding = 0) readonly buffer Q4 { uvec4 q4[]; };
layout(set = 0, binding = 1) readonly buffer K { float16_t k[]; };
layout(set = 0, binding = 2) readonly buffer V { float16_t v[]; };
layout(set = 0, binding = 3) readonly buffer DO4 { uvec4 do4[]; };
layout(set = 0, binding = 4) readonly buffer LSE { LSE_T lse[]; };
layout(set = 0, binding = 5) readonly buffer DELTA { float delta[]; };
layout(set = 0, binding = 6) writeonly buffer DK { float16_t dk[]; };
layout(set = 0, binding = 7) writeonly buffer DV { float16_t dv[]; };

shared uvec4 shQ[BC * KROW / 8];
shared uvec4 shO[BC * KROW / 8];        // dO's rows
shared float shS[NSG * RS * SROW];      // each subgroup's S^T, then its P^T in 16 bits
shared float shP[NSG * RS * SROW];      // each subgroup's dP^T, then its dS^T in 16 bits
shared float shL[BC];                   // the block's lse in exp2's terms (+inf: no key seen)
shared float shDl[BC];                  // the block's delta

void main() {
    const uint tid = gl_LocalInvocationID.x, sg = gl_SubgroupID, lane = gl_SubgroupInvocationID;
    const uint bh = gl_WorkGroupID.y, k0 = gl_WorkGroupID.x * BR;
    const uint Lq = p.Lq, Lk = p.Lk;
    const float scale = uintBitsToFloat(p.scale_bits), scale2 = scale * float(LOG2E);

    FRAG_A kf[MR][FD];
    FRAG_A vf[MR][FD];   // (one declarator a line: glslang 13 drops a coopmat's use from the second)
    ACC dkf[MR][FD];
    ACC dvf[MR][FD];
    const uint krow0 = k0 + sg * RS;
    [[unroll]] for (uint r = 0; r < MR; r++) {
        [[unroll]] for (uint f = 0; f < FD; f++) {
            uint at = (bh * Lk + krow0 + r * 16) * D + f * 16;
            coopMatLoad(kf[r][f], k, at, D, gl_CooperativeMatrixLayoutRowMajor);
            coopMatLoad(vf[r][f], v, at, D, gl_CooperativeMatrixLayoutRowMajor);
            dkf[r][f] = ACC(0.0);
            dvf[r][f] = ACC(0.0);
        }
    }
    const uint srow = lane / LPR, part = lane % LPR;
    const uint kj = krow0 + srow;                    // this invocation's key row
    const uint sbase = sg * RS * SROW;

    uint i_first = 0;
#ifdef CAUSAL
    // the first query that sees key k0, down to a whole step
    i_first = uint(max(int(k0) - int(Lk) + int(Lq), 0)) / BC * BC;
#endif
    for (uint i0 = i_first; i0 < Lq; i0 += BC) {
        COPY_TILES(shQ, shO, q4, do4, i0, Lq)
        for (uint t = tid; t < BC; t += NT) {
            uint qi = i0 + t;
            float l = qi < Lq ? float(lse[bh * Lq + qi]) : NEG_INF;
            shL[t] = l != NEG_INF ? l * float(LOG2E) : 1.0 / 0.0;     // (a NaN stays NaN)
            shDl[t] = qi < Lq ? delta[bh * Lq + qi] : 0.0;
        }
        barrier();

        // S^T = K Q^T (scaled into exp2's terms) and dP^T = V dO^T, 16 x BC each
        ACC st[MR][FC];
        ACC pt[MR][FC];
        [[unroll]] for (uint r = 0; r < MR; r++) {
            [[unroll]] for (uint c = 0; c < FC; c++) {
                st[r][c] = ACC(0.0);
                pt[r][c] = ACC(0.0);
            }
        }
        [[unroll]] for (uint f = 0; f < FD; f++) {
            [[unroll]] for (uint c = 0; c < FC; c++) {
                FRAG_B qt;
                FRAG_B ot;
                coopMatLoad(qt, shQ, TILE_AT(c, f), TILE_STRIDE, gl_CooperativeMatrixLayoutColumnMajor);
                coopMatLoad(ot, shO, TILE_AT(c, f), TILE_STRIDE, gl_CooperativeMatrixLayoutColumnMajor);
                [[unroll]] for (uint r = 0; r < MR; r++) {
                    st[r][c] = coopMatMulAdd(kf[r][f], qt, st[r][c]);
                    pt[r][c] = coopMatMulAdd(vf[r][f], ot, pt[r][c]);
                }
            }
        }
        [[unroll]] for (uint r = 0; r < MR; r++) {
            [[unroll]] for (uint c = 0; c < FC; c++) {
                uint at = sbase + r * 16 * SROW + c * 16;
                coopMatStore(st[r][c] * scale2, shS, at, SROW, gl_CooperativeMatrixLayoutRowMajor);
                coopMatStore(pt[r][c], shP, at, SROW, gl_CooperativeMatrixLayoutRowMajor);
            }
        }
        subgroupMemoryBarrierShared();
        subgroupBarrier();

        // P^T = exp2(S^T - lse) where the query sees this key (else 0), dS^T = P^T (dP^T - delta)
        float pv[BC / LPR], ds[BC / LPR];
        [[unroll]] for (uint c = 0; c < BC / LPR; c++) {
            uint col = part * (BC / LPR) + c, at = sbase + srow * SROW + col;
            float x = exp2(shS[at] - shL[col]);
#ifdef CAUSAL
            x = int(kj) <= int(i0 + col) + int(Lk) - int(Lq) ? x : 0.0;
#endif
            pv[c] = x;
            ds[c] = x * (shP[at] - shDl[col]);
        }
        subgroupBarrier();                                  // every score read: overwrite
        [[unroll]] for (uint c = 0; c < BC / LPR; c += 2) {
            uint h = srow * PROW + part * (BC / LPR) + c;
            shS[sbase + h / 2] = uintBitsToFloat(packHalf2x16(vec2(pv[c], pv[c + 1])));
            shP[sbase + h / 2] = uintBitsToFloat(packHalf2x16(vec2(ds[c], ds[c + 1])));
        }
        subgroupMemoryBarrierShared();
        subgroupBarrier();

        // dV += P^T dO, dK += dS^T Q
        [[unroll]] for (uint c = 0; c < FC; c++) {
            FRAG_A pa[MR];
            FRAG_A da[MR];
            [[unroll]] for (uint r = 0; r < MR; r++) {
                coopMatLoad(pa[r], shS, HALF_AT(sbase, r, c), HALF_STRIDE,
                            gl_CooperativeMatrixLayoutRowMajor);
                coopMatLoad(da[r], shP, HALF_AT(sbase, r, c), HALF_STRIDE,
                            gl_CooperativeMatrixLayoutRowMajor);
            }
            [[unroll]] for (uint f = 0; f < FD; f++) {
                FRAG_B ob;
                FRAG_B qb;
                coopMatLoad(ob, shO, TILE_AT(c, f), TILE_STRIDE, gl_CooperativeMatrixLayoutRowMajor);
                coopMatLoad(qb, shQ, TILE_AT(c, f), TILE_STRIDE, gl_CooperativeMatrixLayoutRowMajor);
                [[unroll]] for (uint r = 0; r < MR; r++) {
                    dvf[r][f] = coopMatMulAdd(pa[r], ob, dvf[r][f]);
                    dkf[r][f] = coopMatMulAdd(da[r], qb, dkf[r][f]);
                }
            }
        }
        barrier();                                          // before the next Q, dO overwrite
    }

    [[unroll]] for (uint r = 0; r < MR; r++) {
        [[unroll]] for (uint f = 0; f < FD; f++) {
            uint at = (bh * Lk + krow0 + r * 16) * D + f * 16;
            ACC16 dk16 = ACC16(dkf[r][f] * scale);
            ACC16 dv16 = ACC16(dvf[r][f]);
            coopMatStore(dk16, dk, at, D, gl_CooperativeMatrixLayoutRowMajor);
            coopMatStore(dv16, dv, at, D, gl_CooperativeMatrixLayoutRowMajor);
        }
    }
}
