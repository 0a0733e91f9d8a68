/* Training data: text files read and validated whole, tokenisation (words or characters),
 * vocabularies built from counts, parallel corpora of token ids, and the length-bucketed
 * batcher of docs/model.md §1 ("batches built from length-sorted buckets to a token budget").
 *
 * Validation happens before anything is written anywhere, so a bad input file never leaves
 * partial output behind: every error names the file and the 1-based line. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "models/model-impl.h"
#include "tg/json.h"
#include "train/train-impl.h"

/* The white space that separates tokens: the set tg_vocab_encode splits on. */
static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

/* ---- text files ------------------------------------------------------------------------------ */

void tg_lines_free(tg_lines *l) {
    if (!l) return;
    free(l->line);
    free(l->buf);
    free(l->path);
    memset(l, 0, sizeof *l);
}

static tg_status slurp(const char *path, char **data, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return tg_error_set(TG_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (n < cap) break;
        char *nb = realloc(buf, 2 * cap + 1);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    int err = ferror(f);
    fclose(f);
    if (!buf) return tg_error_set(TG_ERR_NOMEM, "'%s': out of memory", path);
    if (err) {
        free(buf);
        return tg_error_set(TG_ERR_IO, "cannot read '%s'", path);
    }
    buf[n] = '\0';
    *data = buf;
    *len = n;
    return TG_OK;
}

tg_status tg_lines_read(const char *path, bool allow_empty, tg_lines *out) {
    if (!out) return tg_error_set(TG_ERR_INVALID, "tg_lines_read: NULL argument");
    memset(out, 0, sizeof *out);
    if (!path) return tg_error_set(TG_ERR_INVALID, "tg_lines_read: NULL path");
    char *buf = NULL;
    size_t len = 0;
    tg_status st = slurp(path, &buf, &len);
    if (st) return st;
    int64_t n = 0;
    for (size_t i = 0; i < len; i++) n += buf[i] == '\n';
    if (len > 0 && buf[len - 1] != '\n') n++; /* a last line without its newline */
    out->buf = buf;
    out->path = strdup(path);
    out->line = malloc((size_t)(n ? n : 1) * sizeof *out->line);
    if (!out->path || !out->line) {
        tg_lines_free(out);
        return tg_error_set(TG_ERR_NOMEM, "'%s': out of memory", path);
    }
    char *p = buf;
    for (int64_t k = 0; k < n; k++) {
        char *e = memchr(p, '\n', (size_t)(buf + len - p));
        if (!e) e = buf + len;
        *e = '\0';
        size_t ll = (size_t)(e - p);
        if (ll > 0 && p[ll - 1] == '\r') p[--ll] = '\0';
        size_t bad = tg_json_utf8_check(p, ll);
        if (bad < ll) {
            st = tg_error_set(TG_ERR_FORMAT, "'%s' line %lld, byte %zu: invalid UTF-8", path, (long long)(k + 1),
                              bad + 1);
        } else if (strlen(p) != ll) {
            st = tg_error_set(TG_ERR_FORMAT, "'%s' line %lld, byte %zu: NUL byte", path, (long long)(k + 1),
                              strlen(p) + 1);
        } else if (!allow_empty) {
            size_t j = 0;
            while (j < ll && is_ws(p[j])) j++;
            if (j == ll) st = tg_error_set(TG_ERR_FORMAT, "'%s' line %lld: empty line", path, (long long)(k + 1));
        }
        if (st) {
            tg_lines_free(out);
            return st;
        }
        out->line[k] = p;
        p = e + 1;
    }
    out->n = n;
    return TG_OK;
}

tg_status tg_lines_check_parallel(const tg_lines *a, const tg_lines *b) {
    if (!a || !b) return tg_error_set(TG_ERR_INVALID, "tg_lines_check_parallel: NULL argument");
    if (a->n != b->n)
        return tg_error_set(TG_ERR_FORMAT, "'%s' has %lld lines but '%s' has %lld: the files must be parallel",
                            a->path ? a->path : "?", (long long)a->n, b->path ? b->path : "?", (long long)b->n);
    return TG_OK;
}

/* ---- tokens ------------------------------------------------------------------------------------ */

void tg_tokens_free(char **toks, int64_t n) {
    for (int64_t i = 0; toks && i < n; i++) free(toks[i]);
    free(toks);
}

/* Length in bytes of the UTF-8 character starting at p (input already validated). */
static size_t utf8_len(unsigned char c) {
    return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
}

tg_status tg_tokenize(const char *line, const tg_text_options *opt, char ***toks, int64_t *n) {
    if (!line || !toks || !n) return tg_error_set(TG_ERR_INVALID, "tg_tokenize: NULL argument");
    bool chars = opt && opt->chars;
    size_t len = strlen(line);
    if (tg_json_utf8_check(line, len) < len) return tg_error_set(TG_ERR_FORMAT, "tg_tokenize: invalid UTF-8");
    if (opt && opt->tokenizer) return tg_tokenizer_pieces(opt->tokenizer, line, len, toks, n);
    /* at most one token per byte, plus the space markers between them */
    char **t = malloc((len + 1) * sizeof *t);
    if (!t) return tg_error_set(TG_ERR_NOMEM, "tg_tokenize: out of memory");
    int64_t k = 0;
    const char *p = line;
    while (*p) {
        if (is_ws(*p)) {
            while (*p && is_ws(*p)) p++;
            if (chars && k > 0 && *p) { /* a space between two characters */
                if (!(t[k++] = strdup("\xE2\x96\x81"))) goto oom;
            }
            continue;
        }
        size_t w = 0;
        if (chars) w = utf8_len((unsigned char)*p);
        else
            while (p[w] && !is_ws(p[w])) w++;
        if (!(t[k] = strndup(p, w))) goto oom;
        k++;
        p += w;
    }
    *toks = t;
    *n = k;
    return TG_OK;
oom:
    tg_tokens_free(t, k);
    return tg_error_set(TG_ERR_NOMEM, "tg_tokenize: out of memory");
}

/* ---- vocabulary building: a string -> count hash table ---- */

typedef struct {
    char *tok;
    int64_t count;
} tok_count;

typedef struct {
    tok_count *e;
    int64_t n, cap; /* cap a power of two; open addressing */
} count_table;

static uint64_t fnv(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static tg_status count_add(count_table *t, char *tok) { /* takes tok */
    if (2 * (t->n + 1) > t->cap) {
        int64_t cap = t->cap ? 2 * t->cap : 1024;
        tok_count *e = calloc((size_t)cap, sizeof *e);
        if (!e) {
            free(tok);
            return tg_error_set(TG_ERR_NOMEM, "tg_vocab_build: out of memory");
        }
        for (int64_t i = 0; i < t->cap; i++) {
            if (!t->e[i].tok) continue;
            uint64_t h = fnv(t->e[i].tok) & (uint64_t)(cap - 1);
            while (e[h].tok) h = (h + 1) & (uint64_t)(cap - 1);
            e[h] = t->e[i];
        }
        free(t->e);
        t->e = e;
        t->cap = cap;
    }
    uint64_t h = fnv(tok) & (uint64_t)(t->cap - 1);
    while (t->e[h].tok && strcmp(t->e[h].tok, tok) != 0) h = (h + 1) & (uint64_t)(t->cap - 1);
    if (t->e[h].tok) {
        t->e[h].count++;
        free(tok);
    } else {
        t->e[h].tok = tok;
        t->e[h].count = 1;
        t->n++;
    }
    return TG_OK;
}

static int by_count(const void *a, const void *b) {
    const tok_count *x = a, *y = b;
    if (x->count != y->count) return x->count > y->count ? -1 : 1;
    return strcmp(x->tok, y->tok);
}

tg_status tg_vocab_build(const tg_lines *const *texts, int ntexts, const tg_text_options *opt,
                         int64_t min_count, int64_t max_size, tg_vocab **out) {
    if (!texts || ntexts < 1 || !out) return tg_error_set(TG_ERR_INVALID, "tg_vocab_build: no texts");
    *out = NULL;
    if (min_count < 1) return tg_error_set(TG_ERR_INVALID, "tg_vocab_build: min_count %lld < 1", (long long)min_count);
    if (max_size != 0 && max_size < 5)
        return tg_error_set(TG_ERR_INVALID, "tg_vocab_build: max_size %lld < 5", (long long)max_size);
    count_table t = {0};
    tg_status st = TG_OK;
    for (int f = 0; st == TG_OK && f < ntexts; f++)
        for (int64_t i = 0; st == TG_OK && i < texts[f]->n; i++) {
            char **toks;
            int64_t nt;
            st = tg_tokenize(texts[f]->line[i], opt, &toks, &nt);
            if (st) {
                st = tg_error_prefix(st, "'%s' line %lld", texts[f]->path, (long long)(i + 1));
                break;
            }
            for (int64_t k = 0; k < nt; k++) {
                if (st == TG_OK) st = count_add(&t, toks[k]);
                else free(toks[k]);
            }
            free(toks);
        }
    /* compact, sort by (count desc, bytes), add */
    int64_t m = 0;
    for (int64_t i = 0; i < t.cap; i++)
        if (t.e[i].tok) t.e[m++] = t.e[i];
    if (st == TG_OK) {
        if (m > 0) qsort(t.e, (size_t)m, sizeof *t.e, by_count); /* t.e is NULL without tokens */
        st = tg_vocab_new(out);
    }
    for (int64_t i = 0; st == TG_OK && i < m; i++) {
        if (t.e[i].count < min_count) break;
        if (max_size > 0 && tg_vocab_size(*out) >= max_size) break;
        st = tg_vocab_add(*out, t.e[i].tok, NULL);
    }
    for (int64_t i = 0; i < m; i++) free(t.e[i].tok);
    free(t.e);
    if (st) {
        tg_vocab_free(*out);
        *out = NULL;
    }
    return st;
}

tg_status tg_vocab_save(const tg_vocab *v, const char *path) {
    if (!v || !path) return tg_error_set(TG_ERR_INVALID, "tg_vocab_save: NULL argument");
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp)
        return tg_error_set(TG_ERR_INVALID, "tg_vocab_save: path too long");
    FILE *f = fopen(tmp, "w");
    if (!f) return tg_error_set(TG_ERR_IO, "cannot create '%s': %s", tmp, strerror(errno));
    for (int32_t i = 0; i < tg_vocab_size(v); i++) fprintf(f, "%s\n", tg_vocab_token(v, i));
    bool ok = fflush(f) == 0 && fsync(fileno(f)) == 0;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return tg_error_set(TG_ERR_IO, "cannot write '%s': %s", path, strerror(e));
    }
    return TG_OK;
}

