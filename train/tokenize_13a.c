/* sacreBLEU's "13a" tokenizer (mteval-v13a.pl, as used by WMT), reimplemented in C.
 *
 * sacreBLEU 2.x (tokenizers/tokenizer_13a.py + tokenizer_re.py) does, on a str line:
 *   1. line.replace('<skipped>', ''), .replace('-\n', ''), .replace('\n', ' ')
 *   2. if '&' in line: &quot; -> "   then &amp; -> &   then &lt; -> <   then &gt; -> >
 *      (four sequential passes over the whole line: "&amp;lt;" becomes "&lt;" and then "<",
 *      while "&amp;quot;" stays "&quot;" because the &quot; pass came first)
 *   3. line = ' ' + line + ' '
 *   4. four re.sub passes, each left to right over non-overlapping matches:
 *      a. ([\{-\~\[-\` -\&\(-\+\:-\@\/])  -> ' \1 '   i.e. each of  space ! " # $ % & ( ) * + /
 *         : ; < = > ? @ [ \ ] ^ _ ` { | } ~  gets spaces around it (not ' - . , or digits)
 *      b. ([^0-9])([\.,])  -> '\1 \2 '    period/comma not preceded by a digit
 *      c. ([\.,])([^0-9])  -> ' \1 \2'    period/comma not followed by a digit
 *      d. ([0-9])(-)       -> '\1 \2 '    dash preceded by a digit
 *   5. ' '.join(line.split())
 * BLEU calls it on sent.rstrip(); the tokenizer itself does not strip (a final "-\n" is
 * deleted by step 1 here, but BLEU's rstrip removes the "\n" first and keeps the "-").
 *
 * Python works on code points; we work on UTF-8 bytes. This gives the same result for valid
 * UTF-8 because every pattern character that must match a specific value is ASCII, and ASCII
 * bytes never occur inside a multi-byte sequence. The only non-ASCII-capable class is
 * [^0-9]: in (b) it is the byte just before an ASCII '.'/',', i.e. the last byte of a code
 * point, and in (c) the byte just after it, i.e. the first byte of one; either way the match
 * decision is the code point's, and the bytes of the code point not consumed by the byte
 * match cannot start a match of their own, so the output bytes are identical. */
#include "tg/metrics.h"
#include "train/metrics-impl.h"

#include <stdlib.h>
#include <string.h>

/* out = in with every non-overlapping occurrence of pat (left to right) replaced by rep. */
static tg_status replace_all(const tg__text_buf *in, const char *pat, const char *rep,
                             tg__text_buf *out) {
    size_t pl = strlen(pat), rl = strlen(rep);
    out->len = 0;
    tg_status st = tg__text_buf_reserve(out, in->len);
    for (size_t i = 0; st == TG_OK && i < in->len;) {
        if (in->len - i >= pl && memcmp(in->p + i, pat, pl) == 0) {
            st = tg__text_buf_append(out, rep, rl);
            i += pl;
        } else {
            st = tg__text_buf_append(out, in->p + i, 1);
            i++;
        }
    }
    return st;
}

/* Step 4a's character class. */
static int is_punct_13a(unsigned char c) {
    return (c >= 0x7B && c <= 0x7E) || (c >= 0x5B && c <= 0x60) || (c >= 0x20 && c <= 0x26) ||
           (c >= 0x28 && c <= 0x2B) || (c >= 0x3A && c <= 0x40) || c == '/';
}

static int is_digit(unsigned char c) {
    return c >= '0' && c <= '9';
}
static int is_pc(unsigned char c) {
    return c == '.' || c == ',';
}

/* One of the fixed-width regex passes 4b-4d: at each position i (after the previous match),
 * if the two bytes match, emit the replacement and skip both, else copy one byte. */
enum re_pass { RE_B, RE_C, RE_D };

