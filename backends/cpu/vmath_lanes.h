/* The vector maths written once over vectors of W lanes, for two instruction sets:
 * vmath_avx2.c includes this file with W 8 and vmath_avx512.c with W 16, each with the macros
 * below defined (this file undefines them at its end), and gets, named <f>_<SFX>: exp, tanh
 * (one vector) and the maps vexp, vtanh, vgelu, vgelu_back (arrays); the cross-entropy's rows
 * (sumexp, ce_sumexp, ce_grad_v, ce_grad_from) and long softmax rows (softmax_long); blocks of
 * W short rows transposed so that lane r holds row r (load_cols, store_cols, softmax_cols,
 * softmax_back_block, softmax_block) and the blocks a level takes (softmax_blocks,
 * softmax_back_blocks); and layer norm's passes (row_stats, lnb_sums, ln_normalize_rows,
 * lnb_dx_rows). Both widths do the same operations per element in the same order (the maths:
 * vmath-impl.h) and end their sums in the same order (VSUM16, VQ8), so their results are the
 * same bits; only the width differs. What a level does differently without changing a result
 * (a masked load or a blend, where a row's tail reads from) is in its macros.
 *
 *   SFX          name suffix               FN         function attributes
 *   V            the float vector type     W          its lanes
 *   VM           a lane mask (a vector of all-ones lanes, or a k-mask)
 *   VSET1(c)     broadcast                 VADD/VSUB/VMUL/VDIV, VMIN/VMAX, VFMADD/VFNMADD(a, b, c)
 *   VAND/VOR/VANDNOT(a, b)  bitwise        VCMP(a, b, _CMP_...) -> VM
 *   VKEEP(m, v)  v where m, else 0         VBLEND(m, a, b)  b where m, else a
 *   VADDI(a, b)  32-bit integer add        VSLLI23(a), VSRLI3(a): 32-bit shifts by 23, 3
 *   VTAB8(i)     EXP2_T[i mod 8] per lane (i an integer vector)
 *   VSCALE2N(p, t, n)  p·2^n for an integer n in [-126, 127] (t: n in its low mantissa bits)
 *   VASI(x)      float bits as integer     VASF(x)    integer bits as float
 *   VLOAD/VSTORE(p[, v])                   VLOADN(p, k), VSTOREN(p, k, v): lanes [0, k)
 *   VLOADT0(p, j, n), VLOADT_NINF(p, j, n), VSTORET(p, j, n, v): the W values of a row of n
 *                from j on (j may be >= n), lanes past n read as 0 or -inf, not written
 *   VHMAX(v)     the largest lane          VSUM16(a)  the sum of the 16 / W vectors a[] as one
 *                                                     16-lane vector: lanes l and l + 8, then hsum8
 *   VMUL_ROUNDED(a, b)  a product rounded before anything adds it (no contraction)
 *   VBARRIER(v)  v rounded here: the compiler may not contract it into a later operation
 *   VTRANSPOSE(c) W vectors transposed     VPERMI(v, ix)  v's lanes ix[0..W)
 *   VLOAD_SEG(x, d, r, j, Wd), VSTORE_SEG(y, d, r, j, v): row r's W values from column j of a
 *                block of W rows of d (Wd: d rounded up to W)
 *   VQ8(a, q)    the 8 lanes that hold values 8q..8q+7 of each step of a row, a[] its vectors
 *   BLOCK_D_MIN  the shortest rows taken in blocks       BLOCK_PAIRS  1: two blocks at a time */
#define GL_NAME2(a, b) a##_##b
#define GL_NAME(a, b) GL_NAME2(a, b)

/* min/max operand order: MINPS/MAXPS return their second operand when either is NaN, so the
 * bound goes first and a NaN x passes through (as tg_clampf). */
FN static inline V GL_NAME(clamp, SFX)(V x, float lo, float hi) {
    return VMAX(VSET1(lo), VMIN(VSET1(hi), x));
}

/* tg_fast_expf's steps on x already clamped to [-87.3, 88.37]: n from the rounding by
 * 1.5 * 2^23, whose sum t holds n in its low mantissa bits, r = x - n ln 2 in two steps, the
 * polynomial, then p·2^n (VSCALE2N), so that a NaN stays NaN. */
