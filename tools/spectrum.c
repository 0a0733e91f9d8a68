/* Singular values through the Gram matrix and cyclic Jacobi (Golub & Van Loan, Matrix
 * Computations, §8.5): G = a aᵀ (or aᵀ a, the smaller) is symmetric positive semi-definite with
 * eigenvalues σ_i²; each rotation J(p, q, θ) zeroes G[p][q] (G ← Jᵀ G J), a sweep visits every
 * pair p < q, and the off-diagonal mass falls quadratically once it is small. Sizes here are a
 * sentence's length (tens), so O(k³) per sweep and a handful of sweeps is cheap. */
#include "tools/spectrum.h"

#include <math.h>
#include <stdlib.h>

static int cmp_desc(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x < y) - (x > y);
}

/* The eigenvalues of the symmetric k×k matrix g (destroyed) into its diagonal. A pair is left
 * alone once its a_pq is below the rounding of both a_pp and a_qq (after the first sweeps, as
 * Numerical Recipes' jacobi does): a relative test, so that the tiny eigenvalues of a
 * rank-deficient G are resolved too. Done when a sweep rotates nothing (at most 100 sweeps;
 * a handful is typical). */
static void jacobi(double *g, int64_t k) {
    for (int sweep = 0; sweep < 100; sweep++) {
        int64_t rotations = 0;
        for (int64_t p = 0; p < k; p++)
            for (int64_t q = p + 1; q < k; q++) {
                double apq = g[p * k + q], app = g[p * k + p], aqq = g[q * k + q];
                if (apq == 0) continue;
                if (sweep > 3 && fabs(app) + 100 * fabs(apq) == fabs(app) &&
                    fabs(aqq) + 100 * fabs(apq) == fabs(aqq)) {
                    g[p * k + q] = g[q * k + p] = 0;
                    continue;
                }
                rotations++;
                /* a'_pq = cs(a_pp − a_qq) + (c² − s²) a_pq = 0 with t = s/c the smaller root of
                 * t² + 2θt − 1 = 0, θ = (a_qq − a_pp) / (2 a_pq) */
                double th = (aqq - app) / (2 * apq);
                double t = (th >= 0 ? 1.0 : -1.0) / (fabs(th) + sqrt(th * th + 1));
                double c = 1 / sqrt(t * t + 1), s = t * c;
                for (int64_t i = 0; i < k; i++) { /* columns: G J */
                    double gp = g[i * k + p], gq = g[i * k + q];
                    g[i * k + p] = c * gp - s * gq;
                    g[i * k + q] = s * gp + c * gq;
                }
                for (int64_t i = 0; i < k; i++) { /* rows: Jᵀ (G J) */
                    double gp = g[p * k + i], gq = g[q * k + i];
                    g[p * k + i] = c * gp - s * gq;
                    g[q * k + i] = s * gp + c * gq;
                }
                g[p * k + q] = g[q * k + p] = 0; /* what the rotation makes it, without rounding */
            }
        if (!rotations) return;
    }
}

int tg_spectrum_svals(const float *a, int64_t r, int64_t c, double *sv) {
    int64_t k = r < c ? r : c, len = r < c ? c : r;
    if (k <= 0) return 0;
    double *g = malloc((size_t)(k * k) * sizeof *g);
    if (!g) return -1;
    /* rows of a when r <= c (G = a aᵀ), else its columns (G = aᵀ a): vector i, element l */
    int64_t vs = r <= c ? c : 1, es = r <= c ? 1 : c;
    for (int64_t i = 0; i < k; i++)
        for (int64_t j = 0; j <= i; j++) {
            double sum = 0;
            for (int64_t l = 0; l < len; l++)
                sum += (double)a[i * vs + l * es] * (double)a[j * vs + l * es];
            g[i * k + j] = g[j * k + i] = sum;
        }
    jacobi(g, k);
    for (int64_t i = 0; i < k; i++) {
        double e = g[i * k + i];
        sv[i] = e > 0 ? sqrt(e) : 0; /* a rounding below zero is a zero singular value */
    }
    free(g);
    qsort(sv, (size_t)k, sizeof *sv, cmp_desc);
    return 0;
}

int64_t tg_spectrum_rank(const double *sv, int64_t k, int64_t r, int64_t c) {
    if (k <= 0 || !(sv[0] > 0)) return 0;
    double tol = sv[0] * (double)(r > c ? r : c) * 0x1p-23;
    int64_t rank = 0;
    while (rank < k && sv[rank] > tol)
        rank++;
    return rank;
}

double tg_spectrum_erank(const double *sv, int64_t k) {
    double sum = 0, h = 0;
    for (int64_t i = 0; i < k; i++)
        sum += sv[i];
    if (!(sum > 0)) return 0;
    for (int64_t i = 0; i < k; i++) {
        double p = sv[i] / sum;
        if (p > 0) h -= p * log(p);
    }
    return exp(h);
}
