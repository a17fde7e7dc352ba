#version 450
// take_grad (scatter-add, the backward of take): g [A, J, B], idx [J] (int32) -> dx [A, N, B],
// dx[a, n, b] = sum of g[a, j, b] over the j with clamp(idx[j], 0, N - 1) == n. Deterministic
// (no float atomics): bucket n's entries, in increasing j, are summed CHUNK at a time in order,
// then the chunks' sums in order (tests/test_kernels.py reproduces that order exactly). Planned
// by vkgrad/lowering/kernels.py:plan_take_grad as seven launches of this shader, one per STAGE,
// over int32 temporaries counts [N], offsets [N + 1], coffsets [N + 1], perm [J], order [J]
// and the chunk sums `partial` [A, chunks, B]:
//
//   STAGE 0 CLEAR  counts[n] = 0                                     (counts)
//   STAGE 1 HIST   counts[idx[j]] += 1 (integer atomics)             (idx, counts)
//   STAGE 2 SCAN   offsets = exclusive prefix sum of counts, offsets[N] = J; coffsets the same
//                  of the chunk counts ceil(counts / CHUNK); counts[n] = 0
//                  (one workgroup looping over N)                    (counts, offsets, coffsets)
//   STAGE 3 FILL   perm[offsets[idx[j]] + atomicAdd(counts[idx[j]], 1)] = j: j bucketed by
//                  index value, in arbitrary order inside a bucket   (idx, offsets, counts, perm)
//   STAGE 4 RANK   order[lo + #{q in bucket : perm[q] < perm[p]}] = perm[p]: each bucket sorted
//                  by j; a team of TEAM threads counts for one element (a frequent id's bucket
//                  of thousands is TEAM times fewer steps)     (idx, offsets, perm, order)
//   STAGE 5 CHUNK  partial[a, c, b] = sum of chunk c's entries (at most CHUNK consecutive
//                  entries of one bucket)                  (g, offsets, coffsets, order, partial)
//   STAGE 6 ACCUM  dx[a, n, b] = sum of bucket n's chunk sums; writes every element of dx
//                  (zeros for indices that never occur)         (coffsets, partial, dx)
//
// A frequent id (a space among characters: a bucket of thousands) was one thread's serial sum:
// 356 us for the LM's [256, 256] embedding gradient from 8,192 ids on the H200.
//
// Defines: STAGE; VEC (STAGES 5-6: 4 when B % 4 == 0, else 1); SUBGROUPS (STAGE 2).
// Spec constant 0: the workgroup size.
#extension GL_GOOGLE_include_directive : require
layout(local_size_x_id = 0) in;
#include "reduce_common.glsl"

#ifndef STAGE
#error "STAGE must be defined (0..6)"
#endif

layout(push_constant) uniform Push {
    uint N;
    uint J;
    uint B;        // STAGES 5-6: row length in elements of T
    uint total;    // threads: STAGE 5 A * chunks * B, STAGE 6 A * N * B
    uint chunks;   // the most chunks there can be: ceil(J / CHUNK) + min(N, J)
} p;

#define CHUNK 32u
#define TEAM 32u

uint gid() { return vkg_group_index() * VKG_WG + gl_LocalInvocationIndex; }
uint bucket(int i) { return uint(clamp(i, 0, int(p.N) - 1)); }

#if STAGE == 0
layout(set = 0, binding = 0) writeonly buffer Counts { int counts[]; };
void main() {
    uint n = gid();
    if (n < p.N) counts[n] = 0;
}

#elif STAGE == 1
layout(set = 0, binding = 0) readonly buffer I { int idx[]; };
layout(set = 0, binding = 1) buffer Counts { int counts[]; };
void main() {
    uint j = gid();
    if (j < p.J) atomicAdd(counts[bucket(idx[j])], 1);
}

#elif STAGE == 2
layout(set = 0, binding = 0) buffer Counts { int counts[]; };
layout(set = 0, binding = 1) writeonly buffer Offsets { int offsets[]; };
layout(set = 0, binding = 2) writeonly buffer COffsets { int coffsets[]; };
#define ITEMS 4u
shared ivec2 partial[VKG_WG];
// One workgroup: chunks of WG * ITEMS counts, ITEMS consecutive ones per thread, carried over;
// x: the entries, y: the chunks (ceil(count / CHUNK)).
void main() {
    uint t = vkg_tid();
    ivec2 carry = ivec2(0);
    for (uint base = 0u; base < p.N; base += VKG_WG * ITEMS) {
        ivec2 c[ITEMS];
        ivec2 sum = ivec2(0);
        for (uint k = 0u; k < ITEMS; ++k) {
            uint n = base + t * ITEMS + k;
            int count = n < p.N ? counts[n] : 0;
            c[k] = ivec2(count, (count + int(CHUNK) - 1) / int(CHUNK));
            sum += c[k];
        }
        // exclusive prefix of the per-thread sums, in thread order
#if SUBGROUPS
        ivec2 incl = subgroupInclusiveAdd(sum);
        if (gl_SubgroupInvocationID == vkg_subgroup_width() - 1u) partial[gl_SubgroupID] = incl;
        barrier();
        ivec2 before = ivec2(0), total = ivec2(0);
        for (uint s = 0u; s < gl_NumSubgroups; ++s) {
            ivec2 v = partial[s];
            before += s < gl_SubgroupID ? v : ivec2(0);
            total += v;
        }
        ivec2 excl = before + incl - sum;
#else
        partial[t] = sum;
        barrier();
        for (uint h = 1u; h < VKG_WG; h <<= 1u) {     // Hillis-Steele inclusive scan
            ivec2 v = t >= h ? partial[t - h] : ivec2(0);
            barrier();
            partial[t] += v;
            barrier();
        }
        ivec2 excl = partial[t] - sum;
        ivec2 total = partial[VKG_WG - 1u];
#endif
        ivec2 run = carry + excl;
        for (uint k = 0u; k < ITEMS; ++k) {
            uint n = base + t * ITEMS + k;
            if (n < p.N) { offsets[n] = run.x; coffsets[n] = run.y; counts[n] = 0; }
            run += c[k];
        }
        carry += total;
        barrier();                                    // partial is reused by the next chunk
    }
    if (t == 0u) { offsets[p.N] = carry.x; coffsets[p.N] = carry.y; }
}

