// The register-blocked tile product that matmul.comp and conv_gemm.comp share. Include it after
// the kernel has defined BK, TM, TN, TX, TY, T1 (threads of one K slice), SA, SB (shared row
// strides in vec4s) and `smem`, its shared vec4 array.
//
// Layout: a k step's tiles sit in shared memory k-major, A's BM rows as vec4 rows of SA, B's BN
// columns as vec4 rows of SB (one vec4 of padding each, so transposing stores hit distinct
// banks). Thread (tx, ty) of the TX x TY grid holds TM x TN accumulators `acc[TM][TN / 4]`, as
// TM/4 x TN/4 strips of 4 x 4: rows i*4*TY + 4*ty + r, columns j*4*TX + 4*tx + c, so each of
// its shared reads is a vec4 and a warp's reads of one k touch few distinct addresses.
#ifndef VKGRAD_GEMM_TILE_GLSL
#define VKGRAD_GEMM_TILE_GLSL

// Where the thread's l-th vec4 of a BR x BK tile lies: the vec4 runs along the operand's
// contiguous dimension, k when `kc` (k-contiguous storage), else the row.
void tile_pos(uint stid, uint l, uint BR, bool kc, out uint r, out uint kk) {
    uint idx = stid + l * T1;
    if (kc) { r = idx / (BK / 4u); kk = (idx % (BK / 4u)) * 4u; }
    else    { kk = idx / (BR / 4u); r = (idx % (BR / 4u)) * 4u; }
}

// One k (`kk` within the step) of the product: `abase` is the stage's A tile plus ty, `bbase`
// its B tile plus tx (both in vec4s of smem).
#define GEMM_TILE_STEP(kk)                                                                      \
            {                                                                                   \
                vec4 a[TM / 4u], b[TN / 4u];                                                    \
                [[unroll]] for (uint i = 0; i < TM / 4u; i++) a[i] = smem[abase + (kk) * SA + i * TY]; \
                [[unroll]] for (uint j = 0; j < TN / 4u; j++) b[j] = smem[bbase + (kk) * SB + j * TX]; \
                [[unroll]] for (uint i = 0; i < TM / 4u; i++)                                   \
                    [[unroll]] for (uint r = 0; r < 4u; r++)                                    \
                        [[unroll]] for (uint j = 0; j < TN / 4u; j++)                           \
                            acc[i * 4u + r][j] = fma(vec4(a[i][r]), b[j], acc[i * 4u + r][j]);  \
            }

#endif
