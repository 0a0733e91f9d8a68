/* A small, strict JSON (RFC 8259) parser to a DOM tree, and a writer. See include/tg/json.h.
 *
 * Why our own: safetensors headers and checkpoint metadata are the only JSON tgraph reads,
 * they come from files users hand us, and a parser for them must fail with a clear message
 * (byte offset, what was expected) rather than crash or accept garbage. The grammar is small
 * enough that a recursive-descent parser with an explicit depth limit is the simplest
 * correct thing; recursion depth is bounded by TG_JSON_MAX_DEPTH, so hostile input such as
 * "[[[[..." cannot overflow the C stack. */
#include "tg/json.h"

#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One member of an object: keys may hold NULs ("\u0000"), so their length is kept. */
typedef struct member {
    char *key;
    size_t klen;
    tg_json *val;
} member;

struct tg_json {
    tg_json_type type;
    union {
        int b;
        struct {
            double x;
            int64_t i; /* exact value when has_i */
            int has_i; /* the lexeme was an integer that fits int64_t */
        } num;
        struct {
            char *s; /* NUL-terminated */
            size_t len;
        } str;
        struct {
            tg_json **items;
            size_t n, cap;
        } arr;
        struct {
            member *m;
            size_t n, cap;
            size_t *slots; /* open-addressing hash of member index + 1 (0 = empty) */
            size_t hcap;   /* power of two, or 0 while the object is small */
        } obj;
    } u;
};

/* Below this many members a linear scan beats hashing. */
#define OBJ_HASH_MIN 8

/* 2^53: every integer of at most this magnitude is exactly representable as a double. */
#define EXACT_INT_MAX 9007199254740992.0

/* ---- UTF-8 ------------------------------------------------------------------------------ */

/* Length of the valid UTF-8 sequence starting at u (avail bytes left), or 0 if invalid.
 * Well-formed sequences per Unicode Table 3-7: no overlong forms (C0, C1, E0 80..9F,
 * F0 80..8F), no surrogates (ED A0..BF), nothing above U+10FFFF (F4 90.., F5..FF). */
static size_t utf8_seq(const unsigned char *u, size_t avail) {
    unsigned c = u[0];
    size_t n;
    unsigned lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF)
        n = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else
        return 0;
    if (avail < n) return 0;
    if (u[1] < lo || u[1] > hi) return 0;
    for (size_t k = 2; k < n; k++)
        if (u[k] < 0x80 || u[k] > 0xBF) return 0;
    return n;
}

size_t tg_json_utf8_check(const char *s, size_t len) {
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < len) {
        size_t n = utf8_seq(u + i, len - i);
        if (n == 0) return i;
        i += n;
    }
    return len;
}

/* Encode code point cp (<= 0x10FFFF, not a surrogate) as UTF-8 into out; returns length. */
static size_t utf8_put(char *out, unsigned cp) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* ---- growable byte buffer --------------------------------------------------------------- */

typedef struct sbuf {
    char *p;
    size_t n, cap;
    int oom;
} sbuf;

static int sb_reserve(sbuf *b, size_t extra) {
    if (b->oom) return 0;
    if (b->n + extra + 1 <= b->cap) return 1;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->n + extra + 1) {
        if (cap > SIZE_MAX / 2) {
            b->oom = 1;
            return 0;
        }
        cap *= 2;
    }
    char *p = realloc(b->p, cap);
    if (!p) {
        b->oom = 1;
        return 0;
    }
    b->p = p;
    b->cap = cap;
    return 1;
}

static void sb_add(sbuf *b, const char *s, size_t n) {
    if (!sb_reserve(b, n)) return;
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void sb_addc(sbuf *b, char c) {
    sb_add(b, &c, 1);
}

/* ---- nodes ------------------------------------------------------------------------------ */

static tg_json *node_new(tg_json_type t) {
    tg_json *v = calloc(1, sizeof *v);
    if (!v)
        tg_error_set(TG_ERR_NOMEM, "tg_json: out of memory allocating a node");
    else
        v->type = t;
    return v;
}

void tg_json_free(tg_json *v) {
    if (!v) return;
    switch (v->type) {
    case TG_JSON_STRING:
        free(v->u.str.s);
        break;
    case TG_JSON_ARRAY:
        for (size_t i = 0; i < v->u.arr.n; i++)
            tg_json_free(v->u.arr.items[i]);
        free(v->u.arr.items);
        break;
    case TG_JSON_OBJECT:
        for (size_t i = 0; i < v->u.obj.n; i++) {
            free(v->u.obj.m[i].key);
            tg_json_free(v->u.obj.m[i].val);
        }
        free(v->u.obj.m);
        free(v->u.obj.slots);
        break;
    default:
        break;
    }
    free(v);
}

/* FNV-1a, 64-bit: simple and good enough for short keys. */
static size_t key_hash(const char *k, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)k[i];
        h *= 1099511628211ull;
    }
    return (size_t)h;
}

