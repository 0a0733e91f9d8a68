/* tgraph — one include for the whole public API: every header of include/tg/. */
#ifndef TG_TG_H
#define TG_TG_H
/* the engine: errors, tensors, backends, graphs, ops, parameters, autodiff, optimizers, RNG */
#include "tg/export.h"
#include "tg/error.h"
#include "tg/tensor.h"
#include "tg/backend.h"
#include "tg/graph.h"
#include "tg/ops.h"
#include "tg/store.h"
#include "tg/autograd.h"
#include "tg/optim.h"
#include "tg/update.h"
#include "tg/rng.h"
/* files: JSON and safetensors */
#include "tg/json.h"
#include "tg/safetensors.h"
/* the Transformer zoo and its decoding */
#include "tg/model.h"
#include "tg/decode.h"
#include "tg/tokenizer.h"
#include "tg/hf.h"
#include "tg/layers.h"
#include "tg/attn_kinds.h"
/* training, metrics, data-parallel process groups */
#include "tg/train.h"
#include "tg/metrics.h"
#include "tg/dist.h"
/* the model writer's toolkit */
#include "tg/init.h"
#include "tg/sample.h"
#include "tg/gradcheck.h"
#include "tg/kv_cache.h"
#endif
