#version 450
// Mamba's selective scan (selective_scan_ref of state-spaces/mamba), fp32, forward and backward;
// planned by vkgrad/lowering/scan.py, which documents the operands, shapes and buffer roles.
//
//   delta'  = softplus(delta + delta_bias[d])      (each part optional; softplus(x) = x for x > 20)
//   h_t[n]  = exp(delta'_t * A[d,n]) * h_{t-1}[n] + delta'_t * B_t[n] * u_t        (h_{-1} = 0)
//   y_t     = sum_n C_t[n] * h_t[n] + D[d] * u_t;   out = y * silu(z)   (D, z optional)
// B and C are either "variable" [batch, N, L] or "fixed" [dim, N].
//
// MODE 0, forward. One workgroup per (batch b, G consecutive d's); NG = N / S threads per d, each
// owning S of the d's N states, so the workgroup holds G * N independent recurrences. It walks
// L in staging chunks of TF steps: u, delta, z (and variable B, C) are loaded coalesced along L
// (consecutive threads, consecutive t), transformed (bias, softplus, silu) and staged in shared
// memory, and the next chunk's loads are issued before this chunk's recurrence so they are in
// flight while it computes. Each thread then runs its S recurrences sequentially over the chunk
// (exp2 with A pre-scaled by log2(e)), keeping y's partial sum over its own S states for every
// t in registers. The sum over the NG threads of one d is a reduce-scatter (rs_reduce below):
// after it each thread holds finished y's for TF / NG of the t's, so the reduction costs about
// one subgroup shuffle per value instead of log2(NG) for a full all-reduce per t. Every TC steps
// (the chunk; TF is a multiple of it) the states are saved: states[b, c, d, n] = h at the end of
// chunk c, which is all the backward needs to restart any chunk.
//
// Sequential-within-chunk versus a work-efficient parallel scan along L (Blelloch, or mamba's
// block scan over threads; reasoned, not measured): there are batch * dim * N independent
// recurrences (131072 in the target shape, ~1000 per SM of an H200), enough to fill the GPU, so
// the time axis needs no parallelism of its own. A parallel scan would add combine steps (two
// shuffles, a multiply and a multiply-add each, log2(threads) of them per thread-level block)
// per element, and gain only latency that the other recurrences already hide. The sequential
// form does the minimum: one exp2, two multiplies and two multiply-adds per state and step.
//
// MODE 1, backward. Same workgroup decomposition (b, G d's, NG threads per d), but threads are
// numbered d-fastest, and the chunks are walked from the last to the first. Per chunk:
//   1. stage delta', delta' * u, dy = dout * silu(z), u, softplus'(.), dout * silu'(z), B, C;
//   2. recompute the forward from the saved state at the chunk's start, keeping h_t (and a_t
//      when STORE_A) for the chunk's TC steps in registers;
//   3. reverse scan: dh_t = dy_t C_t + a_{t+1} dh_{t+1} (the carry a_{t+1} dh_{t+1} crosses chunk
//      boundaries in registers), from which every gradient term of the step follows;
//   4. the sums over n (for ddelta, du and, with z, y itself for dz) go through shared memory
//      (NG partials per (d, t)), then threads own (d, t) pairs (t fastest, coalesced) and write
//      du, ddelta, dz.
// Gradients reduced over other axes never use float atomics, so every result is bit-identical
// from run to run:
//   - variable dB, dC (sum over d): each thread buffers Q steps x S states of dh*delta'*u and
//     dy*h, then the G threads of a workgroup reduce-scatter them over d (threads along d are
//     adjacent lanes); the result is one partial per (d-group, b, n, t), summed in MODE 2;
//   - dA, fixed dB / dC: per-thread sums over t in registers, one partial per (b, d, n);
//   - dD, ddelta_bias: per (d, t)-owner sums over t, folded per d at the end: partial per (b, d).
//
// MODE 2, final sums: out[m] = sum_p partials[off + p * M + m] for the five gradient sections
// (dA, dB, dC, dD, ddelta_bias), p in increasing order.
//
// Defines: MODE; N (d_state, a power of two); S (states per thread, divides N); HAS_D, HAS_Z,
// HAS_BIAS, SOFTPLUS, VARIABLE_B, VARIABLE_C (0/1); STORE_A (MODE 1: keep a_t in registers instead
// of recomputing its exp2 in the reverse pass); SUBGROUPS (see reduce_common.glsl).
// Specialization constants: 0 the workgroup size (G * NG, G a power of two); 1 TC, the chunk
// (steps between saved states; a power of two); 2 MODE 0: TF, steps staged at once (a multiple
// of TC); MODE 1: Q, steps per reduce-scatter of variable dB / dC (a power of two dividing TC).
//
// Bindings: MODE 0 and 1 bind u, delta, A, B, C, then D, z, delta_bias where present, then
//   MODE 0: out, states;  MODE 1: states, dout, du, ddelta, dz (with z), partials.
//   MODE 2 binds partials, dA, dB, dC, dD (with D), ddelta_bias (with bias).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x_id = 0) in;
#include "common.glsl"
#include "reduce_common.glsl"