tg_status tg_vocab_read(const char *path, tg_vocab **out) {
    if (!out) return tg_error_set(TG_ERR_INVALID, "tg_vocab_read: NULL argument");
    *out = NULL;
    tg_lines l;
    tg_status st = tg_lines_read(path, false, &l);
    if (st) return st;
    static const char *specials[4] = {"<pad>", "<unk>", "<s>", "</s>"};
    tg_vocab *v = NULL;
    if (l.n < 5) st = tg_error_set(TG_ERR_FORMAT, "'%s': a vocabulary needs the 4 specials and a token", path);
    for (int i = 0; st == TG_OK && i < 4; i++)
        if (strcmp(l.line[i], specials[i]))
            st = tg_error_set(TG_ERR_FORMAT, "'%s' line %d: expected %s", path, i + 1, specials[i]);
    if (st == TG_OK) st = tg_vocab_new(&v);
    for (int64_t i = 4; st == TG_OK && i < l.n; i++) {
        int32_t id;
        st = tg_vocab_add(v, l.line[i], &id);
        if (st) st = tg_error_prefix(st, "'%s' line %lld", path, (long long)(i + 1));
        else if (id != i) st = tg_error_set(TG_ERR_FORMAT, "'%s' line %lld: token '%s' appears twice", path,
                                         (long long)(i + 1), l.line[i]);
    }
    tg_lines_free(&l);
    if (st) {
        tg_vocab_free(v);
        return st;
    }
    *out = v;
    return TG_OK;
}

