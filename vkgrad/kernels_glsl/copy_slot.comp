// Copy between a recorded program's own slot and a buffer given by its device address (kp patch
// 0008): an argument into its slot before the program (out = 0), or a result out of its slot
// after it (out = 1). The address comes from a small table that the call uploads in its own
// submission, so a call that gets new buffers changes table entries and replays the recorded
// sequence as it is (vkgrad/runtime/runners.py, "Argument slots"). Every device dtype is 4 bytes
// wide, so the copy moves words.
#version 450
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_buffer_reference_uvec2 : require
layout(local_size_x = 256) in;
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Words { uint w[]; };
layout(std430, binding = 0) readonly buffer Table { uvec2 address[]; };
layout(std430, binding = 1) buffer Slot { uint slot[]; };
layout(push_constant) uniform Push { uint entry; uint n; uint out_; };

void main() {
    Words other = Words(address[entry]);
    uint stride = gl_NumWorkGroups.x * 256u;
    for (uint i = gl_GlobalInvocationID.x; i < n; i += stride) {
        if (out_ != 0u)
            other.w[i] = slot[i];
        else
            slot[i] = other.w[i];
    }
}
