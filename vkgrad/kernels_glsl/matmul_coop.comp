#version 450
// C[b] (M x N, f32 or f16) = op(A[b]) (M x K, f16) @ op(B[b]) (K x N, f16) on cooperative
// matrices (VK_KHR_cooperative_matrix: the tensor cores), accumulating in f32.
//
// A workgroup computes a BM x BN block of C with (BM/WM) x (BN/WN) subgroups, each a WM x WN
// piece as (WM/16) x (WN/16) accumulators of 16 x 16. K is walked BK at a time: the next A and
// B tiles are read from memory into registers while the current ones, in shared memory, feed
// the products. Tiles are kept in shared memory in their memory order, the contiguous axis
// padded by 8 halves (16 bytes: rows start on different banks), so a transposed operand is the
// same copy and a column-major fragment load.
//
// Defines (lowering/matmul_coop.py plans them): BM BN BK WM WN SG (subgroup size); TRANS_A
// (A is stored K x M), TRANS_B (B is stored N x K); OUT_F16 (C is f16); SH_VEC (shared tiles as
// 16-byte words); STAGES 2 (double-buffered shared tiles, the loop as the single-buffered
// one); PIPE 1 or 2 (double-buffered, one barrier a k-step: see the loop); VEC (the contiguous axes of A and B are multiples of 8 halves:
// 16-byte loads); ALIGNED (with VEC: M, N and K are multiples of BM, BN and BK, so no load is
// tested against the edges and the addresses are computed once); FRAG_B_ONE (B's fragments
// loaded one at a time, each used at once: fewer live registers); GROUP_M g (blocks walked in
// bands of g block rows, for L2); PANELS (shared tiles unpadded, as panels 16 halves wide: see
// below); VKG_BFLOAT16 (the operands and an
// f16 output are bfloat16: see the bindings below). Bindings: 0 A, 1 B, 2 C, as
// packed halves (two per 32-bit word). Push constants: M N K lda ldb ldc (elements) and the
// batch strides sa sb sc (elements).
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_control_flow_attributes : require

#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 128
#endif
#ifndef BK
#define BK 32
#endif
#ifndef WM
#define WM 64
#endif
#ifndef WN
#define WN 64
#endif
#ifndef SG
#define SG 32
#endif
#define FM (WM / 16)
#define FN (WN / 16)
#define NWARPS ((BM / WM) * (BN / WN))
#define NT (NWARPS * SG)
#ifndef PAD
#define PAD 8
#endif

layout(local_size_x = NT) in;

layout(push_constant) uniform Push {
    uint M, N, K, lda, ldb, ldc, sa, sb, sc;
} p;

// A and B are read as bits (32-bit words, or 16-byte words with VEC): the kernel does no
// arithmetic on its 16-bit operands, so the same code multiplies float16 and, with
// VKG_BFLOAT16 (runtime/spirv_bfloat16.py makes the shader's float16_t bfloat16), bfloat16
layout(set = 0, binding = 0) readonly buffer A2 { uint a2[]; };
layout(set = 0, binding = 0) readonly buffer A4 { uvec4 a4[]; };
layout(set = 0, binding = 1) readonly buffer B2 { uint b2[]; };
layout(set = 0, binding = 1) readonly buffer B4 { uvec4 b4[]; };
#ifdef OUT_F16
#define OUT_T float16_t
#else
#define OUT_T float
#endif
layout(set = 0, binding = 2) writeonly buffer C1 { OUT_T c1[]; };

