/* `tg train`: train a Transformer on a parallel corpus (docs/model.md §1 training recipe).
 *
 * Writes into --out DIR: model.safetensors (the docs/model.md §4 checkpoint), state.safetensors (optimizer
 * moments, position in the data, RNG: `--resume` continues bit-exactly) and metrics.jsonl (one
 * JSON object per line: train / dev / end events), each checkpoint written atomically.
 *
 * Order of work, so that bad input leaves no files behind: parse and check every option, read
 * and check every data file (UTF-8, no empty lines, parallel line counts), build the vocabularies
 * and the model configuration, and only then create DIR and train. Option precedence: command
 * line, then --config FILE (JSON), then (with --resume) the options the resumed run stored, then
 * the defaults. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tg/json.h"
#include "tg/safetensors.h"
#include "tg/tokenizer.h"
#include "tg/train.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "tools/model_text.h"
#include "tools/train_defaults.h"
#include "tools/train_group.h"
#include "tools/train_stream.h"

static const char SYNOPSIS[] =
    "--train-src FILE --train-tgt FILE [--dev-src FILE --dev-tgt FILE] --out DIR\n"
    "                | --arch lm|mlm --train FILE [--dev FILE] --out DIR\n"
    "                (--steps N | --epochs N | --minutes M) [model and training options] [--config FILE] [--resume]";
static const char DESCRIPTION[] =
    "Train an encoder-decoder Transformer; or with --arch lm a decoder-only language model on a\n"
    "token stream (GPT-2 style: the documents of --train, each <s> ... </s> with </s> the end-of-text\n"
    "token and line breaks the token U+21B5, cut into shuffled blocks of --block positions; dev data\n"
    "from --dev or the stream's held-out tail); or with --arch mlm an encoder-only masked language\n"
    "model (BERT style: 15 % of the tokens of each line masked by the 80/10/10 rule, anew for every\n"
    "batch as RoBERTa does, or once with --static-masks; dev accuracy on fresh masks). Writes\n"
    "DIR/model.safetensors, DIR/state.safetensors and DIR/metrics.jsonl. Options may also come from a\n"
    "JSON file (--config; keys as the option names, '-' or '_'); the command line wins. --resume\n"
    "continues the run in DIR bit-exactly, with its stored options unless given again. Ctrl-C saves\n"
    "a checkpoint and stops (exit status 130). Under mpirun -np N each rank trains on 1/N of every\n"
    "batch and rank 0 writes the files; --replicas N does the same with N threads of one process\n"
    "(docs/distributed.md).";

/* In a group every rank passes here with its own status and leaves with the group's (the first
 * failing rank's message), so no rank waits for one that has already given up. Alone: st. */
#define AGREE_OR_DONE()                  \
    do {                                 \
        st = tg_dist_agree(grp, st);     \
        if (st) goto done;               \
    } while (0)

/* tg_cli_fail that also keeps the message as this thread's error, for a rank that has to hand
 * it to the rest of its group (see `done:` in tg_cmd_train). */
