/* The packed path of the CPU GEMM (gemm.h): BLIS's five loops around one micro-kernel per
 * instruction set, on one thread's block of C.
 *
 *   for each block of NC columns of C
 *     for each block of KC values of k: op(B)[KC × NC] in 16-column panels, from its supplier
 *       for each block of <= MC rows: op(A)[MC × KC] packed into 6-row panels (or read in place)
 *         for each 16-column panel of B (16 KiB: stays in L1 while it meets every A panel)
 *           for each 6-row panel of A: the micro-kernel over KC values of k
 *
 * Packing makes both operands contiguous streams in the order the kernel reads them, whatever
 * their layout or transposition — row by row where a panel's values lie along the stored rows
 * (pack_rows), else with 8×8 AVX transposes (the small path's packer) — so the kernel never
 * meets a stride or an edge: partial panels are zero-padded and their tiles go through a local
 * tile (edge_tile).
 *
 * op(B)'s panels come from a supplier (struct panels): packed by the block into its thread's
 * buffer; shared by the blocks of one product, each piece packed by whichever block reaches it
 * first; or kept packed across products. The layout is the same, so the values and the bits
 * are too.
 *
 * The micro-kernels are inline assembly, from one instruction template (PK_KERNEL_A, PK4_KERNEL):
 * at the AVX2 level a 6×16 tile in 12 ymm accumulators (per k: 2 aligned loads of B, 6
 * broadcasts of A, 12 FMAs); at the AVX-512 level 6×32 (12 zmm) and 6×64 (24 zmm) tiles over
 * two and four consecutive panels, which may also read op(A) in place — row-major (X·Wᵀ, dY·W)
 * or transposed (a weight gradient's Xᵀ, rows at most 1 KiB apart) — instead of from a packed
 * panel. Written in assembly because compiled from intrinsics the B loads were folded into the
 * FMAs as memory operands, over the load ports' rate. Every form gives each element the same
 * FMAs in the same order, so the same bits; and each element of C is summed over k in the same
 * order (k blocks in turn) whatever block of C a thread is given, so the results do not depend
 * on the cut or the thread count.
 */
#include "backends/cpu/cpu-impl.h"
#include "backends/cpu/gemm.h"
#include "backends/cpu/isa.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

enum {
    MR = 6,   /* rows of a register tile */
    NR = 16,  /* columns of a panel of op(B) */
    KC = 256, /* k per block: a B panel is KC × 16 floats = 16 KiB, half of L1d */
    MC = 144, /* most rows per A block: 144 × 256 floats = 144 KiB, in L2 */
    NC = 512, /* columns per B block: 512 KiB packed, in L2/L3 */
    /* the A buffer's slack: the transposing packer stores 8 floats for each 6-float group */
    A_FLOATS = MC * KC + 16,
    B_FLOATS = KC * NC,
};

_Static_assert(MR == TG_CPU_GEMM_PACKED_MR, "gemm.h's tile rows are the kernel's");

/* ------------------------------------------------------------ per-thread buffers ---- */

typedef struct pack_bufs {
    float *a, *b;
} pack_bufs;

static pthread_key_t bufs_key;
static pthread_once_t bufs_once = PTHREAD_ONCE_INIT;
static bool bufs_key_ok;

static void bufs_free(void *p) {
    pack_bufs *b = p;
    free(b->a);
    free(b->b);
    free(b);
}

static void bufs_key_make(void) {
    bufs_key_ok = pthread_key_create(&bufs_key, bufs_free) == 0;
}

/* This thread's buffers (freed when it exits), NULL when they cannot be had. Pages of the B
 * buffer that no product packs into are never touched, so not resident: NC = 512 rather than
 * BLIS's ~4000 keeps them few (op(A) is then packed once per 512 columns, at no measurable
 * cost). */
static pack_bufs *bufs_get(void) {
    pthread_once(&bufs_once, bufs_key_make);
    if (!bufs_key_ok) return NULL;
    pack_bufs *b = pthread_getspecific(bufs_key);
    if (b) return b;
    b = calloc(1, sizeof *b);
    if (!b) return NULL;
    b->a = aligned_alloc(64, A_FLOATS * sizeof(float));
    b->b = aligned_alloc(64, B_FLOATS * sizeof(float));
    if (!b->a || !b->b || pthread_setspecific(bufs_key, b) != 0) {
        bufs_free(b);
        return NULL;
    }
    return b;
}

/* ------------------------------------------------------------------ micro-kernels ---- */

/* Every kernel: C[i][j] (row stride ldc) = (add ? C[i][j] : 0) + sum_p A[i][p] · B[p][j] for
 * i < 6, j < 16·np, p < kc, B in np consecutive panels at b (16·kc floats each), A by its form
 * (gemm.h: tg_cpu_gemm_packed_kernel) — a packed panel (lda unused), rows in place, or
 * transposed rows in place. */
typedef void (*kernel_fn)(int64_t kc, const float *a, int64_t lda, const float *b, float *c,
                          int64_t ldc, bool add);
enum { A_PACKED, A_ROWS, A_COLS };

#if TG_CPU_X86
/* One instruction template, PK_TILE(V, A), for every kernel: V the tile's width and registers —
 *   Y2: 6×16, each row 2 ymm vectors of one panel (AVX2);
 *   Z2: 6×32, each row one zmm vector of each of 2 panels (AVX-512F);
 *   Z4: 6×64, one zmm vector of each of 4 panels (b0, b0 + ps, b2 = b0 + 2·ps, b2 + ps);
 * A the form of op(A) — PACKED (a 6-value column per value of k, the panel fetched 16 values of
 * k ahead), ROWS (six rows read in place: sequential streams, left to the hardware prefetcher)
 * or COLS (transposed: six consecutive values of one row of A per value of k, lda apart).
 * Per value of k: V's B loads (aligned), then per row of the tile one broadcast of A and one
 * FMA per vector; 12 accumulators (Y2, Z2: registers 0-11, B in 12-13, A in 14-15) or 24 (Z4:
 * 0-23, B in 24-27, A in 28-29), the rows alternating the two broadcast registers. Z4 does 24
 * FMAs per 6 broadcasts where Z2 does 12: the broadcasts beside the FMAs hold Z2 further below
 * the FMA peak on a core with two 512-bit FMA units. Before the k loop the C tile's rows are
 * fetched; after it, C is stored or added to. */