// The shared tiles, in memory order: rows of the contiguous axis, ROW_* halves each (padded).
#ifdef TRANS_A
#define A_ROWS BK
#define A_COLS BM
#else
#define A_ROWS BM
#define A_COLS BK
#endif
#ifdef TRANS_B
#define B_ROWS BN
#define B_COLS BK
#else
#define B_ROWS BK
#define B_COLS BN
#endif
#ifdef PANELS
// A tile of ROWS x COLS as COLS / 16 panels of ROWS x 16, one after the other, no padding:
// every fragment lies in one panel, its rows 32 bytes apart (two-way bank conflicts where the
// padded rows have none, for a quarter less shared memory at BK 32: two stages of 128 x 128 x 32
// in 32 KB)
#define A_STRIDE A_COLS
#define B_STRIDE B_COLS
#define A_AT(r, c) (((c) / 16) * (A_ROWS * 16) + (r) * 16 + (c) % 16)
#define B_AT(r, c) (((c) / 16) * (B_ROWS * 16) + (r) * 16 + (c) % 16)
#define A_LD 16
#define B_LD 16
#else
#define A_STRIDE (A_COLS + PAD)
#define B_STRIDE (B_COLS + PAD)
#define A_AT(r, c) ((r) * A_STRIDE + (c))
#define B_AT(r, c) ((r) * B_STRIDE + (c))
#define A_LD A_STRIDE
#define B_LD B_STRIDE
#endif
#ifdef PIPE
#undef STAGES
#define STAGES 2
#endif
#ifndef STAGES
#define STAGES 1
#endif
#define A_SIZE (A_ROWS * A_STRIDE)
#define B_SIZE (B_ROWS * B_STRIDE)
#ifdef SH_VEC
// 16-byte words: a tile row of the contiguous axis is A_STRIDE / 8 of them; fragment loads
// count elements and strides in words
shared uvec4 shA[STAGES * A_SIZE / 8];
shared uvec4 shB[STAGES * B_SIZE / 8];
#define SH(x) ((x) / 8)
#else
shared float16_t shA[STAGES * A_SIZE];
shared float16_t shB[STAGES * B_SIZE];
#define SH(x) (x)
#endif
#ifndef ALIGNED
// a partial output fragment goes through here (one 16 x 16 per subgroup; ALIGNED has none)
shared OUT_T shC[NWARPS * 256];
#endif
#ifdef SH_EXTRA
// SH_EXTRA bytes of shared memory nobody needs (a probe of how shared memory bounds the
// workgroups a multiprocessor holds: bench/coop_matmul_probe.py)
shared uint shExtra[SH_EXTRA / 4];
#endif

#define A_VECS (A_ROWS * A_COLS / 8)     // 8-half pieces of a tile
#define B_VECS (B_ROWS * B_COLS / 8)
#define A_PER_ROW (A_COLS / 8)
#define B_PER_ROW (B_COLS / 8)
// The row and column of piece v of a tile with `per` pieces a row, pieces taken by threads in
// order. Row by row; with PANELS the rows run fastest in fours, so that the eight 16-byte
// stores of a quarter subgroup are 4 rows x 32 bytes of one panel (distinct banks; row by row
// they would be one row of four panels, 1 KB apart: four-way conflicts), and a subgroup still
// reads whole 64- or 128-byte runs of 4 or 8 rows
#ifdef PANELS
#if A_ROWS % 4 != 0 || B_ROWS % 4 != 0
#error PANELS needs tiles of whole fours of rows
#endif
#define PIECE_R(v, per) (((v) / (4 * (per))) * 4 + (v) % 4)
#define PIECE_C(v, per) ((((v) / 4) % (per)) * 8)
#define PASS_A (4 * A_PER_ROW)     // the pieces that make whole rows in this order
#define PASS_B (4 * B_PER_ROW)
#else
#define PIECE_R(v, per) ((v) / (per))
#define PIECE_C(v, per) (((v) % (per)) * 8)
#define PASS_A A_PER_ROW
#define PASS_B B_PER_ROW
#endif
#define A_PER ((A_VECS + NT - 1) / NT)
#define B_PER ((B_VECS + NT - 1) / NT)

uvec4 ra[A_PER];
uvec4 rb[B_PER];

// the bits of 16-bit element e of a buffer of 32-bit words (two elements a word, low first)
#define HALF(buf, e) ((((e) & 1u) != 0u ? buf[(e) >> 1] >> 16 : buf[(e) >> 1]) & 0xFFFFu)

// The 8 halves of row `r`, columns c..c+7 of an operand stored rows x cols (leading dim ld),
// zero outside it. `base` is the batch's first element.
uvec4 load8A(uint base, uint r, uint c, uint rows, uint cols) {
    if (r >= rows || c >= cols) return uvec4(0);
#ifdef VEC
    return a4[(base + r * p.lda + c) / 8];
#else
    uint w[4];
    [[unroll]] for (uint i = 0; i < 4; i++) {
        uint c0 = c + 2 * i, e = base + r * p.lda + c0;
        w[i] = (c0 < cols ? HALF(a2, e) : 0u) | (c0 + 1 < cols ? HALF(a2, e + 1) << 16 : 0u);
    }
    return uvec4(w[0], w[1], w[2], w[3]);
#endif
}