FN static inline V GL_NAME(exp_clamped, SFX)(V x) {
    const V magic = VSET1(12582912.0f);
    V t = VFMADD(x, VSET1(1.44269504088896341f), magic);
    V n = VSUB(t, magic);
    V r = VFNMADD(n, VSET1(0.693359375f), x);
    r = VFMADD(n, VSET1(2.12194440e-4f), r);
    V p = VSET1(TG_EXP_P5);
    p = VFMADD(p, r, VSET1(TG_EXP_P4));
    p = VFMADD(p, r, VSET1(TG_EXP_P3));
    p = VFMADD(p, r, VSET1(TG_EXP_P2));
    p = VFMADD(p, r, VSET1(TG_EXP_P1));
    p = VFMADD(p, r, VSET1(1.0f));
    p = VFMADD(p, r, VSET1(1.0f));
    return VSCALE2N(p, t, n);
}

FN static inline V GL_NAME(exp, SFX)(V x) {
    return GL_NAME(exp_clamped, SFX)(GL_NAME(clamp, SFX)(x, -87.3f, 88.37f));
}

/* exp of x <= 0 or NaN (softmax's x - max): the upper clamp cannot bind, the same bits without it
 */
FN static inline V GL_NAME(exp_le0, SFX)(V x) {
    return GL_NAME(exp_clamped, SFX)(VMAX(VSET1(-87.3f), x));
}

/* 2^z for z in [-125.9, 125.9] (exp2_scalar's steps): z = n + j/8 + r with r exact, 2^r by
 * the cubic, 2^(j/8) from the table (VTAB8 reads t's low 3 bits, which hold j), and n added to
 * the exponent bits (GELU keeps a NaN x NaN by itself). */
FN static inline V GL_NAME(exp2, SFX)(V z) {
    const V magic = VSET1(EXP2_MAGIC);
    V t = VADD(z, magic);
    V r = VSUB(z, VSUB(t, magic));
    V p = VSET1(EXP2_C3);
    p = VFMADD(p, r, VSET1(EXP2_C2));
    p = VFMADD(p, r, VSET1(EXP2_C1));
    p = VFMADD(p, r, VSET1(1.0f));
    p = VMUL(p, VTAB8(VASI(t)));
    return VASF(VADDI(VASI(p), VSLLI23(VSRLI3(VASI(t)))));
}

/* e = exp(-2u) = 2^z, and xc: x clamped (vmath-impl.h) */
FN static inline V GL_NAME(gelu_e, SFX)(V x, V *xc_out) {
    V xc = GL_NAME(clamp, SFX)(x, -10.0f, 10.0f);
    V z = VMUL(xc, VFMADD(VMUL(xc, xc), VSET1(GELU_Z3), VSET1(GELU_Z1)));
    *xc_out = xc;
    return GL_NAME(exp2, SFX)(z);
}

FN static inline V GL_NAME(gelu, SFX)(V x) {
    V xc, e = GL_NAME(gelu_e, SFX)(x, &xc);
    return VDIV(x, VADD(VSET1(1.0f), e));
}

FN static inline V GL_NAME(gelu_grad, SFX)(V x) {
    V xc, e = GL_NAME(gelu_e, SFX)(x, &xc);
    V s = VDIV(VSET1(1.0f), VADD(VSET1(1.0f), e));
    V du = VFMADD(VSET1(6.0f * GELU_C * GELU_K), VMUL(xc, xc), VSET1(2.0f * GELU_K));
    V t = VMUL(VMUL(VMUL(xc, s), VMUL(e, s)), du);
    return VADD(s, t);
}

/* Whole vectors, then the tail through the same code: every element's result depends on its
 * input alone, wherever a thread's share starts. */
FN static void GL_NAME(vgelu, SFX)(const float *x, float *y, int64_t n) {
    int64_t i = 0;
    for (; i + W <= n; i += W)
        VSTORE(y + i, GL_NAME(gelu, SFX)(VLOAD(x + i)));
    if (i < n) VSTOREN(y + i, n - i, GL_NAME(gelu, SFX)(VLOADN(x + i, n - i)));
}

FN static void GL_NAME(vgelu_back, SFX)(const float *x, const float *dy, float *dx, int64_t n) {
    int64_t i = 0;
    for (; i + W <= n; i += W)
        VSTORE(dx + i, VMUL(VLOAD(dy + i), GL_NAME(gelu_grad, SFX)(VLOAD(x + i))));
    if (i < n) {
        V g = GL_NAME(gelu_grad, SFX)(VLOADN(x + i, n - i));
        VSTOREN(dx + i, n - i, VMUL(VLOADN(dy + i, n - i), g));
    }
}

