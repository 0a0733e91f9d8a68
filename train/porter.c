/* The Porter (1980) stemmer exactly as NLTK's PorterStemmer() runs it by default (mode
 * NLTK_EXTENSIONS, nltk/stem/porter.py), on Unicode code points: METEOR's stem matching.
 *
 * NLTK's departures from the original algorithm, all reproduced: a pool of irregular forms
 * (skies -> sky, dying -> die, ...); words of at most 2 characters are left alone; step 1a
 * maps a 4-letter "-ies" to "-ie"; step 1b maps "-ied" to "-ie" (4 letters) or "-i"; step 1c
 * turns y into i only after a consonant that is not the first letter; step 2 first reduces
 * "-alli" to "-al" and repeats, uses "-bli" -> "-ble" (not "-abli"), and adds "-fulli" ->
 * "-ful" and "-logi" -> "-log" (measured on the stem with its "l"); "cvc" also holds for a
 * 2-letter vowel-consonant stem. Letters are only a, e, i, o, u and y; any other code point
 * (ñ, é, a digit) is a consonant, as in Python. */
#include "tg/metrics.h"
#include "train/metrics-impl.h"

#include <stdlib.h>
#include <string.h>

/* A word being stemmed: w[0, n), edited in place (no rule makes a word longer). */
typedef struct word {
    uint32_t *w;
    size_t n;
} word;

static int is_vowel(uint32_t c) {
    return c == 'a' || c == 'e' || c == 'i' || c == 'o' || c == 'u';
}

/* Porter's consonant: not a vowel, and y only when it follows a vowel (or starts the word):
 * a y after a consonant is a vowel (NLTK's _consonant_flags and _is_consonant agree). */
static int is_cons(const uint32_t *w, size_t i) {
    if (is_vowel(w[i])) return 0;
    if (w[i] != 'y') return 1;
    return i == 0 ? 1 : !is_cons(w, i - 1);
}

/* m in [C](VC)^m[V]: the number of vowel-to-consonant transitions of w[0, n). */
static int measure(const uint32_t *w, size_t n) {
    int m = 0;
    for (size_t i = 1; i < n; i++)
        if (!is_cons(w, i - 1) && is_cons(w, i)) m++;
    return m;
}

static int contains_vowel(const uint32_t *w, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!is_cons(w, i)) return 1;
    return 0;
}

static int ends_double_cons(const uint32_t *w, size_t n) {
    return n >= 2 && w[n - 1] == w[n - 2] && is_cons(w, n - 1);
}

/* *o: consonant-vowel-consonant, the last not w, x or y; NLTK also accepts a 2-letter
 * vowel-consonant word. */
static int ends_cvc(const uint32_t *w, size_t n) {
    if (n >= 3 && is_cons(w, n - 3) && !is_cons(w, n - 2) && is_cons(w, n - 1) && w[n - 1] != 'w' &&
        w[n - 1] != 'x' && w[n - 1] != 'y')
        return 1;
    return n == 2 && !is_cons(w, 0) && is_cons(w, 1);
}

static int ends_with(const word *x, const char *suf) {
    size_t k = strlen(suf);
    if (k > x->n) return 0;
    for (size_t i = 0; i < k; i++)
        if (x->w[x->n - k + i] != (unsigned char)suf[i]) return 0;
    return 1;
}

/* Replace the last `drop` code points by the ASCII string rep. */
static void replace(word *x, size_t drop, const char *rep) {
    x->n -= drop;
    for (const char *p = rep; *p; p++)
        x->w[x->n++] = (unsigned char)*p;
}

/* Conditions on the stem (the word without the suffix) of a rule. */
enum cond { ANY, M0, M1, ION, LOGI };

typedef struct rule {
    const char *suffix, *rep;
    enum cond cond;
} rule;

