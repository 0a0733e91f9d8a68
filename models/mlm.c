/* The encoder-only masked language model family (arch mlm, BERT style): the masking rule,
 * batches whose targets are the chosen positions only, and masked-token accuracy. The model is
 * the encoder stack of models/transformer.c with the output tied to the embedding
 * (tg_model_logits), so loss, training, evaluation and scoring are the shared code. */
#include <stdlib.h>
#include <string.h>

#include "models/model-impl.h"

tg_status tg_mlm_mask(const tg_vocab *v, const int32_t *ids, int64_t n, double p, tg_rng *rng, int32_t *input,
                      int32_t *target) {
    if (!v || (n > 0 && (!ids || !input || !target)) || !rng || n < 0)
        return tg_error_set(TG_ERR_INVALID, "tg_mlm_mask: NULL argument");
    if (!(p > 0.0 && p <= 1.0)) return tg_error_set(TG_ERR_INVALID, "tg_mlm_mask: probability %g outside (0, 1]", p);
    int32_t mask = tg_vocab_id(v, "<mask>"), V = (int32_t)tg_vocab_size(v);
    if (mask == TG_UNK) return tg_error_set(TG_ERR_INVALID, "tg_mlm_mask: the vocabulary has no <mask> token");
    int32_t special[5];
    int64_t ns = tg__mlm_classic_specials(mask, special);
    tg__mlm_mask_ids(mask, V, special, ns, ids, n, p, rng, input, target);
    return TG_OK;
}

int64_t tg__mlm_classic_specials(int32_t mask, int32_t special[5]) {
    for (int32_t i = 0; i < 4; i++) special[i] = i; /* <pad> <unk> <s> </s> */
    special[4] = mask;
    return mask >= 4 ? 5 : 4;
}

/* is id one of special[0..n) (ascending)? */
static bool is_special(int32_t id, const int32_t *special, int64_t n) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = (lo + hi) / 2;
        if (special[mid] < id) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && special[lo] == id;
}

void tg__mlm_mask_ids(int32_t mask, int32_t V, const int32_t *special, int64_t nspecial, const int32_t *ids, int64_t n,
                      double p, tg_rng *rng, int32_t *input, int32_t *target) {
    int64_t eligible = 0, chosen = 0;
    for (int64_t i = 0; i < n; i++) {
        bool ok = !is_special(ids[i], special, nspecial);
        eligible += ok;
        bool pick = ok && tg_rng_uniform(rng) < p;
        chosen += pick;
        input[i] = ids[i];
        target[i] = pick ? ids[i] : TG_PAD;
    }
    if (eligible > 0 && chosen == 0) { /* every sequence teaches something: one at random */
        int64_t k = (int64_t)tg_rng_below(rng, (uint64_t)eligible);
        for (int64_t i = 0; i < n; i++)
            if (!is_special(ids[i], special, nspecial) && k-- == 0) target[i] = ids[i];
    }
    for (int64_t i = 0; i < n; i++) {
        if (target[i] == TG_PAD) continue;
        double r = tg_rng_uniform(rng);
        if (r < 0.8) input[i] = mask; /* 80 %: <mask> */
        else if (r < 0.9) {           /* 10 %: a random ordinary token: the k-th id that is no special */
            int32_t id = (int32_t)tg_rng_below(rng, (uint64_t)(V - nspecial));
            for (int64_t s = 0; s < nspecial && special[s] <= id; s++) id++;
            input[i] = id;
        }
    } /* 10 %: unchanged */
}

tg_status tg_batch_build_mlm(tg_batch *b, int64_t n, const int32_t *const *input, const int32_t *const *target,
                             const int64_t *len) {
    return tg__batch_build_mlm_eos(b, n, input, target, len, TG_EOS);
}

tg_status tg__batch_build_mlm_eos(tg_batch *b, int64_t n, const int32_t *const *input, const int32_t *const *target,
                                  const int64_t *len, int32_t eos) {
    if (!target) return tg_error_set(TG_ERR_INVALID, "tg_batch_build_mlm: no targets");
    tg_status st = tg__batch_build_eos(b, n, input, len, target, len, eos);
    if (st) return st;
    /* the targets: chosen positions only (the end token appended to each sequence is no target) */
    b->tgt_tokens = 0;
    for (int64_t i = 0; i < n; i++) {
        int32_t *to = b->tgt_out + i * b->tgt_len;
        to[len[i]] = TG_PAD;
        for (int64_t j = 0; j < len[i]; j++) b->tgt_tokens += to[j] != TG_PAD;
    }
    return TG_OK;
}

