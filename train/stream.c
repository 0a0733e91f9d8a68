/* Token streams for language models (nanoGPT / llm.c style): documents encoded and joined into
 * one stream of ids, each document as <s> tokens </s> (</s> is the end-of-text token), line
 * breaks inside a document the token "↵" (U+21B5), and the stream cut into blocks.
 *
 * A block of `block` model positions is stored as block + 1 ids, the next block starting at
 * its last id: the model reads ids [0, block) and predicts ids [1, block + 1) (teacher forcing
 * on a window of the stream, tg_batch_build_lm_blocks), so every id but the stream's first is a
 * target exactly once. The last block may be shorter (its batch is padded); a stream of fewer
 * than 2 ids has no block. */
#include <stdlib.h>
#include <string.h>

#include "tg/tokenizer.h"
#include "train/train-impl.h"

const char TG_STREAM_NEWLINE[] = "\xE2\x86\xB5"; /* ↵ */

static bool blank(const char *s) {
    for (; *s; s++)
        if (*s != ' ' && *s != '\t' && *s != '\r' && *s != '\n') return false;
    return true;
}

typedef struct {
    int32_t *ids;
    int64_t n, cap;
} id_buf;

static tg_status push(id_buf *b, int32_t id) {
    if (b->n == b->cap) {
        int64_t cap = b->cap ? 2 * b->cap : 4096;
        int32_t *p = realloc(b->ids, (size_t)cap * sizeof *p);
        if (!p) return tg_error_set(TG_ERR_NOMEM, "token stream: out of memory");
        b->ids = p;
        b->cap = cap;
    }
    b->ids[b->n++] = id;
    return TG_OK;
}

/* Line `line` of a document: the line break's ids (↵) before it unless it opens the document,
 * then its tokens. */
static tg_status push_line(id_buf *b, const char *line, bool first, const tg_vocab *v, const tg_text_options *to,
                           const int32_t *nl, int64_t nnl) {
    tg_status st = TG_OK;
    for (int64_t k = 0; !first && st == TG_OK && k < nnl; k++) st = push(b, nl[k]);
    char **toks = NULL;
    int64_t nt = 0;
    if (st == TG_OK) st = tg_tokenize(line, to, &toks, &nt);
    for (int64_t k = 0; st == TG_OK && k < nt; k++) st = push(b, tg_vocab_id(v, toks[k]));
    tg_tokens_free(toks, nt);
    return st;
}

tg_status tg_stream_encode(const tg_lines *const *texts, int ntexts, const tg_vocab *v, const tg_stream_options *o,
                           int32_t **ids, int64_t *n) {
    if (!texts || ntexts < 1 || !v || !o || !ids || !n) return tg_error_set(TG_ERR_INVALID, "tg_stream_encode: NULL argument");
    *ids = NULL;
    *n = 0;
    /* the specials: <s>, </s> and ↵; a tokenizer with a layout of its own (GPT-2's) joins its
     * documents with its end-of-text token alone (no start token where it is the same one) and
     * breaks lines with its own encoding of "\n" */
    int32_t nl[8] = {tg_vocab_id(v, TG_STREAM_NEWLINE)}, bos = TG_BOS, eos = TG_EOS;
    int64_t nnl = 1;
    const tg_tokenizer *tk = o->text.tokenizer;
    tg_status st = TG_OK;
    if (tk && (tg_tokenizer_kind(tk) == TG_TOK_WORDPIECE || tg_tokenizer_kind(tk) == TG_TOK_BPE_BYTES)) {
        eos = tg_tokenizer_special(tk, "eos");
        bos = tg_tokenizer_special(tk, "bos") == eos ? -1 : tg_tokenizer_special(tk, "bos");
        char **p = NULL;
        st = eos < 0 ? tg_error_set(TG_ERR_INVALID, "tg_stream_encode: the tokenizer has no end-of-text token")
                     : tg_tokenizer_pieces(tk, "\n", 1, &p, &nnl);
        if (st == TG_OK && (nnl < 1 || nnl > 8)) st = tg_error_set(TG_ERR_INVALID, "tg_stream_encode: a line break of %lld tokens", (long long)nnl);
        for (int64_t k = 0; st == TG_OK && k < nnl; k++) nl[k] = tg_vocab_id(v, p[k]);
        if (p) tg_tokens_free(p, nnl);
    }
    id_buf b = {0};
    for (int f = 0; st == TG_OK && f < ntexts; f++) {
        const tg_lines *t = texts[f];
        bool open = false; /* inside a document */
        for (int64_t i = 0; st == TG_OK && i < t->n; i++) {
            const char *line = t->line[i];
            if (o->docs != TG_DOCS_FILE && blank(line)) { /* a blank line ends a document */
                if (open) st = push(&b, eos);
                open = false;
                continue;
            }
            if (!open && bos >= 0) st = push(&b, bos);
            if (st == TG_OK) st = push_line(&b, line, !open, v, &o->text, nl, nnl);
            open = true;
            if (o->docs == TG_DOCS_LINES && st == TG_OK) { /* every line a document */
                st = push(&b, eos);
                open = false;
            }
        }
        if (open && st == TG_OK) st = push(&b, eos); /* a file ends its last document */
        if (st) st = tg_error_prefix(st, "'%s'", t->path ? t->path : "?");
    }
    if (st) {
        free(b.ids);
        return st;
    }
    *ids = b.ids;
    *n = b.n;
    return TG_OK;
}

tg_status tg_corpus_new_stream(const int32_t *ids, int64_t n, int64_t block, tg_corpus **out) {
    if (!out || (n > 0 && !ids) || n < 0) return tg_error_set(TG_ERR_INVALID, "tg_corpus_new_stream: NULL argument");
    *out = NULL;
    if (block < 1) return tg_error_set(TG_ERR_INVALID, "tg_corpus_new_stream: block %lld < 1", (long long)block);
    int64_t nb = n < 2 ? 0 : (n - 2) / block + 1; /* windows starting at 0, block, 2 block, ... < n - 1 */
    const int32_t **seq = malloc((size_t)(nb ? nb : 1) * sizeof *seq);
    int64_t *len = malloc((size_t)(nb ? nb : 1) * sizeof *len);
    tg_status st = seq && len ? TG_OK : tg_error_set(TG_ERR_NOMEM, "tg_corpus_new_stream: out of memory");
    for (int64_t i = 0; st == TG_OK && i < nb; i++) {
        int64_t lo = i * block, hi = lo + block + 1 < n ? lo + block + 1 : n;
        seq[i] = ids + lo;
        len[i] = hi - lo;
    }
    /* the blocks are the target side; sources stay empty, as tg_corpus_new_lm's */
    static const int32_t none = 0;
    const int32_t **src = st == TG_OK ? malloc((size_t)(nb ? nb : 1) * sizeof *src) : NULL;
    int64_t *src_n = st == TG_OK ? calloc((size_t)(nb ? nb : 1), sizeof *src_n) : NULL;
    if (st == TG_OK && (!src || !src_n)) st = tg_error_set(TG_ERR_NOMEM, "tg_corpus_new_stream: out of memory");
    for (int64_t i = 0; st == TG_OK && i < nb; i++) src[i] = &none;
    if (st == TG_OK) st = tg_corpus_from_ids(nb, src, src_n, seq, len, out);
    if (st == TG_OK) tg__train_corpus_set_stream(*out);
    free(seq);
    free(len);
    free(src);
    free(src_n);
    return st;
}
