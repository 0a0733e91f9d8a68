/* Tokenizers: reading a Hugging Face tokenizer.json, the metadata form a checkpoint stores,
 * and encoding a line: special tokens matched verbatim in the raw text first (as HF's added
 * tokens), the kind's encoder on the pieces between them (models/tok_wordpiece.c,
 * models/tok_bpe.c, or words / characters here), truncation, then the post-processor's
 * bos + ids + eos. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/model-impl.h"
#include "models/tok-impl.h"
#include "tg/json.h"

static const char *const kind_names[] = {"words", "chars", "wordpiece", "bpe_bytes", "spm_bpe"};

const char *tg_tokenizer_kind_name(tg_tok_kind k) {
    return (int)k >= 0 && k <= TG_TOK_SPM_BPE ? kind_names[k] : "unknown";
}
tg_tok_kind tg_tokenizer_kind(const tg_tokenizer *t) { return t->kind; }
const tg_vocab *tg_tokenizer_vocab(const tg_tokenizer *t) { return t ? t->vocab : NULL; }
int64_t tg_tokenizer_max_length(const tg_tokenizer *t) { return t ? t->max_length : 0; }
void tg_tokenizer_set_max_length(tg_tokenizer *t, int64_t max_length) {
    if (t && max_length >= 0) t->max_length = max_length;
}
tg_vocab *tg_tokenizer_take_vocab(tg_tokenizer *t) {
    tg_vocab *v = t ? t->owned : NULL;
    if (t) t->owned = NULL;
    return v;
}

int32_t tg_tokenizer_special(const tg_tokenizer *t, const char *role) {
    if (!t || !role) return -1;
    return !strcmp(role, "pad") ? t->pad : !strcmp(role, "unk") ? t->unk : !strcmp(role, "bos") ? t->bos
         : !strcmp(role, "eos") ? t->eos : !strcmp(role, "mask") ? t->mask : -1;
}

static int by_id(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

tg_status tg_tokenizer_special_ids(const tg_tokenizer *t, int32_t **ids, int64_t *n) {
    if (!t || !ids || !n) return tg_error_set(TG_ERR_INVALID, "tg_tokenizer_special_ids: NULL argument");
    int32_t *r = malloc((size_t)(5 + t->nadded) * sizeof *r);
    if (!r) return tg_error_set(TG_ERR_NOMEM, "tg_tokenizer_special_ids: out of memory");
    const int32_t roles[5] = {t->pad, t->unk, t->bos, t->eos, t->mask};
    int64_t k = 0;
    for (int i = 0; i < 5; i++)
        if (roles[i] >= 0) r[k++] = roles[i];
    for (int64_t i = 0; i < t->nadded; i++) {
        int32_t id = tg_vocab_find(t->vocab, t->added[i]);
        if (id >= 0) r[k++] = id;
    }
    qsort(r, (size_t)k, sizeof *r, by_id);
    int64_t u = 0;
    for (int64_t i = 0; i < k; i++)
        if (u == 0 || r[i] != r[u - 1]) r[u++] = r[i];
    *ids = r;
    *n = u;
    return TG_OK;
}

void tg_tokenizer_free(tg_tokenizer *t) {
    if (!t) return;
    for (int64_t i = 0; i < t->nadded; i++) free(t->added[i]);
    free(t->added);
    for (int64_t i = 0; i < t->nmerges; i++) free(t->merges[i]);
    free(t->merges);
    free(t->table);
    tg__spm_free(t);
    tg_vocab_free(t->owned);
    free(t);
}

static tg_tokenizer *blank(tg_tok_kind kind) {
    tg_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->kind = kind;
    t->pad = t->unk = t->bos = t->eos = t->mask = -1;
    strcpy(t->prefix, "##");
    t->max_word_chars = 100;
    return t;
}

tg_status tg_tokenizer_new_simple(tg_tok_kind kind, const tg_vocab *v, tg_tokenizer **out) {
    if (!v || !out || (kind != TG_TOK_WORDS && kind != TG_TOK_CHARS))
        return tg_error_set(TG_ERR_INVALID, "tg_tokenizer_new_simple: NULL argument or a kind other than words, chars");
    *out = blank(kind);
    if (!*out) return tg_error_set(TG_ERR_NOMEM, "tg_tokenizer_new_simple: out of memory");
    (*out)->vocab = v;
    (*out)->pad = TG_PAD, (*out)->unk = TG_UNK, (*out)->bos = TG_BOS, (*out)->eos = TG_EOS;
    (*out)->mask = tg_vocab_find(v, "<mask>");
    return TG_OK;
}

tg_status tg_tokenizer_from_spm(const void *bytes, size_t len, const char *origin, tg_tokenizer **out) {
    if (!bytes || !out) return tg_error_set(TG_ERR_INVALID, "tg_tokenizer_from_spm: NULL argument");
    if (!origin) origin = "spm.model";
    tg_tokenizer *t = *out = blank(TG_TOK_SPM_BPE);
    if (!t) return tg_error_set(TG_ERR_NOMEM, "%s: out of memory", origin);
    t->pad = TG_PAD, t->unk = TG_UNK, t->bos = TG_BOS, t->eos = TG_EOS; /* the classic layout */
    tg_status st = tg__spm_load(t, bytes, len, origin);
    if (st) {
        tg_tokenizer_free(t);
        *out = NULL;
    }
    return st;
}

/* ---- reading ---- */

#define FAIL(code, ...) (st = tg_error_set(code, __VA_ARGS__))

static const char *jstr(const tg_json *o, const char *key) {
    const tg_json *x = tg_json_get(o, key);
    return tg_json_kind(x) == TG_JSON_STRING ? tg_json_string(x) : NULL;
}
static bool jbool(const tg_json *o, const char *key, bool dflt) {
    const tg_json *x = tg_json_get(o, key);
    return tg_json_kind(x) == TG_JSON_BOOL ? tg_json_bool(x) != 0 : dflt;
}

static tg_status add_added(tg_tokenizer *t, const char *s) {
    for (int64_t i = 0; i < t->nadded; i++)
        if (!strcmp(t->added[i], s)) return TG_OK;
    char **a = realloc(t->added, (size_t)(t->nadded + 1) * sizeof *a);
    if (!a) return tg_error_set(TG_ERR_NOMEM, "tokenizer: out of memory");
    t->added = a;
    if (!(a[t->nadded] = strdup(s))) return tg_error_set(TG_ERR_NOMEM, "tokenizer: out of memory");
    t->nadded++;
    return TG_OK;
}