static int fail(const char *cmd, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(const char *cmd, int code, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    tg_error_set(TG_ERR_INVALID, "%s", msg);
    return tg_cli_fail(cmd, code, "%s", msg);
}

static volatile sig_atomic_t stop_flag = 0;
static void on_signal(int sig) {
    (void)sig;
    stop_flag = 1;
}

typedef struct {
    /* data */
    const char *train_src, *train_tgt, *dev_src, *dev_tgt, *out, *config, *src_vocab, *tgt_vocab;
    const char *arch, *train, *dev; /* --arch lm / mlm: one text file each */
    const char *init;               /* --init M: start from M's configuration, tokenizer and weights */
    const char *spm;                /* --spm FILE: raw text cut by this sentencepiece BPE model */
    double mask_prob;               /* --arch mlm */
    const char *task;               /* --arch mlm: mlm (masked tokens) or classify (CLASS<TAB>TEXT lines) */
    int64_t classes;                /* --task classify: the classification head's classes (0: from the data) */
    bool static_masks;              /* --arch mlm: BERT's masks drawn once (default: per batch) */
    int64_t block;                  /* --arch lm: positions per block of the token stream */
    const char *documents;          /* --arch lm: file|paragraphs|lines */
    double holdout;                 /* --arch lm: share of the stream's tail held out as dev */
    bool joint, chars, resume, overwrite;
    int64_t min_count, max_vocab;
    /* model */
    int64_t d_model, heads, enc_layers, dec_layers, d_ff, head_dim, max_len, window;
    const char *attention, *norm, *pos, *activation, *norm_kind;
    bool interacting_literal, no_out_proj, interacting_sqrt_h, share_embeddings, tie_output;
    double dropout, attn_dropout, ffn_dropout, label_smoothing;
    /* training */
    const char *optimizer, *schedule, *progress, *backend;
    double beta1, beta2, eps, weight_decay, momentum, lr, factor, min_lr, clip, minutes;
    bool no_decay_vectors;
    int64_t warmup, max_tokens, accum, steps, epochs, seed, eval_interval, save_interval, log_interval, keep, threads;
    int64_t replicas;
    bool shuffle;
} train_opts;

#define MODEL_OPTION_NAMES                                                                                      \
    "arch", "d-model", "heads", "enc-layers", "dec-layers", "d-ff", "attention", "head-dim", "interacting-literal", \
        "no-out-proj", "norm", "norm-kind", "window", "pos", "share-embeddings", "tie-output", "activation",      \
        "dropout", "attn-dropout", "ffn-dropout", "label-smoothing", "max-len", "joint", "chars", "min-count",    \
        "max-vocab", "src-vocab", "tgt-vocab", "spm"

static void defaults(train_opts *o) {
    memset(o, 0, sizeof *o);
    tg_model_config m = tg_model_config_default();
    o->d_model = m.d_model;
    o->heads = m.heads;
    o->enc_layers = m.enc_layers;
    o->dec_layers = m.dec_layers;
    o->d_ff = m.d_ff;
    o->max_len = m.max_len;
    o->attention = "mha";
    o->arch = "encdec";
    o->mask_prob = 0.15;
    o->task = "mlm";
    o->documents = "file";
    o->holdout = 0.1;
    o->norm = "post";
    o->pos = "sinusoidal";
    o->activation = "relu";
    o->norm_kind = "layer";
    o->tie_output = true;
    o->dropout = m.dropout;
    o->attn_dropout = m.attn_dropout;
    o->ffn_dropout = m.ffn_dropout;
    o->label_smoothing = m.label_smoothing;
    tg_train_config t = tg_train_config_default();
    o->optimizer = "adam";
    o->beta1 = t.optim.beta1;
    o->beta2 = t.optim.beta2;
    o->eps = 1e-9; /* t.optim.eps is a float */
    o->momentum = t.optim.momentum;
    o->schedule = "noam";
    o->lr = 1e-3;
    o->factor = 1.0;
    o->warmup = 4000;
    o->max_tokens = t.max_tokens;
    o->accum = 1;
    o->seed = 1;
    o->shuffle = true;
    o->log_interval = t.log_interval;
    o->progress = "auto";
    o->backend = "cpu";
    o->min_count = 1;
    o->replicas = 1;
}

/* The option table over *o; returns the number of entries written (opts has room for 80). */
static void table(train_opts *o, tg_opt *t) {
    const double BIG = 1e15;
    tg_opt v[] = {
        {"train-src", TG_OPT_STRING, &o->train_src, 0, 0, NULL, "FILE", "training source sentences (required)", 0, 0},
        {"train-tgt", TG_OPT_STRING, &o->train_tgt, 0, 0, NULL, "FILE", "training target sentences (required)", 0, 0},
        {"dev-src", TG_OPT_STRING, &o->dev_src, 0, 0, NULL, "FILE", "dev source sentences (loss at intervals)", 0, 0},
        {"dev-tgt", TG_OPT_STRING, &o->dev_tgt, 0, 0, NULL, "FILE", "dev target sentences", 0, 0},
        {"arch", TG_OPT_CHOICE, &o->arch, 0, 0, "encdec|lm|mlm", NULL,
         "model family: encoder-decoder, language model, masked language model", 0, 0},
        {"train", TG_OPT_STRING, &o->train, 0, 0, NULL, "FILE",
         "--arch lm: training text(s), a token stream (FILE[,FILE...]); --arch mlm: one sequence per line", 0, 0},
        {"dev", TG_OPT_STRING, &o->dev, 0, 0, NULL, "FILE", "--arch lm/mlm: dev text (loss at intervals)", 0, 0},
        {"block", TG_OPT_INT, &o->block, 0, 1 << 20, NULL, "N",
         "--arch lm: positions per block of the token stream (0: --max-len)", 0, 0},
        {"documents", TG_OPT_CHOICE, &o->documents, 0, 0, "file|paragraphs|lines", NULL,
         "--arch lm: the documents joined by </s> in the stream (paragraphs: blank-line-separated)", 0, 0},
        {"holdout", TG_OPT_FLOAT, &o->holdout, 0, 0.5, NULL, "F",
         "--arch lm without --dev: the stream's last F held out as dev (0: none)", 0, 0},
        {"static-masks", TG_OPT_BOOL, &o->static_masks, 0, 0, NULL, NULL,
         "--arch mlm: mask each line once (BERT) instead of anew for every batch (RoBERTa)", 0, 0},
        {"mask-prob", TG_OPT_FLOAT, &o->mask_prob, 1e-6, 1, NULL, "P", "--arch mlm: share of tokens masked", 0, 0},
        {"task", TG_OPT_CHOICE, &o->task, 0, 0, "mlm|classify", NULL,
         "--arch mlm: masked tokens, or a classification head on the first token trained on CLASS<TAB>TEXT lines", 0, 0},
        {"classes", TG_OPT_INT, &o->classes, 0, 1 << 20, NULL, "N",
         "--task classify: classes of the head (0: the largest class of the data + 1)", 0, 0},
        {"out", TG_OPT_STRING, &o->out, 0, 0, NULL, "DIR", "output directory (required)", 0, 0},
        {"init", TG_OPT_STRING, &o->init, 0, 0, NULL, "M",
         "start from checkpoint M: its configuration, vocabulary, tokenizer and weights (an imported model too); a "
         "fresh optimizer", 0, 0},
        {"config", TG_OPT_STRING, &o->config, 0, 0, NULL, "FILE", "JSON object of options", 0, 0},
        {"resume", TG_OPT_BOOL, &o->resume, 0, 0, NULL, NULL, "continue the run saved in --out", 0, 0},
        {"overwrite", TG_OPT_BOOL, &o->overwrite, 0, 0, NULL, NULL, "start anew even if --out holds a model", 0, 0},
        {"joint", TG_OPT_BOOL, &o->joint, 0, 0, NULL, NULL, "one vocabulary for both sides", 0, 0},
        {"chars", TG_OPT_BOOL, &o->chars, 0, 0, NULL, NULL, "tokens are characters", 0, 0},
        {"spm", TG_OPT_STRING, &o->spm, 0, 0, NULL, "FILE",
         "the data are raw text, cut into pieces by this sentencepiece BPE model (spm.model of "
         "datasets/prep_bible.py), which the checkpoint stores", 0, 0},
        {"min-count", TG_OPT_INT, &o->min_count, 1, 1e9, NULL, "N", "vocabulary: tokens seen >= N times", 0, 0},
        {"max-vocab", TG_OPT_INT, &o->max_vocab, 0, 1e9, NULL, "N", "vocabulary: at most N entries (0: all)", 0, 0},
        {"src-vocab", TG_OPT_STRING, &o->src_vocab, 0, 0, NULL, "FILE", "source vocabulary from tg prep --out", 0, 0},
        {"tgt-vocab", TG_OPT_STRING, &o->tgt_vocab, 0, 0, NULL, "FILE", "target vocabulary from tg prep --out", 0, 0},
        {"d-model", TG_OPT_INT, &o->d_model, 1, 65536, NULL, "D", "model width", 0, 0},
        {"heads", TG_OPT_INT, &o->heads, 1, 1024, NULL, "H", "attention heads", 0, 0},
        {"enc-layers", TG_OPT_INT, &o->enc_layers, 0, 256, NULL, "N", "encoder layers", 0, 0},
        {"dec-layers", TG_OPT_INT, &o->dec_layers, 1, 256, NULL, "N", "decoder layers", 0, 0},
        {"d-ff", TG_OPT_INT, &o->d_ff, 1, 1 << 20, NULL, "N", "feed-forward width", 0, 0},
        {"attention", TG_OPT_CHOICE, &o->attention, 0, 0, tg_attn_kind_choices(),
         NULL, "attention variant (docs/model.md §2)", 0, 0},
        {"head-dim", TG_OPT_INT, &o->head_dim, 0, 65536, NULL, "N", "fixed_head: per-head width (0: d/h)", 0, 0},
        {"interacting-literal", TG_OPT_BOOL, &o->interacting_literal, 0, 0, NULL, NULL,
         "interacting: the paper's all-pairs form", 0, 0},
        {"no-out-proj", TG_OPT_BOOL, &o->no_out_proj, 0, 0, NULL, NULL,
         "interacting: no output projection (the authors' public code)", 0, 0},
        {"interacting-sqrt-h", TG_OPT_BOOL, &o->interacting_sqrt_h, 0, 0, NULL, NULL,
         "interacting: logits also divided by sqrt(heads) (a diagnostic, not the paper's)", 0, 0},
        {"norm", TG_OPT_CHOICE, &o->norm, 0, 0, "post|pre", NULL, "layer norm placement", 0, 0},
        {"window", TG_OPT_INT, &o->window, 0, 1 << 20, NULL, "R",
         "restricted self-attention: keys within R positions, O(R·n·d) (0: all)", 0, 0},
        {"norm-kind", TG_OPT_CHOICE, &o->norm_kind, 0, 0, "layer|rms", NULL, "LayerNorm or RMSNorm", 0, 0},
        {"pos", TG_OPT_CHOICE, &o->pos, 0, 0, "sinusoidal|learned|rope", NULL,
         "positional encoding (rope: rotary, in self-attention)", 0, 0},
        {"share-embeddings", TG_OPT_BOOL, &o->share_embeddings, 0, 0, NULL, NULL,
         "one table for source, target and output (unset: as --joint)", 0, 0},
        {"tie-output", TG_OPT_BOOL, &o->tie_output, 0, 0, NULL, NULL, "output projection = target embedding", 0, 0},
        {"activation", TG_OPT_CHOICE, &o->activation, 0, 0, "relu|gelu|swiglu", NULL,
         "feed-forward activation (swiglu: gated, a third matrix)", 0, 0},
        {"dropout", TG_OPT_FLOAT, &o->dropout, 0, 0.99, NULL, "P", "dropout", 0, 0},
        {"attn-dropout", TG_OPT_FLOAT, &o->attn_dropout, 0, 0.99, NULL, "P", "attention dropout (unset: as --dropout)", 0, 0},
        {"ffn-dropout", TG_OPT_FLOAT, &o->ffn_dropout, 0, 0.99, NULL, "P", "dropout on the FFN hidden layer", 0, 0},
        {"label-smoothing", TG_OPT_FLOAT, &o->label_smoothing, 0, 0.99, NULL, "E", "label smoothing", 0, 0},
        {"max-len", TG_OPT_INT, &o->max_len, 2, 1 << 20, NULL, "N",
         "longest sequence incl. </s>; longer training pairs are skipped", 0, 0},
        {"optimizer", TG_OPT_CHOICE, &o->optimizer, 0, 0, "adam|adamw|sgd", NULL, "optimizer", 0, 0},
        {"beta1", TG_OPT_FLOAT, &o->beta1, 0, 0.999999, NULL, "B", "Adam beta1", 0, 0},
        {"beta2", TG_OPT_FLOAT, &o->beta2, 0, 0.999999, NULL, "B",
         "Adam beta2 (encdec: 0.98, the Transformer recipe; lm, mlm: 0.999, PyTorch's)", 0, 0},
        {"eps", TG_OPT_FLOAT, &o->eps, 1e-30, 1, NULL, "E",
         "Adam epsilon (encdec: 1e-9, the recipe; lm, mlm: 1e-8, PyTorch's)", 0, 0},
        {"weight-decay", TG_OPT_FLOAT, &o->weight_decay, 0, 10, NULL, "W",
         "weight decay (AdamW: decoupled; default 0, 0.01 with adamw)", 0, 0},
        {"no-decay-vectors", TG_OPT_BOOL, &o->no_decay_vectors, 0, 0, NULL, NULL,
         "no weight decay on biases and norm parameters (as GPT-2 and BERT)", 0, 0},
        {"momentum", TG_OPT_FLOAT, &o->momentum, 0, 0.999999, NULL, "M", "SGD momentum", 0, 0},
        {"schedule", TG_OPT_CHOICE, &o->schedule, 0, 0, "noam|constant|inverse_sqrt|inverse-sqrt|cosine", NULL,
         "learning-rate schedule", 0, 0},
        {"lr", TG_OPT_FLOAT, &o->lr, 1e-12, 100, NULL, "LR", "peak learning rate (all schedules but noam)", 0, 0},
        {"factor", TG_OPT_FLOAT, &o->factor, 1e-12, 1e6, NULL, "F", "noam factor", 0, 0},
        {"warmup", TG_OPT_INT, &o->warmup, 0, BIG, NULL, "N", "warmup steps", 0, 0},
        {"min-lr", TG_OPT_FLOAT, &o->min_lr, 0, 100, NULL, "LR", "cosine: final learning rate", 0, 0},
        {"max-tokens", TG_OPT_INT, &o->max_tokens, 1, BIG, NULL, "N",
         "token budget per batch (padded source + target tokens)", 0, 0},
        {"accum", TG_OPT_INT, &o->accum, 1, 65536, NULL, "K", "batches accumulated per step", 0, 0},
        {"clip", TG_OPT_FLOAT, &o->clip, 0, 1e9, NULL, "C", "gradient-norm clipping (0: off)", 0, 0},
        {"steps", TG_OPT_INT, &o->steps, 0, BIG, NULL, "N", "stop after N optimizer steps in total", 0, 0},
        {"epochs", TG_OPT_INT, &o->epochs, 0, 1e9, NULL, "N", "stop after N epochs", 0, 0},
        {"minutes", TG_OPT_FLOAT, &o->minutes, 0, 1e9, NULL, "M", "stop after M minutes of training in total", 0, 0},
        {"seed", TG_OPT_INT, &o->seed, 0, 9007199254740992.0, NULL, "S", "initialisation, data order, dropout", 0, 0},
        {"shuffle", TG_OPT_BOOL, &o->shuffle, 0, 0, NULL, NULL, "shuffle the data every epoch", 0, 0},
        {"eval-interval", TG_OPT_INT, &o->eval_interval, 0, BIG, NULL, "N", "dev loss every N steps (0: at the end)", 0, 0},
        {"save-interval", TG_OPT_INT, &o->save_interval, 0, BIG, NULL, "N", "checkpoint every N steps (0: at the end)", 0, 0},
        {"log-interval", TG_OPT_INT, &o->log_interval, 1, BIG, NULL, "N", "metrics line every N steps", 0, 0},
        {"keep-checkpoints", TG_OPT_INT, &o->keep, 0, 1e6, NULL, "N",
         "also keep the last N checkpoints as checkpoint-STEP.safetensors (for tg average)", 0, 0},
        {"threads", TG_OPT_INT, &o->threads, 0, 4096, NULL, "N",
         "CPU threads (0: TG_NUM_THREADS or all cores; with --replicas, per replica: cores / replicas)", 0, 0},
        {"replicas", TG_OPT_INT, &o->replicas, 1, 256, NULL, "N",
         "train N copies of the model in threads of this process, each on 1/N of every batch (CPU; "
         "docs/distributed.md)", 0, 0},
        {"backend", TG_OPT_CHOICE, &o->backend, 0, 0, tg_backend_names(), NULL, "where to compute (cuda: GPU 0)", 0, 0},
        {"progress", TG_OPT_CHOICE, &o->progress, 0, 0, "auto|bar|lines|none", NULL,
         "progress display on stderr (auto: a bar on a terminal)", 0, 0},
        {0},
    };
    memcpy(t, v, sizeof v);
}

static bool file_exists(const char *dir, const char *name) {
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return access(p, F_OK) == 0;
}

/* The defaults of --arch lm / mlm (tools/train_defaults.h) for every option that neither the
 * command line, --config nor a resumed run's stored options set: a model sized to the training
 * text (tokens: -1 when unknown, as for --help), PyTorch's Adam, clipping, and a warm-up
 * proportionate to the run. Written into the options, so that a resumed run stores and
 * restores them like any other. */
static void family_defaults(train_opts *o, tg_opt *t, int64_t tokens) {
    tg_model_arch arch;
    if (tg_model_arch_parse(o->arch, &arch) != TG_OK || arch == TG_ARCH_ENCDEC) return;
    tg_family_defaults f;
    tg_family_defaults_get(arch, tokens, &f);
#define UNSET(name) (!tg_cli_find(t, name)->set)
    if (UNSET("d-model")) o->d_model = f.d_model;
    if (UNSET("heads")) o->heads = f.heads;
    if (arch == TG_ARCH_LM && UNSET("dec-layers")) o->dec_layers = f.layers;
    if (arch == TG_ARCH_MLM && UNSET("enc-layers")) o->enc_layers = f.layers;
    if (UNSET("d-ff")) o->d_ff = f.d_ff;
    if (UNSET("max-len") && UNSET("block")) o->max_len = f.max_len;
    if (UNSET("max-tokens")) o->max_tokens = f.max_tokens;
    if (UNSET("lr")) o->lr = f.lr;
    if (UNSET("beta2")) o->beta2 = f.beta2;
    if (UNSET("eps")) o->eps = f.eps;
    if (UNSET("clip")) o->clip = f.clip;
    if (UNSET("schedule")) o->schedule = o->steps > 0 ? "cosine" : "constant";
    if (UNSET("min-lr")) o->min_lr = o->lr / 10;
    if (UNSET("warmup")) o->warmup = tg_family_warmup(o->steps, o->epochs, tokens, o->max_tokens);
#undef UNSET
}

/* Model configuration from the options; vocab sizes filled later. */
static int model_config(const char *cmd, const train_opts *o, tg_opt *t, tg_model_config *c) {
    *c = tg_model_config_default();
    c->d_model = o->d_model;
    c->heads = o->heads;
    c->enc_layers = o->enc_layers;
    c->dec_layers = o->dec_layers;
    c->d_ff = o->d_ff;
    c->head_dim = o->head_dim;
    c->max_len = o->max_len;
    if (tg_attn_kind_parse(o->attention, &c->attention) != TG_OK)
        return fail(cmd, TG_EXIT_USAGE, "%s", tg_error_message());
    c->interacting_literal = o->interacting_literal;
    c->no_out_proj = o->no_out_proj;
    c->interacting_sqrt_h = o->interacting_sqrt_h;
    c->pre_norm = !strcmp(o->norm, "pre");
    c->learned_pos = !strcmp(o->pos, "learned");
    c->gelu = !strcmp(o->activation, "gelu");
    c->swiglu = !strcmp(o->activation, "swiglu");
    c->rope = !strcmp(o->pos, "rope");
    c->rms_norm = !strcmp(o->norm_kind, "rms");
    c->window = o->window;
    c->share_embeddings = tg_cli_find(t, "share-embeddings")->set ? o->share_embeddings : o->joint;
    c->tie_output = o->tie_output;
    c->dropout = (float)o->dropout;
    c->attn_dropout = (float)(tg_cli_find(t, "attn-dropout")->set ? o->attn_dropout : o->dropout);
    c->ffn_dropout = (float)o->ffn_dropout;
    c->label_smoothing = (float)o->label_smoothing;
    if (tg_model_arch_parse(o->arch, &c->arch) != TG_OK) return fail(cmd, TG_EXIT_USAGE, "%s", tg_error_message());
    if (c->arch != TG_ARCH_ENCDEC) { /* one stack, one tied table; GPT-2 / BERT defaults where unset */
        bool lm = c->arch == TG_ARCH_LM;
        if (tg_cli_find(t, lm ? "enc-layers" : "dec-layers")->on_cli && (lm ? o->enc_layers : o->dec_layers) != 0)
            return fail(cmd, TG_EXIT_USAGE, "--arch %s has no %s: --%s must be 0", o->arch, lm ? "encoder" : "decoder",
                        lm ? "enc-layers" : "dec-layers");
        if (lm) c->enc_layers = 0;
        else c->dec_layers = 0;
        c->share_embeddings = true;
        if (lm && !tg_cli_find(t, "norm")->set) c->pre_norm = true; /* BERT is post-LN */
        if (!tg_cli_find(t, "pos")->set) c->learned_pos = true;
        if (!tg_cli_find(t, "activation")->set) c->gelu = true;
        if (!tg_cli_find(t, "label-smoothing")->set) c->label_smoothing = 0.0f;
        /* a language model's positions are its blocks unless --max-len says otherwise */
        if (lm && o->block && !tg_cli_find(t, "max-len")->set) c->max_len = o->block;
        if (lm && o->dev && tg_cli_find(t, "holdout")->on_cli)
            return fail(cmd, TG_EXIT_USAGE, "--holdout and --dev exclude each other (the dev data is one or the other)");
        if (lm && o->block > c->max_len)
            return fail(cmd, TG_EXIT_USAGE, "--block %lld is past the model's %lld positions (--max-len)",
                        (long long)o->block, (long long)c->max_len);
    }
    static const char *lm_only[] = {"block", "documents", "holdout"};
    for (size_t i = 0; i < sizeof lm_only / sizeof *lm_only; i++)
        if (c->arch != TG_ARCH_LM && tg_cli_find(t, lm_only[i])->on_cli)
            return fail(cmd, TG_EXIT_USAGE, "--%s applies to --arch lm (a token stream) only", lm_only[i]);
    if (c->arch != TG_ARCH_MLM && tg_cli_find(t, "static-masks")->on_cli)
        return fail(cmd, TG_EXIT_USAGE, "--static-masks applies to --arch mlm only");
    if (c->arch != TG_ARCH_MLM && (tg_cli_find(t, "task")->on_cli || tg_cli_find(t, "classes")->on_cli))
        return fail(cmd, TG_EXIT_USAGE, "--task and --classes apply to --arch mlm (an encoder) only");
    if (c->share_embeddings && !o->joint)
        return fail(cmd, TG_EXIT_USAGE, "--share-embeddings needs --joint (one vocabulary)");
    if (c->head_dim != 0 && c->attention != TG_ATTN_FIXED_HEAD)
        return fail(cmd, TG_EXIT_USAGE, "--head-dim applies to --attention fixed_head only");
    tg_model_config chk = *c;
    chk.src_vocab = chk.tgt_vocab = 5; /* the sizes are checked once the vocabularies exist */
    if (tg_model_config_check(&chk) != TG_OK) return fail(cmd, TG_EXIT_USAGE, "%s", tg_error_message());
    return 0;
}

static int train_config(const char *cmd, const train_opts *o, tg_opt *t, tg_train_config *c) {
    *c = tg_train_config_default();
    c->optim = tg_optim_defaults(!strcmp(o->optimizer, "adamw") ? TG_OPTIM_ADAMW
                                 : !strcmp(o->optimizer, "sgd") ? TG_OPTIM_SGD
                                                                : TG_OPTIM_ADAM);
    c->optim.beta1 = (float)o->beta1;
    c->optim.beta2 = (float)o->beta2;
    c->optim.eps = (float)o->eps;
    c->optim.momentum = (float)o->momentum;
    if (tg_cli_find(t, "weight-decay")->set) c->optim.weight_decay = (float)o->weight_decay;
    c->no_decay_vectors = o->no_decay_vectors;
    if (tg_lr_kind_parse(o->schedule, &c->lr.kind) != TG_OK)
        return fail(cmd, TG_EXIT_USAGE, "%s", tg_error_message());
    c->lr.lr = o->lr;
    c->lr.factor = o->factor;
    c->lr.warmup = o->warmup;
    c->lr.min_lr = o->min_lr;
    c->lr.d_model = o->d_model;
    c->lr.total_steps = o->steps;
    c->max_tokens = o->max_tokens;
    c->accum = o->accum;
    c->clip = o->clip;
    c->max_steps = o->steps;
    c->max_epochs = o->epochs;
    c->max_minutes = o->minutes;
    c->seed = (uint64_t)o->seed;
    c->shuffle = o->shuffle;
    c->eval_interval = o->eval_interval;
    c->save_interval = o->save_interval;
    c->log_interval = o->log_interval;
    c->keep_checkpoints = o->keep;
    c->out_dir = o->out;
    c->progress = !strcmp(o->progress, "bar")     ? TG_PROGRESS_BAR
                  : !strcmp(o->progress, "lines") ? TG_PROGRESS_LINES
                  : !strcmp(o->progress, "none")  ? TG_PROGRESS_NONE
                                                  : TG_PROGRESS_AUTO;
    if (c->max_steps == 0 && c->max_epochs == 0 && c->max_minutes == 0.0)
        return fail(cmd, TG_EXIT_USAGE, "no stop condition: give --steps, --epochs or --minutes");
    if (c->lr.kind == TG_LR_COSINE && c->max_steps == 0)
        return fail(cmd, TG_EXIT_USAGE, "--schedule cosine needs --steps (its length)");
    if (c->lr.kind == TG_LR_NOAM && c->lr.warmup < 1)
        return fail(cmd, TG_EXIT_USAGE, "--schedule noam needs --warmup >= 1");
    if (c->lr.kind == TG_LR_COSINE && c->lr.min_lr > c->lr.lr)
        return fail(cmd, TG_EXIT_USAGE, "--min-lr %g exceeds --lr %g", c->lr.min_lr, c->lr.lr);
    if (tg_train_config_check(c) != TG_OK) return fail(cmd, TG_EXIT_USAGE, "%s", tg_error_message());
    return 0;
}

/* Vocabularies for a new run: from files, or built from the training data. */
/* A vocabulary built with --min-count N that holds no token but the four specials: every token
 * of the data would be <unk>, and a masked language model would find nothing to predict. */
static tg_status check_min_count(const train_opts *o, const tg_vocab *v, const char *which) {
    if (o->min_count > 1 && tg_vocab_size(v) <= 4)
        return tg_error_set(TG_ERR_INVALID, "--min-count %lld leaves no token in the %svocabulary (every token of the "
                            "training data occurs fewer times)", (long long)o->min_count, which);
    return TG_OK;
}

static tg_status make_vocabs(const train_opts *o, const tg_text_options *text, const tg_lines *ls, const tg_lines *lt,
                             tg_vocab **sv, tg_vocab **tv) {
    tg_text_options to = *text;
    const tg_lines *both[2] = {ls, lt}, *tl[1] = {lt};
    tg_status st = TG_OK;
    *sv = *tv = NULL;
    if (o->src_vocab) st = tg_vocab_read(o->src_vocab, sv);
    else if ((st = tg_vocab_build(both, o->joint && !strcmp(o->arch, "encdec") ? 2 : 1, &to, o->min_count,
                                  o->max_vocab, sv)) == TG_OK)
        st = check_min_count(o, *sv, o->joint ? "" : "source ");
    if (st == TG_OK && !strcmp(o->arch, "mlm")) st = tg_vocab_add(*sv, "<mask>", NULL); /* the mask token */
    if (st) return st;
    if (o->joint) {
        *tv = *sv;
        return TG_OK;
    }
    if (o->tgt_vocab) st = tg_vocab_read(o->tgt_vocab, tv);
    else if ((st = tg_vocab_build(tl, 1, &to, o->min_count, o->max_vocab, tv)) == TG_OK)
        st = check_min_count(o, *tv, "target ");
    return st;
}

/* A model that cannot fit is refused before its memory is asked for (a typo in --d-model or
 * the layer counts would otherwise spend minutes allocating and initialising, or swap): on the
 * CPU weights, gradients and Adam's two moments take 16 bytes per parameter of the machine's
 * memory; with CUDA the host holds one copy at a time (4 bytes). */
static tg_status check_size(const tg_model_config *c, bool cuda) {
    double n;
    tg_status st = tg_model_param_count(c, &n);
    if (st) return st;
    double need = (cuda ? 4.0 : 16.0) * n, have = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGE_SIZE);
    if (have > 0.0 && need > have)
        return tg_error_set(TG_ERR_NOMEM, "the model has %.4g parameters and needs %.3g GB of memory%s, more than this "
                            "machine's %.3g GB: check --d-model, --d-ff, the layer counts and the vocabulary", n,
                            need / 1e9, cuda ? "" : " (weights, gradients and Adam's moments)", have / 1e9);
    return TG_OK;
}

