// VKGRAD_DEBUG_NANS: count the non-finite elements of one float buffer into flags[slot]: n words,
// each holding one f32 (lo == hi: its exponent mask) or two 16-bit floats (half.glsl; lo and hi
// the exponent masks of the low and high half; an odd buffer's unused half is zero).
// One workgroup per checked buffer, appended to the call's own submission (vkgrad/runtime/nans.py);
// it writes its word every run, so the flags need no clearing between runs. The test is on the
// bits (exponent all ones), not isnan/isinf, which a driver may fold away under fast math.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "ieee.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer X { uint x[]; };
layout(std430, binding = 1) buffer Flags { uint flags[]; };
layout(push_constant) uniform Push { uint n; uint slot; uint lo; uint hi; };
shared uint counts[256];

void main() {
    uint t = gl_LocalInvocationID.x;
    uint c = 0u;
    for (uint i = t; i < n; i += 256u)
        c += uint((x[i] & lo) == lo) + uint(hi != lo && (x[i] & hi) == hi);
    counts[t] = c;
    barrier();
    for (uint s = 128u; s > 0u; s >>= 1) {
        if (t < s)
            counts[t] += counts[t + s];
        barrier();
    }
    if (t == 0u)
        flags[slot] = counts[0];
}
