#version 450
// Flash attention, fp32, for q [BH][Lq][D], k and v [BH][Lk][D] (dense, row-major):
//   o = softmax(scale q k^T + mask) v,  lse = log(sum exp(scale q k^T + mask)) per query row,
// and its backward, after FlashAttention-2 (Dao 2023, Algorithms 1 and 2): scores are never
// stored; the backward recomputes them from q, k and the saved lse. Planned by
// vkgrad/lowering/attention.py, which documents the tile variants and what they cost.
//
// MODE (define):
//   0 forward    rows = a query tile; streams K/V tiles: S = Q K^T, online softmax (running max
//                and sum per row, accumulator rescaled by exp2(m_old - m_new)), O += P V.
//                Writes o and lse (natural log; -inf for a row with no allowed key, whose o is 0).
//   1 dQ         rows = a query tile; first delta = rowsum(dO * O) for its rows (written to
//                `delta` for MODE 2), then streams K/V tiles: S = Q K^T, P = exp(S - lse),
//                dP = dO V^T, dS = P (dP - delta), dQ += dS K. Writes dq. Run it before MODE 2.
//   2 dK/dV      rows = a key tile; streams Q/dO tiles (with lse and delta): S^T = K Q^T,
//                P^T = exp(S^T - lse), dP^T = V dO^T, dS^T = P^T (dP^T - delta),
//                dV += P^T dO, dK += dS^T Q. Writes dk, dv.
//   3 backward   MODE 2 that also writes this key tile's share of dQ, dS K, for every query
//                tile it visits, into its own slice of `dqp` [groups][BH][Lq][D] (KTG key tiles
//                per workgroup, one slice per workgroup: the later tiles add to what the same
//                thread wrote). S and dP are computed once. Needs delta (MODE 4) before it and
//                MODE 5 after it.
//   4 delta      rows = a query tile: delta = rowsum(dO * O) - dlse (MODE 1 computes it itself).
//   5 dQ sum     one thread per vec4 of dq: dq = scale * the sum of the slices of dqp whose key
//                tiles the query sees, in slice order.
// Without float atomics for dQ (FlashAttention-2 adds it atomically): either its own kernel
// (MODE 1, a workgroup per query tile looping over key tiles, as in Triton's fused-attention
// tutorial) or per-workgroup slices summed in a fixed order (MODES 3 and 5). Every sum has a
// fixed order, so results are bit-identical from run to run.
// HEAD_DIM (define): D, a multiple of 4 with D / 4 a multiple of TX.
// Specialization constants: see flash_common.glsl (tile sizes, PREFETCH, ALWAYS_PREFETCH); the
// causal flag is a push constant.
//
// Causal masking is bottom-right aligned (flash-attn >= 2.1): query i sees key j iff
// j <= i + Lk - Lq. Fully masked tiles are never visited; only tiles crossing the diagonal or
// the key range's end evaluate the mask. Scores are kept in base 2: s * scale * log2(e), exp2.
//
// Each loop step: [prefetch the next column tile into registers] -> dot products -> block to
// shared memory -> barrier -> outer product -> barrier -> store the prefetched tiles -> barrier.
// A column tile that only the dot products read (the forward's K, the dQ kernel's V) is stored
// right after the first barrier instead, and the forward, whose other tile (V) is first read
// after the next step's first barrier, needs no third barrier. PREFETCH = false copies global ->
// shared at the store points instead (fewer registers; on a CPU there is no latency to hide).
// ONE_COL (flash_common.glsl) gives each column tile its turn in one buffer, with a barrier
// pair at each change: forward K -> V, dQ V -> K, dK/dV Q -> dO -> Q; each tile is prefetched
// into registers while the product before its turn runs.
//
// Bindings: MODE 0: q, k, v, o, lse.  MODE 1: q, k, v, o, lse, do, dq, delta, dlse.
//           MODE 2: q, k, v, lse, do, delta, dk, dv.  MODE 3: those of MODE 2, dqp.
//           MODE 4: o, do, dlse, delta.  MODE 5: dqp, dq.
//           MODES 0-3 with biases (FA_BIASES): then q_bias, k_bias, v_bias.
#extension GL_GOOGLE_include_directive : require

#ifndef MODE
#define MODE 0
#endif
#ifndef HEAD_DIM
#define HEAD_DIM 64
#endif

#include "flash_common.glsl"

#if MODE <= 3
layout(std430, binding = 0) readonly buffer Qb { vec4 q_v[]; };
layout(std430, binding = 1) readonly buffer Kb { vec4 k_v[]; };
layout(std430, binding = 2) readonly buffer Vb { vec4 v_v[]; };
#endif