/* ---- corpora ----------------------------------------------------------------------------------- */

struct tg_corpus {
    int64_t n, skipped;
    bool has_tgt;
    bool mlm;                   /* masked-LM pairs: batches by tg_batch_build_mlm */
    bool stream;                /* blocks of a token stream: batches by tg_batch_build_lm_blocks */
    bool mlm_dynamic;           /* masks drawn per batch from the target side (dynamic masking) */
    double mask_p;
    uint64_t mask_seed;
    int32_t mask_id, vocab_size;
    int32_t *special;           /* dynamic masking: ids never masked nor drawn, ascending */
    int64_t nspecial;
    int32_t eos;                /* masked-LM and classification batches: appended to every sequence
                                 * (</s>, or BERT's [SEP]) */
    bool classify;              /* (sequence, class) pairs: the target side is one class id */
    int32_t tgt_pad;            /* stream blocks: the target past a short window (tg_corpus_set_target_pad) */
    int64_t *src_off, *tgt_off; /* n + 1 offsets into the id arrays */
    int32_t *src_ids, *tgt_ids;
    int64_t *line;              /* input line of each pair, 1-based */
    int64_t cap, src_cap, tgt_cap;
};

void tg__train_corpus_set_mlm(tg_corpus *c) {
    c->mlm = true;
}

void tg__train_corpus_set_classify(tg_corpus *c, int32_t eos) {
    c->classify = true;
    c->eos = eos;
}

void tg_corpus_set_target_pad(tg_corpus *c, int32_t pad) {
    if (c) c->tgt_pad = pad;
}