/* Options the resumed run stored in its state file, applied where the command line is silent. */
static int restore_options(const char *cmd, tg_opt *t, const char *state_path, tg_json **keep) {
    tg_st_file *f;
    if (tg_st_open(state_path, &f) != TG_OK)
        return fail(cmd, TG_EXIT_RUNTIME, "cannot resume: %s", tg_error_message());
    const char *js = tg_st_metadata(f, "tool_options");
    int rc = 0;
    if (!js) rc = fail(cmd, TG_EXIT_RUNTIME, "cannot resume: '%s' has no stored tg options", state_path);
    else if (tg_cli_apply_json(cmd, t, js, strlen(js), state_path, false, keep)) {
        tg_error_set(TG_ERR_INVALID, "cannot resume: bad options stored in '%s'", state_path);
        rc = TG_EXIT_RUNTIME;
    }
    tg_st_close(f);
    return rc;
}

/* The family of checkpoint path (its config's "arch"; absent: encdec) as its static name. */
static tg_status checkpoint_arch(const char *path, const char **arch) {
    tg_st_file *f;
    tg_status st = tg_st_open(path, &f);
    if (st) return st;
    const char *cfg = tg_st_metadata(f, "config");
    tg_json *j = NULL;
    tg_model_arch a = TG_ARCH_ENCDEC;
    if (!cfg) st = tg_error_set(TG_ERR_FORMAT, "'%s' is not a tgraph checkpoint (no config): import it first (tg import)", path);
    else if ((st = tg_json_parse(cfg, strlen(cfg), &j)) == TG_OK) {
        const tg_json *x = tg_json_get(j, "arch");
        if (x && tg_json_kind(x) == TG_JSON_STRING && tg_model_arch_parse(tg_json_string(x), &a) != TG_OK)
            st = tg_error_prefix(TG_ERR_FORMAT, "'%s'", path);
    }
    tg_json_free(j);
    tg_st_close(f);
    if (st == TG_OK) *arch = tg_model_arch_name(a);
    return st;
}

