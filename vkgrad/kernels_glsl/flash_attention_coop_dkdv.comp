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
// first query that sees the workgroup's first key): the block's Q and dO rows go into shared
// memory, and its lse (in exp2's terms) and delta into 16 equal rows each, loaded as matrices
// of the scores' type; each subgroup multiplies K Q^T and V dO^T into 16 x BC f32 scores (S^T
// and dP^T), makes P^T and dS^T from them element by element in registers, stores both in f16
// into its own shared rows and loads them back for dV += P^T dO and dK += dS^T Q. PREFETCH:
// the next block's rows are loaded while this one computes (a second set of tiles).
//
// Defines: D (32, 64 or 128), BC (queries a step: 16 or 32), MR (1 or 2), NSG (4 or 8), SG
// (32), PREFETCH, CAUSAL, LSE16 (lse in f16).
// Bindings: 0 q [BH, Lq, D], 1 k, 2 v [BH, Lk, D], 3 do [BH, Lq, D] f16, 4 lse, 5 delta [BH, Lq]
// f32, 6 dk, 7 dv [BH, Lk, D] f16. Push: Lq, Lk, the scale's float bits. Lk a multiple of BR;
// Lq any.
#extension GL_GOOGLE_include_directive : require
#include "flash_coop_common.glsl"

#define LROW (BC + 4)                    // a row of shL, shDl (padded: other banks)
#define LBUF (16 * LROW)
#define LREGS ((16 * BC + NT - 1) / NT)  // lse and delta values an invocation loads a step
#define HBUF (RS * PROW / 2)             // a subgroup's 16-bit rows, in floats
#if TILE_BUFS * (2 * BC * KROW * 2 + 2 * LBUF * 4) + 2 * NSG * HBUF * 4 + 1024 > 49152
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

shared uvec4 shQ[TILE_BUFS * TILE_BUF];
shared uvec4 shO[TILE_BUFS * TILE_BUF];          // dO's rows
shared float shS[NSG * HBUF];                    // each subgroup's P^T in 16 bits
shared float shP[NSG * HBUF];                    // each subgroup's dS^T in 16 bits
shared float shL[TILE_BUFS * LBUF];              // the block's lse in exp2's terms (+inf: no key
shared float shDl[TILE_BUFS * LBUF];             // seen) and delta, each in 16 equal rows (loaded
shared float shDiag[256];                        // as matrices: element (i, j) is query j's);
                                                 // column - row of a 16 x 16 matrix

// lse in exp2's terms (+inf: a query that sees no key, P = 0) and delta of the queries
// i0 .. i0 + BC into LA, DA, then into the shared rows at `base`
#define LOAD_ROWS(LA, DA, i0)                                                                  \
    [[unroll]] for (uint k_ = 0; k_ < LREGS; k_++) {                                           \
        uint qi = (i0) + (tid + k_ * NT) % BC;                                                 \
        float l = qi < Lq ? float(lse[bh * Lq + qi]) : NEG_INF;                                \
        LA[k_] = l != NEG_INF ? l * float(LOG2E) : 1.0 / 0.0;     /* (a NaN stays NaN) */      \
        DA[k_] = qi < Lq ? delta[bh * Lq + qi] : 0.0;                                          \
    }
#define STORE_ROWS(LA, DA, base)                                                               \
    [[unroll]] for (uint k_ = 0; k_ < LREGS; k_++) {                                           \
        uint i = tid + k_ * NT;                                                                \
        if (i < 16 * BC) {                                                                     \
            uint w = (base) + i / BC * LROW + i % BC;                                          \
            shL[w] = LA[k_];                                                                   \
            shDl[w] = DA[k_];                                                                  \
        }                                                                                      \
    }

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
    const uint hbase = sg * HBUF;
    for (uint i = tid; i < 256; i += NT) shDiag[i] = float(i % 16) - float(i / 16);

    uint i_first = 0;
#ifdef CAUSAL
    // the first query that sees key k0, down to a whole step
    i_first = uint(max(int(k0) - int(Lk) + int(Lq), 0)) / BC * BC;
#endif
    uvec4 ta[TILE_REGS];
    uvec4 tb[TILE_REGS];
    float la[LREGS];
    float da[LREGS];