static int32_t role_id(const tg_tokenizer *t, const char *tok) { return tok ? tg_vocab_find(t->vocab, tok) : -1; }

/* model.vocab ({token: id}) and added_tokens ([{id, content}]) into a dense vocabulary */
static tg_status hf_vocab(const tg_json *root, const char *origin, tg_tokenizer *t) {
    const tg_json *vo = tg_json_get(tg_json_get(root, "model"), "vocab"), *added = tg_json_get(root, "added_tokens");
    if (tg_json_kind(vo) != TG_JSON_OBJECT)
        return tg_error_set(TG_ERR_FORMAT, "%s: model.vocab is not an object of token ids", origin);
    size_t nv = tg_json_size(vo), na = tg_json_kind(added) == TG_JSON_ARRAY ? tg_json_size(added) : 0, n = nv + na;
    const char **tok = calloc(n ? n : 1, sizeof *tok);
    tg_status st = tok ? TG_OK : tg_error_set(TG_ERR_NOMEM, "%s: out of memory", origin);
    for (size_t i = 0; st == TG_OK && i < nv + na; i++) {
        int64_t id;
        const char *s;
        if (i < nv) {
            s = tg_json_key(vo, i);
            if (tg_json_int64(tg_json_at(vo, i), &id)) FAIL(TG_ERR_FORMAT, "%s: model.vocab['%s'] is not an integer id", origin, s);
        } else {
            const tg_json *a = tg_json_at(added, i - nv);
            s = jstr(a, "content");
            if (!s || tg_json_int64(tg_json_get(a, "id"), &id))
                FAIL(TG_ERR_FORMAT, "%s: added_tokens[%zu] lacks a content string or an integer id", origin, i - nv);
            else if (jbool(a, "special", false) || !jbool(a, "normalized", true))
                st = add_added(t, s); /* matched verbatim in the raw text */
        }
        if (st) break;
        if (id < 0 || (size_t)id >= n)
            FAIL(TG_ERR_FORMAT, "%s: token '%s' has id %lld, outside [0, %zu)", origin, s, (long long)id, n);
        else if (tok[id] && strcmp(tok[id], s))
            FAIL(TG_ERR_FORMAT, "%s: id %lld is both '%s' and '%s'", origin, (long long)id, tok[id], s);
        else tok[id] = s;
    }
    size_t size = 0;
    while (st == TG_OK && size < n && tok[size]) size++;
    for (size_t i = size; st == TG_OK && i < n; i++)
        if (tok[i]) FAIL(TG_ERR_FORMAT, "%s: the vocabulary has no token of id %zu, but one of id %zu ('%s')", origin, size, i, tok[i]);
    if (st == TG_OK && size < 5) FAIL(TG_ERR_FORMAT, "%s: a vocabulary of %zu tokens", origin, size);
    if (st == TG_OK) st = tg_vocab_new_empty(&t->owned);
    for (size_t i = 0; st == TG_OK && i < size; i++) {
        int32_t id;
        st = tg_vocab_add(t->owned, tok[i], &id);
        if (st) st = tg_error_prefix(st, "%s: token %zu", origin, i);
        else if ((size_t)id != i) FAIL(TG_ERR_FORMAT, "%s: token '%s' appears twice (ids %d and %zu)", origin, tok[i], id, i);
    }
    free(tok);
    t->vocab = t->owned;
    return st;
}

/* post_processor: TemplateProcessing [SpecialToken X] $A [SpecialToken Y] (BERT), BertProcessing,
 * ByteLevel or none (GPT-2: no special tokens) */
static tg_status hf_post(const tg_json *root, const char *origin, tg_tokenizer *t) {
    const tg_json *pp = tg_json_get(root, "post_processor");
    if (!pp || tg_json_kind(pp) == TG_JSON_NULL) return TG_OK;
    const char *type = jstr(pp, "type");
    tg_status st = TG_OK;
    if (type && !strcmp(type, "ByteLevel")) return TG_OK;
    if (type && !strcmp(type, "BertProcessing")) {
        const tg_json *cls = tg_json_get(pp, "cls"), *sep = tg_json_get(pp, "sep");
        t->bos = role_id(t, tg_json_string(tg_json_at(cls, 0)));
        t->eos = role_id(t, tg_json_string(tg_json_at(sep, 0)));
        t->add_bos = t->add_eos = true;
    } else if (type && !strcmp(type, "TemplateProcessing")) {
        const tg_json *single = tg_json_get(pp, "single");
        bool seen_a = false;
        for (size_t i = 0; st == TG_OK && i < tg_json_size(single); i++) {
            const tg_json *e = tg_json_at(single, i), *sp = tg_json_get(e, "SpecialToken");
            if (tg_json_get(e, "Sequence")) {
                seen_a = true;
                continue;
            }
            int32_t id = role_id(t, jstr(sp, "id"));
            if (!sp || id < 0 || (seen_a ? t->add_eos : t->add_bos))
                FAIL(TG_ERR_UNSUPPORTED, "%s: post_processor template entry %zu: only [special] $A [special] is supported", origin, i);
            else if (seen_a) t->eos = id, t->add_eos = true;
            else t->bos = id, t->add_bos = true;
        }
    } else {
        FAIL(TG_ERR_UNSUPPORTED, "%s: post_processor type '%s' is not supported (TemplateProcessing, BertProcessing, ByteLevel)",
             origin, type ? type : "(none)");
    }
    if (st == TG_OK && ((t->add_bos && t->bos < 0) || (t->add_eos && t->eos < 0)))
        FAIL(TG_ERR_FORMAT, "%s: post_processor names a special token the vocabulary lacks", origin);
    return st;
}

