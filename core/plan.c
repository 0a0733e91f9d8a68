/* The memory planner.
 *
 * 1. Prune: only nodes reached from kept tensors and side-effect sinks (gradient
 *    accumulation) are executed, in creation order (a topological order).
 * 2. Liveness: each storage block (the buffer of a non-view tensor) lives from the position of
 *    the node that writes it to the last position of any node that reads it or a view of it.
 *    Kept tensors live to the end.
 * 3. In place: an elementwise op may write into the buffer of an input of the same size whose
 *    last reader it is (never into a kept tensor, a view, a parameter or an input leaf); and a
 *    product that a contiguous copy of a permuted view of it alone reads is written straight
 *    into the copy's buffer in the copy's layout (into_copies: attention's head merges).
 * 4. Offsets: blocks are placed in one workspace by a best-fit free list (freed after the node
 *    that last reads them has written its output, so inputs and outputs never overlap unless
 *    in place). The workspace size is the peak.
 * With the planner off, every block gets its own offset: the results are bit-identical (the
 * kernels do not depend on addresses), only memory differs. */
#include <stdlib.h>
#include <string.h>

#include "core/backend-impl.h"
#include "core/graph-impl.h"

typedef struct {
    size_t size, off;
    int64_t def, last;
} block_t;

typedef struct {
    size_t off, size;
} seg_t;

typedef struct {
    seg_t *s;
    int64_t n, cap;
    size_t top;
} freelist_t;

static size_t align_up(size_t x) { return (x + TG_ALIGN - 1) / TG_ALIGN * TG_ALIGN; }

static bool fl_push(freelist_t *f, int64_t at, seg_t seg) {
    if (f->n == f->cap) {
        int64_t cap = f->cap ? 2 * f->cap : 64;
        seg_t *s = realloc(f->s, (size_t)cap * sizeof *s);
        if (!s) return false;
        f->s = s;
        f->cap = cap;
    }
    memmove(f->s + at + 1, f->s + at, (size_t)(f->n - at) * sizeof *f->s);
    f->s[at] = seg;
    f->n++;
    return true;
}

static void fl_remove(freelist_t *f, int64_t at) {
    memmove(f->s + at, f->s + at + 1, (size_t)(f->n - at - 1) * sizeof *f->s);
    f->n--;
}

/* Best fit among free segments; else grow the top (absorbing a free segment that ends there). */
static size_t fl_alloc(freelist_t *f, size_t size) {
    int64_t best = -1;
    for (int64_t i = 0; i < f->n; i++)
        if (f->s[i].size >= size && (best < 0 || f->s[i].size < f->s[best].size)) best = i;
    if (best >= 0) {
        size_t off = f->s[best].off;
        f->s[best].off += size;
        f->s[best].size -= size;
        if (f->s[best].size == 0) fl_remove(f, best);
        return off;
    }
    if (f->n > 0 && f->s[f->n - 1].off + f->s[f->n - 1].size == f->top) {
        size_t off = f->s[f->n - 1].off;
        fl_remove(f, f->n - 1);
        f->top = off + size;
        return off;
    }
    size_t off = f->top;
    f->top += size;
    return off;
}

/* Return a segment, keeping the list sorted and coalesced. */
static bool fl_free(freelist_t *f, size_t off, size_t size) {
    int64_t i = 0;
    while (i < f->n && f->s[i].off < off) i++;
    if (i > 0 && f->s[i - 1].off + f->s[i - 1].size == off) {
        f->s[i - 1].size += size;
        if (i < f->n && f->s[i - 1].off + f->s[i - 1].size == f->s[i].off) {
            f->s[i - 1].size += f->s[i].size;
            fl_remove(f, i);
        }
        return true;
    }
    if (i < f->n && off + size == f->s[i].off) {
        f->s[i].off = off;
        f->s[i].size += size;
        return true;
    }
    return fl_push(f, i, (seg_t){off, size});
}

static bool is_storage(const tg_tensor *t) {
    return !t->base && !(t->flags & (TG_TF_PARAM | TG_TF_ACCUM | TG_TF_TRANSIENT)) &&
           t->op != TG_OP_GRAD_ACC;
}