/* Index of the member with key k[0..n) in object o, or SIZE_MAX. */
static size_t obj_find(const tg_json *o, const char *k, size_t n) {
    if (o->u.obj.hcap) {
        size_t mask = o->u.obj.hcap - 1;
        for (size_t h = key_hash(k, n) & mask;; h = (h + 1) & mask) {
            size_t s = o->u.obj.slots[h];
            if (s == 0) return SIZE_MAX;
            const member *m = &o->u.obj.m[s - 1];
            if (m->klen == n && memcmp(m->key, k, n) == 0) return s - 1;
        }
    }
    for (size_t i = 0; i < o->u.obj.n; i++) {
        const member *m = &o->u.obj.m[i];
        if (m->klen == n && memcmp(m->key, k, n) == 0) return i;
    }
    return SIZE_MAX;
}

/* Rebuild the hash index so that it holds at least 2x the members (load factor <= 1/2). */
static int obj_rehash(tg_json *o) {
    size_t cap = 16;
    while (cap < 2 * o->u.obj.n)
        cap *= 2;
    size_t *slots = calloc(cap, sizeof *slots);
    if (!slots) return 0;
    for (size_t i = 0; i < o->u.obj.n; i++) {
        size_t h = key_hash(o->u.obj.m[i].key, o->u.obj.m[i].klen) & (cap - 1);
        while (slots[h])
            h = (h + 1) & (cap - 1);
        slots[h] = i + 1;
    }
    free(o->u.obj.slots);
    o->u.obj.slots = slots;
    o->u.obj.hcap = cap;
    return 1;
}

/* Append a member (key is taken over, not copied). Caller checked it is not a duplicate.
 * On failure nothing is taken over. */
static int obj_push(tg_json *o, char *key, size_t klen, tg_json *val) {
    if (o->u.obj.n == o->u.obj.cap) {
        size_t cap = o->u.obj.cap ? 2 * o->u.obj.cap : 4;
        member *m = realloc(o->u.obj.m, cap * sizeof *m);
        if (!m) return 0;
        o->u.obj.m = m;
        o->u.obj.cap = cap;
    }
    o->u.obj.m[o->u.obj.n++] = (member){key, klen, val};
    size_t n = o->u.obj.n;
    if (n > OBJ_HASH_MIN && 2 * n > o->u.obj.hcap) {
        if (!obj_rehash(o)) {
            o->u.obj.n--;
            return 0;
        }
    } else if (o->u.obj.hcap) {
        size_t mask = o->u.obj.hcap - 1;
        size_t h = key_hash(key, klen) & mask;
        while (o->u.obj.slots[h])
            h = (h + 1) & mask;
        o->u.obj.slots[h] = n;
    }
    return 1;
}

static int arr_push(tg_json *a, tg_json *item) {
    if (a->u.arr.n == a->u.arr.cap) {
        size_t cap = a->u.arr.cap ? 2 * a->u.arr.cap : 4;
        tg_json **p = realloc(a->u.arr.items, cap * sizeof *p);
        if (!p) return 0;
        a->u.arr.items = p;
        a->u.arr.cap = cap;
    }
    a->u.arr.items[a->u.arr.n++] = item;
    return 1;
}

/* ---- locale-independent number text ------------------------------------------------------ */

/* strtod and printf follow LC_NUMERIC; JSON always uses '.'. We translate between the two
 * rather than require callers to keep the "C" locale. */
static char locale_point(void) {
    const char *dp = localeconv()->decimal_point;
    return (dp && dp[0] && !dp[1]) ? dp[0] : '.';
}

static double parse_double(const char *lex, size_t n) {
    char small[64];
    char *buf = n < sizeof small ? small : malloc(n + 1);
    if (!buf) return NAN;
    memcpy(buf, lex, n);
    buf[n] = '\0';
    char pt = locale_point();
    if (pt != '.') {
        char *d = memchr(buf, '.', n);
        if (d) *d = pt;
    }
    double x = strtod(buf, NULL);
    if (buf != small) free(buf);
    return x;
}

