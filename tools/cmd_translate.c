/* `tg translate`: decode sources with a checkpoint (greedy or beam search, docs/model.md §1 "Decoding").
 *
 * Input: one sentence per line, tokens separated by spaces (tokens not in the source vocabulary
 * become <unk>). Output: one hypothesis per line, tokens separated by one space, in input order;
 * with --nbest, N lines per sentence "i ||| hypothesis ||| score" (i from 0, best first).
 * The whole input is read and checked before anything is decoded, so a bad line fails the run
 * without partial output; sentences are then decoded in batches of similar length (sorting
 * by length wastes less padding; results do not depend on the batching). */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tg/decode.h"
#include "tg/json.h"
#include "tg/model.h"
#include "tg/tg.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "tools/model_text.h"

static const char USAGE[] =
    "usage: tg translate --model M [options]\n"
    "Translate sentences (one per line) with a checkpoint, read and written with its stored\n"
    "tokenizer (whitespace words, characters, or raw text and its sentencepiece pieces; a\n"
    "checkpoint without one: words).\n"
    "\n"
    "  --model M          checkpoint (.safetensors) to decode with (required)\n"
    "  --beam K           beam size; 1 = greedy decoding (default 4)\n"
    "  --alpha A          length penalty exponent, lp = ((5 + |Y|) / 6)^A (default 0.6)\n"
    "  --nbest N          print the N best hypotheses per sentence as\n"
    "                     \"i ||| hypothesis ||| score\" (N <= beam)\n"
    "  --max-len-a A      maximum output length = A * source length + B, counting </s>\n"
    "  --max-len-b B      (defaults A = 1, B = 50; also capped by the model's max_len)\n"
    "  --batch N          sentences decoded together (default 16)\n"
    "  --input FILE       read sources from FILE (default: standard input)\n"
    "  --output FILE      write hypotheses to FILE (default: standard output)\n"
    "  --threads N        CPU threads (default: TG_NUM_THREADS or all cores)\n"
    "  -h, --help         show this help\n";

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "tg translate: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    return 1;
}

/* A usage error: the message, and exit status 2 as for every command (tools/cli.h) */
static int usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "tg translate: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    return TG_EXIT_USAGE;
}

static bool parse_int(const char *s, long long lo, long long hi, int64_t *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

static bool parse_real(const char *s, double lo, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || v < lo) return false;
    *out = v;
    return true;
}

typedef struct {
    char **line;
    int64_t n, cap;
} lines;

static void lines_free(lines *l) {
    for (int64_t i = 0; i < l->n; i++) free(l->line[i]);
    free(l->line);
}

/* Read every line; check UTF-8 and that none is empty. Returns 0 or an exit status. */
static int read_input(FILE *f, const char *name, lines *out) {
    char *buf = NULL;
    size_t cap = 0;
    ssize_t len;
    int rc = 0;
    while ((len = getline(&buf, &cap, f)) >= 0) {
        while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r')) buf[--len] = '\0';
        long long no = (long long)out->n + 1;
        if (memchr(buf, '\0', (size_t)len)) {
            rc = fail("%s: line %lld contains a NUL byte", name, no);
            break;
        }
        size_t bad = tg_json_utf8_check(buf, (size_t)len);
        if (bad < (size_t)len) {
            rc = fail("%s: line %lld is not valid UTF-8 (byte %zu)", name, no, bad + 1);
            break;
        }
        if (strspn(buf, " \t") == (size_t)len) {
            rc = fail("%s: line %lld is empty (every line must hold a sentence)", name, no);
            break;
        }
        if (out->n == out->cap) {
            int64_t c = out->cap ? 2 * out->cap : 256;
            char **l = realloc(out->line, (size_t)c * sizeof *l);
            if (!l) {
                rc = fail("%s: out of memory", name);
                break;
            }
            out->line = l;
            out->cap = c;
        }
        if (!(out->line[out->n] = strdup(buf))) {
            rc = fail("%s: out of memory", name);
            break;
        }
        out->n++;
    }
    if (rc == 0 && ferror(f)) rc = fail("%s: read error: %s", name, strerror(errno));
    free(buf);
    return rc;
}

/* sentences longest first (then in input order), for batches of similar length: each batch's
 * buffers then fit in the previous batch's, which the backend reuses instead of making new
 * ones (growing batches had every one fault in new pages) */
static const int64_t *sort_len;
static int by_length(const void *a, const void *b) {
    int64_t i = *(const int64_t *)a, j = *(const int64_t *)b;
    if (sort_len[i] != sort_len[j]) return sort_len[i] > sort_len[j] ? -1 : 1;
    return (i > j) - (i < j);
}

/* A hypothesis as text: words joined by spaces; characters (chars) or sentencepiece pieces
 * (spm) joined, "▁" a space (a text's first piece's dropped). */
