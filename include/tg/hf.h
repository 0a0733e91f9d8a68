/* tgraph — Hugging Face models in and out (docs/model.md "Imported models").
 *
 * A Hugging Face directory holds config.json, model.safetensors and tokenizer.json (and, for a
 * sentence-transformers model, modules.json and 1_Pooling/config.json). BERT (BertModel,
 * BertForMaskedLM) becomes an encoder (arch mlm) and GPT-2 (GPT2LMHeadModel) a language model
 * (arch lm), each with its tokenizer; the export writes such a directory back. */
#ifndef TG_HF_H
#define TG_HF_H

#include "tg/export.h"

#include "tg/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The model of directory dir on backend b (*out owned by the caller). Errors name the file and
 * the cause: a file missing, an architecture or tokenizer type not supported, a tensor missing
 * or of the wrong shape or dtype (F16, BF16 and F64 are converted to F32), a config that
 * contradicts the weights or the tokenizer. */
TG_API tg_status tg_hf_import(const char *dir, tg_backend *b, tg_model **out);
/* Write m (arch mlm from BERT's layout, or arch lm from GPT-2's) as a directory transformers
 * loads: config.json, model.safetensors (F32, Hugging Face names) and tokenizer.json when the
 * model has a tokenizer. dir is created if absent; files are written whole or not at all. */
TG_API tg_status tg_hf_export(const tg_model *m, const char *dir);

#ifdef __cplusplus
}
#endif
#endif
