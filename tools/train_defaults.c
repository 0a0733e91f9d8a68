/* `tg train`'s defaults per model family (tools/train_defaults.h). */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "tools/train_defaults.h"

/* small / medium / large: the model grows with the data it can learn from without memorising it
 * in a few epochs; a block (lm) or a sequence (mlm) of max_len positions */
static const tg_family_defaults sizes[3] = {
    {"small", 128, 4, 4, 512, 128, 2048, 1e-3, 0.999, 1e-8, 1.0},
    {"medium", 256, 8, 6, 1024, 256, 8192, 6e-4, 0.999, 1e-8, 1.0},
    {"large", 512, 8, 6, 2048, 512, 16384, 3e-4, 0.999, 1e-8, 1.0},
};
static const int64_t small_below = 1000000, medium_below = 20000000;

int64_t tg_family_tokens_estimate(const char *list, bool chars) {
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", list ? list : "");
    int64_t bytes = 0;
    char *save = NULL;
    for (char *f = strtok_r(buf, ",", &save); f; f = strtok_r(NULL, ",", &save)) {
        struct stat sb;
        if (stat(f, &sb) != 0) return -1;
        bytes += (int64_t)sb.st_size;
    }
    return chars ? bytes : bytes / 6;
}

void tg_family_defaults_get(tg_model_arch arch, int64_t tokens, tg_family_defaults *out) {
    int k = tokens < small_below ? 0 : tokens < medium_below ? 1 : 2;
    *out = sizes[k];
    if (arch == TG_ARCH_MLM) out->lr /= 2; /* post-LN (BERT's wiring) takes a gentler rate */
}

int64_t tg_family_warmup(int64_t steps, int64_t epochs, int64_t tokens, int64_t max_tokens) {
    int64_t per_epoch = max_tokens > 0 && tokens > 0 ? (tokens + max_tokens - 1) / max_tokens : 1;
    int64_t w = steps > 0 ? steps / 20 : epochs > 0 ? epochs * per_epoch / 20 : per_epoch / 2;
    w = w < 10 ? 10 : w > 2000 ? 2000 : w;
    return steps > 0 && w >= steps ? steps / 2 : w; /* a run shorter than 10 steps: half of it */
}

void tg_family_describe(char *buf, size_t n) {
    size_t k = (size_t)snprintf(buf, n,
        "Defaults per family (an option given wins):\n"
        "  encdec   the Transformer base model and recipe: d-model 512, heads 8, 6 + 6 layers, d-ff 2048,\n"
        "           post-LN, ReLU, sinusoidal positions, label smoothing 0.1, max-len 256, max-tokens 4096,\n"
        "           noam schedule with warmup 4000, Adam beta2 0.98 and eps 1e-9 (PyTorch's Adam: 0.999, 1e-8)\n"
        "  lm, mlm  a model sized to the training text (tokens estimated from its bytes), pre-LN (lm) or\n"
        "           post-LN (mlm), GELU, learned positions, no label smoothing, PyTorch's Adam (beta2 0.999,\n"
        "           eps 1e-8), clip 1, a constant rate (cosine to lr/10 with --steps) after a warm-up of a\n"
        "           twentieth of the run (of half an epoch with --minutes alone; 10 to 2000 steps):\n");
    for (int i = 0; i < 3 && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k,
                              "           %-6s (%s): d-model %lld, heads %lld, %lld layers, d-ff %lld, max-len/block %lld, "
                              "max-tokens %lld, lr %g (mlm %g)\n",
                              sizes[i].size, i == 0 ? "< 1M tokens" : i == 1 ? "< 20M" : ">= 20M",
                              (long long)sizes[i].d_model, (long long)sizes[i].heads, (long long)sizes[i].layers,
                              (long long)sizes[i].d_ff, (long long)sizes[i].max_len, (long long)sizes[i].max_tokens,
                              sizes[i].lr, sizes[i].lr / 2);
    if (k > 0 && k < n && buf[k - 1] == '\n') buf[k - 1] = '\0';
}