#ifndef MODE
#define MODE 0
#endif
#ifndef N
#define N 16
#endif
#ifndef S
#define S 1
#endif
#ifndef HAS_D
#define HAS_D 0
#endif
#ifndef HAS_Z
#define HAS_Z 0
#endif
#ifndef HAS_BIAS
#define HAS_BIAS 0
#endif
#ifndef SOFTPLUS
#define SOFTPLUS 0
#endif
#ifndef VARIABLE_B
#define VARIABLE_B 0
#endif
#ifndef VARIABLE_C
#define VARIABLE_C 0
#endif
#ifndef STORE_A
#define STORE_A 0
#endif

#if (N % S) != 0
#error "S must divide N"
#endif
#define NG (N / S)
#define NVAR (VARIABLE_B + VARIABLE_C)

const uint NT = gl_WorkGroupSize.x;
SPEC_CONST(1) uint TC = 16;
SPEC_CONST(2) uint TX = 32;            // MODE 0: TF; MODE 1: Q

const float LOG2E = 1.4426950408889634;

#if MODE == 0 || MODE == 1
// ---------------------------------------------------------------- operands of MODE 0 and 1
#define BND_D 5
#define BND_Z (BND_D + HAS_D)
#define BND_BIAS (BND_Z + HAS_Z)
#define BND_REST (BND_BIAS + HAS_BIAS)
layout(set = 0, binding = 0) readonly buffer BufU { float u_[]; };
layout(set = 0, binding = 1) readonly buffer BufDelta { float delta_[]; };
layout(set = 0, binding = 2) readonly buffer BufA { float A_[]; };
layout(set = 0, binding = 3) readonly buffer BufB { float B_[]; };
layout(set = 0, binding = 4) readonly buffer BufC { float C_[]; };
#if HAS_D
layout(set = 0, binding = BND_D) readonly buffer BufD { float D_[]; };
#endif
#if HAS_Z
layout(set = 0, binding = BND_Z) readonly buffer BufZ { float z_[]; };
#endif
#if HAS_BIAS
layout(set = 0, binding = BND_BIAS) readonly buffer BufBias { float bias_[]; };
#endif

layout(push_constant) uniform Push {
    uint batch;
    uint dim;
    uint L;
    uint nC;       // chunks: ceil(L / TC)
    uint ndg;      // d groups: ceil(dim / G)
    uint total;    // workgroups: batch * ndg
    uint off_dA;   // MODE 1: sections of the partials buffer (MODE 0: unused)
    uint off_dB;
    uint off_dC;
    uint off_dD;
    uint off_db;
} p;

float softplus_fwd(float x) {
    if (x > 20.0) return x;                        // mamba's threshold; exp(x) cannot overflow below
    float e = exp(x);
    float w = 1.0 + e;
    // log1p(e), accurate for small e (Goldberg): log(w) * e / (w - 1) cancels w's rounding error.
    return w == 1.0 ? e : log(w) * (e / (w - 1.0));
}

float sigmoid(float x) { return 1.0 / (1.0 + exp(-x)); }  // exp(-x) = inf gives 0, not NaN

// delta' from the raw input and the bias.
float delta_eff(float x) {
#if SOFTPLUS
    return softplus_fwd(x);
#else
    return x;
#endif
}
#endif