/* tanh (vmath-impl.h): the odd polynomial x + x^3 Q(x^2) below |x| = 0.625, above it
 * 1 - 2 / (exp(2|x|) + 1) with x's sign */
FN static inline V GL_NAME(tanh, SFX)(V x) {
    const V sign = VSET1(-0.0f);
    V ax = VANDNOT(sign, x), z = VMUL(x, x);
    V q = VSET1(TANH_Q0);
    q = VFMADD(q, z, VSET1(TANH_Q1));
    q = VFMADD(q, z, VSET1(TANH_Q2));
    q = VFMADD(q, z, VSET1(TANH_Q3));
    q = VFMADD(q, z, VSET1(TANH_Q4));
    V small = VFMADD(VMUL(x, z), q, x);
    V e = GL_NAME(exp, SFX)(VMUL(VSET1(2.0f), GL_NAME(clamp, SFX)(ax, 0.0f, 9.0f)));
    V big = VSUB(VSET1(1.0f), VDIV(VSET1(2.0f), VADD(e, VSET1(1.0f))));
    big = VOR(big, VAND(x, sign));
    return VBLEND(VCMP(ax, VSET1(0.625f), _CMP_LT_OQ), big, small);
}

/* y = f(x) over arrays: whole vectors, then the tail through the same code (as vgelu) */
#define GL_MAP(NAME, F)                                                                            \
    FN static inline void GL_NAME(NAME, SFX)(const float *x, float *y, int64_t n) {                \
        int64_t i = 0;                                                                             \
        for (; i + W <= n; i += W)                                                                 \
            VSTORE(y + i, GL_NAME(F, SFX)(VLOAD(x + i)));                                          \
        if (i < n) VSTOREN(y + i, n - i, GL_NAME(F, SFX)(VLOADN(x + i, n - i)));                   \
    }
GL_MAP(vexp, exp)
GL_MAP(vtanh, tanh)
#undef GL_MAP

/* e = exp(v - m) where v is not -inf, else 0: a softmax's or cross-entropy's term (m the max) */
FN static inline V GL_NAME(exp_live, SFX)(V v, V mv) {
    return VKEEP(VCMP(v, VSET1(-INFINITY), _CMP_NEQ_UQ), GL_NAME(exp_le0, SFX)(VSUB(v, mv)));
}

/* The rows of the cross-entropy and the long softmax rows, 16 values per step in 16 / W
 * vectors (lane l of vector h sums elements 16i + Wh + l); VSUM16 adds the vectors' lanes l and
 * l + 8 and then the 8 sums in hsum8's order, so both levels sum in the order of one 16-lane
 * vector. The tail reads -inf for the max and the exps (which are then 0) and 0 for the plain
 * sum, and a vector wholly past the end adds exactly 0. With e, the exps are stored there as
 * well (a long softmax row's; e may be x: each vector is read before it is written). The max
 * runs in four chains (one would wait on the max's latency), exact in any order. Inlined into
 * each caller, so that a softmax row's (no plain sum) drops that sum. */
FN static INLINE float GL_NAME(sumexp, SFX)(const float *x, int64_t n, float *max, float *sum_x,
                                            float *e) {
    enum { H = 16 / W };
    const V ninf = VSET1(-INFINITY);
    V vm[4] = {ninf, ninf, ninf, ninf}, acc[H], accx[H];
    for (int h = 0; h < H; h++)
        acc[h] = accx[h] = VSET1(0.0f);
    for (int64_t j = 0; j < n; j += 4 * W)
        for (int k = 0; k < 4; k++)
            vm[k] = VMAX(VLOADT_NINF(x, j + W * k, n), vm[k]);
    const float m = VHMAX(VMAX(VMAX(vm[0], vm[1]), VMAX(vm[2], vm[3])));
    const V mv = VSET1(m);
    for (int64_t j = 0; j < n; j += 16)
        for (int h = 0; h < H; h++) {
            const int64_t jh = j + W * h;
            const V ev = GL_NAME(exp_live, SFX)(VLOADT_NINF(x, jh, n), mv);
            acc[h] = VADD(acc[h], ev);
            accx[h] = VADD(accx[h], VLOADT0(x, jh, n));
            if (e) VSTORET(e, jh, n, ev);
        }
    if (sum_x) *sum_x = VSUM16(accx);
    *max = m;
    return VSUM16(acc);
}