/* Shortest %.Ng (N = 15..17) that reads back to exactly x. */
static void format_double(double x, char *out, size_t cap) {
    if (x == floor(x) && fabs(x) <= EXACT_INT_MAX) {
        snprintf(out, cap, "%.0f", x);
        return;
    }
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(out, cap, "%.*g", prec, x);
        if (parse_double(out, strlen(out)) == x || prec == 17) break;
    }
    char pt = locale_point();
    if (pt != '.') {
        char *d = strchr(out, pt);
        if (d) *d = '.';
    }
}

/* ---- parser ----------------------------------------------------------------------------- */

typedef struct parser {
    const char *s;
    size_t len, pos;
    int depth;
} parser;

/* Record a parse error at byte offset `at`, with line and column (1-based, in bytes). */
__attribute__((format(printf, 3, 4))) static tg_status perr(const parser *p, size_t at,
                                                            const char *fmt, ...) {
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    size_t line = 1, col = 1;
    for (size_t i = 0; i < at && i < p->len; i++) {
        if (p->s[i] == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    return tg_error_set(TG_ERR_FORMAT, "tg_json_parse: byte %zu (line %zu, column %zu): %s", at,
                        line, col, what);
}

static void skip_ws(parser *p) {
    while (p->pos < p->len) {
        char c = p->s[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        p->pos++;
    }
}

/* Describe the byte at pos for messages: "'x'", "byte 0xFF" or "end of input". */
static const char *describe(const parser *p, size_t pos, char *buf, size_t cap) {
    if (pos >= p->len) return "end of input";
    unsigned char c = (unsigned char)p->s[pos];
    if (c >= 0x20 && c < 0x7F)
        snprintf(buf, cap, "'%c'", c);
    else
        snprintf(buf, cap, "byte 0x%02X", c);
    return buf;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Read 4 hex digits at pos (after "\u"); -1 if malformed. */
static long hex4(const parser *p, size_t pos) {
    if (pos + 4 > p->len) return -1;
    long v = 0;
    for (int k = 0; k < 4; k++) {
        int h = hexval(p->s[pos + k]);
        if (h < 0) return -1;
        v = v * 16 + h;
    }
    return v;
}

/* Parse a string starting at the opening quote; on success *out is a malloc'd,
 * NUL-terminated buffer of *out_len bytes. */
static tg_status parse_string(parser *p, char **out, size_t *out_len) {
    size_t start = p->pos;
    sbuf b = {0};
    p->pos++; /* opening quote */
    for (;;) {
        if (p->pos >= p->len) {
            free(b.p);
            return perr(p, p->len, "unterminated string (opened at byte %zu)", start);
        }
        unsigned char c = (unsigned char)p->s[p->pos];
        if (c == '"') {
            p->pos++;
            break;
        }
        if (c < 0x20) {
            free(b.p);
            return perr(p, p->pos, "control character 0x%02X in string (must be escaped)", c);
        }
        if (c == '\\') {
            size_t esc = p->pos;
            if (p->pos + 1 >= p->len) {
                free(b.p);
                return perr(p, p->len, "unterminated string (opened at byte %zu)", start);
            }
            char e = p->s[p->pos + 1], ch;
            p->pos += 2;
            switch (e) {
            case '"':
                ch = '"';
                break;
            case '\\':
                ch = '\\';
                break;
            case '/':
                ch = '/';
                break;
            case 'b':
                ch = '\b';
                break;
            case 'f':
                ch = '\f';
                break;
            case 'n':
                ch = '\n';
                break;
            case 'r':
                ch = '\r';
                break;
            case 't':
                ch = '\t';
                break;
            case 'u': {
                long cp = hex4(p, p->pos);
                if (cp < 0) {
                    free(b.p);
                    return perr(p, esc, "\\u must be followed by 4 hex digits");
                }
                p->pos += 4;
                if (cp >= 0xDC00 && cp <= 0xDFFF) {
                    free(b.p);
                    return perr(p, esc, "lone low surrogate \\u%04lX", cp);
                }
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    /* UTF-16 pair: U+10000 + ((hi - D800) << 10) + (lo - DC00). */
                    long lo = -1;
                    if (p->pos + 1 < p->len && p->s[p->pos] == '\\' && p->s[p->pos + 1] == 'u')
                        lo = hex4(p, p->pos + 2);
                    if (lo < 0xDC00 || lo > 0xDFFF) {
                        free(b.p);
                        return perr(p, esc,
                                    "high surrogate \\u%04lX not followed by a low surrogate", cp);
                    }
                    p->pos += 6;
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                }
                char u8[4];
                sb_add(&b, u8, utf8_put(u8, (unsigned)cp));
                continue;
            }
            default: {
                char d[16];
                free(b.p);
                return perr(p, esc, "invalid escape in string: backslash followed by %s",
                            describe(p, esc + 1, d, sizeof d));
            }
            }
            sb_addc(&b, ch);
            continue;
        }
        if (c < 0x80) {
            /* Copy a run of plain ASCII at once. */
            size_t r = p->pos;
            while (r < p->len) {
                unsigned char d = (unsigned char)p->s[r];
                if (d == '"' || d == '\\' || d < 0x20 || d >= 0x80) break;
                r++;
            }
            sb_add(&b, p->s + p->pos, r - p->pos);
            p->pos = r;
            continue;
        }
        size_t n = utf8_seq((const unsigned char *)p->s + p->pos, p->len - p->pos);
        if (n == 0) {
            free(b.p);
            return perr(p, p->pos, "invalid UTF-8 byte 0x%02X in string", c);
        }
        sb_add(&b, p->s + p->pos, n);
        p->pos += n;
    }
    if (!sb_reserve(&b, 0)) { /* also makes the empty string a valid allocation */
        free(b.p);
        return tg_error_set(TG_ERR_NOMEM, "tg_json_parse: out of memory in a string");
    }
    b.p[b.n] = '\0';
    *out = b.p;
    *out_len = b.n;
    return TG_OK;
}

static tg_status parse_number(parser *p, tg_json **out) {
    size_t start = p->pos, i = p->pos;
    const char *s = p->s;
    int integral = 1;
    if (i < p->len && s[i] == '-') i++;
    if (i >= p->len || s[i] < '0' || s[i] > '9')
        return perr(p, start, "'-' must be followed by a digit");
    if (s[i] == '0') {
        i++;
        if (i < p->len && s[i] >= '0' && s[i] <= '9')
            return perr(p, start, "leading zeros are not allowed in numbers");
    } else {
        while (i < p->len && s[i] >= '0' && s[i] <= '9')
            i++;
    }
    if (i < p->len && s[i] == '.') {
        integral = 0;
        i++;
        if (i >= p->len || s[i] < '0' || s[i] > '9')
            return perr(p, i, "expected a digit after the decimal point");
        while (i < p->len && s[i] >= '0' && s[i] <= '9')
            i++;
    }
    if (i < p->len && (s[i] == 'e' || s[i] == 'E')) {
        integral = 0;
        i++;
        if (i < p->len && (s[i] == '+' || s[i] == '-')) i++;
        if (i >= p->len || s[i] < '0' || s[i] > '9')
            return perr(p, i, "expected a digit in the exponent");
        while (i < p->len && s[i] >= '0' && s[i] <= '9')
            i++;
    }
    double x = parse_double(s + start, i - start);
    if (isnan(x)) return tg_error_set(TG_ERR_NOMEM, "tg_json_parse: out of memory in a number");
    if (isinf(x))
        return perr(p, start, "number %.*s is out of range for a double",
                    (int)(i - start > 40 ? 40 : i - start), s + start);
    tg_json *v = node_new(TG_JSON_NUMBER);
    if (!v) return TG_ERR_NOMEM;
    v->u.num.x = x;
    if (integral) {
        /* Exact int64 value, accumulated negatively so INT64_MIN fits. */
        int neg = s[start] == '-', ok = 1;
        int64_t acc = 0;
        for (size_t k = start + (size_t)neg; k < i; k++) {
            int d = s[k] - '0';
            if (acc < (INT64_MIN + d) / 10) {
                ok = 0;
                break;
            }
            acc = acc * 10 - d;
        }
        if (ok && !neg && acc == INT64_MIN) ok = 0;
        if (ok && neg && acc == 0) ok = 0; /* "-0": keep the double's sign when printing */
        if (ok) {
            v->u.num.i = neg ? acc : -acc;
            v->u.num.has_i = 1;
        }
    }
    p->pos = i;
    *out = v;
    return TG_OK;
}

static tg_status parse_value(parser *p, tg_json **out);

static tg_status parse_array(parser *p, tg_json **out) {
    tg_json *a = node_new(TG_JSON_ARRAY);
    if (!a) return TG_ERR_NOMEM;
    p->pos++; /* '[' */
    skip_ws(p);
    if (p->pos < p->len && p->s[p->pos] == ']') {
        p->pos++;
        *out = a;
        return TG_OK;
    }
    for (;;) {
        tg_json *item;
        tg_status st = parse_value(p, &item);
        if (st != TG_OK) {
            tg_json_free(a);
            return st;
        }
        if (!arr_push(a, item)) {
            tg_json_free(item);
            tg_json_free(a);
            return tg_error_set(TG_ERR_NOMEM, "tg_json_parse: out of memory in an array");
        }
        skip_ws(p);
        char d[16];
        if (p->pos < p->len && p->s[p->pos] == ',') {
            size_t comma = p->pos++;
            skip_ws(p);
            if (p->pos < p->len && p->s[p->pos] == ']') {
                tg_json_free(a);
                return perr(p, comma, "trailing comma in array");
            }
            continue;
        }
        if (p->pos < p->len && p->s[p->pos] == ']') {
            p->pos++;
            *out = a;
            return TG_OK;
        }
        tg_json_free(a);
        return perr(p, p->pos, "expected ',' or ']' after array element, found %s",
                    describe(p, p->pos, d, sizeof d));
    }
}

static tg_status parse_object(parser *p, tg_json **out) {
    tg_json *o = node_new(TG_JSON_OBJECT);
    if (!o) return TG_ERR_NOMEM;
    p->pos++; /* '{' */
    skip_ws(p);
    if (p->pos < p->len && p->s[p->pos] == '}') {
        p->pos++;
        *out = o;
        return TG_OK;
    }
    for (;;) {
        char d[16];
        if (p->pos >= p->len || p->s[p->pos] != '"') {
            tg_json_free(o);
            return perr(p, p->pos, "expected a string key in object, found %s",
                        describe(p, p->pos, d, sizeof d));
        }
        size_t kpos = p->pos;
        char *key;
        size_t klen;
        tg_status st = parse_string(p, &key, &klen);
        if (st != TG_OK) {
            tg_json_free(o);
            return st;
        }
        if (obj_find(o, key, klen) != SIZE_MAX) {
            st = perr(p, kpos, "duplicate key \"%.200s\" in object", key);
            free(key);
            tg_json_free(o);
            return st;
        }
        skip_ws(p);
        if (p->pos >= p->len || p->s[p->pos] != ':') {
            st = perr(p, p->pos, "expected ':' after object key, found %s",
                      describe(p, p->pos, d, sizeof d));
            free(key);
            tg_json_free(o);
            return st;
        }
        p->pos++;
        tg_json *val;
        st = parse_value(p, &val);
        if (st != TG_OK) {
            free(key);
            tg_json_free(o);
            return st;
        }
        if (!obj_push(o, key, klen, val)) {
            free(key);
            tg_json_free(val);
            tg_json_free(o);
            return tg_error_set(TG_ERR_NOMEM, "tg_json_parse: out of memory in an object");
        }
        skip_ws(p);
        if (p->pos < p->len && p->s[p->pos] == ',') {
            size_t comma = p->pos++;
            skip_ws(p);
            if (p->pos < p->len && p->s[p->pos] == '}') {
                tg_json_free(o);
                return perr(p, comma, "trailing comma in object");
            }
            continue;
        }
        if (p->pos < p->len && p->s[p->pos] == '}') {
            p->pos++;
            *out = o;
            return TG_OK;
        }
        tg_json_free(o);
        return perr(p, p->pos, "expected ',' or '}' after object member, found %s",
                    describe(p, p->pos, d, sizeof d));
    }
}

static tg_status parse_literal(parser *p, const char *word, tg_json_type t, int b, tg_json **out) {
    size_t n = strlen(word);
    if (p->len - p->pos < n || memcmp(p->s + p->pos, word, n) != 0)
        return perr(p, p->pos, "invalid literal (expected '%s')", word);
    tg_json *v = node_new(t);
    if (!v) return TG_ERR_NOMEM;
    v->u.b = b;
    p->pos += n;
    *out = v;
    return TG_OK;
}

static tg_status parse_value(parser *p, tg_json **out) {
    skip_ws(p);
    char d[16];
    if (p->pos >= p->len) return perr(p, p->pos, "unexpected end of input, expected a value");
    char c = p->s[p->pos];
    tg_status st;
    switch (c) {
    case '{':
    case '[':
        if (++p->depth > TG_JSON_MAX_DEPTH)
            return perr(p, p->pos, "nesting deeper than %d levels", TG_JSON_MAX_DEPTH);
        st = c == '{' ? parse_object(p, out) : parse_array(p, out);
        p->depth--;
        return st;
    case '"': {
        tg_json *v = node_new(TG_JSON_STRING);
        if (!v) return TG_ERR_NOMEM;
        st = parse_string(p, &v->u.str.s, &v->u.str.len);
        if (st != TG_OK) {
            free(v);
            return st;
        }
        *out = v;
        return TG_OK;
    }
    case 't':
        return parse_literal(p, "true", TG_JSON_BOOL, 1, out);
    case 'f':
        return parse_literal(p, "false", TG_JSON_BOOL, 0, out);
    case 'n':
        return parse_literal(p, "null", TG_JSON_NULL, 0, out);
    default:
        if (c == '-' || (c >= '0' && c <= '9')) return parse_number(p, out);
        return perr(p, p->pos, "unexpected %s, expected a value", describe(p, p->pos, d, sizeof d));
    }
}

tg_status tg_json_parse(const char *text, size_t len, tg_json **out) {
    if (!out) return tg_error_set(TG_ERR_INVALID, "tg_json_parse: out is NULL");
    *out = NULL;
    if (!text && len) return tg_error_set(TG_ERR_INVALID, "tg_json_parse: text is NULL");
    parser p = {text ? text : "", len, 0, 0};
    if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0)
        return perr(&p, 0, "byte-order mark is not allowed");
    tg_json *v;
    tg_status st = parse_value(&p, &v);
    if (st != TG_OK) return st;
    skip_ws(&p);
    if (p.pos < p.len) {
        char d[16];
        st =
            perr(&p, p.pos, "unexpected %s after the JSON value", describe(&p, p.pos, d, sizeof d));
        tg_json_free(v);
        return st;
    }
    *out = v;
    return TG_OK;
}

/* ---- accessors -------------------------------------------------------------------------- */

tg_json_type tg_json_kind(const tg_json *v) {
    return v ? v->type : TG_JSON_NULL;
}

const char *tg_json_type_name(tg_json_type t) {
    switch (t) {
    case TG_JSON_NULL:
        return "null";
    case TG_JSON_BOOL:
        return "boolean";
    case TG_JSON_NUMBER:
        return "number";
    case TG_JSON_STRING:
        return "string";
    case TG_JSON_ARRAY:
        return "array";
    case TG_JSON_OBJECT:
        return "object";
    }
    return "unknown";
}

int tg_json_bool(const tg_json *v) {
    return v && v->type == TG_JSON_BOOL ? v->u.b : 0;
}

double tg_json_number(const tg_json *v) {
    return v && v->type == TG_JSON_NUMBER ? v->u.num.x : 0.0;
}

tg_status tg_json_int64(const tg_json *v, int64_t *out) {
    if (!v || v->type != TG_JSON_NUMBER)
        return tg_error_set(TG_ERR_FORMAT, "tg_json_int64: expected a number, got %s",
                            v ? tg_json_type_name(v->type) : "nothing");
    if (v->u.num.has_i) {
        *out = v->u.num.i;
        return TG_OK;
    }
    double x = v->u.num.x;
    if (x != floor(x))
        return tg_error_set(TG_ERR_FORMAT, "tg_json_int64: %.17g is not an integer", x);
    if (fabs(x) > EXACT_INT_MAX)
        return tg_error_set(TG_ERR_FORMAT,
                            "tg_json_int64: %.17g is too large to be an exact integer", x);
    *out = (int64_t)x;
    return TG_OK;
}

const char *tg_json_string(const tg_json *v) {
    return v && v->type == TG_JSON_STRING ? v->u.str.s : NULL;
}

size_t tg_json_string_len(const tg_json *v) {
    return v && v->type == TG_JSON_STRING ? v->u.str.len : 0;
}

size_t tg_json_size(const tg_json *v) {
    if (!v) return 0;
    if (v->type == TG_JSON_ARRAY) return v->u.arr.n;
    if (v->type == TG_JSON_OBJECT) return v->u.obj.n;
    return 0;
}

const tg_json *tg_json_at(const tg_json *v, size_t i) {
    if (!v) return NULL;
    if (v->type == TG_JSON_ARRAY) return i < v->u.arr.n ? v->u.arr.items[i] : NULL;
    if (v->type == TG_JSON_OBJECT) return i < v->u.obj.n ? v->u.obj.m[i].val : NULL;
    return NULL;
}

const char *tg_json_key(const tg_json *v, size_t i) {
    if (!v || v->type != TG_JSON_OBJECT || i >= v->u.obj.n) return NULL;
    return v->u.obj.m[i].key;
}

const tg_json *tg_json_get(const tg_json *v, const char *key) {
    if (!v || v->type != TG_JSON_OBJECT || !key) return NULL;
    size_t i = obj_find(v, key, strlen(key));
    return i == SIZE_MAX ? NULL : v->u.obj.m[i].val;
}

/* ---- building --------------------------------------------------------------------------- */

tg_json *tg_json_new_null(void) {
    return node_new(TG_JSON_NULL);
}

tg_json *tg_json_new_bool(int b) {
    tg_json *v = node_new(TG_JSON_BOOL);
    if (v) v->u.b = b != 0;
    return v;
}

tg_json *tg_json_new_number(double x) {
    if (!isfinite(x)) {
        tg_error_set(TG_ERR_NUMERIC, "tg_json_new_number: %g cannot be written as JSON", x);
        return NULL;
    }
    tg_json *v = node_new(TG_JSON_NUMBER);
    if (v) v->u.num.x = x;
    return v;
}

/* Copy s[0..len) into a fresh NUL-terminated buffer after checking it is UTF-8. */
static char *dup_utf8(const char *fn, const char *s, size_t len) {
    size_t bad = tg_json_utf8_check(s, len);
    if (bad != len) {
        tg_error_set(TG_ERR_FORMAT, "%s: invalid UTF-8 at byte %zu of \"%.*s\"", fn, bad,
                     (int)(bad > 60 ? 60 : bad), s);
        return NULL;
    }
    char *d = malloc(len + 1);
    if (!d) {
        tg_error_set(TG_ERR_NOMEM, "%s: out of memory copying a string", fn);
        return NULL;
    }
    if (len) memcpy(d, s, len);
    d[len] = '\0';
    return d;
}

tg_json *tg_json_new_string(const char *s, size_t len) {
    if (!s && len) {
        tg_error_set(TG_ERR_INVALID, "tg_json_new_string: s is NULL");
        return NULL;
    }
    char *d = dup_utf8("tg_json_new_string", s ? s : "", len);
    if (!d) return NULL;
    tg_json *v = node_new(TG_JSON_STRING);
    if (!v) {
        free(d);
        return NULL;
    }
    v->u.str.s = d;
    v->u.str.len = len;
    return v;
}

tg_json *tg_json_new_array(void) {
    return node_new(TG_JSON_ARRAY);
}

tg_json *tg_json_new_object(void) {
    return node_new(TG_JSON_OBJECT);
}

tg_status tg_json_array_append(tg_json *arr, tg_json *item) {
    if (!arr || arr->type != TG_JSON_ARRAY || !item) {
        tg_json_free(item);
        return tg_error_set(TG_ERR_INVALID, "tg_json_array_append: %s",
                            !item ? "item is NULL" : "not an array");
    }
    if (!arr_push(arr, item)) {
        tg_json_free(item);
        return tg_error_set(TG_ERR_NOMEM, "tg_json_array_append: out of memory");
    }
    return TG_OK;
}

tg_status tg_json_object_set(tg_json *obj, const char *key, tg_json *value) {
    if (!obj || obj->type != TG_JSON_OBJECT || !key || !value) {
        tg_json_free(value);
        return tg_error_set(TG_ERR_INVALID, "tg_json_object_set: %s",
                            !value ? "value is NULL"
                            : !key ? "key is NULL"
                                   : "not an object");
    }
    size_t klen = strlen(key);
    size_t i = obj_find(obj, key, klen);
    if (i != SIZE_MAX) {
        tg_json_free(obj->u.obj.m[i].val);
        obj->u.obj.m[i].val = value;
        return TG_OK;
    }
    char *k = dup_utf8("tg_json_object_set", key, klen);
    if (!k) {
        tg_json_free(value);
        return TG_ERR_FORMAT;
    }
    if (!obj_push(obj, k, klen, value)) {
        free(k);
        tg_json_free(value);
        return tg_error_set(TG_ERR_NOMEM, "tg_json_object_set: out of memory");
    }
    return TG_OK;
}

/* ---- writing ---------------------------------------------------------------------------- */

/* Append s[0..len) as a quoted JSON string (UTF-8 already validated by the caller). */
static void put_string(sbuf *b, const char *s, size_t len) {
    static const char hex[] = "0123456789abcdef";
    sb_addc(b, '"');
    size_t run = 0; /* start of the pending run of bytes that need no escaping */
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        sb_add(b, s + run, i - run);
        run = i + 1;
        switch (c) {
        case '"':
            sb_add(b, "\\\"", 2);
            break;
        case '\\':
            sb_add(b, "\\\\", 2);
            break;
        case '\b':
            sb_add(b, "\\b", 2);
            break;
        case '\f':
            sb_add(b, "\\f", 2);
            break;
        case '\n':
            sb_add(b, "\\n", 2);
            break;
        case '\r':
            sb_add(b, "\\r", 2);
            break;
        case '\t':
            sb_add(b, "\\t", 2);
            break;
        default: {
            char u[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            sb_add(b, u, 6);
        }
        }
    }
    sb_add(b, s + run, len - run);
    sb_addc(b, '"');
}

static void put_indent(sbuf *b, int indent, int level) {
    if (indent <= 0) return;
    sb_addc(b, '\n');
    for (int i = 0; i < indent * level; i++)
        sb_addc(b, ' ');
}

static void put_value(sbuf *b, const tg_json *v, int indent, int level) {
    char num[40];
    switch (v->type) {
    case TG_JSON_NULL:
        sb_add(b, "null", 4);
        break;
    case TG_JSON_BOOL:
        v->u.b ? sb_add(b, "true", 4) : sb_add(b, "false", 5);
        break;
    case TG_JSON_NUMBER:
        if (v->u.num.has_i)
            snprintf(num, sizeof num, "%lld", (long long)v->u.num.i);
        else
            format_double(v->u.num.x, num, sizeof num);
        sb_add(b, num, strlen(num));
        break;
    case TG_JSON_STRING:
        put_string(b, v->u.str.s, v->u.str.len);
        break;
    case TG_JSON_ARRAY:
        sb_addc(b, '[');
        for (size_t i = 0; i < v->u.arr.n; i++) {
            if (i) sb_addc(b, ',');
            put_indent(b, indent, level + 1);
            put_value(b, v->u.arr.items[i], indent, level + 1);
        }
        if (v->u.arr.n) put_indent(b, indent, level);
        sb_addc(b, ']');
        break;
    case TG_JSON_OBJECT:
        sb_addc(b, '{');
        for (size_t i = 0; i < v->u.obj.n; i++) {
            if (i) sb_addc(b, ',');
            put_indent(b, indent, level + 1);
            put_string(b, v->u.obj.m[i].key, v->u.obj.m[i].klen);
            sb_addc(b, ':');
            if (indent > 0) sb_addc(b, ' ');
            put_value(b, v->u.obj.m[i].val, indent, level + 1);
        }
        if (v->u.obj.n) put_indent(b, indent, level);
        sb_addc(b, '}');
        break;
    }
}

tg_status tg_json_print(const tg_json *v, int indent, char **out, size_t *out_len) {
    if (!v || !out) return tg_error_set(TG_ERR_INVALID, "tg_json_print: NULL argument");
    *out = NULL;
    sbuf b = {0};
    put_value(&b, v, indent, 0);
    if (b.oom) {
        free(b.p);
        return tg_error_set(TG_ERR_NOMEM, "tg_json_print: out of memory");
    }
    *out = b.p;
    if (out_len) *out_len = b.n;
    return TG_OK;
}

tg_status tg_json_quote(const char *s, size_t len, char **out, size_t *out_len) {
    if (!out || (!s && len)) return tg_error_set(TG_ERR_INVALID, "tg_json_quote: NULL argument");
    *out = NULL;
    size_t bad = tg_json_utf8_check(s, len);
    if (bad != len)
        return tg_error_set(TG_ERR_FORMAT, "tg_json_quote: invalid UTF-8 at byte %zu", bad);
    sbuf b = {0};
    put_string(&b, s ? s : "", len);
    if (b.oom) {
        free(b.p);
        return tg_error_set(TG_ERR_NOMEM, "tg_json_quote: out of memory");
    }
    *out = b.p;
    if (out_len) *out_len = b.n;
    return TG_OK;
}