/* Gradient-accumulation fusion: a parameter gradient produced by a matmul, sum_to or
 * layer_norm_gamma_back that nothing else reads is written by that op straight into the store's
 * gradient buffer (adding, as grad_acc would), so it needs no workspace and no extra pass. */
static void fuse_grad_acc(tg_graph *g, const int64_t *readers) {
    for (int64_t p = 0; p < g->nexec; p++) {
        tg_tensor *a = g->nodes[g->order[p]], *s = a->src[0];
        if (a->op != TG_OP_GRAD_ACC || !s || s->base || (s->flags & (TG_TF_KEEP | TG_TF_ACCUM)) ||
            (s->op != TG_OP_MATMUL && s->op != TG_OP_SUM_TO &&
             s->op != TG_OP_LAYER_NORM_GAMMA_BACK) ||
            readers[s->id] != 1)
            continue;
        s->flags |= TG_TF_ACCUM;
        s->store = a->store;
        s->param = a->param;
        a->flags |= TG_TF_FUSED;
    }
}

/* Layout fusion: a product m that only a permuted view v reads, which only a contiguous copy c
 * reads (attention's heads merged, [B, h, n, dk] -> [B, n, h, dk], and the gradients of their
 * splits), is written by the matmul kernel straight into c's buffer in c's layout — m's strides
 * become c's, permuted back, and m a view of c (flagged TG_TF_INTO; its kernel still runs) —
 * and c runs nothing: one pass over the product saved, and its buffer. The values are the
 * same: the kernel computes each element as before and only the address differs. Undone at
 * the next plan (tg__exec_plan). Needs a backend whose matmul honours output strides. */
static void into_copies(tg_graph *g, const int64_t *readers) {
    for (int64_t p = 0; p < g->nexec; p++) {
        tg_tensor *c = g->nodes[g->order[p]], *v = c->src[0];
        if (c->op != TG_OP_CONT || c->base || !v || v->op != TG_OP_PERMUTE || v->offset != 0 ||
            (v->flags & TG_TF_KEEP) || v->ndim < 2 || v->stride[v->ndim - 1] != 1)
            continue;
        tg_tensor *m = v->src[0];
        if (!m || m->op != TG_OP_MATMUL || v->base != m || m->base || m->dtype != c->dtype ||
            (m->flags & (TG_TF_KEEP | TG_TF_ACCUM | TG_TF_INTO)))
            continue;
        /* nothing else reads m, directly or through a view: its reads are v's source and base
         * and c's source (v, whose root is m), and any other reader of m or v adds to them */
        if (readers[m->id] != 3) continue;
        const int *perm = v->p.permute.perm; /* v's dim i is m's dim perm[i] */
        for (int i = 0; i < v->ndim; i++)
            m->stride[perm[i]] = c->stride[i];
        m->base = c;
        m->offset = 0;
        m->flags |= TG_TF_INTO;
        c->flags |= TG_TF_FUSED;
    }
}

/* Lookup fusion: an embedding lookup e of a parameter table by input ids whose only reader that
 * runs a kernel is a matmul m, reading it as its operand B (through views: a decoder step's
 * cached keys or values gathered for each hypothesis, [R, t, w], split into heads), is read by
 * m's kernel from the table's rows itself — e runs nothing and has no buffer. The gathered copy,
 * written and then read again by the product, was a quarter of a 512-wide model's decoding
 * (docs/log/2026-12-06.md). The values m reads are the same, so are its results. Needs a backend
 * whose matmul kernel can, for that product (reads_lookup); m's reads of the table and the ids
 * count for their liveness (below) and for the runner's hazards (core/hazard.c). */