static int holds(enum cond c, const uint32_t *s, size_t n) {
    switch (c) {
    case ANY:
        return 1;
    case M0:
        return measure(s, n) > 0;
    case M1:
        return measure(s, n) > 1;
    case ION:
        return measure(s, n) > 1 && n > 0 && (s[n - 1] == 's' || s[n - 1] == 't');
    case LOGI:
        return measure(s, n + 1) > 0; /* NLTK measures word[:-3]: the stem and its "l" */
    }
    return 0;
}

/* NLTK's _apply_rule_list: the first rule whose suffix ends the word decides; if its
 * condition fails the word is kept. */
static void apply_rules(word *x, const rule *rules, size_t nrules) {
    for (size_t i = 0; i < nrules; i++) {
        if (!ends_with(x, rules[i].suffix)) continue;
        size_t k = strlen(rules[i].suffix);
        if (holds(rules[i].cond, x->w, x->n - k)) replace(x, k, rules[i].rep);
        return;
    }
}

#define NR(a) (sizeof(a) / sizeof((a)[0]))

static void step1a(word *x) {
    if (ends_with(x, "ies") && x->n == 4) {
        replace(x, 3, "ie");
        return;
    }
    static const rule r[] = {
        {"sses", "ss", ANY}, {"ies", "i", ANY}, {"ss", "ss", ANY}, {"s", "", ANY}};
    apply_rules(x, r, NR(r));
}

static void step1b(word *x) {
    if (ends_with(x, "ied")) {
        replace(x, 3, x->n == 4 ? "ie" : "i");
        return;
    }
    if (ends_with(x, "eed")) {
        if (measure(x->w, x->n - 3) > 0) replace(x, 3, "ee");
        return;
    }
    size_t k = ends_with(x, "ed") ? 2 : ends_with(x, "ing") ? 3 : 0;
    if (k == 0 || !contains_vowel(x->w, x->n - k)) return;
    x->n -= k; /* the "intermediate stem" */
    if (ends_with(x, "at"))
        replace(x, 2, "ate");
    else if (ends_with(x, "bl"))
        replace(x, 2, "ble");
    else if (ends_with(x, "iz"))
        replace(x, 2, "ize");
    else if (ends_double_cons(x->w, x->n)) { /* *d: drop one of the pair unless l, s or z */
        uint32_t last = x->w[x->n - 1];
        if (last != 'l' && last != 's' && last != 'z') x->n -= 1;
    } else if (ends_with(x, "*d")) { /* NLTK also fires its "*d" rule on a literal "*d" */
        replace(x, 2, "d");
    } else if (measure(x->w, x->n) == 1 && ends_cvc(x->w, x->n)) {
        replace(x, 0, "e");
    }
}

static void step1c(word *x) {
    /* y -> i when the stem is longer than one letter and ends in a consonant (NLTK). */
    if (ends_with(x, "y") && x->n - 1 > 1 && is_cons(x->w, x->n - 2)) replace(x, 1, "i");
}

static void step2(word *x) {
    while (ends_with(x, "alli") && measure(x->w, x->n - 4) > 0)
        replace(x, 4, "al");
    static const rule r[] = {
        {"ational", "ate", M0}, {"tional", "tion", M0}, {"enci", "ence", M0},
        {"anci", "ance", M0},   {"izer", "ize", M0},    {"bli", "ble", M0},
        {"alli", "al", M0},     {"entli", "ent", M0},   {"eli", "e", M0},
        {"ousli", "ous", M0},   {"ization", "ize", M0}, {"ation", "ate", M0},
        {"ator", "ate", M0},    {"alism", "al", M0},    {"iveness", "ive", M0},
        {"fulness", "ful", M0}, {"ousness", "ous", M0}, {"aliti", "al", M0},
        {"iviti", "ive", M0},   {"biliti", "ble", M0},  {"fulli", "ful", M0},
        {"logi", "log", LOGI},
    };
    apply_rules(x, r, NR(r));
}

