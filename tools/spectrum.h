/* Singular values of small matrices, and the two ranks `tg attention --stats` reports
 * (tools/spectrum.c). */
#ifndef TG_TOOLS_SPECTRUM_H
#define TG_TOOLS_SPECTRUM_H

#include <stdint.h>

/* The k = min(r, c) singular values of the r×c row-major float matrix a, descending, into
 * sv[0..k): the square roots of the eigenvalues of the smaller Gram matrix (a aᵀ or aᵀ a),
 * formed and diagonalised by cyclic Jacobi rotations in double. Squaring costs half the
 * digits: a singular value is found to about 1e-8·σ_max, finer than the float32 rounding
 * (~1.2e-7·σ_max) of the entries themselves. Returns 0, or -1 when out of memory (sv unset). */
int tg_spectrum_svals(const float *a, int64_t r, int64_t c, double *sv);

/* The numerical rank of an r×c float32 matrix with singular values sv[0..k) (descending):
 * how many exceed σ_max · max(r, c) · 2^-23, NumPy's matrix_rank default for float32 (2^-23
 * is float32's machine epsilon). 0 for the zero matrix. */
int64_t tg_spectrum_rank(const double *sv, int64_t k, int64_t r, int64_t c);

/* The effective rank of Roy & Vetterli (2007): exp(H(p)), H the Shannon entropy (nats) of the
 * normalised singular values p_i = σ_i / Σ_j σ_j. Between 1 and the rank (equal to the rank
 * when the non-zero σ are equal); 0 for the zero matrix. */
double tg_spectrum_erank(const double *sv, int64_t k);

#endif