/* tg_cpu_vce_sumexp */
FN static float GL_NAME(ce_sumexp, SFX)(const float *x, int64_t n, float *max, float *sum_x) {
    return GL_NAME(sumexp, SFX)(x, n, max, sum_x, NULL);
}

/* A softmax row longer than SHORT_ROW_MAX: the cross-entropy's max and sum, so a log-softmax's
 * log-sum-exp m + logf(s) is the cross-entropy's bit for bit (-log p(y) of a decoding step is
 * the loss's NLL of the same logits) */
FN static void GL_NAME(softmax_long, SFX)(const float *x, float *y, int64_t d, bool log_out) {
    float m, s = log_out ? GL_NAME(sumexp, SFX)(x, d, &m, NULL, NULL)
                         : GL_NAME(sumexp, SFX)(x, d, &m, NULL, y);
    if (m == -INFINITY) {
        softmax_dead_row(y, d, log_out);
    } else if (log_out) {
        const V lse = VSET1(m + logf(s));
        for (int64_t j = 0; j < d; j += W)
            VSTORET(y, j, d, VSUB(VLOADT0(x, j, d), lse));
    } else {
        const V inv = VSET1(1.0f / s);
        for (int64_t j = 0; j < d; j += W)
            VSTORET(y, j, d, VMUL(VLOADT0(y, j, d), inv));
    }
}

/* The cross-entropy's gradient, scale (exp(x - max) inv - base), of the vector v (lanes past
 * the row: -inf), and of a row's values from j on */
typedef struct {
    V mv, iv, sc, b;
} GL_NAME(ce_coef, SFX);

FN static inline V GL_NAME(ce_grad_v, SFX)(V v, GL_NAME(ce_coef, SFX) k) {
    return VMUL(k.sc, VSUB(VMUL(GL_NAME(exp_live, SFX)(v, k.mv), k.iv), k.b));
}

FN static inline void GL_NAME(ce_grad_from, SFX)(const float *x, int64_t j, int64_t n,
                                                 GL_NAME(ce_coef, SFX) k, float *y) {
    for (; j < n; j += W)
        VSTORET(y, j, n, GL_NAME(ce_grad_v, SFX)(VLOADT_NINF(x, j, n), k));
}

/* Blocks of W short rows (softmax_rows' and softmax_back_rows'), transposed so that lane r
 * holds row r: c[j] is column j of the W rows of d at x, j < Wd (d rounded up to W; columns
 * d..Wd-1 are not used). VLOAD_SEG(x, d, r, j, Wd) is row r's W values from column j, and
 * VSTORE_SEG stores them back; each level's says what it does past a row's end, but neither
 * touches anything outside the block's W d floats (another thread's rows). Stores are in row
 * order, so a store that runs into the next row is overwritten by that row's own. */
FN static INLINE void GL_NAME(load_cols, SFX)(const float *x, int d, int Wd, V *c) {
    for (int j = 0; j < Wd; j += W) {
        for (int r = 0; r < W; r++)
            c[j + r] = VLOAD_SEG(x, d, r, j, Wd);
        VTRANSPOSE(c + j);
    }
}

FN static INLINE void GL_NAME(store_cols, SFX)(float *y, int d, int Wd, V *c) {
    for (int j = 0; j < Wd; j += W)
        VTRANSPOSE(c + j); /* c[j + r]: row r, columns j..j+W-1 */
    for (int r = 0; r < W; r++)
        for (int j = 0; j < Wd; j += W)
            VSTORE_SEG(y, d, r, j, c[j + r]);
}

/* The softmax of nb (1 or 2) blocks of transposed rows, c[b][0..d), in place: the one-row
 * code's arithmetic operation for operation (the same max, exp, lane-j % 8 partial sums
 * combined in hsum8's order, 1 / s), so a row's result is bit-identical whichever path takes
 * it. Two blocks' long chains of dependent steps (the max, exp, the division) interleave.
 * All -inf rows give 0. */
