// What the convolution kernels (conv.comp, conv_gemm.comp, conv_depthwise.comp) share: their
// push constants, which lowering/conv.py fills for all three (1-D and 2-D convolutions as 3-D
// ones with leading sizes 1), and the input coordinate test of the gathers that run 3-D with
// lhs dilation.
#ifndef VKGRAD_CONV_COMMON_GLSL
#define VKGRAD_CONV_COMMON_GLSL

layout(push_constant) uniform Push {
    uint N; uint C; uint D; uint H; uint W;
    uint O; uint Og; uint I;
    uint KD; uint KH; uint KW;
    uint OD; uint OH; uint OW;
    uint sd; uint sh; uint sw;
    int pd; int ph; int pw;
    uint ld_d; uint ld_h; uint ld_w;
    uint rd_d; uint rd_h; uint rd_w;
    uint chunk;            // k per slice (a multiple of BK)
    uint bk_c; uint bk_d; uint bk_h; uint bk_w;   // BK in k's mixed radix (I, KD, KH, KW)
} p;

// an input coordinate: the dilated position `pos`, -1 when it is padding or a dilation zero
int input_at(int pos, uint ld, uint n) {
    if (pos < 0) return -1;
    uint u = uint(pos);
    if (ld != 1u) {
        if (u % ld != 0u) return -1;
        u /= ld;
    }
    return u < n ? int(u) : -1;
}

#endif