uvec4 load8B(uint base, uint r, uint c, uint rows, uint cols) {
    if (r >= rows || c >= cols) return uvec4(0);
#ifdef VEC
    return b4[(base + r * p.ldb + c) / 8];
#else
    uint w[4];
    [[unroll]] for (uint i = 0; i < 4; i++) {
        uint c0 = c + 2 * i, e = base + r * p.ldb + c0;
        w[i] = (c0 < cols ? HALF(b2, e) : 0u) | (c0 + 1 < cols ? HALF(b2, e + 1) << 16 : 0u);
    }
    return uvec4(w[0], w[1], w[2], w[3]);
#endif
}


void main() {
    const uint tid = gl_LocalInvocationID.x;
#ifdef SH_EXTRA
    if (p.M == 0u) shExtra[tid % (SH_EXTRA / 4)] = 0u;    // never: keeps the array
#endif
    const uint warp = gl_SubgroupID;
    const uint wr = warp / (BN / WN), wc = warp % (BN / WN);
#ifdef GROUP_M
    // Blocks in column bands of GROUP_M rows, walked column by column: the workgroups running
    // at once share rows of A and columns of B in L2 (the dispatch order alone walks whole
    // rows of blocks, every column of B for each row of A)
    const uint gx = gl_NumWorkGroups.x, gy = gl_NumWorkGroups.y;
    const uint id = gl_WorkGroupID.y * gx + gl_WorkGroupID.x, band = id / (GROUP_M * gx);
    const uint first = band * GROUP_M, rows = min(gy - first, GROUP_M);
    const uint inBand = id - band * GROUP_M * gx;
    const uint m0 = (first + inBand % rows) * BM, n0 = (inBand / rows) * BN;
#else
    const uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN;
#endif
    const uint batch = gl_WorkGroupID.z;
    const uint baseA = batch * p.sa, baseB = batch * p.sb, baseC = batch * p.sc;

    // the operands as stored: rows x cols of memory
#ifdef TRANS_A
    const uint aRows = p.K, aCols = p.M;      // A^T: K x M
#else
    const uint aRows = p.M, aCols = p.K;
#endif
#ifdef TRANS_B
    const uint bRows = p.N, bCols = p.K;      // B^T: N x K
#else
    const uint bRows = p.K, bCols = p.N;
#endif

    coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> acc[FM][FN];
    [[unroll]] for (uint i = 0; i < FM; i++)
        [[unroll]] for (uint j = 0; j < FN; j++)
            acc[i][j] = coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(0.0);

    const uint tiles = (p.K + BK - 1) / BK;
#if A_VECS % NT == 0
#define A_HAS(v) true
#else
#define A_HAS(v) ((v) < A_VECS)
#endif
#if B_VECS % NT == 0
#define B_HAS(v) true
#else
#define B_HAS(v) ((v) < B_VECS)
#endif
#ifdef ALIGNED
    // Every tile lies inside A and B (M, N, K multiples of BM, BN, BK; rows on 16 bytes):
    // no bounds tests, and the addresses are computed once: piece q of this thread's share is
    // q * (NT / pieces a row) rows below its first, a tile BK along K past the last one.
#if NT % PASS_A != 0 || NT % PASS_B != 0
#error ALIGNED needs whole tile rows per pass of the workgroup
#endif
    const uint ra0 = PIECE_R(tid, A_PER_ROW), ca0 = PIECE_C(tid, A_PER_ROW);
    const uint rb0 = PIECE_R(tid, B_PER_ROW), cb0 = PIECE_C(tid, B_PER_ROW);
#ifdef TRANS_A
    uint ptrA = (baseA + ra0 * p.lda + m0 + ca0) / 8;
    const uint stepA = BK * p.lda / 8;
#else
    uint ptrA = (baseA + (m0 + ra0) * p.lda + ca0) / 8;
    const uint stepA = BK / 8;
#endif
#ifdef TRANS_B
    uint ptrB = (baseB + (n0 + rb0) * p.ldb + cb0) / 8;
    const uint stepB = BK / 8;
#else
    uint ptrB = (baseB + rb0 * p.ldb + n0 + cb0) / 8;
    const uint stepB = BK * p.ldb / 8;
#endif
    const uint rowsA = (NT / A_PER_ROW) * p.lda / 8, rowsB = (NT / B_PER_ROW) * p.ldb / 8;
    // the next tile's pieces into registers (tiles are fetched in order: t is implied)
#define FETCH(t) { \
        [[unroll]] for (uint q = 0; q < A_PER; q++) \
            if (A_HAS(tid + q * NT)) ra[q] = a4[ptrA + q * rowsA]; \
        [[unroll]] for (uint q = 0; q < B_PER; q++) \
            if (B_HAS(tid + q * NT)) rb[q] = b4[ptrB + q * rowsB]; \
        ptrA += stepA; ptrB += stepB; }
