/* The named parameters of the ops: one struct per op that has parameters, all in one union
 * stored in every node (tg_tensor.p). Each op's family file (core/ops/) sets them in its
 * builder; gradient rules and backend kernels read them by name, never by position. */
#ifndef TG_OPS_PARAMS_H
#define TG_OPS_PARAMS_H

#include <stdbool.h>
#include <stdint.h>

#include "tg/ops.h"
#include "tg/tensor.h"

typedef union tg__op_params {
    /* ---- layout.c ---- */
    struct { int perm[TG_MAX_DIMS]; } permute;   /* output dim i is input dim perm[i] */
    struct { int axis; int64_t start; } slice;   /* elements [start, start + len) of axis */
    struct { int axis; } concat;
    struct { int axis; int64_t before, after; } pad; /* zeros added along axis */
    /* ---- elementwise.c ---- */
    struct { float value; } fill;
    struct { float mul, add; } scale;            /* y = x * mul + add */
    /* ---- reduce.c: sum, max and max_back (max_back keeps its max's axis) ---- */
    struct { int axis; bool keepdim; } reduce;
    /* ---- rows.c: layer_norm and layer_norm_back ---- */
    struct { float eps; } layer_norm;
    /* ---- matmul.c ---- */
    struct { bool trans_a, trans_b; } matmul;
    /* ---- nn.c ---- */
    struct { float value; } masked_fill;          /* where(mask != 0, value, x) */
    /* mask word of element e: Philox at counter (e/4, stream), key (seed_lo, seed_hi) */
    struct { float p; uint32_t stream, seed_lo, seed_hi; } dropout;
    /* cross_entropy and cross_entropy_back; with_nll: a second column, the loss unsmoothed */
    struct {
        float smoothing;
        int32_t ignore_index;
        tg_reduction reduction;
        bool with_nll;
    } cross_entropy;
    /* ---- band.c: band_scores, band_mix, band_mix_t (fill: band_scores only) ---- */
    struct { int64_t r; float fill; } band;      /* window i-r .. i+r */
} tg__op_params;

#endif
