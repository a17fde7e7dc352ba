#version 450
// fp32 depthwise convolution, computed directly: one output feature per group reading one
// input feature (Og = 1 and I = 1, so O = C = G), each thread one output element at a time:
//     out[n, c, od, oh, ow] = sum over (kd, kh, kw) of w[c, 0, kd, kh, kw] *
//                             x[n, c, id, ih, iw]   at the dilated, padded position
//     od * stride + kd * rhs_dilation - pad_low (when lhs_dilation divides it, inside x; else 0)
// The implicit GEMM (conv.comp) would give such a convolution a 1-column tile with a k of the
// window alone, most of it idle; here the work is a window of loads and FMAs per output, and
// the kernel is bound by memory. A warp's threads run along ow, so they read one w row (a
// broadcast) and neighbouring x elements. The same push constants as conv.comp (planned by
// vkgrad/lowering/conv_depthwise.py, which lowering/conv.py asks first).
// Bindings: 0 x, 1 w, 2 out. Grid: lowering/launch.py's grid() over ceil(N*C*P / 256) groups,
// each thread looping on by the whole grid. With DW_SPLIT or DW_REDUCE defined, the reduction
// forms below. Operand layouts (lowering/conv_layouts.py; conv_gemm.comp's CG_XL, CG_WL):
// DW_WL = 1, w's window flipped (an input gradient's kernel: w[c, 0, r] = w0[c, 0, KP-1-r]);
// in DW_SPLIT, DW_XL = 1 (x0 [I, G*N, ...] viewed [N, G*I, ...]: a weight gradient's input)
// and DW_WL = 2 (w0 [I, O, ...] with its first two axes swapped: its output gradient).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// VKGRAD_FUSION_HOOKS
// VKG_STORE_B2 (fusion.glsl): out's elements go through a fused epilogue (bias, activation).

layout(local_size_x = 256) in;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Wt { float w[]; };
layout(std430, binding = 2) writeonly buffer Out { float o[]; };

#include "conv_common.glsl"     // push constants p, input_at

#ifdef DW_SPLIT
// One output feature per group from I input features over a long window, with few outputs
// per (n, g) (a depthwise convolution's weight gradient: the window the output gradient, the
// outputs the weights of one channel, 3 x 3 for a 3x3): a workgroup per (n, g) and slice of
// k = (c, kd, kh, kw), each thread holding all P = DW_OD * DW_OH * DW_OW sums (the output's
// spatial sizes, defines: the loops over them unrolled), so w's element (the output
// gradient's) is read once for the P of them and x's neighbours come from the cache; a k's
// input coordinates are tested once per output row and column (OD + OH + OW tests, not 3 P).
// The threads take k 256 apart, moved on by 256's digits in k's mixed radix (push bk_c,
// bk_d, bk_h, bk_w) with carries, no division in the loop. Slice s sums k in
// [s * chunk, (s + 1) * chunk) and writes out[s, n, g, q] (partials, summed after in a fixed
// order, when there are several). Grid: (N * O, slices).
const uint SD = DW_OD, SH = DW_OH, SW = DW_OW, MAXP = SD * SH * SW;
shared float red[MAXP * 256u];

void main() {
    const uint KP = p.KD * p.KH * p.KW, K = p.I * KP;
    const uint DHW = p.D * p.H * p.W;
    const uint ng = gl_WorkGroupID.x, split = gl_WorkGroupID.y;    // ng = n * O + g
    const uint g = ng % p.O, n = ng / p.O;
    const uint t = gl_LocalInvocationID.x;
    const uint G = p.C / p.I;
    const uint xbase = DW_XL == 1 ? (g * p.N + n) * DHW : (n * p.C + g * p.I) * DHW;
    const uint XC = DW_XL == 1 ? G * p.N * DHW : DHW;      // x: from a channel to the next
    const uint wbase = DW_WL == 2 ? g * KP : g * K, WC = DW_WL == 2 ? p.O * KP : KP;
    float acc[MAXP];
    [[unroll]] for (uint q = 0u; q < MAXP; q++) acc[q] = 0.0;
    const uint kend = min(K, (split + 1u) * p.chunk);
    uint k = split * p.chunk + t;
    uint c = k / KP, kp = k % KP;
    uint kw = kp % p.KW, kh = (kp / p.KW) % p.KH, kd = kp / (p.KW * p.KH);
    for (; k < kend; k += 256u) {
        const float wv = w[wbase + c * WC + (kd * p.KH + kh) * p.KW + kw];
        int id[SD], ih[SH], iw[SW];
        [[unroll]] for (uint j = 0u; j < SD; j++)
            id[j] = input_at(int(j * p.sd + kd * p.rd_d) - p.pd, p.ld_d, p.D);
        [[unroll]] for (uint j = 0u; j < SH; j++)
            ih[j] = input_at(int(j * p.sh + kh * p.rd_h) - p.ph, p.ld_h, p.H);
        [[unroll]] for (uint j = 0u; j < SW; j++)
            iw[j] = input_at(int(j * p.sw + kw * p.rd_w) - p.pw, p.ld_w, p.W);
        const uint xc = xbase + c * XC;
        [[unroll]] for (uint a = 0u; a < SD; a++)
            [[unroll]] for (uint b = 0u; b < SH; b++) {
                const bool row = id[a] >= 0 && ih[b] >= 0;
                const uint at = xc + (uint(id[a]) * p.H + uint(ih[b])) * p.W;
                [[unroll]] for (uint z = 0u; z < SW; z++) {
                    const bool ok = row && iw[z] >= 0;
                    const float xv = x[ok ? at + uint(iw[z]) : 0u];
                    const uint q = (a * SH + b) * SW + z;
                    acc[q] = fma(wv, ok ? xv : 0.0, acc[q]);
                }
            }
        kw += p.bk_w;
        if (kw >= p.KW) { kw -= p.KW; kh++; }
        kh += p.bk_h;
        if (kh >= p.KH) { kh -= p.KH; kd++; }
        kd += p.bk_d;
        if (kd >= p.KD) { kd -= p.KD; c++; }
        c += p.bk_c;
    }
    [[unroll]] for (uint q = 0u; q < MAXP; q++) red[q * 256u + t] = acc[q];
    barrier();
    [[unroll]] for (uint s = 128u; s > 0u; s >>= 1u) {
        if (t < s)
            [[unroll]] for (uint q = 0u; q < MAXP; q++) red[q * 256u + t] += red[q * 256u + t + s];
        barrier();
    }
    if (t < MAXP) {
        const uint e = ng * MAXP + t;
#ifdef VKG_STORE_B2
        VKG_STORE_B2(e, red[t * 256u]);
#else
        o[split * p.N * p.O * MAXP + e] = red[t * 256u];
#endif
    }
}
#elif defined(DW_REDUCE)
// One output feature per group from I input features over a long window (a depthwise
// convolution's weight gradient: I = the batch, the window = the output gradient): a
// workgroup per output element, its threads splitting k = (c, kd, kh, kw) and summing in
// shared memory. Grid: grid() over N*O*P groups.
shared float partial[256];

