#version 450
// argsort of each row of x [rows, n] (float32): the stable sorting permutation, as int32 indices,
// ascending (or descending with DESCENDING 1); NaN sorts last either way, as in numpy's argsort
// of x (of -x). Planned by vkgrad/lowering/sort.py:plan_argsort.
//
// One workgroup per row: a bitonic sort of (key, index) pairs in shared memory, the row padded
// to NP (a power of two) with pairs that sort after everything. Ties are broken by the index,
// which makes the order total, so the unstable bitonic network gives the stable result.
// log2(NP) * (log2(NP) + 1) / 2 compare-exchange passes, one barrier each.
// Defines: NP, DESCENDING. Spec constant 0: the workgroup size. Bindings: 0: x, 1: out.
#extension GL_GOOGLE_include_directive : require
#include "ieee.glsl"
layout(local_size_x_id = 0) in;

layout(set = 0, binding = 0) readonly buffer X { float x[]; };
layout(set = 0, binding = 1) writeonly buffer O { int o[]; };

layout(push_constant) uniform Push {
    uint rows;
    uint n;
} p;

shared float skey[NP];
shared uint sidx[NP];

const uint PAD = 0xffffffffu;

// does pair a sort strictly before pair b?
bool before(float ka, uint ia, float kb, uint ib) {
    if (ia == PAD || ib == PAD) return ib == PAD && ia != PAD;
    bool na = vkg_isnan(ka), nb = vkg_isnan(kb);
    if (na || nb) return (na == nb) ? ia < ib : nb;
#if DESCENDING
    if (ka != kb) return ka > kb;
#else
    if (ka != kb) return ka < kb;
#endif
    return ia < ib;
}

void main() {
    uint row = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    if (row >= p.rows) return;            // uniform: the whole workgroup leaves
    uint wg = gl_WorkGroupSize.x, t = gl_LocalInvocationIndex;
    uint base = row * p.n;
    for (uint i = t; i < NP; i += wg) {
        bool real = i < p.n;
        skey[i] = real ? x[base + i] : 0.0;
        sidx[i] = real ? i : PAD;
    }
    barrier();
    for (uint k = 2u; k <= NP; k <<= 1) {
        for (uint j = k >> 1; j > 0u; j >>= 1) {
            for (uint i = t; i < NP; i += wg) {
                uint l = i ^ j;
                if (l > i) {
                    bool ascending = (i & k) == 0u;
                    float ki = skey[i], kl = skey[l];
                    uint ii = sidx[i], il = sidx[l];
                    if (before(kl, il, ki, ii) == ascending) {
                        skey[i] = kl; sidx[i] = il;
                        skey[l] = ki; sidx[l] = ii;
                    }
                }
            }
            barrier();
        }
    }
    for (uint i = t; i < p.n; i += wg) {
        o[base + i] = int(sidx[i]);
    }
}
