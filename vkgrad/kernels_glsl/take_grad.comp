#version 450
// take_grad (scatter-add, the backward of take): g [A, J, B], idx [J] (int32) -> dx [A, N, B],
// dx[a, n, b] = sum of g[a, j, b] over the j with clamp(idx[j], 0, N - 1) == n, summed in
// increasing j (the order of a sequential loop), so the result is deterministic: no float
// atomics. Planned by vkgrad/lowering/kernels.py:plan_take_grad as six launches of this shader,
// one per STAGE, over int32 temporaries counts [N], offsets [N + 1], perm [J], order [J]:
//
//   STAGE 0 CLEAR  counts[n] = 0                                     (counts)
//   STAGE 1 HIST   counts[idx[j]] += 1 (integer atomics)             (idx, counts)
//   STAGE 2 SCAN   offsets = exclusive prefix sum of counts, offsets[N] = J; counts[n] = 0
//                  (one workgroup looping over N)                    (counts, offsets)
//   STAGE 3 FILL   perm[offsets[idx[j]] + atomicAdd(counts[idx[j]], 1)] = j: j bucketed by
//                  index value, in arbitrary order inside a bucket   (idx, offsets, counts, perm)
//   STAGE 4 RANK   order[lo + #{q in bucket : perm[q] < perm[p]}] = perm[p]: each bucket sorted
//                  by j, O(bucket size) per element                  (idx, offsets, perm, order)
//   STAGE 5 ACCUM  dx[a, n, b] = sum over p in bucket n of g[a, order[p], b]; writes every
//                  element of dx (zeros for indices that never occur) (g, offsets, order, dx)
//
// Defines: STAGE; VEC (STAGE 5: 4 when B % 4 == 0, else 1); SUBGROUPS (STAGE 2).
// Spec constant 0: the workgroup size.
#extension GL_GOOGLE_include_directive : require
layout(local_size_x_id = 0) in;
#include "reduce_common.glsl"

#ifndef STAGE
#error "STAGE must be defined (0..5)"
#endif

layout(push_constant) uniform Push {
    uint N;
    uint J;
    uint B;        // STAGE 5: row length in elements of T
    uint total;    // STAGE 5: A * N * B
} p;

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
#define ITEMS 4u
shared int partial[VKG_WG];
// One workgroup: chunks of WG * ITEMS counts, ITEMS consecutive ones per thread, carried over.
void main() {
    uint t = vkg_tid();
    int carry = 0;
    for (uint base = 0u; base < p.N; base += VKG_WG * ITEMS) {
        int c[ITEMS];
        int sum = 0;
        for (uint k = 0u; k < ITEMS; ++k) {
            uint n = base + t * ITEMS + k;
            c[k] = n < p.N ? counts[n] : 0;
            sum += c[k];
        }
        // exclusive prefix of the per-thread sums, in thread order
#if SUBGROUPS
        int incl = subgroupInclusiveAdd(sum);
        if (gl_SubgroupInvocationID == vkg_subgroup_width() - 1u) partial[gl_SubgroupID] = incl;
        barrier();
        int before = 0, total = 0;
        for (uint s = 0u; s < gl_NumSubgroups; ++s) {
            int v = partial[s];
            before += s < gl_SubgroupID ? v : 0;
            total += v;
        }
        int excl = before + incl - sum;
#else
        partial[t] = sum;
        barrier();
        for (uint h = 1u; h < VKG_WG; h <<= 1u) {     // Hillis-Steele inclusive scan
            int v = t >= h ? partial[t - h] : 0;
            barrier();
            partial[t] += v;
            barrier();
        }
        int excl = partial[t] - sum;
        int total = partial[VKG_WG - 1u];
#endif
        int run = carry + excl;
        for (uint k = 0u; k < ITEMS; ++k) {
            uint n = base + t * ITEMS + k;
            if (n < p.N) { offsets[n] = run; counts[n] = 0; }
            run += c[k];
        }
        carry += total;
        barrier();                                    // partial is reused by the next chunk
    }
    if (t == 0u) offsets[p.N] = carry;
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
void main() {
    uint q = gid();
    if (q >= p.J) return;
    int j = perm[q];
    uint n = bucket(idx[j]);
    int lo = offsets[n], hi = offsets[n + 1u];
    int rank = 0;
    for (int k = lo; k < hi; ++k) rank += perm[k] < j ? 1 : 0;
    order[lo + rank] = j;
}

#elif STAGE == 5
#include "vec.glsl"
layout(set = 0, binding = 0) readonly buffer G { T g[]; };
layout(set = 0, binding = 1) readonly buffer Offsets { int offsets[]; };
layout(set = 0, binding = 2) readonly buffer Order { int order[]; };
layout(set = 0, binding = 3) writeonly buffer DX { T dx[]; };
void main() {
    uint i = gid();
    if (i >= p.total) return;
    uint row = i / p.B;
    uint b = i - row * p.B;
    uint a = row / p.N;
    uint n = row - a * p.N;
    int lo = offsets[n], hi = offsets[n + 1u];
    uint gbase = a * p.J * p.B + b;
    T acc = T(0.0);
    int k = lo;
    // Four loads in flight, added in order: the sum is exactly the sequential one.
    for (; k + 3 < hi; k += 4) {
        T g0 = g[gbase + uint(order[k]) * p.B];
        T g1 = g[gbase + uint(order[k + 1]) * p.B];
        T g2 = g[gbase + uint(order[k + 2]) * p.B];
        T g3 = g[gbase + uint(order[k + 3]) * p.B];
        acc += g0;
        acc += g1;
        acc += g2;
        acc += g3;
    }
    for (; k < hi; ++k) acc += g[gbase + uint(order[k]) * p.B];
    dx[i] = acc;
}
#else
#error "STAGE must be 0..5"
#endif
