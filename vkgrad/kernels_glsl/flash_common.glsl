// flash_common.glsl: the tile machinery of flash_attention.comp (planned by
// vkgrad/lowering/attention.py). Include it AFTER defining MODE and HEAD_DIM.
//
// Every kernel of the attention forward and backward has the same shape: a workgroup owns BR
// "rows" of one (batch, head) (queries in the forward and the dQ kernel, keys in the dK/dV
// kernel), keeps their [BR][D] tiles in shared memory, and streams [BC][D] tiles of the other
// side ("columns") through shared memory. Per column tile it computes one or two [BR][BC] score
// blocks as dot products over D, turns them into a [BR][BC] block (P, or dS), writes that block
// transposed to shared memory and accumulates [BR][D] += block @ column-tile (an outer product
// over the BC columns) in registers.
//
// Thread layout (TY x TX threads, TY = BR / TR): thread (ty, tx) owns
//   rows     ty + TY*m           for m < TR        (TR a multiple of 4)
//   columns  tx + TX*c           for c < TC = BC / TX
//   D vec4s  tx + TX*j           for j < TDV = D / (4 TX)   (of its [BR][D] accumulators)
// so the TX threads of one row group are consecutive invocations (one subgroup cluster: the
// forward's row max/sum is a butterfly of subgroup shuffles), and a warp of 32 reads in one load:
//   row tiles:    32/TX consecutive rows (one address per TX lanes: a broadcast),
//   column tiles: TX consecutive rows, the transposed block: 32/TX consecutive vec4s,
// all conflict-free because [*][D] tiles are stored with a row stride of D/4 + 1 vec4s (odd for
// every supported D: consecutive rows start in different bank quads) and the transposed block
// with BR/4 + 1 (odd too: BR is a multiple of 8 in every tile the planner uses).
// Row slot s = ty + TY*i (i < TR/4) of the transposed block holds rows m = 4i..4i+3 of thread
// row group ty as one vec4: only the thread that writes a slot's rows reads them back (any
// mapping of rows to slots works; this one makes the block writes and reads vec4).
//
// ONE_COL: the two column tiles a step reads (K and V; Q and dO in the dK/dV kernel) take turns
// in one shared buffer (Y_OFF == X_OFF), each loaded when the product that reads it begins, at
// the price of two more barriers per step (the dK/dV kernel loads its Q tile twice per step).
// At D = 128 that is what lets 64-query forward tiles and 128-thread workgroups fit 48 KiB.
//
// ROW_REGS: the row tiles (the forward's Q; the dQ kernel's Q and dO; the dK/dV kernel's K and
// V, not the fused backward's) stay in registers instead of shared memory, in the accumulators' layout (thread (ty, tx): rows ty + TY*m, D vec4s tx + TX*j), and
// its dot products are DOT_REGS: each thread dots its share of D with every column of the tile,
// and the row group sums the partials over subgroup shuffles. It frees a row tile of shared
// memory and loads each column vec4 once per TR*4 fmas; it costs TR*BC partials in registers and
// TR*BC/TX*(TX-1) shuffles per product, and needs subgroups of at least TX lanes.
//
// Dot products over D are written as four explicit fma()s per vec4 pair (dot() would add a
// separate multiply and add per term on some compilers).

#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#include "common.glsl"

layout(local_size_x_id = 0) in;           // = (BR / TR) * TX
SPEC_CONST(1) uint BR = 64;               // rows per workgroup
SPEC_CONST(2) uint BC = 32;               // columns per streamed tile
SPEC_CONST(3) uint TR = 4;                // rows per thread, a multiple of 4
SPEC_CONST(4) uint TX = 8;                // threads per row group, a power of two
SPEC_CONST(5) bool PREFETCH = true;       // next column tile loads into registers early
SPEC_CONST(6) bool ALWAYS_PREFETCH = false;  // ... on every step: no branch around it
SPEC_CONST(7) bool ONE_COL = false;       // one column tile in shared memory at a time (below)
SPEC_CONST(8) bool ROW_REGS = false;      // the row tiles in registers (above)
SPEC_CONST(9) uint KTG = 1;               // key tiles per workgroup (the fused backward)
SPEC_CONST(10) uint DQ_SPLIT = 1;         // lanes that share a dQ output (the fused backward)