void tg__train_corpus_set_stream(tg_corpus *c) {
    c->stream = true;
}

tg_status tg__train_corpus_set_mlm_dynamic(tg_corpus *c, double p, uint64_t seed, int32_t mask, int32_t vocab_size,
                                           const int32_t *special, int64_t nspecial, int32_t eos) {
    int32_t classic[5];
    if (!special) nspecial = tg__mlm_classic_specials(mask, classic);
    if (!(c->special = malloc((size_t)(nspecial ? nspecial : 1) * sizeof *c->special)))
        return tg_error_set(TG_ERR_NOMEM, "corpus: out of memory");
    if (nspecial) memcpy(c->special, special ? special : classic, (size_t)nspecial * sizeof *c->special);
    c->nspecial = nspecial;
    c->mlm_dynamic = true;
    c->mask_p = p;
    c->mask_seed = seed;
    c->mask_id = mask;
    c->vocab_size = vocab_size;
    c->eos = eos;
    return TG_OK;
}

static uint64_t mix64(uint64_t x);

/* RoBERTa's dynamic masking (Liu et al. 2019): example i of a batch of epoch `epoch` is masked by
 * BERT's rule with an RNG seeded from (seed, epoch, i), so the masks change from epoch to epoch
 * and are still a function of the position in the data (a resumed run draws the same ones). */
static tg_status batch_masked(const tg_corpus *c, const int64_t *idx, int64_t n, int64_t epoch, tg_batch *out) {
    int32_t **in = calloc((size_t)n, sizeof *in), **tg = calloc((size_t)n, sizeof *tg);
    int64_t *len = calloc((size_t)n, sizeof *len);
    tg_status st = in && tg && len ? TG_OK : tg_error_set(TG_ERR_NOMEM, "tg_corpus_batch: out of memory");
    for (int64_t i = 0; st == TG_OK && i < n; i++) {
        const int32_t *ids = tg_corpus_tgt(c, idx[i], &len[i]);
        in[i] = malloc((size_t)(len[i] + 1) * sizeof **in);
        tg[i] = malloc((size_t)(len[i] + 1) * sizeof **tg);
        if (!ids || !in[i] || !tg[i]) {
            st = ids ? tg_error_set(TG_ERR_NOMEM, "tg_corpus_batch: out of memory")
                     : tg_error_set(TG_ERR_INVALID, "tg_corpus_batch: pair %lld out of range", (long long)idx[i]);
            break;
        }
        tg_rng r;
        tg_rng_init(&r, mix64(c->mask_seed ^ mix64((uint64_t)epoch ^ mix64((uint64_t)idx[i] + 0x51ED270B27u))));
        tg__mlm_mask_ids(c->mask_id, c->vocab_size, c->special, c->nspecial, ids, len[i], c->mask_p, &r, in[i], tg[i]);
    }
    if (st == TG_OK)
        st = tg__batch_build_mlm_eos(out, n, (const int32_t *const *)in, (const int32_t *const *)tg, len, c->eos);
    for (int64_t i = 0; in && tg && i < n; i++) {
        free(in[i]);
        free(tg[i]);
    }
    free(in);
    free(tg);
    free(len);
    return st;
}

void tg_corpus_free(tg_corpus *c) {
    if (!c) return;
    free(c->src_off);
    free(c->tgt_off);
    free(c->src_ids);
    free(c->tgt_ids);
    free(c->line);
    free(c->special);
    free(c);
}

static tg_corpus *corpus_alloc(bool has_tgt) {
    tg_corpus *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->has_tgt = has_tgt;
    c->eos = TG_EOS;
    c->tgt_pad = TG_PAD;
    c->src_off = calloc(1, sizeof *c->src_off);
    c->tgt_off = calloc(1, sizeof *c->tgt_off);
    if (!c->src_off || !c->tgt_off) {
        tg_corpus_free(c);
        return NULL;
    }
    return c;
}

static bool grow64(int64_t **p, int64_t need) {
    int64_t *q = realloc(*p, (size_t)need * sizeof **p);
    if (q) *p = q;
    return q != NULL;
}

static bool grow_ids(int32_t **p, int64_t *cap, int64_t need) {
    if (need <= *cap) return true;
    int64_t nc = *cap ? *cap : 1024;
    while (nc < need) nc *= 2;
    int32_t *q = realloc(*p, (size_t)nc * sizeof **p);
    if (!q) return false;
    *p = q;
    *cap = nc;
    return true;
}