/* A masked language model's corpus in the vocabulary layout of the model's own tokenizer (an
 * imported BERT): every line encoded as [CLS] ... [SEP] (truncated to the tokenizer's maximum),
 * the final [SEP] left to the batches; lines longer than max_len are skipped and counted. */
static tg_status tokenizer_mlm_corpus(const tg_lines *l, const tg_tokenizer *tok, int64_t max_len, double p, uint64_t seed,
                                      tg_corpus **out, int64_t *skipped) {
    int32_t *special = NULL, **ids = calloc((size_t)(l->n ? l->n : 1), sizeof *ids);
    int64_t nspecial = 0, *len = calloc((size_t)(l->n ? l->n : 1), sizeof *len), k = 0;
    tg_mlm_layout lay = {.vocab_size = (int32_t)tg_vocab_size(tg_tokenizer_vocab(tok)),
                         .mask = tg_tokenizer_special(tok, "mask"), .eos = tg_tokenizer_special(tok, "eos")};
    tg_status st = ids && len ? tg_tokenizer_special_ids(tok, &special, &nspecial) : tg_error_set(TG_ERR_NOMEM, "out of memory");
    if (st == TG_OK && (lay.mask < 0 || lay.eos < 0))
        st = tg_error_set(TG_ERR_INVALID, "the model's %s tokenizer has no %s token: it cannot train as a masked language "
                          "model", tg_tokenizer_kind_name(tg_tokenizer_kind(tok)), lay.mask < 0 ? "mask" : "end ([SEP])");
    *skipped = 0;
    for (int64_t i = 0; st == TG_OK && i < l->n; i++) {
        st = tg_tokenizer_encode(tok, l->line[i], strlen(l->line[i]), &ids[k], &len[k], NULL);
        if (st) {
            st = tg_error_prefix(st, "'%s' line %lld", l->path, (long long)i + 1);
            break;
        }
        if (len[k] > 0 && ids[k][len[k] - 1] == lay.eos) len[k]--; /* the batches append it */
        if (len[k] + 1 > max_len) {
            free(ids[k]);
            ++*skipped;
        } else k++;
    }
    lay.special = special;
    lay.nspecial = nspecial;
    if (st == TG_OK) st = tg_corpus_new_mlm_ids(k, (const int32_t *const *)ids, len, &lay, p, seed, out);
    for (int64_t i = 0; ids && i < k; i++) free(ids[i]);
    free(ids);
    free(len);
    free(special);
    return st;
}