#if MODE == 0 || (MODE == 1 && NVAR > 0)
// ---------------------------------------------------------------- reduce-scatter over lanes
// rs_v[RSV] of every thread is summed over the RSF threads whose indices (vkg_tid order) differ
// only in their low log2(RSF) bits ("lane" = those bits). Step j pairs values (2i, 2i+1): the
// thread whose lane bit j is 0 keeps the even one, its partner the odd one, each sends the other
// and adds what it receives. After min(log2 RSF, log2 RSV) such steps value i of a thread is the
// full sum of original index (i << ks) | (lane & (2^ks - 1)): consecutive lanes hold consecutive
// indices (coalesced stores). If RSV < RSF the remaining steps are plain butterflies (every lane
// holds the sum; only lanes whose upper bits are 0 store it). Each step exchanges through a
// subgroup shuffle when the partner is in the same subgroup (m < gl_SubgroupSize), otherwise
// through shared memory (the portable path: SUBGROUPS=0, or subgroups narrower than RSF, like
// lavapipe's 8 lanes). The order of every addition is fixed: deterministic.
#if MODE == 0
#define RSV TX                         // y partials for the TF staged steps
#define RSF NG                         // ... summed over the threads of one d
#else
#define RSV (NVAR * TX * S)            // (dB, dC) x S states x Q steps
#define RSF (NT / NG)                  // ... summed over the G d's of the workgroup
#endif
float rs_v[RSV];

// The shared-memory exchange moves up to RSX values per thread per round (two barriers per
// round), so its buffer stays NT * RSX floats whatever RSV is.
#define RSX 8u
const uint RS_ROUND = RSV / 2u < RSX ? (RSV / 2u == 0u ? 1u : RSV / 2u) : RSX;
shared float rs_x[RS_ROUND * NT];

void rs_step(uint j, uint lane, uint tid) {
    uint m = 1u << j;
    if (m >= RSF) return;                          // uniform (a constant after specialization)
    bool odd = (lane & m) != 0u;
    uint c = RSV >> j;                             // values still held before this step
#if SUBGROUPS
    if (m < gl_SubgroupSize) {                     // uniform: the partner is in this subgroup
        if (c >= 2u) {
            [[unroll]] for (uint i = 0u; i < RSV / 2u; ++i) {
                if (i < c / 2u) {
                    float lo = rs_v[2u * i], hi = rs_v[2u * i + 1u];
                    rs_v[i] = (odd ? hi : lo) + subgroupShuffleXor(odd ? lo : hi, m);
                }
            }
        } else {
            rs_v[0] = rs_v[0] + subgroupShuffleXor(rs_v[0], m);
        }
        return;
    }
#endif
    if (c < 2u) {
        barrier();                                 // earlier readers of rs_x are done
        rs_x[tid] = rs_v[0];
        barrier();
        rs_v[0] = rs_v[0] + rs_x[tid ^ m];
        return;
    }
    // Rounds of RS_ROUND pairs; ascending i never overwrites a value a later pair still reads.
    [[unroll]] for (uint r = 0u; r < RSV / 2u; r += RS_ROUND) {
        if (r < c / 2u) {
            barrier();
            [[unroll]] for (uint k = 0u; k < RS_ROUND; ++k) {
                uint i = r + k;
                if (i < c / 2u) rs_x[k * NT + tid] = odd ? rs_v[2u * i] : rs_v[2u * i + 1u];
            }
            barrier();
            [[unroll]] for (uint k = 0u; k < RS_ROUND; ++k) {
                uint i = r + k;
                if (i < c / 2u)
                    rs_v[i] = (odd ? rs_v[2u * i + 1u] : rs_v[2u * i]) + rs_x[k * NT + (tid ^ m)];
            }
        }
    }
}

// Returns ks: value i < (RSV >> ks) now holds original index (i << ks) | (lane & (2^ks - 1)),
// and lanes with (lane >> ks) != 0 hold duplicates.
uint rs_reduce(uint lane, uint tid) {
    [[unroll]] for (uint j = 0u; j < 10u; ++j) rs_step(j, lane, tid);   // RSF <= 1024
    return uint(min(findLSB(uint(RSF)), findLSB(uint(RSV))));
}
#endif

#if MODE == 0
// ================================================================ forward
layout(set = 0, binding = BND_REST) writeonly buffer BufOut { float out_[]; };
layout(set = 0, binding = BND_REST + 1) writeonly buffer BufStates { float states_[]; };

#define TF TX
const uint G = NT / NG;
const uint GP = G + 1u;                    // padded row: [t][d] reads along d, writes along t
// Per (t, d): (delta', delta' * u, u, silu(z)): one 16-byte load per step and thread.
shared vec4 s_in[TF * GP];
#if NVAR > 0
shared vec2 s_bc[TF * N];                 // (B, C) per (t, n)
#endif