#if MODE == 0
layout(std430, binding = 3) writeonly buffer Ob { vec4 o_v[]; };
layout(std430, binding = 4) writeonly buffer Lb { float lse_out[]; };
// Shared: Q [BR][RS] | K [BC][RS] | V [BC][RS] | P^T [BC][PSR]
// (ONE_COL: K and V take turns in one buffer, Y_OFF == X_OFF; ROW_REGS: no Q tile)
const uint A_OFF = 0u, X_OFF = ROW_REGS ? 0u : BR * RS;
const uint Y_OFF = ONE_COL ? X_OFF : X_OFF + BC * RS;
const uint P_OFF = Y_OFF + BC * RS;
shared vec4 sm[P_OFF + BC * PSR];

#elif MODE == 1
layout(std430, binding = 3) readonly buffer Ob { vec4 o_v[]; };
layout(std430, binding = 4) readonly buffer Lb { float lse_in[]; };
layout(std430, binding = 5) readonly buffer dOb { vec4 do_v[]; };
layout(std430, binding = 6) writeonly buffer dQb { vec4 dq_v[]; };
layout(std430, binding = 7) writeonly buffer Db { float delta_out[]; };
layout(std430, binding = 8) readonly buffer dLb { float dlse_in[]; };
// Shared: Q [BR][RS] | dO [BR][RS] | K [BC][RS] | V [BC][RS] | dS^T [BC][PSR]
// (ONE_COL: V and K take turns in one buffer, Y_OFF == X_OFF; ROW_REGS: no Q and no dO tile)
const uint A_OFF = 0u, B_OFF = BR * RS, X_OFF = (ROW_REGS ? 0u : 2u) * BR * RS;
const uint Y_OFF = ONE_COL ? X_OFF : X_OFF + BC * RS;
const uint P_OFF = Y_OFF + BC * RS;
shared vec4 sm[P_OFF + BC * PSR];

#elif MODE == 2 || MODE == 3
layout(std430, binding = 3) readonly buffer Lb { float lse_in[]; };
layout(std430, binding = 4) readonly buffer dOb { vec4 do_v[]; };
layout(std430, binding = 5) readonly buffer Db { float delta_in[]; };
layout(std430, binding = 6) writeonly buffer dKb { vec4 dk_v[]; };
layout(std430, binding = 7) writeonly buffer dVb { vec4 dv_v[]; };
#if MODE == 3
layout(std430, binding = 8) buffer dQPb { vec4 dqp_v[]; };
#endif
// Shared: K [BR][RS] | V [BR][RS] | Q [BC][RS] | dO [BC][RS] | P^T [BC][PSR] | dS^T [BC][PSR],
// and the column tile's lse * log2(e) and delta (ONE_COL: Q, dO and Q again take turns in one
// buffer, Y_OFF == X_OFF). KV_REGS (ROW_REGS in MODE 2; MODE 3's dQ product reads the K tile):
// no K and no V tile, each thread's share of them in registers.
#if MODE == 2
const bool KV_REGS = ROW_REGS;
#else
const bool KV_REGS = false;
#endif
const uint A_OFF = 0u, B_OFF = BR * RS, X_OFF = (KV_REGS ? 0u : 2u) * BR * RS;
const uint Y_OFF = ONE_COL ? X_OFF : X_OFF + BC * RS;
const uint P_OFF = Y_OFF + BC * RS, S_OFF = P_OFF + BC * PSR;
shared vec4 sm[S_OFF + BC * PSR];
shared float stat[2u * BC];
const uint NLS = (BC + T - 1u) / T;       // lse/delta loads per thread
const uint TU = T / DQ_SPLIT;             // MODE 3: lane groups of the dQ product
const uint NQO = (BC * DV + TU - 1u) / TU;  // ... and dQ vec4s per group per query tile

#elif MODE == 4
layout(std430, binding = 0) readonly buffer Ob { vec4 o_v[]; };
layout(std430, binding = 1) readonly buffer dOb { vec4 do_v[]; };
layout(std430, binding = 2) readonly buffer dLb { float dlse_in[]; };
layout(std430, binding = 3) writeonly buffer Db { float delta_out[]; };
shared vec4 sm[(BR * TX + 3u) / 4u];      // ROW_REDUCE's scratch (subgroups under TX lanes)

#elif MODE == 5
layout(std430, binding = 0) readonly buffer dQPb { vec4 dqp_v[]; };
layout(std430, binding = 1) writeonly buffer dQb { vec4 dq_v[]; };
#else
#error "MODE must be 0 (forward), 1 (dQ), 2 (dK/dV), 3 (backward), 4 (delta) or 5 (dQ sum)"
#endif

