#version 450
// row.comp: the template of a generated row kernel (a `fused[kind=row]` eqn: a layer norm, a
// softmax written in jnp), filled by vkgrad/lowering/row_kernel.py and planned by
// vkgrad/lowering/kernels.py:plan_rows. One workgroup per row of [ROWS, N]: each thread loads
// its NV elements of the row (columns t, t + WG, ...) once into registers, the row's
// reductions run in program order (each a workgroup reduction of reduce_common.glsl: subgroup
// operations, then shared memory, combined in the same order on every run), the values that
// depend only on the row are computed once per thread between them, and only the group's
// outputs are written: a row element by its thread, a value per row by thread 0.
//
// Defines: ROWS, N, NV (elements per thread: NV * WG >= N), SUBGROUPS (reduce_common.glsl).
// Spec constant 0: the workgroup size WG. Bindings: the body's inputs, then its outputs
// (declared at VKGRAD_ROW_BUFFERS).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x_id = 0) in;
#include "reduce_common.glsl"

// VKGRAD_ROW_BUFFERS

// VKGRAD_ROW_HELPERS

void main() {
    int row = int(vkg_group_index());
    if (row >= ROWS) return;                          // uniform: the whole workgroup leaves
    int t = int(gl_LocalInvocationIndex);
    int base = row * N;
// VKGRAD_ROW_BODY
}