static tg_status fuse_lookups(tg_graph *g, tg_backend *b) {
    int64_t *kernels = calloc((size_t)(g->n ? g->n : 1), sizeof *kernels);
    if (!kernels) return tg_error_set(TG_ERR_NOMEM, "tg_graph_plan: out of memory");
    /* readers of each root that run a kernel (views run none; a product laid out for its copy,
     * TG_TF_INTO, has a base but runs), and kept views' roots */
    for (int64_t p = 0; p < g->nexec; p++) {
        const tg_tensor *t = g->nodes[g->order[p]];
        if (t->base && !(t->flags & TG_TF_INTO)) {
            if (t->flags & TG_TF_KEEP) kernels[t->base->id] = INT64_MAX / 2;
            continue;
        }
        for (int k = 0; k < t->nsrc; k++)
            if (t->src[k]) kernels[tg__tensor_root(t->src[k])->id]++;
    }
    for (int64_t p = 0; p < g->nexec; p++) {
        tg_tensor *m = g->nodes[g->order[p]];
        if (m->op != TG_OP_MATMUL || (m->base && !(m->flags & TG_TF_INTO)) || !m->src[1]) continue;
        tg_tensor *e = tg__tensor_root(m->src[1]);
        const tg_tensor *tab = e->src[0], *ids = e->nsrc > 1 ? e->src[1] : NULL;
        if (e->op != TG_OP_EMBEDDING || (e->flags & (TG_TF_KEEP | TG_TF_SINK)) ||
            kernels[e->id] != 1 || tg__tensor_root(m->src[0]) == e || !tab || !ids || tab->base ||
            !(tab->flags & TG_TF_PARAM) || ids->base || !(ids->flags & TG_TF_INPUT) ||
            !b->vt->reads_lookup(b, m))
            continue;
        e->flags |= TG_TF_LOOKUP | TG_TF_FUSED | TG_TF_TRANSIENT;
    }
    free(kernels);
    return TG_OK;
}

/* A product laid out for its copy by the previous plan goes back to its own contiguous buffer. */
static void undo_into(tg_tensor *t) {
    if (!(t->flags & TG_TF_INTO)) return;
    t->flags &= ~(uint32_t)TG_TF_INTO;
    t->base = NULL;
    t->offset = 0;
    tg__tensor_contiguous_strides(t->ndim, t->shape, t->stride);
}

/* In-place candidate: an input of t (or of a member of the fused chain t ends, whose reads
 * happen in t's kernel, element by element before t writes) whose buffer t may overwrite. */
static int64_t inplace_block(const tg_tensor *t, const block_t *blocks, const int64_t *last) {
    if (!(tg__op_flags(t->op) & TG_OPF_INPLACE)) return -1;
    for (const tg_tensor *r = t; r; r = r->chain_prev) {
        for (int i = 0; i < r->nsrc; i++) {
            const tg_tensor *s = r->src[i];
            if (!s || tg__chain_has(t, s) || s->base || !is_storage(s) ||
                (s->flags & (TG_TF_KEEP | TG_TF_INPUT)) || s->op == TG_OP_NONE || s->block < 0 ||
                s->dtype != t->dtype || tg_tensor_numel(s) != tg_tensor_numel(t) ||
                last[s->id] != t->pos || blocks[s->block].last != t->pos)
                continue;
            /* no other input may read the same buffer through a different view (nor may another
             * member of t's fused chain: their reads happen in t's kernel, tile by tile) */
            bool shared = false;
            for (const tg_tensor *m = t; m; m = m->chain_prev)
                for (int j = 0; j < m->nsrc; j++)
                    if (m->src[j] && m->src[j] != s &&
                        tg__tensor_root(m->src[j])->block == s->block)
                        shared = true;
            if (!shared) return s->block;
        }
    }
    return -1;
}