/* Append one pair (tgt may be NULL for source-only corpora). */
static tg_status corpus_push(tg_corpus *c, const int32_t *s, int64_t sn, const int32_t *t, int64_t tn, int64_t line) {
    if (c->n + 2 > c->cap) {
        int64_t cap = c->cap ? 2 * c->cap : 256;
        if (!grow64(&c->src_off, cap + 1) || !grow64(&c->tgt_off, cap + 1) || !grow64(&c->line, cap))
            return tg_error_set(TG_ERR_NOMEM, "corpus: out of memory");
        c->cap = cap;
    }
    int64_t so = c->src_off[c->n], to = c->tgt_off[c->n];
    if (!grow_ids(&c->src_ids, &c->src_cap, so + sn + 1) || !grow_ids(&c->tgt_ids, &c->tgt_cap, to + tn + 1))
        return tg_error_set(TG_ERR_NOMEM, "corpus: out of memory");
    if (sn) memcpy(c->src_ids + so, s, (size_t)sn * sizeof *s);
    if (tn) memcpy(c->tgt_ids + to, t, (size_t)tn * sizeof *t);
    c->line[c->n] = line;
    c->n++;
    c->src_off[c->n] = so + sn;
    c->tgt_off[c->n] = to + tn;
    return TG_OK;
}

static tg_status encode(const char *line, const tg_text_options *opt, const tg_vocab *v, int32_t **ids, int64_t *n) {
    char **toks;
    int64_t nt;
    tg_status st = tg_tokenize(line, opt, &toks, &nt);
    if (st) return st;
    *ids = malloc((size_t)(nt ? nt : 1) * sizeof **ids);
    if (!*ids) {
        tg_tokens_free(toks, nt);
        return tg_error_set(TG_ERR_NOMEM, "corpus: out of memory");
    }
    for (int64_t k = 0; k < nt; k++) (*ids)[k] = tg_vocab_id(v, toks[k]);
    *n = nt;
    tg_tokens_free(toks, nt);
    return TG_OK;
}

tg_status tg_corpus_new(const tg_lines *src, const tg_lines *tgt, const tg_vocab *src_vocab,
                        const tg_vocab *tgt_vocab, const tg_corpus_options *opt, tg_corpus **out) {
    if (!src || !src_vocab || (tgt && !tgt_vocab) || !out)
        return tg_error_set(TG_ERR_INVALID, "tg_corpus_new: NULL argument");
    *out = NULL;
    if (tgt) {
        tg_status st = tg_lines_check_parallel(src, tgt);
        if (st) return st;
    }
    tg_corpus_options o = {0};
    if (opt) o = *opt;
    if (o.max_len < 0) return tg_error_set(TG_ERR_INVALID, "tg_corpus_new: max_len %lld < 0", (long long)o.max_len);
    tg_corpus *c = corpus_alloc(tgt != NULL);
    if (!c) return tg_error_set(TG_ERR_NOMEM, "tg_corpus_new: out of memory");
    tg_status st = TG_OK;
    for (int64_t i = 0; st == TG_OK && i < src->n; i++) {
        int32_t *s = NULL, *t = NULL;
        int64_t sn = 0, tn = 0;
        st = encode(src->line[i], &o.text, src_vocab, &s, &sn);
        if (st == TG_OK && tgt) st = encode(tgt->line[i], &o.text, tgt_vocab, &t, &tn);
        if (st) {
            st = tg_error_prefix(st, "'%s' line %lld", src->path, (long long)(i + 1));
        } else if (o.max_len > 0 && (sn + 1 > o.max_len || tn + 1 > o.max_len)) {
            bool is_src = sn + 1 > o.max_len;
            if (o.skip_long) c->skipped++;
            else
                st = tg_error_set(TG_ERR_INVALID,
                                  "'%s' line %lld: %lld tokens + </s> is longer than the model's max_len %lld",
                                  is_src ? src->path : tgt->path, (long long)(i + 1),
                                  (long long)(is_src ? sn : tn), (long long)o.max_len);
        } else {
            st = corpus_push(c, s, sn, t, tn, i + 1);
        }
        free(s);
        free(t);
    }
    if (st) {
        tg_corpus_free(c);
        return st;
    }
    *out = c;
    return TG_OK;
}