static tg_status hf_wordpiece(const tg_json *root, const char *origin, tg_tokenizer *t) {
    const tg_json *model = tg_json_get(root, "model"), *norm = tg_json_get(root, "normalizer"),
                  *pre = tg_json_get(root, "pre_tokenizer");
    tg_status st = TG_OK;
    const char *prefix = jstr(model, "continuing_subword_prefix");
    if (prefix && strlen(prefix) >= sizeof t->prefix) FAIL(TG_ERR_FORMAT, "%s: continuing_subword_prefix is too long", origin);
    else if (prefix) strcpy(t->prefix, prefix);
    const tg_json *mw = tg_json_get(model, "max_input_chars_per_word");
    if (st == TG_OK && mw && (tg_json_int64(mw, &t->max_word_chars) || t->max_word_chars < 1))
        FAIL(TG_ERR_FORMAT, "%s: model.max_input_chars_per_word is not a positive integer", origin);
    if (st == TG_OK && (t->unk = role_id(t, jstr(model, "unk_token"))) < 0)
        FAIL(TG_ERR_FORMAT, "%s: model.unk_token is absent or not in the vocabulary", origin);
    const char *nt = jstr(norm, "type"), *pt = jstr(pre, "type");
    if (st == TG_OK && norm && tg_json_kind(norm) != TG_JSON_NULL && (!nt || strcmp(nt, "BertNormalizer")))
        FAIL(TG_ERR_UNSUPPORTED, "%s: normalizer type '%s' is not supported with WordPiece (BertNormalizer)", origin,
             nt ? nt : "(none)");
    if (st == TG_OK && (!pt || strcmp(pt, "BertPreTokenizer")))
        FAIL(TG_ERR_UNSUPPORTED, "%s: pre_tokenizer type '%s' is not supported with WordPiece (BertPreTokenizer)", origin,
             pt ? pt : "(none)");
    if (st == TG_OK && nt) {
        t->clean_text = jbool(norm, "clean_text", true);
        t->chinese_chars = jbool(norm, "handle_chinese_chars", true);
        t->lowercase = jbool(norm, "lowercase", true);
        t->strip_accents = jbool(norm, "strip_accents", t->lowercase); /* null: as lowercase */
    }
    return st;
}

static tg_status hf_bpe(const tg_json *root, const char *origin, tg_tokenizer *t) {
    const tg_json *model = tg_json_get(root, "model"), *pre = tg_json_get(root, "pre_tokenizer"),
                  *merges = tg_json_get(model, "merges"), *norm = tg_json_get(root, "normalizer");
    tg_status st = TG_OK;
    const char *pt = jstr(pre, "type");
    if (!pt || strcmp(pt, "ByteLevel") || !jbool(pre, "use_regex", true))
        FAIL(TG_ERR_UNSUPPORTED, "%s: BPE with pre_tokenizer '%s' is not supported (byte-level BPE: ByteLevel with use_regex)",
             origin, pt ? pt : "(none)");
    else if (norm && tg_json_kind(norm) != TG_JSON_NULL)
        FAIL(TG_ERR_UNSUPPORTED, "%s: byte-level BPE with a normalizer (%s) is not supported", origin,
             jstr(norm, "type") ? jstr(norm, "type") : "?");
    else if ((jstr(model, "continuing_subword_prefix") && *jstr(model, "continuing_subword_prefix")) ||
             (jstr(model, "end_of_word_suffix") && *jstr(model, "end_of_word_suffix")) || jbool(model, "byte_fallback", false))
        FAIL(TG_ERR_UNSUPPORTED, "%s: BPE with a subword prefix, word suffix or byte fallback is not supported", origin);
    else if (tg_json_kind(merges) != TG_JSON_ARRAY)
        FAIL(TG_ERR_FORMAT, "%s: model.merges is not an array", origin);
    if (st) return st;
    t->add_prefix_space = jbool(pre, "add_prefix_space", false);
    t->unk = role_id(t, jstr(model, "unk_token"));
    size_t n = tg_json_size(merges);
    t->merges = calloc(n ? n : 1, sizeof *t->merges);
    if (!t->merges) return tg_error_set(TG_ERR_NOMEM, "%s: out of memory", origin);
    for (size_t i = 0; st == TG_OK && i < n; i++) {
        const tg_json *m = tg_json_at(merges, i);
        char buf[512];
        if (tg_json_kind(m) == TG_JSON_STRING) snprintf(buf, sizeof buf, "%s", tg_json_string(m));
        else if (tg_json_kind(m) == TG_JSON_ARRAY && tg_json_size(m) == 2 && tg_json_string(tg_json_at(m, 0)) &&
                 tg_json_string(tg_json_at(m, 1)))
            snprintf(buf, sizeof buf, "%s %s", tg_json_string(tg_json_at(m, 0)), tg_json_string(tg_json_at(m, 1)));
        else {
            FAIL(TG_ERR_FORMAT, "%s: model.merges[%zu] is not \"a b\" or [a, b]", origin, i);
            break;
        }
        if (!(t->merges[i] = strdup(buf))) FAIL(TG_ERR_NOMEM, "%s: out of memory", origin);
        t->nmerges = (int64_t)i + 1;
    }
    if (st == TG_OK) st = tg__bpe_prepare(t);
    if (st) st = tg_error_prefix(st, "%s", origin);
    return st;
}

tg_status tg_tokenizer_from_hf(const char *text, size_t len, const char *origin, tg_tokenizer **out) {
    if (!text || !out) return tg_error_set(TG_ERR_INVALID, "tg_tokenizer_from_hf: NULL argument");
    *out = NULL;
    if (!origin) origin = "tokenizer.json";
    tg_json *root = NULL;
    tg_status st = tg_json_parse(text, len, &root);
    if (st) return tg_error_prefix(st, "%s", origin);
    const char *type = jstr(tg_json_get(root, "model"), "type");
    tg_tokenizer *t = NULL;
    if (tg_json_kind(root) != TG_JSON_OBJECT || !tg_json_get(root, "model"))
        FAIL(TG_ERR_FORMAT, "%s: not a tokenizer.json (no 'model' object)", origin);
    else if (!type || (strcmp(type, "WordPiece") && strcmp(type, "BPE")))
        FAIL(TG_ERR_UNSUPPORTED, "%s: tokenizer model type '%s' is not supported (WordPiece, BPE)", origin,
             type ? type : "(none)");
    else if (!(t = blank(!strcmp(type, "BPE") ? TG_TOK_BPE_BYTES : TG_TOK_WORDPIECE)))
        FAIL(TG_ERR_NOMEM, "%s: out of memory", origin);
    if (st == TG_OK) st = hf_vocab(root, origin, t);
    if (st == TG_OK) st = t->kind == TG_TOK_WORDPIECE ? hf_wordpiece(root, origin, t) : hf_bpe(root, origin, t);
    if (st == TG_OK) st = hf_post(root, origin, t);
    if (st == TG_OK) { /* roles the tokenizer does not add, for the model's use */
        const tg_json *pad = tg_json_get(root, "padding");
        t->pad = role_id(t, jstr(pad, "pad_token"));
        if (t->pad < 0) t->pad = role_id(t, "[PAD]");
        t->mask = role_id(t, "[MASK]");
        if (t->kind == TG_TOK_BPE_BYTES && t->eos < 0) t->eos = t->bos = role_id(t, "<|endoftext|>");
        const tg_json *tr = tg_json_get(root, "truncation");
        if (tr && tg_json_kind(tr) == TG_JSON_OBJECT &&
            (tg_json_int64(tg_json_get(tr, "max_length"), &t->max_length) || t->max_length < 0))
            FAIL(TG_ERR_FORMAT, "%s: truncation.max_length is not an integer >= 0", origin);
    }
    tg_json_free(root);
    if (st) {
        tg_tokenizer_free(t);
        return st;
    }
    *out = t;
    return TG_OK;
}