/* clang-format off */
/* row i of a step for two vectors (B in R12, R13) or four (zmm24-27): broadcast, then FMAs */
#define PK_ROW2(R, ADDR, s, r0, r1)                                                                \
    "vbroadcastss " ADDR ",%%" R s "\n vfmadd231ps %%" R "12,%%" R s ",%%" R r0                    \
    "\n vfmadd231ps %%" R "13,%%" R s ",%%" R r1 "\n"
#define PK_ROW4(ADDR, s, r0, r1, r2, r3)                                                           \
    "vbroadcastss " ADDR ",%%zmm" s "\n"                                                           \
    "vfmadd231ps %%zmm24,%%zmm" s ",%%zmm" r0 "\n vfmadd231ps %%zmm25,%%zmm" s ",%%zmm" r1 "\n"    \
    "vfmadd231ps %%zmm26,%%zmm" s ",%%zmm" r2 "\n vfmadd231ps %%zmm27,%%zmm" s ",%%zmm" r3 "\n"
/* one value u of k: B's row u times the 6 values of op(A)'s column u (row i's at A_AT(u, i)) */
#define PK_STEP2(R, B1, A_AT, u)                                                                   \
    "vmovaps " #u "*64(%[b0]),%%" R "12\n vmovaps " B1(u) ",%%" R "13\n"                          \
    PK_ROW2(R, A_AT(u, 0), "14", "0", "1") PK_ROW2(R, A_AT(u, 1), "15", "2", "3")                  \
    PK_ROW2(R, A_AT(u, 2), "14", "4", "5") PK_ROW2(R, A_AT(u, 3), "15", "6", "7")                  \
    PK_ROW2(R, A_AT(u, 4), "14", "8", "9") PK_ROW2(R, A_AT(u, 5), "15", "10", "11")
#define PK_STEP_Y2(A_AT, u) PK_STEP2("ymm", PK_B1_Y2, A_AT, u)
#define PK_STEP_Z2(A_AT, u) PK_STEP2("zmm", PK_B1_Z2, A_AT, u)
#define PK_B1_Y2(u) #u "*64+32(%[b0])"
#define PK_B1_Z2(u) #u "*64(%[b1])"
#define PK_STEP_Z4(A_AT, u)                                                                        \
    "vmovaps " #u "*64(%[b0]),%%zmm24\n vmovaps " #u "*64(%[b0],%[ps],1),%%zmm25\n"                \
    "vmovaps " #u "*64(%[b2]),%%zmm26\n vmovaps " #u "*64(%[b2],%[ps],1),%%zmm27\n"                \
    PK_ROW4(A_AT(u, 0), "28", "0", "1", "2", "3") PK_ROW4(A_AT(u, 1), "29", "4", "5", "6", "7")    \
    PK_ROW4(A_AT(u, 2), "28", "8", "9", "10", "11") PK_ROW4(A_AT(u, 3), "29", "12", "13", "14", "15") \
    PK_ROW4(A_AT(u, 4), "28", "16", "17", "18", "19") PK_ROW4(A_AT(u, 5), "29", "20", "21", "22", "23")
/* the accumulators zeroed; the C tile's rows fetched (each maybe over one more line); C's rows
 * added to and stored, or stored */
#define PK_Z(ZOP, R, r) ZOP " %%" R r ",%%" R r ",%%" R r "\n"
#define PK_Z2(ZOP, R, x, y) PK_Z(ZOP, R, x) PK_Z(ZOP, R, y)
#define PK_Z4(x, y, z, w) PK_Z("vpxord", "zmm", x) PK_Z("vpxord", "zmm", y) PK_Z("vpxord", "zmm", z) \
    PK_Z("vpxord", "zmm", w)
#define PK_ROWS2(OP, A, B)                                                                         \
    OP(A, B, "0", "1") OP(A, B, "2", "3") OP(A, B, "4", "5") OP(A, B, "6", "7")                    \
    OP(A, B, "8", "9") OP(A, B, "10", "11")
#define PK_ROWS4(OP)                                                                               \
    OP("0", "1", "2", "3") OP("4", "5", "6", "7") OP("8", "9", "10", "11")                         \
    OP("12", "13", "14", "15") OP("16", "17", "18", "19") OP("20", "21", "22", "23")
#define PK_ZEROS_Y2 PK_ROWS2(PK_Z2, "vxorps", "ymm")
#define PK_ZEROS_Z2 PK_ROWS2(PK_Z2, "vpxord", "zmm")
#define PK_ZEROS_Z4 PK_ROWS4(PK_Z4)
#define PK_PF(LAST) "prefetcht0 (%[t])\n prefetcht0 " LAST "(%[t])\n add %[ldc],%[t]\n"
#define PK_PF4                                                                                     \
    "prefetcht0 (%[t])\n prefetcht0 64(%[t])\n prefetcht0 128(%[t])\n prefetcht0 192(%[t])\n"     \
    "prefetcht0 255(%[t])\n add %[ldc],%[t]\n"
#define PK_PFS_Y2 PK_PF("63") PK_PF("63") PK_PF("63") PK_PF("63") PK_PF("63") PK_PF("63")
#define PK_PFS_Z2 PK_PF("127") PK_PF("127") PK_PF("127") PK_PF("127") PK_PF("127") PK_PF("127")
#define PK_PFS_Z4 PK_PF4 PK_PF4 PK_PF4 PK_PF4 PK_PF4 PK_PF4
#define PK_ADDROW2(R, W, x, y)                                                                     \
    "vaddps (%[c]),%%" R x ",%%" R x "\n vaddps " W "(%[c]),%%" R y ",%%" R y "\n" PK_STROW2(R, W, x, y)
