#version 450
// Batched fp32 matmul: C[b] = op(A[b]) @ op(B[b]), op = optional transpose per operand.
//
// Storage is row-major and contiguous per batch entry: A is [M][K] ([K][M] when TRANS_A), B is
// [K][N] ([N][K] when TRANS_B), C is [M][N]. Batch entry b of A starts at b * a_batch_stride
// (stride 0 broadcasts one A over the batch), likewise B; C's entries are packed (M * N apart).
// Any M, N, K >= 0; the grid is (ceil(N / BN), ceil(M / BM), batch), or (.., .., SPLITS * batch)
// with split-K (below).
//
// Scheme (vkgrad/lowering/matmul.py picks the constants):
// - a workgroup computes a BM x BN block of C; each of a slice's (BM/TM) * (BN/TN) threads holds
//   a TM x TN block of accumulators in registers, as TM/4 x TN/4 strips of 4 x 4, so that its
//   shared-memory reads are vec4 and a warp's reads of one k step touch few distinct addresses
//   (WARP_X > 0 arranges a warp's 32 threads as a WARP_X-wide block of the thread grid);
// - K advances in steps of BK: each step's A and B tiles sit in shared memory k-major
//   (As[k][m], Bs[k][n]), whatever the storage order, in two buffers: while the threads compute
//   on one, the next step's tiles are already loading from global memory into registers, and are
//   stored to the other buffer afterwards (one barrier per step);
//   ALWAYS_PREFETCH drops the branch around the prefetch (the last step reloads a tile in range
//   into the idle buffer): on the H200 that took the 128x128 tile from 41 to 47 TFLOP/s, but
//   slowed the 128x64 one, so it is a per-variant choice;
// - PHASES > 1 prefetches the next step in parts, each stored before the next part loads (meant
//   to save registers; NVIDIA's compiler hoists the loads anyway, see bench/NOTES_matmul.md);
// - KS > 1 splits K inside the workgroup: KS slices of threads take every KS-th step, each with
//   its own tiles, and add their accumulators through shared memory at the end. Small outputs
//   (few workgroups) then still have enough warps per multiprocessor to hide memory latency;
// - global loads are vec4 where the operand's contiguous dimension and batch stride are
//   multiples of 4 (VEC_A / VEC_B), else four scalar loads; C likewise (VEC_C). Out-of-range
//   elements load as 0, so edge tiles need no special case in the inner loop; where M, N, K are
//   multiples of the tile, CHECK = false leaves the range checks out;
// - SPLITS > 1 splits K across workgroups (split-K, for outputs of few workgroups): workgroup
//   z = s * batch + b computes batch entry b's partial product over the s-th K slice,
//   [s * CHUNK, min((s + 1) * CHUNK, K)) with CHUNK = ceil(ceil(K / (BK*KS)) / SPLITS) * BK*KS
//   (whole k steps, so slices stay tile-aligned), and writes it to C[s][b] ([SPLITS, batch, M, N]);
//   a second dispatch sums over s. The slice only moves the operands' start and the K the loop
//   sees (Kl below): with SPLITS == 1 (a specialization constant) both fold to the unsplit
//   values, so the other variants' code, inner loop included, is unchanged.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// VKGRAD_FUSION_HOOKS
// Fusion (fusion.glsl; all of it is compiled out when the lowering defines none of these):
// VKG_LOAD_B0 / VKG_LOAD_B1 compute A's / B's elements (a fused producer, e.g. relu(x + b) or a
// transpose); VKG_STORE_B2 stores C through a fused epilogue; VKG_ONES_ROW gives op(A) an extra
// row M of ones, so C gets an extra row M = the column sums of op(B) (a bias gradient next to
// its weight gradient, in one pass over the gradient). With it C is [M + 1, N] (batch 1), and
// its stores must go through VKG_STORE_B2, which puts row M where it belongs. Row M is in the
// tiles of the last block row, or (M a multiple of BM) the only row of a block row of its own.