tg_tensor *tg_model_classify(tg_model *m, tg_graph *g, const int32_t *ids, int64_t B, int64_t S) {
    if (!m || !g || !ids) return NULL;
    if (m->cfg.arch != TG_ARCH_MLM || m->cfg.classes < 1)
        return tg__graph_fail(
            g, TG_ERR_INVALID,
            "tg_model_classify: the model has no classification head (arch %s, classes %lld)",
            tg_model_arch_name(m->cfg.arch), (long long)m->cfg.classes);
    tg_tensor *h = tg_model_encode(m, g, ids, B, S, NULL); /* [B, S, d] */
    int64_t s2[2] = {B, m->cfg.d_model};
    return tg__layer_linear(m, g, "cls_head", tg_reshape(tg_slice(h, 1, 0, 1), 2, s2), true);
}

tg_status tg_model_mlm_accuracy(tg_model *m, const tg_batch *b, int64_t *correct, int64_t *total) {
    if (!m || !b || !correct || !total) return tg_error_set(TG_ERR_INVALID, "tg_model_mlm_accuracy: NULL argument");
    *correct = *total = 0;
    if (m->cfg.arch != TG_ARCH_MLM)
        return tg_error_set(TG_ERR_INVALID, "tg_model_mlm_accuracy: the model is not a masked language model (arch %s)",
                            tg_model_arch_name(m->cfg.arch));
    tg_graph *g = tg_graph_new();
    if (!g) return tg_error_set(TG_ERR_NOMEM, "tg_model_mlm_accuracy: out of memory");
    tg_graph_set_training(g, false);
    tg_graph_set_grad_enabled(g, false);
    int64_t V = m->cfg.tgt_vocab, n = b->size * b->tgt_len;
    tg_tensor *logits = tg_keep(tg_model_logits(m, g, b));
    float *l = malloc((size_t)(n * V) * sizeof *l);
    tg_status st = l ? TG_OK : tg_error_set(TG_ERR_NOMEM, "tg_model_mlm_accuracy: out of memory");
    if (st == TG_OK && !logits) {
        const char *msg;
        tg_status gs = tg_graph_status(g, &msg);
        st = gs ? tg_error_set(gs, "%s", msg) : tg_error_prefix(TG_ERR_INVALID, "tg_model_mlm_accuracy");
    }
    if (st == TG_OK) st = tg_graph_run(g, m->backend);
    if (st == TG_OK) st = tg_tensor_read(logits, l, (size_t)(n * V) * sizeof *l);
    if (st == TG_OK) st = tg__model_check_finite(g, m->backend, l, n * V, 1, "tg_model_mlm_accuracy: the logits");
    for (int64_t i = 0; st == TG_OK && i < n; i++) {
        if (b->tgt_out[i] == TG_PAD) continue;
        ++*total;
        *correct += tg_argmax(l + i * V, V) == b->tgt_out[i];
    }
    free(l);
    tg_graph_free(g);
    return st;
}

tg_status tg_model_mlm_probs(tg_model *m, const int32_t *ids, int64_t n, float *probs) {
    if (!m || !ids || !probs || n < 1) return tg_error_set(TG_ERR_INVALID, "tg_model_mlm_probs: NULL argument or empty sequence");
    if (m->cfg.arch != TG_ARCH_MLM)
        return tg_error_set(TG_ERR_INVALID, "tg_model_mlm_probs: the model is not a masked language model (arch %s)",
                            tg_model_arch_name(m->cfg.arch));
    /* the sequence as a batch of one (src = ids + </s>, or an imported model's ids as they are:
     * its last, [SEP], appended as the batch's end); the targets only give the logits' shape */
    tg_batch b;
    const int32_t *seq[1] = {ids};
    tg_tok_kind k = m->tok ? tg_tokenizer_kind(m->tok) : TG_TOK_WORDS;
    bool own = k == TG_TOK_WORDPIECE || k == TG_TOK_BPE_BYTES;
    int64_t body = own ? n - 1 : n;
    if (own && (ids[n - 1] < 0 || ids[n - 1] >= m->cfg.tgt_vocab))
        return tg_error_set(TG_ERR_INVALID, "tg_model_mlm_probs: id %d outside the vocabulary", ids[n - 1]);
    tg_status st = tg__batch_build_mlm_eos(&b, 1, seq, seq, &body, own ? ids[n - 1] : TG_EOS);
    if (st) return st;
    tg_graph *g = tg_graph_new();
    if (!g) {
        tg_batch_free(&b);
        return tg_error_set(TG_ERR_NOMEM, "tg_model_mlm_probs: out of memory");
    }
    tg_graph_set_training(g, false);
    tg_graph_set_grad_enabled(g, false);
    int64_t V = m->cfg.tgt_vocab, S = b.src_len;
    tg_tensor *p = tg_keep(tg_softmax(tg_model_logits(m, g, &b))); /* [S, V], the last row </s>'s */
    float *all = malloc((size_t)(S * V) * sizeof *all);
    const char *msg;
    st = tg_graph_status(g, &msg);
    if (st) tg_error_set(st, "tg_model_mlm_probs: %s", msg);
    else if (!all) st = tg_error_set(TG_ERR_NOMEM, "tg_model_mlm_probs: out of memory");
    if (st == TG_OK) st = tg_graph_run(g, m->backend);
    if (st == TG_OK) st = tg_tensor_read(p, all, (size_t)(S * V) * sizeof *all);
    if (st == TG_OK) memcpy(probs, all, (size_t)(n * V) * sizeof *probs);
    free(all);
    tg_graph_free(g);
    tg_batch_free(&b);
    return st;
}