// Prefetch registers: the next chunk's raw values, loaded before the current recurrence.
const uint EPT = (G * TF + NT - 1u) / NT;
const uint EPB = (N * TF + NT - 1u) / NT;
float pf_d[EPT], pf_u[EPT];
#if HAS_Z
float pf_z[EPT];
#endif
#if NVAR > 0
float pf_b[EPB], pf_c[EPB];
#endif

void fetch(uint b, uint d0, uint t0, uint tid) {
    [[unroll]] for (uint k = 0u; k < EPT; ++k) {
        uint e = k * NT + tid;
        uint d = d0 + e / TF, t = t0 + e % TF;
        bool ok = e < G * TF && d < p.dim && t < p.L;
        uint i = (b * p.dim + d) * p.L + t;
        pf_d[k] = ok ? delta_[i] : 0.0;
#if HAS_BIAS
        if (ok) pf_d[k] += bias_[d];               // loaded beside delta, not at staging time
#endif
        pf_u[k] = ok ? u_[i] : 0.0;
#if HAS_Z
        pf_z[k] = ok ? z_[i] : 0.0;
#endif
    }
#if NVAR > 0
    [[unroll]] for (uint k = 0u; k < EPB; ++k) {
        uint e = k * NT + tid;
        uint n = e / TF, t = t0 + e % TF;
        bool ok = e < N * TF && t < p.L;
        uint i = (b * N + n) * p.L + t;
#if VARIABLE_B
        pf_b[k] = ok ? B_[i] : 0.0;
#endif
#if VARIABLE_C
        pf_c[k] = ok ? C_[i] : 0.0;
#endif
    }
#endif
}

void stage(uint d0, uint t0, uint tid) {
    [[unroll]] for (uint k = 0u; k < EPT; ++k) {
        uint e = k * NT + tid;
        if (e < G * TF) {
            uint dl = e / TF, tl = e % TF;
            bool ok = d0 + dl < p.dim && t0 + tl < p.L;
            float dt = ok ? delta_eff(pf_d[k]) : 0.0;          // padding: a = 1, b = 0
            float sz = 1.0;
#if HAS_Z
            sz = pf_z[k] * sigmoid(pf_z[k]);
#endif
            s_in[tl * GP + dl] = vec4(dt, dt * pf_u[k], pf_u[k], sz);
        }
    }
#if NVAR > 0
    [[unroll]] for (uint k = 0u; k < EPB; ++k) {
        uint e = k * NT + tid;
        if (e < N * TF) {
            float bv = 0.0, cv = 0.0;
#if VARIABLE_B
            bv = pf_b[k];
#endif
#if VARIABLE_C
            cv = pf_c[k];
#endif
            s_bc[(e % TF) * N + e / TF] = vec2(bv, cv);
        }
    }
#endif
}

void main() {
    uint g = vkg_group_index();
    if (g >= p.total) return;                      // uniform: the whole workgroup leaves
    uint b = g / p.ndg;
    uint d0 = (g % p.ndg) * G;
    uint tid = vkg_tid();
    uint ng = tid % NG, dl = tid / NG;             // threads of one d are adjacent lanes
    uint d = d0 + dl;
    bool dok = d < p.dim;

    float A2[S], h[S];
#if !VARIABLE_B
    float Bf[S];
#endif
#if !VARIABLE_C
    float Cf[S];
#endif
    [[unroll]] for (uint s = 0u; s < S; ++s) {
        uint i = d * N + ng * S + s;
        A2[s] = dok ? A_[i] * LOG2E : 0.0;
        h[s] = 0.0;
#if !VARIABLE_B
        Bf[s] = dok ? B_[i] : 0.0;
#endif
#if !VARIABLE_C
        Cf[s] = dok ? C_[i] : 0.0;
#endif
    }
    float Dd = 0.0;
#if HAS_D
    if (dok) Dd = D_[d];
#endif

    fetch(b, d0, 0u, tid);
    for (uint t0 = 0u; t0 < p.L; t0 += TF) {
        barrier();                                 // the previous chunk's readers are done
        stage(d0, t0, tid);
        barrier();
        if (t0 + TF < p.L) fetch(b, d0, t0 + TF, tid);

        [[unroll]] for (uint t = 0u; t < TF; ++t) {
            vec4 x = s_in[t * GP + dl];
            float acc = 0.0;
            [[unroll]] for (uint s = 0u; s < S; ++s) {
#if NVAR > 0
                vec2 bc = s_bc[t * N + ng * S + s];
#endif
#if VARIABLE_B
                float bt = bc.x;
#else
                float bt = Bf[s];
#endif
#if VARIABLE_C
                float ct = bc.y;
#else
                float ct = Cf[s];
#endif
                h[s] = fma(exp2(x.x * A2[s]), h[s], x.y * bt);
                acc = fma(ct, h[s], acc);
            }
            rs_v[t] = acc;
            if ((t + 1u) % TC == 0u) {             // a chunk ends: save its state
                uint c = (t0 + t + 1u) / TC - 1u;
                if (c < p.nC && dok) {
                    [[unroll]] for (uint s = 0u; s < S; ++s)
                        states_[((b * p.nC + c) * p.dim + d) * N + ng * S + s] = h[s];
                }
            }
        }

        uint ks = rs_reduce(ng, tid);
        bool writer = (ng >> ks) == 0u;
        uint cnt = TF >> ks;
        [[unroll]] for (uint i = 0u; i < TF; ++i) {
            uint t = (i << ks) | (ng & ((1u << ks) - 1u));
            if (i < cnt && writer && dok && t0 + t < p.L) {
                vec4 x = s_in[t * GP + dl];
                out_[(b * p.dim + d) * p.L + t0 + t] = (rs_v[i] + Dd * x.z) * x.w;
            }
        }
    }
}

