/* Internal interface of the CPU backend: one kernel per op, registered by the kernel files. Kernels
 * read contiguous inputs (the graph builders guarantee it; matmul also reads row- or
 * column-contiguous views) and write contiguous outputs. Every member of the backend's thread
 * team (team.h) calls the kernel of a node with its own tg_cpu_par and does its share: static
 * contiguous blocks (TG_CPU_FOR) or tasks handed out dynamically where each result is computed
 * whole by one member, so results are bit-identical for a given thread count (most do not
 * depend on it at all). A kernel returns the same status on every member. */
#ifndef TG_CPU_IMPL_H
#define TG_CPU_IMPL_H

#include <math.h>

#include "backends/cpu/isa.h"
#include "backends/cpu/team.h"
#include "core/backend-impl.h"
#include "core/graph-impl.h"

/* Work below this many elements runs on member 0 alone (sharing it costs more than it saves). */
#define TG_PAR_MIN 16384

/* Switches and counters for tests and benchmarks, in one object that they read and set (not
 * while a graph or a product runs). Zero is the backend as it runs in use: a switch names the
 * departure from it. */
struct tg__cpu_stats {
    /* ---- the GEMM (gemm*.c) ---- */
    struct {
        bool no_split_k;   /* weight gradients in graph runs cut by rows, not along k */
        bool no_inplace_a; /* the 512-bit packed kernels read op(A) from packed panels only */
        bool no_small_dot; /* the small path's Q·Kᵀ over a few keys on tiles, not dot products */
        bool stall_shared; /* shared op(B) panels made now: every piece claimed by a block that
                              never packs it, as one held off its core would (the blocks then
                              pack the pieces themselves after their wait) */
        atomic_int kept;   /* operands kept packed now (gemm.h: tg_cpu_gemm_keep_b) */
        atomic_int kept_hits; /* products that found their op(B) kept */
    } gemm;
};
/* defined in gemm.c; hidden: read in place, not through the GOT (the library exports its API
 * alone, include/tg/export.h) */
extern __attribute__((visibility("hidden"))) struct tg__cpu_stats tg__cpu_stats;


/* eight floats as one GCC/Clang vector: a register of AVX2 (two of SSE in the baseline clone) */
typedef float v8f __attribute__((vector_size(32)));

#define F32(t) ((float *)(t)->data)
#define I32(t) ((int32_t *)(t)->data)

/* A kernel: member p's share of node t. Each kernel file registers its kernels by op in a
 * table of its own (designated initialisers, one slot per op); cpu.c assembles the tables. */