// Defaults come from defines so that a baked variant (VKGRAD_BAKE_SPEC) can set them too.
#ifndef MM_BM
#define MM_BM 32
#endif
#ifndef MM_BN
#define MM_BN 32
#endif
#ifndef MM_BK
#define MM_BK 8
#endif
#ifndef MM_TM
#define MM_TM 4
#endif
#ifndef MM_TN
#define MM_TN 4
#endif
#ifndef MM_TRANS_A
#define MM_TRANS_A false
#endif
#ifndef MM_TRANS_B
#define MM_TRANS_B false
#endif
#ifndef MM_VEC_A
#define MM_VEC_A false
#endif
#ifndef MM_VEC_B
#define MM_VEC_B false
#endif
#ifndef MM_VEC_C
#define MM_VEC_C false
#endif
#ifndef MM_KS
#define MM_KS 1
#endif
#ifndef MM_WARP_X
#define MM_WARP_X 0
#endif
#ifndef MM_PHASES
#define MM_PHASES 1
#endif
#ifndef MM_CHECK
#define MM_CHECK true
#endif
#ifndef MM_ALWAYS_PREFETCH
#define MM_ALWAYS_PREFETCH false
#endif
#ifndef MM_SPLITS
#define MM_SPLITS 1
#endif

#ifdef VKGRAD_BAKE_SPEC
layout(local_size_x = MM_KS * (MM_BM / MM_TM) * (MM_BN / MM_TN)) in;
#else
layout(local_size_x_id = 0) in;          // = KS * (BM / TM) * (BN / TN)
#endif
SPEC_CONST(1) uint BM = MM_BM;
SPEC_CONST(2) uint BN = MM_BN;
SPEC_CONST(3) uint BK = MM_BK;            // multiple of 4
SPEC_CONST(4) uint TM = MM_TM;            // multiple of 4, divides BM
SPEC_CONST(5) uint TN = MM_TN;            // multiple of 4, divides BN
SPEC_CONST(6) bool TRANS_A = MM_TRANS_A;
SPEC_CONST(7) bool TRANS_B = MM_TRANS_B;
SPEC_CONST(8) bool VEC_A = MM_VEC_A;      // vec4 loads of A are aligned
SPEC_CONST(9) bool VEC_B = MM_VEC_B;
SPEC_CONST(10) bool VEC_C = MM_VEC_C;     // N % 4 == 0: vec4 stores of C
SPEC_CONST(11) uint KS = MM_KS;           // K slices per workgroup
SPEC_CONST(12) uint WARP_X = MM_WARP_X;   // 0: threads row-major; else warps of WARP_X x 32/WARP_X
SPEC_CONST(13) uint PHASES = MM_PHASES;   // the next step is prefetched in this many parts
SPEC_CONST(14) bool CHECK = MM_CHECK;     // false: M, N, K are tile multiples: no range checks
SPEC_CONST(15) bool ALWAYS_PREFETCH = MM_ALWAYS_PREFETCH;  // no branch around the prefetch
SPEC_CONST(16) uint SPLITS = MM_SPLITS;   // K slices across workgroups (split-K); 1: off

const uint TX = BN / TN, TY = BM / TM;
const uint T1 = TX * TY;                  // threads per slice
// Shared rows are padded by one vec4: the transposing stores of a k-contiguous operand then hit
// distinct banks (row stride 4 * (BM/4 + 1) floats: consecutive k quads 16 banks apart).
const uint SA = BM / 4u + 1u;
const uint SB = BN / 4u + 1u;
const uint STAGE = BK * (SA + SB);        // one buffer of A and B tiles, in vec4s
const uint LA = (BM * BK / 4u) / T1;      // vec4s of A (and B) each thread loads per k step
const uint LB = (BN * BK / 4u) / T1;
const uint ACC = TM * TN / 4u;            // accumulator vec4s per thread
const uint TILES = KS * 2u * STAGE;
const uint REDUCE = (KS - 1u) * ACC * T1;
shared vec4 smem[TILES > REDUCE ? TILES : REDUCE];

// Each operand is bound twice, as floats and as vec4s (Vulkan allows aliased bindings).
layout(std430, binding = 0) readonly buffer A_f { float a_f[]; };
layout(std430, binding = 0) readonly buffer A_v { vec4 a_v[]; };
layout(std430, binding = 1) readonly buffer B_f { float b_f[]; };
layout(std430, binding = 1) readonly buffer B_v { vec4 b_v[]; };
layout(std430, binding = 2) writeonly buffer C_f { float c_f[]; };
layout(std430, binding = 2) writeonly buffer C_v { vec4 c_v[]; };