/* --task classify: every line CLASS<TAB>TEXT; the lines become their texts, the classes go to
 * *cls (malloc'ed), the largest to *top */
static tg_status split_classes(tg_lines *l, int32_t **cls, int64_t *top) {
    *cls = malloc((size_t)(l->n ? l->n : 1) * sizeof **cls);
    if (!*cls) return tg_error_set(TG_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < l->n; i++) {
        char *tab = strchr(l->line[i], '\t'), *end = NULL;
        long v = tab ? strtol(l->line[i], &end, 10) : -1;
        if (!tab || end != tab || v < 0 || v >= 1 << 20 || end == l->line[i])
            return tg_error_set(TG_ERR_FORMAT, "'%s' line %lld: not CLASS<TAB>TEXT with a class in [0, 1048576) (--task "
                                "classify)", l->path, (long long)i + 1);
        if (!tab[1 + strspn(tab + 1, " \t")])
            return tg_error_set(TG_ERR_FORMAT, "'%s' line %lld: no text after the class", l->path, (long long)i + 1);
        (*cls)[i] = (int32_t)v;
        if (v > *top) *top = v;
        l->line[i] = tab + 1;
    }
    return TG_OK;
}

/* A classification corpus of the texts of l (classes cls) read as the model reads text: its own
 * tokenizer's [CLS] ... (foreign; the final [SEP] left to the batches) or the words / characters
 * of to; lines longer than max_len are skipped and counted. */
static tg_status classify_corpus(const tg_lines *l, const int32_t *cls, const tg_text_options *to, const tg_tokenizer *foreign,
                                 const tg_vocab *v, int64_t max_len, tg_corpus **out, int64_t *skipped) {
    int32_t eos = foreign ? tg_tokenizer_special(foreign, "eos") : TG_EOS, **ids = calloc((size_t)(l->n ? l->n : 1), sizeof *ids);
    int32_t *kc = malloc((size_t)(l->n ? l->n : 1) * sizeof *kc);
    int64_t *len = calloc((size_t)(l->n ? l->n : 1), sizeof *len), k = 0;
    tg_status st = ids && kc && len ? TG_OK : tg_error_set(TG_ERR_NOMEM, "out of memory");
    if (st == TG_OK && eos < 0) st = tg_error_set(TG_ERR_INVALID, "the model's tokenizer has no end token ([SEP])");
    *skipped = 0;
    for (int64_t i = 0; st == TG_OK && i < l->n; i++) {
        if (foreign) {
            st = tg_tokenizer_encode(foreign, l->line[i], strlen(l->line[i]), &ids[k], &len[k], NULL);
            if (st == TG_OK && len[k] > 0 && ids[k][len[k] - 1] == eos) len[k]--; /* the batches append it */
        } else {
            char **toks;
            st = tg_tokenize(l->line[i], to, &toks, &len[k]);
            if (st == TG_OK && !(ids[k] = malloc((size_t)(len[k] ? len[k] : 1) * sizeof **ids)))
                st = tg_error_set(TG_ERR_NOMEM, "out of memory");
            for (int64_t j = 0; st == TG_OK && j < len[k]; j++) ids[k][j] = tg_vocab_id(v, toks[j]);
            if (st == TG_OK) tg_tokens_free(toks, len[k]);
        }
        if (st) {
            st = tg_error_prefix(st, "'%s' line %lld", l->path, (long long)i + 1);
            break;
        }
        if (len[k] + 1 > max_len) {
            free(ids[k]);
            ++*skipped;
        } else kc[k++] = cls[i];
    }
    if (st == TG_OK) st = tg_corpus_new_classify(k, (const int32_t *const *)ids, len, kc, eos, out);
    for (int64_t i = 0; ids && i < k; i++) free(ids[i]);
    free(ids), free(len), free(kc);
    return st;
}

/* The whole command on one rank: `given`, a replica's thread group (tg_cmd_train), or NULL (the
 * MPI group under mpirun, else none). */
