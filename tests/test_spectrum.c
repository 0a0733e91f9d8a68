/* The singular values, numerical rank and effective rank of `tg attention --stats`
 * (tools/spectrum.c) on matrices whose spectra are known in closed form. */
#include <math.h>
#include <stdlib.h>

#include "tg_check.h"
#include "tools/spectrum.h"

/* a rank-2 5×7 matrix 3 u1 v1ᵀ + u2 v2ᵀ with orthonormal u1, u2 and v1, v2: σ = (3, 1, 0, 0, 0),
 * in either orientation (5×7 and its 7×5 transpose take the two Gram matrices) */
START_TEST(test_rank_two) {
    float a[35], at[35];
    double sv[5];
    /* orthonormal pairs: constant and alternating-sign vectors (scaled to unit length below),
     * so that u1·u2 = 0 and v1·v2 = 0 */
    double u1[5] = {1, 1, 1, 1, 0}, u2[5] = {1, -1, 1, -1, 0};
    double v1[7] = {1, 1, 1, 1, 1, 1, 0}, v2[7] = {1, -1, 1, -1, 1, -1, 0};
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 7; j++) {
            a[i * 7 + j] =
                (float)(3 * (u1[i] / 2) * (v1[j] / sqrt(6)) + (u2[i] / 2) * (v2[j] / sqrt(6)));
            at[j * 5 + i] = a[i * 7 + j];
        }
    const float *m[2] = {a, at};
    int64_t r[2] = {5, 7}, c[2] = {7, 5};
    for (int t = 0; t < 2; t++) {
        ck_assert_int_eq(tg_spectrum_svals(m[t], r[t], c[t], sv), 0);
        tg_assert_close(sv[0], 3.0, 1e-6, 0);
        tg_assert_close(sv[1], 1.0, 1e-6, 0);
        for (int i = 2; i < 5; i++)
            ck_assert_msg(sv[i] < 1e-6, "sv[%d] = %g, expected 0", i, sv[i]);
        ck_assert_int_eq(tg_spectrum_rank(sv, 5, r[t], c[t]), 2);
        /* p = (3/4, 1/4): exp(−(3/4 ln 3/4 + 1/4 ln 1/4)) = 1.7547654... */
        tg_assert_close(tg_spectrum_erank(sv, 5), exp(-(0.75 * log(0.75) + 0.25 * log(0.25))), 1e-6,
                        0);
    }
}
END_TEST

/* diag(4, −3, 2, 0): σ = (4, 3, 2, 0), rank 3; the identity's effective rank is its size */
START_TEST(test_diagonal) {
    float a[16] = {0};
    a[0] = 4, a[5] = -3, a[10] = 2;
    double sv[4];
    ck_assert_int_eq(tg_spectrum_svals(a, 4, 4, sv), 0);
    double want[4] = {4, 3, 2, 0};
    for (int i = 0; i < 4; i++)
        tg_assert_close(sv[i], want[i], 1e-12, 0);
    ck_assert_int_eq(tg_spectrum_rank(sv, 4, 4, 4), 3);
    double h = -(4 / 9.0 * log(4 / 9.0) + 3 / 9.0 * log(3 / 9.0) + 2 / 9.0 * log(2 / 9.0));
    tg_assert_close(tg_spectrum_erank(sv, 4), exp(h), 1e-12, 0);
    float id[36] = {0};
    for (int i = 0; i < 6; i++)
        id[i * 7] = 1;
    double s6[6];
    ck_assert_int_eq(tg_spectrum_svals(id, 6, 6, s6), 0);
    ck_assert_int_eq(tg_spectrum_rank(s6, 6, 6, 6), 6);
    tg_assert_close(tg_spectrum_erank(s6, 6), 6.0, 1e-12, 0);
}
END_TEST

/* a full matrix: [[1, 2], [3, 4]] has σ = sqrt(15 ± sqrt(221)) */
START_TEST(test_dense_two_by_two) {
    float a[4] = {1, 2, 3, 4};
    double sv[2];
    ck_assert_int_eq(tg_spectrum_svals(a, 2, 2, sv), 0);
    tg_assert_close(sv[0], sqrt(15 + sqrt(221)), 1e-12, 0);
    tg_assert_close(sv[1], sqrt(15 - sqrt(221)), 1e-12, 0);
    ck_assert_int_eq(tg_spectrum_rank(sv, 2, 2, 2), 2);
}
END_TEST

/* The float32 threshold: σ_max · max(r, c) · 2^-23. For a 2×2 matrix with σ = (1, s), s just
 * above 2·2^-23 counts and just below does not; the zero matrix has rank 0 and erank 0. */
START_TEST(test_tolerance) {
    double above[2] = {1, 2.5 * 0x1p-23}, below[2] = {1, 1.5 * 0x1p-23};
    ck_assert_int_eq(tg_spectrum_rank(above, 2, 2, 2), 2);
    ck_assert_int_eq(tg_spectrum_rank(below, 2, 2, 2), 1);
    ck_assert_int_eq(tg_spectrum_rank(below, 2, 1, 2), 1);
    float z[6] = {0};
    double sv[2];
    ck_assert_int_eq(tg_spectrum_svals(z, 2, 3, sv), 0);
    ck_assert_int_eq(tg_spectrum_rank(sv, 2, 2, 3), 0);
    tg_assert_close(tg_spectrum_erank(sv, 2), 0.0, 0, 0);
}
END_TEST

/* A product Q Kᵀ of a 20×3 and a 3×20 matrix, as an attention head of width 3 makes over 20
 * tokens: rank 3 exactly; the sum of σ² is the squared Frobenius norm (computed in double). */
START_TEST(test_low_rank_product) {
    enum { N = 20, D = 3 };
    float q[N * D], k[N * D], s[N * N];
    uint64_t x = 12345;
    for (int i = 0; i < N * D; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        q[i] = (float)((double)(x >> 11) / 9007199254740992.0 - 0.5);
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        k[i] = (float)((double)(x >> 11) / 9007199254740992.0 - 0.5);
    }
    double fro = 0;
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) {
            float v = 0;
            for (int c = 0; c < D; c++)
                v += q[i * D + c] * k[j * D + c];
            s[i * N + j] = v;
            fro += (double)v * v;
        }
    double sv[N], sum = 0;
    ck_assert_int_eq(tg_spectrum_svals(s, N, N, sv), 0);
    for (int i = 0; i < N; i++)
        sum += sv[i] * sv[i];
    tg_assert_close(sum, fro, 0, 1e-12);
    ck_assert_int_eq(tg_spectrum_rank(sv, N, N, N), D);
    double er = tg_spectrum_erank(sv, N);
    ck_assert_msg(er > 1 && er <= D + 1e-6, "effective rank %g outside (1, %d]", er, D);
}
END_TEST

Suite *tg_test_suite(void) {
    Suite *s = suite_create("spectrum");
    TCase *tc = tcase_create("spectrum");
    tcase_add_test(tc, test_rank_two);
    tcase_add_test(tc, test_diagonal);
    tcase_add_test(tc, test_dense_two_by_two);
    tcase_add_test(tc, test_tolerance);
    tcase_add_test(tc, test_low_rank_product);
    suite_add_tcase(s, tc);
    return s;
}