layout(push_constant) uniform Push {
    uint M; uint N; uint K;
    uint a_batch_stride;   // elements between batch entries of A; 0 broadcasts
    uint b_batch_stride;
} p;

#include "gemm_tile.glsl"      // tile_pos, GEMM_TILE_STEP

#ifdef VKG_ONES_ROW
#define MROWS (p.M + 1u)
#else
#define MROWS p.M
#endif

// The four elements at storage index i; `nv` of them (0..4) are in range.
vec4 fetch_a(uint i, int nv) {
    if (nv <= 0) return vec4(0.0);
#ifdef VKG_LOAD_B0
    vec4 u = vec4(0.0);
    [[unroll]] for (int c = 0; c < 4; c++) if (c < nv) u[c] = VKG_LOAD_B0(i + uint(c));
    return u;
#endif
    if (VEC_A) return a_v[i >> 2];
    vec4 v = vec4(0.0);
    [[unroll]] for (int c = 0; c < 4; c++) if (c < nv) v[c] = a_f[i + uint(c)];
    return v;
}

float load_b1(uint i) {
#ifdef VKG_LOAD_B1
    return VKG_LOAD_B1(i);
#else
    return b_f[i];
#endif
}

vec4 fetch_b(uint i, int nv) {
    if (nv <= 0) return vec4(0.0);
#ifdef VKG_LOAD_B1
    vec4 u = vec4(0.0);
    [[unroll]] for (int c = 0; c < 4; c++) if (c < nv) u[c] = VKG_LOAD_B1(i + uint(c));
    return u;
#endif
    if (VEC_B) return b_v[i >> 2];
    vec4 v = vec4(0.0);
    [[unroll]] for (int c = 0; c < 4; c++) if (c < nv) v[c] = b_f[i + uint(c)];
    return v;
}

