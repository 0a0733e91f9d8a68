/* `tg score`: log P(target | source) of each sentence pair under a checkpoint (docs/model.md §4: the
 * sum over target positions of log softmax(logits)[target], natural log, </s> included, the
 * softmax over the whole target vocabulary, dropout off), one line per pair, "%.6f".
 *
 * Everything is read and checked first (UTF-8, no empty lines, parallel line counts, no sentence
 * longer than the model's max_len), so a bad input prints nothing on standard output. Pairs are
 * scored in batches of --batch in file order; padding is masked, so a score does not depend on
 * the batch it is in.
 *
 * A language model (arch lm) scores a text instead (--text, one sequence per line): log P of
 * each line's tokens and </s> given <s>, and on standard error the perplexity
 * exp(-Σ log P / Σ tokens), </s> counted as a token. A masked language model (arch mlm) scores
 * --text masked by BERT's rule from --seed: log P of the masked tokens of each line, and on
 * standard error the masked-token accuracy and perplexity. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tg/train.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "tools/model_text.h"

static const char SYNOPSIS[] = "--model M (--src FILE --tgt FILE | --text FILE) [--batch N] [--chars] [--threads N]";
static const char DESCRIPTION[] =
    "Print log P(target | source) for each line pair: natural log, </s> included (docs/model.md §4), one\n"
    "decimal number per line, in input order. A language model (arch lm) scores each line of\n"
    "--text and prints its perplexity per token on standard error; a masked language model (arch\n"
    "mlm) masks each line of --text (--mask-prob, --seed) and prints log P of the masked tokens,\n"
    "and on standard error the masked-token accuracy.";

/* log P of every line of an imported language model's text (its byte-level BPE): the line as a
 * document of the stream tg train --init trains on, ids + end-of-text, each id predicting the
 * next (the first conditioned on nothing: no start token); *tokens counts the predicted ids */
static tg_status score_own(tg_model *m, const tg_tokenizer *tok, const tg_lines *l, double **scores, int64_t *tokens) {
    tg_stream_options so = {.text = {.tokenizer = tok}, .docs = TG_DOCS_LINES};
    *scores = malloc((size_t)(l->n ? l->n : 1) * sizeof **scores);
    tg_status st = *scores ? TG_OK : tg_error_set(TG_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; st == TG_OK && i < l->n; i++) {
        char *one[1] = {l->line[i]};
        tg_lines line = {.n = 1, .line = one, .buf = NULL, .path = l->path};
        const tg_lines *texts[1] = {&line};
        int32_t *ids = NULL;
        int64_t n = 0, zero = 0;
        tg_corpus *c = NULL;
        tg_batch b;
        st = tg_stream_encode(texts, 1, tg_model_tgt_vocab(m), &so, &ids, &n);
        if (st == TG_OK && n - 1 > tg_model_cfg(m)->max_len)
            st = tg_error_set(TG_ERR_INVALID, "'%s' line %lld: %lld tokens + the end of text is longer than the model's "
                              "max_len %lld", l->path, (long long)i + 1, (long long)n - 1, (long long)tg_model_cfg(m)->max_len);
        if (st == TG_OK) st = tg_corpus_new_stream(ids, n, n - 1, &c);
        if (st == TG_OK) tg_corpus_set_target_pad(c, tg_model_cfg(m)->pad_id);
        if (st == TG_OK) st = tg_corpus_batch(c, &zero, 1, &b);
        if (st == TG_OK) {
            st = tg_model_score(m, &b, *scores + i);
            *tokens += b.tgt_tokens;
            tg_batch_free(&b);
        }
        tg_corpus_free(c);
        free(ids);
    }
    return st;
}