#define PK_STROW2(R, W, x, y)                                                                      \
    "vmovups %%" R x ",(%[c])\n vmovups %%" R y "," W "(%[c])\n add %[ldc],%[c]\n"
#define PK_ADDROW4(a, b, c, d)                                                                     \
    "vaddps (%[c]),%%zmm" a ",%%zmm" a "\n vaddps 64(%[c]),%%zmm" b ",%%zmm" b "\n"                 \
    "vaddps 128(%[c]),%%zmm" c ",%%zmm" c "\n vaddps 192(%[c]),%%zmm" d ",%%zmm" d "\n"             \
    PK_STROW4(a, b, c, d)
#define PK_STROW4(a, b, c, d)                                                                      \
    "vmovups %%zmm" a ",(%[c])\n vmovups %%zmm" b ",64(%[c])\n"                                    \
    "vmovups %%zmm" c ",128(%[c])\n vmovups %%zmm" d ",192(%[c])\n add %[ldc],%[c]\n"
#define PK_ADDROWS_Y2 PK_ROWS2(PK_ADDROW2, "ymm", "32")
#define PK_STROWS_Y2 PK_ROWS2(PK_STROW2, "ymm", "32")
#define PK_ADDROWS_Z2 PK_ROWS2(PK_ADDROW2, "zmm", "64")
#define PK_STROWS_Z2 PK_ROWS2(PK_STROW2, "zmm", "64")
#define PK_ADDROWS_Z4 PK_ROWS4(PK_ADDROW4)
#define PK_STROWS_Z4 PK_ROWS4(PK_STROW4)
/* the B pointers advanced by n bytes; what follows the stores */
#define PK_BADV_Y2(n) "add $" n ",%[b0]\n"
#define PK_BADV_Z2(n) "add $" n ",%[b0]\n add $" n ",%[b1]\n"
#define PK_BADV_Z4(n) "add $" n ",%[b0]\n add $" n ",%[b2]\n"
#define PK_END_Y2 ""
#define PK_END_Z2 "vzeroupper\n"
#define PK_END_Z4 "vzeroupper\n"
/* zmm16-29 are named in Z4's clobbers only where the compiler targets AVX-512F */
#define PK_ATTR_Y2
#define PK_ATTR_Z2
#define PK_ATTR_Z4 TG_TARGET_AVX512
/* op(A)'s forms. In place, six addresses from two bases: a0 + n·lda for n < 3 and
 * a3 + (n - 3)·lda for the rest (a3 = a0 + 3·lda, lda in bytes); ROWS: n is the tile's row i,
 * value u of k 4u bytes in; COLS: n is the value u of k, row i 4i bytes in. */
#define PK_IN0 "(%[a0])"
#define PK_IN1 "(%[a0],%[lda],1)"
#define PK_IN2 "(%[a0],%[lda],2)"
#define PK_IN3 "(%[a3])"
#define PK_IN4 "(%[a3],%[lda],1)"
#define PK_IN5 "(%[a3],%[lda],2)"
#define PK_AT_PACKED(u, i) #u "*24+" #i "*4(%[a])"
#define PK_AT_ROWS(u, i) #u "*4" PK_IN##i
#define PK_AT_COLS(u, i) #i "*4" PK_IN##u
#define PK_APF_PACKED "prefetcht0 384(%[a])\n"
#define PK_APF_ROWS ""
#define PK_APF_COLS ""
#define PK_AADV_PACKED(n) "add $" #n "*24,%[a]\n"
#define PK_AADV_ROWS(n) "add $" #n "*4,%[a0]\n add $" #n "*4,%[a3]\n"
#define PK_AADV_COLS(n) PK_AADV_COLS_##n
#define PK_AADV_COLS_4 "lea (%[a0],%[lda],4),%[a0]\n lea (%[a3],%[lda],4),%[a3]\n"
#define PK_AADV_COLS_1 "add %[lda],%[a0]\n add %[lda],%[a3]\n"
/* The template: 4 values of k per pass, then the rest one at a time. The loop starts on a
 * 64-byte line (.p2align 6), so that its speed does not depend on where the linker puts it. */
#define PK_TILE(V, A)                                                                              \
    PK_ZEROS_##V "mov %[c],%[t]\n" PK_PFS_##V "test %[k4],%[k4]\n jz 2f\n"                         \
    ".p2align 6\n1:\n" PK_APF_##A PK_STEP_##V(PK_AT_##A, 0) PK_STEP_##V(PK_AT_##A, 1)              \
    PK_STEP_##V(PK_AT_##A, 2) PK_STEP_##V(PK_AT_##A, 3)                                            \
    PK_AADV_##A(4) PK_BADV_##V("256") "dec %[k4]\n jnz 1b\n"                                       \
    "2:\n test %[k1],%[k1]\n jz 4f\n"                                                              \
    "3:\n" PK_STEP_##V(PK_AT_##A, 0) PK_AADV_##A(1) PK_BADV_##V("64") "dec %[k1]\n jnz 3b\n"       \
    "4:\n test %[acc],%[acc]\n jz 6f\n" PK_ADDROWS_##V "jmp 7f\n"                                  \
    "6:\n" PK_STROWS_##V "7:\n" PK_END_##V