static void step3(word *x) {
    static const rule r[] = {{"icate", "ic", M0}, {"ative", "", M0},  {"alize", "al", M0},
                             {"iciti", "ic", M0}, {"ical", "ic", M0}, {"ful", "", M0},
                             {"ness", "", M0}};
    apply_rules(x, r, NR(r));
}

static void step4(word *x) {
    static const rule r[] = {
        {"al", "", M1},   {"ance", "", M1}, {"ence", "", M1}, {"er", "", M1},    {"ic", "", M1},
        {"able", "", M1}, {"ible", "", M1}, {"ant", "", M1},  {"ement", "", M1}, {"ment", "", M1},
        {"ent", "", M1},  {"ion", "", ION}, {"ou", "", M1},   {"ism", "", M1},   {"ate", "", M1},
        {"iti", "", M1},  {"ous", "", M1},  {"ive", "", M1},  {"ize", "", M1}};
    apply_rules(x, r, NR(r));
}

static void step5(word *x) {
    if (ends_with(x, "e")) { /* 5a */
        int m = measure(x->w, x->n - 1);
        if (m > 1 || (m == 1 && !ends_cvc(x->w, x->n - 1))) x->n -= 1;
    }
    if (ends_with(x, "ll") && measure(x->w, x->n - 1) > 1) x->n -= 1; /* 5b */
}

/* NLTK's pool of irregular forms: {form, stem}. */
static const char *const POOL[][2] = {
    {"sky", "sky"},        {"skies", "sky"},       {"dying", "die"},        {"lying", "lie"},
    {"tying", "tie"},      {"news", "news"},       {"innings", "inning"},   {"inning", "inning"},
    {"outings", "outing"}, {"outing", "outing"},   {"cannings", "canning"}, {"canning", "canning"},
    {"howe", "howe"},      {"proceed", "proceed"}, {"exceed", "exceed"},    {"succeed", "succeed"},
};

size_t tg__porter_stem(uint32_t *w, size_t n) {
    word x = {w, n};
    for (size_t i = 0; i < NR(POOL); i++) {
        if (strlen(POOL[i][0]) == n && ends_with(&x, POOL[i][0])) {
            x.n = 0;
            replace(&x, 0, POOL[i][1]);
            return x.n;
        }
    }
    if (n <= 2) return n;
    step1a(&x);
    step1b(&x);
    step1c(&x);
    step2(&x);
    step3(&x);
    step4(&x);
    step5(&x);
    return x.n;
}

tg_status tg_metric_porter_stem(const char *word_utf8, char **out) {
    static const char fn[] = "tg_metric_porter_stem";
    if (!word_utf8 || !out)
        return tg_error_set(TG_ERR_INVALID, "%s: %s is NULL", fn, word_utf8 ? "out" : "word");
    tg_status st = tg__text_utf8_check(fn, "word", 0, word_utf8);
    if (st != TG_OK) return st;
    size_t len = strlen(word_utf8), pos = 0, n = 0;
    uint32_t *cp = malloc((2 * len + 1) * sizeof *cp), *lo = malloc((2 * len + 1) * sizeof *lo);
    tg__text_buf b = {0};
    if (!cp || !lo) st = tg_error_set(TG_ERR_NOMEM, "%s: out of memory", fn);
    while (st == TG_OK && pos < len)
        tg__text_utf8_next(word_utf8, len, &pos, &cp[n++]);
    /* stem() lower-cases first, but leaves words of <= 2 characters (before lower-casing) */
    size_t nl = st == TG_OK ? tg__text_lower(cp, n, lo) : 0;
    if (st == TG_OK) n = n <= 2 && nl != n ? nl : tg__porter_stem(lo, nl);
    if (st == TG_OK) st = tg__text_utf8_append(&b, lo, n);
    free(cp);
    free(lo);
    if (st == TG_OK && !b.p) st = tg__text_buf_append(&b, "", 0);
    if (st != TG_OK) {
        tg__text_buf_free(&b);
        return st;
    }
    *out = b.p;
    return TG_OK;
}