int tg_cmd_score(int argc, char **argv) {
    const char *cmd = "score", *model = NULL, *src = NULL, *tgt = NULL, *text = NULL, *backend = "cpu";
    int64_t batch = 32, threads = 0, seed = 1;
    double mask_prob = 0.15;
    bool chars = false;
    tg_opt opts[] = {
        {"model", TG_OPT_STRING, &model, 0, 0, NULL, "M", "checkpoint (.safetensors) (required)", 0, 0},
        {"src", TG_OPT_STRING, &src, 0, 0, NULL, "FILE", "source sentences (required)", 0, 0},
        {"tgt", TG_OPT_STRING, &tgt, 0, 0, NULL, "FILE", "target sentences, parallel to --src (required)", 0, 0},
        {"text", TG_OPT_STRING, &text, 0, 0, NULL, "FILE", "a language model's text, one sequence per line", 0, 0},
        {"mask-prob", TG_OPT_FLOAT, &mask_prob, 1e-6, 1, NULL, "P", "arch mlm: share of tokens masked", 0, 0},
        {"seed", TG_OPT_INT, &seed, 0, 9007199254740992.0, NULL, "S", "arch mlm: masking seed", 0, 0},
        {"batch", TG_OPT_INT, &batch, 1, 100000, NULL, "N", "sentence pairs per batch", 0, 0},
        {"chars", TG_OPT_BOOL, &chars, 0, 0, NULL, NULL, "characters (a checkpoint that stores no tokenizer)", 0, 0},
        {"threads", TG_OPT_INT, &threads, 0, 4096, NULL, "N", "CPU threads (0: TG_NUM_THREADS or all cores)", 0, 0},
        {"backend", TG_OPT_CHOICE, &backend, 0, 0, tg_backend_names(), NULL, "where to compute (cuda: GPU 0)", 0, 0},
        {0},
    };
    tg_cli_set_usage(SYNOPSIS, DESCRIPTION);
    int rc = tg_cli_parse(cmd, opts, argc, argv, NULL, 0, NULL);
    if (rc == TG_CLI_HELP) return TG_EXIT_OK;
    if (rc) return TG_EXIT_USAGE;
    if (!model || (!text && (!src || !tgt)) || (text && (src || tgt)))
        return tg_cli_fail(cmd, TG_EXIT_USAGE, "--model and either --src and --tgt or (a language model) --text are required");

    tg_backend *be = NULL;
    tg_model *m = NULL;
    tg_lines ls = {0}, lt = {0};
    tg_corpus *c = NULL;
    double *scores = NULL;
    int64_t tokens = 0;
    tg_status st = tg_backend_new(backend, &(tg_backend_options){.threads = (int)threads, .device = 0}, &be);
    if (st == TG_OK) st = tg_model_load(model, be, &m);
    tg_text_options to = {0}; /* the stored tokenizer's words or characters, or an imported LM's own */
    const tg_tokenizer *foreign = NULL;
    if (st == TG_OK && (rc = tg_tool_model_text(cmd, model, m, tg_cli_find(opts, "chars"), &to, &foreign))) st = TG_ERR_INVALID;
    tg_model_arch arch = st == TG_OK ? tg_model_cfg(m)->arch : TG_ARCH_ENCDEC;
    if (st == TG_OK && foreign && arch != TG_ARCH_LM)
        rc = tg_cli_fail(cmd, TG_EXIT_RUNTIME, "'%s' carries a %s tokenizer with its own special tokens (an imported "
                         "model): tg score reads it for a language model (an imported GPT-2) only", model,
                         tg_tokenizer_kind_name(tg_tokenizer_kind(foreign))), st = TG_ERR_INVALID;
    bool lm = st == TG_OK && arch != TG_ARCH_ENCDEC; /* lm or mlm: a text */
    if (st == TG_OK && lm && !text)
        st = tg_error_set(TG_ERR_INVALID, "'%s' is a %slanguage model (arch %s): score a text with --text FILE", model,
                          arch == TG_ARCH_MLM ? "masked " : "", tg_model_arch_name(arch));
    if (st == TG_OK && !lm && text)
        st = tg_error_set(TG_ERR_INVALID, "'%s' is an encoder-decoder model (arch encdec): score pairs with --src and --tgt",
                          model);
    if (st == TG_OK && !lm) st = tg_lines_read(src, false, &ls);
    if (st == TG_OK) st = tg_lines_read(lm ? text : tgt, false, &lt);
    if (st == TG_OK && foreign) { /* each line a document of the model's own stream: ids + end-of-text */
        st = score_own(m, foreign, &lt, &scores, &tokens);
    } else if (st == TG_OK) {
        /* a sentence the model cannot take is an error here, never silently skipped */
        tg_corpus_options co = {.text = to, .max_len = tg_model_cfg(m)->max_len, .skip_long = false};
        st = arch == TG_ARCH_MLM ? tg_corpus_new_mlm(&lt, tg_model_tgt_vocab(m), &co, mask_prob, (uint64_t)seed, &c)
             : lm                ? tg_corpus_new_lm(&lt, tg_model_tgt_vocab(m), &co, &c)
                                 : tg_corpus_new(&ls, &lt, tg_model_src_vocab(m), tg_model_tgt_vocab(m), &co, &c);
    }
    int64_t right = 0;
    int64_t n = foreign ? lt.n : tg_corpus_size(c);
    if (st == TG_OK && n == 0) /* an empty score list would pass for a result */
        st = tg_error_set(TG_ERR_INVALID, "'%s' holds no %s: nothing to score", lm ? text : src, lm ? "line" : "sentence");
    if (st == TG_OK && !scores && !(scores = malloc((size_t)(n ? n : 1) * sizeof *scores)))
        st = tg_error_set(TG_ERR_NOMEM, "out of memory");
    int64_t *idx = st == TG_OK ? malloc((size_t)batch * sizeof *idx) : NULL;
    if (st == TG_OK && !idx) st = tg_error_set(TG_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; st == TG_OK && !foreign && i < n; i += batch) {
        int64_t k = n - i < batch ? n - i : batch;
        for (int64_t j = 0; j < k; j++) idx[j] = i + j;
        tg_batch b;
        st = tg_corpus_batch(c, idx, k, &b);
        if (st == TG_OK) {
            st = tg_model_score(m, &b, scores + i);
            tokens += b.tgt_tokens;
            int64_t r = 0, t = 0;
            if (st == TG_OK && arch == TG_ARCH_MLM) st = tg_model_mlm_accuracy(m, &b, &r, &t);
            right += r;
            tg_batch_free(&b);
        }
    }
    free(idx);
    if (st == TG_OK) {
        for (int64_t i = 0; i < n; i++) printf("%.6f\n", scores[i]);
        if (fflush(stdout) != 0) st = tg_error_set(TG_ERR_IO, "cannot write the scores");
        double sum = 0.0;
        for (int64_t i = 0; i < n; i++) sum += scores[i];
        if (arch == TG_ARCH_LM && st == TG_OK && tokens > 0)
            fprintf(stderr, "tg score: %lld sequences, %lld tokens with </s>: %.4f nats per token, perplexity %.3f\n",
                    (long long)n, (long long)tokens, -sum / (double)tokens, exp(-sum / (double)tokens));
        if (arch == TG_ARCH_MLM && st == TG_OK && tokens > 0)
            fprintf(stderr, "tg score: %lld sequences, %lld masked tokens: accuracy %.2f %%, %.4f nats per token, perplexity %.3f\n",
                    (long long)n, (long long)tokens, 100.0 * (double)right / (double)tokens, -sum / (double)tokens,
                    exp(-sum / (double)tokens));
    }
    if (st && !rc) rc = tg_cli_fail(cmd, TG_EXIT_RUNTIME, "%s", tg_error_message());
    free(scores);
    tg_corpus_free(c);
    tg_lines_free(&ls);
    tg_lines_free(&lt);
    tg_model_free(m);
    tg_backend_free(be);
    return rc;
}