/* the operands: op(A)'s pointers and lda (bytes), the B pointers */
#define PK_AOUT_PACKED [a] "+r"(a)
#define PK_AOUT_ROWS [a0] "+r"(a), [a3] "+r"(a3)
#define PK_AOUT_COLS PK_AOUT_ROWS
#define PK_AIN_PACKED
#define PK_AIN_ROWS , [lda] "r"(ldab)
#define PK_AIN_COLS PK_AIN_ROWS
#define PK_BOUT_Y2 [b0] "+r"(b)
#define PK_BOUT_Z2 [b0] "+r"(b), [b1] "+r"(b1)
#define PK_BOUT_Z4 [b0] "+r"(b), [b2] "+r"(b2)
#define PK_BIN_Y2
#define PK_BIN_Z2
#define PK_BIN_Z4 , [ps] "r"(ps)
#define PK_CLOBBERS_Y2                                                                             \
    "memory", "cc", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", \
        "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15"
#define PK_CLOBBERS_Z2 PK_CLOBBERS_Y2
#define PK_CLOBBERS_Z4                                                                             \
    PK_CLOBBERS_Y2, "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23", "xmm24", \
        "xmm25", "xmm26", "xmm27", "xmm28", "xmm29"
#define PK_KERNEL(NAME, V, A)                                                                      \
    PK_ATTR_##V static void NAME(int64_t kc, const float *a, int64_t lda, const float *b, float *c,           \
                     int64_t ldc, bool add) {                                                      \
        long k4 = (long)(kc >> 2), k1 = (long)(kc & 3), ldcb = (long)ldc * 4, acc = add, t;        \
        long ldab = (long)lda * 4, ps = (long)(NR * kc * 4);                                       \
        const float *a3 = a + 3 * lda, *b1 = b + NR * kc, *b2 = b + 2 * NR * kc;                   \
        (void)ldab, (void)ps, (void)a3, (void)b1, (void)b2;                                        \
        __asm__ volatile(PK_TILE(V, A)                                                             \
                         : PK_AOUT_##A, PK_BOUT_##V, [k4] "+r"(k4), [k1] "+r"(k1), [c] "+r"(c),    \
                           [t] "=&r"(t)                                                            \
                         : [ldc] "r"(ldcb) PK_AIN_##A PK_BIN_##V, [acc] "r"(acc)                   \
                         : PK_CLOBBERS_##V);                                                       \
    }
/* clang-format on */
PK_KERNEL(kernel1, Y2, PACKED)
PK_KERNEL(kernel2, Z2, PACKED)
PK_KERNEL(kernel2_rowa, Z2, ROWS)
PK_KERNEL(kernel2_cola, Z2, COLS)
PK_KERNEL(kernel4, Z4, PACKED)
PK_KERNEL(kernel4_rowa, Z4, ROWS)
PK_KERNEL(kernel4_cola, Z4, COLS)

/* The 6×16 kernel is AVX2 + FMA: the packed path is there from that level up (isa.h) */
bool tg_cpu_gemm_packed_available(void) {
    return tg_cpu_isa() >= TG_CPU_ISA_AVX2;
}

/* Whether the blocks use the 512-bit kernels (the AVX-512 level, isa.h) */
static bool wide(void) {
    return tg_cpu_isa() >= TG_CPU_ISA_AVX512;
}
#else
/* Off x86-64 there is no packed path (tg_cpu_gemm_packed_available): a scalar stand-in of the
 * kernels keeps the file whole. */
static void kernel_ref(int np, int form, int64_t kc, const float *a, int64_t lda, const float *b,
                       float *c, int64_t ldc, bool add) {
    const int64_t rs = form == A_PACKED ? 1 : form == A_ROWS ? lda : 1;
    const int64_t cs = form == A_PACKED ? MR : form == A_ROWS ? 1 : lda;
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < np * NR; j++) {
            float s = 0.0f;
            for (int64_t p = 0; p < kc; p++)
                s += a[i * rs + p * cs] * b[j / NR * NR * kc + p * NR + j % NR];
            c[i * ldc + j] = add ? c[i * ldc + j] + s : s;
        }
}
#define PK_KERNEL(NAME, NP, FORM)                                                                  \
    static void NAME(int64_t kc, const float *a, int64_t lda, const float *b, float *c,            \
                     int64_t ldc, bool add) {                                                      \
        kernel_ref(NP, FORM, kc, a, lda, b, c, ldc, add);                                          \
    }
PK_KERNEL(kernel1, 1, A_PACKED)
PK_KERNEL(kernel2, 2, A_PACKED)
PK_KERNEL(kernel2_rowa, 2, A_ROWS)
PK_KERNEL(kernel2_cola, 2, A_COLS)
PK_KERNEL(kernel4, 4, A_PACKED)
PK_KERNEL(kernel4_rowa, 4, A_ROWS)
PK_KERNEL(kernel4_cola, 4, A_COLS)

bool tg_cpu_gemm_packed_available(void) {
    return false;
}

static bool wide(void) {
    return false;
}
#endif
#undef PK_KERNEL

/* The kernels by panels (1, 2 or 4: index np / 2) and op(A)'s form (1 panel: packed only) */
static const kernel_fn kernels[3][3] = {
    {kernel1, NULL, NULL},
    {kernel2, kernel2_rowa, kernel2_cola},
    {kernel4, kernel4_rowa, kernel4_cola},
};

bool tg_cpu_gemm_packed_is_wide(void) {
    return wide();
}

void tg_cpu_gemm_packed_kernel(int np, int64_t kc, const float *a, int64_t lda, bool cola,
                               const float *b, float *c, int64_t ldc, bool add) {
    kernels[np / 2][lda == 0 ? A_PACKED : cola ? A_COLS : A_ROWS](kc, a, lda, b, c, ldc, add);
}

/* --------------------------------------------------------------------- packing ---- */

/* A tile of C that is not whole (the last rows or columns of a block): the kernel of its width
 * (np panels: 1, 2 or 4) on a local tile holding what is there, and the part that exists copied
 * back. The packed A panel is zero-padded past mr. */