#define STEP_LOAD(r0) LOAD_TILES(ta, tb, q4, do4, r0, Lq) LOAD_ROWS(la, da, r0)
#define STEP_STORE(buf) \
    STORE_TILES(shQ, shO, ta, tb, (buf) * TILE_BUF) STORE_ROWS(la, da, (buf) * LBUF)
    STEP_FIRST(i_first < Lq, i_first)
    for (uint i0 = i_first, t = 0; i0 < Lq; i0 += BC, t++) {
        const uint qb_ = (t % TILE_BUFS) * TILE_BUF, lb = (t % TILE_BUFS) * LBUF;
        const bool more = i0 + BC < Lq;
        STEP_PREFETCH(more, i0 + BC)

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
                coopMatLoad(qt, shQ, qb_ + TILE_AT(c, f), TILE_STRIDE, gl_CooperativeMatrixLayoutColumnMajor);
                coopMatLoad(ot, shO, qb_ + TILE_AT(c, f), TILE_STRIDE, gl_CooperativeMatrixLayoutColumnMajor);
                [[unroll]] for (uint r = 0; r < MR; r++) {
                    st[r][c] = coopMatMulAdd(kf[r][f], qt, st[r][c]);
                    pt[r][c] = coopMatMulAdd(vf[r][f], ot, pt[r][c]);
                }
            }
        }

        // P^T = exp2(S^T - lse) where the query sees this key (else 0), dS^T = P^T (dP^T -
        // delta), element by element in registers; written in f16 into the subgroup's rows
        bool edge = false;                              // some query of the block masked
#ifdef CAUSAL
        edge = int(krow0 + RS - 1) > int(i0) + int(Lk) - int(Lq);
#endif
        [[unroll]] for (uint c = 0; c < FC; c++) {
            ACC lm;
            ACC dlm;
            coopMatLoad(lm, shL, lb + c * 16, LROW, gl_CooperativeMatrixLayoutRowMajor);
            coopMatLoad(dlm, shDl, lb + c * 16, LROW, gl_CooperativeMatrixLayoutRowMajor);
            [[unroll]] for (uint r = 0; r < MR; r++) {
                ACC pm = st[r][c] * scale2 - lm;
                ACC dm = pt[r][c] - dlm;
                if (edge) {
                    ACC dg;                            // column - row: query - key
                    coopMatLoad(dg, shDiag, 0, 16, gl_CooperativeMatrixLayoutRowMajor);
                    const float first = float(int(krow0 + r * 16) + int(Lq) - int(Lk) - int(i0 + c * 16));
                    for (uint e = 0; e < pm.length(); e++) {
                        const bool seen = dg[e] >= first;
                        pm[e] = seen ? exp2(pm[e]) : 0.0;
                        dm[e] = seen ? pm[e] * dm[e] : 0.0;
                    }
                } else {
                    for (uint e = 0; e < pm.length(); e++) {
                        pm[e] = exp2(pm[e]);
                        dm[e] = pm[e] * dm[e];
                    }
                }
                coopMatStore(ACC16(pm), shS, HALF_AT(hbase, r, c), HALF_STRIDE,
                             gl_CooperativeMatrixLayoutRowMajor);
                coopMatStore(ACC16(dm), shP, HALF_AT(hbase, r, c), HALF_STRIDE,
                             gl_CooperativeMatrixLayoutRowMajor);
            }
        }
        subgroupMemoryBarrierShared();
        subgroupBarrier();

        // dV += P^T dO, dK += dS^T Q
        [[unroll]] for (uint c = 0; c < FC; c++) {
            FRAG_A pa[MR];
            FRAG_A dsa[MR];
            [[unroll]] for (uint r = 0; r < MR; r++) {
                coopMatLoad(pa[r], shS, HALF_AT(hbase, r, c), HALF_STRIDE,
                            gl_CooperativeMatrixLayoutRowMajor);
                coopMatLoad(dsa[r], shP, HALF_AT(hbase, r, c), HALF_STRIDE,
                            gl_CooperativeMatrixLayoutRowMajor);
            }
            [[unroll]] for (uint f = 0; f < FD; f++) {
                FRAG_B ob;
                FRAG_B qb;
                coopMatLoad(ob, shO, qb_ + TILE_AT(c, f), TILE_STRIDE, gl_CooperativeMatrixLayoutRowMajor);
                coopMatLoad(qb, shQ, qb_ + TILE_AT(c, f), TILE_STRIDE, gl_CooperativeMatrixLayoutRowMajor);
                [[unroll]] for (uint r = 0; r < MR; r++) {
                    dvf[r][f] = coopMatMulAdd(pa[r], ob, dvf[r][f]);
                    dkf[r][f] = coopMatMulAdd(dsa[r], qb, dkf[r][f]);
                }
            }
        }
        STEP_NEXT(more, i0 + BC, t)
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
