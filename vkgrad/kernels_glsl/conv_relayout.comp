#version 450
// A convolution kernel's weights with the input features innermost:
//     out[o, r, c] = w[o, c, r]     w [O, I, R] (R = the window's KD*KH*KW), out [O, R, I]
// so that conv_gemm.comp's channels-innermost k order (lowering/conv.py) reads its A tile as
// vec4s along k, as the matmul kernel reads a k-contiguous operand. A thread per element of
// out (contiguous stores); w is small (O * I * R), its reads hit the caches.
// CR_WL: w's layout, as conv_gemm.comp's CG_WL (lowering/conv_layouts.py): 0 w itself; 1 w is
// w0 [G*I, Og, R] with (O, I) swapped per group and the window flipped (an input gradient's
// kernel: w[g*Og + f, c, r] = w0[g*I + c, f, R-1-r]); 2 w is w0 [I, O, R] with its first two
// axes swapped (w[f, c, r] = w0[c, f, r]). Binding 0 holds w0.
// Bindings: 0 w, 1 out. Grid: lowering/launch.py's grid() over ceil(O*R*I / 256) groups.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer Wt { float w[]; };
layout(std430, binding = 1) writeonly buffer Out { float o[]; };
layout(push_constant) uniform Push { uint O; uint I; uint R; uint Og; } p;

void main() {
    const uint e = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256u
                   + gl_LocalInvocationID.x;
    if (e >= p.O * p.R * p.I) return;
    const uint c = e % p.I, r = (e / p.I) % p.R, f = e / (p.I * p.R);
    uint at;
    if (CR_WL == 1) {
        const uint g = f / p.Og;
        at = ((g * p.I + c) * p.Og + f % p.Og) * p.R + p.R - 1u - r;
    } else if (CR_WL == 2) {
        at = (c * p.O + f) * p.R + r;
    } else {
        at = (f * p.I + c) * p.R + r;
    }
    o[e] = w[at];
}