#elif MODE == 1
// ================================================================ backward
layout(set = 0, binding = BND_REST) readonly buffer BufStates { float states_[]; };
layout(set = 0, binding = BND_REST + 1) readonly buffer BufDout { float dout_[]; };
layout(set = 0, binding = BND_REST + 2) writeonly buffer BufDu { float du_[]; };
layout(set = 0, binding = BND_REST + 3) writeonly buffer BufDdelta { float ddelta_[]; };
#if HAS_Z
layout(set = 0, binding = BND_REST + 4) writeonly buffer BufDz { float dz_[]; };
#endif
layout(set = 0, binding = BND_REST + 4 + HAS_Z) buffer BufPart { float part_[]; };

#define Q TX
const uint G = NT / NG;
const uint GP = G + 1u;
// Staged per (t, d), row stride GP: scalar arrays, because threads along d read them (a vec4
// per lane would cost four shared-memory wavefronts where three scalars cost three).
shared float s_dt[TC * GP], s_dtu[TC * GP], s_dy[TC * GP], s_u[TC * GP];
#if SOFTPLUS
shared float s_dsp[TC * GP];               // softplus'(delta + bias)
#endif
#if HAS_Z
shared float s_zf[TC * GP];                // dout * silu'(z): dz = y * s_zf
#endif
#if NVAR > 0
shared vec2 s_bc[TC * N];
#endif
// Partial sums over this thread's S states, per (ng, t, d): reduced over ng by the (d, t) owner.
shared float s_p1[NG * TC * GP];           // sum_n dh * a * h_{t-1} * A
shared float s_p2[NG * TC * GP];           // sum_n dh * B
#if HAS_Z
shared float s_py[NG * TC * GP];           // sum_n C * h (y without D u)
#endif
shared float s_D[G];

const uint EPT = (G * TC + NT - 1u) / NT;
const uint EPB = (N * TC + NT - 1u) / NT;
float pf_d[EPT], pf_u[EPT], pf_g[EPT];
#if HAS_Z
float pf_z[EPT];
#endif
#if NVAR > 0
float pf_b[EPB], pf_c[EPB];
#endif
float pf_h[S];