/* ---- the metadata form ---- */

static tg_json *tok_or_null(const tg_tokenizer *t, int32_t id) {
    const char *s = tg_vocab_token(t->vocab, id);
    return s ? tg_json_new_string(s, strlen(s)) : tg_json_new_null();
}
static tg_json *strings(char **s, int64_t n) {
    tg_json *a = tg_json_new_array();
    for (int64_t i = 0; a && i < n; i++) {
        tg_json *x = tg_json_new_string(s[i], strlen(s[i]));
        if (!x || tg_json_array_append(a, x)) {
            tg_json_free(a);
            return NULL;
        }
    }
    return a;
}

tg_status tg_tokenizer_to_json(const tg_tokenizer *t, char **out) {
    if (!t || !out) return tg_error_set(TG_ERR_INVALID, "tg_tokenizer_to_json: NULL argument");
    tg_json *o = tg_json_new_object();
    tg_status st = o ? TG_OK : tg_error_set(TG_ERR_NOMEM, "tokenizer: out of memory");
    const char *kind = tg_tokenizer_kind_name(t->kind);
    tg__json_put(o, "type", tg_json_new_string(kind, strlen(kind)), &st);
    static const char *const roles[5] = {"pad", "unk", "bos", "eos", "mask"};
    const int32_t ids[5] = {t->pad, t->unk, t->bos, t->eos, t->mask};
    for (int i = 0; i < 5; i++) tg__json_put(o, roles[i], tok_or_null(t, ids[i]), &st);
    tg__json_put(o, "add_bos", tg_json_new_bool(t->add_bos), &st);
    tg__json_put(o, "add_eos", tg_json_new_bool(t->add_eos), &st);
    tg__json_put(o, "max_length", tg_json_new_number((double)t->max_length), &st);
    tg__json_put(o, "added", strings(t->added, t->nadded), &st);
    if (st == TG_OK && t->kind == TG_TOK_WORDPIECE) {
        tg__json_put(o, "clean_text", tg_json_new_bool(t->clean_text), &st);
        tg__json_put(o, "chinese_chars", tg_json_new_bool(t->chinese_chars), &st);
        tg__json_put(o, "strip_accents", tg_json_new_bool(t->strip_accents), &st);
        tg__json_put(o, "lowercase", tg_json_new_bool(t->lowercase), &st);
        tg__json_put(o, "prefix", tg_json_new_string(t->prefix, strlen(t->prefix)), &st);
        tg__json_put(o, "max_word_chars", tg_json_new_number((double)t->max_word_chars), &st);
    }
    if (st == TG_OK && t->kind == TG_TOK_SPM_BPE) {
        char *b64 = tg__base64(t->spm, t->spm_len);
        if (b64) tg__json_put(o, "spm_model", tg_json_new_string(b64, strlen(b64)), &st);
        else st = tg_error_set(TG_ERR_NOMEM, "tokenizer: out of memory");
        free(b64);
    }
    if (st == TG_OK && t->kind == TG_TOK_BPE_BYTES) {
        tg__json_put(o, "add_prefix_space", tg_json_new_bool(t->add_prefix_space), &st);
        tg__json_put(o, "merges", strings(t->merges, t->nmerges), &st);
    }
    if (st == TG_OK) st = tg_json_print(o, 0, out, NULL);
    tg_json_free(o);
    return st;
}

