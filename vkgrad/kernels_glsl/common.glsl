// Generic helpers shared by vkgrad's compute kernels. Keep this small: only what several
// kernels use and nothing specific to one of them.
#ifndef VKGRAD_COMMON_GLSL
#define VKGRAD_COMMON_GLSL

#include "ieee.glsl"

// [[unroll]] / [[dont_unroll]] on loops: register arrays stay in registers only when every
// loop indexing them is unrolled.
#extension GL_EXT_control_flow_attributes : require

// A constant that is a specialization constant (set per pipeline, free to change without
// recompiling GLSL) unless VKGRAD_BAKE_SPEC is defined, in which case it is an ordinary
// compile-time constant with the same default. Usage: SPEC_CONST(3) uint TILE = TILE_DEFAULT;
#ifdef VKGRAD_BAKE_SPEC
#define SPEC_CONST(id) const
#else
#define SPEC_CONST(id) layout(constant_id = id) const
#endif

uint ceil_div(uint a, uint b) { return (a + b - 1u) / b; }

#endif