static void write_hyp(FILE *f, const tg_vocab *v, const tg_hypothesis *h, bool chars, bool spm) {
    bool started = false;
    for (int64_t k = 0; k < h->len; k++) {
        const char *t = tg_vocab_token(v, h->ids[k]);
        if (!t) t = "<unk>";
        if (!chars && !spm) {
            fprintf(f, "%s%s", k ? " " : "", t);
            continue;
        }
        for (const char *p = t; *p;) {
            bool sp = !strncmp(p, "\xE2\x96\x81", 3);
            if (!sp || chars || started) fputc(sp ? ' ' : *p, f);
            started = true;
            p += sp ? 3 : 1;
        }
    }
}

/* The ids of one line as the text options read it (unknown tokens: <unk>); *ids malloc'ed. */
static tg_status encode(const tg_vocab *v, const tg_text_options *to, const char *line, int32_t **ids, int64_t *n) {
    char **toks;
    int64_t nt;
    tg_status st = tg_tokenize(line, to, &toks, &nt);
    if (st) return st;
    *ids = malloc((size_t)(nt ? nt : 1) * sizeof **ids);
    if (!*ids) st = tg_error_set(TG_ERR_NOMEM, "out of memory");
    for (int64_t k = 0; st == TG_OK && k < nt; k++) (*ids)[k] = tg_vocab_id(v, toks[k]);
    *n = nt;
    tg_tokens_free(toks, nt);
    return st;
}

typedef struct {
    const char *model, *input, *output;
    tg_decode_options o;
    int64_t batch, threads;
    bool nbest_format;
    bool chars, spm; /* the model's stored tokenizer reads characters, sentencepiece pieces */
} options;

/* Returns -1 to go on, or an exit status (0 after --help). */
static int parse_args(int argc, char **argv, options *op) {
    /* argv[0] is the sub-command; accept the whole command line too (argv[1] = "translate") */
    int first = argc > 1 && !strcmp(argv[1], "translate") ? 2 : 1;
    for (int i = first; i < argc; i++) {
        const char *a = argv[i], *val = NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(USAGE, stdout);
            return 0;
        }
        if (strncmp(a, "--", 2) != 0) return usage("unexpected argument '%s' (see --help)", a);
        char key[32];
        const char *eq = strchr(a, '=');
        size_t kl = eq ? (size_t)(eq - a) : strlen(a);
        if (kl >= sizeof key) return usage("unknown option '%s' (see --help)", a);
        memcpy(key, a, kl);
        key[kl] = '\0';
        static const char *known[] = {"--model",     "--beam",  "--alpha", "--nbest", "--max-len-a", "--max-len-b",
                                      "--batch",     "--input", "--output", "--threads"};
        bool ok = false;
        for (size_t k = 0; k < sizeof known / sizeof known[0]; k++) ok |= !strcmp(key, known[k]);
        if (!ok) return usage("unknown option '%s' (see --help)", key);
        if (eq)
            val = eq + 1;
        else if (i + 1 < argc)
            val = argv[++i];
        else
            return usage("option %s needs a value", key);
        bool good = true;
        if (!strcmp(key, "--model")) op->model = val;
        else if (!strcmp(key, "--input")) op->input = val;
        else if (!strcmp(key, "--output")) op->output = val;
        else if (!strcmp(key, "--beam")) good = parse_int(val, 1, 1000, &op->o.beam);
        else if (!strcmp(key, "--nbest")) good = parse_int(val, 1, 1000, &op->o.nbest), op->nbest_format = true;
        else if (!strcmp(key, "--max-len-b")) good = parse_int(val, 0, 1000000, &op->o.max_len_b);
        else if (!strcmp(key, "--batch")) good = parse_int(val, 1, 100000, &op->batch);
        else if (!strcmp(key, "--threads")) good = parse_int(val, 1, 4096, &op->threads);
        else if (!strcmp(key, "--alpha")) good = parse_real(val, 0.0, &op->o.alpha);
        else if (!strcmp(key, "--max-len-a")) good = parse_real(val, 0.0, &op->o.max_len_a);
        if (!good) return usage("bad value '%s' for %s (see --help)", val, key);
    }
    if (!op->model) return usage("--model is required (see --help)");
    if (op->o.nbest > op->o.beam)
        return usage("--nbest %lld exceeds the beam size %lld", (long long)op->o.nbest, (long long)op->o.beam);
    return -1;
}