// the biases of q, k, v (FA_BIASES in flash_common.glsl), bound after the mode's own buffers
#if MODE <= 3 && (defined(Q_BSH) || defined(K_BSH) || defined(V_BSH))
#if MODE == 0
#define FA_NB 5
#elif MODE == 2
#define FA_NB 8
#else
#define FA_NB 9
#endif
layout(std430, binding = FA_NB) readonly buffer QBias { vec4 q_bias_v[]; };
layout(std430, binding = FA_NB + 1) readonly buffer KBias { vec4 k_bias_v[]; };
layout(std430, binding = FA_NB + 2) readonly buffer VBias { vec4 v_bias_v[]; };
#endif

#if MODE == 1 || MODE == 4
// DLSE_ZERO (define, from lowering/attention_layouts.py): dlse is known zero (a first
// derivative's), so it is never read and its binding holds any buffer.
#ifdef DLSE_ZERO
#undef DLSE_ZERO
const bool DLSE_ZERO = true;
#else
const bool DLSE_ZERO = false;
#endif
// delta = rowsum(dO * O) - dlse for this thread's rows q0 + ty + TY*m: each of the TX threads
// of a row sums its vec4 columns (dO's vec4 j of row m is DO_AT(m, j, row)), then they combine
// and thread tx = 0 writes it. lse's own cotangent shifts delta: d lse_i / d s_ij = P_ij, so
// dS = P (dP - delta + dlse); dlse is zero in a first derivative and not in a second
// (vkgrad/primitives/attention.py).
#define ROW_DELTA(dl, DO_AT, SCRATCH)                                                          \
    [[unroll]] for (uint m_ = 0u; m_ < TR; m_++) {                                              \
        const uint row_ = q0 + ty + TY * m_;                                                    \
        dl[m_] = 0.0;                                                                           \
        if (row_ < p.Lq) {                                                                      \
            [[unroll]] for (uint j_ = 0u; j_ < TDV; j_++) {                                     \
                const vec4 a_ = DO_AT(m_, j_, row_), b_ = o_v[o_b + row_ * o_rs + tx + TX * j_]; \
                dl[m_] = fma(a_.w, b_.w, fma(a_.z, b_.z, fma(a_.y, b_.y, fma(a_.x, b_.x, dl[m_])))); \
            }                                                                                   \
        }                                                                                       \
    }                                                                                           \
    ROW_REDUCE(dl, fa_add, SCRATCH)                                                             \
    [[unroll]] for (uint m_ = 0u; m_ < TR; m_++) {                                              \
        const uint row_ = q0 + ty + TY * m_;                                                    \
        if (row_ < p.Lq) {                                                                      \
            if (!DLSE_ZERO) dl[m_] -= dlse_in[bh * p.Lq + row_];                                \
            if (tx == 0u) delta_out[bh * p.Lq + row_] = dl[m_];                                 \
        }                                                                                       \
    }
#endif

#if MODE == 0 || MODE == 1
// Key tiles a query tile [q0, q0 + BR) visits: all of them, or with the causal mask those up to
// the last key its last valid query sees (none when even that query sees no key).
uint key_tiles(uint q0, int off) {
    uint kend = p.Lk;
    if (CAUSAL) kend = uint(clamp(int(min(q0 + BR, p.Lq)) + off, 0, int(p.Lk)));
    return ceil_div(kend, BC);
}
#endif