const uint D = HEAD_DIM;
const uint DV = D / 4u;                   // vec4s per row
const uint RS = DV + 1u;                  // row stride of [*][D] tiles in shared memory (vec4s)
const uint TY = BR / TR;
const uint T = TY * TX;                   // threads
const uint TC = BC / TX;                  // columns per thread
const uint TDV = DV / TX;                 // accumulator vec4s per row per thread
const uint RV = TR / 4u;                  // row slots per thread
const uint PSR = BR / 4u + 1u;            // row stride of the transposed [BC][BR] block (vec4s)
const uint NLR = (BR * DV + T - 1u) / T;  // vec4 loads per thread of a row tile
const uint NLC = (BC * DV + T - 1u) / T;  // ... of a column tile

// UNROLL_STEPS (define): the loops over D (dot products) and over the BC columns (outer
// products). 1 (default): unrolled, for the GPU's scheduler (a step of the D=64 dK/dV kernel is
// then ~4.5K instructions: if that thrashes the instruction cache, 2 leaves the choice to the
// driver's compiler); 0: rolled: lavapipe (LLVM) then compiles a pipeline in about a second
// instead of ~10. These loops index no register array, so every choice keeps the register
// arrays in registers; only the loop-control hint differs.
#ifndef UNROLL_STEPS
#define UNROLL_STEPS 1
#endif
#if UNROLL_STEPS == 1
#define FA_STEP_LOOP [[unroll]]
#elif UNROLL_STEPS == 0
#define FA_STEP_LOOP [[dont_unroll]]
#else
#define FA_STEP_LOOP
#endif

const float LOG2E = 1.4426950408889634;
const float LN2 = 0.6931471805599453;
#define NEG_INF uintBitsToFloat(0xff800000u)

layout(push_constant) uniform Push {
    uint Lq;
    uint Lk;
    uint BH;           // batch * heads
    uint tiles;        // row tiles per (batch, head)
    uint groups;       // BH * tiles: the grid may have surplus workgroups, which leave at once
    float scale_log2;  // scale * log2(e): scores in base-2 units, for exp2
    float scale;
    uint causal;       // bottom-right aligned causal mask. A push constant, not a specialization
                       // constant: it only steers uniform control flow (which tiles are visited
                       // and which evaluate the mask), so one pipeline serves both.
} p;
#define CAUSAL (p.causal != 0u)

// FA_LAYOUTS: where each operand X (q, k, v, o, do, dq, dk, dv) keeps the rows of head bh. By
// default dense [BH][L][D]: head bh at bh * L * DV, row stride DV (L = Lq for q, o, do, dq; Lk
// for k, v, dk, dv), the same code as before layouts existed. With the defines X_AT, X_SB,
// X_SH, X_SR (vec4 units; HEADS the heads per batch, bh = b * HEADS + h) X is read or written
// in another array's place (lowering/attention_layouts.py: a view of the projection, e.g.
// q = qkv[:, :, 0] of [B, L, 3, H, D] transposed to [B, H, L, D]): head bh at
// X_AT + b * X_SB + h * X_SH, row stride X_SR. D stays contiguous. Compile-time either way.
#define FA_STRIDED(OFF, SB, SH, bh) ((OFF) + ((bh) / (HEADS)) * (SB) + ((bh) % (HEADS)) * (SH))
#ifdef Q_SR
#define q_base(bh) FA_STRIDED(Q_AT, Q_SB, Q_SH, bh)
const uint q_rs = Q_SR;
#else
#define q_base(bh) ((bh) * p.Lq * DV)
const uint q_rs = DV;
#endif
#ifdef K_SR
#define k_base(bh) FA_STRIDED(K_AT, K_SB, K_SH, bh)
const uint k_rs = K_SR;
#else
#define k_base(bh) ((bh) * p.Lk * DV)
const uint k_rs = DV;
#endif
#ifdef V_SR
#define v_base(bh) FA_STRIDED(V_AT, V_SB, V_SH, bh)
const uint v_rs = V_SR;
#else
#define v_base(bh) ((bh) * p.Lk * DV)
const uint v_rs = DV;
#endif
#ifdef O_SR
#define o_base(bh) FA_STRIDED(O_AT, O_SB, O_SH, bh)
const uint o_rs = O_SR;
#else
#define o_base(bh) ((bh) * p.Lq * DV)
const uint o_rs = DV;
#endif
#ifdef DO_SR
#define do_base(bh) FA_STRIDED(DO_AT, DO_SB, DO_SH, bh)
const uint do_rs = DO_SR;
#else
#define do_base(bh) ((bh) * p.Lq * DV)
const uint do_rs = DV;
#endif
#ifdef DQ_SR
#define dq_base(bh) FA_STRIDED(DQ_AT, DQ_SB, DQ_SH, bh)
const uint dq_rs = DQ_SR;
#else
#define dq_base(bh) ((bh) * p.Lq * DV)
const uint dq_rs = DV;
#endif
#ifdef DK_SR
#define dk_base(bh) FA_STRIDED(DK_AT, DK_SB, DK_SH, bh)
const uint dk_rs = DK_SR;
#else
#define dk_base(bh) ((bh) * p.Lk * DV)
const uint dk_rs = DV;
#endif
#ifdef DV_SR
#define dv_base(bh) FA_STRIDED(DV_AT, DV_SB, DV_SH, bh)
const uint dv_rs = DV_SR;
#else
#define dv_base(bh) ((bh) * p.Lk * DV)
const uint dv_rs = DV;
#endif
// FA_BIASES: q, k and v may each carry a bias added as they load (a projection's, whose add
// the pass folds too): with X_BAT, X_BSH defined, element (h, d) of X's bias (the same for every
// batch and row) is X_BAT + h * X_BSH + d (vec4s) of X's bias buffer (flash_attention.comp's
// bindings after the mode's own). Other operands, and q, k, v without, add nothing.
#ifdef Q_BSH
#define q_plus_bias(bh, d4) + q_bias_v[Q_BAT + ((bh) % (HEADS)) * Q_BSH + (d4)]
#else
#define q_plus_bias(bh, d4)
#endif
#ifdef K_BSH
#define k_plus_bias(bh, d4) + k_bias_v[K_BAT + ((bh) % (HEADS)) * K_BSH + (d4)]
#else
#define k_plus_bias(bh, d4)
#endif
#ifdef V_BSH
#define v_plus_bias(bh, d4) + v_bias_v[V_BAT + ((bh) % (HEADS)) * V_BSH + (d4)]
#else
#define v_plus_bias(bh, d4)
#endif
#define o_plus_bias(bh, d4)
#define do_plus_bias(bh, d4)