tg_status tg_tokenizer_from_json(const char *json, const char *origin, const tg_vocab *v, tg_tokenizer **out) {
    if (!json || !v || !out) return tg_error_set(TG_ERR_INVALID, "tg_tokenizer_from_json: NULL argument");
    *out = NULL;
    if (!origin) origin = "tokenizer";
    tg_json *o = NULL;
    tg_status st = tg_json_parse(json, strlen(json), &o);
    if (st) return tg_error_prefix(st, "%s", origin);
    const char *type = jstr(o, "type");
    int kind = -1;
    for (int k = 0; type && k <= TG_TOK_SPM_BPE; k++)
        if (!strcmp(type, kind_names[k])) kind = k;
    tg_tokenizer *t = NULL;
    if (kind < 0) FAIL(TG_ERR_UNSUPPORTED, "%s: tokenizer type '%s' is not words, chars, wordpiece, bpe_bytes or spm_bpe", origin,
                       type ? type : "(none)");
    else if (!(t = blank((tg_tok_kind)kind))) FAIL(TG_ERR_NOMEM, "%s: out of memory", origin);
    if (st == TG_OK) t->vocab = v;
    static const char *const roles[5] = {"pad", "unk", "bos", "eos", "mask"};
    for (int i = 0; st == TG_OK && i < 5; i++) {
        const char *s = jstr(o, roles[i]);
        int32_t id = role_id(t, s);
        if (s && id < 0) FAIL(TG_ERR_FORMAT, "%s: %s token '%s' is not in the vocabulary", origin, roles[i], s);
        int32_t *slot[5] = {&t->pad, &t->unk, &t->bos, &t->eos, &t->mask};
        *slot[i] = id;
    }
    if (st == TG_OK) {
        t->add_bos = jbool(o, "add_bos", false) && t->bos >= 0;
        t->add_eos = jbool(o, "add_eos", false) && t->eos >= 0;
        const tg_json *ml = tg_json_get(o, "max_length"), *mw = tg_json_get(o, "max_word_chars");
        if (ml && (tg_json_int64(ml, &t->max_length) || t->max_length < 0))
            FAIL(TG_ERR_FORMAT, "%s: max_length is not an integer >= 0", origin);
        if (mw && (tg_json_int64(mw, &t->max_word_chars) || t->max_word_chars < 1))
            FAIL(TG_ERR_FORMAT, "%s: max_word_chars is not an integer >= 1", origin);
        if (t->unk < 0 && t->kind != TG_TOK_BPE_BYTES)
            FAIL(TG_ERR_FORMAT, "%s: a %s tokenizer needs an unk token", origin, type);
    }
    const tg_json *added = tg_json_get(o, "added");
    for (size_t i = 0; st == TG_OK && i < tg_json_size(added); i++) {
        const char *s = tg_json_string(tg_json_at(added, i));
        if (!s) FAIL(TG_ERR_FORMAT, "%s: added[%zu] is not a string", origin, i);
        else st = add_added(t, s);
    }
    if (st == TG_OK && t->kind == TG_TOK_WORDPIECE) {
        t->clean_text = jbool(o, "clean_text", true);
        t->chinese_chars = jbool(o, "chinese_chars", true);
        t->strip_accents = jbool(o, "strip_accents", true);
        t->lowercase = jbool(o, "lowercase", true);
        const char *p = jstr(o, "prefix");
        if (p && strlen(p) < sizeof t->prefix) strcpy(t->prefix, p);
        else if (p) FAIL(TG_ERR_FORMAT, "%s: prefix is too long", origin);
    }
    if (st == TG_OK && t->kind == TG_TOK_SPM_BPE) {
        const char *b64 = jstr(o, "spm_model");
        uint8_t *bytes = NULL;
        size_t n = 0;
        if (!b64) FAIL(TG_ERR_FORMAT, "%s: spm_model (the sentencepiece model, base64) is missing", origin);
        else if ((st = tg__unbase64(b64, &bytes, &n))) st = tg_error_prefix(st, "%s: spm_model", origin);
        else st = tg__spm_load(t, bytes, n, origin);
        free(bytes);
    }
    if (st == TG_OK && t->kind == TG_TOK_BPE_BYTES) {
        t->add_prefix_space = jbool(o, "add_prefix_space", false);
        const tg_json *m = tg_json_get(o, "merges");
        size_t n = tg_json_size(m);
        t->merges = calloc(n ? n : 1, sizeof *t->merges);
        if (!t->merges) FAIL(TG_ERR_NOMEM, "%s: out of memory", origin);
        for (size_t i = 0; st == TG_OK && i < n; i++) {
            const char *s = tg_json_string(tg_json_at(m, i));
            if (!s) FAIL(TG_ERR_FORMAT, "%s: merges[%zu] is not a string", origin, i);
            else if (!(t->merges[i] = strdup(s))) FAIL(TG_ERR_NOMEM, "%s: out of memory", origin);
            else t->nmerges = (int64_t)i + 1;
        }
        if (st == TG_OK && (st = tg__bpe_prepare(t))) st = tg_error_prefix(st, "%s", origin);
    }
    tg_json_free(o);
    if (st) {
        tg_tokenizer_free(t);
        return st;
    }
    *out = t;
    return TG_OK;
}

/* ---- encoding ---- */

/* words and characters over the classic vocabulary (unknown -> <unk>) */
static tg_status simple_encode(const tg_tokenizer *t, const char *s, size_t len, tg__ids *out) {
    char buf[8];
    tg__buf w = {0};
    bool ok = true, space = false;
    for (size_t i = 0; ok && i <= len;) {
        size_t at = i;
        uint32_t cp = i < len ? tg__utf8_next(s, len, &i) : (i++, ' ');
        bool ws = cp == ' ' || cp == '\t' || cp == '\r' || cp == '\n';
        if (t->kind == TG_TOK_CHARS) {
            if (ws) {
                space = true;
                continue;
            }
            if (space && out->n > 0) ok = tg__ids_put(out, role_id(t, "\xe2\x96\x81") >= 0 ? role_id(t, "\xe2\x96\x81") : t->unk);
            space = false;
            memcpy(buf, s + at, i - at);
            buf[i - at] = '\0';
            int32_t id = tg_vocab_find(t->vocab, buf);
            if (ok) ok = tg__ids_put(out, id >= 0 ? id : t->unk);
            continue;
        }
        if (!ws) {
            ok = tg__buf_put(&w, s + at, i - at);
            continue;
        }
        if (w.n) {
            int32_t id = tg_vocab_find(t->vocab, w.p);
            ok = tg__ids_put(out, id >= 0 ? id : t->unk);
            w.n = 0;
        }
    }
    free(w.p);
    return ok ? TG_OK : tg_error_set(TG_ERR_NOMEM, "tokenizer: out of memory");
}

/* sentencepiece pieces as the vocabulary's ids (a piece the model never saw: <unk>) */
static tg_status spm_encode(const tg_tokenizer *t, const char *s, size_t len, tg__ids *out) {
    char **toks;
    int64_t n;
    tg_status st = tg_tokenizer_pieces(t, s, len, &toks, &n);
    for (int64_t i = 0; st == TG_OK && i < n; i++) {
        int32_t id = tg_vocab_find(t->vocab, toks[i]);
        if (!tg__ids_put(out, id >= 0 ? id : t->unk)) st = tg_error_set(TG_ERR_NOMEM, "tokenizer: out of memory");
    }
    if (st == TG_OK) {
        for (int64_t i = 0; i < n; i++) free(toks[i]);
        free(toks);
    }
    return st;
}

static tg_status piece(const tg_tokenizer *t, const char *s, size_t len, tg__ids *out) {
    if (len == 0) return TG_OK;
    switch (t->kind) {
    case TG_TOK_SPM_BPE: return spm_encode(t, s, len, out);
    case TG_TOK_WORDPIECE: return tg__wordpiece_encode(t, s, len, out);
    case TG_TOK_BPE_BYTES: return tg__bpe_encode(t, s, len, out);
    default: return simple_encode(t, s, len, out);
    }
}

