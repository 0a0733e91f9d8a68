/* `tg average`: checkpoint averaging (docs/model.md §1: parameter mean of the last k checkpoints).
 * Either the checkpoints are named, or --dir DIR --last K takes the K highest-numbered
 * DIR/checkpoint-STEP.safetensors that `tg train --keep-checkpoints` leaves. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tg/train.h"
#include "tools/cli.h"
#include "tools/commands.h"

#define MAX_CKPT 1024

static int by_step_desc(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

int tg_cmd_average(int argc, char **argv) {
    const char *cmd = "average", *out = NULL, *dir = NULL;
    int64_t last = 0;
    tg_opt opts[] = {
        {"out", TG_OPT_STRING, &out, 0, 0, NULL, "FILE", "the averaged checkpoint (required)", 0, 0},
        {"dir", TG_OPT_STRING, &dir, 0, 0, NULL, "DIR", "take checkpoint-STEP.safetensors files from DIR", 0, 0},
        {"last", TG_OPT_INT, &last, 0, MAX_CKPT, NULL, "K", "with --dir: the K latest (0: all)", 0, 0},
        {0},
    };
    tg_cli_set_usage("--out FILE (CHECKPOINT... | --dir DIR [--last K])",
                     "Write the element-wise mean of the parameters of several checkpoints of one model.");
    const char *pos[MAX_CKPT];
    int npos = 0;
    int rc = tg_cli_parse(cmd, opts, argc, argv, pos, MAX_CKPT, &npos);
    if (rc == TG_CLI_HELP) return TG_EXIT_OK;
    if (rc) return TG_EXIT_USAGE;
    if (!out) return tg_cli_fail(cmd, TG_EXIT_USAGE, "--out is required");
    if (!dir == !npos) return tg_cli_fail(cmd, TG_EXIT_USAGE, "name the checkpoints or give --dir (not both)");
    static char names[MAX_CKPT][4096];
    const char *paths[MAX_CKPT];
    int64_t k = 0;
    if (dir) {
        DIR *d = opendir(dir);
        if (!d) return tg_cli_fail(cmd, TG_EXIT_RUNTIME, "cannot open '%s': %s", dir, strerror(errno));
        long long steps[MAX_CKPT];
        int n = 0;
        struct dirent *e;
        while ((e = readdir(d)) && n < MAX_CKPT) {
            long long s;
            char tail[32];
            if (sscanf(e->d_name, "checkpoint-%lld.%31s", &s, tail) == 2 && !strcmp(tail, "safetensors")) steps[n++] = s;
        }
        closedir(d);
        qsort(steps, (size_t)n, sizeof *steps, by_step_desc);
        if (last > 0 && n > last) n = (int)last;
        if (n == 0) return tg_cli_fail(cmd, TG_EXIT_RUNTIME, "no checkpoint-STEP.safetensors in '%s'", dir);
        for (int i = 0; i < n; i++) {
            snprintf(names[i], sizeof names[i], "%s/checkpoint-%lld.safetensors", dir, steps[i]);
            paths[k++] = names[i];
        }
    } else {
        for (int i = 0; i < npos; i++) paths[k++] = pos[i];
    }
    tg_status st = tg_checkpoint_average(paths, k, out);
    if (st) return tg_cli_fail(cmd, TG_EXIT_RUNTIME, "%s", tg_error_message());
    fprintf(stderr, "tg average: mean of %lld checkpoints written to %s\n", (long long)k, out);
    return TG_EXIT_OK;
}
