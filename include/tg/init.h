/* tgraph — initialisers of store parameters. Values are drawn on the host from a tg_rng in
 * element order and written to the store, so a seed gives the same parameters on every
 * backend. Each call sets one parameter (by name) and returns a status. */
#ifndef TG_INIT_H
#define TG_INIT_H

#include "tg/export.h"

#include "tg/rng.h"
#include "tg/store.h"

#ifdef __cplusplus
extern "C" {
#endif

/* N(mean, std^2), std >= 0 (GPT-2: N(0, 0.02^2) for embeddings and matrices). */
TG_API tg_status tg_init_normal(tg_store *s, const char *name, double mean, double std, tg_rng *rng);
/* U[lo, hi). */
TG_API tg_status tg_init_uniform(tg_store *s, const char *name, double lo, double hi, tg_rng *rng);
/* Glorot & Bengio (2010): U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)). A matrix in
 * the PyTorch layout [out, in] has fan_out = out, fan_in = in (more dimensions: the trailing
 * ones multiply both, as PyTorch's receptive field); a vector has fan_in = fan_out = its
 * length. */
TG_API tg_status tg_init_xavier_uniform(tg_store *s, const char *name, double gain, tg_rng *rng);
/* N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out)). */
TG_API tg_status tg_init_xavier_normal(tg_store *s, const char *name, double gain, tg_rng *rng);
/* Every element = value (zeros for biases, ones for norm gains). */
TG_API tg_status tg_init_constant(tg_store *s, const char *name, float value);
/* Multiply the current values by factor: scaled initialisation, e.g. GPT-2's residual
 * projections by 1 / sqrt(2 * layers) after tg_init_normal. */
TG_API tg_status tg_init_scale(tg_store *s, const char *name, double factor);

#ifdef __cplusplus
}
#endif
#endif