static tg_status regex_pass(const tg__text_buf *in, enum re_pass which, tg__text_buf *out) {
    out->len = 0;
    tg_status st = tg__text_buf_reserve(out, 2 * in->len);
    const unsigned char *u = (const unsigned char *)in->p;
    for (size_t i = 0; st == TG_OK && i < in->len;) {
        char rep[4];
        int hit = 0;
        if (i + 1 < in->len) {
            unsigned char a = u[i], b = u[i + 1];
            switch (which) {
            case RE_B: /* ([^0-9])([\.,]) -> '\1 \2 ' */
                hit = !is_digit(a) && is_pc(b);
                rep[0] = (char)a, rep[1] = ' ', rep[2] = (char)b, rep[3] = ' ';
                break;
            case RE_C: /* ([\.,])([^0-9]) -> ' \1 \2' */
                hit = is_pc(a) && !is_digit(b);
                rep[0] = ' ', rep[1] = (char)a, rep[2] = ' ', rep[3] = (char)b;
                break;
            case RE_D: /* ([0-9])(-) -> '\1 \2 ' */
                hit = is_digit(a) && b == '-';
                rep[0] = (char)a, rep[1] = ' ', rep[2] = '-', rep[3] = ' ';
                break;
            }
        }
        if (hit) {
            st = tg__text_buf_append(out, rep, 4);
            i += 2;
        } else {
            st = tg__text_buf_append(out, in->p + i, 1);
            i++;
        }
    }
    return st;
}

tg_status tg__tokenize_13a(const char *s, size_t len, tg__text_buf *out) {
    tg__text_buf a = {0}, b = {0};
    tg__text_toks toks = {0};
    tg_status st = tg__text_buf_append(&a, s, len);
    /* Steps 1-2, each a full pass over the previous result, as Python's chained replace. */
    if (st == TG_OK) st = replace_all(&a, "<skipped>", "", &b);
    if (st == TG_OK) st = replace_all(&b, "-\n", "", &a);
    if (st == TG_OK) st = replace_all(&a, "\n", " ", &b);
    if (st == TG_OK && b.len && memchr(b.p, '&', b.len)) {
        st = replace_all(&b, "&quot;", "\"", &a);
        if (st == TG_OK) st = replace_all(&a, "&amp;", "&", &b);
        if (st == TG_OK) st = replace_all(&b, "&lt;", "<", &a);
        if (st == TG_OK) st = replace_all(&a, "&gt;", ">", &b);
    }
    /* Steps 3 and 4a: b -> a with padding and spaced punctuation. */
    if (st == TG_OK) {
        a.len = 0;
        st = tg__text_buf_append(&a, " ", 1);
    }
    for (size_t i = 0; st == TG_OK && i < b.len; i++) {
        if (is_punct_13a((unsigned char)b.p[i])) {
            char t[3] = {' ', b.p[i], ' '};
            st = tg__text_buf_append(&a, t, 3);
        } else {
            st = tg__text_buf_append(&a, b.p + i, 1);
        }
    }
    if (st == TG_OK) st = tg__text_buf_append(&a, " ", 1);
    if (st == TG_OK) st = regex_pass(&a, RE_B, &b);
    if (st == TG_OK) st = regex_pass(&b, RE_C, &a);
    if (st == TG_OK) st = regex_pass(&a, RE_D, &b);
    /* Step 5: collapse (Unicode) whitespace runs to single spaces and trim. */
    if (st == TG_OK) st = tg__text_split(b.p, b.len, &toks);
    out->len = 0;
    if (st == TG_OK) st = tg__text_buf_append(out, "", 0);
    for (size_t i = 0; st == TG_OK && i < toks.n; i++) {
        if (i) st = tg__text_buf_append(out, " ", 1);
        if (st == TG_OK) st = tg__text_buf_append(out, toks.v[i].p, toks.v[i].len);
    }
    tg__text_toks_free(&toks);
    tg__text_buf_free(&a);
    tg__text_buf_free(&b);
    return st;
}

tg_status tg_metric_tokenize_13a(const char *text, char **out) {
    if (!text || !out)
        return tg_error_set(TG_ERR_INVALID, "tg_metric_tokenize_13a: %s is NULL",
                            !text ? "text" : "out");
    tg_status st = tg__text_utf8_check("tg_metric_tokenize_13a", "text", 0, text);
    if (st != TG_OK) return st;
    tg__text_buf b = {0};
    st = tg__tokenize_13a(text, strlen(text), &b);
    if (st != TG_OK) {
        tg__text_buf_free(&b);
        return tg_error_prefix(st, "tg_metric_tokenize_13a");
    }
    *out = b.p; /* non-NULL: tg__tokenize_13a always appends at least "" */
    return TG_OK;
}