tg_status tg_tokenizer_encode(const tg_tokenizer *t, const char *text, size_t len, int32_t **ids, int64_t *n,
                              bool *truncated) {
    if (!t || (!text && len) || !ids || !n) return tg_error_set(TG_ERR_INVALID, "tg_tokenizer_encode: NULL argument");
    *ids = NULL;
    *n = 0;
    if (truncated) *truncated = false;
    tg__ids out = {0};
    tg_status st = TG_OK;
    size_t from = 0;
    for (size_t i = 0; st == TG_OK && i <= len;) {
        int64_t best = -1;
        size_t best_len = 0;
        for (int64_t k = 0; i < len && k < t->nadded; k++) { /* the longest added token here */
            size_t l = strlen(t->added[k]);
            if (l > best_len && l <= len - i && !memcmp(text + i, t->added[k], l)) best = k, best_len = l;
        }
        if (best < 0 && i < len) {
            i++;
            continue;
        }
        st = piece(t, text + from, i - from, &out);
        if (st == TG_OK && best >= 0 && !tg__ids_put(&out, tg_vocab_find(t->vocab, t->added[best])))
            st = tg_error_set(TG_ERR_NOMEM, "tokenizer: out of memory");
        i += best >= 0 ? best_len : 1;
        from = i;
    }
    int64_t specials = (t->add_bos ? 1 : 0) + (t->add_eos ? 1 : 0);
    if (st == TG_OK && t->max_length > 0 && out.n + specials > t->max_length) {
        if (truncated) *truncated = true;
        out.n = t->max_length > specials ? t->max_length - specials : 0;
    }
    int32_t *r = st == TG_OK ? malloc((size_t)(out.n + specials + 1) * sizeof *r) : NULL;
    if (st == TG_OK && !r) st = tg_error_set(TG_ERR_NOMEM, "tokenizer: out of memory");
    if (st) {
        free(out.p);
        return st;
    }
    int64_t k = 0;
    if (t->add_bos) r[k++] = t->bos;
    if (out.n) memcpy(r + k, out.p, (size_t)out.n * sizeof *r);
    k += out.n;
    if (t->add_eos) r[k++] = t->eos;
    free(out.p);
    *ids = r;
    *n = k;
    return TG_OK;
}

tg_status tg_tokenizer_decode(const tg_tokenizer *t, const int32_t *ids, int64_t n, char **out) {
    if (!t || (!ids && n) || !out) return tg_error_set(TG_ERR_INVALID, "tg_tokenizer_decode: NULL argument");
    tg__buf b = {0};
    bool ok = tg__buf_put(&b, "", 0);
    size_t pl = strlen(t->prefix);
    for (int64_t i = 0; ok && i < n; i++) {
        const char *s = tg_vocab_token(t->vocab, ids[i]);
        if (!s || ids[i] == t->pad || ids[i] == t->bos || ids[i] == t->eos) continue;
        if (t->kind == TG_TOK_BPE_BYTES) {
            size_t len = strlen(s);
            for (size_t j = 0; ok && j < len;) {
                int byte = tg__bpe_char_byte(tg__utf8_next(s, len, &j));
                char c = (char)byte;
                if (byte >= 0) ok = tg__buf_put(&b, &c, 1);
            }
        } else if (t->kind == TG_TOK_SPM_BPE) { /* pieces joined, each "▁" a space but the text's first */
            for (const char *p = s; ok && *p;) {
                bool sp = !strncmp(p, "\xe2\x96\x81", 3);
                if (!sp || b.n > 0) ok = tg__buf_put(&b, sp ? " " : p, 1);
                p += sp ? 3 : 1;
            }
        } else if (t->kind == TG_TOK_CHARS) {
            ok = tg__buf_put(&b, strcmp(s, "\xe2\x96\x81") ? s : " ", strcmp(s, "\xe2\x96\x81") ? strlen(s) : 1);
        } else if (t->kind == TG_TOK_WORDPIECE && pl && !strncmp(s, t->prefix, pl)) {
            ok = tg__buf_put(&b, s + pl, strlen(s + pl));
        } else {
            ok = (b.n == 0 || tg__buf_put(&b, " ", 1)) && tg__buf_put(&b, s, strlen(s));
        }
    }
    if (!ok) {
        free(b.p);
        return tg_error_set(TG_ERR_NOMEM, "tokenizer: out of memory");
    }
    *out = b.p;
    return TG_OK;
}

tg_status tg_tokenizer_pieces(const tg_tokenizer *t, const char *text, size_t len, char ***toks, int64_t *n) {
    if (!t || (!text && len) || !toks || !n) return tg_error_set(TG_ERR_INVALID, "tg_tokenizer_pieces: NULL argument");
    *toks = NULL;
    *n = 0;
    if (t->kind == TG_TOK_SPM_BPE) {
        if (len >= 3 && memmem(text, len, "\xe2\x96\x81", 3))
            return tg_error_set(TG_ERR_FORMAT, "the text holds '\xe2\x96\x81' (U+2581): it is cut into sentencepiece pieces "
                                "already, but the model's sentencepiece tokenizer reads raw text (spm_decode the pieces, "
                                "or give the .txt files of datasets/prep_bible.py)");
        return tg__spm_pieces(t, text, len, toks, n);
    }
    tg__ids ids = {0};
    char **r = NULL;
    int64_t k = 0;
    tg_status st = TG_OK;
    if (t->kind == TG_TOK_WORDS || t->kind == TG_TOK_CHARS) { /* the text itself, unknown or not */
        r = malloc((len + 1) * sizeof *r);
        bool space = false;
        for (size_t i = 0; r && st == TG_OK && i < len;) {
            size_t at = i, w = 0;
            uint32_t cp = tg__utf8_next(text, len, &i);
            bool ws = cp == ' ' || cp == '\t' || cp == '\r' || cp == '\n';
            if (ws) {
                space = true;
                continue;
            }
            if (t->kind == TG_TOK_CHARS && space && k > 0 && !(r[k++] = strdup("\xe2\x96\x81"))) st = TG_ERR_NOMEM;
            space = false;
            if (t->kind == TG_TOK_CHARS) w = i - at;
            else {
                size_t j = at;
                while (j < len) {
                    size_t j2 = j;
                    uint32_t c = tg__utf8_next(text, len, &j2);
                    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') break;
                    j = j2;
                }
                w = j - at;
                i = j;
            }
            if (st == TG_OK && !(r[k++] = strndup(text + at, w))) st = TG_ERR_NOMEM;
        }
        if (!r || st) st = tg_error_set(TG_ERR_NOMEM, "tokenizer: out of memory");
    } else { /* the vocabulary's pieces of the ids, special tokens left out */
        st = piece(t, text, len, &ids);
        r = st == TG_OK ? malloc((size_t)(ids.n ? ids.n : 1) * sizeof *r) : NULL;
        if (st == TG_OK && !r) st = tg_error_set(TG_ERR_NOMEM, "tokenizer: out of memory");
        for (int64_t i = 0; st == TG_OK && i < ids.n; i++)
            if (!(r[k++] = strdup(tg_vocab_token(t->vocab, ids.p[i])))) st = tg_error_set(TG_ERR_NOMEM, "tokenizer: out of memory");
        free(ids.p);
    }
    if (st) {
        for (int64_t i = 0; r && i < k; i++) free(r[i]);
        free(r);
        return st;
    }
    *toks = r;
    *n = k;
    return TG_OK;
}