void fetch(uint b, uint d0, uint c, uint tid, uint ng, uint d) {
    uint t0 = c * TC;
    [[unroll]] for (uint k = 0u; k < EPT; ++k) {
        uint e = k * NT + tid;
        uint dd = d0 + e / TC, t = t0 + e % TC;
        bool ok = e < G * TC && dd < p.dim && t < p.L;
        uint i = (b * p.dim + dd) * p.L + t;
        pf_d[k] = ok ? delta_[i] : 0.0;
#if HAS_BIAS
        if (ok) pf_d[k] += bias_[dd];
#endif
        pf_u[k] = ok ? u_[i] : 0.0;
        pf_g[k] = ok ? dout_[i] : 0.0;
#if HAS_Z
        pf_z[k] = ok ? z_[i] : 0.0;
#endif
    }
#if NVAR > 0
    [[unroll]] for (uint k = 0u; k < EPB; ++k) {
        uint e = k * NT + tid;
        uint n = e / TC, t = t0 + e % TC;
        bool ok = e < N * TC && t < p.L;
        uint i = (b * N + n) * p.L + t;
#if VARIABLE_B
        pf_b[k] = ok ? B_[i] : 0.0;
#endif
#if VARIABLE_C
        pf_c[k] = ok ? C_[i] : 0.0;
#endif
    }
#endif
    // The state at the chunk's start: the end of chunk c - 1 (zero before the first chunk).
    [[unroll]] for (uint s = 0u; s < S; ++s)
        pf_h[s] = (c > 0u && d < p.dim) ?
            states_[((b * p.nC + c - 1u) * p.dim + d) * N + ng * S + s] : 0.0;
}

void stage(uint d0, uint t0, uint tid) {
    [[unroll]] for (uint k = 0u; k < EPT; ++k) {
        uint e = k * NT + tid;
        if (e < G * TC) {
            uint dl = e / TC, tl = e % TC;
            bool ok = d0 + dl < p.dim && t0 + tl < p.L;
            float x = pf_d[k];                                 // delta + bias
            float dt = ok ? delta_eff(x) : 0.0;
            float gy = pf_g[k];
            uint i = tl * GP + dl;
#if HAS_Z
            float zv = pf_z[k], sg = sigmoid(zv);
            s_zf[i] = gy * (sg * (1.0 + zv * (1.0 - sg)));      // dout * silu'(z)
            gy *= zv * sg;                                     // dy = dout * silu(z)
#endif
#if SOFTPLUS
            s_dsp[i] = x > 20.0 ? 1.0 : sigmoid(x);
#endif
            s_dt[i] = dt;
            s_dtu[i] = dt * pf_u[k];
            s_dy[i] = gy;
            s_u[i] = pf_u[k];
        }
    }
#if NVAR > 0
    [[unroll]] for (uint k = 0u; k < EPB; ++k) {
        uint e = k * NT + tid;
        if (e < N * TC) {
            float bv = 0.0, cv = 0.0;
#if VARIABLE_B
            bv = pf_b[k];
#endif
#if VARIABLE_C
            cv = pf_c[k];
#endif
            s_bc[(e % TC) * N + e / TC] = vec2(bv, cv);
        }
    }
#endif
}