typedef tg_status (*tg__cpu_kernel)(tg_cpu_par *p, tg_tensor *t);
#define TG__CPU_KERNELS(fam) const tg__cpu_kernel tg__cpu_kernels_##fam[TG_OP_COUNT]
#define TG__CPU_KERNELS_CHECK(fam)                                                              \
    _Static_assert(sizeof tg__cpu_kernels_##fam / sizeof tg__cpu_kernels_##fam[0] == TG_OP_COUNT, \
                   "the " #fam " kernels' table must have one slot per op")
extern TG__CPU_KERNELS(elementwise); /* k_elementwise.c: fill, binary, unary, masks, dropout */
extern TG__CPU_KERNELS(layout);      /* k_layout.c: cont, concat, pad, expand */
extern TG__CPU_KERNELS(reduce);      /* k_reduce.c: sum, max, max_back, sum_to */
extern TG__CPU_KERNELS(rows);        /* k_rows.c: softmax, log-softmax, layer norm */
extern TG__CPU_KERNELS(matmul);      /* k_matmul.c */
extern TG__CPU_KERNELS(nn);          /* k_nn.c: embedding, cross-entropy, grad_acc */
extern TG__CPU_KERNELS(band);        /* k_band.c: band_scores, band_mix, band_mix_t */

/* Every op's kernel (NULL: none), assembled from the families' tables (cpu.c). */
extern tg__cpu_kernel tg__cpu_kernels[TG_OP_COUNT];

/* Into how many shares the graph runner cuts matmul node t on a team of nthreads, at most
 * `most`, `fine` or not (k_matmul.c; gemm.h: tg_cpu_gemm_shares). */
int tg__cpu_matmul_shares(const tg_tensor *t, int nthreads, int most, bool fine);
/* Whether matmul node t's kernel can read its B, a view of an embedding lookup, from the
 * lookup's table itself (core/plan.c: TG_TF_LOOKUP): on the small-product path, B's rows the
 * lookup's rows apart, each product's within them (k_matmul.c). */
bool tg__cpu_matmul_reads_lookup(const tg_tensor *t);
/* TG_OK when ids[0..n) all lie in [0, V), else TG_ERR_INVALID naming fn (k_nn.c). */
tg_status tg__cpu_check_ids(const int32_t *ids, int64_t n, int64_t V, const char *fn);

/* Benchmarks and tests (bench_step --huge-pages): lasting blocks of 8 MiB and more (a store's
 * slabs, alloc_lasting) mapped on 2-MiB boundaries and marked MADV_HUGEPAGE (on, the default;
 * cpu.c: HUGE_MIN), or from the heap (off). Process-wide; returns the previous setting. Blocks
 * keep the way they were made. */
bool tg__cpu_huge_pages(bool on);

/* What the graph runner of CPU backend b has done since b was made (runner_policy.c says what
 * each policy does), for tests and benchmarks: one snapshot of its counters. */
typedef struct {
    int64_t run_ahead;     /* node shares run ahead of their node's turn (offcore) */
    int64_t waits_offcore; /* waits that found the member holding a share off its core */
    int64_t waits_slept;   /* of those, slept through (nothing to run ahead) */
    int64_t waits_lent;    /* of those, lending the holder the sleeper's CPU (team.h:
                            * tg_cpu_team_lend; a team that pins its members, never member 0) */
    int64_t fine_runs;     /* runs that cut the packed products finer (fine_after) */
    int64_t runs_keeping_core; /* runs whose waits spun through the yield phase (keep_core) */
    int64_t runs_alone;        /* runs on the caller alone (run_alone) */
} tg__cpu_runner_stats;
tg__cpu_runner_stats tg__cpu_runner_counts(tg_backend *b);
/* Tests: every holder taken to be off its core (at the wait's first reading; b's runs then
 * never go alone, run_alone, whose runs have no such waits). */
void tg__cpu_all_offcore(tg_backend *b, bool on);
/* Tests: b's members other than 0 join no graph run while on (team.h: tg_cpu_team_members_away). */
void tg__cpu_members_away(tg_backend *b, bool on);
/* The judgement of run_alone on a window of the team's runs: the shares its members other than 0
 * own and ran, member 0's wall and CPU time in them; true: the next runs go alone. */
bool tg__cpu_judged_alone(int64_t owned, int64_t helped, int64_t wall_ns, int64_t cpu_ns);

/* keep_between (runner_policy.c): whether the waits between graph runs keep their cores, how many judged
 * windows in a row found that they should not have, and when to try keeping them again. Next:
 * the state after a window in which every member was (on_core) or was not on its CPU for most
 * of the time, or in which the runs were judged to go alone (run_alone). */
typedef struct {
    bool keep;
    int fails;
    int64_t retry_at;
} tg__cpu_keep_state;
tg__cpu_keep_state tg__cpu_keep_next(tg__cpu_keep_state s, bool on_core, bool alone, int64_t now);
/* Whether b's waits between graph runs keep their cores now (keep_between, before the team's
 * pinning and contention are taken into account). */
bool tg__cpu_keeps_core_between(tg_backend *b);

/* Column sums over the n rows of an inner-column matrix made block by block (k_reduce.c):
 * rows(ctx, k0, k1, b) writes into b[0, inner) each column's sum over rows [k0, k1), adding
 * the rows in order starting from 0. The blocks are 128 rows, summed in block order starting
 * from 0 — sum_to's order, so a column gets sum_to's bits on the rows made whole — into o (or
 * added to it: acc). Member p's share: in a graph run its own blocks of rows, the last share to
 * finish adding up; else member 0 all of it. Returns TG_ERR_NOMEM (error set) where a buffer
 * of 2 inner floats could not be had. */
typedef void (*tg_cpu_block_sums_fn)(void *ctx, int64_t k0, int64_t k1, float *b);
tg_status tg__cpu_column_sums(tg_cpu_par *p, tg_cpu_block_sums_fn rows, void *ctx, float *o,
                              int64_t n, int64_t inner, bool acc);

/* Fused elementwise chains (core/fuse.c), run tile by tile (k_elementwise.c): the members of
 * the chain that ends at a node, head first (the node last), the tiles of the members without
 * a buffer, operands gathered for broadcasting, and each member's values over the tile. What a
 * gathered buffer holds, when it is the same for every row (a bias broadcast over the rows):
 * the operand, the member it was gathered for, the tile's first column and its length — a
 * later tile with the same key finds it there instead of gathering it again. */
typedef struct {
    const tg_tensor *src, *t;
    int64_t col, len;
} tg_gathered_key;

typedef struct {
    tg_tensor *m[TG_CHAIN_MAX];
    int k;
    _Alignas(32) float tmp[TG_CHAIN_MAX][TG_CHAIN_TILE];
    _Alignas(32) float gathered[2][TG_CHAIN_TILE];
    tg_gathered_key gathered_key[2];
    const float *val[TG_CHAIN_MAX];
} tg_chain_tiles;
/* c->m[0..c->k) = the chain ending at t, head first, t last when with_t (a row op ending a
 * chain runs its own kernel on the members' values); fails if a member has no tile function
 * (checked here once, not per tile). */
tg_status tg__cpu_chain_start(tg_chain_tiles *c, tg_tensor *t, bool with_t);
/* Computes members c->m[0..c->k) over their elements [e0, e0 + len) (len <= TG_CHAIN_TILE);
 * c->val[j] then points at member j's values there. */
void tg__cpu_chain_run(tg_chain_tiles *c, int64_t e0, int64_t len);
/* Input s of node x over [e0, e0 + len): a member's values (after tg__cpu_chain_run) or the
 * operand's memory, gathered when it broadcasts. */
const float *tg__cpu_chain_input(tg_chain_tiles *c, const tg_tensor *x, int s, int64_t e0,
                                 int64_t len);

/* min(max(x, lo), hi) by bit masks; NaN passes through. Written without a float select on
 * purpose: GCC turns `x = x < lo ? lo : x` into a branch, threads the constant it produces
 * down the rest of the expression and, once the loop is if-converted, evaluates that constant
 * branch too; for exp that branch divides or multiplies by ~1e38 and yields subnormals, which
 * cost a microcode assist per element (6 ns per GELU element instead of 2.5). */
static inline float tg_clampf(float x, float lo, float hi) {
    union {
        float f;
        uint32_t u;
    } a = {x}, l = {lo}, h = {hi};
    uint32_t mlo = -(uint32_t)(x < lo), mhi = -(uint32_t)(x > hi);
    a.u = (a.u & ~(mlo | mhi)) | (l.u & mlo) | (h.u & mhi);
    return a.f;
}

/* e, or 0 where x is -inf (a masked entry). Bit masks rather than a float select, which
 * would keep the loop scalar (see tg_clampf above). */
static inline float tg_zero_if_neg_inf(float x, float e) {
    union {
        float f;
        uint32_t u;
    } v = {e};
    v.u &= -(uint32_t)(x != -INFINITY);
    return v.f;
}

/* exp(r) = 1 + r P(r), |r| <= ln2 / 2, P of degree 5: a relative minimax fit (largest error
 * 1.7e-8 before rounding), evaluated by Horner's rule; shared with the vector levels' exp (vmath_lanes.h). */
#define TG_EXP_P5 1.3843636261e-3f
#define TG_EXP_P4 8.3741536364e-3f
#define TG_EXP_P3 4.1668001562e-2f
#define TG_EXP_P2 1.6666431725e-1f
#define TG_EXP_P1 4.9999994040e-1f

/* A vectorisable exp for float (Cody-Waite range reduction and a polynomial, ~2 ulp).
 * x is clamped to [-87.3, 88.37] (about FLT_MIN; n <= 127 keeps the largest result finite).
 * n = round(x / ln 2) by adding and subtracting 1.5 * 2^23 (float addition rounds to the
 * nearest integer there; |x / ln 2| < 2^22): roundf() would be a libm call in a build without
 * SSE4.1 and keep every loop that calls this from vectorising. */
static inline float tg_fast_expf(float x) {
    x = tg_clampf(x, -87.3f, 88.37f);
    float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = x - n * 0.693359375f + n * 2.12194440e-4f;
    float p = TG_EXP_P5;
    p = p * r + TG_EXP_P4;
    p = p * r + TG_EXP_P3;
    p = p * r + TG_EXP_P2;
    p = p * r + TG_EXP_P1;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    /* 2^n through the exponent bits, in unsigned arithmetic; a NaN x (p is NaN, and so is the
     * result) takes n = 0, since converting NaN to an integer is undefined */
    n = n == n ? n : 0.0f;
    union {
        uint32_t i;
        float f;
    } u = {.i = (uint32_t)((int32_t)n + 127) << 23};
    return p * u.f;
}

#endif
