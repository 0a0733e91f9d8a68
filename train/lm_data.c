/* Corpora of a language model (arch lm): one sequence per line, held as the target side of a
 * parallel corpus whose sources are empty, so that batching, training, evaluation and scoring
 * are the encoder-decoder's own code. An empty source costs one token (</s>) per sentence in
 * the batch budget. */
#include <stdlib.h>

#include "tg/train.h"

tg_status tg_corpus_new_lm(const tg_lines *text, const tg_vocab *vocab, const tg_corpus_options *opt,
                           tg_corpus **out) {
    if (!text || !vocab || !out) return tg_error_set(TG_ERR_INVALID, "tg_corpus_new_lm: NULL argument");
    static char empty[1] = "";
    tg_lines none = {.n = text->n, .line = malloc((size_t)(text->n ? text->n : 1) * sizeof(char *)), .buf = NULL,
                     .path = text->path};
    if (!none.line) return tg_error_set(TG_ERR_NOMEM, "tg_corpus_new_lm: out of memory");
    for (int64_t i = 0; i < text->n; i++) none.line[i] = empty;
    tg_status st = tg_corpus_new(&none, text, vocab, vocab, opt, out);
    free(none.line);
    return st;
}
