// The element type a kernel loads and stores, chosen by the VEC define: 1 -> float, 4 -> vec4
// (rows whose length is a multiple of 4 move as 16-byte loads). HSUM / HMAX reduce one T to a
// float (HMAX keeps a NaN: ieee.glsl). Include after defining VEC (default 1) and ieee.glsl.
#ifndef VKGRAD_VEC_GLSL
#define VKGRAD_VEC_GLSL

#ifndef VEC
#define VEC 1
#endif

#if VEC == 4
#define T vec4
#define HSUM(v) (((v).x + (v).y) + ((v).z + (v).w))
#define HMAX(v) vkg_max(vkg_max((v).x, (v).y), vkg_max((v).z, (v).w))
#elif VEC == 1
#define T float
#define HSUM(v) (v)
#define HMAX(v) (v)
#else
#error "VEC must be 1 or 4"
#endif

#endif
