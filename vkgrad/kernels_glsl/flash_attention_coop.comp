#version 450
// Flash attention's forward on cooperative matrices (VK_KHR_cooperative_matrix: the tensor
// cores): o = softmax(scale q k^T, masked) v and lse = logsumexp(scale q k^T), f16 q, k, v, o,
// f32 scores, statistics and accumulators. Planned by lowering/attention_coop.py, with the
// backward's two passes (flash_attention_coop_dq.comp, flash_attention_coop_dkdv.comp).
//
// A workgroup takes BR query rows of one (batch, head) with four subgroups of RS = 16 MR rows. Its
// subgroups walk the keys BC at a time: the block's K and V rows are copied into shared memory
// by the whole workgroup (with PREFETCH the next block's are loaded while this one computes,
// into a second pair of tiles: one barrier a step); each subgroup multiplies its Q fragments
// (16 x 16 f16, loaded once from memory) by K^T (column-major fragment loads of the K tile)
// into 16 x BC f32 scores,
// stores them into its own piece of shared memory, where its 32 invocations (two a row) take
// the running row max and sum, mask, exponentiate, and write the probabilities back as f16
// over the scores; then O (D/16 accumulators of 16 x 16 f32, kept in registers) is rescaled
// by each row's exp(m_old - m_new) and P V added. Rows of an accumulator: KHR cooperative
// matrices give no element's row, but every matrix of one type spreads its elements over the
// invocations the same way, so ROWS, a matrix of that type loaded from a table of row
// numbers, says each element's row (it is how O is scaled a row at a time in registers). The
// softmax in registers, with each row reduced by shuffles where the accumulators spread their
// elements as NVIDIA's m16n8 pieces do (checked at run time), ran no faster on the H200
// (2026-12-04: 73-77 us against 72-75 at B4 H8 L1024 D64), so the scores go through shared
// memory.
//
// Defines: D (head dim: 64 or 128), BC (keys a step: 16, 32 or 64), MR (16-row fragments a
// subgroup: 1 or 2; each K and V fragment loaded from shared memory then feeds MR products),
// SG (subgroup size: 32), PREFETCH, CAUSAL (query i sees key j iff j <= i + Lk - Lq), LSE16
// (lse in f16). Bindings: 0 q, 1 k, 2 v [BH, L, D] f16, 3 o [BH, Lq, D] f16, 4 lse [BH, Lq] f32 (LSE16:
// f16). Push: Lq, Lk, the scale's float bits. Lq a multiple
// of 64 MR (the probe's shapes); Lk any (keys past it are masked). BR = 64 MR rows a workgroup.
#extension GL_GOOGLE_include_directive : require
#include "flash_coop_common.glsl"

#if TILE_BUFS * 2 * BC * KROW * 2 + NSG * RS * SROW * 4 + NSG * RS * 4 + 1024 > 49152
#error flash_attention_coop: the tiles need more than 48 KB of shared memory (D 128 takes BC <= 32)
#endif

layout(local_size_x = NT) in;
layout(push_constant) uniform Push { uint Lq, Lk, scale_bits; } p;

layout(set = 0, binding = 0) readonly buffer Q { float16_t q[]; };
layout(set = 0, binding = 1) readonly buffer K4 { uvec4 k4[]; };
layout(set = 0, binding = 2) readonly buffer V4 { uvec4 v4[]; };
layout(set = 0, binding = 3) writeonly buffer O { float16_t o[]; };
layout(set = 0, binding = 4) writeonly buffer LSE { LSE_T lse[]; };

shared uvec4 shK[TILE_BUFS * TILE_BUF];
shared uvec4 shV[TILE_BUFS * TILE_BUF];
shared float shS[NSG * RS * SROW];      // each subgroup's scores, then its probabilities
shared float shRow[NSG * RS];           // each row's factor for O
shared float shRows[256];               // row numbers of a 16 x 16 matrix (ELEMENT_ROWS)