FN static INLINE void GL_NAME(softmax_cols, SFX)(V c[][SHORT_ROW_MAX], int d, int nb) {
    const V ninf = VSET1(-INFINITY);
    V acc[2][8], m[2], inv[2];
    VM alive[2];
    for (int b = 0; b < nb; b++) {
        m[b] = ninf;
        for (int k = 0; k < 8; k++)
            acc[b][k] = VSET1(0.0f);
    }
    for (int j = 0; j < d; j++)
        for (int b = 0; b < nb; b++)
            m[b] = VMAX(c[b][j], m[b]); /* NaN skipped */
    for (int j = 0; j < d; j++)
        for (int b = 0; b < nb; b++) {
            c[b][j] = GL_NAME(exp_live, SFX)(c[b][j], m[b]);
            acc[b][j % 8] = VADD(acc[b][j % 8], c[b][j]);
        }
    for (int b = 0; b < nb; b++) {
        const V *a = acc[b];
        const V s = VADD(VADD(VADD(a[0], a[4]), VADD(a[2], a[6])),
                         VADD(VADD(a[1], a[5]), VADD(a[3], a[7])));
        alive[b] = VCMP(m[b], ninf, _CMP_NEQ_OQ);
        inv[b] = VDIV(VSET1(1.0f), s);
    }
    for (int j = 0; j < d; j++)
        for (int b = 0; b < nb; b++)
            c[b][j] = VKEEP(alive[b], VMUL(c[b][j], inv[b]));
}

/* The softmax backward of W rows of d < DOT_SERIAL_BELOW at y, dy: the portable row code's
 * arithmetic operation for operation (products rounded before they are added, the serial dot
 * product, then y (dy - s)), the same bits. The products of each row are transposed so that
 * lane r holds row r and summed over the columns; then dx = y (dy - s) over the block's W d
 * values in memory order, each vector's sums spread to its values' rows by a permute (ix:
 * row_of_lane). Only the sums need the rows transposed: one set of transposes, not three. */
FN static INLINE void GL_NAME(softmax_back_block, SFX)(const float *y, const float *dy, float *dx,
                                                       int d, int Wd, const int32_t *ix) {
    V c[SHORT_ROW_MAX], s = VSET1(0.0f);
    for (int j = 0; j < Wd; j += W) {
        for (int r = 0; r < W; r++)
            c[j + r] = VMUL_ROUNDED(VLOAD_SEG(dy, d, r, j, Wd), VLOAD_SEG(y, d, r, j, Wd));
        VTRANSPOSE(c + j);
    }
    for (int j = 0; j < d; j++)
        s = VADD(s, c[j]);
    for (int k = 0; k < d; k++) {
        const V sk = VPERMI(s, ix + W * k);
        VSTORE(dx + W * k, VMUL(VLOAD(y + W * k), VSUB(VLOAD(dy + W * k), sk)));
    }
}

/* One block of W short rows (nb 1 or 2 blocks side by side) through softmax_cols. Columns
 * d..Wd-1 are stored as 0, then overwritten by the next row's own stores. */
FN static INLINE void GL_NAME(softmax_block, SFX)(const float *x, float *y, int d, int Wd, int nb) {
    V c[2][SHORT_ROW_MAX];
    for (int b = 0; b < nb; b++)
        GL_NAME(load_cols, SFX)(x + b * W * d, d, Wd, c[b]);
    GL_NAME(softmax_cols, SFX)(c, d, nb);
    for (int b = 0; b < nb; b++) {
        for (int j = d; j < Wd; j++)
            c[b][j] = VSET1(0.0f);
        GL_NAME(store_cols, SFX)(y + b * W * d, d, Wd, c[b]);
    }
}

/* The blocks of W rows a level takes, of row lengths BLOCK_D_MIN..SHORT_ROW_MAX (forward) and
 * BLOCK_D_MIN..DOT_SERIAL_BELOW - 1 (backward), from the first row on: one instance per row
 * length (a constant D, so that every loop unrolls and the columns stay in registers). With
 * BLOCK_PAIRS, rows of up to 16 values go two blocks at a time, so that the blocks' long chains
 * of dependent steps (the max, exp, the division) interleave. Each returns the rows it took;
 * the caller takes the rest, with the same bits. */
#define GL_BLOCKS(D)                                                                               \
    case D:                                                                                        \
        for (; BLOCK_PAIRS && D >= BLOCK_D_MIN && D <= 16 && r + 2 * W <= rows; r += 2 * W)        \
            GL_NAME(softmax_block, SFX)(x + r * D, y + r * D, D, (D + W - 1) / W * W, 2);          \
        for (; D >= BLOCK_D_MIN && r + W <= rows; r += W)                                          \
            GL_NAME(softmax_block, SFX)(x + r * D, y + r * D, D, (D + W - 1) / W * W, 1);          \
        break