void main() {
    const uint P = p.OD * p.OH * p.OW;
    const uint KP = p.KD * p.KH * p.KW, K = p.I * KP;
    const uint DHW = p.D * p.H * p.W;
    const uint e = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    const uint t = gl_LocalInvocationID.x;
    float acc = 0.0;
    if (e < p.N * p.O * P) {
        uint q = e % P, no = e / P;                 // no = n * O + g (Og = 1: o = g)
        uint g = no % p.O, n = no / p.O;
        uint ow = q % p.OW, oh = (q / p.OW) % p.OH, od = q / (p.OW * p.OH);
        int d0 = int(od * p.sd) - p.pd, h0 = int(oh * p.sh) - p.ph, w0 = int(ow * p.sw) - p.pw;
        uint xbase = (n * p.C + g * p.I) * DHW, wbase = g * K;
        for (uint k = t; k < K; k += 256u) {
            uint c = k / KP, kp = k % KP;
            uint kw = kp % p.KW, kh = (kp / p.KW) % p.KH, kd = kp / (p.KW * p.KH);
            int id = input_at(d0 + int(kd * p.rd_d), p.ld_d, p.D);
            int ih = input_at(h0 + int(kh * p.rd_h), p.ld_h, p.H);
            int iw = input_at(w0 + int(kw * p.rd_w), p.ld_w, p.W);
            if (id >= 0 && ih >= 0 && iw >= 0)
                acc = fma(w[wbase + k],
                          x[xbase + c * DHW + (uint(id) * p.H + uint(ih)) * p.W + uint(iw)], acc);
        }
    }
    partial[t] = acc;
    barrier();
    [[unroll]] for (uint s = 128u; s > 0u; s >>= 1u) {
        if (t < s) partial[t] += partial[t + s];
        barrier();
    }
    if (t == 0u && e < p.N * p.O * P) {
#ifdef VKG_STORE_B2
        VKG_STORE_B2(e, partial[0]);
#else
        o[e] = partial[0];
#endif
    }
}
#else
void main() {
    const uint P = p.OD * p.OH * p.OW;
    const uint total = p.N * p.C * P;
    const uint KP = p.KD * p.KH * p.KW;
    const uint DHW = p.D * p.H * p.W;
    const uint stride = gl_NumWorkGroups.x * gl_NumWorkGroups.y * 256u;
    uint e = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256u
             + gl_LocalInvocationID.x;
    for (; e < total; e += stride) {
        uint q = e % P, nc = e / P;             // nc = n * C + c
        uint c = nc % p.C;
        uint ow = q % p.OW, oh = (q / p.OW) % p.OH, od = q / (p.OW * p.OH);
        int d0 = int(od * p.sd) - p.pd, h0 = int(oh * p.sh) - p.ph, w0 = int(ow * p.sw) - p.pw;
        uint xbase = nc * DHW, wbase = c * KP;
        float acc = 0.0;
        for (uint kd = 0u; kd < p.KD; kd++) {
            int id = input_at(d0 + int(kd * p.rd_d), p.ld_d, p.D);
            if (id < 0) continue;
            for (uint kh = 0u; kh < p.KH; kh++) {
                int ih = input_at(h0 + int(kh * p.rd_h), p.ld_h, p.H);
                if (ih < 0) continue;
                uint row = xbase + (uint(id) * p.H + uint(ih)) * p.W;
                uint wrow = (kd * p.KH + kh) * p.KW;
                for (uint kw = 0u; kw < p.KW; kw++) {
                    int iw = input_at(w0 + int(kw * p.rd_w), p.ld_w, p.W);
                    const uint r = wrow + kw;
                    if (iw >= 0)
                        acc = fma(w[wbase + (DW_WL == 1 ? KP - 1u - r : r)], x[row + uint(iw)], acc);
                }
            }
        }
#ifdef VKG_STORE_B2
        VKG_STORE_B2(e, acc);
#else
        o[e] = acc;
#endif
    }
}
#endif