static void edge_tile(int64_t kc, const float *ap, const float *bp, int np, float *c, int64_t ldc,
                      int64_t mr, int64_t nr, bool add) {
    float t[MR * 4 * NR];
    const int64_t w = np * NR;
    for (int64_t i = 0; i < MR; i++)
        for (int64_t j = 0; j < w; j++)
            t[i * w + j] = add && i < mr && j < nr ? c[i * ldc + j] : 0.0f;
    kernels[np / 2][A_PACKED](kc, ap, 0, bp, t, w, add);
    for (int64_t i = 0; i < mr; i++)
        memcpy(c + i * ldc, t + i * w, (size_t)nr * sizeof *t);
}

/* kc rows of a row-major matrix (row p at src + p·ld), columns [0, n), into panels w wide
 * (6 or 16), the last one zero-padded: buf[q·w·kc + p·w + j] = src[p·ld + q·w + j].
 *
 * A group of panels at a time (4 of op(B)'s, 8 of op(A)'s: 256 or 192 bytes of each source
 * row, every line read once, whole), row by row within the group: row by row over all the
 * panels at once would write up to 32 streams into one set of L1, and a panel at a time would
 * read kc rows ld apart, which with ld a multiple of 4 KiB share one set of L1 and evict each
 * other. The source rows are fetched PF_ROWS ahead: a weight gradient's operand comes cold
 * from memory in rows ld apart, separate short streams the hardware prefetcher picks up late.
 * Inlined with w constant, so that each copy is a fixed-size move. */
enum { PF_ROWS = 8 };
static inline __attribute__((always_inline)) void
pack_rows(const float *src, int64_t ld, int64_t kc, int64_t n, const int w, float *buf) {
    const int64_t full = n / w, rem = n % w, panel = w * kc;
    const int64_t group = w == 6 ? 8 : 4;
    for (int64_t q0 = 0; q0 < full; q0 += group) {
        const int64_t q1 = tg_cpu_gemm_imin(q0 + group, full);
        for (int64_t p = 0; p < kc; p++) {
            const float *s = src + p * ld;
            if (p + PF_ROWS < kc)
                for (int64_t x = q0 * w; x < q1 * w; x += 16)
                    __builtin_prefetch(s + PF_ROWS * ld + x);
            for (int64_t q = q0; q < q1; q++)
                memcpy(buf + q * panel + p * w, s + q * w, (size_t)w * sizeof *s);
        }
    }
    for (int64_t p = 0; rem && p < kc; p++)
        for (int j = 0; j < w; j++)
            buf[full * panel + p * w + j] = j < rem ? src[p * ld + full * w + j] : 0.0f;
}

/* n columns of an operand block, kc values of k each, into panels w wide (16 for op(B), 6 for
 * op(A)) at buf, one after another: row by row (pack_rows) when a panel's values lie along the
 * stored rows (`along`: x's row p holds value p of every column), else panel by panel through
 * the transposing packer (x's row q holds column q's kc values). */
static inline __attribute__((always_inline)) void
pack_block(const float *x, int64_t ld, bool along, int64_t kc, int64_t n, const int w, float *buf) {
    if (along) {
        pack_rows(x, ld, kc, n, w, buf);
        return;
    }
    for (int64_t q = 0; q < n; q += w)
        tg__cpu_gemm_pack_transposed(x + q * ld, ld, kc, (int)tg_cpu_gemm_imin(w, n - q), w,
                                     buf + q * kc);
}

/* ------------------------------------------------------ op(B)'s panel suppliers ---- */

/* op(B) of one product (tb, b, ldb, n columns, k rows) in the loop nest's layout: column
 * block jc (NC wide, the last narrower) at jc·k, its k block pc at pc·w (w: its width rounded
 * up to whole panels), in pieces of CHUNK columns. supply() gives where each piece of block
 * (jc, pc) lies packed, packing what it must into priv (this thread's B buffer, the same
 * layout). Three suppliers:
 *
 *  - own: a block's op(B) packed by the block into priv, every piece (an object on the block's
 *    stack, sb NULL in block_run's callers);
 *  - shared: one buffer for the blocks of a product cut by rows, which all need all of op(B).
 *    Each piece has a state word: a block claims and packs every piece it finds unclaimed, so
 *    that blocks arriving together pack a share each, then waits for the pieces others claimed
 *    — up to SHARED_WAIT_NS, a few times a piece's packing, after which it packs the piece into
 *    priv: a block whose partner was preempted mid-piece does not wait for another process's
 *    time slice;
 *  - kept: every piece packed when the operand was kept (states all PACKED).
 *
 * The packed values are the same whoever packs them, so results do not depend on the
 * supplier. */
enum { CHUNK = 4 * NR, SHARED_WAIT_NS = 20 * 1000 };
_Static_assert(CHUNK == TG_CPU_GEMM_PANELS_ALIGN,
               "a panels object's pieces are gemm.h's alignment");
enum { UNPACKED = 0, PACKING = 1, PACKED = 2 };

typedef struct panels panels;
struct panels {
    tg_cpu_shared base;
    void (*supply)(panels *s, int64_t jc, int64_t pc, int64_t kc, int64_t nc, float *priv,
                   const float *at[]);
    const float *b; /* the product's op(B) */
    int64_t ldb, n, k;
    bool tb;
    panels *next; /* the pool's free list */
    float *buf;
    size_t cap; /* floats */
    _Atomic int *state;
    size_t cap_state;
};

static int64_t round_up(int64_t x, int64_t to) {
    return (x + to - 1) / to * to;
}

/* Columns [q·CHUNK, ...) of op(B) block (jc, pc), kc × nc, into dst (the block's layout) */
static void pack_chunk(const panels *s, int64_t jc, int64_t pc, int64_t kc, int64_t nc, int64_t q,
                       float *dst) {
    const int64_t j0 = jc + q * CHUNK, cols = tg_cpu_gemm_imin(CHUNK, nc - q * CHUNK);
    const float *src = s->tb ? s->b + j0 * s->ldb + pc : s->b + pc * s->ldb + j0;
    pack_block(src, s->ldb, !s->tb, kc, cols, NR, dst + q * CHUNK * kc);
}