FN static INLINE int64_t GL_NAME(softmax_blocks, SFX)(const float *x, float *y, int64_t rows,
                                                      int64_t d) {
    int64_t r = 0;
    switch (d) {
        /* clang-format off */
        GL_BLOCKS(1); GL_BLOCKS(2); GL_BLOCKS(3); GL_BLOCKS(4); GL_BLOCKS(5); GL_BLOCKS(6);
        GL_BLOCKS(7); GL_BLOCKS(8); GL_BLOCKS(9); GL_BLOCKS(10); GL_BLOCKS(11); GL_BLOCKS(12);
        GL_BLOCKS(13); GL_BLOCKS(14); GL_BLOCKS(15); GL_BLOCKS(16); GL_BLOCKS(17); GL_BLOCKS(18);
        GL_BLOCKS(19); GL_BLOCKS(20); GL_BLOCKS(21); GL_BLOCKS(22); GL_BLOCKS(23); GL_BLOCKS(24);
        GL_BLOCKS(25); GL_BLOCKS(26); GL_BLOCKS(27); GL_BLOCKS(28); GL_BLOCKS(29); GL_BLOCKS(30);
        GL_BLOCKS(31); GL_BLOCKS(32);
        /* clang-format on */
    default:
        break;
    }
    return r;
}
#undef GL_BLOCKS

#define GL_BACK_BLOCKS(D)                                                                          \
    case D:                                                                                        \
        for (const int Wd = (D + W - 1) / W * W; D >= BLOCK_D_MIN && r + W <= rows; r += W)        \
            GL_NAME(softmax_back_block, SFX)(y + r * D, dy + r * D, dx + r * D, D, Wd, ix);        \
        break
FN static INLINE int64_t GL_NAME(softmax_back_blocks, SFX)(const float *y, const float *dy,
                                                           float *dx, int64_t rows, int64_t d) {
    int64_t r = 0;
    int32_t ix[W * DOT_SERIAL_BELOW];
    if (rows >= W && d >= BLOCK_D_MIN && d < DOT_SERIAL_BELOW) row_of_lane(ix, (int)d, W);
    switch (d) {
        /* clang-format off */
        GL_BACK_BLOCKS(1); GL_BACK_BLOCKS(2); GL_BACK_BLOCKS(3); GL_BACK_BLOCKS(4);
        GL_BACK_BLOCKS(5); GL_BACK_BLOCKS(6); GL_BACK_BLOCKS(7); GL_BACK_BLOCKS(8);
        GL_BACK_BLOCKS(9); GL_BACK_BLOCKS(10); GL_BACK_BLOCKS(11); GL_BACK_BLOCKS(12);
        GL_BACK_BLOCKS(13); GL_BACK_BLOCKS(14); GL_BACK_BLOCKS(15);
        /* clang-format on */
    default:
        break;
    }
    return r;
}
#undef GL_BACK_BLOCKS

/* Layer norm's sums of R rows d apart (R a constant, at most 4), side by side: each row's sums
 * are the AVX2 code's 8-lane accumulators, held as W-lane vectors (VQ8(a, q): the 8 lanes of
 * accumulator q, the one that sums values 8q..8q+7 of each whole step), each lane summing the
 * same values in the same order at either width; a row's tail and the combining order run on
 * those 8-lane accumulators, with the AVX2 code's own operations (vmath_avx2.h), so a row gives
 * the same bits alone, paired or in four, at either level. One row's sums are chains of
 * dependent adds: rows side by side overlap their chains.
 *
 * The forward's statistics, mean[r] and rstd[r] = 1 / sqrt(var + eps): in steps of 32 values,
 * four accumulators (four chains), the tail 8 at a time into the first; the variance in a second
 * pass over x - mean. */
