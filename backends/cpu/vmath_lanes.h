/* exp, GELU and GELU's derivative over vectors of W lanes, written once for two instruction
 * sets: vmath_avx2.c includes this file with W 8 and vmath_avx512.c with W 16, each with the
 * macros below defined (this file undefines them at its end), and gets exp_<SFX> (one vector),
 * vgelu_<SFX> and vgelu_back_<SFX> (arrays). Both do the same operations per element in the
 * same order (the maths: vmath-impl.h), so their results are the same bits; only the
 * width differs.
 *
 *   SFX          name suffix               FN         function attributes
 *   V            the float vector type     W          its lanes
 *   VSET1(c)     broadcast                 VADD/VSUB/VMUL/VDIV, VMIN/VMAX, VFMADD/VFNMADD(a, b, c)
 *   VADDI(a, b)  32-bit integer add        VSLLI23(a), VSRLI3(a): 32-bit shifts by 23, 3
 *   VTAB8(i)     EXP2_T[i mod 8] per lane (i an integer vector)
 *   VSCALE2N(p, t, n)  p·2^n for an integer n in [-126, 127] (t: n in its low mantissa bits)
 *   VASI(x)      float bits as integer     VASF(x)    integer bits as float
 *   VLOAD/VSTORE(p[, v])                   VLOADN(p, k), VSTOREN(p, k, v): lanes [0, k) */
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
#undef VLOAD
#undef VSTORE
#undef VLOADN
#undef VSTOREN
