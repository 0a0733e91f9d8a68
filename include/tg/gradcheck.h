/* tgraph — finite-difference gradient checks of any function built from graph ops: the rule
 * the engine checks its own ops with (tests/test_gradcheck.c), for user-built layers.
 *
 * The function builds y = f(x_1..x_k, θ) from leaf inputs x (values given) and, optionally,
 * the trainable parameters θ of a store (tg_param). The check compares tg_backward's gradient
 * of L = sum(y * R), R fixed random weights of alternating sign (so every output element counts
 * differently), with central differences (L(x + h e_i) - L(x - h e_i)) / 2h, L accumulated in
 * double on the host from the float32 forward values. Float32 forward values carry ~1e-7
 * relative error, so with h = 5e-3 the numerical gradient is good to ~1e-4: an entry passes
 * when |analytic - numeric| <= atol + rtol * |numeric| (defaults atol 2e-3, rtol 1e-2). Every
 * entry is checked; the result names the worst one. Dropout masks are fixed by the graph seed,
 * so a function with dropout checks too. */
#ifndef TG_GRADCHECK_H
#define TG_GRADCHECK_H

#include "tg/export.h"

#include <stdint.h>

#include "tg/graph.h"
#include "tg/store.h"

#ifdef __cplusplus
extern "C" {
#endif

/* y from the inputs (in the order given) of graph g; NULL on a build error. */
typedef tg_tensor *(*tg_gradcheck_fn)(tg_graph *g, tg_tensor **inputs, void *ctx);

typedef struct tg_gradcheck_input {
    int ndim;
    int64_t shape[TG_MAX_DIMS];
    float *values; /* numel values; perturbed in place during the check and restored */
} tg_gradcheck_input;

typedef struct tg_gradcheck_options {
    double step;       /* h (default 5e-3) */
    double atol, rtol; /* defaults 2e-3, 1e-2 */
    uint64_t seed;     /* the weights R and the graphs' dropout seed (default 1234) */
    /* Also check every trainable parameter of this store (NULL: inputs only). The store's
     * gradients are zeroed and left holding the analytic gradient; values are restored. */
    tg_store *store;
} tg_gradcheck_options;

/* The default options (every field filled; change what you need). */
TG_API tg_gradcheck_options tg_gradcheck_options_default(void);

typedef struct tg_gradcheck_result {
    int64_t checked;   /* entries compared */
    double worst;      /* max over entries of |analytic - numeric| / (atol + rtol |numeric|) */
    int input;         /* the worst entry: input index, or -1 for a parameter */
    int64_t param;     /* its store index (-1 for an input) */
    int64_t element;   /* its element index */
    double analytic, numeric;
    char where[192];   /* "input 1 element 3" or "parameter 'fc.weight' element 7" */
} tg_gradcheck_result;

/* Check the gradients of fn at the given input values on backend b (opt may be NULL: the
 * defaults). TG_OK when every entry passes (worst <= 1); TG_ERR_NUMERIC naming the worst
 * entry when one does not; other errors when fn fails to build or run. *res (may be NULL) is
 * filled in either case as far as the check got. */
TG_API tg_status tg_gradcheck(tg_gradcheck_fn fn, void *ctx, int n, tg_gradcheck_input *inputs, tg_backend *b,
                       const tg_gradcheck_options *opt, tg_gradcheck_result *res);

#ifdef __cplusplus
}
#endif
#endif
