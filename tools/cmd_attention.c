/* `tg attention`: the attention weights of every layer and head of a checkpoint on one input,
 * as CSV files and, through gnuplot, one PNG heat-map grid per attention sub-layer, so that one
 * can see what the attention variants do differently (tg_model_attention_maps); or, with
 * --stats, the rank, entropy and scale of the logits of every head over a file of inputs
 * (tg_model_attention_logits, tools/attn_stats.c).
 *
 * Inputs by family: an encoder-decoder takes --src and --tgt (teacher forcing; without --tgt
 * the greedy translation is used); a language model (arch lm) or masked language model (arch
 * mlm) takes --text; --stats reads them from files, one input a line. Everything is read and
 * checked before DIR (or the CSV) is written. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tg/decode.h"
#include "tg/train.h"
#include "tools/attn_stats.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "tools/model_text.h"

static const char SYNOPSIS[] =
    "--model M (--src TEXT [--tgt TEXT] | --text TEXT) --out DIR [--chars] [--no-png]\n"
    "       tg attention --model M (--src-file F [--tgt-file F] | --text-file F) --stats OUT.csv [--limit N]";
static const char DESCRIPTION[] =
    "Write the attention weights of every layer and head (encoder self-, decoder self- and\n"
    "cross-attention) for one input: DIR/<sub-layer>.h<k>.csv (rows: queries, columns: keys,\n"
    "labelled with the tokens) and DIR/<sub-layer>.png, a grid of heat maps, one per head, drawn\n"
    "by gnuplot (DIR/<sub-layer>.gp is the script). interacting_pairwise has h x h maps (h<i>_<j>).\n"
    "An encoder-decoder without --tgt attends over its own greedy translation.\n"
    "--stats: over the first N lines of the input files, one input at a time, per sub-layer and\n"
    "head, the numerical and effective rank of the pre-mask logit matrices against n, m and the\n"
    "head width, the attention entropy and the logits' standard deviation, into OUT.csv, and one\n"
    "line per sub-layer on stdout.";

typedef struct {
    int64_t n;
    char **tok; /* labels: tokens and specials */
    int32_t *ids;
} seq;

static void seq_free(seq *s) {
    for (int64_t i = 0; s->tok && i < s->n; i++) free(s->tok[i]);
    free(s->tok);
    free(s->ids);
    memset(s, 0, sizeof *s);
}

/* the tokens of text as ids and labels, with an optional special label before and after */
/* the model's sentencepiece tokenizer, when it stores one (set once by tg_cmd_attention) */
static const tg_tokenizer *spm_tokenizer;

static tg_status make_seq(const tg_vocab *v, const char *text, bool chars, const char *pre, const char *post, seq *s) {
    tg_text_options to = {.chars = chars, .tokenizer = spm_tokenizer};
    char **toks = NULL;
    int64_t nt = 0;
    tg_status st = tg_tokenize(text, &to, &toks, &nt);
    if (st) return st;
    s->n = nt + (pre != NULL) + (post != NULL);
    s->tok = calloc((size_t)s->n + 1, sizeof *s->tok);
    s->ids = calloc((size_t)nt + 1, sizeof *s->ids);
    if (!s->tok || !s->ids) st = tg_error_set(TG_ERR_NOMEM, "out of memory");
    int64_t k = 0;
    if (st == TG_OK && pre) s->tok[k++] = strdup(pre);
    for (int64_t i = 0; st == TG_OK && i < nt; i++) {
        s->ids[i] = tg_vocab_id(v, toks[i]);
        s->tok[k++] = strdup(tg_vocab_token(v, s->ids[i])); /* unknown words show as <unk> */
    }
    if (st == TG_OK && post) s->tok[k++] = strdup(post);
    tg_tokens_free(toks, nt);
    return st;
}

/* CSV field: quoted, quotes doubled (RFC 4180) */
static void csv_field(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

/* a gnuplot single-quoted string: quotes doubled */
static void gp_string(FILE *f, const char *s) {
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'') fputc('\'', f);
        fputc(*s, f);
    }
    fputc('\'', f);
}