void main() {
    uint g = vkg_group_index();
    if (g >= p.total) return;                      // uniform: the whole workgroup leaves
    uint b = g / p.ndg;
    uint dg = g % p.ndg;
    uint d0 = dg * G;
    uint tid = vkg_tid();
    uint dl = tid % G, ng = tid / G;               // threads along d are adjacent lanes
    uint d = d0 + dl;
    bool dok = d < p.dim;

    float A2[S], An[S], gc[S], dAacc[S];
#if !VARIABLE_B
    float Bf[S], dBacc[S];
#endif
#if !VARIABLE_C
    float Cf[S], dCacc[S];
#endif
    [[unroll]] for (uint s = 0u; s < S; ++s) {
        uint i = d * N + ng * S + s;
        An[s] = dok ? A_[i] : 0.0;
        A2[s] = An[s] * LOG2E;
        gc[s] = 0.0;                               // a_{t+1} * dh_{t+1}: nothing after t = L-1
        dAacc[s] = 0.0;
#if !VARIABLE_B
        Bf[s] = dok ? B_[i] : 0.0;
        dBacc[s] = 0.0;
#endif
#if !VARIABLE_C
        Cf[s] = dok ? C_[i] : 0.0;
        dCacc[s] = 0.0;
#endif
    }
    if (tid < G) {
        float dv = 0.0;
#if HAS_D
        if (d0 + tid < p.dim) dv = D_[d0 + tid];
#endif
        s_D[tid] = dv;
    }
    float accD[EPT], accB[EPT];                    // per owned (d, t): sums over the chunks
    [[unroll]] for (uint k = 0u; k < EPT; ++k) { accD[k] = 0.0; accB[k] = 0.0; }

    fetch(b, d0, p.nC - 1u, tid, ng, d);
    for (uint c = p.nC; c-- > 0u; ) {
        uint t0 = c * TC;
        barrier();                                 // the previous chunk's readers are done
        stage(d0, t0, tid);
        float h[S];
        [[unroll]] for (uint s = 0u; s < S; ++s) h[s] = pf_h[s];
        barrier();
        if (c > 0u) fetch(b, d0, c - 1u, tid, ng, d);

        // 2. the forward again, from the chunk's saved starting state
        float hs[TC * S];
#if STORE_A
        float av[TC * S];
#endif
        [[unroll]] for (uint t = 0u; t < TC; ++t) {
            uint i = t * GP + dl;
            float dt = s_dt[i], dtu = s_dtu[i];
            float acc = 0.0;
            [[unroll]] for (uint s = 0u; s < S; ++s) {
#if NVAR > 0
                vec2 bc = s_bc[t * N + ng * S + s];
#endif
#if VARIABLE_B
                float bt = bc.x;
#else
                float bt = Bf[s];
#endif
#if VARIABLE_C
                float ct = bc.y;
#else
                float ct = Cf[s];
#endif
                float a = exp2(dt * A2[s]);
#if STORE_A
                av[t * S + s] = a;
#endif
                h[s] = fma(a, h[s], dtu * bt);
                hs[t * S + s] = h[s];
                acc = fma(ct, h[s], acc);
            }
#if HAS_Z
            s_py[(ng * TC + t) * GP + dl] = acc;
#endif
        }

        // 3. the reverse scan over the chunk
        [[unroll]] for (uint tt = 0u; tt < TC; ++tt) {
            uint t = TC - 1u - tt;
            uint i = t * GP + dl;
            float dt = s_dt[i], dtu = s_dtu[i], dy = s_dy[i];
            float s1 = 0.0, s2 = 0.0;
            [[unroll]] for (uint s = 0u; s < S; ++s) {
#if NVAR > 0
                vec2 bc = s_bc[t * N + ng * S + s];
#endif
#if VARIABLE_B
                float bt = bc.x;
#else
                float bt = Bf[s];
#endif
#if VARIABLE_C
                float ct = bc.y;
#else
                float ct = Cf[s];
#endif
                float ht = hs[t * S + s];
                float dh = fma(dy, ct, gc[s]);
                // a_t * h_{t-1} = h_t - delta' u B_t (as mamba's backward): no stored h_{t-1}.
                float x = dh * fma(-dtu, bt, ht);
                s1 = fma(x, An[s], s1);
                s2 = fma(dh, bt, s2);
                dAacc[s] = fma(x, dt, dAacc[s]);
#if VARIABLE_B
                rs_v[(0u * S + s) * Q + t % Q] = dh * dtu;
#else
                dBacc[s] = fma(dh, dtu, dBacc[s]);
#endif
#if VARIABLE_C
                rs_v[((VARIABLE_B) * S + s) * Q + t % Q] = dy * ht;
#else
                dCacc[s] = fma(dy, ht, dCacc[s]);
#endif
#if STORE_A
                float a = av[t * S + s];
#else
                float a = exp2(dt * A2[s]);
#endif
                gc[s] = a * dh;
            }
            s_p1[(ng * TC + t) * GP + dl] = s1;
            s_p2[(ng * TC + t) * GP + dl] = s2;
#if NVAR > 0
            if (t % Q == 0u) {
                // Q steps buffered: sum them over the workgroup's d's, store one partial each.
                uint ks = rs_reduce(dl, tid);
                bool writer = (dl >> ks) == 0u;
                uint cnt = RSV >> ks;
                [[unroll]] for (uint k = 0u; k < RSV; ++k) {
                    uint f = (k << ks) | (dl & ((1u << ks) - 1u));
                    uint q = f % Q, s = (f / Q) % S, which = f / (Q * S);
                    uint tq = t0 + t + q;
                    if (k < cnt && writer && tq < p.L) {
                        uint off = (which == 0u && VARIABLE_B == 1) ? p.off_dB : p.off_dC;
                        part_[off + ((dg * p.batch + b) * N + ng * S + s) * p.L + tq] = rs_v[k];
                    }
                }
            }
#endif
        }
        barrier();

        // 4. per (d, t): sums over n, then du, ddelta, dz
        [[unroll]] for (uint k = 0u; k < EPT; ++k) {
            uint e = k * NT + tid;
            uint el = e / TC, tl = e % TC;
            if (e < G * TC) {
                float S1 = 0.0, S2 = 0.0, Y = 0.0;
                [[unroll]] for (uint j = 0u; j < NG; ++j) {
                    uint pi = (j * TC + tl) * GP + el;
                    S1 += s_p1[pi];
                    S2 += s_p2[pi];
#if HAS_Z
                    Y += s_py[pi];
#endif
                }
                uint i = tl * GP + el;
                float dt = s_dt[i], uu = s_u[i], dy = s_dy[i], Dv = s_D[el];
                float dd = fma(uu, S2, S1);                      // d out / d delta'
#if SOFTPLUS
                dd *= s_dsp[i];
#endif
                float duv = fma(dt, S2, Dv * dy);
                accD[k] = fma(dy, uu, accD[k]);
                accB[k] += dd;
                if (d0 + el < p.dim && t0 + tl < p.L) {
                    uint gi = (b * p.dim + d0 + el) * p.L + t0 + tl;
                    du_[gi] = duv;
                    ddelta_[gi] = dd;
#if HAS_Z
                    dz_[gi] = fma(Dv, uu, Y) * s_zf[i];
#endif
                }
            }
        }
    }

    // Partials: per (b, d, n) from the registers; per (b, d) folded over the owners' t's.
    if (dok) {
        [[unroll]] for (uint s = 0u; s < S; ++s) {
            uint i = (b * p.dim + d) * N + ng * S + s;
            part_[p.off_dA + i] = dAacc[s];
#if !VARIABLE_B
            part_[p.off_dB + i] = dBacc[s];
#endif
#if !VARIABLE_C
            part_[p.off_dC + i] = dCacc[s];
#endif
        }
    }
#if HAS_D || HAS_BIAS
    barrier();
    [[unroll]] for (uint k = 0u; k < EPT; ++k) {
        uint e = k * NT + tid;
        if (e < G * TC) { s_p1[e] = accD[k]; s_p2[e] = accB[k]; }
    }
    barrier();
    if (tid < G && d0 + tid < p.dim) {
        float sd = 0.0, sb = 0.0;
        for (uint t = 0u; t < TC; ++t) { sd += s_p1[tid * TC + t]; sb += s_p2[tid * TC + t]; }
#if HAS_D
        part_[p.off_dD + b * p.dim + d0 + tid] = sd;
#endif
#if HAS_BIAS
        part_[p.off_db + b * p.dim + d0 + tid] = sb;
#endif
    }
#endif
}