/* ---- the model's tokenizer ---- */

const tg_tokenizer *tg_model_tokenizer(const tg_model *m) { return m ? m->tok : NULL; }

tg_status tg_model_set_tokenizer(tg_model *m, tg_tokenizer *t) {
    if (!m || !t) {
        tg_tokenizer_free(t);
        return tg_error_set(TG_ERR_INVALID, "tg_model_set_tokenizer: NULL argument");
    }
    const tg_vocab *v = t->vocab ? t->vocab : m->src; /* none yet (sentencepiece): the model's */
    bool same = tg_vocab_size(v) == tg_vocab_size(m->src);
    for (int32_t i = 0; same && i < tg_vocab_size(v); i++) same = !strcmp(tg_vocab_token(v, i), tg_vocab_token(m->src, i));
    if (!same) {
        tg_status st = tg_error_set(TG_ERR_INVALID, "tg_model_set_tokenizer: the tokenizer's vocabulary (%lld tokens) is not "
                                    "the model's (%lld tokens)", (long long)tg_vocab_size(v), (long long)tg_vocab_size(m->src));
        tg_tokenizer_free(t);
        return st;
    }
    tg_vocab_free(t->owned); /* the model's own, token for token */
    t->owned = NULL;
    t->vocab = m->src;
    tg_tokenizer_free(m->tok);
    m->tok = t;
    return TG_OK;
}

/* ---- as a Hugging Face tokenizer.json ---- */

static tg_json *obj(const char *type) {
    tg_json *o = tg_json_new_object();
    if (o && type && tg_json_object_set(o, "type", tg_json_new_string(type, strlen(type)))) {
        tg_json_free(o);
        return NULL;
    }
    return o;
}
static tg_json *jstring(const char *s) { return s ? tg_json_new_string(s, strlen(s)) : tg_json_new_null(); }

