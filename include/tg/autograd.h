/* tgraph — reverse-mode automatic differentiation. */
#ifndef TG_AUTOGRAD_H
#define TG_AUTOGRAD_H

#include "tg/export.h"

#include "tg/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Append the gradient computation of the scalar `loss` (seeded with 1) to loss's graph.
 * Gradients flow only into tensors that require them (trainable parameters and inputs marked
 * with tg_requires_grad), and branches that do not reach them cost nothing. Parameter
 * gradients are accumulated into their store when the graph runs. */
TG_API tg_status tg_backward(tg_graph *g, tg_tensor *loss);

/* After tg_backward: the gradient of t (kept, readable after the run), or NULL if t received
 * none. */
TG_API tg_tensor *tg_grad(tg_graph *g, const tg_tensor *t);

#ifdef __cplusplus
}
#endif
#endif
