/* The op table: names and properties of every op. Kernels live in backends/, gradient rules in
 * autograd/grad_rules.c, shape rules in core/ops_*.c. */
#include "core/tg-impl.h"

static const struct {
    const char *name;
    unsigned flags;
} ops[TG_OP_COUNT] = {
    [TG_OP_NONE] = {"leaf", 0},
    [TG_OP_FILL] = {"fill", TG_OPF_NO_GRAD},
    [TG_OP_RESHAPE] = {"reshape", TG_OPF_VIEW},
    [TG_OP_PERMUTE] = {"permute", TG_OPF_VIEW},
    [TG_OP_SLICE] = {"slice", TG_OPF_VIEW},
    [TG_OP_CONT] = {"contiguous", 0},
    [TG_OP_CONCAT] = {"concat", 0},
    [TG_OP_PAD] = {"pad", 0},
    [TG_OP_EXPAND] = {"expand", 0},
    [TG_OP_ADD] = {"add", TG_OPF_INPLACE},
    [TG_OP_SUB] = {"sub", TG_OPF_INPLACE},
    [TG_OP_MUL] = {"mul", TG_OPF_INPLACE},
    [TG_OP_DIV] = {"div", TG_OPF_INPLACE},
    [TG_OP_SCALE] = {"scale", TG_OPF_INPLACE},
    [TG_OP_EXP] = {"exp", TG_OPF_INPLACE},
    [TG_OP_LOG] = {"log", TG_OPF_INPLACE},
    [TG_OP_SQRT] = {"sqrt", TG_OPF_INPLACE},
    [TG_OP_RSQRT] = {"rsqrt", TG_OPF_INPLACE},
    [TG_OP_TANH] = {"tanh", TG_OPF_INPLACE},
    [TG_OP_RELU] = {"relu", TG_OPF_INPLACE},
    [TG_OP_GELU] = {"gelu", TG_OPF_INPLACE},
    [TG_OP_RELU_BACK] = {"relu_back", TG_OPF_INPLACE | TG_OPF_BACKWARD_ONLY},
    [TG_OP_GELU_BACK] = {"gelu_back", TG_OPF_INPLACE | TG_OPF_BACKWARD_ONLY},
    [TG_OP_MASKED_FILL] = {"masked_fill", TG_OPF_INPLACE},
    [TG_OP_DROPOUT] = {"dropout", TG_OPF_INPLACE},
    [TG_OP_SUM] = {"sum", 0},
    [TG_OP_MAX] = {"max", 0},
    [TG_OP_MAX_BACK] = {"max_back", TG_OPF_BACKWARD_ONLY},
    [TG_OP_SUM_TO] = {"sum_to", 0},
    [TG_OP_SOFTMAX] = {"softmax", TG_OPF_INPLACE},
    [TG_OP_LOG_SOFTMAX] = {"log_softmax", TG_OPF_INPLACE},
    [TG_OP_SOFTMAX_BACK] = {"softmax_back", TG_OPF_BACKWARD_ONLY},
    [TG_OP_LOG_SOFTMAX_BACK] = {"log_softmax_back", TG_OPF_BACKWARD_ONLY},
    [TG_OP_LAYER_NORM] = {"layer_norm", 0},
    [TG_OP_LAYER_NORM_BACK] = {"layer_norm_back", TG_OPF_BACKWARD_ONLY},
    [TG_OP_MATMUL] = {"matmul", 0},
    [TG_OP_EMBEDDING] = {"embedding", 0},
    [TG_OP_EMBEDDING_BACK] = {"embedding_back", TG_OPF_BACKWARD_ONLY},
    [TG_OP_CROSS_ENTROPY] = {"cross_entropy", 0},
    [TG_OP_CROSS_ENTROPY_BACK] = {"cross_entropy_back", TG_OPF_BACKWARD_ONLY},
    [TG_OP_BAND_SCORES] = {"band_scores", 0},
    [TG_OP_BAND_MIX] = {"band_mix", 0},
    [TG_OP_BAND_MIX_T] = {"band_mix_t", TG_OPF_BACKWARD_ONLY},
    [TG_OP_GRAD_ACC] = {"grad_acc", TG_OPF_NO_GRAD},
};

const char *tg_op_name(tg_op op) {
    return (op >= 0 && op < TG_OP_COUNT && ops[op].name) ? ops[op].name : "unknown-op";
}
unsigned tg__op_flags(tg_op op) { return (op >= 0 && op < TG_OP_COUNT) ? ops[op].flags : 0; }
bool tg_op_is_backward_only(tg_op op) { return tg__op_flags(op) & TG_OPF_BACKWARD_ONLY; }
bool tg_op_has_no_gradient(tg_op op) { return tg__op_flags(op) & TG_OPF_NO_GRAD; }
