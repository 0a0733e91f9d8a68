/* Fuzz harness: model checkpoints (models/checkpoint.c): config, vocabularies and tensors are
 * checked before anything is allocated for them, and weights must be finite. */
#include <stdlib.h>
#include <unistd.h>

#include "fuzz.h"
#include "tg/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static tg_backend *be;
    if (!be && tg_backend_cpu_new(1, &be) != TG_OK) abort();
    char path[256];
    if (tg_fuzz_tmpfile(data, size, path, sizeof path)) return 0;
    tg_model *m = NULL;
    if (tg_model_load(path, be, &m) == TG_OK) tg_model_free(m);
    unlink(path);
    return 0;
}
