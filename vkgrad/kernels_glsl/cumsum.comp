#version 450
// The running sum of each row of x [rows, n] along n (from the end with REVERSE 1): float32, or
// int32 with INT 1. Planned by vkgrad/lowering/cumsum.py:plan_cumsum.
//
// One workgroup per row walks it in chunks of 4 WG elements: each thread sums its 4 consecutive
// elements, the WG thread totals are scanned in shared memory (log2(WG) steps, one barrier
// each), and the chunk's running total carries into the next chunk. Every element is read and
// written once; the order of additions is fixed, so results are the same run to run.
// Spec constant 0: the workgroup size (a power of two). Bindings: 0: x, 1: out.
layout(local_size_x_id = 0) in;

#if INT
#define T int
#else
#define T float
#endif

layout(set = 0, binding = 0) readonly buffer X { T x[]; };
layout(set = 0, binding = 1) writeonly buffer O { T o[]; };

layout(push_constant) uniform Push {
    uint rows;
    uint n;
} p;

shared T totals[gl_WorkGroupSize.x];

uint at(uint i) {
#if REVERSE
    return p.n - 1u - i;
#else
    return i;
#endif
}

void main() {
    uint row = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    if (row >= p.rows) return;            // uniform: the whole workgroup leaves
    uint wg = gl_WorkGroupSize.x, t = gl_LocalInvocationIndex;
    uint base = row * p.n;
    T carry = T(0);
    for (uint start = 0u; start < p.n; start += 4u * wg) {
        uint i0 = start + 4u * t;
        T v[4];
        T run = T(0);
        for (uint c = 0u; c < 4u; c++) {
            uint i = i0 + c;
            run += i < p.n ? x[base + at(i)] : T(0);
            v[c] = run;
        }
        totals[t] = run;
        barrier();
        for (uint off = 1u; off < wg; off <<= 1) {
            T add = t >= off ? totals[t - off] : T(0);
            barrier();
            totals[t] += add;
            barrier();
        }
        T before = carry + (t > 0u ? totals[t - 1u] : T(0));
        for (uint c = 0u; c < 4u; c++) {
            uint i = i0 + c;
            if (i < p.n) o[base + at(i)] = before + v[c];
        }
        carry += totals[wg - 1u];
        barrier();                        // every thread read totals before the next chunk
    }
}
