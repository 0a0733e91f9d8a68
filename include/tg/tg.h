/* tgraph — one include for the whole public API. */
#ifndef TG_TG_H
#define TG_TG_H
#include "tg/error.h"
#include "tg/tensor.h"
#include "tg/backend.h"
#include "tg/graph.h"
#include "tg/ops.h"
#include "tg/store.h"
#include "tg/autograd.h"
#include "tg/optim.h"
#include "tg/rng.h"
#include "tg/init.h"
#include "tg/sample.h"
#include "tg/gradcheck.h"
#include "tg/kv_cache.h"
#endif
