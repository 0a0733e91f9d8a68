/* Fuzz harness: the metric readers (train/bleu.c, chrf.c, edit_distance.c): the first half of
 * the lines are hypotheses, the second half their references (" ||| " separates several for
 * G2P); BLEU with both tokenizers, chrF, WER and G2P WER/PER. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "tg/metrics.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    size_t count;
    char **lines = tg_fuzz_lines(data, size, &count);
    if (!lines) return 0;
    size_t n = count / 2;
    const char *const *hyps = (const char *const *)lines, *const *refs = (const char *const *)lines + n;
    tg_metric_bleu_result br;
    tg_metric_bleu_options bo = tg_metric_bleu_options_default();
    (void)tg_metric_bleu(hyps, refs, n, &bo, &br);
    bo.tokenize = TG_BLEU_TOKENIZE_NONE;
    (void)tg_metric_bleu(hyps, refs, n, &bo, &br);
    tg_metric_chrf_result cr;
    (void)tg_metric_chrf(hyps, refs, n, &cr);
    tg_metric_wer_result wr;
    (void)tg_metric_wer(hyps, refs, n, &wr);
    /* G2P: each reference line cut at " ||| " into alternatives (in place) */
    const char **alts = malloc((size + 1) * sizeof *alts);
    const char *const **g_refs = malloc((n ? n : 1) * sizeof *g_refs);
    size_t *n_refs = malloc((n ? n : 1) * sizeof *n_refs), k = 0;
    if (alts && g_refs && n_refs) {
        for (size_t i = 0; i < n; i++) {
            char *s = lines[n + i];
            g_refs[i] = alts + k;
            n_refs[i] = 0;
            for (;;) {
                alts[k++] = s;
                n_refs[i]++;
                char *sep = strstr(s, " ||| ");
                if (!sep) break;
                *sep = '\0';
                s = sep + 5;
            }
        }
        tg_metric_g2p_result gr;
        (void)tg_metric_g2p(hyps, g_refs, n_refs, n, &gr);
    }
    free(alts);
    free(g_refs);
    free(n_refs);
    free(lines);
    return 0;
}