#elif STAGE == 3
layout(set = 0, binding = 0) readonly buffer I { int idx[]; };
layout(set = 0, binding = 1) readonly buffer Offsets { int offsets[]; };
layout(set = 0, binding = 2) buffer Counts { int counts[]; };
layout(set = 0, binding = 3) writeonly buffer Perm { int perm[]; };
void main() {
    uint j = gid();
    if (j >= p.J) return;
    uint n = bucket(idx[j]);
    perm[offsets[n] + atomicAdd(counts[n], 1)] = int(j);
}

#elif STAGE == 4
layout(set = 0, binding = 0) readonly buffer I { int idx[]; };
layout(set = 0, binding = 1) readonly buffer Offsets { int offsets[]; };
layout(set = 0, binding = 2) readonly buffer Perm { int perm[]; };
layout(set = 0, binding = 3) writeonly buffer Order { int order[]; };
shared int ranks[VKG_WG / TEAM];
void main() {
    uint t = gl_LocalInvocationIndex, team = t / TEAM, lane = t % TEAM;
    uint q = (vkg_group_index() * VKG_WG + t) / TEAM;
    if (lane == 0u) ranks[team] = 0;
    barrier();
    int j = 0, lo = 0;
    if (q < p.J) {
        j = perm[q];
        uint n = bucket(idx[j]);
        lo = offsets[n];
        int hi = offsets[n + 1u], rank = 0;
        for (int k = lo + int(lane); k < hi; k += int(TEAM)) rank += perm[k] < j ? 1 : 0;
        atomicAdd(ranks[team], rank);      // integers: the same sum in any order
    }
    barrier();
    if (q < p.J && lane == 0u) order[lo + ranks[team]] = j;
}

#elif STAGE == 5
#include "vec.glsl"
layout(set = 0, binding = 0) readonly buffer G { T g[]; };
layout(set = 0, binding = 1) readonly buffer Offsets { int offsets[]; };
layout(set = 0, binding = 2) readonly buffer COffsets { int coffsets[]; };
layout(set = 0, binding = 3) readonly buffer Order { int order[]; };
layout(set = 0, binding = 4) writeonly buffer Partial { T partial[]; };
void main() {
    uint i = gid();
    if (i >= p.total) return;
    uint row = i / p.B;
    uint b = i - row * p.B;
    uint a = row / p.chunks;
    int c = int(row - a * p.chunks);
    if (c >= coffsets[p.N]) return;
    // the bucket n holding chunk c: the last n with coffsets[n] <= c
    uint lo = 0u, hi = p.N;                            // coffsets[lo] <= c < coffsets[hi]
    while (hi - lo > 1u) {
        uint mid = (lo + hi) / 2u;
        if (coffsets[mid] <= c) lo = mid; else hi = mid;
    }
    int start = offsets[lo] + (c - coffsets[lo]) * int(CHUNK);
    int end = min(start + int(CHUNK), offsets[lo + 1u]);
    uint gbase = a * p.J * p.B + b;
    T acc = T(0.0);
    int k = start;
    // Four loads in flight, added in order: the chunk's sum is exactly the sequential one.
    for (; k + 3 < end; k += 4) {
        T g0 = g[gbase + uint(order[k]) * p.B];
        T g1 = g[gbase + uint(order[k + 1]) * p.B];
        T g2 = g[gbase + uint(order[k + 2]) * p.B];
        T g3 = g[gbase + uint(order[k + 3]) * p.B];
        acc += g0;
        acc += g1;
        acc += g2;
        acc += g3;
    }
    for (; k < end; ++k) acc += g[gbase + uint(order[k]) * p.B];
    partial[i] = acc;
}

#elif STAGE == 6
#include "vec.glsl"
layout(set = 0, binding = 0) readonly buffer COffsets { int coffsets[]; };
layout(set = 0, binding = 1) readonly buffer Partial { T partial[]; };
layout(set = 0, binding = 2) writeonly buffer DX { T dx[]; };
void main() {
    uint i = gid();
    if (i >= p.total) return;
    uint row = i / p.B;
    uint b = i - row * p.B;
    uint a = row / p.N;
    uint n = row - a * p.N;
    T acc = T(0.0);
    for (int c = coffsets[n]; c < coffsets[n + 1u]; ++c)
        acc += partial[(a * p.chunks + uint(c)) * p.B + b];
    dx[i] = acc;
}
#else
#error "STAGE must be 0..6"
#endif
