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
// Two [BH, L, D] 16-bit operands' tiles of BC rows, walked a step at a time: rows r0 .. r0 + BC
// (zeros past row L) loaded by the whole workgroup (its `tid`; `bh` its batch * head) into
// registers RA, RB (TILE_REGS 16-byte words an invocation), then stored into the shared tiles
// A, B at word `base` (0, or TILE_BUF: with PREFETCH, two tiles each, the next step's loaded
// while this one computes)
#define TILE_WORDS (BC * D / 8)
#define TILE_BUF (BC * KROW / 8)
#define TILE_REGS ((TILE_WORDS + NT - 1) / NT)
#ifdef PREFETCH
#define TILE_BUFS 2
#else
#define TILE_BUFS 1
#endif
#define LOAD_TILES(RA, RB, SRC_A, SRC_B, r0, L)                                                \
    [[unroll]] for (uint i_ = 0; i_ < TILE_REGS; i_++) {                                       \
        uint w = tid + i_ * NT, row = (r0) + w / (D / 8);                                      \
        RA[i_] = uvec4(0);                                                                     \
        RB[i_] = uvec4(0);                                                                     \
        if (w < TILE_WORDS && row < (L)) {                                                     \
            uint at = ((bh * (L) + row) * D) / 8 + w % (D / 8);                                \
            RA[i_] = SRC_A[at];                                                                \
            RB[i_] = SRC_B[at];                                                                \
        }                                                                                      \
    }
#define STORE_TILES(A, B, RA, RB, base)                                                        \
    [[unroll]] for (uint i_ = 0; i_ < TILE_REGS; i_++) {                                       \
        uint w = tid + i_ * NT;                                                                \
        if (w < TILE_WORDS) {                                                                  \
            uint at = (base) + (w / (D / 8)) * TILE_STRIDE + w % (D / 8);                      \
            A[at] = RA[i_];                                                                    \
            B[at] = RB[i_];                                                                    \
        }                                                                                      \
    }
// A kernel's walk over its steps: the kernel defines STEP_LOAD(r0) (the step's rows from r0 into
// registers) and STEP_STORE(buf) (those registers into its shared tiles number `buf`), and runs
// STEP_FIRST(have, r0) before its loop, STEP_PREFETCH(more, next) first in a step and
// STEP_NEXT(more, next, t) last in step t: with PREFETCH the next step's rows are loaded during
// this one and stored into the other tiles (one barrier a step), else loaded after it into the
// same tiles
#define STEP_FIRST(HAVE, r0)                                                                   \
    if (HAVE) {                                                                                \
        STEP_LOAD(r0)                                                                          \
        STEP_STORE(0)                                                                          \
    }                                                                                          \
    barrier();
#ifdef PREFETCH
#define STEP_PREFETCH(MORE, next)                                                              \
    if (MORE) {                                                                                \
        STEP_LOAD(next)                                                                        \
    }
#define STEP_NEXT(MORE, next, t)                                                               \
    if (MORE) {                                                                                \
        STEP_STORE(((t) + 1) % 2)                                                              \
    }                                                                                          \
    barrier();                          /* the next tiles stored, this step's read */
#else
#define STEP_PREFETCH(MORE, next)
#define STEP_NEXT(MORE, next, t)                                                               \
    barrier();                          /* before the next step's rows overwrite these */      \
    if (MORE) {                                                                                \
        STEP_LOAD(next)                                                                        \
        STEP_STORE(0)                                                                          \
        barrier();                                                                             \
    }
#endif
// Each element's row in a 16 x 16 accumulator, as a matrix of that type: KHR cooperative
// matrices say no element's place, but every matrix of one type spreads its elements over the
// invocations the same way, so a matrix loaded from a table of row numbers says it (loaded
// column-major, the same table gives the columns). The kernel declares `shared float
// shRows[256]`; the whole workgroup runs this (a barrier).
#define ELEMENT_ROWS(ROWS_)                                                                    \
    for (uint i = tid; i < 256; i += NT) shRows[i] = float(i / 16);                            \
    barrier();                                                                                 \
    coopMatLoad(ROWS_, shRows, 0, 16, gl_CooperativeMatrixLayoutRowMajor);
// The 16 x 16 piece (row block r, column block c) of 16-bit rows written over scores that
// start at float `base`, and its stride in floats
#define HALF_AT(base, r, c) ((base) + ((r) * 16 * PROW + (c) * 16) / 2)
#define HALF_STRIDE (PROW / 2)