tg_status tg__tokenizer_hf_json(const tg_tokenizer *t, char **out) {
    bool wp = t->kind == TG_TOK_WORDPIECE;
    if (!wp && t->kind != TG_TOK_BPE_BYTES)
        return tg_error_set(TG_ERR_UNSUPPORTED, "tokenizer.json: a %s tokenizer has no Hugging Face form", tg_tokenizer_kind_name(t->kind));
    tg_json *root = obj(NULL), *model = obj(wp ? "WordPiece" : "BPE"), *vocab = tg_json_new_object(), *added = tg_json_new_array();
    tg_status st = root && model && vocab && added ? TG_OK : tg_error_set(TG_ERR_NOMEM, "tokenizer.json: out of memory");
    for (int32_t i = 0; st == TG_OK && i < tg_vocab_size(t->vocab); i++)
        st = tg_json_object_set(vocab, tg_vocab_token(t->vocab, i), tg_json_new_number(i));
    for (int64_t k = 0; st == TG_OK && k < t->nadded; k++) {
        tg_json *a = obj(NULL);
        st = a ? TG_OK : tg_error_set(TG_ERR_NOMEM, "tokenizer.json: out of memory");
        if (st == TG_OK) st = tg_json_object_set(a, "id", tg_json_new_number(tg_vocab_find(t->vocab, t->added[k])));
        if (st == TG_OK) st = tg_json_object_set(a, "content", jstring(t->added[k]));
        if (st == TG_OK) st = tg_json_object_set(a, "single_word", tg_json_new_bool(0));
        if (st == TG_OK) st = tg_json_object_set(a, "lstrip", tg_json_new_bool(0));
        if (st == TG_OK) st = tg_json_object_set(a, "rstrip", tg_json_new_bool(0));
        if (st == TG_OK) st = tg_json_object_set(a, "normalized", tg_json_new_bool(0));
        if (st == TG_OK) st = tg_json_object_set(a, "special", tg_json_new_bool(1));
        if (st == TG_OK) st = tg_json_array_append(added, a);
    }
    if (st == TG_OK) st = tg_json_object_set(root, "version", jstring("1.0"));
    if (st == TG_OK && t->max_length > 0) {
        tg_json *tr = obj(NULL);
        st = tr ? tg_json_object_set(tr, "max_length", tg_json_new_number((double)t->max_length)) : TG_ERR_NOMEM;
        if (st == TG_OK) st = tg_json_object_set(tr, "strategy", jstring("LongestFirst"));
        if (st == TG_OK) st = tg_json_object_set(tr, "stride", tg_json_new_number(0));
        if (st == TG_OK) st = tg_json_object_set(root, "truncation", tr);
    } else if (st == TG_OK) st = tg_json_object_set(root, "truncation", tg_json_new_null());
    if (st == TG_OK) st = tg_json_object_set(root, "padding", tg_json_new_null());
    if (st == TG_OK) st = tg_json_object_set(root, "added_tokens", added), added = NULL;
    tg_json *norm = wp ? obj("BertNormalizer") : tg_json_new_null(), *pre = obj(wp ? "BertPreTokenizer" : "ByteLevel"),
            *post = obj(wp ? "TemplateProcessing" : "ByteLevel"), *dec = obj(wp ? "WordPiece" : "ByteLevel");
    if (st == TG_OK && wp) {
        st = tg_json_object_set(norm, "clean_text", tg_json_new_bool(t->clean_text));
        if (st == TG_OK) st = tg_json_object_set(norm, "handle_chinese_chars", tg_json_new_bool(t->chinese_chars));
        if (st == TG_OK) st = tg_json_object_set(norm, "strip_accents", tg_json_new_bool(t->strip_accents));
        if (st == TG_OK) st = tg_json_object_set(norm, "lowercase", tg_json_new_bool(t->lowercase));
        tg_json *single = tg_json_new_array(), *pair = tg_json_new_array(), *sp = tg_json_new_object();
        if (t->add_bos) {
            tg_json *e = tg_json_new_object(), *x = tg_json_new_object();
            tg_json_object_set(x, "id", jstring(tg_vocab_token(t->vocab, t->bos)));
            tg_json_object_set(x, "type_id", tg_json_new_number(0));
            tg_json_object_set(e, "SpecialToken", x);
            tg_json_array_append(single, e);
        }
        tg_json *e = tg_json_new_object(), *x = tg_json_new_object();
        tg_json_object_set(x, "id", jstring("A"));
        tg_json_object_set(x, "type_id", tg_json_new_number(0));
        tg_json_object_set(e, "Sequence", x);
        tg_json_array_append(single, e);
        if (t->add_eos) {
            e = tg_json_new_object(), x = tg_json_new_object();
            tg_json_object_set(x, "id", jstring(tg_vocab_token(t->vocab, t->eos)));
            tg_json_object_set(x, "type_id", tg_json_new_number(0));
            tg_json_object_set(e, "SpecialToken", x);
            tg_json_array_append(single, e);
        }
        const int32_t sids[2] = {t->add_bos ? t->bos : -1, t->add_eos ? t->eos : -1};
        for (int k = 0; k < 2; k++)
            if (sids[k] >= 0) {
                tg_json *r = tg_json_new_object(), *ids = tg_json_new_array(), *toks = tg_json_new_array();
                const char *name = tg_vocab_token(t->vocab, sids[k]);
                tg_json_array_append(ids, tg_json_new_number(sids[k]));
                tg_json_array_append(toks, jstring(name));
                tg_json_object_set(r, "id", jstring(name));
                tg_json_object_set(r, "ids", ids);
                tg_json_object_set(r, "tokens", toks);
                tg_json_object_set(sp, name, r);
            }
        if (st == TG_OK) st = tg_json_object_set(post, "single", single);
        if (st == TG_OK) st = tg_json_object_set(post, "pair", pair); /* pairs: not supported, empty */
        if (st == TG_OK) st = tg_json_object_set(post, "special_tokens", sp);
        if (st == TG_OK) st = tg_json_object_set(dec, "prefix", jstring(t->prefix));
        if (st == TG_OK) st = tg_json_object_set(dec, "cleanup", tg_json_new_bool(1));
        if (st == TG_OK) st = tg_json_object_set(model, "unk_token", jstring(tg_vocab_token(t->vocab, t->unk)));
        if (st == TG_OK) st = tg_json_object_set(model, "continuing_subword_prefix", jstring(t->prefix));
        if (st == TG_OK) st = tg_json_object_set(model, "max_input_chars_per_word", tg_json_new_number((double)t->max_word_chars));
    } else if (st == TG_OK) {
        st = tg_json_object_set(pre, "add_prefix_space", tg_json_new_bool(t->add_prefix_space));
        if (st == TG_OK) st = tg_json_object_set(pre, "trim_offsets", tg_json_new_bool(1));
        if (st == TG_OK) st = tg_json_object_set(pre, "use_regex", tg_json_new_bool(1));
        if (st == TG_OK) st = tg_json_object_set(post, "add_prefix_space", tg_json_new_bool(1));
        if (st == TG_OK) st = tg_json_object_set(post, "trim_offsets", tg_json_new_bool(0));
        if (st == TG_OK) st = tg_json_object_set(post, "use_regex", tg_json_new_bool(1));
        if (st == TG_OK) st = tg_json_object_set(dec, "add_prefix_space", tg_json_new_bool(1));
        if (st == TG_OK) st = tg_json_object_set(dec, "trim_offsets", tg_json_new_bool(1));
        if (st == TG_OK) st = tg_json_object_set(dec, "use_regex", tg_json_new_bool(1));
        if (st == TG_OK) st = tg_json_object_set(model, "dropout", tg_json_new_null());
        if (st == TG_OK) st = tg_json_object_set(model, "unk_token", t->unk >= 0 ? jstring(tg_vocab_token(t->vocab, t->unk)) : tg_json_new_null());
        if (st == TG_OK) st = tg_json_object_set(model, "continuing_subword_prefix", tg_json_new_null());
        if (st == TG_OK) st = tg_json_object_set(model, "end_of_word_suffix", tg_json_new_null());
        if (st == TG_OK) st = tg_json_object_set(model, "fuse_unk", tg_json_new_bool(0));
        if (st == TG_OK) st = tg_json_object_set(model, "byte_fallback", tg_json_new_bool(0));
        if (st == TG_OK) st = tg_json_object_set(model, "merges", strings(t->merges, t->nmerges));
    }
    if (st == TG_OK) st = tg_json_object_set(model, "vocab", vocab), vocab = NULL;
    if (st == TG_OK) st = tg_json_object_set(root, "normalizer", norm), norm = NULL;
    if (st == TG_OK) st = tg_json_object_set(root, "pre_tokenizer", pre), pre = NULL;
    if (st == TG_OK) st = tg_json_object_set(root, "post_processor", post), post = NULL;
    if (st == TG_OK) st = tg_json_object_set(root, "decoder", dec), dec = NULL;
    if (st == TG_OK) st = tg_json_object_set(root, "model", model), model = NULL;
    if (st == TG_OK) st = tg_json_print(root, 0, out, NULL);
    tg_json_free(norm), tg_json_free(pre), tg_json_free(post), tg_json_free(dec);
    tg_json_free(model), tg_json_free(vocab), tg_json_free(added), tg_json_free(root);
    return st;
}
