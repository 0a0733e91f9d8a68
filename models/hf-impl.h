/* The name map between the zoo's parameters and Hugging Face's (models/hf_names.c), shared by
 * the import (models/import_hf.c) and the export (models/export_hf.c). */
#ifndef TG_HF_IMPL_H
#define TG_HF_IMPL_H

#include <stdbool.h>

#include "tg/error.h"
#include "tg/safetensors.h"

typedef enum tg_hf_family { TG_HF_BERT, TG_HF_GPT2 } tg_hf_family;

/* Where a parameter lives in a Hugging Face file: the tensor's name (alt: an older spelling,
 * BERT's LayerNorm gamma / beta, or ""), its shape there, and for GPT-2's Conv1D weights
 * (stored [in, out]) transpose with the first column col0 of a block (c_attn holds Q, K, V
 * side by side; a bias takes [col0, col0 + n) of a vector). */
typedef struct tg_hf_src {
    char name[200], alt[200];
    int ndim;
    int64_t shape[2];
    bool transpose;
    int64_t col0;
} tg_hf_src;

/* The source of parameter `name` (shape ndim/shape in the zoo) under the name prefix
 * ("bert.", "transformer." or ""); false when the parameter has no Hugging Face counterpart. */
bool tg__hf_source(tg_hf_family fam, const char *prefix, const char *name, int ndim, const int64_t *shape,
                   tg_hf_src *out);
/* The name prefix of f's tensors: "bert." (BertForMaskedLM), "transformer." (GPT2LMHeadModel)
 * or "" (BertModel, GPT2Model). */
const char *tg__hf_prefix(tg_hf_family fam, const tg_st_file *f);
/* A whole file, NUL-terminated, into *out (malloc'ed). */
tg_status tg__hf_read(const char *path, char **out, size_t *len);

#endif
