#version 450
// take_grad for small tables (scatter-add, the backward of take), one launch: g [A, J, B],
// idx [J] (int32) -> dx [A, N, B], dx[a, n, b] = sum of g[a, j, b] over the j with
// clamp(idx[j], 0, N - 1) == n. Planned by vkgrad/lowering/kernels.py:plan_take_grad_rows
// (the sort-based take_grad.comp serves large tables).
//
// Each workgroup owns ROWS rows of dx (and COLS columns of them, a T each) and one span of the
// ids (all J of them unless the planner splits J; the splits' sums are then added by a second
// launch, reduce.comp). Its threads are ROWS x SLICES x COLS: thread (rho, l, c) accumulates
// column c of row r0 + rho over its slice l of the matching ids. In rounds of MASK_WORDS * 32 /
// ROWS ids:
//   1. every thread tests some ids (UNROLL at a time, loads first) and sets bit j of its row's
//      mask in shared memory when idx[j] falls in this workgroup's rows;
//   2. slice l walks words l, l + SLICES, ... of its row's mask, ids in increasing order, and
//      adds their g rows, UNROLL loads in flight (words interleave across slices, so the
//      matches of one row share the slices evenly however they lie along J).
// Finally slice 0 adds the other slices' sums in slice order and writes. Deterministic: no
// float atomics, the same order in every run. Rows no id names are written as zeros.
//
// Counted loop iterations per thread (lavapipe ends loops after Target.max_loop_iterations):
// per round the clear (ROWS*WPR/WG), the tests (ids/(WG*UNROLL), two UNROLL loops each) and the
// walk (words/SLICES word steps and at most 32/UNROLL batches a word), then SLICES (the sum);
// the planner bounds them (_rows_loop_iterations) and splits J to stay under the limit.
//
// Defines: VEC (4 when B % 4 == 0, else 1).
// Spec constants: 0 the workgroup size (ROWS * SLICES * COLS), 1 ROWS, 2 SLICES, 3 COLS.
// Bindings: 0 g, 1 idx, 2 dx (or the partial sums [splits, A, N, B]).
#extension GL_GOOGLE_include_directive : require
layout(local_size_x_id = 0) in;
#include "common.glsl"
#include "vec.glsl"

layout(constant_id = 1) const uint ROWS = 1;
layout(constant_id = 2) const uint SLICES = 1;
layout(constant_id = 3) const uint COLS = 1;
#define WG gl_WorkGroupSize.x
#define MASK_WORDS 1024u          // shared bit masks: 4 KB, MASK_WORDS / ROWS words per row
#define WPR (MASK_WORDS / ROWS)
#define UNROLL 4u

layout(set = 0, binding = 0) readonly buffer G { T g[]; };
layout(set = 0, binding = 1) readonly buffer I { int idx[]; };
layout(set = 0, binding = 2) writeonly buffer DX { T dx[]; };

layout(push_constant) uniform Push {
    uint N;
    uint J;
    uint B;        // row length in T's
    uint A;
    uint span;     // ids per split of J
    uint cblocks;  // column blocks: ceil(B / COLS)
    uint rblocks;  // row blocks: ceil(N / ROWS)
    uint groups;   // workgroups: splits * A * rblocks * cblocks (the grid may hold more)
} p;

shared uint mask[MASK_WORDS];
shared T part[WG];

// The next matching id of this thread's slice after the walk's state (word w, its bits not
// yet taken), as an offset into the round; false when the slice has none left.
bool next_id(inout uint w, inout uint bits, uint row_words, uint words, out uint k) {
    while (bits == 0u) {
        w += SLICES;
        if (w >= words) return false;
        bits = mask[row_words + w];
    }
    k = w * 32u + uint(findLSB(bits));
    bits &= bits - 1u;
    return true;
}

void main() {
    uint gi = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    if (gi >= p.groups) return;
    uint cb = gi % p.cblocks, rb = (gi / p.cblocks) % p.rblocks;
    uint a = (gi / (p.cblocks * p.rblocks)) % p.A, s = gi / (p.cblocks * p.rblocks * p.A);
    uint t = gl_LocalInvocationIndex;
    uint c = t % COLS, l = (t / COLS) % SLICES, rho = t / (COLS * SLICES);
    uint r0 = rb * ROWS, col = cb * COLS + c;
    bool live = col < p.B && r0 + rho < p.N;
    uint j0 = s * p.span, jend = min(j0 + p.span, p.J);
    uint gcol = a * p.J * p.B + col;
    T acc = T(0.0);
    for (uint jr = j0; jr < jend; jr += 32u * WPR) {
        uint ids = min(32u * WPR, jend - jr), words = (ids + 31u) / 32u;
        for (uint w = t; w < ROWS * WPR; w += WG) mask[w] = 0u;
        barrier();
        for (uint k = t; k < ids; k += WG * UNROLL) {
            int v[UNROLL];
            [[unroll]] for (uint u = 0u; u < UNROLL; ++u) {
                uint ku = k + u * WG;
                v[u] = ku < ids ? clamp(idx[jr + ku], 0, int(p.N) - 1) - int(r0) : -1;
            }
            [[unroll]] for (uint u = 0u; u < UNROLL; ++u) {
                uint ku = k + u * WG;
                if (v[u] >= 0 && v[u] < int(ROWS))
                    atomicOr(mask[uint(v[u]) * WPR + ku / 32u], 1u << (ku % 32u));
            }
        }
        barrier();
        if (live) {
            uint row_words = rho * WPR, w = l, k0, k1, k2, k3;
            uint bits = l < words ? mask[row_words + l] : 0u;
            uint base = gcol + jr * p.B;
            while (next_id(w, bits, row_words, words, k0)) {
                bool h1 = next_id(w, bits, row_words, words, k1);
                bool h2 = h1 && next_id(w, bits, row_words, words, k2);
                bool h3 = h2 && next_id(w, bits, row_words, words, k3);
                T v0 = g[base + k0 * p.B];
                T v1 = h1 ? g[base + k1 * p.B] : T(0.0);   // + 0.0 leaves a sum from 0.0 as it is
                T v2 = h2 ? g[base + k2 * p.B] : T(0.0);
                T v3 = h3 ? g[base + k3 * p.B] : T(0.0);
                acc += v0;
                acc += v1;
                acc += v2;
                acc += v3;
            }
        }
        barrier();                                     // the masks are cleared next round
    }
    if (SLICES > 1u) {
        part[t] = acc;
        barrier();
    }
    if (l == 0u && live) {
        for (uint q = 1u; q < SLICES; ++q) acc += part[t + q * COLS];
        dx[((s * p.A + a) * p.N + r0 + rho) * p.B + col] = acc;
    }
}