/* The state words and the packed block (jc, pc) of a shared or kept supplier */
static _Atomic int *states_of(const panels *s, int64_t jc, int64_t pc) {
    return s->state + ((jc / NC) * ((s->k + KC - 1) / KC) + pc / KC) * (NC / CHUNK);
}
static float *block_of(const panels *s, int64_t jc, int64_t pc, int64_t nc) {
    return s->buf + jc * s->k + pc * round_up(nc, NR);
}

static void own_supply(panels *s, int64_t jc, int64_t pc, int64_t kc, int64_t nc, float *priv,
                       const float *at[]) {
    pack_block(s->tb ? s->b + jc * s->ldb + pc : s->b + pc * s->ldb + jc, s->ldb, !s->tb, kc, nc,
               NR, priv);
    for (int64_t q = 0; q < (nc + CHUNK - 1) / CHUNK; q++)
        at[q] = priv + q * CHUNK * kc;
}

static void kept_supply(panels *s, int64_t jc, int64_t pc, int64_t kc, int64_t nc, float *priv,
                        const float *at[]) {
    (void)priv;
    const float *blk = block_of(s, jc, pc, nc);
    for (int64_t q = 0; q < (nc + CHUNK - 1) / CHUNK; q++)
        at[q] = blk + q * CHUNK * kc;
}

static inline void relax(void) {
#if TG_CPU_X86
    __builtin_ia32_pause();
#endif
}

static void shared_supply(panels *s, int64_t jc, int64_t pc, int64_t kc, int64_t nc, float *priv,
                          const float *at[]) {
    const int64_t nq = (nc + CHUNK - 1) / CHUNK;
    _Atomic int *st = states_of(s, jc, pc);
    float *blk = block_of(s, jc, pc, nc);
    for (int64_t q = 0; q < nq; q++) {
        int unpacked = UNPACKED;
        if (atomic_load_explicit(&st[q], memory_order_relaxed) == UNPACKED &&
            atomic_compare_exchange_strong_explicit(&st[q], &unpacked, PACKING,
                                                    memory_order_relaxed, memory_order_relaxed)) {
            pack_chunk(s, jc, pc, kc, nc, q, blk);
            atomic_store_explicit(&st[q], PACKED, memory_order_release);
        }
    }
    for (int64_t q = 0; q < nq; q++) {
        at[q] = blk + q * CHUNK * kc;
        if (atomic_load_explicit(&st[q], memory_order_acquire) == PACKED) continue;
        const int64_t start = tg_cpu_now_ns();
        bool ready = false;
        for (int i = 1; !ready; i++) {
            relax();
            ready = atomic_load_explicit(&st[q], memory_order_acquire) == PACKED;
            if (!ready && (i & 63) == 0 && tg_cpu_now_ns() - start > SHARED_WAIT_NS) break;
        }
        if (!ready) {
            pack_chunk(s, jc, pc, kc, nc, q, priv);
            at[q] = priv + q * CHUNK * kc;
        }
    }
}

/* Shared buffers are mapped pages of their own, not the heap's: one that grows gives its old
 * pages back to the system at once, where the heap keeps freed chunks resident. */
