// The single moves around a loop body that the plan replays N times in one submission
// (vkgrad/lowering/loops.py; a step's slices in and out, its carries written back and its
// counter handed on are the generated moves_launch): the initial carries, a swap's temporary,
// a literal filled in, the final carries, and the counter's reset (the iteration counter lives
// on the device so every iteration replays the SAME recorded dispatches). Every device dtype is
// 4 bytes wide, so the moves copy words.
//   mode 0: dst[idx * dst_stride + i] = src[idx * src_stride + i], i < n
//   mode 1: dst[idx * dst_stride + i] = value (the literal's bits)
//   mode 2: counter = value
// idx is the counter, or length - 1 - counter when reverse (a scan from its last index).
#version 450
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer Src { uint src[]; };
layout(std430, binding = 1) buffer Dst { uint dst[]; };
layout(std430, binding = 2) buffer Counter { uint counter[]; };
layout(push_constant) uniform Push {
    uint mode; uint n; uint src_stride; uint dst_stride; uint length_; uint reverse; uint value;
};

void main() {
    uint stride = gl_NumWorkGroups.x * 256u;
    if (mode == 2u) {
        if (gl_GlobalInvocationID.x == 0u)
            counter[0] = value;
        return;
    }
    uint t = counter[0];
    uint idx = reverse != 0u ? length_ - 1u - t : t;
    for (uint i = gl_GlobalInvocationID.x; i < n; i += stride)
        dst[idx * dst_stride + i] = mode == 0u ? src[idx * src_stride + i] : value;
}
