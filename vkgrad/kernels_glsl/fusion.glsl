// fusion.glsl: how a hand-written kernel reads its operands and writes its results when the
// compiler has fused elementwise work into it (vkgrad/lowering/hooks.py writes that work).
//
// The lowering replaces the line `// VKGRAD_FUSION_HOOKS` of a kernel with generated GLSL that
// may define, for a binding N of the kernel:
//   VKG_LOAD_BN(i)       element i (flat, row-major, uint) of the operand bound at N, computed
//                        from other buffers (a fused producer: `sum(x * y)` never writes x * y);
//   VKG_STORE_BN(i, v)   store result element i = v of the binding-N result, and whatever the
//                        fused epilogue computes from it (bias, activation, residual, scaling).
// A hooked binding is still bound (to some other buffer) but never accessed. Without hooks the
// kernels compile exactly as before. The helpers below give T-typed (float or vec4) accesses.
#ifndef VKGRAD_FUSION_GLSL
#define VKGRAD_FUSION_GLSL

#define VKG_LOAD4(F, i) vec4(F(4u * (i)), F(4u * (i) + 1u), F(4u * (i) + 2u), F(4u * (i) + 3u))
#define VKG_STORE4(F, i, v) {                                                                 \
        vec4 vkg_v_ = (v); uint vkg_i_ = 4u * (i);                                             \
        F(vkg_i_, vkg_v_.x); F(vkg_i_ + 1u, vkg_v_.y); F(vkg_i_ + 2u, vkg_v_.z);               \
        F(vkg_i_ + 3u, vkg_v_.w); }

// LOAD_T(F, i) / STORE_T(F, i, v): an element of type T (vec.glsl: VEC 1 or 4) at T-index i.
#if VEC == 4
#define VKG_LOAD_T(F, i) VKG_LOAD4(F, i)
#define VKG_STORE_T(F, i, v) VKG_STORE4(F, i, v)
#else
#define VKG_LOAD_T(F, i) F(i)
#define VKG_STORE_T(F, i, v) F(i, v)
#endif

#endif