void main() {
    const uint tid = gl_LocalInvocationID.x;
    const uint slice = tid / T1, stid = tid % T1;
    uint tx, ty;
    if (WARP_X == 0u) {
        tx = stid % TX; ty = stid / TX;
    } else {
        const uint warp = stid / 32u, lane = stid % 32u;
        tx = (warp % (TX / WARP_X)) * WARP_X + lane % WARP_X;
        ty = (warp / (TX / WARP_X)) * (32u / WARP_X) + lane / WARP_X;
    }
    const uint n0 = gl_WorkGroupID.x * BN, m0 = gl_WorkGroupID.y * BM;
    // Split-K: z = split * batches + batch; this workgroup's K slice starts at k_begin and is
    // Kl long (Kl is set below, where K was first read before split-K: unsplit, the SPIR-V
    // then matches the shader without split-K instruction for instruction).
    // Unsplit (SPLITS == 1): batch = z, k_begin = 0, Kl = K.
    const uint batches = gl_NumWorkGroups.z / SPLITS;
    const uint batch = SPLITS > 1u ? gl_WorkGroupID.z % batches : gl_WorkGroupID.z;
    const uint chunk = ceil_div(ceil_div(p.K, BK * KS), SPLITS) * (BK * KS);
    const uint k_begin = SPLITS > 1u ? (gl_WorkGroupID.z / batches) * chunk : 0u;
    const bool a_kc = !TRANS_A, b_kc = TRANS_B;
    const uint a_ld = a_kc ? p.K : p.M, b_ld = b_kc ? p.K : p.N;   // leading dims of storage
    const uint a_kstep = a_kc ? 1u : a_ld, b_kstep = b_kc ? 1u : b_ld;
#ifdef VKG_ONES_ROW
    // When M is a multiple of BM the ones row has workgroups of its own: they only sum columns
    // of op(B) over their K slice (no A, no tiles; the other workgroups keep exact tiles).
    if (m0 >= p.M) {
        const uint kl = SPLITS > 1u ? (k_begin < p.K ? min(chunk, p.K - k_begin) : 0u) : p.K;
        const uint c_row = gl_WorkGroupID.z * MROWS * p.N + p.M * p.N;
        for (uint c = gl_LocalInvocationID.x; c < BN && n0 + c < p.N; c += KS * T1) {
            const uint base = batch * p.b_batch_stride + (b_kc ? (n0 + c) * b_ld : n0 + c);
            float sum = 0.0;
            for (uint k = k_begin; k < k_begin + kl; k++) sum += load_b1(base + k * b_kstep);
#ifdef VKG_STORE_B2
            VKG_STORE_B2(c_row + n0 + c, sum);
#else
            c_f[c_row + n0 + c] = sum;                // split-K: into this slice's partials
#endif
        }
        return;
    }
#endif

    // Per loaded vec4, what does not change along K: its place in the tile, its storage index at
    // k = 0, and how many of its elements are in range along M (or N).
    uint a_r[LA], a_kk[LA], a_base[LA]; int a_rv[LA];
    [[unroll]] for (uint l = 0; l < LA; l++) {
        tile_pos(stid, l, BM, a_kc, a_r[l], a_kk[l]);
        const uint gr = m0 + a_r[l];
        a_base[l] = batch * p.a_batch_stride + (a_kc ? gr * a_ld : gr) + k_begin * a_kstep;
        a_rv[l] = gr < p.M ? (a_kc ? 4 : min(4, int(p.M - gr))) : 0;
    }
    uint b_r[LB], b_kk[LB], b_base[LB]; int b_rv[LB];
    [[unroll]] for (uint l = 0; l < LB; l++) {
        tile_pos(stid, l, BN, b_kc, b_r[l], b_kk[l]);
        const uint gr = n0 + b_r[l];
        b_base[l] = batch * p.b_batch_stride + (b_kc ? gr * b_ld : gr) + k_begin * b_kstep;
        b_rv[l] = gr < p.N ? (b_kc ? 4 : min(4, int(p.N - gr))) : 0;
    }

    vec4 areg[LA], breg[LB];
#ifdef VKG_ONES_ROW
    // op(A)'s row M is ones (for k inside this slice); A's storage has no such row.
#define ONES_ROW_FIX(l, gk)                                                                     \
    if (a_kc) {                                                                                 \
        if (m0 + a_r[l] == p.M) areg[l] = vec4(lessThan(uvec4(gk) + uvec4(0u, 1u, 2u, 3u), uvec4(Kl))); \
    } else if (m0 + a_r[l] <= p.M && p.M < m0 + a_r[l] + 4u) {                                   \
        areg[l][p.M - m0 - a_r[l]] = (gk) < Kl ? 1.0 : 0.0;                                     \
    }
#else
#define ONES_ROW_FIX(l, gk)
#endif
    vec4 acc[TM][TN / 4u];
    [[unroll]] for (uint i = 0; i < TM; i++)
        [[unroll]] for (uint j = 0; j < TN / 4u; j++) acc[i][j] = vec4(0.0);

    // Global -> registers for the k step starting at k0 (zeros past K, so a slice whose step
    // lies past the end contributes nothing). k0 and Kl are relative to this split's K slice.
#define LOAD_TILES(k0, q)                                                                       \
    [[unroll]] for (uint l = (q) * (LA / PHASES); l < ((q) + 1u) * (LA / PHASES); l++) {        \
        const uint gk = (k0) + a_kk[l];                                                         \
        const int nv = !CHECK ? 4 :                                                             \
            gk < Kl ? (a_kc ? min(a_rv[l], int(Kl - gk)) : a_rv[l]) : 0;                        \
        areg[l] = fetch_a(a_base[l] + gk * a_kstep, nv);                                        \
        ONES_ROW_FIX(l, gk)                                                                     \
    }                                                                                           \
    [[unroll]] for (uint l = (q) * (LB / PHASES); l < ((q) + 1u) * (LB / PHASES); l++) {        \
        const uint gk = (k0) + b_kk[l];                                                         \
        const int nv = !CHECK ? 4 :                                                             \
            gk < Kl ? (b_kc ? min(b_rv[l], int(Kl - gk)) : b_rv[l]) : 0;                        \
        breg[l] = fetch_b(b_base[l] + gk * b_kstep, nv);                                        \
    }

    // Registers -> shared stage `st`, k-major; k-contiguous operands are transposed here.
#define STORE_TILES(st, q)                                                                      \
    [[unroll]] for (uint l = (q) * (LA / PHASES); l < ((q) + 1u) * (LA / PHASES); l++) {        \
        const uint at = (st) * STAGE + a_kk[l] * SA + a_r[l] / 4u;                              \
        if (a_kc) {                                                                             \
            [[unroll]] for (uint c = 0; c < 4u; c++) smem[at + c * SA][a_r[l] % 4u] = areg[l][c]; \
        } else {                                                                                \
            smem[at] = areg[l];                                                                 \
        }                                                                                       \
    }                                                                                           \
    [[unroll]] for (uint l = (q) * (LB / PHASES); l < ((q) + 1u) * (LB / PHASES); l++) {        \
        const uint at = (st) * STAGE + BK * SA + b_kk[l] * SB + b_r[l] / 4u;                    \
        if (b_kc) {                                                                             \
            [[unroll]] for (uint c = 0; c < 4u; c++) smem[at + c * SB][b_r[l] % 4u] = breg[l][c]; \
        } else {                                                                                \
            smem[at] = breg[l];                                                                 \
        }                                                                                       \
    }

    const uint Kl = SPLITS > 1u ? (k_begin < p.K ? min(chunk, p.K - k_begin) : 0u) : p.K;
    const uint iters = max(1u, ceil_div(ceil_div(Kl, BK), KS));
    const uint stage0 = slice * 2u;
    [[unroll]] for (uint q = 0; q < PHASES; q++) {
        LOAD_TILES(slice * BK, q)
        STORE_TILES(stage0, q)
    }
    barrier();

    for (uint s = 0; s < iters; s++) {
        const uint cur = stage0 + (s & 1u);
        // ALWAYS_PREFETCH: the last step prefetches too (a tile in range, stored to the stage
        // nobody reads any more), so the loop body has no branch.
        const bool more = ALWAYS_PREFETCH || s + 1u < iters;
        const uint k_next = (ALWAYS_PREFETCH && !CHECK)
                          ? min(((s + 1u) * KS + slice) * BK, Kl - BK)
                          : ((s + 1u) * KS + slice) * BK;
        const uint abase = cur * STAGE + ty, bbase = cur * STAGE + BK * SA + tx;
        [[unroll]] for (uint q = 0; q < PHASES; q++) {
            if (more) { LOAD_TILES(k_next, q) }
            [[unroll]] for (uint kk = q * (BK / PHASES); kk < (q + 1u) * (BK / PHASES); kk++)
                GEMM_TILE_STEP(kk)
            if (more) { STORE_TILES(cur ^ 1u, q) }
        }
        barrier();
    }

    // K slices 1.. hand their sums to slice 0 (layout [slice][vec4][thread]: conflict-free).
    if (KS > 1u) {
        if (slice > 0u) {
            [[unroll]] for (uint i = 0; i < TM; i++)
                [[unroll]] for (uint j = 0; j < TN / 4u; j++)
                    smem[((slice - 1u) * ACC + i * (TN / 4u) + j) * T1 + stid] = acc[i][j];
        }
        barrier();
        if (slice > 0u) return;
        for (uint s = 1u; s < KS; s++)
            [[unroll]] for (uint i = 0; i < TM; i++)
                [[unroll]] for (uint j = 0; j < TN / 4u; j++)
                    acc[i][j] += smem[((s - 1u) * ACC + i * (TN / 4u) + j) * T1 + stid];
    }

    // Thread (tx, ty) owns rows m0 + i*4*TY + 4*ty + r and columns n0 + j*4*TX + 4*tx + c.
    // C is [batch][M][N], or with split-K [split][batch][M][N]: entry z either way.
    const uint c_off = gl_WorkGroupID.z * MROWS * p.N;
    [[unroll]] for (uint i = 0; i < TM / 4u; i++) {
        [[unroll]] for (uint r = 0; r < 4u; r++) {
            const uint row = m0 + i * 4u * TY + 4u * ty + r;
            if (row >= MROWS) continue;
            [[unroll]] for (uint j = 0; j < TN / 4u; j++) {
                const uint col = n0 + j * 4u * TX + 4u * tx;
                const uint at = c_off + row * p.N + col;
                const vec4 v = acc[i * 4u + r][j];
#ifdef VKG_STORE_B2
                [[unroll]] for (uint c = 0; c < 4u; c++)
                    if (col + c < p.N) VKG_STORE_B2(at + c, v[c]);
                continue;
#endif
                if (VEC_C) {
                    if (col < p.N) c_v[at >> 2] = v;
                } else {
                    [[unroll]] for (uint c = 0; c < 4u; c++)
                        if (col + c < p.N) c_f[at + c] = v[c];
                }
            }
        }
    }
}