static void gp_tics(FILE *f, const char *axis, const seq *s) {
    fprintf(f, "set %s (", axis);
    for (int64_t i = 0; i < s->n; i++) {
        if (i) fputc(',', f);
        gp_string(f, s->tok[i]);
        fprintf(f, " %lld", (long long)i);
    }
    fprintf(f, ")\n");
}

/* one sub-layer: a CSV and a matrix file per head, and the gnuplot script of the grid */
static tg_status write_map(const char *dir, const tg_attn_map *mp, const seq *q, const seq *k, bool png, int *pngs) {
    int64_t h1 = mp->shape[1], h2 = mp->ndim == 5 ? mp->shape[2] : 1;
    int64_t n = mp->shape[mp->ndim - 2], m = mp->shape[mp->ndim - 1], heads = h1 * h2;
    if (n != q->n || m != k->n)
        return tg_error_set(TG_ERR_SHAPE, "%s: weights [%lld, %lld] for %lld queries and %lld keys", mp->name,
                            (long long)n, (long long)m, (long long)q->n, (long long)k->n);
    char path[4096], head[48];
    int64_t cols = heads <= 4 ? heads : (heads <= 9 ? 3 : 4), rows = (heads + cols - 1) / cols;
    snprintf(path, sizeof path, "%s/%s.gp", dir, mp->name);
    FILE *gp = fopen(path, "w");
    if (!gp) return tg_error_set(TG_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    fprintf(gp, "# gnuplot %s.gp: the attention weights of %s, one heat map per head\n", mp->name, mp->name);
    fprintf(gp, "set terminal pngcairo noenhanced size %lld,%lld font ',8'\nset output '%s.png'\n",
            (long long)(cols * 380), (long long)(rows * 360 + 40), mp->name);
    fprintf(gp, "set multiplot layout %lld,%lld title '%s'\nunset key\nset cbrange [0:1]\n", (long long)rows,
            (long long)cols, mp->name);
    fprintf(gp, "set palette defined (0 'white', 1 '#08306b')\nset xtics rotate by 90 right\n");
    fprintf(gp, "set xrange [-0.5:%lld.5]\nset yrange [%lld.5:-0.5]\n", (long long)(m - 1), (long long)(n - 1));
    gp_tics(gp, "xtics", k);
    gp_tics(gp, "ytics", q);
    tg_status st = TG_OK;
    for (int64_t a = 0; st == TG_OK && a < h1; a++)
        for (int64_t b = 0; st == TG_OK && b < h2; b++) {
            if (h2 > 1) snprintf(head, sizeof head, "h%lld_%lld", (long long)a, (long long)b);
            else snprintf(head, sizeof head, "h%lld", (long long)a);
            const float *w = mp->w + (a * h2 + b) * n * m; /* batch 0 */
            snprintf(path, sizeof path, "%s/%s.%s.csv", dir, mp->name, head);
            FILE *f = fopen(path, "w");
            snprintf(path, sizeof path, "%s/%s.%s.dat", dir, mp->name, head);
            FILE *d = fopen(path, "w");
            if (!f || !d) st = tg_error_set(TG_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
            if (st == TG_OK) {
                fprintf(f, "\"query \\ key\"");
                for (int64_t j = 0; j < m; j++) fputc(',', f), csv_field(f, k->tok[j]);
                fputc('\n', f);
                for (int64_t i = 0; i < n; i++) {
                    csv_field(f, q->tok[i]);
                    for (int64_t j = 0; j < m; j++) {
                        fprintf(f, ",%.6f", (double)w[i * m + j]);
                        fprintf(d, j ? " %.6f" : "%.6f", (double)w[i * m + j]);
                    }
                    fputc('\n', f);
                    fputc('\n', d);
                }
                fprintf(gp, "set title '%s'\nplot '%s.%s.dat' matrix with image\n", head, mp->name, head);
            }
            if ((f && fclose(f) != 0) || (d && fclose(d) != 0))
                if (st == TG_OK) st = tg_error_set(TG_ERR_IO, "cannot write the weights of %s", mp->name);
        }
    fprintf(gp, "unset multiplot\n");
    if (fclose(gp) != 0 && st == TG_OK) st = tg_error_set(TG_ERR_IO, "cannot write the script of %s", mp->name);
    if (st == TG_OK && png) { /* gnuplot runs in DIR, where the script names its files */
        char cmd[8192];
        snprintf(cmd, sizeof cmd, "cd '%s' && gnuplot '%s.gp' 2>/dev/null", dir, mp->name);
        if (system(cmd) == 0) ++*pngs;
    }
    return st;
}

/* The batch of one input (and its tokens in es, ds): an encoder-decoder's source and target,
 * else its greedy translation; a language model's text. *too_long: the input does not fit
 * max_len (an error is set too). On TG_OK *b holds a batch for tg_batch_free. */
static tg_status one_input(tg_model *m, const char *src, const char *tgt, const char *text, bool chars, seq *es,
                           seq *ds, tg_batch *b, bool *too_long) {
    tg_model_arch arch = tg_model_cfg(m)->arch;
    const tg_vocab *sv = tg_model_src_vocab(m), *tv = tg_model_tgt_vocab(m);
    int64_t max_len = tg_model_cfg(m)->max_len;
    tg_status st = TG_OK;
    *too_long = false;
    if (arch == TG_ARCH_ENCDEC) {
        st = make_seq(sv, src, chars, NULL, "</s>", es);
        if (st == TG_OK && es->n > max_len) {
            *too_long = true;
            return tg_error_set(TG_ERR_INVALID, "--src has %lld tokens (+ </s>); the model takes at most %lld",
                                (long long)(es->n - 1), (long long)(max_len - 1));
        }
        if (st == TG_OK && tgt) st = make_seq(tv, tgt, chars, "<s>", NULL, ds);
        if (st == TG_OK && !tgt) { /* the greedy translation */
            tg_nbest *res = NULL;
            tg_decode_options o = tg_decode_options_default();
            o.strategy = TG_DECODE_GREEDY;
            int64_t sn = es->n - 1;
            const int32_t *sp = es->ids;
            st = tg_decode(m, &sp, &sn, 1, &o, &res);
            ds->n = st == TG_OK && res ? res[0].hyp[0].len + 1 : 0;
            if (st == TG_OK && res && (!(ds->tok = calloc((size_t)ds->n, sizeof *ds->tok)) ||
                                       !(ds->ids = calloc((size_t)ds->n, sizeof *ds->ids))))
                st = tg_error_set(TG_ERR_NOMEM, "out of memory");
            for (int64_t i = 0; st == TG_OK && res && i < ds->n; i++) {
                if (i > 0) ds->ids[i - 1] = res[0].hyp[0].ids[i - 1];
                ds->tok[i] = strdup(i ? tg_vocab_token(tv, ds->ids[i - 1]) : "<s>");
            }
            if (res) tg_decode_free(res, 1);
            if (st == TG_OK && ds->n > max_len) {
                /* the greedy translation ran to max_len without </s>: its first tokens that fit */
                fprintf(stderr, "tg attention: the greedy translation reached max_len %lld without </s>; the maps "
                                "show its first %lld tokens\n", (long long)max_len, (long long)(max_len - 1));
                for (int64_t i = max_len; i < ds->n; i++) free(ds->tok[i]);
                ds->n = max_len;
            }
        }
        int64_t tn = ds->n - 1, sn = es->n - 1;
        const int32_t *tp = ds->ids, *sp = es->ids;
        if (st == TG_OK && tn + 1 > max_len) {
            *too_long = true;
            return tg_error_set(TG_ERR_INVALID, "--tgt has %lld tokens (+ <s>); the model takes at most %lld",
                                (long long)tn, (long long)(max_len - 1));
        }
        if (st == TG_OK) st = tg_batch_build(b, 1, &sp, &sn, &tp, &tn);
        return st;
    }
    bool lm = arch == TG_ARCH_LM; /* lm: <s> + tokens; mlm: tokens + </s> */
    st = make_seq(tv, text, chars, lm ? "<s>" : NULL, lm ? NULL : "</s>", es);
    int64_t n = es->n - 1;
    const int32_t *p = es->ids;
    int32_t *none = st == TG_OK ? calloc((size_t)(n + 1), sizeof *none) : NULL; /* mlm: no targets */
    const int32_t *np = none;
    if (st == TG_OK && !none) st = tg_error_set(TG_ERR_NOMEM, "out of memory");
    if (st == TG_OK && n + 1 > max_len) {
        *too_long = true;
        st = tg_error_set(TG_ERR_INVALID, "the text has %lld tokens; the model takes at most %lld", (long long)n,
                          (long long)(max_len - 1));
    }
    if (st == TG_OK) st = lm ? tg_batch_build_lm(b, 1, &p, &n) : tg_batch_build_mlm(b, 1, &p, &np, &n);
    free(none);
    return st;
}

/* the lines of a file, without their ends ('\n', "\r\n"), pointing into *buf (malloc'ed) */
static tg_status read_lines(const char *path, char **buf, char ***lines, int64_t *count) {
    size_t len = 0;
    *lines = NULL;
    *count = 0;
    if (!(*buf = tg_cli_read_file(path, &len))) return tg_error_set(TG_ERR_IO, "cannot read '%s': %s", path, strerror(errno));
    int64_t n = 0;
    for (size_t i = 0; i < len; i++) n += (*buf)[i] == '\n';
    if (!(*lines = calloc((size_t)n + 1, sizeof **lines))) return tg_error_set(TG_ERR_NOMEM, "out of memory");
    for (char *p = *buf; *p;) {
        char *e = strchr(p, '\n');
        if (e) *e = '\0';
        size_t l = strlen(p);
        if (l && p[l - 1] == '\r') p[l - 1] = '\0';
        (*lines)[(*count)++] = p;
        if (!e) break;
        p = e + 1;
    }
    return TG_OK;
}

/* --stats: the first `limit` non-empty inputs of the files, one at a time, into the CSV at out */
static tg_status stats(tg_model *m, const char *src_file, const char *tgt_file, const char *text_file, int64_t limit,
                       bool chars, const char *model, const char *out) {
    char *buf[2] = {NULL, NULL}, **lines[2] = {NULL, NULL};
    int64_t count[2] = {0, 0}, used = 0, empty = 0, too_long = 0;
    const char *first = src_file ? src_file : text_file;
    tg_status st = read_lines(first, &buf[0], &lines[0], &count[0]);
    if (st == TG_OK && tgt_file) st = read_lines(tgt_file, &buf[1], &lines[1], &count[1]);
    if (st == TG_OK && tgt_file && count[0] != count[1])
        st = tg_error_set(TG_ERR_FORMAT, "'%s' has %lld lines and '%s' %lld", first, (long long)count[0], tgt_file,
                          (long long)count[1]);
    tg_attn_stats *acc = st == TG_OK ? tg_attn_stats_new(tg_model_cfg(m)) : NULL;
    if (st == TG_OK && !acc) st = tg_error_set(TG_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; st == TG_OK && i < count[0] && (limit == 0 || used < limit); i++) {
        const char *a = lines[0][i], *t = tgt_file ? lines[1][i] : NULL;
        if (!a[strspn(a, " \t")] || (t && !t[strspn(t, " \t")])) {
            empty++;
            continue;
        }
        seq es = {0}, ds = {0};
        tg_batch b = {0};
        bool long_input = false;
        tg_attn_map *maps = NULL;
        int64_t nmaps = 0;
        st = one_input(m, src_file ? a : NULL, t, src_file ? NULL : a, chars, &es, &ds, &b, &long_input);
        if (st == TG_OK) {
            st = tg_model_attention_logits(m, &b, &maps, &nmaps);
            if (st == TG_OK) st = tg_attn_stats_add(acc, maps, nmaps);
            if (st) st = tg_error_prefix(st, "line %lld", (long long)(i + 1));
            tg_attn_maps_free(maps, nmaps);
            tg_batch_free(&b);
            used++;
        } else if (long_input) {
            too_long++;
            st = TG_OK;
        }
        seq_free(&es);
        seq_free(&ds);
    }
    if (st == TG_OK && used == 0)
        st = tg_error_set(TG_ERR_INVALID, "no input of '%s' fits the model (%lld empty, %lld longer than max_len)", first,
                          (long long)empty, (long long)too_long);
    if (st == TG_OK) st = tg_attn_stats_write_csv(acc, out);
    if (st == TG_OK) {
        const tg_model_config *c = tg_model_cfg(m);
        printf("tg attention --stats: '%s' (%s, %lld heads, d_model %lld, d_k %lld) over %lld inputs of '%s'", model,
               tg_attn_kind_name(c->attention), (long long)c->heads, (long long)c->d_model,
               (long long)tg_model_head_dim(c), (long long)used, first);
        if (empty || too_long)
            printf(" (skipped: %lld empty, %lld longer than max_len)", (long long)empty, (long long)too_long);
        printf("; per head in %s\n", out);
        tg_attn_stats_print(acc, stdout);
    }
    tg_attn_stats_free(acc);
    for (int i = 0; i < 2; i++) free(lines[i]), free(buf[i]);
    return st;
}

int tg_cmd_attention(int argc, char **argv) {
    const char *cmd = "attention", *model = NULL, *src = NULL, *tgt = NULL, *text = NULL, *out = NULL;
    const char *stats_out = NULL, *src_file = NULL, *tgt_file = NULL, *text_file = NULL;
    bool chars = false, no_png = false;
    int64_t threads = 0, limit = 200;
    tg_opt opts[] = {
        {"model", TG_OPT_STRING, &model, 0, 0, NULL, "M", "checkpoint (required)", 0, 0},
        {"src", TG_OPT_STRING, &src, 0, 0, NULL, "TEXT", "encoder-decoder: the source sentence", 0, 0},
        {"tgt", TG_OPT_STRING, &tgt, 0, 0, NULL, "TEXT", "encoder-decoder: the target (default: greedy translation)", 0, 0},
        {"text", TG_OPT_STRING, &text, 0, 0, NULL, "TEXT", "language models: the sequence", 0, 0},
        {"out", TG_OPT_STRING, &out, 0, 0, NULL, "DIR", "output directory (required without --stats; created)", 0, 0},
        {"chars", TG_OPT_BOOL, &chars, 0, 0, NULL, NULL, "characters (a checkpoint that stores no tokenizer)", 0, 0},
        {"no-png", TG_OPT_BOOL, &no_png, 0, 0, NULL, NULL, "CSV and gnuplot scripts only", 0, 0},
        {"stats", TG_OPT_STRING, &stats_out, 0, 0, NULL, "OUT.csv", "rank, entropy and scale per head over input files", 0, 0},
        {"src-file", TG_OPT_STRING, &src_file, 0, 0, NULL, "F", "--stats, encoder-decoder: source sentences, one a line", 0, 0},
        {"tgt-file", TG_OPT_STRING, &tgt_file, 0, 0, NULL, "F", "--stats: their targets (default: greedy translations)", 0, 0},
        {"text-file", TG_OPT_STRING, &text_file, 0, 0, NULL, "F", "--stats, language models: sequences, one a line", 0, 0},
        {"limit", TG_OPT_INT, &limit, 0, 1e12, NULL, "N", "--stats: the first N non-empty inputs (0: all)", 0, 0},
        {"threads", TG_OPT_INT, &threads, 0, 4096, NULL, "N", "CPU threads (0: TG_NUM_THREADS or all cores)", 0, 0},
        {0},
    };
    tg_cli_set_usage(SYNOPSIS, DESCRIPTION);
    int rc = tg_cli_parse(cmd, opts, argc, argv, NULL, 0, NULL);
    if (rc == TG_CLI_HELP) return TG_EXIT_OK;
    if (rc) return TG_EXIT_USAGE;
    if (!model) return tg_cli_fail(cmd, TG_EXIT_USAGE, "--model is required");
    if (stats_out) {
        if (out || src || tgt || text)
            return tg_cli_fail(cmd, TG_EXIT_USAGE, "--stats reads its inputs from --src-file/--tgt-file or --text-file "
                                                   "and writes one CSV: no --out, --src, --tgt or --text");
        if (!src_file == !text_file)
            return tg_cli_fail(cmd, TG_EXIT_USAGE, "--stats needs --src-file (encoder-decoder) or --text-file (language models)");
        if (tgt_file && !src_file) return tg_cli_fail(cmd, TG_EXIT_USAGE, "--tgt-file goes with --src-file");
    } else {
        if (src_file || tgt_file || text_file || tg_cli_find(opts, "limit")->on_cli)
            return tg_cli_fail(cmd, TG_EXIT_USAGE, "--src-file, --tgt-file, --text-file and --limit go with --stats");
        if (!out) return tg_cli_fail(cmd, TG_EXIT_USAGE, "--out (or --stats) is required");
        if (!src == !text) return tg_cli_fail(cmd, TG_EXIT_USAGE, "give --src (encoder-decoder) or --text (language models)");
        if (tgt && !src) return tg_cli_fail(cmd, TG_EXIT_USAGE, "--tgt goes with --src");
    }
    bool want_src = src || src_file;

    tg_backend *be = NULL;
    tg_model *m = NULL;
    seq es = {0}, ds = {0};
    tg_batch b = {0};
    bool have_batch = false, too_long = false;
    tg_attn_map *maps = NULL;
    int64_t nmaps = 0;
    tg_status st = tg_backend_cpu_new((int)threads, &be);
    if (st == TG_OK) st = tg_model_load(model, be, &m);
    tg_model_arch arch = st == TG_OK ? tg_model_cfg(m)->arch : TG_ARCH_ENCDEC;
    if (st == TG_OK && (arch == TG_ARCH_ENCDEC) != want_src)
        st = tg_error_set(TG_ERR_INVALID, "'%s' is %s (arch %s): give %s", model,
                          arch == TG_ARCH_ENCDEC ? "an encoder-decoder" : arch == TG_ARCH_LM ? "a language model"
                                                                                              : "a masked language model",
                          tg_model_arch_name(arch),
                          arch == TG_ARCH_ENCDEC ? (stats_out ? "--src-file (and --tgt-file)" : "--src (and --tgt)")
                                                 : (stats_out ? "--text-file" : "--text"));
    tg_text_options to = {0}; /* the stored tokenizer's words or characters */
    int trc = 0;
    if (st == TG_OK && (trc = tg_tool_model_text(cmd, model, m, tg_cli_find(opts, "chars"), &to, NULL))) {
        tg_model_free(m);
        tg_backend_free(be);
        return trc;
    }
    chars = to.chars;
    spm_tokenizer = to.tokenizer;
    if (st == TG_OK && stats_out) {
        st = stats(m, src_file, tgt_file, text_file, limit, chars, model, stats_out);
        tg_model_free(m);
        tg_backend_free(be);
        if (st) return tg_cli_fail(cmd, TG_EXIT_RUNTIME, "%s", tg_error_message());
        return TG_EXIT_OK;
    }
    if (st == TG_OK) st = one_input(m, src, tgt, text, chars, &es, &ds, &b, &too_long);
    have_batch = st == TG_OK;
    if (st == TG_OK) st = tg_model_attention_maps(m, &b, &maps, &nmaps);
    /* everything computed: now the directory */
    if (st == TG_OK && mkdir(out, 0777) != 0 && errno != EEXIST)
        st = tg_error_set(TG_ERR_IO, "cannot create directory '%s': %s", out, strerror(errno));
    int pngs = 0;
    for (int64_t i = 0; st == TG_OK && i < nmaps; i++) {
        /* queries and keys: the encoder's tokens, or the decoder's (self), or decoder over encoder */
        bool enc = !strncmp(maps[i].name, "encoder.", 8), cross = strstr(maps[i].name, "cross_attn") != NULL;
        const seq *q = arch != TG_ARCH_ENCDEC || enc ? &es : &ds, *k = arch != TG_ARCH_ENCDEC || (enc || cross) ? &es : &ds;
        st = write_map(out, &maps[i], q, k, !no_png, &pngs);
    }
    if (st == TG_OK)
        printf("tg attention: %lld attention sub-layers of '%s' written to %s/ (CSV per head; %d PNG heat-map grids%s)\n",
               (long long)nmaps, model, out, pngs, no_png ? ", --no-png" : pngs < nmaps ? "; gnuplot missing or failed" : "");
    tg_attn_maps_free(maps, nmaps);
    if (have_batch) tg_batch_free(&b);
    seq_free(&es);
    seq_free(&ds);
    tg_model_free(m);
    tg_backend_free(be);
    if (st) return tg_cli_fail(cmd, TG_EXIT_RUNTIME, "%s", tg_error_message());
    return TG_EXIT_OK;
}