// This thread's index in subgroup order (see reduce_common.glsl): row groups of TX threads are
// then TX consecutive lanes of one subgroup whenever the subgroup has at least TX lanes.
uint fa_tid() { return gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID; }

// Workgroup -> (batch*head, row tile). Causal workgroups differ in work, so the heaviest tiles of
// every head go first and the short ones fill the tail: in the forward and dQ kernels the last
// query tiles see the most keys (HEAVY_LAST), in the dK/dV and backward kernels the first key
// tiles (or groups of them) see the most queries. Without a mask, one head's tiles are adjacent
// (they share K/V, or Q/dO, in L2).
void fa_tile_of(uint g, bool heavy_last, out uint bh, out uint t) {
    if (CAUSAL) {
        const uint k = g / p.BH;
        bh = g % p.BH;
        t = heavy_last ? p.tiles - 1u - k : k;
    } else {
        bh = g / p.tiles;
        t = g % p.tiles;
    }
}

float fa_add(float a, float b) { return a + b; }

// Rows row0.. of operand X's head (X_v at X_b, row stride X_rs) -> this thread's registers
// reg[l] = tile vec4 tid + l*T (coalesced: consecutive threads read consecutive vec4s of a row).
// Rows at or past `nrows` (and the surplus of the last load) read as zeros.
#define LOAD_TILE(reg, X, ROWS, NL, row0, nrows)                                      \
    [[unroll]] for (uint l_ = 0u; l_ < NL; l_++) {                                              \
        const uint e_ = tid + l_ * T, r_ = e_ / DV;                                             \
        reg[l_] = vec4(0.0);                                                                    \
        if (e_ < ROWS * DV && (row0) + r_ < (nrows)) reg[l_] = X##_v[X##_b + ((row0) + r_) * X##_rs + e_ % DV] X##_plus_bias(bh, e_ % DV); \
    }

// Registers -> the shared tile at OFF (row stride RS).
#define STORE_TILE(reg, OFF, ROWS, NL)                                                         \
    [[unroll]] for (uint l_ = 0u; l_ < NL; l_++) {                                              \
        const uint e_ = tid + l_ * T;                                                           \
        if (e_ < ROWS * DV) sm[(OFF) + (e_ / DV) * RS + e_ % DV] = reg[l_];                     \
    }

// Global -> shared directly, NL vec4s per thread (no register array: on lavapipe a rolled loop,
// see UNROLL_STEPS; on a GPU a constant trip count it can unroll).
#define COPY_TILE(X, OFF, ROWS, NL, row0, nrows)                                      \
    FA_STEP_LOOP for (uint l_ = 0u; l_ < NL; l_++) {                                            \
        const uint e_ = tid + l_ * T, r_ = e_ / DV;                                             \
        if (e_ < ROWS * DV) {                                                                   \
            vec4 x_ = vec4(0.0);                   /* an if, not ?:, which may load anyway */   \
            if ((row0) + r_ < (nrows)) x_ = X##_v[X##_b + ((row0) + r_) * X##_rs + e_ % DV] X##_plus_bias(bh, e_ % DV); \
            sm[(OFF) + r_ * RS + e_ % DV] = x_;                                                 \
        }                                                                                       \
    }