#else
    // tile t's pieces into registers
#define FETCH(t) { \
        const uint k0 = (t) * BK; \
        [[unroll]] for (uint q = 0; q < A_PER; q++) { \
            uint v = tid + q * NT, r = PIECE_R(v, A_PER_ROW), c = PIECE_C(v, A_PER_ROW); \
            TILE_A_COORDS \
            ra[q] = A_HAS(v) ? load8A(baseA, gr, gc, aRows, aCols) : uvec4(0); \
        } \
        [[unroll]] for (uint q = 0; q < B_PER; q++) { \
            uint v = tid + q * NT, r = PIECE_R(v, B_PER_ROW), c = PIECE_C(v, B_PER_ROW); \
            TILE_B_COORDS \
            rb[q] = B_HAS(v) ? load8B(baseB, gr, gc, bRows, bCols) : uvec4(0); \
        } }
#endif
#ifdef TRANS_A
#define TILE_A_COORDS uint gr = k0 + r, gc = m0 + c;
#else
#define TILE_A_COORDS uint gr = m0 + r, gc = k0 + c;
#endif
#ifdef TRANS_B
#define TILE_B_COORDS uint gr = n0 + r, gc = k0 + c;
#else
#define TILE_B_COORDS uint gr = k0 + r, gc = n0 + c;
#endif
    // registers into the shared tiles
#ifdef SH_VEC
#define PUT(sh, at, v) sh[(at) / 8] = v;
#else
#define PUT(sh, at, v) [[unroll]] for (uint w = 0; w < 4; w++) { \
                    f16vec2 h = unpackFloat2x16(v[w]); sh[(at) + 2 * w] = h.x; sh[(at) + 2 * w + 1] = h.y; }
#endif
#define STORE(stage) { \
        [[unroll]] for (uint q = 0; q < A_PER; q++) { \
            uint v = tid + q * NT; \
            if (A_HAS(v)) { \
                uint at = (stage) * A_SIZE + A_AT(PIECE_R(v, A_PER_ROW), PIECE_C(v, A_PER_ROW)); \
                PUT(shA, at, ra[q]) \
            } \
        } \
        [[unroll]] for (uint q = 0; q < B_PER; q++) { \
            uint v = tid + q * NT; \
            if (B_HAS(v)) { \
                uint at = (stage) * B_SIZE + B_AT(PIECE_R(v, B_PER_ROW), PIECE_C(v, B_PER_ROW)); \
                PUT(shB, at, rb[q]) \
            } \
        } }
    // the products of the shared tiles at `stage` (a constant in the PIPE loop) into acc
#ifdef TRANS_A
#define LOAD_A(f, sa, kk, mi) coopMatLoad(f, shA, SH((sa) + A_AT(kk, mi)), SH(A_LD), \
                                          gl_CooperativeMatrixLayoutColumnMajor);
#else
#define LOAD_A(f, sa, kk, mi) coopMatLoad(f, shA, SH((sa) + A_AT(mi, kk)), SH(A_LD), \
                                          gl_CooperativeMatrixLayoutRowMajor);
#endif
#ifdef TRANS_B
#define LOAD_B(f, sb, kk, ni) coopMatLoad(f, shB, SH((sb) + B_AT(ni, kk)), SH(B_LD), \
                                          gl_CooperativeMatrixLayoutColumnMajor);
#else
#define LOAD_B(f, sb, kk, ni) coopMatLoad(f, shB, SH((sb) + B_AT(kk, ni)), SH(B_LD), \
                                          gl_CooperativeMatrixLayoutRowMajor);
#endif
#ifdef FRAG_B_ONE
    // A's fragments of a k-step, then B's one at a time, each used at once (fewer live)
#define PRODUCTS(stage) { \
        const uint sa = (stage) * A_SIZE, sb = (stage) * B_SIZE; \
        [[unroll]] for (uint kk = 0; kk < BK; kk += 16) { \
            coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> fa[FM]; \
            [[unroll]] for (uint i = 0; i < FM; i++) LOAD_A(fa[i], sa, kk, wr * WM + i * 16) \
            [[unroll]] for (uint j = 0; j < FN; j++) { \
                coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> fb; \
                LOAD_B(fb, sb, kk, wc * WN + j * 16) \
                [[unroll]] for (uint i = 0; i < FM; i++) \
                    acc[i][j] = coopMatMulAdd(fa[i], fb, acc[i][j]); \
            } \
        } }