tg_status tg_corpus_from_ids(int64_t n, const int32_t *const *src, const int64_t *src_n,
                             const int32_t *const *tgt, const int64_t *tgt_n, tg_corpus **out) {
    if (n < 0 || (n > 0 && (!src || !src_n)) || (tgt && !tgt_n) || !out)
        return tg_error_set(TG_ERR_INVALID, "tg_corpus_from_ids: bad arguments");
    *out = NULL;
    tg_corpus *c = corpus_alloc(tgt != NULL);
    if (!c) return tg_error_set(TG_ERR_NOMEM, "tg_corpus_from_ids: out of memory");
    tg_status st = TG_OK;
    for (int64_t i = 0; st == TG_OK && i < n; i++) {
        if (src_n[i] < 0 || (tgt && tgt_n[i] < 0))
            st = tg_error_set(TG_ERR_INVALID, "tg_corpus_from_ids: negative length at %lld", (long long)i);
        else
            st = corpus_push(c, src[i], src_n[i], tgt ? tgt[i] : NULL, tgt ? tgt_n[i] : 0, i + 1);
    }
    if (st) {
        tg_corpus_free(c);
        return st;
    }
    *out = c;
    return TG_OK;
}

int64_t tg_corpus_size(const tg_corpus *c) { return c ? c->n : 0; }
int64_t tg_corpus_skipped(const tg_corpus *c) { return c ? c->skipped : 0; }
int64_t tg_corpus_line(const tg_corpus *c, int64_t i) { return (c && i >= 0 && i < c->n) ? c->line[i] : 0; }

const int32_t *tg_corpus_src(const tg_corpus *c, int64_t i, int64_t *n) {
    if (!c || i < 0 || i >= c->n) return NULL;
    if (n) *n = c->src_off[i + 1] - c->src_off[i];
    return c->src_ids + c->src_off[i];
}

const int32_t *tg_corpus_tgt(const tg_corpus *c, int64_t i, int64_t *n) {
    if (!c || !c->has_tgt || i < 0 || i >= c->n) return NULL;
    if (n) *n = c->tgt_off[i + 1] - c->tgt_off[i];
    return c->tgt_ids + c->tgt_off[i];
}

uint64_t tg_corpus_hash(const tg_corpus *c) {
    uint64_t h = 1469598103934665603ull;
#define MIX(x)                                                                      \
    do {                                                                            \
        uint64_t v_ = (uint64_t)(x);                                                \
        for (int b_ = 0; b_ < 8; b_++) h = (h ^ ((v_ >> (8 * b_)) & 0xFF)) * 1099511628211ull; \
    } while (0)
    if (!c) return h;
    MIX(c->n);
    MIX(c->has_tgt);
    for (int64_t i = 0; i < c->n; i++) {
        int64_t n;
        const int32_t *s = tg_corpus_src(c, i, &n);
        MIX(n);
        for (int64_t k = 0; k < n; k++) MIX((uint32_t)s[k]);
        if (!c->has_tgt) continue;
        s = tg_corpus_tgt(c, i, &n);
        MIX(n);
        for (int64_t k = 0; k < n; k++) MIX((uint32_t)s[k]);
    }
#undef MIX
    return h;
}

tg_status tg_corpus_batch(const tg_corpus *c, const int64_t *idx, int64_t n, tg_batch *out) {
    return tg__corpus_batch_at(c, idx, n, 0, out);
}

/* sequences with eos appended, and one class each as the targets */
static tg_status batch_classify(tg_batch *b, int64_t n, const int32_t *const *s, const int64_t *sn,
                                const int32_t *const *cls, int32_t eos) {
    tg_status st = tg__batch_build_eos(b, n, s, sn, NULL, NULL, eos);
    if (st) return st;
    if (!(b->tgt_out = malloc((size_t)n * sizeof *b->tgt_out))) {
        tg_batch_free(b);
        return tg_error_set(TG_ERR_NOMEM, "tg_corpus_batch: out of memory");
    }
    for (int64_t i = 0; i < n; i++) b->tgt_out[i] = cls[i][0];
    b->tgt_len = 1;
    b->tgt_tokens = n;
    b->classify = true;
    return TG_OK;
}

