/* Edit-distance metrics (docs/model.md §3): word-level Levenshtein distance, corpus WER, and the
 * G2P word error rate / phoneme error rate with several reference pronunciations. */
#include "tg/metrics.h"
#include "train/metrics-impl.h"

#include <stdlib.h>
#include <string.h>

static int tok_eq(const tg__text_tok *x, const tg__text_tok *y) {
    return x->len == y->len && memcmp(x->p, y->p, x->len) == 0;
}

tg_status tg__metric_levenshtein(const tg__text_toks *a, const tg__text_toks *b, int64_t **row,
                                 size_t *rowcap, int64_t *dist) {
    /* Wagner–Fischer with one row: row[j] = D(i, j), the distance between the first i words
     * of a and the first j words of b;
     * D(i, j) = min(D(i-1, j) + 1, D(i, j-1) + 1, D(i-1, j-1) + [a_i != b_j]). */
    size_t nb = b->n;
    if (nb + 1 > *rowcap) {
        int64_t *r = realloc(*row, (nb + 1) * sizeof *r);
        if (!r) return tg_error_set(TG_ERR_NOMEM, "out of memory (%zu words)", nb + 1);
        *row = r;
        *rowcap = nb + 1;
    }
    int64_t *d = *row;
    for (size_t j = 0; j <= nb; j++)
        d[j] = (int64_t)j;
    for (size_t i = 1; i <= a->n; i++) {
        int64_t diag = d[0]; /* D(i-1, j-1) */
        d[0] = (int64_t)i;
        for (size_t j = 1; j <= nb; j++) {
            int64_t up = d[j]; /* D(i-1, j) */
            int64_t best = diag + (tok_eq(&a->v[i - 1], &b->v[j - 1]) ? 0 : 1);
            if (up + 1 < best) best = up + 1;
            if (d[j - 1] + 1 < best) best = d[j - 1] + 1;
            d[j] = best;
            diag = up;
        }
    }
    *dist = d[nb];
    return TG_OK;
}

/* Split two valid UTF-8 strings and take their word-level distance. */
static tg_status distance(const char *hyp, const char *ref, tg__text_toks *ht, tg__text_toks *rt,
                          int64_t **row, size_t *rowcap, int64_t *dist) {
    tg_status st = tg__text_split(hyp, strlen(hyp), ht);
    if (st == TG_OK) st = tg__text_split(ref, strlen(ref), rt);
    if (st == TG_OK) st = tg__metric_levenshtein(ht, rt, row, rowcap, dist);
    return st;
}

tg_status tg_metric_edit_distance(const char *hyp, const char *ref, int64_t *dist) {
    static const char fn[] = "tg_metric_edit_distance";
    if (!hyp || !ref || !dist)
        return tg_error_set(TG_ERR_INVALID, "%s: %s is NULL", fn,
                            !hyp   ? "hyp"
                            : !ref ? "ref"
                                   : "dist");
    tg_status st = tg__text_utf8_check(fn, "hyp", 0, hyp);
    if (st == TG_OK) st = tg__text_utf8_check(fn, "ref", 0, ref);
    if (st != TG_OK) return st;
    tg__text_toks ht = {0}, rt = {0};
    int64_t *row = NULL;
    size_t cap = 0;
    st = distance(hyp, ref, &ht, &rt, &row, &cap, dist);
    tg__text_toks_free(&ht);
    tg__text_toks_free(&rt);
    free(row);
    return st == TG_OK ? st : tg_error_prefix(st, "%s", fn);
}

