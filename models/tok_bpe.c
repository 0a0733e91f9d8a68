/* Byte-level BPE as GPT-2's tokenizer.json describes it (HF tokenizers' ByteLevel pre-tokenizer
 * with its regex, and the BPE model):
 *  1. split the text with GPT-2's pattern
 *       's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *     (hand-written below: the alternatives in order at each position, leftmost first);
 *  2. map every byte of a piece to a printable character (bytes_to_unicode: the printable
 *     Latin-1 bytes stand for themselves, the other 68 become U+0100 onwards in byte order);
 *  3. start from one symbol per byte and merge the adjacent pair of lowest merge rank until
 *     no pair has a rank; each final symbol is a vocabulary id. */
#include <stdlib.h>
#include <string.h>

#include "models/tok-impl.h"

struct tg__bpe_merge {
    uint64_t key; /* left id << 32 | right id; 0 with rank < 0: empty */
    int32_t rank, id;
};

static bool printable(unsigned b) { return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174; }

static uint32_t byte_cp(unsigned b) {
    if (printable(b)) return b;
    uint32_t k = 0; /* the how-many-th non-printable byte */
    for (unsigned x = 0; x < b; x++) k += !printable(x);
    return 256 + k;
}

const char *tg__bpe_byte_char(unsigned b) {
    static _Thread_local char tab[256][5];
    static _Thread_local bool done;
    if (!done) {
        for (unsigned x = 0; x < 256; x++) tab[x][tg__utf8_put(byte_cp(x), tab[x])] = '\0';
        done = true;
    }
    return tab[b & 255];
}

int tg__bpe_char_byte(uint32_t cp) {
    for (unsigned b = 0; b < 256; b++)
        if (byte_cp(b) == cp) return (int)b;
    return -1;
}

static uint64_t mix(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return k;
}

static tg__bpe_merge *slot(const tg_tokenizer *t, uint64_t key) {
    uint64_t m = (uint64_t)t->table_size - 1, i = mix(key) & m;
    while (t->table[i].rank >= 0 && t->table[i].key != key) i = (i + 1) & m;
    return &t->table[i];
}

tg_status tg__bpe_prepare(tg_tokenizer *t) {
    int64_t size = 16;
    while (size < 2 * t->nmerges + 2) size *= 2;
    t->table = malloc((size_t)size * sizeof *t->table);
    if (!t->table) return tg_error_set(TG_ERR_NOMEM, "bpe: out of memory");
    t->table_size = size;
    for (int64_t i = 0; i < size; i++) t->table[i].rank = -1, t->table[i].key = 0;
    char buf[512];
    for (int64_t r = 0; r < t->nmerges; r++) {
        const char *m = t->merges[r], *sp = strchr(m, ' ');
        size_t la = sp ? (size_t)(sp - m) : 0, lb = sp ? strlen(sp + 1) : 0;
        if (!sp || la == 0 || lb == 0 || la + lb >= sizeof buf)
            return tg_error_set(TG_ERR_FORMAT, "merge %lld '%s' is not two tokens joined by one space", (long long)r, m);
        memcpy(buf, m, la);
        buf[la] = '\0';
        int32_t a = tg_vocab_find(t->vocab, buf), b = tg_vocab_find(t->vocab, sp + 1);
        memcpy(buf + la, sp + 1, lb + 1);
        int32_t ab = tg_vocab_find(t->vocab, buf);
        if (a < 0 || b < 0 || ab < 0)
            return tg_error_set(TG_ERR_FORMAT, "merge %lld '%s' names a token the vocabulary lacks", (long long)r, m);
        tg__bpe_merge *s = slot(t, (uint64_t)a << 32 | (uint32_t)b);
        if (s->rank < 0) *s = (tg__bpe_merge){(uint64_t)a << 32 | (uint32_t)b, (int32_t)r, ab};
    }
    return TG_OK;
}