tg_status tg__exec_plan(tg_graph *g, tg_backend *b) {
    if (g->status != TG_OK) return tg_error_set(g->status, "%s", g->msg);
    int64_t n = g->n;
    for (int64_t i = 0; i < n; i++) {
        tg_tensor *t = g->nodes[i];
        undo_into(t);
        t->flags &= ~(uint32_t)(TG_TF_NEEDED | TG_TF_ACCUM | TG_TF_FUSED | TG_TF_CHAINED |
                                TG_TF_TRANSIENT | TG_TF_LOOKUP);
        t->chain_prev = NULL;
        if (t->op != TG_OP_GRAD_ACC && !(t->flags & TG_TF_PARAM)) t->store = NULL;
        t->pos = -1;
        t->block = -1;
    }
    for (int64_t i = n - 1; i >= 0; i--) {
        tg_tensor *t = g->nodes[i];
        if (t->flags & (TG_TF_KEEP | TG_TF_SINK)) t->flags |= TG_TF_NEEDED;
        if (!(t->flags & TG_TF_NEEDED)) continue;
        for (int k = 0; k < t->nsrc; k++)
            if (t->src[k]) t->src[k]->flags |= TG_TF_NEEDED;
        if (t->base) t->base->flags |= TG_TF_NEEDED;
    }
    free(g->order);
    g->order = malloc((size_t)(n ? n : 1) * sizeof *g->order);
    block_t *blocks = malloc((size_t)(n ? n : 1) * sizeof *blocks);
    free(g->block_off);
    g->block_off = NULL;
    if (!g->order || !blocks) {
        free(blocks);
        return tg_error_set(TG_ERR_NOMEM, "tg_graph_plan: out of memory for %lld nodes", (long long)n);
    }
    int64_t ne = 0, nb = 0;
    for (int64_t i = 0; i < n; i++)
        if (g->nodes[i]->flags & TG_TF_NEEDED) {
            g->nodes[i]->pos = ne;
            g->order[ne++] = i;
        }
    g->nexec = ne;
    if (g->planner && g->fusion && b && b->vt->chains) {
        tg_status st = tg__plan_fuse_chains(g);
        if (st) {
            free(blocks);
            return st;
        }
    }
    /* liveness of every storage tensor: its last reader (directly or through a view) */
    int64_t *last = malloc((size_t)(n ? n : 1) * sizeof *last);
    int64_t *readers = calloc((size_t)(n ? n : 1), sizeof *readers);
    if (!last || !readers) {
        free(last);
        free(readers);
        free(blocks);
        return tg_error_set(TG_ERR_NOMEM, "tg_graph_plan: out of memory");
    }
    for (int64_t p = 0; p < ne; p++) {
        tg_tensor *t = g->nodes[g->order[p]];
        for (int k = 0; k < t->nsrc; k++)
            if (t->src[k]) readers[tg__tensor_root(t->src[k])->id]++;
        if (t->base) readers[t->base->id]++;
    }
    if (b && b->vt->accumulates) fuse_grad_acc(g, readers);
    if (g->planner && b && b->vt->strided_out) into_copies(g, readers);
    free(readers);
    if (g->planner && g->fusion && b && b->vt->reads_lookup) {
        tg_status st = fuse_lookups(g, b);
        if (st) {
            free(last);
            free(blocks);
            return st;
        }
    }
    /* a fused chain's members read their inputs when the tail runs: at[p] is the position of
     * the node that runs node p's work (its chain's tail, which stands right after it) */
    int64_t *at = malloc((size_t)(ne ? ne : 1) * sizeof *at);
    if (!at) {
        free(last);
        free(blocks);
        return tg_error_set(TG_ERR_NOMEM, "tg_graph_plan: out of memory");
    }
    for (int64_t p = ne - 1; p >= 0; p--)
        at[p] = (g->nodes[g->order[p]]->flags & TG_TF_CHAINED) && p + 1 < ne ? at[p + 1] : p;
    for (int64_t p = 0; p < ne; p++) {
        tg_tensor *t = g->nodes[g->order[p]];
        last[t->id] = (t->flags & TG_TF_KEEP) ? ne : p;
        for (int k = 0; k < t->nsrc; k++) {
            if (!t->src[k]) continue;
            const tg_tensor *r = tg__tensor_root(t->src[k]);
            if (last[r->id] < at[p]) last[r->id] = at[p];
            if (r->flags & TG_TF_LOOKUP) /* the product reads the lookup's table and ids */
                for (int q = 0; q < 2; q++)
                    if (last[tg__tensor_root(r->src[q])->id] < at[p])
                        last[tg__tensor_root(r->src[q])->id] = at[p];
        }
        if (t->base && (t->flags & TG_TF_KEEP)) last[t->base->id] = ne;
    }
    free(at);
    /* blocks, in execution order; in-place ops join their input's block */
    size_t total = 0;
    for (int64_t p = 0; p < ne; p++) {
        tg_tensor *t = g->nodes[g->order[p]];
        if (t->flags & TG_TF_TRANSIENT) total += align_up(tg__tensor_nbytes(t)); /* as unfused */
        if (t->flags & TG_TF_INTO) { /* the copy's buffer, live from this write on */
            tg_tensor *c = t->base;
            size_t sz = align_up(tg__tensor_nbytes(c));
            total += sz + align_up(tg__tensor_nbytes(t)); /* the product's own, as unfused */
            c->block = nb;
            blocks[nb++] = (block_t){sz, 0, p, last[c->id]};
            continue;
        }
        if (!is_storage(t) || t->block >= 0) continue;
        size_t sz = align_up(tg__tensor_nbytes(t));
        total += sz;
        int64_t ib = g->planner ? inplace_block(t, blocks, last) : -1;
        if (ib >= 0) {
            t->block = ib;
            if (blocks[ib].last < last[t->id]) blocks[ib].last = last[t->id];
        } else {
            t->block = nb;
            blocks[nb++] = (block_t){sz, 0, p, last[t->id]};
        }
    }
    free(last);
    /* offsets */
    freelist_t fl = {0};
    if (!g->planner) {
        for (int64_t b = 0; b < nb; b++) {
            blocks[b].off = fl.top;
            fl.top += blocks[b].size;
        }
    } else {
        /* blocks are numbered in definition order; sweep positions */
        int64_t *by_last = malloc((size_t)(nb ? nb : 1) * sizeof *by_last);
        int64_t *cnt = calloc((size_t)ne + 2, sizeof *cnt);
        if (!by_last || !cnt) {
            free(by_last);
            free(cnt);
            free(blocks);
            return tg_error_set(TG_ERR_NOMEM, "tg_graph_plan: out of memory");
        }
        /* counting sort of blocks by last use */
        for (int64_t b = 0; b < nb; b++) cnt[blocks[b].last + 1]++;
        for (int64_t i = 1; i <= ne + 1; i++) cnt[i] += cnt[i - 1];
        for (int64_t b = 0; b < nb; b++) by_last[cnt[blocks[b].last]++] = b;
        int64_t nextdef = 0, nextfree = 0;
        bool ok = true;
        for (int64_t p = 0; p < ne && ok; p++) {
            while (nextdef < nb && blocks[nextdef].def == p) {
                blocks[nextdef].off = fl_alloc(&fl, blocks[nextdef].size);
                nextdef++;
            }
            while (nextfree < nb && blocks[by_last[nextfree]].last <= p) {
                block_t *bl = &blocks[by_last[nextfree++]];
                ok = ok && fl_free(&fl, bl->off, bl->size);
            }
        }
        free(by_last);
        free(cnt);
        free(fl.s);
        if (!ok) {
            free(blocks);
            return tg_error_set(TG_ERR_NOMEM, "tg_graph_plan: out of memory");
        }
    }
    g->block_off = malloc((size_t)(nb ? nb : 1) * sizeof *g->block_off);
    if (!g->block_off) {
        free(blocks);
        return tg_error_set(TG_ERR_NOMEM, "tg_graph_plan: out of memory");
    }
    for (int64_t b = 0; b < nb; b++) g->block_off[b] = blocks[b].off;
    free(blocks);
    g->nblocks = nb;
    g->peak = fl.top;
    g->total = total;
    g->planned = true;
    g->ran = false;
    return TG_OK;
}

tg_status tg_graph_plan(tg_graph *g, tg_backend *b) {
    if (!g) return tg_error_set(TG_ERR_INVALID, "tg_graph_plan: graph is NULL");
    g->plan_backend = b;
    return tg__exec_plan(g, b);
}