tg_status tg_metric_wer(const char *const *hyps, const char *const *refs, size_t n,
                        tg_metric_wer_result *out) {
    static const char fn[] = "tg_metric_wer";
    tg_status st = tg__text_check_corpus(fn, hyps, refs, 1, n, out);
    if (st != TG_OK) return st;
    tg__text_toks ht = {0}, rt = {0};
    int64_t *row = NULL;
    size_t cap = 0, i = 0;
    int64_t errors = 0, words = 0;
    for (; st == TG_OK && i < n; i++) {
        int64_t d = 0;
        st = distance(hyps[i], refs[i], &ht, &rt, &row, &cap, &d);
        errors += d;
        words += (int64_t)rt.n;
    }
    tg__text_toks_free(&ht);
    tg__text_toks_free(&rt);
    free(row);
    if (st != TG_OK) return tg_error_prefix(st, "%s: sentence %zu", fn, i - 1);
    if (words == 0)
        return tg_error_set(TG_ERR_INVALID,
                            "%s: the %zu references hold no words, WER is undefined", fn, n);
    out->errors = errors;
    out->ref_words = words;
    out->wer = (double)errors / (double)words;
    return TG_OK;
}

/* Argument checks of tg_metric_g2p beyond tg__text_check_corpus: the reference lists. */
static tg_status check_g2p_refs(const char *fn, const char *const *const *refs,
                                const size_t *n_refs, size_t n) {
    if (!refs) return tg_error_set(TG_ERR_INVALID, "%s: refs is NULL", fn);
    if (!n_refs) return tg_error_set(TG_ERR_INVALID, "%s: n_refs is NULL", fn);
    for (size_t i = 0; i < n; i++) {
        if (n_refs[i] == 0)
            return tg_error_set(TG_ERR_INVALID, "%s: word %zu has no reference (n_refs[%zu] = 0)",
                                fn, i, i);
        if (!refs[i]) return tg_error_set(TG_ERR_INVALID, "%s: refs[%zu] is NULL", fn, i);
        for (size_t j = 0; j < n_refs[i]; j++) {
            if (!refs[i][j])
                return tg_error_set(TG_ERR_INVALID, "%s: refs[%zu][%zu] is NULL", fn, i, j);
            tg_status st = tg__text_utf8_check(fn, "refs", i, refs[i][j]);
            if (st != TG_OK) return st;
        }
    }
    return TG_OK;
}

tg_status tg_metric_g2p(const char *const *hyps, const char *const *const *refs,
                        const size_t *n_refs, size_t n, tg_metric_g2p_result *out) {
    static const char fn[] = "tg_metric_g2p";
    tg_status st = tg__text_check_corpus(fn, hyps, NULL, 0, n, out);
    if (st == TG_OK) st = check_g2p_refs(fn, refs, n_refs, n);
    if (st != TG_OK) return st;
    tg__text_toks ht = {0}, rt = {0};
    int64_t *row = NULL;
    size_t cap = 0, i = 0;
    int64_t wrong = 0, errors = 0, phones = 0;
    for (; st == TG_OK && i < n; i++) {
        st = tg__text_split(hyps[i], strlen(hyps[i]), &ht);
        /* The closest reference: smallest distance, the first listed on ties. */
        int64_t best = -1, best_len = 0;
        for (size_t j = 0; st == TG_OK && j < n_refs[i]; j++) {
            int64_t d = 0;
            st = tg__text_split(refs[i][j], strlen(refs[i][j]), &rt);
            if (st == TG_OK) st = tg__metric_levenshtein(&ht, &rt, &row, &cap, &d);
            if (st == TG_OK && (best < 0 || d < best)) {
                best = d;
                best_len = (int64_t)rt.n;
            }
        }
        if (st != TG_OK) break;
        wrong += best > 0; /* distance 0 <=> same phoneme sequence as some reference */
        errors += best;
        phones += best_len;
    }
    tg__text_toks_free(&ht);
    tg__text_toks_free(&rt);
    free(row);
    if (st != TG_OK) return tg_error_prefix(st, "%s: word %zu", fn, i);
    if (phones == 0)
        return tg_error_set(TG_ERR_INVALID,
                            "%s: the closest references of the %zu words hold no phonemes, PER "
                            "is undefined",
                            fn, n);
    out->words = (int64_t)n;
    out->words_wrong = wrong;
    out->phone_errors = errors;
    out->ref_phones = phones;
    out->wer = (double)wrong / (double)n;
    out->per = (double)errors / (double)phones;
    return TG_OK;
}