tg_status tg__corpus_batch_at(const tg_corpus *c, const int64_t *idx, int64_t n, int64_t epoch, tg_batch *out) {
    if (!c || !idx || n < 1 || !out) return tg_error_set(TG_ERR_INVALID, "tg_corpus_batch: bad arguments");
    if (c->mlm_dynamic) return batch_masked(c, idx, n, epoch, out);
    const int32_t **s = malloc((size_t)n * sizeof *s), **t = malloc((size_t)n * sizeof *t);
    int64_t *sn = malloc((size_t)n * sizeof *sn), *tn = malloc((size_t)n * sizeof *tn);
    tg_status st = (s && t && sn && tn) ? TG_OK : tg_error_set(TG_ERR_NOMEM, "tg_corpus_batch: out of memory");
    for (int64_t i = 0; st == TG_OK && i < n; i++) {
        if (idx[i] < 0 || idx[i] >= c->n) {
            st = tg_error_set(TG_ERR_INVALID, "tg_corpus_batch: pair %lld out of range", (long long)idx[i]);
            break;
        }
        s[i] = tg_corpus_src(c, idx[i], &sn[i]);
        if (c->has_tgt) t[i] = tg_corpus_tgt(c, idx[i], &tn[i]);
    }
    if (st == TG_OK && c->classify) st = batch_classify(out, n, s, sn, t, c->eos);
    else if (st == TG_OK && c->stream) st = tg__batch_build_lm_blocks_pad(out, n, t, tn, c->tgt_pad);
    else if (st == TG_OK && c->mlm) st = tg_batch_build_mlm(out, n, s, t, sn);
    else if (st == TG_OK) st = tg_batch_build(out, n, s, sn, c->has_tgt ? t : NULL, c->has_tgt ? tn : NULL);
    free(s);
    free(t);
    free(sn);
    free(tn);
    return st;
}

void tg_corpus_stats_get(const tg_corpus *c, tg_corpus_stats *out) {
    memset(out, 0, sizeof *out);
    if (!c) return;
    out->pairs = c->n;
    for (int64_t i = 0; i < c->n; i++) {
        int64_t sn = c->src_off[i + 1] - c->src_off[i], tn = c->tgt_off[i + 1] - c->tgt_off[i];
        out->src_tokens += sn;
        out->tgt_tokens += tn;
        if (sn > out->src_max) out->src_max = sn;
        if (tn > out->tgt_max) out->tgt_max = tn;
    }
    if (c->n > 0) {
        out->src_mean = (double)out->src_tokens / (double)c->n;
        out->tgt_mean = (double)out->tgt_tokens / (double)c->n;
        out->mean_len = c->has_tgt ? (double)(out->src_tokens + out->tgt_tokens) / (2.0 * (double)c->n)
                                   : out->src_mean;
    }
}

/* ---- the batcher ------------------------------------------------------------------------------- */

struct tg_batcher {
    const tg_corpus *c;
    int64_t max_tokens;
    uint64_t seed;
    bool shuffle;
    int64_t epoch, index; /* position: completed epochs, next batch of the current one */
    int64_t built;        /* epoch whose batches are in order/start/perm; -1 none */
    int64_t nbatch;
    int64_t *order; /* pair indices, batch after batch */
    int64_t *start; /* nbatch + 1 offsets into order */
    int64_t *perm;  /* batch visiting order */
    int64_t *last, nlast;
};

typedef struct {
    int64_t s, t, pos, idx;
} sort_key;

static int by_length(const void *a, const void *b) {
    const sort_key *x = a, *y = b;
    if (x->s != y->s) return x->s < y->s ? -1 : 1;
    if (x->t != y->t) return x->t < y->t ? -1 : 1;
    return x->pos < y->pos ? -1 : x->pos > y->pos; /* stable: keep the shuffled order */
}

/* SplitMix64 finaliser: decorrelates (seed, epoch) into one RNG seed. */
static uint64_t mix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static tg_status build_epoch(tg_batcher *b, int64_t epoch) {
    const tg_corpus *c = b->c;
    int64_t n = c->n;
    sort_key *k = malloc((size_t)n * sizeof *k);
    if (!k) return tg_error_set(TG_ERR_NOMEM, "tg_batcher: out of memory");
    tg_rng r;
    tg_rng_init(&r, mix64(b->seed ^ mix64((uint64_t)epoch)));
    for (int64_t i = 0; i < n; i++) b->order[i] = i;
    if (b->shuffle) /* Fisher–Yates */
        for (int64_t i = n - 1; i > 0; i--) {
            int64_t j = (int64_t)tg_rng_below(&r, (uint64_t)i + 1), x = b->order[i];
            b->order[i] = b->order[j];
            b->order[j] = x;
        }
    for (int64_t i = 0; i < n; i++) {
        int64_t p = b->order[i];
        k[i] = (sort_key){c->src_off[p + 1] - c->src_off[p], c->tgt_off[p + 1] - c->tgt_off[p], i, p};
    }
    qsort(k, (size_t)n, sizeof *k, by_length);
    /* greedy cut: a batch grows while B · (S + T) <= budget, S = longest source + </s>,
     * T = longest target + <s> (decoder input and output have the same length) */
    int64_t nb = 0, cnt = 0, S = 0, T = 0;
    b->start[0] = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t s = k[i].s + 1, t = c->has_tgt ? k[i].t + 1 : 0;
        int64_t S2 = s > S ? s : S, T2 = t > T ? t : T;
        if (cnt > 0 && (cnt + 1) * (S2 + T2) > b->max_tokens) {
            b->start[++nb] = i;
            cnt = 0;
            S2 = s;
            T2 = t;
        }
        S = S2;
        T = T2;
        cnt++;
        b->order[i] = k[i].idx;
    }
    b->start[++nb] = n;
    b->nbatch = nb;
    for (int64_t i = 0; i < nb; i++) b->perm[i] = i;
    if (b->shuffle)
        for (int64_t i = nb - 1; i > 0; i--) {
            int64_t j = (int64_t)tg_rng_below(&r, (uint64_t)i + 1), x = b->perm[i];
            b->perm[i] = b->perm[j];
            b->perm[j] = x;
        }
    free(k);
    b->built = epoch;
    return TG_OK;
}