FN static INLINE void GL_NAME(row_stats, SFX)(const float *x, int64_t d, float eps, int R,
                                              float *mean, float *rstd) {
    enum { Q = 32 / W };
    V A[4][Q];
    for (int r = 0; r < R; r++)
        for (int q = 0; q < Q; q++)
            A[r][q] = VSET1(0.0f);
    int64_t j0 = 0;
    for (; j0 + 32 <= d; j0 += 32)
        for (int r = 0; r < R; r++)
            for (int q = 0; q < Q; q++)
                A[r][q] = VADD(A[r][q], VLOAD(x + r * d + j0 + W * q));
    for (int r = 0; r < R; r++) {
        __m256 a0 = VQ8(A[r], 0);
        for (int64_t j = j0; j < d; j += 8)
            a0 = _mm256_add_ps(a0, load0(x + r * d, j, d));
        mean[r] = ln_sum4(a0, VQ8(A[r], 1), VQ8(A[r], 2), VQ8(A[r], 3)) / (float)d;
        for (int q = 0; q < Q; q++)
            A[r][q] = VSET1(0.0f);
    }
    for (int64_t j = 0; j + 32 <= d; j += 32)
        for (int r = 0; r < R; r++) {
            const V mv = VSET1(mean[r]);
            for (int q = 0; q < Q; q++) {
                const V c = VSUB(VLOAD(x + r * d + j + W * q), mv);
                A[r][q] = VFMADD(c, c, A[r][q]);
            }
        }
    for (int r = 0; r < R; r++) {
        const __m256 mv = _mm256_set1_ps(mean[r]);
        __m256 a0 = VQ8(A[r], 0);
        for (int64_t j = j0; j < d; j += 8) {
            const __m256 c = vmask(_mm256_sub_ps(load0(x + r * d, j, d), mv), j, d);
            a0 = _mm256_fmadd_ps(c, c, a0);
        }
        rstd[r] = ln_rstd(ln_sum4(a0, VQ8(A[r], 1), VQ8(A[r], 2), VQ8(A[r], 3)), d, eps);
    }
}

/* The backward's first two passes over each row, the mean and then three sums together (sum g
 * xh = rstd sum g (x - mu) needs only the mean): s[r][0] = sum (x - mu)^2, s[r][1] = sum g,
 * s[r][2] = sum g (x - mu), g = gamma dy rounded (lnb_load). In steps of 16 values, two
 * accumulators each, the tail 8 at a time into the first. */
FN static INLINE void GL_NAME(lnb_sums, SFX)(const float *x, const float *gm, const float *dy,
                                             int64_t d, int R, float *mu, float s[][3]) {
    enum { H = 16 / W };
    V A[4][H], C[4][H], G[4][H], GC[4][H];
    for (int r = 0; r < R; r++)
        for (int h = 0; h < H; h++)
            A[r][h] = C[r][h] = G[r][h] = GC[r][h] = VSET1(0.0f);
    int64_t j0 = 0;
    for (; j0 + 16 <= d; j0 += 16)
        for (int r = 0; r < R; r++)
            for (int h = 0; h < H; h++)
                A[r][h] = VADD(A[r][h], VLOAD(x + r * d + j0 + W * h));
    for (int r = 0; r < R; r++) {
        __m256 a0 = VQ8(A[r], 0);
        for (int64_t j = j0; j < d; j += 8)
            a0 = _mm256_add_ps(a0, load0(x + r * d, j, d));
        mu[r] = hsum8(_mm256_add_ps(a0, VQ8(A[r], 1))) / (float)d;
    }
    for (int64_t j = 0; j + 16 <= d; j += 16)
        for (int r = 0; r < R; r++)
            for (int h = 0; h < H; h++) {
                const int64_t jh = j + W * h;
                V g = VLOAD(dy + r * d + jh);
                if (gm) g = VMUL_ROUNDED(g, VLOAD(gm + jh));
                const V c = VSUB(VLOAD(x + r * d + jh), VSET1(mu[r]));
                C[r][h] = VFMADD(c, c, C[r][h]);
                G[r][h] = VADD(G[r][h], g);
                GC[r][h] = VFMADD(g, c, GC[r][h]);
            }
    for (int r = 0; r < R; r++) {
        const __m256 mv = _mm256_set1_ps(mu[r]);
        __m256 ac0 = VQ8(C[r], 0), ag0 = VQ8(G[r], 0), agc0 = VQ8(GC[r], 0), g, c;
        for (int64_t j = j0; j < d; j += 8) {
            lnb_load(x + r * d, gm, dy + r * d, j, d, mv, &g, &c);
            ac0 = _mm256_fmadd_ps(c, c, ac0);
            ag0 = _mm256_add_ps(ag0, g);
            agc0 = _mm256_fmadd_ps(g, c, agc0);
        }
        s[r][0] = hsum8(_mm256_add_ps(ac0, VQ8(C[r], 1)));
        s[r][1] = hsum8(_mm256_add_ps(ag0, VQ8(G[r], 1)));
        s[r][2] = hsum8(_mm256_add_ps(agc0, VQ8(GC[r], 1)));
    }
}