// O's rows scaled by shRow[sg*16 + row]: element e of a matrix of ROWS's type is in row ROWS[e]
void scale_rows(inout ACC m, ACC rows, uint base) {
    for (uint e = 0; e < m.length(); e++) {
        m[e] *= shRow[base + uint(rows[e])];
    }
}

void main() {
    const uint tid = gl_LocalInvocationID.x, sg = gl_SubgroupID, lane = gl_SubgroupInvocationID;
    const uint bh = gl_WorkGroupID.y, q0 = gl_WorkGroupID.x * BR;
    const uint Lq = p.Lq, Lk = p.Lk;
    const float scale2 = uintBitsToFloat(p.scale_bits) * float(LOG2E);   // exp2 domain

    ACC rows;
    ELEMENT_ROWS(rows)

    // this subgroup's 16 query rows, as FD fragments of 16 x 16
    FRAG_A qf[MR][FD];
    const uint qrow0 = q0 + sg * RS;
    [[unroll]] for (uint r = 0; r < MR; r++) {
        [[unroll]] for (uint f = 0; f < FD; f++) {
            coopMatLoad(qf[r][f], q, (bh * Lq + qrow0 + r * 16) * D + f * 16, D,
                        gl_CooperativeMatrixLayoutRowMajor);
        }
    }
    ACC of[MR][FD];
    [[unroll]] for (uint r = 0; r < MR; r++)
        [[unroll]] for (uint f = 0; f < FD; f++) of[r][f] = ACC(0.0);

    // softmax statistics: LPR invocations a row, each BC/LPR of its columns
    const uint srow = lane / LPR, half_ = lane % LPR;
    const uint qi = qrow0 + srow;                    // this invocation's query row
    float m = -1.0 / 0.0, l = 0.0;
    const uint sbase = sg * RS * SROW;

    uint kend = Lk;
#ifdef CAUSAL
    // the last key any row here sees, + 1 (signed: with Lq > Lk the first rows see none)
    kend = uint(clamp(int(q0 + BR) + int(Lk) - int(Lq), 0, int(Lk)));
#endif
    // K and V rows j0 .. j0+BC into shared memory (16-byte pieces; zeros past Lk)
    uvec4 ta[TILE_REGS];
    uvec4 tb[TILE_REGS];
#define STEP_LOAD(r0) LOAD_TILES(ta, tb, k4, v4, r0, Lk)
#define STEP_STORE(buf) STORE_TILES(shK, shV, ta, tb, (buf) * TILE_BUF)
    STEP_FIRST(kend > 0, 0)
    for (uint j0 = 0, t = 0; j0 < kend; j0 += BC, t++) {
        const uint kb = (t % TILE_BUFS) * TILE_BUF;      // this step's K and V tiles
        const bool more = j0 + BC < kend;
        STEP_PREFETCH(more, j0 + BC)

        // S = Q K^T (16 x BC), scaled to the exp2 domain, into this subgroup's shared rows
        ACC sf[MR][FC];
        [[unroll]] for (uint r = 0; r < MR; r++)
            [[unroll]] for (uint c = 0; c < FC; c++) sf[r][c] = ACC(0.0);
        [[unroll]] for (uint f = 0; f < FD; f++) {
            [[unroll]] for (uint c = 0; c < FC; c++) {
                FRAG_B kt;   // K^T's rows f*16.., columns c*16..: K's rows c*16.. column-major
                coopMatLoad(kt, shK, kb + TILE_AT(c, f), TILE_STRIDE, gl_CooperativeMatrixLayoutColumnMajor);
                [[unroll]] for (uint r = 0; r < MR; r++)
                    sf[r][c] = coopMatMulAdd(qf[r][f], kt, sf[r][c]);
            }
        }
        [[unroll]] for (uint r = 0; r < MR; r++) {
            [[unroll]] for (uint c = 0; c < FC; c++) {
                coopMatStore(sf[r][c] * scale2, shS, sbase + r * 16 * SROW + c * 16, SROW,
                             gl_CooperativeMatrixLayoutRowMajor);
            }
        }
        subgroupMemoryBarrierShared();
        subgroupBarrier();

        // the row's max and sum over this block; P = exp2(S - m_new) as f16 over the scores
        float s[BC / LPR];
        float mx = -1.0 / 0.0;
        [[unroll]] for (uint c = 0; c < BC / LPR; c++) {
            uint col = half_ * (BC / LPR) + c, key = j0 + col;
            float x = shS[sbase + srow * SROW + col];
            bool seen = key < Lk;
#ifdef CAUSAL
            seen = seen && int(key) <= int(qi) + int(Lk) - int(Lq);
#endif
            s[c] = seen ? x : -1.0 / 0.0;
            mx = max(mx, s[c]);
        }
#if LPR == 2
        mx = max(mx, subgroupShuffleXor(mx, 1));
#endif
        float mnew = max(m, mx);
        float ref = mnew == -1.0 / 0.0 ? 0.0 : mnew;     // a row that sees no key yet
        float sum = 0.0;
        [[unroll]] for (uint c = 0; c < BC / LPR; c++) {
            s[c] = exp2(s[c] - ref);
            sum += s[c];
        }
#if LPR == 2
        sum += subgroupShuffleXor(sum, 1);
#endif
        float alpha = exp2(m - ref);                       // 0 while m is -inf
        l = l * alpha + sum;
        m = mnew;
        if (half_ == 0) shRow[sg * RS + srow] = alpha;
        subgroupBarrier();                                 // every score read: overwrite
        [[unroll]] for (uint c = 0; c < BC / LPR; c += 2) {
            uint col = half_ * (BC / LPR) + c;
            // halves (srow, col), (srow, col+1) of the probability rows, PROW halves each
            uint h = srow * PROW + col;
            shS[sbase + h / 2] = uintBitsToFloat(packHalf2x16(vec2(s[c], s[c + 1])));
        }
        subgroupMemoryBarrierShared();
        subgroupBarrier();

        // O = diag(alpha) O + P V
        [[unroll]] for (uint r = 0; r < MR; r++)
            [[unroll]] for (uint f = 0; f < FD; f++) scale_rows(of[r][f], rows, sg * RS + r * 16);
        [[unroll]] for (uint c = 0; c < FC; c++) {
            FRAG_A pf[MR];
            [[unroll]] for (uint r = 0; r < MR; r++) {
                coopMatLoad(pf[r], shS, HALF_AT(sbase, r, c), HALF_STRIDE,
                            gl_CooperativeMatrixLayoutRowMajor);
            }
            [[unroll]] for (uint f = 0; f < FD; f++) {
                FRAG_B vf;
                coopMatLoad(vf, shV, kb + TILE_AT(c, f), TILE_STRIDE, gl_CooperativeMatrixLayoutRowMajor);
                [[unroll]] for (uint r = 0; r < MR; r++)
                    of[r][f] = coopMatMulAdd(pf[r], vf, of[r][f]);
            }
        }
        STEP_NEXT(more, j0 + BC, t)
    }

    // o = O / l (0 for a row that saw no key), lse = (m + log2 l) ln 2; a NaN score keeps its
    // row's l, o and lse NaN (GLSL's max may have dropped it from m, never from l)
    if (half_ == 0) {
        const bool seen = !(l <= 0.0);
        shRow[sg * RS + srow] = seen ? 1.0 / l : 0.0;
        lse[bh * Lq + qi] = LSE_T(seen ? (m + log2(l)) * float(LN2) : -1.0 / 0.0);
    }
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    [[unroll]] for (uint r = 0; r < MR; r++) {
        [[unroll]] for (uint f = 0; f < FD; f++) {
            scale_rows(of[r][f], rows, sg * RS + r * 16);
            ACC16 oh = ACC16(of[r][f]);
            coopMatStore(oh, o, (bh * Lq + qrow0 + r * 16) * D + f * 16, D,
                         gl_CooperativeMatrixLayoutRowMajor);
        }
    }
}