void tg_batcher_free(tg_batcher *b) {
    if (!b) return;
    free(b->order);
    free(b->start);
    free(b->perm);
    free(b->last);
    free(b);
}

tg_status tg_batcher_new(const tg_corpus *c, int64_t max_tokens, uint64_t seed, bool shuffle, tg_batcher **out) {
    if (!c || !out) return tg_error_set(TG_ERR_INVALID, "tg_batcher_new: NULL argument");
    *out = NULL;
    if (c->n < 1) return tg_error_set(TG_ERR_INVALID, "tg_batcher_new: the corpus has no sentence pairs");
    if (max_tokens < 1)
        return tg_error_set(TG_ERR_INVALID, "tg_batcher_new: token budget %lld < 1", (long long)max_tokens);
    tg_batcher *b = calloc(1, sizeof *b);
    if (!b) return tg_error_set(TG_ERR_NOMEM, "tg_batcher_new: out of memory");
    b->c = c;
    b->max_tokens = max_tokens;
    b->seed = seed;
    b->shuffle = shuffle;
    b->built = -1;
    b->order = malloc((size_t)c->n * sizeof *b->order);
    b->start = malloc((size_t)(c->n + 1) * sizeof *b->start);
    b->perm = malloc((size_t)c->n * sizeof *b->perm);
    b->last = malloc((size_t)c->n * sizeof *b->last);
    tg_status st = (b->order && b->start && b->perm && b->last)
                       ? build_epoch(b, 0)
                       : tg_error_set(TG_ERR_NOMEM, "tg_batcher_new: out of memory");
    if (st) {
        tg_batcher_free(b);
        return st;
    }
    *out = b;
    return TG_OK;
}

tg_status tg_batcher_next(tg_batcher *b, tg_batch *out) {
    if (!b || !out) return tg_error_set(TG_ERR_INVALID, "tg_batcher_next: NULL argument");
    if (b->built != b->epoch) {
        tg_status st = build_epoch(b, b->epoch);
        if (st) return st;
    }
    int64_t k = b->perm[b->index], lo = b->start[k], hi = b->start[k + 1];
    tg_status st = tg__corpus_batch_at(b->c, b->order + lo, hi - lo, b->epoch, out);
    if (st) return st;
    memcpy(b->last, b->order + lo, (size_t)(hi - lo) * sizeof *b->last);
    b->nlast = hi - lo;
    if (++b->index == b->nbatch) { /* the epoch is complete */
        b->epoch++;
        b->index = 0;
    }
    return TG_OK;
}

const int64_t *tg_batcher_last(const tg_batcher *b, int64_t *n) {
    if (n) *n = b ? b->nlast : 0;
    return b ? b->last : NULL;
}

int64_t tg_batcher_epoch(const tg_batcher *b) { return b ? b->epoch : 0; }
int64_t tg_batcher_index(const tg_batcher *b) { return b ? b->index : 0; }

/* The greedy cut depends only on the sequence of sorted lengths, which is the same in every
 * epoch, so every epoch has the same number of batches. */
int64_t tg_batcher_count(const tg_batcher *b) { return b ? b->nbatch : 0; }

tg_status tg_batcher_seek(tg_batcher *b, int64_t epoch, int64_t index) {
    if (!b || epoch < 0 || index < 0)
        return tg_error_set(TG_ERR_INVALID, "tg_batcher_seek: bad position (%lld, %lld)", (long long)epoch,
                            (long long)index);
    tg_status st = build_epoch(b, epoch);
    if (st) return st;
    if (index >= b->nbatch)
        return tg_error_set(TG_ERR_INVALID, "tg_batcher_seek: epoch %lld has %lld batches, not %lld",
                            (long long)epoch, (long long)b->nbatch, (long long)index + 1);
    b->epoch = epoch;
    b->index = index;
    return TG_OK;
}
