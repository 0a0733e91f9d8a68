/* `tg train --arch lm` data: files -> one token stream -> blocks (tools/train_stream.h). */
#include <stdlib.h>
#include <string.h>

#include "tg/tokenizer.h"
#include "tools/train_stream.h"

void tg_lm_texts_free(tg_lm_texts *t) {
    if (!t) return;
    for (int i = 0; i < t->n; i++) tg_lines_free(&t->files[i]);
    free(t->files);
    memset(t, 0, sizeof *t);
}

tg_status tg_lm_texts_read(const char *list, tg_lm_texts *out) {
    memset(out, 0, sizeof *out);
    if (!list || !*list) return tg_error_set(TG_ERR_INVALID, "no training text");
    int n = 1;
    for (const char *p = list; *p; p++) n += *p == ',';
    char *copy = strdup(list);
    out->files = calloc((size_t)n, sizeof *out->files);
    if (!copy || !out->files) {
        free(copy);
        free(out->files);
        out->files = NULL;
        return tg_error_set(TG_ERR_NOMEM, "out of memory");
    }
    tg_status st = TG_OK;
    char *save = NULL;
    for (char *f = strtok_r(copy, ",", &save); st == TG_OK && f; f = strtok_r(NULL, ",", &save)) {
        st = tg_lines_read(f, true, &out->files[out->n]);
        if (st == TG_OK) out->n++;
    }
    free(copy);
    if (st == TG_OK && out->n == 0) st = tg_error_set(TG_ERR_INVALID, "no training text in '%s'", list);
    if (st) tg_lm_texts_free(out);
    return st;
}

tg_status tg_lm_vocab(const tg_lm_texts *t, const tg_text_options *to, const char *vocab_file, int64_t min_count,
                      int64_t max_size, tg_vocab **out) {
    *out = NULL;
    tg_status st;
    if (vocab_file) {
        st = tg_vocab_read(vocab_file, out);
    } else {
        const tg_lines **texts = malloc((size_t)t->n * sizeof *texts);
        if (!texts) return tg_error_set(TG_ERR_NOMEM, "out of memory");
        for (int i = 0; i < t->n; i++) texts[i] = &t->files[i];
        st = tg_vocab_build(texts, t->n, to, min_count, max_size, out);
        free(texts);
    }
    if (st == TG_OK) st = tg_vocab_add(*out, TG_STREAM_NEWLINE, NULL);
    if (st) {
        tg_vocab_free(*out);
        *out = NULL;
    }
    return st;
}

static tg_status stream(const tg_lm_texts *t, const tg_vocab *v, const tg_stream_options *so, int32_t **ids,
                        int64_t *n) {
    const tg_lines **texts = malloc((size_t)t->n * sizeof *texts);
    if (!texts) return tg_error_set(TG_ERR_NOMEM, "out of memory");
    for (int i = 0; i < t->n; i++) texts[i] = &t->files[i];
    tg_status st = tg_stream_encode(texts, t->n, v, so, ids, n);
    free(texts);
    return st;
}

tg_status tg_lm_corpora(const tg_lm_texts *train, const tg_lm_texts *dev_texts, const tg_vocab *v,
                        const tg_stream_options *so, int64_t block, double holdout, tg_corpus **train_out,
                        tg_corpus **dev_out, tg_lm_data *info) {
    memset(info, 0, sizeof *info);
    *train_out = *dev_out = NULL;
    int32_t *ids = NULL, *dids = NULL;
    int64_t n = 0, dn = 0;
    tg_status st = stream(train, v, so, &ids, &n);
    /* every document ends with the end-of-text token: </s>, or an imported tokenizer's own */
    const tg_tokenizer *tk = so->text.tokenizer;
    bool own = tk && (tg_tokenizer_kind(tk) == TG_TOK_WORDPIECE || tg_tokenizer_kind(tk) == TG_TOK_BPE_BYTES);
    int32_t eos = own ? tg_tokenizer_special(tk, "eos") : TG_EOS;
    for (int64_t i = 0; st == TG_OK && i < n; i++) info->documents += ids[i] == eos;
    int64_t keep = n;
    if (st == TG_OK && !dev_texts && holdout > 0.0) {
        /* the tail, but never so much that training is left without a block of two ids */
        int64_t tail = (int64_t)((double)n * holdout);
        if (tail >= 2 && n - tail >= 2) {
            keep = n - tail;
            info->held_out = true;
        }
    }
    if (st == TG_OK && keep < 2)
        st = tg_error_set(TG_ERR_INVALID, "the training data ('%s') hold %lld tokens with <s> and </s>: a block needs 2",
                          train->n ? train->files[0].path : "", (long long)keep);
    if (st == TG_OK) st = tg_corpus_new_stream(ids, keep, block, train_out);
    if (st == TG_OK && info->held_out) st = tg_corpus_new_stream(ids + keep, n - keep, block, dev_out);
    if (st == TG_OK && dev_texts) st = stream(dev_texts, v, so, &dids, &dn);
    if (st == TG_OK && dev_texts && dn < 2)
        st = tg_error_set(TG_ERR_INVALID, "the dev data ('%s') hold %lld tokens with <s> and </s>: a block needs 2",
                          dev_texts->n ? dev_texts->files[0].path : "", (long long)dn);
    if (st == TG_OK && dev_texts) st = tg_corpus_new_stream(dids, dn, block, dev_out);
    info->tokens = keep;
    info->dev_tokens = info->held_out ? n - keep : dn;
    free(ids);
    free(dids);
    if (st) {
        tg_corpus_free(*train_out);
        tg_corpus_free(*dev_out);
        *train_out = *dev_out = NULL;
    }
    return st;
}