// The column tile of operand X from row col0 on -> the shared tile at OFF: from the registers `reg`
// it was prefetched into (PREFETCH), or straight from global memory.
#define PUT_COLS(reg, X, OFF, col0, ncols)                                           \
    if (PREFETCH) { STORE_TILE(reg, OFF, BC, NLC) }                                             \
    else { COPY_TILE(X, OFF, BC, NLC, col0, ncols) }

// acc[m][c] += sum over d of R[row m][d] * C[column c][d], R the row tile at ROFF, C the column
// tile at COFF. Per vec4 of D: TR + TC shared loads, 4 TR TC fmas.
#define DOT_BLOCK(acc, ROFF, COFF)                                                             \
    FA_STEP_LOOP for (uint d4_ = 0u; d4_ < DV; d4_++) {                                           \
        vec4 a_[TR], b_[TC];                                                                    \
        [[unroll]] for (uint m_ = 0u; m_ < TR; m_++) a_[m_] = sm[(ROFF) + (ty + TY * m_) * RS + d4_]; \
        [[unroll]] for (uint c_ = 0u; c_ < TC; c_++) b_[c_] = sm[(COFF) + (tx + TX * c_) * RS + d4_]; \
        [[unroll]] for (uint m_ = 0u; m_ < TR; m_++)                                            \
            [[unroll]] for (uint c_ = 0u; c_ < TC; c_++)                                        \
                acc[m_][c_] = fma(a_[m_].w, b_[c_].w, fma(a_[m_].z, b_[c_].z,                   \
                              fma(a_[m_].y, b_[c_].y, fma(a_[m_].x, b_[c_].x, acc[m_][c_])))); \
    }

// This thread's share of rows row0 + ty + TY*m, D vec4s tx + TX*j, of operand X's head
// -> reg[m][j] (zeros past `nrows`).
#define LOAD_ROWS(reg, X, row0, nrows)                                                 \
    [[unroll]] for (uint m_ = 0u; m_ < TR; m_++) {                                              \
        const uint r_ = (row0) + ty + TY * m_;                                                  \
        [[unroll]] for (uint j_ = 0u; j_ < TDV; j_++) {                                         \
            reg[m_][j_] = vec4(0.0);                                                            \
            if (r_ < (nrows)) reg[m_][j_] = X##_v[X##_b + r_ * X##_rs + tx + TX * j_] X##_plus_bias(bh, tx + TX * j_); \
        }                                                                                       \
    }

// acc[m][c] += sum over d of R[row m][d] * C[column c][d] as DOT_BLOCK, with R in registers
// (`reg`, LOAD_ROWS's layout). Per column vec4: one shared load, 4 TR fmas into the partials
// pt_[m][column]. Then the TX threads of the row group reduce-scatter the partials by recursive
// halving: at offset o a thread keeps the half of its columns whose lane slot (column % TX)
// agrees with its own tx in bit o, adding the partner's partials for them, so at the end it
// holds the sums of its own columns tx + TX*c. Every sum has a fixed order. Uniform control
// flow only; TX <= the subgroup size.
#define DOT_REGS(acc, reg, COFF)                                                               \
    {                                                                                           \
        float pt_[TR][BC];                                                                      \
        [[unroll]] for (uint cc_ = 0u; cc_ < BC; cc_++) {                                       \
            [[unroll]] for (uint m_ = 0u; m_ < TR; m_++) pt_[m_][cc_] = 0.0;                    \
            [[unroll]] for (uint j_ = 0u; j_ < TDV; j_++) {                                     \
                const vec4 b_ = sm[(COFF) + cc_ * RS + tx + TX * j_];                           \
                [[unroll]] for (uint m_ = 0u; m_ < TR; m_++)                                    \
                    pt_[m_][cc_] = fma(reg[m_][j_].w, b_.w, fma(reg[m_][j_].z, b_.z,            \
                        fma(reg[m_][j_].y, b_.y, fma(reg[m_][j_].x, b_.x, pt_[m_][cc_]))));     \
            }                                                                                   \
        }                                                                                       \
        [[unroll]] for (uint o_ = TX >> 1u; o_ > 0u; o_ >>= 1u) {                               \
            const bool up_ = (tx & o_) != 0u;                                                   \
            [[unroll]] for (uint c_ = 0u; c_ < TC; c_++)                                        \
                [[unroll]] for (uint j_ = 0u; j_ < o_; j_++)                                    \
                    [[unroll]] for (uint m_ = 0u; m_ < TR; m_++) {                              \
                        const float lo_ = pt_[m_][TX * c_ + j_], hi_ = pt_[m_][TX * c_ + j_ + o_]; \
                        pt_[m_][TX * c_ + j_] = (up_ ? hi_ : lo_)                               \
                                              + subgroupShuffleXor(up_ ? lo_ : hi_, o_);        \
                    }                                                                           \
        }                                                                                       \
        [[unroll]] for (uint m_ = 0u; m_ < TR; m_++)                                            \
            [[unroll]] for (uint c_ = 0u; c_ < TC; c_++) acc[m_][c_] += pt_[m_][TX * c_];       \
    }

