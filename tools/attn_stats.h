/* `tg attention --stats`: per attention sub-layer and head, over many inputs, how far the rank of
 * the logit matrices S falls below the bound its head width sets, with the attention entropy and
 * the logits' scale (tools/attn_stats.c). */
#ifndef TG_TOOLS_ATTN_STATS_H
#define TG_TOOLS_ATTN_STATS_H

#include <stdio.h>

#include "tg/model.h"

typedef struct tg_attn_stats tg_attn_stats;

/* An empty accumulator for a model of configuration c; NULL when out of memory. */
tg_attn_stats *tg_attn_stats_new(const tg_model_config *c);
void tg_attn_stats_free(tg_attn_stats *a);

/* Add one input's maps (tg_model_attention_logits, batch of one, no padding): per sub-layer
 * and head, the singular values of S and of the weights, and the attention entropy. The
 * sub-layers must be those of the first call, in the same order. */
tg_status tg_attn_stats_add(tg_attn_stats *a, const tg_attn_map *maps, int64_t count);

/* How many inputs were added. */
int64_t tg_attn_stats_inputs(const tg_attn_stats *a);

/* One CSV row per (sub-layer, head) with a header row (columns: docs/tool.md, tg attention). */
tg_status tg_attn_stats_write_csv(const tg_attn_stats *a, const char *path);

/* One line per sub-layer, its heads averaged. */
void tg_attn_stats_print(const tg_attn_stats *a, FILE *f);

#endif
