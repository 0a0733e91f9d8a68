/* The small path's register tile, written once for two instruction sets: gemm_small.c includes
 * this file for AVX2 (W 8) and for AVX-512F (W 16), each time with the macros below defined (this
 * file undefines them at its end), and gets tile_<SFX>: mr (1..12) rows × nv (1..4) vectors of W
 * floats of C, mr·nv accumulators held in registers for the whole k loop. Called with constant
 * mr and nv (gemm_small.c: TG_TILE_FN), whose tests fold away.
 *
 *   SFX            name suffix             FN   function attributes
 *   V              the float vector type   W    its lanes
 *   VZERO()        zeros                   VLOADU(p)   unaligned load
 *   VBCAST(p)      *p in every lane        VFMA(a, b, c)   a·b + c
 *   STORE_ROW(cr, x0, x1, x2, x3)  cr[0:nc] = alpha·x + beta·cr for the row's nv vectors (beta 0:
 *                  cr not read), in scope of nv, nc, alpha, beta
 *
 * Per value p of k: B's row (nv vectors) loaded, then for each row one broadcast of A and nv
 * FMAs. Each element is its k sum, one FMA per k in order, then STORE_ROW's alpha times it and
 * beta·C plus that in one FMA: the same bits at every width and tile shape. */
#define GT_NAME2(a, b) a##_##b
#define GT_NAME(a, b) GT_NAME2(a, b)

/* clang-format off */
#define GT_ROW(i)                                                                                  \
    if (mr > i) {                                                                                  \
        const V ai = VBCAST(a + (i) * rs + p * cs);                                                \
        c##i##_0 = VFMA(ai, b0, c##i##_0);                                                         \
        if (nv > 1) c##i##_1 = VFMA(ai, b1, c##i##_1);                                             \
        if (nv > 2) c##i##_2 = VFMA(ai, b2, c##i##_2);                                             \
        if (nv > 3) c##i##_3 = VFMA(ai, b3, c##i##_3);                                             \
    }
#define GT_STORE(i)                                                                                \
    if (mr > i) STORE_ROW(c + (i) * ldc, c##i##_0, c##i##_1, c##i##_2, c##i##_3);
#define GT_ACC(i) c##i##_0 = z, c##i##_1 = z, c##i##_2 = z, c##i##_3 = z

FN static inline __attribute__((always_inline)) void
GT_NAME(tile, SFX)(const int mr, const int nv, int nc, int64_t kc, const float *a, int64_t rs,
                   int64_t cs, const float *b, int64_t ldbp, float *c, int64_t ldc,
                   const float *ab) {
    const V z = VZERO();
    V GT_ACC(0), GT_ACC(1), GT_ACC(2), GT_ACC(3), GT_ACC(4), GT_ACC(5);
    V GT_ACC(6), GT_ACC(7), GT_ACC(8), GT_ACC(9), GT_ACC(10), GT_ACC(11);
    for (int64_t p = 0; p < kc; p++) {
        const float *bp = b + p * ldbp;
        const V b0 = VLOADU(bp);
        const V b1 = nv > 1 ? VLOADU(bp + W) : b0;
        const V b2 = nv > 2 ? VLOADU(bp + 2 * W) : b0;
        const V b3 = nv > 3 ? VLOADU(bp + 3 * W) : b0;
        GT_ROW(0) GT_ROW(1) GT_ROW(2) GT_ROW(3) GT_ROW(4) GT_ROW(5)
        GT_ROW(6) GT_ROW(7) GT_ROW(8) GT_ROW(9) GT_ROW(10) GT_ROW(11)
    }
    const float alpha = ab[0], beta = ab[1];
    (void)alpha, (void)beta;
    GT_STORE(0) GT_STORE(1) GT_STORE(2) GT_STORE(3) GT_STORE(4) GT_STORE(5)
    GT_STORE(6) GT_STORE(7) GT_STORE(8) GT_STORE(9) GT_STORE(10) GT_STORE(11)
}
/* clang-format on */

#undef GT_ROW
#undef GT_STORE
#undef GT_ACC
#undef GT_NAME
#undef GT_NAME2
#undef SFX
#undef FN
#undef V
#undef W
#undef VZERO
#undef VLOADU
#undef VBCAST
#undef VFMA
#undef STORE_ROW