static int train_rank(int argc, char **argv, tg_dist *given) {
    const char *cmd = "train";
    train_opts o;
    defaults(&o);
    tg_opt t[80];
    table(&o, t);
    tg_cli_quiet = given && tg_dist_rank(given) != 0; /* replica 0 reports: tg_cmd_train parsed */
    int rc = tg_cli_parse(cmd, t, argc, argv, NULL, 0, NULL);
    if (rc == TG_CLI_HELP) return TG_EXIT_OK;
    if (rc) return TG_EXIT_USAGE;
    tg_dist *grp = given; /* the replicas' or the MPI group, else NULL */
    if (!grp && (rc = tg_train_group_join(cmd, &grp))) return rc;
    bool leader = tg_dist_rank(grp) == 0;
    tg_cli_quiet = !leader; /* rank 0 reports for the group */
    char tmpdir[4096] = "";

    tg_json *cfg_json = NULL, *state_json = NULL;
    char *cfg_text = NULL, state_path[4096] = "", model_path[4096] = "";
    tg_lines ls = {0}, lt = {0}, ds = {0}, dt = {0};
    tg_lm_texts lm_train = {0}, lm_dev = {0};
    tg_vocab *sv = NULL, *tv = NULL;
    tg_model *m = NULL;
    tg_tokenizer *spm_tok = NULL; /* --spm's, until the model takes it */
    int32_t *cls_train = NULL, *cls_dev = NULL; /* --task classify: the classes of the lines */
    tg_backend *be = NULL;
    tg_corpus *train = NULL, *dev = NULL;
    tg_trainer *tr = NULL;
    char *opts_json = NULL;
    tg_train_lock *lock = NULL; /* rank 0 holds --out's lock from its first look into it */
    bool created_dir = false;
    tg_status st = TG_OK;
    rc = TG_EXIT_OK;

    if (o.config) {
        size_t len;
        if (!(cfg_text = tg_cli_read_file(o.config, &len))) {
            rc = fail(cmd, TG_EXIT_USAGE, "cannot read config '%s': %s", o.config, strerror(errno));
            goto done;
        }
        if (tg_cli_apply_json(cmd, t, cfg_text, len, o.config, true, &cfg_json)) {
            tg_error_set(TG_ERR_INVALID, "bad options in --config '%s'", o.config);
            rc = TG_EXIT_USAGE;
            goto done;
        }
    }
    if (!o.out) {
        rc = fail(cmd, TG_EXIT_USAGE, "--out DIR is required (see tg train --help)");
        goto done;
    }
    snprintf(state_path, sizeof state_path, "%s/state.safetensors", o.out);
    snprintf(model_path, sizeof model_path, "%s/model.safetensors", o.out);
    if (grp) {
        /* every rank has its options (a rank that failed above meets this agreement from done:);
         * --resume is not among the options compared further down, and only the ranks that
         * resume take part in tg_train_group_share_files: agree on it first */
        st = tg_dist_agree(grp, TG_OK);
        if (st == TG_OK) st = tg_train_group_same(grp, o.resume, "options (--resume)");
        if (st) goto done;
    }
    struct stat sb;
    if (leader && stat(o.out, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        st = tg_train_dir_lock(o.out, &lock);
        if (st == TG_OK && o.resume && !file_exists(o.out, "state.safetensors"))
            st = tg_error_set(TG_ERR_IO, "cannot resume: '%s' holds no complete checkpoint (the run stopped before its "
                              "first save): start it again without --resume", o.out);
        /* the model of the last complete save (train/rundir.c) */
        if (st == TG_OK && o.resume) st = tg_train_dir_model_path(o.out, model_path, sizeof model_path);
    }
    AGREE_OR_DONE();
    if (o.resume && grp &&
        (st = tg_train_group_share_files(grp, model_path, state_path, sizeof model_path, tmpdir, sizeof tmpdir))) {
        st = tg_error_prefix(st, "cannot resume");
        goto done;
    }
    if (o.resume) {
        if ((rc = restore_options(cmd, t, state_path, &state_json))) goto done;
        /* a run stored before dynamic masking existed masked its lines once: resume it so */
        if (!tg_cli_find(t, "static-masks")->set && !strcmp(o.arch, "mlm")) o.static_masks = true;
        static const char *model_opts[] = {MODEL_OPTION_NAMES};
        for (size_t i = 0; i < sizeof model_opts / sizeof *model_opts; i++)
            if (tg_cli_find(t, model_opts[i])->on_cli && leader)
                fprintf(stderr, "tg train: warning: --%s is ignored with --resume (the model and its vocabularies "
                                "come from the checkpoint)\n", model_opts[i]);
    }
    if (o.resume && tg_cli_find(t, "init")->on_cli) {
        rc = fail(cmd, TG_EXIT_USAGE, "--init and --resume exclude each other");
        goto done;
    }
    if (o.resume) o.init = NULL; /* a resumed run continues its own checkpoint (--init stored) */
    if (o.init) { /* the family, the model and its vocabulary are M's */
        const char *arch = NULL;
        if ((st = checkpoint_arch(o.init, &arch))) {
            st = tg_error_prefix(st, "--init");
            goto done;
        }
        if (tg_cli_find(t, "arch")->set && strcmp(o.arch, arch)) {
            rc = fail(cmd, TG_EXIT_USAGE, "--init '%s' is a model of arch %s: --arch %s contradicts it", o.init, arch, o.arch);
            goto done;
        }
        o.arch = arch;
        static const char *model_opts[] = {MODEL_OPTION_NAMES};
        for (size_t i = 0; i < sizeof model_opts / sizeof *model_opts; i++)
            if (tg_cli_find(t, model_opts[i])->on_cli && strcmp(model_opts[i], "arch") && strcmp(model_opts[i], "chars") &&
                leader)
                fprintf(stderr, "tg train: warning: --%s is ignored with --init (the model and its vocabulary come from "
                                "'%s')\n", model_opts[i], o.init);
    }
    bool lm = strcmp(o.arch, "encdec") != 0; /* lm or mlm: one text */
    /* (a resumed lm run stored --train as --train-src and --train-tgt too: those agree) */
#define SAME_OR_UNSET(a, b) (!(a) || ((b) && !strcmp((a), (b))))
    const bool pair_on_cli = tg_cli_find(t, "train-src")->on_cli || tg_cli_find(t, "train-tgt")->on_cli ||
                             tg_cli_find(t, "dev-src")->on_cli || tg_cli_find(t, "dev-tgt")->on_cli;
    if (lm && (pair_on_cli || !(SAME_OR_UNSET(o.train_src, o.train) && SAME_OR_UNSET(o.train_tgt, o.train) &&
                                SAME_OR_UNSET(o.dev_src, o.dev) && SAME_OR_UNSET(o.dev_tgt, o.dev)))) {
        rc = fail(cmd, TG_EXIT_USAGE, "--arch %s trains on one text: give --train FILE [--dev FILE], not --train-src/--train-tgt",
                  o.arch);
        goto done;
    }
    if (!lm && (o.train || o.dev)) {
        rc = fail(cmd, TG_EXIT_USAGE, "--train and --dev are the texts of --arch lm or mlm; an encoder-decoder takes --train-src and --train-tgt");
        goto done;
    }
    if (lm) { /* the text is read as the target side; one vocabulary */
        o.train_src = o.train_tgt = o.train;
        o.dev_src = o.dev_tgt = o.dev;
        o.joint = true;
        if (!o.train) {
            rc = fail(cmd, TG_EXIT_USAGE, "--arch %s needs --train FILE (see tg train --help)", o.arch);
            goto done;
        }
    }
    if (lm) family_defaults(&o, t, tg_family_tokens_estimate(o.train, o.chars));
    if (!o.train_src || !o.train_tgt) {
        rc = fail(cmd, TG_EXIT_USAGE, "--train-src and --train-tgt are required (see tg train --help)");
        goto done;
    }
    if (!o.dev_src != !o.dev_tgt) {
        rc = fail(cmd, TG_EXIT_USAGE, "--dev-src and --dev-tgt go together");
        goto done;
    }
    if (o.spm && o.chars) {
        rc = fail(cmd, TG_EXIT_USAGE, "--spm and --chars exclude each other (the sentencepiece model cuts the text)");
        goto done;
    }
    if (o.resume && o.overwrite) {
        rc = fail(cmd, TG_EXIT_USAGE, "--resume and --overwrite exclude each other");
        goto done;
    }
    if (o.joint && o.tgt_vocab) {
        rc = fail(cmd, TG_EXIT_USAGE, "--joint takes one vocabulary: give --src-vocab only");
        goto done;
    }
    tg_model_config mc;
    tg_train_config tc;
    if ((rc = model_config(cmd, &o, t, &mc)) || (rc = train_config(cmd, &o, t, &tc))) goto done;
    if (leader && !o.resume && !o.overwrite &&
        (file_exists(o.out, "model.safetensors") || file_exists(o.out, "state.safetensors")))
        st = tg_error_set(TG_ERR_IO, "'%s' already holds a model: continue it with --resume or start anew with --overwrite",
                          o.out);
    AGREE_OR_DONE();

    /* data: read and check everything before writing anything */
    bool stream = !strcmp(o.arch, "lm"); /* a token stream of documents cut into blocks */
    if (stream) {
        st = tg_lm_texts_read(o.train, &lm_train);
        if (st == TG_OK && o.dev) st = tg_lm_texts_read(o.dev, &lm_dev);
    } else {
        st = tg_lines_read(o.train_src, false, &ls);
        if (st == TG_OK) st = tg_lines_read(o.train_tgt, false, &lt);
        if (st == TG_OK) st = tg_lines_check_parallel(&ls, &lt);
        if (st == TG_OK && o.dev_src) st = tg_lines_read(o.dev_src, false, &ds);
        if (st == TG_OK && o.dev_src) st = tg_lines_read(o.dev_tgt, false, &dt);
        if (st == TG_OK && o.dev_src) st = tg_lines_check_parallel(&ds, &dt);
        if (st == TG_OK && ls.n == 0) st = tg_error_set(TG_ERR_FORMAT, "'%s' is empty", o.train_src);
    }
    /* --task classify: CLASS<TAB>TEXT lines (the texts read as the target side, as for mlm) */
    bool classify = !strcmp(o.arch, "mlm") && !strcmp(o.task, "classify");
    int64_t top_class = -1;
    if (st == TG_OK && classify) {
        st = split_classes(&lt, &cls_train, &top_class);
        if (st == TG_OK && o.dev) st = split_classes(&dt, &cls_dev, &top_class);
        if (st == TG_OK && o.classes && top_class >= o.classes)
            st = tg_error_set(TG_ERR_INVALID, "the data hold class %lld, --classes is %lld", (long long)top_class,
                              (long long)o.classes);
        if (!o.classes) o.classes = top_class + 1;
        mc.classes = o.classes;
    }
    AGREE_OR_DONE();
    int threads = grp && o.threads == 0 ? tg_train_group_threads(grp) : (int)o.threads;
    /* one GPU per rank of a host */
    st = tg_backend_new(o.backend, &(tg_backend_options){.threads = threads, .device = tg_dist_local_rank(grp)}, &be);
    AGREE_OR_DONE();
    /* TG_DIST_NCCL=0: sum GPU gradients through host memory and MPI (e.g. ranks sharing a GPU) */
    const char *nccl_env = getenv("TG_DIST_NCCL");
    if (grp && tg_dist_can_use_nccl(be) && !(nccl_env && !strcmp(nccl_env, "0"))) {
        st = tg_dist_use_nccl(grp, be);
        AGREE_OR_DONE();
    }
    /* --spm: the sentencepiece model that cuts the raw text (a new run; a model that stores one
     * brings its own) */
    if (o.spm && !o.resume && !o.init) {
        size_t len;
        char *bytes = tg_cli_read_file(o.spm, &len);
        st = bytes ? tg_tokenizer_from_spm(bytes, len, o.spm, &spm_tok)
                   : tg_error_set(TG_ERR_IO, "cannot read --spm '%s': %s", o.spm, strerror(errno));
        free(bytes);
        AGREE_OR_DONE();
    }
    tg_text_options text = {.chars = o.chars, .tokenizer = spm_tok};
    if (o.resume || o.init) {
        st = tg_model_load(o.resume ? model_path : o.init, be, &m);
        if (st) st = o.resume ? tg_error_prefix(st, "cannot resume") : tg_error_prefix(st, "--init");
        AGREE_OR_DONE();
        if (classify && tg_model_cfg(m)->classes != o.classes) { /* a classification head on the loaded model */
            tg_model *with = NULL;
            st = tg_model_with_classes(m, o.classes, (uint64_t)o.seed, &with);
            tg_model_free(m);
            m = with;
            if (st) st = tg_error_prefix(st, "--task classify");
            AGREE_OR_DONE();
        }
        mc = *tg_model_cfg(m);
    } else {
        if (stream) {
            st = tg_lm_vocab(&lm_train, &text, o.src_vocab, o.min_count, o.max_vocab, &sv);
            tv = sv;
        } else {
            st = make_vocabs(&o, &text, &ls, &lt, &sv, &tv);
        }
        AGREE_OR_DONE();
        mc.src_vocab = tg_vocab_size(sv);
        mc.tgt_vocab = tg_vocab_size(tv);
        if (tg_model_config_check(&mc) != TG_OK) {
            st = tg_error_prefix(TG_ERR_INVALID, "vocabulary");
            goto done;
        }
    }
    /* the data are read with the model's stored tokenizer: words, characters, or (an imported
     * model's) its own in its own vocabulary layout (foreign) */
    const tg_tokenizer *foreign = NULL;
    if (m && (o.init || tg_model_tokenizer(m)) && (rc = tg_tool_model_text(cmd, o.resume ? model_path : o.init ? o.init : model_path, m,
                                      o.resume ? NULL : tg_cli_find(t, "chars"), &text, &foreign))) {
        tg_error_set(TG_ERR_INVALID, "the model's tokenizer");
        goto done;
    }
    if (m && tg_model_tokenizer(m) && !foreign) o.chars = text.chars;
    const tg_vocab *vs = m ? tg_model_src_vocab(m) : sv, *vt = m ? tg_model_tgt_vocab(m) : tv;
    tg_corpus_options co = {.text = text, .max_len = mc.max_len, .skip_long = true};
    bool mlm = !strcmp(o.arch, "mlm"); /* masks drawn once from the seed (dev: seed + 1) */
    int64_t block = o.block ? o.block : mc.max_len;
    tg_lm_data lmd = {0};
    int64_t tok_skipped[2] = {0, 0}; /* lines past max_len of a foreign tokenizer's corpus */
    if (classify) {
        st = classify_corpus(&lt, cls_train, &text, foreign, vt, mc.max_len, &train, &tok_skipped[0]);
        if (st == TG_OK && o.dev_src) st = classify_corpus(&dt, cls_dev, &text, foreign, vt, mc.max_len, &dev, &tok_skipped[1]);
    } else if (foreign && !stream && (!mlm || o.static_masks)) {
        st = tg_error_set(TG_ERR_UNSUPPORTED, "the model reads text with a %s tokenizer in its own vocabulary layout (an "
                          "imported model): tg train continues such a model as a language model (arch lm) or as a masked "
                          "language model with dynamic masks", tg_tokenizer_kind_name(tg_tokenizer_kind(foreign)));
    } else if (foreign && !stream) {
        st = tokenizer_mlm_corpus(&lt, foreign, mc.max_len, o.mask_prob, (uint64_t)o.seed, &train, &tok_skipped[0]);
        if (st == TG_OK && o.dev_src)
            st = tokenizer_mlm_corpus(&dt, foreign, mc.max_len, o.mask_prob, (uint64_t)o.seed + 1, &dev, &tok_skipped[1]);
    } else if (stream && block > mc.max_len) { /* a resumed model's positions (model_config checked the options) */
        st = tg_error_set(TG_ERR_INVALID, "--block %lld is past the model's %lld positions (max_len of '%s')",
                          (long long)block, (long long)mc.max_len, model_path);
    } else if (stream) {
        if (foreign) text.tokenizer = foreign; /* an imported GPT-2: its byte-level BPE, its end-of-text token */
        tg_stream_options so = {.text = text,
                                .docs = !strcmp(o.documents, "paragraphs") ? TG_DOCS_PARAGRAPHS
                                        : !strcmp(o.documents, "lines")    ? TG_DOCS_LINES
                                                                           : TG_DOCS_FILE};
        st = tg_lm_corpora(&lm_train, o.dev ? &lm_dev : NULL, vt, &so, block, o.holdout, &train, &dev, &lmd);
        if (st == TG_OK) tg_corpus_set_target_pad(train, mc.pad_id); /* GPT-2: -1, its id 0 a token */
        if (st == TG_OK && dev) tg_corpus_set_target_pad(dev, mc.pad_id);
    } else {
        /* masks from the seed, the dev text's from seed + 1: drawn anew for every batch (dynamic;
         * dev's the same at every evaluation, the batches being those of epoch 0), or once */
        tg_status (*masked)(const tg_lines *, const tg_vocab *, const tg_corpus_options *, double, uint64_t,
                            tg_corpus **) = o.static_masks ? tg_corpus_new_mlm : tg_corpus_new_mlm_dynamic;
        st = mlm ? masked(&lt, vt, &co, o.mask_prob, (uint64_t)o.seed, &train)
                 : tg_corpus_new(&ls, &lt, vs, vt, &co, &train);
        if (st == TG_OK && o.dev_src)
            st = mlm ? masked(&dt, vt, &co, o.mask_prob, (uint64_t)o.seed + 1, &dev)
                     : tg_corpus_new(&ds, &dt, vs, vt, &co, &dev);
    }
    AGREE_OR_DONE();
    if (grp) {
        st = tg_train_group_same(grp, tg_corpus_hash(train), "training data");
        if (st == TG_OK) st = tg_train_group_same(grp, dev ? tg_corpus_hash(dev) : 0, "dev data");
        if (st) goto done;
    }
    const char *unit = mlm ? "sequence" : "pair";
    if (tg_corpus_size(train) == 0) {
        st = tg_corpus_skipped(train)
                 ? tg_error_set(TG_ERR_INVALID, "every training %s is longer than --max-len %lld", unit,
                                (long long)mc.max_len)
                 : tg_error_set(TG_ERR_INVALID, "the training data ('%s') hold no %s", lm ? o.train : o.train_src,
                                lm ? "line" : "pair");
        goto done;
    }
    if (dev && tg_corpus_size(dev) == 0) {
        st = tg_corpus_skipped(dev)
                 ? tg_error_set(TG_ERR_INVALID, "every dev %s is longer than --max-len %lld", unit, (long long)mc.max_len)
                 : tg_error_set(TG_ERR_INVALID, "the dev data ('%s') hold no %s", lm ? o.dev : o.dev_src,
                                lm ? "line" : "pair");
        goto done;
    }
    tg_corpus_stats cs;
    tg_corpus_stats_get(train, &cs);
    int64_t hmax = tg_model_max_heads(mc.d_model, cs.mean_len);
    if (leader && stream) /* each family speaks of its own data */
        fprintf(stderr, "tg train: a token stream of %lld tokens (%lld document%s) in %lld blocks of %lld positions; "
                        "dev: %s%lld tokens%s; vocabulary %lld\n", (long long)lmd.tokens, (long long)lmd.documents,
                lmd.documents == 1 ? "" : "s", (long long)cs.pairs, (long long)block, lmd.held_out ? "the last " : "",
                (long long)lmd.dev_tokens, lmd.held_out ? " held out" : dev ? "" : " (none)", (long long)mc.tgt_vocab);
    else if (leader && classify)
        fprintf(stderr, "tg train: %lld training sequences (mean %.2f tokens) in %lld classes, vocabulary %lld\n",
                (long long)cs.pairs, cs.src_mean, (long long)o.classes, (long long)mc.tgt_vocab);
    else if (leader && mlm)
        fprintf(stderr, "tg train: %lld training sequences (mean %.2f tokens), vocabulary %lld (with <mask>); %.0f %% of "
                        "the tokens masked %s\n", (long long)cs.pairs, cs.tgt_mean, (long long)mc.tgt_vocab,
                100.0 * o.mask_prob, o.static_masks ? "once (--static-masks)" : "anew for every batch");
    else if (leader)
        fprintf(stderr, "tg train: %lld training pairs (mean %.2f / %.2f tokens), vocabularies %lld / %lld%s, h_max %lld\n",
                (long long)cs.pairs, cs.src_mean, cs.tgt_mean, (long long)mc.src_vocab, (long long)mc.tgt_vocab,
                mc.share_embeddings ? " (shared)" : "", (long long)hmax);
    if (leader && given)
        fprintf(stderr, "tg train: %d replicas (threads of this process), %d threads each; each trains on 1/%d of "
                        "every batch of --max-tokens %lld\n", tg_dist_size(grp), tg_backend_threads(be),
                tg_dist_size(grp), (long long)tc.max_tokens);
    else if (leader && grp)
        fprintf(stderr, "tg train: %d ranks (%s), %d on this host, %d threads each; each rank trains on 1/%d of every "
                        "batch of --max-tokens %lld\n", tg_dist_size(grp), tg_dist_transport(grp), tg_dist_local_size(grp),
                tg_backend_threads(be), tg_dist_size(grp), (long long)tc.max_tokens);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (leader && given && cores > 0 && (long)tg_backend_threads(be) * tg_dist_size(grp) > cores)
        fprintf(stderr, "tg train: warning: %d replicas x %d threads on %ld cores: the threads take turns on the "
                        "cores (without --threads or TG_NUM_THREADS each replica gets cores / replicas)\n",
                tg_dist_size(grp), tg_backend_threads(be), cores);
    if (!leader) {
        /* the messages below come from rank 0 */
    } else if (tg_corpus_skipped(train) || tok_skipped[0])
        fprintf(stderr, "tg train: skipped %lld training %ss longer than max_len %lld (tokens + </s>)\n",
                (long long)(tg_corpus_skipped(train) + tok_skipped[0]), unit, (long long)mc.max_len);
    if (leader && dev && tg_corpus_skipped(dev))
        fprintf(stderr, "tg train: skipped %lld dev %ss longer than max_len %lld\n", (long long)tg_corpus_skipped(dev), unit,
                (long long)mc.max_len);
    /* h_max bounds heads of attention over sentences of mean length n̄ (the encoder-decoder's pairs);
     * a language model's blocks and masked sequences are not that setting */
    if (leader && !lm && mc.heads > hmax)
        fprintf(stderr, "tg train: warning: %lld heads > h_max = floor(%lld / %.2f) = %lld of the training data "
                        "(docs/model.md §2.4: heads narrower than the mean sequence length hit the low-rank bottleneck)\n",
                (long long)mc.heads, (long long)mc.d_model, cs.mean_len, (long long)hmax);

    if (!m) {
        st = check_size(&mc, !strcmp(o.backend, "cuda"));
        AGREE_OR_DONE();
        st = tg_model_new(&mc, sv, tv, be, (uint64_t)o.seed, &m);
        sv = tv = NULL; /* owned by the model, even on failure */
        AGREE_OR_DONE();
    }
    /* the tokenizer the data was read with travels with the model (a run resumed from before
     * tokenizers travelled gets it too), so that every command reads text the same way */
    if (!tg_model_tokenizer(m)) {
        tg_tokenizer *tk = spm_tok;
        spm_tok = NULL; /* the model's, even on failure */
        st = tk ? TG_OK : tg_tokenizer_new_simple(o.chars ? TG_TOK_CHARS : TG_TOK_WORDS, tg_model_src_vocab(m), &tk);
        if (st == TG_OK) st = tg_model_set_tokenizer(m, tk);
        AGREE_OR_DONE();
    }
    /* every rank starts from rank 0's parameters */
    if (grp) {
        st = tg_dist_broadcast_params(grp, tg_model_store(m));
        AGREE_OR_DONE();
    }
    tc.lr.d_model = mc.d_model;
    tc.dist = grp;
    /* everything checked: now the output directory (rank 0 writes every file) */
    if (!leader) {
    } else if (mkdir(o.out, 0777) == 0) {
        created_dir = true;
    } else if (errno != EEXIST) {
        st = tg_error_set(TG_ERR_IO, "cannot create directory '%s': %s", o.out, strerror(errno));
    }
    if (leader && st == TG_OK && !lock) {
        st = tg_train_dir_lock(o.out, &lock);
        /* another trainer may have made and filled DIR since the check above */
        if (st == TG_OK && !o.overwrite && file_exists(o.out, "state.safetensors"))
            st = tg_error_set(TG_ERR_IO, "'%s' already holds a model: continue it with --resume or start anew with "
                              "--overwrite", o.out);
    }
    /* what a crash left behind; with --overwrite, the old run itself */
    if (leader && st == TG_OK) st = tg_train_dir_tidy(o.out, o.overwrite);
    AGREE_OR_DONE();
    st = tg_trainer_new(m, train, dev, &tc, &tr); /* agreed across the group inside */
    if (st) goto done;
    static const char *not_stored[] = {"resume", "overwrite", "config", "out", "replicas", NULL};
    if (tg_cli_to_json(t, not_stored, &opts_json) != 0) st = tg_error_set(TG_ERR_NOMEM, "out of memory");
    AGREE_OR_DONE();
    if (grp) {
        uint64_t h = 1469598103934665603ull; /* FNV-1a of the options as stored */
        for (const char *c = opts_json; *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ull;
        if ((st = tg_train_group_same(grp, h, "options"))) goto done;
    }
    st = tg_trainer_set_metadata(tr, "tool_options", opts_json);
    if (st == TG_OK && grp) {
        char ranks[32];
        snprintf(ranks, sizeof ranks, "%d", tg_dist_size(grp));
        st = tg_trainer_set_metadata(tr, "ranks", ranks);
    }
    if (st == TG_OK && o.resume) {
        st = tg_trainer_load_state(tr, state_path);
        if (st) st = tg_error_prefix(st, "cannot resume");
        else if (leader)
            fprintf(stderr, "tg train: resuming at step %lld, epoch %lld\n", (long long)tg_trainer_steps(tr),
                    (long long)tg_trainer_epoch(tr));
    }
    AGREE_OR_DONE();
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART; /* a checkpoint write in progress is not cut short */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    st = tg_trainer_run(tr, &stop_flag);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    if (st == TG_ERR_INTERRUPTED) {
        if (leader) fprintf(stderr, "tg train: %s (continue with --resume)\n", tg_error_message());
        rc = TG_EXIT_INTERRUPTED;
        st = TG_OK;
    } else if (st == TG_OK && leader) {
        /* the published name: a resumed run loaded a hidden model file that its saves removed */
        fprintf(stderr, "tg train: done at step %lld, epoch %lld; model in %s/model.safetensors\n",
                (long long)tg_trainer_steps(tr), (long long)tg_trainer_epoch(tr), o.out);
    }
done:
    if (grp && st == TG_OK && rc != TG_EXIT_OK && rc != TG_EXIT_INTERRUPTED) {
        /* A bad option (the option checks return rc, not st), maybe found by this rank alone: an
         * MPMD launch, a --config file that differs between hosts. The ranks that found nothing
         * wrong wait in the next tg_dist_agree (after the --out check, opening
         * tg_train_group_share_files, or the first AGREE_OR_DONE): meet them there with the
         * message, so that they stop with it instead of waiting forever. When every rank failed
         * here, this agreement is among them, and rank 0 has printed the message. */
        (void)tg_dist_agree(grp, TG_ERR_INVALID);
    }
    if (st) {
        rc = tg_cli_fail(cmd, TG_EXIT_RUNTIME, "%s", tg_error_message());
        /* leave nothing behind in a directory this run created and never saved into */
        if (created_dir && !file_exists(o.out, "state.safetensors")) {
            char p[4096];
            snprintf(p, sizeof p, "%s/metrics.jsonl", o.out);
            unlink(p);
            snprintf(p, sizeof p, "%s/.tg-train.lock", o.out);
            unlink(p);
            rmdir(o.out);
        } else if (leader && lock && !file_exists(o.out, "state.safetensors")) {
            /* a directory that was there, where this run saved nothing (a first save that failed:
             * a full disk): its metrics and any model file of the failed save go at once */
            char p[4096];
            snprintf(p, sizeof p, "%s/metrics.jsonl", o.out);
            unlink(p);
            if (tg_train_dir_tidy(o.out, false) != TG_OK) tg_error_clear();
        }
    }
    tg_tokenizer_free(spm_tok);
    free(cls_train);
    free(cls_dev);
    tg_trainer_free(tr);
    tg_corpus_free(train);
    tg_corpus_free(dev);
    tg_model_free(m);
    if (tv != sv) tg_vocab_free(tv);
    tg_vocab_free(sv);
    tg_backend_free(be);
    tg_lines_free(&ls);
    tg_lines_free(&lt);
    tg_lines_free(&ds);
    tg_lines_free(&dt);
    tg_lm_texts_free(&lm_train);
    tg_lm_texts_free(&lm_dev);
    tg_json_free(cfg_json);
    tg_json_free(state_json);
    free(cfg_text);
    free(opts_json);
    tg_train_group_cleanup(tmpdir);
    tg_train_dir_unlock(lock);
    if (grp && rc != TG_EXIT_OK && rc != TG_EXIT_INTERRUPTED && st == TG_ERR_BACKEND &&
        strstr(tg_error_message(), "MPI: "))
        tg_dist_abort(grp, rc); /* the transport failed: the ranks cannot meet in MPI_Finalize */
    if (!given) tg_dist_free(grp);
    return rc;
}

typedef struct {
    int argc;
    char **argv;
    tg_dist *grp;
    int rc;
} replica;

static void *replica_main(void *arg) {
    replica *r = arg;
    r->rc = train_rank(r->argc, r->argv, r->grp);
    return NULL;
}

/* --replicas N (after --config, whose file may set it): N threads, each running the command
 * as one rank of a thread group (tg_dist_threads), this thread as replica 0; else one rank. */
int tg_cmd_train(int argc, char **argv) {
    const char *cmd = "train";
    train_opts o;
    defaults(&o);
    tg_opt t[80];
    table(&o, t);
    /* --help after --arch lm / mlm shows that family's defaults */
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--arch")) o.arch = argv[i + 1];
    family_defaults(&o, t, -1);
    static char description[4096];
    char families[2048];
    tg_family_describe(families, sizeof families);
    snprintf(description, sizeof description, "%s\n\n%s", DESCRIPTION, families);
    tg_cli_set_usage(SYNOPSIS, description);
    int rc = tg_cli_parse(cmd, t, argc, argv, NULL, 0, NULL);
    if (rc == TG_CLI_HELP) return TG_EXIT_OK;
    if (rc) return TG_EXIT_USAGE;
    if (o.config) { /* train_rank reads it again and reports its errors */
        size_t len;
        char *text = tg_cli_read_file(o.config, &len);
        tg_json *j = NULL;
        bool quiet = tg_cli_quiet;
        tg_cli_quiet = true;
        if (text) (void)tg_cli_apply_json(cmd, t, text, len, o.config, true, &j);
        tg_cli_quiet = quiet;
        tg_json_free(j);
        free(text);
    }
    const int n = (int)o.replicas;
    if (n <= 1) return train_rank(argc, argv, NULL);
    int launched = 1;
    if (tg_dist_launched(&launched) && launched > 1)
        return tg_cli_fail(cmd, TG_EXIT_USAGE, "--replicas and mpirun -np %d together: use one of them", launched);
    if (strcmp(o.backend, "cpu") != 0)
        return tg_cli_fail(cmd, TG_EXIT_USAGE, "--replicas trains on the CPU backend (several GPUs: mpirun, "
                                               "docs/distributed.md)");
    tg_dist **grp = calloc((size_t)n, sizeof *grp);
    replica *r = calloc((size_t)n, sizeof *r);
    pthread_t *th = calloc((size_t)n, sizeof *th);
    if (!grp || !r || !th || tg_dist_threads(n, grp) != TG_OK) {
        rc = tg_cli_fail(cmd, TG_EXIT_RUNTIME, "cannot set up %d replicas: %s", n,
                         grp && r && th ? tg_error_message() : "out of memory");
        free(grp), free(r), free(th);
        return rc;
    }
    for (int i = 0; i < n; i++)
        r[i] = (replica){.argc = argc, .argv = argv, .grp = grp[i], .rc = TG_EXIT_RUNTIME};
    for (int i = 1; i < n; i++) {
        int err = pthread_create(&th[i], NULL, replica_main, &r[i]);
        if (err) {
            /* the replicas started wait in the group's first collective, before they touch --out,
             * for one that never comes: nothing to do but end the process */
            fprintf(stderr, "tg train: cannot start replica %d of %d: %s\n", i, n, strerror(err));
            _exit(TG_EXIT_RUNTIME);
        }
    }
    replica_main(&r[0]);
    rc = r[0].rc;
    for (int i = 1; i < n; i++) {
        pthread_join(th[i], NULL);
        if (rc == TG_EXIT_OK) rc = r[i].rc; /* the group agrees on failures: a fallback */
    }
    for (int i = 0; i < n; i++)
        tg_dist_free(grp[i]);
    free(grp), free(r), free(th);
    return rc;
}