#else
#define PRODUCTS(stage) { \
        const uint sa = (stage) * A_SIZE, sb = (stage) * B_SIZE; \
        [[unroll]] for (uint kk = 0; kk < BK; kk += 16) { \
            coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> fa[FM]; \
            coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> fb[FN]; \
            [[unroll]] for (uint i = 0; i < FM; i++) LOAD_A(fa[i], sa, kk, wr * WM + i * 16) \
            [[unroll]] for (uint j = 0; j < FN; j++) LOAD_B(fb[j], sb, kk, wc * WN + j * 16) \
            [[unroll]] for (uint i = 0; i < FM; i++) \
                [[unroll]] for (uint j = 0; j < FN; j++) \
                    acc[i][j] = coopMatMulAdd(fa[i], fb[j], acc[i][j]); \
        } }
#endif

    FETCH(0)
    STORE(0)
#if defined(PIPE) && PIPE == 2
    if (tiles > 1) FETCH(1)
#endif
    barrier();
#ifdef PIPE
    // Two shared stages, one barrier a k-step: step t reads stage t % 2 and writes tile t + 1
    // to the other stage, which every subgroup finished reading before the last barrier.
    // PIPE 1: tile t + 1 comes from memory into registers before the products and goes to
    // shared memory after them; PIPE 2: it came during step t - 1 and goes to shared memory
    // first, then tile t + 2 is fetched (as long in flight, and the stores wait for their
    // loads outside the products). The loop is unrolled twice so that both stages' offsets
    // are constants.
#if PIPE == 2
#define STEP(t, cur, nxt) { \
        if ((t) + 1 < tiles) STORE(nxt) \
        if ((t) + 2 < tiles) FETCH((t) + 2) \
        PRODUCTS(cur) \
        barrier(); }
#else
#define STEP(t, cur, nxt) { \
        const bool more = (t) + 1 < tiles; \
        if (more) FETCH((t) + 1) \
        PRODUCTS(cur) \
        if (more) STORE(nxt) \
        barrier(); }
#endif
    for (uint t = 0; t < tiles; t += 2) {
        STEP(t, 0, 1)
        if (t + 1 >= tiles) break;
        STEP(t + 1, 1, 0)
    }
#else
    for (uint t = 0; t < tiles; t++) {
        if (t + 1 < tiles) FETCH(t + 1)
        PRODUCTS(t % STAGES)
#if STAGES == 2
        // the next tile goes to the other stage, which nobody reads now: one barrier a tile
        if (t + 1 < tiles) STORE((t + 1) % 2)
        barrier();
#else
        barrier();
        if (t + 1 < tiles) {
            STORE(0)
            barrier();
        }
#endif
    }
#endif

    // C: whole fragments straight to memory, a fragment over the edge through shared memory
    [[unroll]] for (uint i = 0; i < FM; i++) {
        [[unroll]] for (uint j = 0; j < FN; j++) {
            uint row = m0 + wr * WM + i * 16, col = n0 + wc * WN + j * 16;
            if (row >= p.M || col >= p.N) continue;
#ifdef OUT_F16
            coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> o =
                coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(acc[i][j]);
#else
            coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> o = acc[i][j];
#endif
#ifdef ALIGNED
            coopMatStore(o, c1, baseC + row * p.ldc + col, p.ldc,
                         gl_CooperativeMatrixLayoutRowMajor);
#else
            if (row + 16 <= p.M && col + 16 <= p.N) {
                coopMatStore(o, c1, baseC + row * p.ldc + col, p.ldc,
                             gl_CooperativeMatrixLayoutRowMajor);
            } else {
                coopMatStore(o, shC, warp * 256, 16, gl_CooperativeMatrixLayoutRowMajor);
                subgroupBarrier();
                for (uint e = gl_SubgroupInvocationID; e < 256; e += SG) {
                    uint r = row + e / 16, cc = col + e % 16;
                    if (r < p.M && cc < p.N) c1[baseC + r * p.ldc + cc] = shC[warp * 256 + e];
                }
                subgroupBarrier();
            }
#endif
        }
    }
}