/* The passes that write R rows d apart, elementwise (a value's result depends on its own
 * inputs alone, so a row's tail may be taken at either width): with gamma (and, in the forward,
 * beta) present, the usual case, whole vectors of the R rows in one pass that loads gamma and
 * beta once; then each row's rest, masked at its end. Forward: y = (x - mean) rstd gamma + beta
 * (gamma, beta or both may be absent; without both, the product is rounded before beta's add,
 * as the portable code rounds it). */
FN static INLINE void GL_NAME(ln_normalize_rows, SFX)(const float *x, const float *gm,
                                                      const float *bt, float *y, int64_t d, int R,
                                                      const float *mean, const float *rstd) {
    V mv[4], rv[4];
    for (int r = 0; r < R; r++)
        mv[r] = VSET1(mean[r]), rv[r] = VSET1(rstd[r]);
    int64_t j0 = 0;
    if (gm && bt)
        for (; j0 + W <= d; j0 += W) {
            const V g = VLOAD(gm + j0), b = VLOAD(bt + j0);
            for (int r = 0; r < R; r++) {
                const V v = VMUL(VSUB(VLOAD(x + r * d + j0), mv[r]), rv[r]);
                VSTORE(y + r * d + j0, VFMADD(v, g, b));
            }
        }
    for (int r = 0; r < R; r++)
        for (int64_t j = j0; j < d; j += W) {
            V v = VMUL(VSUB(VLOADT0(x + r * d, j, d), mv[r]), rv[r]);
            if (gm && bt) {
                v = VFMADD(v, VLOADT0(gm, j, d), VLOADT0(bt, j, d));
            } else {
                if (gm) v = VMUL(v, VLOADT0(gm, j, d));
                VBARRIER(v);
                if (bt) v = VADD(v, VLOADT0(bt, j, d));
            }
            VSTORET(y + r * d, j, d, v);
        }
}

/* Backward: dx = rs (g - sg - c sgc) from lnb_coefs' coefficients, g = gamma dy rounded
 * before anything adds it (as in lnb_sums) */
FN static INLINE void GL_NAME(lnb_dx_rows, SFX)(const float *x, const float *gm, const float *dy,
                                                float *dx, int64_t d, int R, const lnb_coef *k) {
    V mv[4], rv[4], sg[4], sgc[4];
    for (int r = 0; r < R; r++) {
        mv[r] = VSET1(k[r].mu), rv[r] = VSET1(k[r].rs);
        sg[r] = VSET1(k[r].sg), sgc[r] = VSET1(k[r].sgc);
    }
    int64_t j0 = 0;
    if (gm)
        for (; j0 + W <= d; j0 += W) {
            const V gv = VLOAD(gm + j0);
            for (int r = 0; r < R; r++) {
                const V g = VMUL_ROUNDED(VLOAD(dy + r * d + j0), gv);
                const V c = VSUB(VLOAD(x + r * d + j0), mv[r]);
                VSTORE(dx + r * d + j0, VMUL(rv[r], VFNMADD(c, sgc[r], VSUB(g, sg[r]))));
            }
        }
    for (int r = 0; r < R; r++)
        for (int64_t j = j0; j < d; j += W) {
            V g = VLOADT0(dy + r * d, j, d);
            if (gm) g = VMUL_ROUNDED(g, VLOADT0(gm, j, d));
            const V c = VSUB(VLOADT0(x + r * d, j, d), mv[r]);
            VSTORET(dx + r * d, j, d, VMUL(rv[r], VFNMADD(c, sgc[r], VSUB(g, sg[r]))));
        }
}

#undef GL_NAME
#undef GL_NAME2
#undef FN
#undef SFX
#undef V
#undef W
#undef VSET1
#undef VADD
#undef VSUB
#undef VMUL
#undef VDIV
#undef VMIN
#undef VMAX
#undef VFMADD
#undef VFNMADD
#undef VADDI
#undef VSLLI23
#undef VSCALE2N
#undef VSRLI3
#undef VTAB8
#undef VASI
#undef VASF
#undef VM
#undef VAND
#undef VOR
#undef VANDNOT
#undef VCMP
#undef VKEEP
#undef VBLEND
#undef VLOADT0
#undef VLOADT_NINF
#undef VSTORET
#undef VHMAX
#undef VSUM16
#undef VMUL_ROUNDED
#undef VTRANSPOSE
#undef VPERMI
#undef VLOAD_SEG
#undef VSTORE_SEG
#undef VQ8
#undef VBARRIER
#undef BLOCK_D_MIN
#undef BLOCK_PAIRS
#undef VLOAD
#undef VSTORE
#undef VLOADN
#undef VSTOREN
