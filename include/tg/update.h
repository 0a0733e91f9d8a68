/* tgraph — the parameter update rules (SGD with momentum, Adam, AdamW) that a backend applies to
 * a store's parameters; tg/optim.h's optimizers step with them. */
#ifndef TG_UPDATE_H
#define TG_UPDATE_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tg_optim_kind {
    TG_OPTIM_SGD = 0,  /* v = momentum*v + g; w -= lr*(v + wd*w) (wd as L2 in the gradient) */
    TG_OPTIM_ADAM = 1, /* Kingma & Ba, bias-corrected; weight decay added to the gradient */
    TG_OPTIM_ADAMW = 2 /* Loshchilov & Hutter: decoupled decay w -= lr*wd*w */
} tg_optim_kind;

typedef struct tg_optim_config {
    tg_optim_kind kind;
    float momentum;     /* SGD */
    float beta1, beta2; /* Adam */
    float eps;
    float weight_decay;
} tg_optim_config;

#ifdef __cplusplus
}
#endif
#endif