static float *pages_new(size_t floats) {
    void *p = mmap(NULL, floats * sizeof(float), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static void pages_free(float *p, size_t floats) {
    if (p) munmap(p, floats * sizeof(float));
}

/* Shared objects released go back to a free list and are reused (a new buffer per product
 * would cost page faults each time). There are at most POOL_MAX of them, in use or idle, each
 * as big as the biggest op(B) it has held: each costs peak memory, and a product that finds
 * none left packs op(B) per block. */
enum { POOL_MAX = 2 };
static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static panels *pool;
static int pool_made; /* objects in existence */

static void shared_release(tg_cpu_shared *base) {
    panels *s = (panels *)base;
    pthread_mutex_lock(&pool_mu);
    s->next = pool;
    pool = s;
    pthread_mutex_unlock(&pool_mu);
}

static void shared_free(panels *s) {
    pages_free(s->buf, s->cap);
    free((void *)s->state);
    free(s);
    pthread_mutex_lock(&pool_mu);
    pool_made--;
    pthread_mutex_unlock(&pool_mu);
}

static void panels_set(panels *s, bool tb, const float *b, int64_t ldb, int64_t n, int64_t k) {
    s->b = b, s->ldb = ldb, s->n = n, s->k = k, s->tb = tb;
}

static size_t states_needed(int64_t n, int64_t k) {
    return (size_t)((n + NC - 1) / NC * ((k + KC - 1) / KC) * (NC / CHUNK));
}

tg_cpu_shared *tg_cpu_gemm_panels_shared(bool tb, const float *b, int64_t ldb, int64_t n,
                                         int64_t k) {
    if (n <= 0 || k <= 0 || !tg_cpu_gemm_packed_available()) return NULL;
    const size_t need = (size_t)k * (size_t)round_up(n, NR), need_state = states_needed(n, k);
    pthread_mutex_lock(&pool_mu);
    panels *s = pool;
    if (s)
        pool = s->next;
    else if (pool_made < POOL_MAX && (s = calloc(1, sizeof *s)))
        pool_made++;
    pthread_mutex_unlock(&pool_mu);
    if (!s) return NULL;
    if (s->cap < need) {
        pages_free(s->buf, s->cap);
        s->cap = 0;
        if (!(s->buf = pages_new(need))) {
            shared_free(s);
            return NULL;
        }
        s->cap = need;
    }
    if (s->cap_state < need_state) {
        free((void *)s->state);
        s->cap_state = 0;
        if (!(s->state = malloc(need_state * sizeof *s->state))) {
            shared_free(s);
            return NULL;
        }
        s->cap_state = need_state;
    }
    const int init = tg__cpu_stats.gemm.stall_shared ? PACKING : UNPACKED;
    for (size_t i = 0; i < need_state; i++)
        atomic_init(&s->state[i], init);
    s->base.release = shared_release;
    s->supply = shared_supply;
    panels_set(s, tb, b, ldb, n, k);
    return &s->base;
}

void tg_cpu_gemm_shared_b_trim(void) {
    pthread_mutex_lock(&pool_mu);
    panels *s = pool;
    pool = NULL;
    pthread_mutex_unlock(&pool_mu);
    while (s) {
        panels *next = s->next;
        shared_free(s);
        s = next;
    }
}

/* ---- kept operands: a weight packed once for many products (gemm.h) ---- */

static void kept_release(tg_cpu_shared *s) {
    (void)s; /* a product's end leaves it packed: tg_cpu_gemm_keep_b's caller owns it */
}

enum { KEPT_PAGES = 1 << 20 }; /* bytes: kept_new */

static void kept_free(panels *s) {
    if (s->cap)
        pages_free(s->buf, s->cap);
    else
        free(s->buf);
    free((void *)s->state);
    free(s);
}

/* Every piece of op(B) packed now. From the heap, not pages of their own: a decoder keeps and
 * drops them batch after batch, and the heap serves the next batch's from the same memory
 * (mapping each anew scatters the backend's blocks). But from KEPT_PAGES bytes on, pages of
 * their own (cap: how many floats): glibc maps such a block itself and, once it is freed, would
 * serve and keep blocks up to its size from the heap, growing the peak. */
static panels *kept_new(bool tb, const float *b, int64_t ldb, int64_t n, int64_t k) {
    const size_t need = (size_t)k * (size_t)round_up(n, NR);
    panels *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    const size_t bytes = (need * sizeof(float) + 63) / 64 * 64;
    s->cap = bytes >= KEPT_PAGES ? need : 0;
    s->buf = s->cap ? pages_new(need) : aligned_alloc(64, bytes);
    s->state = malloc(states_needed(n, k) * sizeof *s->state);
    if (!s->buf || !s->state) {
        kept_free(s);
        return NULL;
    }
    s->base.release = kept_release;
    s->supply = kept_supply;
    panels_set(s, tb, b, ldb, n, k);
    for (int64_t jc = 0; jc < n; jc += NC) {
        const int64_t nc = tg_cpu_gemm_imin(NC, n - jc);
        for (int64_t pc = 0; pc < k; pc += KC) {
            const int64_t kc = tg_cpu_gemm_imin(KC, k - pc);
            _Atomic int *st = states_of(s, jc, pc);
            for (int64_t q = 0; q < (nc + CHUNK - 1) / CHUNK; q++) {
                pack_chunk(s, jc, pc, kc, nc, q, block_of(s, jc, pc, nc));
                atomic_init(&st[q], PACKED);
            }
        }
    }
    return s;
}

/* The kept operands, found by (tb, b, ldb, n, k): a short list (a decoder's weights), each
 * with the number of holders that asked for it. */
typedef struct {
    panels *s;
    int refs;
} kept_entry;
static pthread_mutex_t kept_mu = PTHREAD_MUTEX_INITIALIZER;
static kept_entry *kept;
static int nkept, cap_kept;

static int kept_index(bool tb, const float *b, int64_t ldb, int64_t n, int64_t k) {
    for (int i = 0; i < nkept; i++) {
        const panels *s = kept[i].s;
        if (s->b == b && s->tb == tb && s->ldb == ldb && s->n == n && s->k == k) return i;
    }
    return -1;
}

bool tg_cpu_gemm_keep_b(bool tb, const float *b, int64_t ldb, int64_t n, int64_t k) {
    if (n <= 0 || k <= 0 || !tg_cpu_gemm_packed_available()) return false;
    pthread_mutex_lock(&kept_mu);
    int i = kept_index(tb, b, ldb, n, k);
    bool ok = true;
    if (i >= 0) {
        kept[i].refs++;
    } else {
        if (nkept == cap_kept) {
            const int cap = cap_kept ? 2 * cap_kept : 16;
            kept_entry *e = realloc(kept, (size_t)cap * sizeof *e);
            if (e) kept = e, cap_kept = cap;
        }
        panels *s = nkept < cap_kept ? kept_new(tb, b, ldb, n, k) : NULL;
        if (s) kept[nkept++] = (kept_entry){s, 1};
        ok = s != NULL;
    }
    atomic_store_explicit(&tg__cpu_stats.gemm.kept, nkept, memory_order_relaxed);
    pthread_mutex_unlock(&kept_mu);
    return ok;
}

void tg_cpu_gemm_drop_b(bool tb, const float *b, int64_t ldb, int64_t n, int64_t k) {
    pthread_mutex_lock(&kept_mu);
    int i = kept_index(tb, b, ldb, n, k);
    if (i >= 0 && --kept[i].refs == 0) {
        panels *s = kept[i].s;
        kept[i] = kept[--nkept];
        kept_free(s);
    }
    atomic_store_explicit(&tg__cpu_stats.gemm.kept, nkept, memory_order_relaxed);
    pthread_mutex_unlock(&kept_mu);
}

tg_cpu_shared *tg_cpu_gemm_kept_b(bool tb, const float *b, int64_t ldb, int64_t n, int64_t k) {
    /* read without the lock first: most products find none kept */
    if (!atomic_load_explicit(&tg__cpu_stats.gemm.kept, memory_order_relaxed)) return NULL;
    pthread_mutex_lock(&kept_mu);
    int i = kept_index(tb, b, ldb, n, k);
    tg_cpu_shared *s = i >= 0 ? &kept[i].s->base : NULL;
    pthread_mutex_unlock(&kept_mu);
    if (s) atomic_fetch_add_explicit(&tg__cpu_stats.gemm.kept_hits, 1, memory_order_relaxed);
    return s;
}

/* --------------------------------------------------------------- the loop nest ---- */

/* Columns [j0, j0 + n) of C over op(B)'s panels from src (c: the block's first column). The
 * column blocks follow src's blocks of NC: a block of C starting inside one of them (at a
 * multiple of CHUNK) takes the rest of it first, so that each finds its pieces where src holds
 * them. a: op(A) of the block's m rows. */
static void block_run(bool ta, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                      int64_t lda, float beta, float *c, int64_t ldc, panels *src, int64_t j0,
                      pack_bufs *buf) {
    const float *chunk_at[NC / CHUNK];
    /* the rows in blocks of whole panels as even as MC allows: a short last block would meet
     * each B panel with few A panels, loaded for little work */
    const int64_t nblk = (m + MC - 1) / MC, mcb = round_up((m + nblk - 1) / nblk, MR);
    const bool wide_ok = wide();
    /* alpha 1 and every column in 6×64 and 6×32 tiles: the kernels read op(A) in place — a
     * row-major one's rows (saving the 8×8 transposes of its packing) or a transposed one's six
     * values per row of A where A's rows are at most 1 KiB apart (rows 4 or 8 KiB apart fall in
     * a few sets of L1 and L2, and copying them is faster) — and only a block's last partial
     * panel is packed (for its edge tiles) */
    const bool inplace_ok = wide_ok && alpha == 1.0f && !tg__cpu_stats.gemm.no_inplace_a &&
                            (!ta || lda * (int64_t)sizeof(float) <= 1024);
    /* C = beta·C first when beta is neither 0 (C is not read: the first block of k stores)
     * nor 1 (the first block of k adds) */
    if (beta != 0.0f && beta != 1.0f)
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++)
                c[i * ldc + j] *= beta;

    for (int64_t jc = 0, nc; jc < n; jc += nc) {
        /* og: where this block of columns starts in src's block jg */
        const int64_t og = (j0 + jc) % NC, jg = j0 + jc - og;
        nc = tg_cpu_gemm_imin(NC - og, n - jc);
        /* a block of columns in whole 6×64 and 6×32 tiles reads op(A) in place; one with an
         * edge packs it for the edge's tiles */
        const bool inplace = inplace_ok && nc % (2 * NR) == 0;
        for (int64_t pc = 0; pc < k; pc += KC) {
            const int64_t kc = tg_cpu_gemm_imin(KC, k - pc);
            const bool add = pc > 0 || beta != 0.0f;
            src->supply(src, jg, pc, kc, tg_cpu_gemm_imin(NC, src->n - jg), buf->b, chunk_at);
            for (int64_t ic = 0; ic < m; ic += mcb) {
                const int64_t mc = tg_cpu_gemm_imin(mcb, m - ic);
                /* op(A)[ic.., pc..] into 6-row panels: row i of op(A) is a column of the panel */
                const int64_t pk0 = inplace ? mc / MR * MR : 0; /* rows [pk0, mc) packed */
                if (pk0 < mc)
                    pack_block(ta ? a + pc * lda + ic + pk0 : a + (ic + pk0) * lda + pc, lda, ta,
                               kc, mc - pk0, MR, buf->a + pk0 * kc);
                if (alpha != 1.0f)
                    for (int64_t q = 0; q < (mc + MR - 1) / MR * MR * kc; q++)
                        buf->a[q] *= alpha;
                /* four whole B panels at a time with the 512-bit kernels, then two, else one
                 * (quads start at multiples of 64 columns and pairs of 32: never across a
                 * CHUNK) */
                for (int64_t jr = 0, step; jr < nc; jr += step) {
                    step = !wide_ok            ? NR
                           : nc - jr >= 4 * NR ? 4 * NR
                           : nc - jr >= 2 * NR ? 2 * NR
                                               : NR;
                    const float *bp = chunk_at[(og + jr) / CHUNK] + (og + jr) % CHUNK * kc;
                    const int64_t nr = tg_cpu_gemm_imin(NR, nc - jr);
                    for (int64_t ir = 0; ir < mc; ir += MR) {
                        const float *ap = buf->a + ir * kc;
                        float *ct = c + (ic + ir) * ldc + jc + jr;
                        const int64_t mr = tg_cpu_gemm_imin(MR, mc - ir);
                        const int np = (int)(step / NR); /* panels: 1, 2 or 4 */
                        if (mr < MR || nr < NR)
                            edge_tile(kc, ap, bp, np, ct, ldc, mr, np > 1 ? step : nr, add);
                        else if (inplace && ta) /* np 2 or 4: n is a multiple of 32 */
                            kernels[np / 2][A_COLS](kc, a + pc * lda + ic + ir, lda, bp, ct, ldc,
                                                    add);
                        else if (inplace)
                            kernels[np / 2][A_ROWS](kc, a + (ic + ir) * lda + pc, lda, bp, ct, ldc,
                                                    add);
                        else
                            kernels[np / 2][A_PACKED](kc, ap, 0, bp, ct, ldc, add);
                    }
                }
            }
        }
    }
}

bool tg_cpu_gemm_packed_block(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                              const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
                              float *c, int64_t ldc, tg_cpu_shared *from, int64_t j0) {
    if (m <= 0 || n <= 0) return true;
    if (k <= 0 || !tg_cpu_gemm_packed_available()) return false;
    pack_bufs *buf = bufs_get();
    if (!buf) return false;
    panels *src = (panels *)from;
    if (src && (src->b != b || src->ldb != ldb || src->tb != tb || src->k != k || j0 % CHUNK ||
                j0 + n > src->n))
        src = NULL;
    if (src) {
        block_run(ta, m, n, k, alpha, a, lda, beta, c, ldc, src, j0, buf);
        return true;
    }
    panels own = {.supply = own_supply,
                  .tb = tb,
                  .ldb = ldb,
                  .n = n,
                  .k = k,
                  .b = tb ? b + j0 * ldb : b + j0};
    block_run(ta, m, n, k, alpha, a, lda, beta, c, ldc, &own, 0, buf);
    return true;
}
