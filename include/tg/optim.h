/* tgraph — optimizers over a parameter store: SGD with momentum, Adam, AdamW. */
#ifndef TG_OPTIM_H
#define TG_OPTIM_H

#include "tg/export.h"

#include <stdint.h>

#include "tg/store.h"
#include "tg/update.h"

#ifdef __cplusplus
extern "C" {
#endif


typedef struct tg_optim tg_optim;

/* Defaults of docs/model.md: Adam, beta1 0.9, beta2 0.98, eps 1e-9, no weight decay. */
TG_API tg_optim_config tg_optim_defaults(tg_optim_kind kind);

/* An optimizer for every trainable parameter of s (borrowed; must outlive it). State (moments)
 * is allocated on the store's backend. Parameters added to s afterwards are not its: a step
 * leaves them as they are. */
TG_API tg_status tg_optim_new(tg_store *s, const tg_optim_config *cfg, tg_optim **out);
TG_API void tg_optim_free(tg_optim *o);
/* One update with learning rate lr from the gradients in the store (not zeroed here). */
TG_API tg_status tg_optim_step(tg_optim *o, float lr);
/* tg_optim_step, then the store's gradients zero, as after tg_store_zero_grad (also on an
 * error): the gradients the update reads are zeroed in its own pass over them, which saves
 * the separate pass of zeroing (the same weights and moments as step then zero_grad). */
TG_API tg_status tg_optim_step_zero_grad(tg_optim *o, float lr);
/* Number of steps taken. */
TG_API int64_t tg_optim_steps(const tg_optim *o);

/* ---- parameter groups ----
 * Every parameter starts in the default group: the configuration's weight decay and learning
 * rate scale 1. A group assignment gives the parameters whose names match a glob pattern
 * (fnmatch(3): "*.bias", "layers.*.norm?.weight") their own weight decay and a learning-rate
 * multiplier; a later assignment overrides an earlier one for the parameters it matches. */
/* Assign the parameters matching `pattern`: decay = weight decay (>= 0) of every kind (SGD and
 * Adam add it to the gradient, AdamW decays decoupled), lr_scale >= 0 multiplies the step's
 * learning rate. The number matched goes to *matched (may be NULL); matching none is not an
 * error. */
TG_API tg_status tg_optim_set_group(tg_optim *o, const char *pattern, float weight_decay, float lr_scale,
                             int64_t *matched);
/* The usual rule of GPT-2 / BERT training: no weight decay on parameters with fewer than two
 * dimensions (biases, layer-norm gains and biases); matrices and embeddings keep the
 * configuration's decay. Returns the number of parameters exempted in *matched (may be NULL). */
TG_API tg_status tg_optim_no_decay_on_vectors(tg_optim *o, int64_t *matched);
/* The weight decay and learning-rate scale in effect for parameter i. */
TG_API tg_status tg_optim_group_of(const tg_optim *o, int64_t i, float *weight_decay, float *lr_scale);

/* The optimizer state as host arrays, for checkpoints: moments of parameter i (n = numel);
 * `which` 0 = first moment / momentum, 1 = second moment. */
TG_API tg_status tg_optim_read_state(const tg_optim *o, int64_t i, int which, float *dst, int64_t n);
TG_API tg_status tg_optim_write_state(tg_optim *o, int64_t i, int which, const float *src, int64_t n);
TG_API void tg_optim_set_steps(tg_optim *o, int64_t steps);

#ifdef __cplusplus
}
#endif
#endif