void main() {
    const uint g = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    if (g >= p.groups) return;                     // uniform: the whole workgroup leaves
#if MODE == 5
    // dq = scale * sum of the slices of dqp (KTG * BR keys each, `tiles` per head) holding key
    // tiles that query q sees; the others were never written (causal: their keys all follow
    // the query's last; MODE 3 skips those query tiles).
    const uint e = g * T + gl_LocalInvocationID.x, n = p.BH * p.Lq * DV;
    if (e >= n) return;
    const uint q = (e / DV) % p.Lq;
    uint slices = p.tiles;
    if (CAUSAL) {
        const int last = int(q) + int(p.Lk) - int(p.Lq);
        slices = last < 0 ? 0u : min(slices, uint(last) / (KTG * BR) + 1u);
    }
    vec4 a = vec4(0.0);
    for (uint i = 0u; i < slices; i++) a += dqp_v[i * n + e];
#ifdef DQ_SR
    const uint bh = e / (p.Lq * DV);
    dq_v[dq_base(bh) + q * dq_rs + e % DV] = a * p.scale;
#else
    dq_v[e] = a * p.scale;
#endif
    return;
#else
    const uint tid = fa_tid(), tx = tid % TX, ty = tid / TX;
    const int off = int(p.Lk) - int(p.Lq);         // query i sees key j iff j <= i + off
    uint bh, t;
    fa_tile_of(g, MODE != 2 && MODE != 3, bh, t);   // heavy key tiles come first
    // vec4 offsets of this head's rows in each operand (FA_LAYOUTS in flash_common.glsl)
    const uint q_b = q_base(bh), k_b = k_base(bh), v_b = v_base(bh), o_b = o_base(bh);
    const uint do_b = do_base(bh), dq_b = dq_base(bh), dk_b = dk_base(bh), dv_b = dv_base(bh);

#if MODE == 0
    const uint q0 = t * BR;
    const uint ntiles = key_tiles(q0, off);
    vec4 qr[TR][TDV];                // ROW_REGS: this thread's share of the Q tile
    if (ROW_REGS) { LOAD_ROWS(qr, q, q0, p.Lq) }
    else { COPY_TILE(q, A_OFF, BR, NLR, q0, p.Lq) }
    if (ntiles > 0u) {
        COPY_TILE(k, X_OFF, BC, NLC, 0u, p.Lk)
        if (!ONE_COL) { COPY_TILE(v, Y_OFF, BC, NLC, 0u, p.Lk) }
    }
    barrier();
    vec4 xr[NLC], yr[NLC];           // the next K and V tiles (PREFETCH; ONE_COL: this step's V)

    float mrun[TR], lrun[TR];        // running max (base 2) and this thread's share of the sum
    vec4 acc[TR][TDV];
    [[unroll]] for (uint m = 0u; m < TR; m++) {
        mrun[m] = NEG_INF;
        lrun[m] = 0.0;
        [[unroll]] for (uint j = 0u; j < TDV; j++) acc[m][j] = vec4(0.0);
    }

    for (uint jt = 0u; jt < ntiles; jt++) {
        const uint kv0 = jt * BC;
        // ALWAYS_PREFETCH: the last step reloads its own tile into buffers nobody reads any
        // more, so the step has no branch around the prefetch.
        const bool more = ALWAYS_PREFETCH || jt + 1u < ntiles;
        const uint nxt = jt + 1u < ntiles ? kv0 + BC : kv0;
        if (PREFETCH && ONE_COL) {
            LOAD_TILE(yr, v, BC, NLC, kv0, p.Lk)
        } else if (PREFETCH && more) {
            LOAD_TILE(xr, k, BC, NLC, nxt, p.Lk)
            LOAD_TILE(yr, v, BC, NLC, nxt, p.Lk)
        }
        float s[TR][TC];
        [[unroll]] for (uint m = 0u; m < TR; m++)
            [[unroll]] for (uint c = 0u; c < TC; c++) s[m][c] = 0.0;
        if (ROW_REGS) { DOT_REGS(s, qr, X_OFF) } else { DOT_BLOCK(s, A_OFF, X_OFF) }

        // Scale; mask (one uniform branch: only tiles past the key range's end or crossing the
        // diagonal); row max.
        [[unroll]] for (uint m = 0u; m < TR; m++)
            [[unroll]] for (uint c = 0u; c < TC; c++) s[m][c] *= p.scale_log2;
        if (kv0 + BC > p.Lk || (CAUSAL && int(kv0 + BC) - 1 > int(q0) + off)) {
            [[unroll]] for (uint m = 0u; m < TR; m++) {
                const int lim = int(q0 + ty + TY * m) + off;
                [[unroll]] for (uint c = 0u; c < TC; c++) {
                    const uint k = kv0 + tx + TX * c;
                    if (k >= p.Lk || (CAUSAL && int(k) > lim)) s[m][c] = NEG_INF;
                }
            }
        }
        // GLSL's max in the hot loop (it may drop a NaN score: that score's exp2(s - m) is NaN
        // all the same, and so are the row's sum and output); the row's max keeps one
        float mx[TR];
        [[unroll]] for (uint m = 0u; m < TR; m++) {
            mx[m] = s[m][0];
            [[unroll]] for (uint c = 1u; c < TC; c++) mx[m] = max(mx[m], s[m][c]);
        }
        ROW_REDUCE(mx, vkg_max, P_OFF)
        [[unroll]] for (uint m = 0u; m < TR; m++) {
            const float mnew = vkg_max(mrun[m], mx[m]);
            // A row with every key so far masked keeps m = -inf; subtracting 0 instead keeps
            // exp2 away from (-inf) - (-inf) and gives p = 0, alpha = 0.
            const float mu = mnew == NEG_INF ? 0.0 : mnew;
            const float alpha = exp2(mrun[m] - mu);
            mrun[m] = mnew;
            float ls = 0.0;
            [[unroll]] for (uint c = 0u; c < TC; c++) {
                s[m][c] = exp2(s[m][c] - mu);
                ls += s[m][c];
            }
            lrun[m] = lrun[m] * alpha + ls;
            [[unroll]] for (uint j = 0u; j < TDV; j++) acc[m][j] *= alpha;
        }
        WRITE_BLOCK_T(s, P_OFF)
        barrier();
        if (ONE_COL) {                                // K's turn is over: this step's V
            PUT_COLS(yr, v, Y_OFF, kv0, p.Lk)
            barrier();
            if (PREFETCH && more) { LOAD_TILE(xr, k, BC, NLC, nxt, p.Lk) }
        } else if (more) {                            // K is read only by the dot products
            PUT_COLS(xr, k, X_OFF, nxt, p.Lk)
        }
        OUTER_ACC(acc, P_OFF, Y_OFF)
        barrier();
        if (more) {
            if (ONE_COL) {                            // the next K, for the next dot products
                PUT_COLS(xr, k, X_OFF, nxt, p.Lk)
                barrier();
            } else {                                  // visible after the next step's barrier
                PUT_COLS(yr, v, Y_OFF, nxt, p.Lk)
            }
        }
    }

    ROW_REDUCE(lrun, fa_add, P_OFF)
    [[unroll]] for (uint m = 0u; m < TR; m++) {
        const uint row = q0 + ty + TY * m;
        if (row >= p.Lq) continue;
        // empty rows (lrun 0) give 0 and lse -inf; a NaN score keeps the row NaN, as numpy
        const float inv = !(lrun[m] <= 0.0) ? 1.0 / lrun[m] : 0.0;
        [[unroll]] for (uint j = 0u; j < TDV; j++) o_v[o_b + row * o_rs + tx + TX * j] = acc[m][j] * inv;
        if (tx == 0u)
            lse_out[bh * p.Lq + row] = !(lrun[m] <= 0.0) ? (mrun[m] + log2(lrun[m])) * LN2 : NEG_INF;
    }

#elif MODE == 1
    const uint q0 = t * BR;
    const uint ntiles = key_tiles(q0, off);
    vec4 qr[TR][TDV], dor[TR][TDV];  // ROW_REGS: this thread's share of the Q and dO tiles
    if (ROW_REGS) {
        LOAD_ROWS(qr, q, q0, p.Lq)
        LOAD_ROWS(dor, do, q0, p.Lq)
    } else {
        COPY_TILE(q, A_OFF, BR, NLR, q0, p.Lq)
        COPY_TILE(do, B_OFF, BR, NLR, q0, p.Lq)
    }
    if (ntiles > 0u) {                // ONE_COL: V's turn comes first
        if (!ONE_COL) { COPY_TILE(k, X_OFF, BC, NLC, 0u, p.Lk) }
        COPY_TILE(v, Y_OFF, BC, NLC, 0u, p.Lk)
    }
    barrier();
    vec4 xr[NLC], yr[NLC];           // the next K and V tiles (PREFETCH; ONE_COL: this step's K)

    // This thread's rows: lse in base 2, and delta (dO from shared memory, or its registers
    // with ROW_REGS).
    float lse2[TR], dl[TR];
    [[unroll]] for (uint m = 0u; m < TR; m++) {
        const uint row = q0 + ty + TY * m;
        lse2[m] = 0.0;
        if (row < p.Lq) lse2[m] = lse_in[bh * p.Lq + row] * LOG2E;
    }
#define DO_SHARED(m_, j_, row_) (ROW_REGS ? dor[m_][j_] : sm[B_OFF + (ty + TY * m_) * RS + tx + TX * j_])
    ROW_DELTA(dl, DO_SHARED, P_OFF)

    vec4 acc[TR][TDV];
    [[unroll]] for (uint m = 0u; m < TR; m++)
        [[unroll]] for (uint j = 0u; j < TDV; j++) acc[m][j] = vec4(0.0);

    for (uint jt = 0u; jt < ntiles; jt++) {
        const uint kv0 = jt * BC;
        // ALWAYS_PREFETCH: the last step reloads its own tile into buffers nobody reads any
        // more, so the step has no branch around the prefetch.
        const bool more = ALWAYS_PREFETCH || jt + 1u < ntiles;
        const uint nxt = jt + 1u < ntiles ? kv0 + BC : kv0;
        if (PREFETCH && ONE_COL) {
            LOAD_TILE(xr, k, BC, NLC, kv0, p.Lk)
        } else if (PREFETCH && more) {
            LOAD_TILE(xr, k, BC, NLC, nxt, p.Lk)
            LOAD_TILE(yr, v, BC, NLC, nxt, p.Lk)
        }
        float s[TR][TC], dp[TR][TC];
        [[unroll]] for (uint m = 0u; m < TR; m++)
            [[unroll]] for (uint c = 0u; c < TC; c++) { s[m][c] = 0.0; dp[m][c] = 0.0; }
        if (!ONE_COL) { if (ROW_REGS) { DOT_REGS(s, qr, X_OFF) } else { DOT_BLOCK(s, A_OFF, X_OFF) } }
        if (ROW_REGS) { DOT_REGS(dp, dor, Y_OFF) } else { DOT_BLOCK(dp, B_OFF, Y_OFF) }
        if (ONE_COL) {                                // V's turn is over: this step's K
            barrier();
            PUT_COLS(xr, k, X_OFF, kv0, p.Lk)
            barrier();
            if (PREFETCH && more) { LOAD_TILE(yr, v, BC, NLC, nxt, p.Lk) }
            if (ROW_REGS) { DOT_REGS(s, qr, X_OFF) } else { DOT_BLOCK(s, A_OFF, X_OFF) }
        }

        // dS = P (dP - delta), P = 0 where masked. Keys past Lk are zero rows of K and V and
        // would add nothing to dQ, but are masked too: a row's lse may be -inf (no allowed key)
        // and exp2 of +inf times 0 is NaN.
        [[unroll]] for (uint m = 0u; m < TR; m++)
            [[unroll]] for (uint c = 0u; c < TC; c++) s[m][c] = exp2(fma(s[m][c], p.scale_log2, -lse2[m]));
        if (kv0 + BC > p.Lk || (CAUSAL && int(kv0 + BC) - 1 > int(q0) + off)) {
            [[unroll]] for (uint m = 0u; m < TR; m++) {
                const int lim = int(q0 + ty + TY * m) + off;
                [[unroll]] for (uint c = 0u; c < TC; c++) {
                    const uint k = kv0 + tx + TX * c;
                    if (k >= p.Lk || (CAUSAL && int(k) > lim)) s[m][c] = 0.0;
                }
            }
        }
        [[unroll]] for (uint m = 0u; m < TR; m++)
            [[unroll]] for (uint c = 0u; c < TC; c++) s[m][c] *= dp[m][c] - dl[m];
        WRITE_BLOCK_T(s, P_OFF)
        barrier();
        if (!ONE_COL && more) {                       // V is read only by the dot products
            PUT_COLS(yr, v, Y_OFF, nxt, p.Lk)
        }
        OUTER_ACC(acc, P_OFF, X_OFF)
        barrier();
        if (more) {
            if (ONE_COL) { PUT_COLS(yr, v, Y_OFF, nxt, p.Lk) }   // the next V
            else { PUT_COLS(xr, k, X_OFF, nxt, p.Lk) }
            barrier();
        }
    }

    [[unroll]] for (uint m = 0u; m < TR; m++) {
        const uint row = q0 + ty + TY * m;
        if (row >= p.Lq) continue;
        [[unroll]] for (uint j = 0u; j < TDV; j++) dq_v[dq_b + row * dq_rs + tx + TX * j] = acc[m][j] * p.scale;
    }

#elif MODE == 2 || MODE == 3
#define LOAD_STATS(q0_)                                                                        \
    [[unroll]] for (uint l = 0u; l < NLS; l++) {                                                \
        const uint q = (q0_) + tid + l * T;                                                     \
        lr[l] = 0.0;                                                                            \
        dr[l] = 0.0;                                                                            \
        if (tid + l * T < BC && q < p.Lq) {                                                     \
            lr[l] = lse_in[bh * p.Lq + q] * LOG2E;                                              \
            dr[l] = delta_in[bh * p.Lq + q];                                                    \
        }                                                                                       \
    }
#define STORE_STATS()                                                                          \
    [[unroll]] for (uint l = 0u; l < NLS; l++) {                                                \
        if (tid + l * T < BC) {                                                                 \
            stat[tid + l * T] = lr[l];                                                          \
            stat[BC + tid + l * T] = dr[l];                                                     \
        }                                                                                       \
    }
#define COPY_COLS(q0_)                                                                         \
    COPY_TILE(q, X_OFF, BC, NLC, q0_, p.Lq)                                            \
    if (!ONE_COL) { COPY_TILE(do, Y_OFF, BC, NLC, q0_, p.Lq) }                         \
    LOAD_STATS(q0_)                                                                             \
    STORE_STATS()
    // KTG key tiles per workgroup, one after the other (the planner gives MODE 2 one).
    const uint nq = ceil_div(p.Lq, BC);
#if MODE == 3
    const uint pbase = (t * p.BH + bh) * p.Lq * DV;    // this workgroup's slice of dqp
#endif
    for (uint kk = 0u; kk < KTG; kk++) {
        const uint kv0 = (t * KTG + kk) * BR;
        if (kv0 >= p.Lk) break;                        // uniform: the head's last group
        if (kk > 0u) barrier();                        // the last tile's products are done
        // Causal: key kv0 is seen by queries from kv0 - off on; earlier query tiles are skipped.
        uint i0 = 0u;
        if (CAUSAL) {
            const int qs = max(int(kv0) - off, 0);
            i0 = qs >= int(p.Lq) ? nq : uint(qs) / BC;
        }
        vec4 krow[TR][TDV], vrow[TR][TDV];   // KV_REGS: this thread's share of the K, V tiles
        if (KV_REGS) {
            LOAD_ROWS(krow, k, kv0, p.Lk)
            LOAD_ROWS(vrow, v, kv0, p.Lk)
        } else {
            COPY_TILE(k, A_OFF, BR, NLR, kv0, p.Lk)
            COPY_TILE(v, B_OFF, BR, NLR, kv0, p.Lk)
        }
        // Query columns past Lq load as zero rows of Q and dO with lse = delta = 0: their P is
        // finite and every term they add (P dO, dS Q with dS = P (0 - 0)) is zero.
        vec4 xr[NLC], yr[NLC];           // the next Q and dO tiles (PREFETCH; ONE_COL: this step's
                                         // dO, then its Q again, then the next Q)
        float lr[NLS], dr[NLS];          // ... and their lse * log2(e), delta
        if (i0 < nq) { COPY_COLS(i0 * BC) }
        barrier();

        vec4 dk[TR][TDV], dv[TR][TDV];
        [[unroll]] for (uint m = 0u; m < TR; m++)
            [[unroll]] for (uint j = 0u; j < TDV; j++) { dk[m][j] = vec4(0.0); dv[m][j] = vec4(0.0); }

        for (uint it = i0; it < nq; it++) {
            const uint q0 = it * BC;
            const bool more = ALWAYS_PREFETCH || it + 1u < nq;
            const uint nxt = it + 1u < nq ? q0 + BC : q0;
            if (PREFETCH && ONE_COL) {
                LOAD_TILE(yr, do, BC, NLC, q0, p.Lq)
            } else if (PREFETCH && more) {
                LOAD_TILE(xr, q, BC, NLC, nxt, p.Lq)
                LOAD_TILE(yr, do, BC, NLC, nxt, p.Lq)
                LOAD_STATS(nxt)
            }
            float s[TR][TC], dp[TR][TC];
            [[unroll]] for (uint m = 0u; m < TR; m++)
                [[unroll]] for (uint c = 0u; c < TC; c++) { s[m][c] = 0.0; dp[m][c] = 0.0; }
            if (KV_REGS) { DOT_REGS(s, krow, X_OFF) } else { DOT_BLOCK(s, A_OFF, X_OFF) }
            if (ONE_COL) {                                // Q's first turn is over: this step's dO
                barrier();
                PUT_COLS(yr, do, Y_OFF, q0, p.Lq)
                barrier();
                if (PREFETCH) { LOAD_TILE(xr, q, BC, NLC, q0, p.Lq) }   // Q again, for dK
            }
            if (KV_REGS) { DOT_REGS(dp, vrow, Y_OFF) } else { DOT_BLOCK(dp, B_OFF, Y_OFF) }

            // P^T and dS^T; causal pairs (key k, query q) with k > q + off are zero. A query row
            // with no allowed key (lse = -inf) lies only in tiles that evaluate the mask.
            float l2[TC], dl[TC];
            [[unroll]] for (uint c = 0u; c < TC; c++) {
                l2[c] = stat[tx + TX * c];
                dl[c] = stat[BC + tx + TX * c];
            }
            [[unroll]] for (uint m = 0u; m < TR; m++)
                [[unroll]] for (uint c = 0u; c < TC; c++) s[m][c] = exp2(fma(s[m][c], p.scale_log2, -l2[c]));
            if (CAUSAL && int(kv0 + BR) - 1 > int(q0) + off) {
                [[unroll]] for (uint m = 0u; m < TR; m++)
                    [[unroll]] for (uint c = 0u; c < TC; c++)
                        if (int(kv0 + ty + TY * m) > int(q0 + tx + TX * c) + off) s[m][c] = 0.0;
            }
            [[unroll]] for (uint m = 0u; m < TR; m++)
                [[unroll]] for (uint c = 0u; c < TC; c++) dp[m][c] = s[m][c] * (dp[m][c] - dl[c]);
            WRITE_BLOCK_T(s, P_OFF)
            WRITE_BLOCK_T(dp, S_OFF)
            barrier();
            OUTER_ACC(dv, P_OFF, Y_OFF)
            if (ONE_COL) {                                // dO's turn is over: Q's second
                barrier();
                PUT_COLS(xr, q, X_OFF, q0, p.Lq)
                barrier();
                if (PREFETCH && more) {
                    LOAD_TILE(xr, q, BC, NLC, nxt, p.Lq)
                    LOAD_STATS(nxt)
                }
            }
            OUTER_ACC(dk, S_OFF, X_OFF)
#if MODE == 3
            // This query tile's share of dQ from this key tile, dS K: the transposed dS block at
            // S_OFF ([query][key slot]; slot s holds key rows s % TY + TY (4 (s / TY) + r), r < 4:
            // WRITE_BLOCK_T) times the K tile. DQ_SPLIT adjacent lanes share each output, each
            // summing every DQ_SPLIT-th slot, then combine over shuffles; lane group u = tid /
            // DQ_SPLIT computes D vec4 j = u % DV of the queries u / DV + (TU / DV) l, l < NQO
            // (consecutive groups, consecutive vec4s: conflict-free K reads, coalesced stores;
            // the K vec4s are shared by the NQO outputs). Output l is written by lane
            // l % DQ_SPLIT of its group, which adds what it wrote for the group's earlier key
            // tiles.
            {
                const uint sp = tid % DQ_SPLIT, u = tid / DQ_SPLIT, j = u % DV;
                vec4 qa[NQO];
                [[unroll]] for (uint l = 0u; l < NQO; l++) qa[l] = vec4(0.0);
                FA_STEP_LOOP for (uint i4 = 0u; i4 < BR / 4u / DQ_SPLIT; i4++) {
                    const uint s4 = sp + DQ_SPLIT * i4, r0 = s4 % TY + 4u * TY * (s4 / TY);
                    vec4 kr[4];
                    [[unroll]] for (uint r = 0u; r < 4u; r++) kr[r] = sm[A_OFF + (r0 + TY * r) * RS + j];
                    [[unroll]] for (uint l = 0u; l < NQO; l++) {
                        if (u + l * TU < BC * DV) {
                            const vec4 ds = sm[S_OFF + ((u + l * TU) / DV) * PSR + s4];
                            qa[l] = fma(vec4(ds.w), kr[3], fma(vec4(ds.z), kr[2],
                                    fma(vec4(ds.y), kr[1], fma(vec4(ds.x), kr[0], qa[l]))));
                        }
                    }
                }
                // a butterfly: every lane of the group ends with the same sums (a + b == b + a)
                [[unroll]] for (uint o = 1u; o < DQ_SPLIT; o <<= 1u)
                    [[unroll]] for (uint l = 0u; l < NQO; l++) qa[l] += subgroupShuffleXor(qa[l], o);
                [[unroll]] for (uint l = 0u; l < NQO; l++) {
                    const uint q = q0 + (u + l * TU) / DV;
                    if (l % DQ_SPLIT == sp && u + l * TU < BC * DV && q < p.Lq) {
                        const uint at = pbase + q * DV + j;
                        if (kk > 0u) qa[l] += dqp_v[at];
                        dqp_v[at] = qa[l];
                    }
                }
            }
#endif
            barrier();
            if (more) {
                if (PREFETCH) {
                    STORE_TILE(xr, X_OFF, BC, NLC)
                    if (!ONE_COL) { STORE_TILE(yr, Y_OFF, BC, NLC) }
                    STORE_STATS()
                } else {
                    COPY_COLS(nxt)
                }
                barrier();
            }
        }

        [[unroll]] for (uint m = 0u; m < TR; m++) {
            const uint row = kv0 + ty + TY * m;
            if (row >= p.Lk) continue;
            [[unroll]] for (uint j = 0u; j < TDV; j++) {
                dk_v[dk_b + row * dk_rs + tx + TX * j] = dk[m][j] * p.scale;
                dv_v[dv_b + row * dv_rs + tx + TX * j] = dv[m][j];
            }
        }
    }

#else  // MODE == 4
    const uint q0 = t * BR;
#define DO_GLOBAL(m_, j_, row_) do_v[do_b + (row_) * do_rs + tx + TX * (j_)]
    float dl[TR];
    ROW_DELTA(dl, DO_GLOBAL, 0u)
#endif
#endif  // MODE == 5
}
