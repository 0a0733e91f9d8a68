/* WordPiece as BERT's tokenizer.json describes it (HF tokenizers' BertNormalizer,
 * BertPreTokenizer and WordPiece model), on one piece of text without special tokens:
 *  1. normalise: clean (drop NUL, U+FFFD and the categories Cc Cf Co Cs except tab,
 *     newline and carriage return; unassigned code points stay, as in HF; white space becomes
 *     ' '), put spaces around CJK ideographs,
 *     strip accents (NFD, then drop Mn) and lower-case, each character by itself, in this order;
 *  2. pre-tokenise: split on white space, and every punctuation character (P* or ASCII
 *     punctuation) is a word of its own;
 *  3. each word: longer than max_word_chars characters -> [UNK]; else greedy longest match from
 *     the left, pieces after the first carrying the prefix "##"; a word with a position no
 *     piece matches is [UNK] as a whole. */
#include <stdlib.h>
#include <string.h>

#include "models/tok-impl.h"

/* the CJK Unified Ideographs blocks that BERT's original code lists (not all of CJK: Hiragana,
 * Katakana and Hangul are letters like any other) */
static bool is_cjk(uint32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

static bool put_cp(tg__buf *b, uint32_t cp) {
    char u[4];
    return tg__buf_put(b, u, (size_t)tg__utf8_put(cp, u));
}

/* lower-case one character into b */
static bool put_lower(const tg_tokenizer *t, tg__buf *b, uint32_t cp) {
    if (!t->lowercase) return put_cp(b, cp);
    if (cp >= 'A' && cp <= 'Z') return put_cp(b, cp + 32);
    const char *lo = tg__uni_lower(cp);
    return lo ? tg__buf_put(b, lo, strlen(lo)) : put_cp(b, cp);
}

/* step 1 on one character */
static bool normalise(const tg_tokenizer *t, tg__buf *b, uint32_t cp) {
    if (t->clean_text) {
        if (cp == 0 || cp == 0xFFFD) return true;
        bool ws = cp == '\t' || cp == '\n' || cp == '\r';
        if (!ws && (tg__uni_flags(cp) & TG_UNI_OTHER)) return true;
        if (ws || tg__uni_space(cp)) cp = ' ';
    }
    if (t->chinese_chars && is_cjk(cp)) return tg__buf_put(b, " ", 1) && put_cp(b, cp) && tg__buf_put(b, " ", 1);
    if (!t->strip_accents) return put_lower(t, b, cp);
    if (tg__uni_flags(cp) & TG_UNI_MARK_NS) return true;
    char hangul[16];
    const char *s = tg__uni_strip(cp, hangul);
    if (!s) return put_lower(t, b, cp);
    size_t n = strlen(s), i = 0;
    while (i < n)
        if (!put_lower(t, b, tg__utf8_next(s, n, &i))) return false;
    return true;
}

/* step 3 on the word w[0..n) */
static tg_status word(const tg_tokenizer *t, const char *w, size_t n, tg__ids *out) {
    size_t nch = 0;
    for (size_t i = 0; i < n; nch++) tg__utf8_next(w, n, &i);
    if ((int64_t)nch > t->max_word_chars)
        return tg__ids_put(out, t->unk) ? TG_OK : tg_error_set(TG_ERR_NOMEM, "wordpiece: out of memory");
    size_t *starts = malloc((nch + 1) * sizeof *starts); /* byte offset of each character */
    if (!starts) return tg_error_set(TG_ERR_NOMEM, "wordpiece: out of memory");
    for (size_t i = 0, k = 0; i < n; k++) {
        starts[k] = i;
        tg__utf8_next(w, n, &i);
    }
    starts[nch] = n;
    size_t pl = strlen(t->prefix);
    char *cand = malloc(pl + n + 1);
    if (!cand) {
        free(starts);
        return tg_error_set(TG_ERR_NOMEM, "wordpiece: out of memory");
    }
    int64_t mark = out->n;
    bool bad = false;
    for (size_t s = 0; s < nch && !bad;) {
        size_t e = nch;
        int32_t id = -1;
        for (; e > s; e--) {
            size_t off = 0;
            if (s > 0) memcpy(cand, t->prefix, off = pl);
            memcpy(cand + off, w + starts[s], starts[e] - starts[s]);
            cand[off + starts[e] - starts[s]] = '\0';
            if ((id = tg_vocab_find(t->vocab, cand)) >= 0) break;
        }
        if (id < 0) bad = true;
        else if (!tg__ids_put(out, id)) {
            free(cand);
            free(starts);
            return tg_error_set(TG_ERR_NOMEM, "wordpiece: out of memory");
        }
        s = e;
    }
    free(cand);
    free(starts);
    if (bad) {
        out->n = mark;
        if (!tg__ids_put(out, t->unk)) return tg_error_set(TG_ERR_NOMEM, "wordpiece: out of memory");
    }
    return TG_OK;
}

tg_status tg__wordpiece_encode(const tg_tokenizer *t, const char *s, size_t len, tg__ids *out) {
    tg__buf b = {0};
    bool ok = tg__buf_put(&b, "", 0);
    for (size_t i = 0; ok && i < len;) ok = normalise(t, &b, tg__utf8_next(s, len, &i));
    if (!ok) {
        free(b.p);
        return tg_error_set(TG_ERR_NOMEM, "wordpiece: out of memory");
    }
    tg_status st = TG_OK;
    size_t w0 = 0; /* start of the current word */
    for (size_t i = 0; st == TG_OK && i <= b.n;) {
        size_t at = i;
        uint32_t cp = i < b.n ? tg__utf8_next(b.p, b.n, &i) : (i++, ' ');
        bool space = tg__uni_space(cp), punct = !space && (tg__uni_flags(cp) & TG_UNI_PUNCT);
        if (!space && !punct) continue;
        if (at > w0) st = word(t, b.p + w0, at - w0, out);
        if (st == TG_OK && punct) st = word(t, b.p + at, i - at, out);
        w0 = i;
    }
    free(b.p);
    return st;
}
