// half.glsl: the 16-bit floats (f16, bf16) in 32-bit words. A buffer of n 16-bit values is
// (n + 1) / 2 uint words, element i in the low half of word i / 2 when i is even, the high
// half when odd (the byte order of a little-endian numpy array viewed as uint32: uploads and
// downloads are views, vkgrad/runtime/vulkan.py), and of a float16_t[] buffer: a kernel with
// 16-bit storage binds the same buffers. Values compute in f32; a result is rounded
// to its 16-bit dtype (round to nearest even), as the interpreter rounds it. No device feature
// is needed: unpackHalf2x16 and packHalf2x16 are core GLSL, and a bf16 is the high half of an
// f32's bits. ieee.glsl includes this file, so every kernel has it.
#ifndef VKGRAD_HALF_GLSL
#define VKGRAD_HALF_GLSL

// element i of a buffer of 16-bit values, given the word that holds it
float vkg_f16_at(uint word, int i) {
    vec2 h = unpackHalf2x16(word);
    return (i & 1) != 0 ? h.y : h.x;
}
float vkg_bf16_at(uint word, int i) {
    return uintBitsToFloat((i & 1) != 0 ? word & 0xffff0000u : word << 16);
}

// the bf16 bits of x, rounded to nearest even; a NaN stays a (quiet) NaN
uint vkg_bf16_bits(float x) {
    uint u = floatBitsToUint(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (u >> 16) | 0x0040u;
    return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}

// the f16 bits of x, rounded to nearest even. Past f16's range GLSL leaves packHalf2x16
// undefined (the H200's gave a finite value where the interpreter has inf, so a loss scale's
// overflow went unseen): from 65520 up, which rounds to inf, the bits are inf's.
uint vkg_f16_bits(float x) {
    if (abs(x) >= 65520.0 && !isnan(x)) return ((floatBitsToUint(x) >> 16) & 0x8000u) | 0x7c00u;
    return packHalf2x16(vec2(x, 0.0)) & 0xffffu;
}

float vkg_round_f16(float x) { return unpackHalf2x16(vkg_f16_bits(x)).x; }
float vkg_round_bf16(float x) { return uintBitsToFloat(vkg_bf16_bits(x) << 16); }

// the word holding elements 2k (a) and 2k + 1 (b)
uint vkg_pack_f16(float a, float b) { return vkg_f16_bits(a) | (vkg_f16_bits(b) << 16); }
uint vkg_pack_bf16(float a, float b) { return vkg_bf16_bits(a) | (vkg_bf16_bits(b) << 16); }

#endif
