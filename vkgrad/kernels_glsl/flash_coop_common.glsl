// What flash attention's kernels on cooperative matrices share (flash_attention_coop.comp's
// forward, flash_attention_coop_dq.comp and flash_attention_coop_dkdv.comp's backward): the
// fragment types, the padded shared-memory rows, and the copy of a tile of 16-bit rows.
// Defines it reads: D (head dim 64 or 128), BC (rows a step: 16, 32 or 64), MR (16-row
// fragments a subgroup owns: 1 or 2), NSG (subgroups a workgroup: 4 or 8), SG (subgroup size:
// 32).
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_EXT_control_flow_attributes : require

#ifndef D
#define D 64
#endif
#ifndef BC
#define BC 16
#endif
#ifndef SG
#define SG 32
#endif
#ifndef MR
#define MR 1                 // 16-row fragments a subgroup owns
#endif
#ifndef NSG
#define NSG 4                // subgroups a workgroup
#endif
#define RS (16 * MR)         // rows a subgroup owns
#define BR (NSG * RS)        // rows a workgroup owns
#define LPR (SG / RS)        // invocations a row in the elementwise steps (2 or 1)
#define NT (NSG * SG)
#define FD (D / 16)          // fragments along the head dim
#define FC (BC / 16)         // fragments along a step's rows
#define KROW (D + 8)         // a tile row in shared memory, halves (padded: other banks)
#define SROW (BC + 4)        // a score row, floats
#define PROW (BC + 8)        // a 16-bit row written over a score row, halves
#define LOG2E 1.4426950408889634
#define LN2 0.6931471805599453
#define NEG_INF (-1.0 / 0.0)
#ifdef LSE16
#define LSE_T float16_t      // lse and dlse in q's type (the primitive's, primitives/attention.py)
#else
#define LSE_T float
#endif

#define ACC coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>
#define ACC16 coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>
#define FRAG_A coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>
#define FRAG_B coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB>

// Shared tile offsets, in 16-byte words: fragment (row block r, column block c) of a tile of
// KROW-half rows, and the same tile's stride
#define TILE_AT(r, c) (((r) * 16 * KROW + (c) * 16) / 8)
#define TILE_STRIDE (KROW / 8)
// Rows r0 .. r0 + BC of two [BH, L, D] 16-bit operands (read in 16-byte words) into the shared
// tiles A and B, zeros past row L, by the whole workgroup (its `tid`; `bh` its batch * head)
#define COPY_TILES(A, B, SRC_A, SRC_B, r0, L)                                                  \
    for (uint w = tid; w < BC * D / 8; w += NT) {                                              \
        uint r = w / (D / 8), c = w % (D / 8), row = (r0) + r;                                 \
        uvec4 a = uvec4(0), b = uvec4(0);                                                      \
        if (row < (L)) {                                                                       \
            uint at = ((bh * (L) + row) * D) / 8 + c;                                          \
            a = SRC_A[at];                                                                     \
            b = SRC_B[at];                                                                     \
        }                                                                                      \
        A[r * TILE_STRIDE + c] = a;                                                            \
        B[r * TILE_STRIDE + c] = b;                                                            \
    }
// The 16 x 16 piece (row block r, column block c) of 16-bit rows written over scores that
// start at float `base`, and its stride in floats
#define HALF_AT(base, r, c) ((base) + ((r) * 16 * PROW + (c) * 16) / 2)
#define HALF_STRIDE (PROW / 2)
