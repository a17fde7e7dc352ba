#version 450
// A convolution kernel's weights with the input features innermost:
//     out[o, r, c] = w[o, c, r]     w [O, I, R] (R = the window's KD*KH*KW), out [O, R, I]
// so that conv_gemm.comp's channels-innermost k order (lowering/conv.py) reads its A tile as
// vec4s along k, as the matmul kernel reads a k-contiguous operand. A thread per element of
// out (contiguous stores); w is small (O * I * R), its reads hit the caches.
// Bindings: 0 w, 1 out. Grid: lowering/launch.py's grid() over ceil(O*R*I / 256) groups.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer Wt { float w[]; };
layout(std430, binding = 1) writeonly buffer Out { float o[]; };
layout(push_constant) uniform Push { uint O; uint I; uint R; } p;

void main() {
    const uint e = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256u
                   + gl_LocalInvocationID.x;
    if (e >= p.O * p.R * p.I) return;
    const uint c = e % p.I, r = (e / p.I) % p.R, f = e / (p.I * p.R);
    o[e] = w[(f * p.I + c) * p.R + r];
}
