#version 450
// The second dispatch of a split-K cooperative-matrix matmul (lowering/matmul_coop.py): out =
// the sum over `splits` slices of float32 partial products [splits][total], in slice order
// (deterministic), rounded once to the 16-bit result (BF16: bfloat16, else float16), two
// elements a word (half.glsl's layout); F32: the float32 sums as they are. Push constants:
// total (elements), splits.
#extension GL_GOOGLE_include_directive : require
#include "ieee.glsl"
layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) readonly buffer Partials { float partials[]; };
#ifdef F32
layout(std430, set = 0, binding = 1) writeonly buffer Out { float out_[]; };
#else
layout(std430, set = 0, binding = 1) writeonly buffer Out { uint words[]; };
#endif
layout(push_constant) uniform Push { uint total; uint splits; } p;

void main() {
    uint w = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 256u;
    uint e = 2u * w;
    if (e >= p.total) return;
    float a = 0.0, b = 0.0;
    bool second = e + 1u < p.total;
    for (uint s = 0u; s < p.splits; s++) {
        a += partials[s * p.total + e];
        if (second) b += partials[s * p.total + e + 1u];
    }
#if defined(F32)
    out_[e] = a;
    if (second) out_[e + 1u] = b;
#elif defined(BF16)
    words[w] = vkg_pack_bf16(a, b);
#else
    words[w] = vkg_pack_f16(a, b);
#endif
}