tg_status tg_model_classify_accuracy(tg_model *m, const tg_batch *b, int64_t *correct, int64_t *total) {
    if (!m || !b || !correct || !total || !b->classify)
        return tg_error_set(TG_ERR_INVALID, "tg_model_classify_accuracy: NULL argument or not a classification batch");
    *correct = *total = 0;
    tg_graph *g = tg_graph_new();
    if (!g) return tg_error_set(TG_ERR_NOMEM, "tg_model_classify_accuracy: out of memory");
    tg_graph_set_training(g, false);
    tg_graph_set_grad_enabled(g, false);
    int64_t K = m->cfg.classes, B = b->size;
    tg_tensor *logits = tg_keep(tg_model_classify(m, g, b->src, B, b->src_len));
    float *l = malloc((size_t)(B * (K > 0 ? K : 1)) * sizeof *l);
    const char *msg;
    tg_status st = tg_graph_status(g, &msg);
    if (st) tg_error_set(st, "tg_model_classify_accuracy: %s", msg);
    else if (!l) st = tg_error_set(TG_ERR_NOMEM, "tg_model_classify_accuracy: out of memory");
    if (st == TG_OK) st = tg_graph_run(g, m->backend);
    if (st == TG_OK) st = tg_tensor_read(logits, l, (size_t)(B * K) * sizeof *l);
    for (int64_t i = 0; st == TG_OK && i < B; i++) {
        ++*total;
        *correct += tg_argmax(l + i * K, K) == b->tgt_out[i];
    }
    free(l);
    tg_graph_free(g);
    return st;
}

tg_status tg_model_with_classes(const tg_model *m, int64_t classes, uint64_t seed, tg_model **out) {
    if (!m || !out || classes < 1) return tg_error_set(TG_ERR_INVALID, "tg_model_with_classes: NULL argument or classes < 1");
    *out = NULL;
    if (m->cfg.arch != TG_ARCH_MLM)
        return tg_error_set(TG_ERR_INVALID, "a classification head goes on an encoder (arch mlm), not arch %s",
                            tg_model_arch_name(m->cfg.arch));
    if (m->cfg.classes && m->cfg.classes != classes)
        return tg_error_set(TG_ERR_INVALID, "the model's classification head has %lld classes, the data %lld",
                            (long long)m->cfg.classes, (long long)classes);
    tg_model_config c = m->cfg;
    c.classes = classes;
    tg_vocab *v = NULL;
    tg_status st = tg_vocab_new_empty(&v);
    for (int32_t i = 0; st == TG_OK && i < tg_vocab_size(m->src); i++) st = tg_vocab_add(v, tg_vocab_token(m->src, i), NULL);
    tg_model *n = NULL;
    if (st == TG_OK) st = tg_model_new(&c, v, v, m->backend, seed, &n);
    else tg_vocab_free(v);
    float *buf = NULL;
    for (int64_t i = 0; st == TG_OK && i < tg_store_count(n->store); i++) { /* every tensor m has */
        int64_t j = tg_store_find(m->store, tg_store_name(n->store, i)), k = tg_store_numel(n->store, i);
        if (j < 0) continue; /* the new head */
        float *p = realloc(buf, (size_t)k * sizeof *p);
        if (!p) st = tg_error_set(TG_ERR_NOMEM, "tg_model_with_classes: out of memory");
        else buf = p;
        if (st == TG_OK) st = tg_store_read(m->store, j, buf, k);
        if (st == TG_OK) st = tg_store_write(n->store, i, buf, k);
    }
    free(buf);
    char *json = NULL;
    if (st == TG_OK && m->tok) {
        tg_tokenizer *t = NULL;
        st = tg_tokenizer_to_json(m->tok, &json);
        if (st == TG_OK) st = tg_tokenizer_from_json(json, "tokenizer", n->src, &t);
        if (st == TG_OK) st = tg_model_set_tokenizer(n, t);
    }
    free(json);
    if (st) {
        tg_model_free(n);
        return st;
    }
    *out = n;
    return TG_OK;
}