/* Decode all sentences (ids[i], len[i]) in batches; write in input order. */
static int translate(tg_model *m, const options *op, int32_t **ids, int64_t *len, int64_t n, FILE *out) {
    int64_t *order = malloc((size_t)n * sizeof *order);
    tg_nbest *all = calloc((size_t)n, sizeof *all); /* all[i]: sentence i's hypotheses */
    const int32_t **src = malloc((size_t)op->batch * sizeof *src);
    int64_t *sn = malloc((size_t)op->batch * sizeof *sn);
    int rc = order && all && src && sn ? 0 : fail("out of memory");
    for (int64_t i = 0; rc == 0 && i < n; i++) order[i] = i;
    sort_len = len;
    if (rc == 0) qsort(order, (size_t)n, sizeof *order, by_length);
    /* one preparation of the weights for every batch's decoder */
    if (rc == 0 && tg_decoder_hold_weights(m) != TG_OK) rc = fail("%s", tg_error_message());
    for (int64_t b0 = 0; rc == 0 && b0 < n; b0 += op->batch) {
        int64_t k = n - b0 < op->batch ? n - b0 : op->batch;
        for (int64_t j = 0; j < k; j++) {
            src[j] = ids[order[b0 + j]];
            sn[j] = len[order[b0 + j]];
        }
        tg_nbest *r;
        if (tg_decode(m, src, sn, k, &op->o, &r) != TG_OK) {
            rc = fail("%s", tg_error_message());
            break;
        }
        for (int64_t j = 0; j < k; j++) all[order[b0 + j]] = r[j]; /* the hypotheses move */
        free(r);
    }
    tg_decoder_release_weights(m);
    const tg_vocab *tv = tg_model_tgt_vocab(m);
    for (int64_t i = 0; rc == 0 && i < n; i++) {
        if (!op->nbest_format) {
            write_hyp(out, tv, &all[i].hyp[0], op->chars, op->spm);
            fputc('\n', out);
            continue;
        }
        for (int64_t j = 0; j < all[i].count; j++) {
            fprintf(out, "%lld ||| ", (long long)i);
            write_hyp(out, tv, &all[i].hyp[j], op->chars, op->spm);
            fprintf(out, " ||| %.6f\n", all[i].hyp[j].score);
        }
    }
    tg_decode_free(all, all ? n : 0);
    free(order);
    free(src);
    free(sn);
    return rc;
}

int tg_cmd_translate(int argc, char **argv) {
    options op = {.o = tg_decode_options_default(), .batch = 16, .threads = 0};
    int rc = parse_args(argc, argv, &op);
    if (rc >= 0) return rc;
    FILE *in = stdin, *out = stdout;
    const char *in_name = op.input ? op.input : "<stdin>";
    if (op.input && !(in = fopen(op.input, "rb"))) return fail("cannot open input '%s': %s", op.input, strerror(errno));
    lines text = {0};
    rc = read_input(in, in_name, &text);
    if (in != stdin) fclose(in);
    tg_backend *be = NULL;
    tg_model *m = NULL;
    if (rc == 0 && tg_backend_cpu_new((int)op.threads, &be) != TG_OK) rc = fail("%s", tg_error_message());
    if (rc == 0 && tg_model_load(op.model, be, &m) != TG_OK)
        rc = fail("cannot load model '%s': %s", op.model, tg_error_message());
    if (rc == 0 && tg_model_cfg(m)->arch == TG_ARCH_LM)
        rc = fail("'%s' is a language model (arch lm): it has no source to translate; continue text with tg generate",
                  op.model);
    if (rc == 0 && tg_model_cfg(m)->arch == TG_ARCH_MLM)
        rc = fail("'%s' is a masked language model (arch mlm): it has no decoder; score a text with tg score --text",
                  op.model);
    /* the stored tokenizer's words or characters (a checkpoint without one: words, as ever) */
    tg_text_options to = {0};
    if (rc == 0) rc = tg_tool_model_text("translate", op.model, m, NULL, &to, NULL);
    op.chars = to.chars;
    op.spm = to.tokenizer != NULL;
    int32_t **ids = calloc((size_t)(text.n ? text.n : 1), sizeof *ids);
    int64_t *len = calloc((size_t)(text.n ? text.n : 1), sizeof *len);
    if (rc == 0 && (!ids || !len)) rc = fail("out of memory");
    for (int64_t i = 0; rc == 0 && i < text.n; i++) {
        if (encode(tg_model_src_vocab(m), &to, text.line[i], &ids[i], &len[i]) != TG_OK) {
            rc = fail("%s: line %lld: %s", in_name, (long long)(i + 1), tg_error_message());
            break;
        }
        int64_t max_len = tg_model_cfg(m)->max_len;
        if (len[i] + 1 > max_len) {
            rc = fail("%s: line %lld has %lld tokens; the model takes at most %lld (+ </s>)", in_name,
                      (long long)(i + 1), (long long)len[i], (long long)(max_len - 1));
        }
    }
    if (rc == 0 && op.output) {
        FILE *f = fopen(op.output, "w");
        if (f)
            out = f;
        else
            rc = fail("cannot open output '%s': %s", op.output, strerror(errno));
    }
    if (rc == 0 && text.n > 0) rc = translate(m, &op, ids, len, text.n, out);
    if (rc == 0 && getenv("TG_PROFILE")) tg_profile_report(stderr); /* every step graph's nodes */
    if (out != stdout) {
        if (fclose(out) != 0 && rc == 0) rc = fail("cannot write '%s': %s", op.output, strerror(errno));
    } else if (fflush(out) != 0 && rc == 0) {
        rc = fail("cannot write the output: %s", strerror(errno));
    }
    for (int64_t i = 0; ids && i < text.n; i++) free(ids[i]);
    free(ids);
    free(len);
    lines_free(&text);
    tg_model_free(m);
    tg_backend_free(be);
    return rc;
}