#elif MODE == 2
// ================================================================ final sums of the partials
layout(set = 0, binding = 0) readonly buffer BufPart { float part_[]; };
layout(set = 0, binding = 1) writeonly buffer BufDA { float dA_[]; };
layout(set = 0, binding = 2) writeonly buffer BufDB { float dB_[]; };
layout(set = 0, binding = 3) writeonly buffer BufDC { float dC_[]; };
#if HAS_D
layout(set = 0, binding = 4) writeonly buffer BufDD { float dD_[]; };
#endif
#if HAS_BIAS
layout(set = 0, binding = 4 + HAS_D) writeonly buffer BufDbias { float dbias_[]; };
#endif

layout(push_constant) uniform Push {
    uint total;      // sum of M
    uint off[5];     // section k: partials[off + p * M + m], p < P; k = dA, dB, dC, dD, dbias
    uint P[5];
    uint M[5];
} p;

void main() {
    uint m = vkg_group_index() * NT + gl_LocalInvocationIndex;
    if (m >= p.total) return;
    uint k = 0u;
    while (k < 4u && m >= p.M[k]) { m -= p.M[k]; ++k; }
    uint base = p.off[k] + m, stride = p.M[k];
    // Four loads in flight per iteration, added in the same order as a plain loop would.
    float s = 0.0;
    uint i = 0u;
    for (; i + 4u <= p.P[k]; i += 4u) {
        float a0 = part_[base + i * stride], a1 = part_[base + (i + 1u) * stride];
        float a2 = part_[base + (i + 2u) * stride], a3 = part_[base + (i + 3u) * stride];
        s = (((s + a0) + a1) + a2) + a3;
    }
    for (; i < p.P[k]; ++i) s += part_[base + i * stride];
    if (k == 0u) dA_[m] = s;
    else if (k == 1u) dB_[m] = s;
    else if (k == 2u) dC_[m] = s;
#if HAS_D
    else if (k == 3u) dD_[m] = s;
#endif
#if HAS_BIAS
    else if (k == 4u) dbias_[m] = s;
#endif
}
#else
#error "MODE must be 0 (forward), 1 (backward) or 2 (final sums)"
#endif