/* step 3 on the mapped piece */
static tg_status bpe_word(const tg_tokenizer *t, const unsigned char *p, size_t n, tg__ids *out) {
    int32_t *sym = malloc((n ? n : 1) * sizeof *sym);
    if (!sym) return tg_error_set(TG_ERR_NOMEM, "bpe: out of memory");
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t id = tg_vocab_find(t->vocab, tg__bpe_byte_char(p[i]));
        if (id < 0) id = t->unk;
        if (id >= 0) sym[k++] = id; /* a byte the vocabulary lacks, without unk: dropped (as HF) */
    }
    for (;;) {
        int32_t best = -1, best_id = -1;
        size_t at = 0;
        for (size_t i = 0; i + 1 < k; i++) {
            tg__bpe_merge *s = slot(t, (uint64_t)sym[i] << 32 | (uint32_t)sym[i + 1]);
            if (s->rank >= 0 && (best < 0 || s->rank < best)) best = s->rank, best_id = s->id, at = i;
        }
        if (best < 0) break;
        sym[at] = best_id;
        memmove(sym + at + 1, sym + at + 2, (k - at - 2) * sizeof *sym);
        k--;
    }
    tg_status st = TG_OK;
    for (size_t i = 0; st == TG_OK && i < k; i++)
        if (!tg__ids_put(out, sym[i])) st = tg_error_set(TG_ERR_NOMEM, "bpe: out of memory");
    free(sym);
    return st;
}

enum { C_SPACE, C_LETTER, C_NUMBER, C_OTHER };
static int cls(uint32_t cp) {
    if (tg__uni_space(cp)) return C_SPACE;
    int32_t f = tg__uni_flags(cp);
    return (f & TG_UNI_LETTER) ? C_LETTER : (f & TG_UNI_NUMBER) ? C_NUMBER : C_OTHER;
}

/* the end of the run of class c from byte i */
static size_t run(const char *s, size_t len, size_t i, int c) {
    while (i < len) {
        size_t j = i;
        if (cls(tg__utf8_next(s, len, &j)) != c) break;
        i = j;
    }
    return i;
}

/* step 1: the length of the piece at s[i..len) */
static size_t piece_end(const char *s, size_t len, size_t i) {
    static const char *const contractions[] = {"'s", "'t", "'re", "'ve", "'m", "'ll", "'d"};
    if (s[i] == '\'')
        for (int k = 0; k < 7; k++) {
            size_t l = strlen(contractions[k]);
            if (l <= len - i && !memcmp(s + i, contractions[k], l)) return i + l;
        }
    size_t j = i, after;
    uint32_t cp = tg__utf8_next(s, len, &j);
    int c = cls(cp);
    if (cp == ' ' && j < len) { /* " ?X+" */
        after = j;
        int c2 = cls(tg__utf8_next(s, len, &after));
        if (c2 != C_SPACE) return run(s, len, j, c2);
    }
    if (c != C_SPACE) return run(s, len, i, c);
    /* \s+(?!\S) | \s+ : the white space run, less its last character when a non-space follows
     * and the run is longer than one */
    size_t e = run(s, len, i, C_SPACE), last = i;
    if (e == len) return e;
    for (size_t q = i; q < e;) {
        last = q;
        tg__utf8_next(s, len, &q);
    }
    return last > i ? last : e;
}

tg_status tg__bpe_encode(const tg_tokenizer *t, const char *s, size_t len, tg__ids *out) {
    char *tmp = NULL;
    if (t->add_prefix_space && len && s[0] != ' ') {
        if (!(tmp = malloc(len + 1))) return tg_error_set(TG_ERR_NOMEM, "bpe: out of memory");
        tmp[0] = ' ';
        memcpy(tmp + 1, s, len);
        s = tmp;
        len++;
    }
    tg_status st = TG_OK;
    for (size_t i = 0; st == TG_OK && i < len;) {
        size_t e = piece_end(s, len, i);
        st = bpe_word(t, (const unsigned char *)s + i, e - i, out);
        i = e;
    }
    free(tmp);
    return st;
}