// The thread's [TR][TC] block -> the transposed block at OFF: column c, slot ty + TY*i.
#define WRITE_BLOCK_T(blk, OFF)                                                                \
    [[unroll]] for (uint c_ = 0u; c_ < TC; c_++)                                                \
        [[unroll]] for (uint i_ = 0u; i_ < RV; i_++)                                            \
            sm[(OFF) + (tx + TX * c_) * PSR + ty + TY * i_] =                                   \
                vec4(blk[4u * i_][c_], blk[4u * i_ + 1u][c_], blk[4u * i_ + 2u][c_], blk[4u * i_ + 3u][c_]);

// acc[m][j] += sum over the BC columns c of block[m][c] * C[c][D vec4 tx + TX*j], the block read
// back transposed from BOFF, C the column tile at COFF. Per column: TR/4 + TDV shared loads,
// 4 TR TDV fmas.
#define OUTER_ACC(acc, BOFF, COFF)                                                             \
    FA_STEP_LOOP for (uint cc_ = 0u; cc_ < BC; cc_++) {                                           \
        vec4 p_[RV], v_[TDV];                                                                   \
        [[unroll]] for (uint i_ = 0u; i_ < RV; i_++) p_[i_] = sm[(BOFF) + cc_ * PSR + ty + TY * i_]; \
        [[unroll]] for (uint j_ = 0u; j_ < TDV; j_++) v_[j_] = sm[(COFF) + cc_ * RS + tx + TX * j_]; \
        [[unroll]] for (uint i_ = 0u; i_ < RV; i_++)                                            \
            [[unroll]] for (uint r_ = 0u; r_ < 4u; r_++)                                        \
                [[unroll]] for (uint j_ = 0u; j_ < TDV; j_++)                                   \
                    acc[4u * i_ + r_][j_] = fma(vec4(p_[i_][r_]), v_[j_], acc[4u * i_ + r_][j_]); \
    }

// v[m] = OP over the TX threads of the row group of v[m], the same bits in all of them. Call
// from uniform control flow. Subgroups of at least TX lanes (every desktop GPU: NVIDIA 32,
// AMD 32/64, lavapipe 8) use a butterfly of shuffles: each step combines a value with its
// partner's in both lanes, so all lanes end with one result (a + b == b + a). Narrower subgroups
// go through shared memory at SCRATCH (BR*TX floats; callers pass a region free at that point),
// combined in a fixed order.
#define ROW_REDUCE(v, OP, SCRATCH)                                                             \
    if (gl_SubgroupSize >= TX) {                                                                \
        [[unroll]] for (uint m_ = 0u; m_ < TR; m_++)                                            \
            [[unroll]] for (uint o_ = 1u; o_ < TX; o_ <<= 1u)                                   \
                v[m_] = OP(v[m_], subgroupShuffleXor(v[m_], o_));                               \
    } else {                                                                                    \
        [[unroll]] for (uint m_ = 0u; m_ < TR; m_++) {                                          \
            const uint at_ = (SCRATCH) * 4u + (ty * TR + m_) * TX + tx;                         \
            sm[at_ >> 2u][at_ & 3u] = v[m_];                                                    \
        }                                                                                       \
        barrier();                                                                              \
        [[unroll]] for (uint m_ = 0u; m_ < TR; m_++) {                                          \
            const uint at_ = (SCRATCH) * 4u + (ty * TR + m_) * TX;                              \
            float r_ = sm[at_ >> 2u][at_ & 3u];                                                 \
            for (uint x_ = 1u; x_ < TX; x_++) r_ = OP(r_, sm[(at_ + x_) >> 2u][(at_ + x_) & 3u]); \
            v[m_] = r_;                                                                         \
        }                                                                                       \
        barrier();                                                                              \
    }
