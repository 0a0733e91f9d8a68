/* `tg`: the tgraph command-line program. `tg <command> [options]`; every command has --help.
 * Exit status: 0 success, 1 runtime error (bad data, missing file, numerical failure), 2 usage
 * error (unknown command or option, value out of range), 130 training stopped by a signal
 * after saving its checkpoint. */
#include <stdio.h>
#include <string.h>

#include "tg/backend.h"
#include "tools/cli.h"
#include "tools/commands.h"

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *help;
} command;

static const command commands[] = {
    {"prep", tg_cmd_prep, "corpus statistics (mean lengths, h_max) and vocabularies"},
    {"train", tg_cmd_train, "train a Transformer; writes model, training state and metrics"},
    {"translate", tg_cmd_translate, "decode sentences with a checkpoint (greedy or beam search)"},
    {"generate", tg_cmd_generate, "continue prompts with a language model (greedy or sampled)"},
    {"fill-mask", tg_cmd_fill_mask, "the most likely fillers of each <mask> under a masked language model"},
    {"score", tg_cmd_score, "log-probability of each target sentence given its source (or text: perplexity)"},
    {"eval", tg_cmd_eval, "BLEU, chrF, WER and PER of hypotheses against references"},
    {"attention", tg_cmd_attention, "attention weights of every layer and head: CSV and heat maps"},
    {"inspect", tg_cmd_inspect, "configuration and parameter counts of a checkpoint"},
    {"average", tg_cmd_average, "average the parameters of several checkpoints"},
    {"import", tg_cmd_import, "convert a Hugging Face model (BERT, GPT-2) into a checkpoint"},
    {"export", tg_cmd_export, "write a checkpoint as a Hugging Face model directory"},
    {"tokenize", tg_cmd_tokenize, "the ids of each line as the model's tokenizer makes them"},
    {"embed", tg_cmd_embed, "one sentence embedding per line from an encoder"},
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f) {
    fprintf(f, "usage: tg <command> [options]     (tg <command> --help for its options)\n\ncommands:\n");
    for (size_t i = 0; i < NCOMMANDS; i++) fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\nexit status: 0 ok, 1 runtime error, 2 usage error, 130 training interrupted (checkpoint saved)\n"
               "documentation: docs/tool.md\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return TG_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        if (argc > 2 && strcmp(cmd, "help") == 0) { /* tg help CMD == tg CMD --help */
            for (size_t i = 0; i < NCOMMANDS; i++)
                if (!strcmp(argv[2], commands[i].name)) {
                    char *a[2] = {argv[2], "--help"};
                    return commands[i].run(2, a);
                }
            fprintf(stderr, "tg: unknown command '%s' (see tg --help)\n", argv[2]);
            return TG_EXIT_USAGE;
        }
        usage(stdout);
        return TG_EXIT_OK;
    }
    if (!strcmp(cmd, "--version")) {
        printf("tg (tgraph) 0.1.0\n");
        /* the CPU kernels' instruction set (TG_CPU_ISA caps it) and whether CUDA is built in */
        printf("cpu kernels: %s\ncuda: %s\n", tg_cpu_isa_name(), tg_have_cuda() ? "built in" : "not built");
        return TG_EXIT_OK;
    }
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (!strcmp(cmd, commands[i].name)) return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "tg: unknown command '%s' (see tg --help)\n", cmd);
    return TG_EXIT_USAGE;
}
