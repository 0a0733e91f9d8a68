/* tgraph — attention kinds written outside the library. A program registers a kind (its name,
 * its parameters and its forward, written with the ops and tg/layers.h) and sets
 * tg_model_config.attention to the id it gets: every attention of every family (encoder self,
 * decoder self, cross) then uses it, and so do tg_model_new, tg_model_logits / loss / score,
 * training, checkpoints (which name the kind: load them in a program that registered it) and
 * decoding, cached or not (docs/extending.md). */
#ifndef TG_ATTN_KINDS_H
#define TG_ATTN_KINDS_H

#include "tg/export.h"

#include <stdbool.h>
#include <stdint.h>

#include "tg/layers.h"
#include "tg/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a kind is told of the model it is part of. */
typedef struct tg_attn_dims {
    int64_t d_model, heads, head_dim; /* head_dim = d_model / heads */
    float dropout;                    /* attention dropout p (tg_dropout is the identity in
                                       * inference mode) */
} tg_attn_dims;

typedef struct tg_attn_kind_def {
    const char *name; /* 1 to 31 characters of [a-z0-9_], no built-in kind's name (copied) */
    /* Optional: TG_OK when the model's dims fit the kind; else an error (tg_error_set) that
     * tg_model_config_check, and so tg_model_new, return. */
    tg_status (*check)(const tg_attn_dims *dims, void *user);
    /* The parameters of one attention sub-layer, each named prefix + "." + something. */
    tg_status (*init)(tg_params *p, const char *prefix, const tg_attn_dims *dims, void *user);
    /* The sub-layer: queries xq [B,n,d] over keys/values xkv [B,m,d]; mask NULL or broadcastable
     * to [B,1,n,m] with 1 = masked (padding, and causal in a decoder); self: self-attention, the
     * n queries being the last n of the m positions of xkv (a cached decoding step: n = 1, no
     * mask). Returns [B,n,d] (checked), or NULL after marking the graph. */
    tg_tensor *(*forward)(tg_graph *g, tg_store *s, const char *prefix, const tg_attn_dims *dims, tg_tensor *xq,
                          tg_tensor *xkv, tg_tensor *mask, bool self, void *user);
    void *user; /* passed to the callbacks (borrowed) */
} tg_attn_kind_def;

/* Register a kind for the life of the process; its id (a tg_attn_kind past the built-in ones)
 * in *out. Errors: a NULL callback (init or forward), a bad name, a name registered before or
 * a built-in's, more than 32 kinds. Thread-safe; register before building models with it. */
TG_API tg_status tg_attn_kind_register(const tg_attn_kind_def *def, tg_attn_kind *out);
/* The definition of a registered kind (NULL for a built-in or unknown id). */
TG_API const tg_attn_kind_def *tg_attn_kind_def_get(tg_attn_kind k);

#ifdef __cplusplus
}
#endif
#endif
