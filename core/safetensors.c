/* safetensors reader and writer. See include/tg/safetensors.h for the format and rules.
 *
 * Reading keeps the whole file in one malloc'd block and the parsed JSON header beside it;
 * tensor names and metadata strings point into the header tree, tensor data into the block,
 * so a file is three allocations plus two small index arrays. We read() rather than mmap():
 * a mapped file that another process truncates kills us with SIGBUS, and checkpoints are
 * small enough (hundreds of MB) that one read is cheap next to training.
 *
 * Validation mirrors the Python/Rust `safetensors` package so that a file one accepts the
 * other accepts too: the tensors, sorted by offset, must tile the data buffer exactly (no
 * overlap, no gap, nothing after the last one). */
#include "tg/safetensors.h"

#include "tg/json.h"
#include "core/tg-impl.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

/* The Rust crate refuses headers above 100 MB; so do we (a corrupt length must not make us
 * parse gigabytes of tensor data as JSON). */
#define ST_MAX_HEADER 100000000ull

/* Offsets are written as JSON numbers, which tg_json keeps exact up to 2^53. */
#define ST_MAX_OFFSET 9007199254740992ull

static const struct {
    const char *name;
    size_t size;
} dtypes[TG_ST_DTYPE_COUNT] = {
    [TG_ST_BOOL] = {"BOOL", 1},       [TG_ST_U8] = {"U8", 1},           [TG_ST_I8] = {"I8", 1},
    [TG_ST_F8_E5M2] = {"F8_E5M2", 1}, [TG_ST_F8_E4M3] = {"F8_E4M3", 1}, [TG_ST_I16] = {"I16", 2},
    [TG_ST_U16] = {"U16", 2},         [TG_ST_F16] = {"F16", 2},         [TG_ST_BF16] = {"BF16", 2},
    [TG_ST_I32] = {"I32", 4},         [TG_ST_U32] = {"U32", 4},         [TG_ST_F32] = {"F32", 4},
    [TG_ST_F64] = {"F64", 8},         [TG_ST_I64] = {"I64", 8},         [TG_ST_U64] = {"U64", 8},
};

const char *tg_st_dtype_name(tg_st_dtype dt) {
    return (unsigned)dt < TG_ST_DTYPE_COUNT ? dtypes[dt].name : "?";
}

size_t tg_st_dtype_size(tg_st_dtype dt) {
    return (unsigned)dt < TG_ST_DTYPE_COUNT ? dtypes[dt].size : 0;
}

tg_status tg_st_dtype_parse(const char *name, tg_st_dtype *out) {
    for (int d = 0; d < TG_ST_DTYPE_COUNT; d++) {
        if (name && strcmp(name, dtypes[d].name) == 0) {
            *out = (tg_st_dtype)d;
            return TG_OK;
        }
    }
    return tg_error_set(TG_ERR_NOT_FOUND, "tg_st_dtype_parse: unknown dtype '%.40s'",
                        name ? name : "(null)");
}

/* Format a shape as "[2, 3]" into buf (truncated with "..." if long). */
static const char *shape_str(const int64_t *shape, int ndim, char *buf, size_t cap) {
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < ndim && n < cap; d++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%" PRId64, d ? ", " : "", shape[d]);
    if (n < cap)
        snprintf(buf + n, cap - n, "]");
    else if (cap > 4)
        memcpy(buf + cap - 4, "...", 4);
    return buf;
}

/* Element count of a shape, or 0 with *overflow set if it does not fit size_t. */
static size_t shape_numel(const int64_t *shape, int ndim, int *overflow) {
    size_t n = 1;
    *overflow = 0;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] == 0) return 0; /* a zero dimension wins over any overflow */
    }
    for (int d = 0; d < ndim; d++) {
        if ((uint64_t)shape[d] > SIZE_MAX / n) {
            *overflow = 1;
            return 0;
        }
        n *= (size_t)shape[d];
    }
    return n;
}

/* ---- reading ---------------------------------------------------------------------------- */

typedef struct st_tensor {
    const char *name; /* points into the header tree */
    tg_st_dtype dtype;
    int ndim;
    const int64_t *shape; /* points into tg_st_file.dims */
    size_t numel;
    uint64_t begin, end; /* relative to the data buffer */
} st_tensor;

struct tg_st_file {
    char *path;
    unsigned char *bytes; /* the whole file */
    size_t size;
    const unsigned char *data; /* start of the data buffer, inside bytes */
    size_t data_size;
    tg_json *header;
    st_tensor *t;
    size_t n;
    size_t *by_name;     /* tensor indices sorted by name, for tg_st_find */
    int64_t *dims;       /* all shapes, back to back */
    const tg_json *meta; /* the "__metadata__" object or NULL */
};

void tg_st_close(tg_st_file *f) {
    if (!f) return;
    free(f->path);
    free(f->bytes);
    tg_json_free(f->header);
    free(f->t);
    free(f->by_name);
    free(f->dims);
    free(f);
}

/* Every validation error reads "tg_st_open: '<path>': <what>". */
#define BAD(f, ...) st_bad((f), __VA_ARGS__)
__attribute__((format(printf, 2, 3))) static tg_status st_bad(const tg_st_file *f, const char *fmt,
                                                              ...) {
    char what[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return tg_error_set(TG_ERR_FORMAT, "tg_st_open: '%s': %s", f->path, what);
}

static uint64_t le64(const unsigned char *p) {
    uint64_t v = 0;
    for (int k = 7; k >= 0; k--)
        v = (v << 8) | p[k];
    return v;
}

/* Read a JSON array of non-negative integers into out[0..n) (n = its length, <= cap is not
 * required: out may be NULL to only validate). what/name are for messages. */
static tg_status read_uints(const tg_st_file *f, const tg_json *arr, const char *name,
                            const char *what, int64_t *out) {
    for (size_t i = 0; i < tg_json_size(arr); i++) {
        const tg_json *x = tg_json_at(arr, i);
        int64_t v;
        if (tg_json_kind(x) != TG_JSON_NUMBER || tg_json_int64(x, &v) != TG_OK || v < 0)
            return BAD(f, "tensor '%s': %s[%zu] is not a non-negative integer", name, what, i);
        if (out) out[i] = v;
    }
    return TG_OK;
}

/* Check one tensor entry's value and fill t (shape goes to dims). */
static tg_status parse_entry(tg_st_file *f, const char *name, const tg_json *e, st_tensor *t,
                             int64_t *dims) {
    if (tg_json_kind(e) != TG_JSON_OBJECT)
        return BAD(f, "tensor '%s': entry is a %s, not an object", name,
                   tg_json_type_name(tg_json_kind(e)));
    const tg_json *dt = tg_json_get(e, "dtype");
    const tg_json *sh = tg_json_get(e, "shape");
    const tg_json *off = tg_json_get(e, "data_offsets");
    if (!dt) return BAD(f, "tensor '%s': missing \"dtype\"", name);
    if (!sh) return BAD(f, "tensor '%s': missing \"shape\"", name);
    if (!off) return BAD(f, "tensor '%s': missing \"data_offsets\"", name);
    if (tg_json_kind(dt) != TG_JSON_STRING)
        return BAD(f, "tensor '%s': \"dtype\" is a %s, not a string", name,
                   tg_json_type_name(tg_json_kind(dt)));
    if (tg_st_dtype_parse(tg_json_string(dt), &t->dtype) != TG_OK)
        return BAD(f, "tensor '%s': unknown dtype '%.40s'", name, tg_json_string(dt));
    if (tg_json_kind(sh) != TG_JSON_ARRAY)
        return BAD(f, "tensor '%s': \"shape\" is a %s, not an array", name,
                   tg_json_type_name(tg_json_kind(sh)));
    if (tg_json_kind(off) != TG_JSON_ARRAY || tg_json_size(off) != 2)
        return BAD(f, "tensor '%s': \"data_offsets\" must be an array [begin, end]", name);
    tg_status st = read_uints(f, sh, name, "shape", dims);
    if (st != TG_OK) return st;
    int64_t be[2];
    st = read_uints(f, off, name, "data_offsets", be);
    if (st != TG_OK) return st;
    t->name = name;
    t->ndim = (int)tg_json_size(sh);
    t->shape = dims;
    t->begin = (uint64_t)be[0];
    t->end = (uint64_t)be[1];
    char sbuf[160];
    int overflow;
    t->numel = shape_numel(dims, t->ndim, &overflow);
    size_t esize = dtypes[t->dtype].size;
    if (overflow || t->numel > SIZE_MAX / esize)
        return BAD(f, "tensor '%s': %s %s has more bytes than fit in memory", name,
                   dtypes[t->dtype].name, shape_str(dims, t->ndim, sbuf, sizeof sbuf));
    if (t->end < t->begin)
        return BAD(f, "tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] end before begin", name,
                   t->begin, t->end);
    if (t->end > f->data_size)
        return BAD(f,
                   "tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64
                   "] run past the data buffer of %zu bytes",
                   name, t->begin, t->end, f->data_size);
    if (t->end - t->begin != t->numel * esize)
        return BAD(f,
                   "tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] hold %" PRIu64
                   " bytes but %s %s needs %zu",
                   name, t->begin, t->end, t->end - t->begin, dtypes[t->dtype].name,
                   shape_str(dims, t->ndim, sbuf, sizeof sbuf), t->numel * esize);
    return TG_OK;
}

static tg_status check_metadata(const tg_st_file *f, const tg_json *m) {
    if (tg_json_kind(m) != TG_JSON_OBJECT)
        return BAD(f, "\"__metadata__\" is a %s, not an object",
                   tg_json_type_name(tg_json_kind(m)));
    for (size_t i = 0; i < tg_json_size(m); i++) {
        const char *k = tg_json_key(m, i);
        const tg_json *v = tg_json_at(m, i);
        if (tg_json_kind(v) != TG_JSON_STRING)
            return BAD(f, "metadata value for key '%s' is a %s, not a string", k,
                       tg_json_type_name(tg_json_kind(v)));
        /* JSON strings are length-counted; our C API is not, so a "\u0000" would silently
         * truncate. A key with a NUL is not found again by tg_json_get under its C name. */
        if (tg_json_get(m, k) != v) return BAD(f, "metadata key '%s' contains a NUL character", k);
        if (memchr(tg_json_string(v), '\0', tg_json_string_len(v)))
            return BAD(f, "metadata value for key '%s' contains a NUL character", k);
    }
    return TG_OK;
}

/* Sort helpers (qsort has no context argument, so the file being sorted is a static;
 * validation runs under no lock, hence _Thread_local). */
static _Thread_local const tg_st_file *sort_file;

static int cmp_offset(const void *a, const void *b) {
    const st_tensor *x = &sort_file->t[*(const size_t *)a], *y = &sort_file->t[*(const size_t *)b];
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

static int cmp_name(const void *a, const void *b) {
    return strcmp(sort_file->t[*(const size_t *)a].name, sort_file->t[*(const size_t *)b].name);
}

/* Tensors sorted by offset must tile [0, data_size) exactly, as the Rust crate requires. */
static tg_status check_layout(tg_st_file *f) {
    size_t *ord = malloc((f->n ? f->n : 1) * sizeof *ord);
    if (!ord) return tg_error_set(TG_ERR_NOMEM, "tg_st_open: '%s': out of memory", f->path);
    for (size_t i = 0; i < f->n; i++)
        ord[i] = i;
    sort_file = f;
    qsort(ord, f->n, sizeof *ord, cmp_offset);
    uint64_t pos = 0;
    const st_tensor *prev = NULL;
    tg_status st = TG_OK;
    for (size_t k = 0; k < f->n && st == TG_OK; k++) {
        const st_tensor *t = &f->t[ord[k]];
        if (t->begin < pos)
            st = BAD(f,
                     "tensors '%s' [%" PRIu64 ", %" PRIu64 "] and '%s' [%" PRIu64 ", %" PRIu64
                     "] overlap",
                     prev->name, prev->begin, prev->end, t->name, t->begin, t->end);
        else if (t->begin > pos)
            st = BAD(f,
                     "bytes [%" PRIu64 ", %" PRIu64 ") of the data buffer belong to no tensor "
                     "(gap before tensor '%s')",
                     pos, t->begin, t->name);
        pos = t->end;
        prev = t;
    }
    if (st == TG_OK && pos != f->data_size)
        st = BAD(f,
                 "data buffer has %" PRIu64 " bytes after the last tensor (%zu bytes, "
                 "tensors end at %" PRIu64 ")",
                 (uint64_t)f->data_size - pos, f->data_size, pos);
    free(ord);
    return st;
}

/* Validate f->bytes[0..size) and build the tensor table. */
static tg_status st_parse(tg_st_file *f) {
    if (f->size < 8)
        return BAD(f, "file is %zu bytes, shorter than the 8-byte header length", f->size);
    uint64_t hlen = le64(f->bytes);
    if (hlen > (uint64_t)(f->size - 8))
        return BAD(f, "header length %" PRIu64 " exceeds file size %zu", hlen, f->size);
    if (hlen > ST_MAX_HEADER)
        return BAD(f, "header length %" PRIu64 " exceeds the limit of %llu bytes", hlen,
                   ST_MAX_HEADER);
    const char *htext = (const char *)f->bytes + 8;
    size_t bad = tg_json_utf8_check(htext, (size_t)hlen);
    if (bad != hlen)
        return BAD(f, "header is not valid UTF-8 (byte %zu of the header, file offset %zu)", bad,
                   bad + 8);
    tg_status st = tg_json_parse(htext, (size_t)hlen, &f->header);
    if (st != TG_OK)
        return tg_error_prefix(TG_ERR_FORMAT, "tg_st_open: '%s': header is not valid JSON",
                               f->path);
    if (tg_json_kind(f->header) != TG_JSON_OBJECT)
        return BAD(f, "header is a JSON %s, not an object",
                   tg_json_type_name(tg_json_kind(f->header)));
    f->data = f->bytes + 8 + hlen;
    f->data_size = f->size - 8 - (size_t)hlen;

    /* Count tensors and dimensions first, so each family is one allocation. */
    size_t nt = 0, nd = 0, nm = tg_json_size(f->header);
    for (size_t i = 0; i < nm; i++) {
        const char *k = tg_json_key(f->header, i);
        if (strcmp(k, "__metadata__") == 0) {
            f->meta = tg_json_at(f->header, i);
            st = check_metadata(f, f->meta);
            if (st != TG_OK) return st;
            continue;
        }
        nt++;
        nd += tg_json_size(tg_json_get(tg_json_at(f->header, i), "shape"));
    }
    f->t = calloc(nt ? nt : 1, sizeof *f->t);
    f->by_name = malloc((nt ? nt : 1) * sizeof *f->by_name);
    f->dims = malloc((nd ? nd : 1) * sizeof *f->dims);
    if (!f->t || !f->by_name || !f->dims)
        return tg_error_set(TG_ERR_NOMEM, "tg_st_open: '%s': out of memory", f->path);
    int64_t *dims = f->dims;
    for (size_t i = 0; i < nm; i++) {
        const char *k = tg_json_key(f->header, i);
        const tg_json *e = tg_json_at(f->header, i);
        if (strcmp(k, "__metadata__") == 0) continue;
        /* Keys are length-counted in JSON: a "\u0000" would silently truncate the name. */
        if (tg_json_get(f->header, k) != e)
            return BAD(f, "tensor name '%s' contains a NUL character", k);
        st = parse_entry(f, k, e, &f->t[f->n], dims);
        if (st != TG_OK) return st;
        dims += f->t[f->n].ndim;
        f->n++;
    }
    st = check_layout(f);
    if (st != TG_OK) return st;
    for (size_t i = 0; i < f->n; i++)
        f->by_name[i] = i;
    sort_file = f;
    qsort(f->by_name, f->n, sizeof *f->by_name, cmp_name);
    return TG_OK;
}

static tg_st_file *st_alloc(const char *name) {
    tg_st_file *f = calloc(1, sizeof *f);
    if (f) f->path = strdup(name);
    if (!f || !f->path) {
        free(f);
        tg_error_set(TG_ERR_NOMEM, "tg_st_open: out of memory");
        return NULL;
    }
    return f;
}

/* Read the whole of fd into a malloc'd buffer. */
static tg_status read_all(int fd, const char *path, unsigned char **out, size_t *out_size) {
    struct stat sb;
    if (fstat(fd, &sb) != 0)
        return tg_error_set(TG_ERR_IO, "tg_st_open: cannot stat '%s': %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode))
        return tg_error_set(TG_ERR_IO, "tg_st_open: '%s' is not a regular file", path);
    if ((uint64_t)sb.st_size > SIZE_MAX - 1)
        return tg_error_set(TG_ERR_NOMEM, "tg_st_open: '%s' is too large for memory", path);
    size_t size = (size_t)sb.st_size, got = 0;
    unsigned char *buf = malloc(size ? size : 1);
    if (!buf)
        return tg_error_set(TG_ERR_NOMEM, "tg_st_open: '%s': cannot allocate %zu bytes", path,
                            size);
    while (got < size) {
        ssize_t r = read(fd, buf + got, size - got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            free(buf);
            return tg_error_set(TG_ERR_IO, "tg_st_open: cannot read '%s': %s", path,
                                strerror(errno));
        }
        if (r == 0) break; /* shrank while we read: validate what we got */
        got += (size_t)r;
    }
    *out = buf;
    *out_size = got;
    return TG_OK;
}

tg_status tg_st_open(const char *path, tg_st_file **out) {
    if (!out) return tg_error_set(TG_ERR_INVALID, "tg_st_open: out is NULL");
    *out = NULL;
    if (!path) return tg_error_set(TG_ERR_INVALID, "tg_st_open: path is NULL");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return tg_error_set(TG_ERR_IO, "tg_st_open: cannot open '%s': %s", path, strerror(errno));
    tg_st_file *f = st_alloc(path);
    if (!f) {
        close(fd);
        return TG_ERR_NOMEM;
    }
    tg_status st = read_all(fd, path, &f->bytes, &f->size);
    close(fd);
    if (st == TG_OK) st = st_parse(f);
    if (st != TG_OK) {
        tg_st_close(f);
        return st;
    }
    *out = f;
    return TG_OK;
}

tg_status tg_st_open_memory(const void *data, size_t len, const char *name, tg_st_file **out) {
    if (!out) return tg_error_set(TG_ERR_INVALID, "tg_st_open_memory: out is NULL");
    *out = NULL;
    if (!data && len) return tg_error_set(TG_ERR_INVALID, "tg_st_open_memory: data is NULL");
    tg_st_file *f = st_alloc(name ? name : "<memory>");
    if (!f) return TG_ERR_NOMEM;
    f->bytes = malloc(len ? len : 1);
    if (!f->bytes) {
        tg_st_close(f);
        return tg_error_set(TG_ERR_NOMEM, "tg_st_open_memory: cannot allocate %zu bytes", len);
    }
    if (len) memcpy(f->bytes, data, len);
    f->size = len;
    tg_status st = st_parse(f);
    if (st != TG_OK) {
        tg_st_close(f);
        return st;
    }
    *out = f;
    return TG_OK;
}

/* ---- accessors -------------------------------------------------------------------------- */

const char *tg_st_path(const tg_st_file *f) {
    return f->path;
}
size_t tg_st_count(const tg_st_file *f) {
    return f->n;
}

const char *tg_st_name(const tg_st_file *f, size_t i) {
    return i < f->n ? f->t[i].name : NULL;
}

tg_status tg_st_find(const tg_st_file *f, const char *name, size_t *index) {
    size_t lo = 0, hi = f->n;
    while (name && lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(name, f->t[f->by_name[mid]].name);
        if (c == 0) {
            *index = f->by_name[mid];
            return TG_OK;
        }
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return tg_error_set(TG_ERR_NOT_FOUND, "tg_st_find: no tensor '%s' in '%s'",
                        name ? name : "(null)", f->path);
}

tg_st_dtype tg_st_tensor_dtype(const tg_st_file *f, size_t i) {
    return i < f->n ? f->t[i].dtype : TG_ST_DTYPE_COUNT;
}
int tg_st_tensor_ndim(const tg_st_file *f, size_t i) {
    return i < f->n ? f->t[i].ndim : 0;
}
const int64_t *tg_st_tensor_shape(const tg_st_file *f, size_t i) {
    return i < f->n ? f->t[i].shape : NULL;
}
size_t tg_st_tensor_numel(const tg_st_file *f, size_t i) {
    return i < f->n ? f->t[i].numel : 0;
}
const void *tg_st_tensor_data(const tg_st_file *f, size_t i) {
    return i < f->n ? f->data + f->t[i].begin : NULL;
}
size_t tg_st_tensor_nbytes(const tg_st_file *f, size_t i) {
    return i < f->n ? (size_t)(f->t[i].end - f->t[i].begin) : 0;
}

const char *tg_st_metadata(const tg_st_file *f, const char *key) {
    return tg_json_string(tg_json_get(f->meta, key));
}
size_t tg_st_metadata_count(const tg_st_file *f) {
    return tg_json_size(f->meta);
}
const char *tg_st_metadata_key(const tg_st_file *f, size_t i) {
    return tg_json_key(f->meta, i);
}
const char *tg_st_metadata_value(const tg_st_file *f, size_t i) {
    return tg_json_string(tg_json_at(f->meta, i));
}

/* ---- conversion to float32 -------------------------------------------------------------- */

/* Little-endian loads that work at any alignment and on any host byte order. */
static uint16_t ld16(const unsigned char *p) {
    return (uint16_t)(p[0] | (p[1] << 8));
}
static uint32_t ld32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t ld64(const unsigned char *p) {
    return le64(p);
}

static float bits_f32(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* IEEE binary16 -> binary32. Fields: sign 1, exponent 5 (bias 15), mantissa 10. Normal
 * numbers rebias the exponent (+112 = 127 - 15) and widen the mantissa; subnormals
 * (exponent 0) are m * 2^-24 exactly; exponent 31 is inf/NaN (NaN payload kept). */
static float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1F, m = h & 0x3FF;
    if (e == 0) {
        float x = (float)m * 0x1p-24f; /* exact: m < 2^10 */
        return sign ? -x : x;
    }
    if (e == 31) return bits_f32(sign | 0x7F800000u | (m << 13));
    return bits_f32(sign | ((e + 112) << 23) | (m << 13));
}

tg_status tg_st_read_f32(const tg_st_file *f, size_t i, float *dst, size_t count) {
    if (i >= f->n)
        return tg_error_set(TG_ERR_INVALID,
                            "tg_st_read_f32: index %zu out of range (%zu tensors "
                            "in '%s')",
                            i, f->n, f->path);
    const st_tensor *t = &f->t[i];
    if (count != t->numel)
        return tg_error_set(TG_ERR_SHAPE,
                            "tg_st_read_f32: tensor '%s' in '%s' has %zu elements, not %zu",
                            t->name, f->path, t->numel, count);
    const unsigned char *p = f->data + t->begin;
    size_t n = t->numel;
    switch (t->dtype) {
    case TG_ST_F32:
        for (size_t k = 0; k < n; k++)
            dst[k] = bits_f32(ld32(p + 4 * k));
        break;
    case TG_ST_F16:
        for (size_t k = 0; k < n; k++)
            dst[k] = f16_to_f32(ld16(p + 2 * k));
        break;
    case TG_ST_BF16: /* bfloat16 is the high half of a binary32 */
        for (size_t k = 0; k < n; k++)
            dst[k] = bits_f32((uint32_t)ld16(p + 2 * k) << 16);
        break;
    case TG_ST_F64:
        for (size_t k = 0; k < n; k++) {
            uint64_t u = ld64(p + 8 * k);
            double d;
            memcpy(&d, &u, sizeof d);
            dst[k] = (float)d;
        }
        break;
    case TG_ST_BOOL:
    case TG_ST_U8:
        for (size_t k = 0; k < n; k++)
            dst[k] = (float)p[k];
        break;
    case TG_ST_I8:
        for (size_t k = 0; k < n; k++)
            dst[k] = (float)(int8_t)p[k];
        break;
    case TG_ST_I16:
        for (size_t k = 0; k < n; k++)
            dst[k] = (float)(int16_t)ld16(p + 2 * k);
        break;
    case TG_ST_U16:
        for (size_t k = 0; k < n; k++)
            dst[k] = (float)ld16(p + 2 * k);
        break;
    case TG_ST_I32:
        for (size_t k = 0; k < n; k++)
            dst[k] = (float)(int32_t)ld32(p + 4 * k);
        break;
    case TG_ST_U32:
        for (size_t k = 0; k < n; k++)
            dst[k] = (float)ld32(p + 4 * k);
        break;
    case TG_ST_I64:
        for (size_t k = 0; k < n; k++)
            dst[k] = (float)(int64_t)ld64(p + 8 * k);
        break;
    case TG_ST_U64:
        for (size_t k = 0; k < n; k++)
            dst[k] = (float)ld64(p + 8 * k);
        break;
    default:
        return tg_error_set(TG_ERR_UNSUPPORTED,
                            "tg_st_read_f32: tensor '%s' in '%s': no conversion from %s to F32",
                            t->name, f->path, dtypes[t->dtype].name);
    }
    return TG_OK;
}

/* ---- writing ---------------------------------------------------------------------------- */

typedef struct wtensor {
    char *name;
    tg_st_dtype dtype;
    int ndim;
    int64_t *shape;
    size_t nbytes;
    const void *data; /* == owned, or the caller's buffer for tg_st_writer_add_ref */
    void *owned;
} wtensor;

struct tg_st_writer {
    wtensor *t;
    size_t n, cap;
    tg_json *meta; /* object of string values, in insertion order */
};

tg_st_writer *tg_st_writer_new(void) {
    tg_st_writer *w = calloc(1, sizeof *w);
    if (w) w->meta = tg_json_new_object();
    if (!w || !w->meta) {
        free(w);
        tg_error_set(TG_ERR_NOMEM, "tg_st_writer_new: out of memory");
        return NULL;
    }
    return w;
}

void tg_st_writer_free(tg_st_writer *w) {
    if (!w) return;
    for (size_t i = 0; i < w->n; i++) {
        free(w->t[i].name);
        free(w->t[i].shape);
        free(w->t[i].owned);
    }
    free(w->t);
    tg_json_free(w->meta);
    free(w);
}

size_t tg_st_writer_count(const tg_st_writer *w) {
    return w ? w->n : 0;
}

static tg_status writer_add(tg_st_writer *w, const char *name, tg_st_dtype dtype, int ndim,
                            const int64_t *shape, const void *data, int copy) {
    const char *fn = copy ? "tg_st_writer_add" : "tg_st_writer_add_ref";
    if (!w || !name) return tg_error_set(TG_ERR_INVALID, "%s: NULL writer or name", fn);
    size_t nlen = strlen(name);
    if (nlen == 0) return tg_error_set(TG_ERR_INVALID, "%s: empty tensor name", fn);
    if (tg_json_utf8_check(name, nlen) != nlen)
        return tg_error_set(TG_ERR_INVALID, "%s: tensor name '%s' is not valid UTF-8", fn, name);
    if (strcmp(name, "__metadata__") == 0)
        return tg_error_set(TG_ERR_INVALID, "%s: '__metadata__' is reserved, not a tensor name",
                            fn);
    if ((unsigned)dtype >= TG_ST_DTYPE_COUNT)
        return tg_error_set(TG_ERR_DTYPE, "%s: tensor '%s': invalid dtype %d", fn, name,
                            (int)dtype);
    if (ndim < 0 || (ndim > 0 && !shape))
        return tg_error_set(TG_ERR_SHAPE, "%s: tensor '%s': bad ndim %d or NULL shape", fn, name,
                            ndim);
    for (int d = 0; d < ndim; d++)
        if (shape[d] < 0)
            return tg_error_set(TG_ERR_SHAPE, "%s: tensor '%s': dimension %d is %" PRId64, fn, name,
                                d, shape[d]);
    /* Linear scan: checkpoints hold hundreds of tensors, not millions. */
    for (size_t i = 0; i < w->n; i++)
        if (strcmp(w->t[i].name, name) == 0)
            return tg_error_set(TG_ERR_INVALID, "%s: duplicate tensor name '%s'", fn, name);
    int overflow;
    size_t numel = shape_numel(shape, ndim, &overflow), esize = dtypes[dtype].size;
    if (overflow || numel > (size_t)(ST_MAX_OFFSET / esize))
        return tg_error_set(TG_ERR_SHAPE, "%s: tensor '%s' is too large", fn, name);
    size_t nbytes = numel * esize;
    if (nbytes && !data)
        return tg_error_set(TG_ERR_INVALID, "%s: tensor '%s': data is NULL", fn, name);
    if (w->n == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 16;
        wtensor *t = realloc(w->t, cap * sizeof *t);
        if (!t) return tg_error_set(TG_ERR_NOMEM, "%s: out of memory", fn);
        w->t = t;
        w->cap = cap;
    }
    wtensor t = {strdup(name), dtype, ndim, malloc((ndim ? (size_t)ndim : 1) * sizeof(int64_t)),
                 nbytes,       data,  NULL};
    if (copy && nbytes) t.data = t.owned = malloc(nbytes);
    if (!t.name || !t.shape || (copy && nbytes && !t.owned)) {
        free(t.name);
        free(t.shape);
        free(t.owned);
        return tg_error_set(TG_ERR_NOMEM, "%s: tensor '%s': out of memory (%zu bytes)", fn, name,
                            nbytes);
    }
    if (ndim) memcpy(t.shape, shape, (size_t)ndim * sizeof(int64_t));
    if (t.owned) memcpy(t.owned, data, nbytes);
    w->t[w->n++] = t;
    return TG_OK;
}

tg_status tg_st_writer_add(tg_st_writer *w, const char *name, tg_st_dtype dtype, int ndim,
                           const int64_t *shape, const void *data) {
    return writer_add(w, name, dtype, ndim, shape, data, 1);
}

tg_status tg_st_writer_add_ref(tg_st_writer *w, const char *name, tg_st_dtype dtype, int ndim,
                               const int64_t *shape, const void *data) {
    return writer_add(w, name, dtype, ndim, shape, data, 0);
}

tg_status tg_st_writer_set_metadata(tg_st_writer *w, const char *key, const char *value) {
    if (!w || !key || !value)
        return tg_error_set(TG_ERR_INVALID, "tg_st_writer_set_metadata: NULL argument");
    tg_json *v = tg_json_new_string(value, strlen(value));
    if (!v) return tg_error_prefix(TG_ERR_INVALID, "tg_st_writer_set_metadata: key '%s'", key);
    tg_status st = tg_json_object_set(w->meta, key, v);
    if (st != TG_OK) return tg_error_prefix(st, "tg_st_writer_set_metadata");
    return TG_OK;
}

/* The Rust crate's order: dtype descending (largest elements first), then name. */
static _Thread_local const tg_st_writer *sort_writer;
static int cmp_write(const void *a, const void *b) {
    const wtensor *x = &sort_writer->t[*(const size_t *)a],
                  *y = &sort_writer->t[*(const size_t *)b];
    if (x->dtype != y->dtype) return x->dtype > y->dtype ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* An array of JSON numbers from int64 values. */
static tg_json *int_array(const int64_t *v, int n) {
    tg_json *a = tg_json_new_array();
    for (int i = 0; a && i < n; i++) {
        if (tg_json_array_append(a, tg_json_new_number((double)v[i])) != TG_OK) {
            tg_json_free(a);
            return NULL;
        }
    }
    return a;
}

/* Build the padded header for tensors in order ord; *data_len gets the buffer size. */
static tg_status build_header(const tg_st_writer *w, const size_t *ord, char **out,
                              size_t *out_len) {
    tg_json *h = tg_json_new_object();
    if (!h) return TG_ERR_NOMEM;
    tg_status st = TG_OK;
    if (tg_json_size(w->meta)) {
        /* Copy the metadata object (the writer keeps its own). */
        tg_json *m = tg_json_new_object();
        for (size_t i = 0; m && st == TG_OK && i < tg_json_size(w->meta); i++) {
            const tg_json *v = tg_json_at(w->meta, i);
            st = tg_json_object_set(m, tg_json_key(w->meta, i),
                                    tg_json_new_string(tg_json_string(v), tg_json_string_len(v)));
        }
        if (!m || st != TG_OK) {
            tg_json_free(m);
            st = TG_ERR_NOMEM;
        } else {
            st = tg_json_object_set(h, "__metadata__", m);
        }
    }
    uint64_t off = 0;
    for (size_t k = 0; st == TG_OK && k < w->n; k++) {
        const wtensor *t = &w->t[ord[k]];
        int64_t be[2] = {(int64_t)off, (int64_t)(off + t->nbytes)};
        off += t->nbytes;
        if (off > ST_MAX_OFFSET) {
            tg_json_free(h);
            return tg_error_set(TG_ERR_INVALID, "tg_st_writer_save: tensors total more than "
                                                "2^53 bytes");
        }
        tg_json *e = tg_json_new_object();
        if (!e) {
            st = TG_ERR_NOMEM;
            break;
        }
        st = tg_json_object_set(
            e, "dtype", tg_json_new_string(dtypes[t->dtype].name, strlen(dtypes[t->dtype].name)));
        if (st == TG_OK) st = tg_json_object_set(e, "shape", int_array(t->shape, t->ndim));
        if (st == TG_OK) st = tg_json_object_set(e, "data_offsets", int_array(be, 2));
        if (st == TG_OK)
            st = tg_json_object_set(h, t->name, e);
        else
            tg_json_free(e);
    }
    char *text = NULL;
    size_t len = 0;
    if (st == TG_OK) st = tg_json_print(h, 0, &text, &len);
    tg_json_free(h);
    if (st != TG_OK)
        return tg_error_set(TG_ERR_NOMEM, "tg_st_writer_save: out of memory building the header");
    /* Pad with spaces so the data buffer starts 8-aligned (8 + len is a multiple of 8). */
    size_t padded = (len + 7) & ~(size_t)7;
    char *p = realloc(text, padded + 1);
    if (!p) {
        free(text);
        return tg_error_set(TG_ERR_NOMEM, "tg_st_writer_save: out of memory");
    }
    memset(p + len, ' ', padded - len);
    p[padded] = '\0';
    *out = p;
    *out_len = padded;
    return TG_OK;
}

tg_status tg_st_writer_save(tg_st_writer *w, const char *path) {
    if (!w || !path) return tg_error_set(TG_ERR_INVALID, "tg_st_writer_save: NULL argument");
    size_t *ord = malloc((w->n ? w->n : 1) * sizeof *ord);
    if (!ord) return tg_error_set(TG_ERR_NOMEM, "tg_st_writer_save: out of memory");
    for (size_t i = 0; i < w->n; i++)
        ord[i] = i;
    sort_writer = w;
    qsort(ord, w->n, sizeof *ord, cmp_write);
    char *header = NULL;
    size_t hlen = 0;
    tg_status st = build_header(w, ord, &header, &hlen);
    if (st != TG_OK) {
        free(ord);
        return st;
    }

    size_t tlen = strlen(path) + 32;
    char *tmp = malloc(tlen);
    if (!tmp) {
        free(ord);
        free(header);
        return tg_error_set(TG_ERR_NOMEM, "tg_st_writer_save: out of memory");
    }
    snprintf(tmp, tlen, "%s.tmp.%ld", path, (long)getpid());
    /* O_EXCL: never write through a symlink or into a file we did not create. A stale temp
     * file of ours (same pid, earlier crash cannot happen; a recycled pid can) is removed. */
    int fd = tg__io_open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno == EEXIST && unlink(tmp) == 0)
        fd = tg__io_open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) {
        st = tg_error_set(TG_ERR_IO, "tg_st_writer_save: cannot create '%s': %s", tmp,
                          strerror(errno));
        free(ord);
        free(header);
        free(tmp);
        return st;
    }

    unsigned char len8[8];
    for (int k = 0; k < 8; k++)
        len8[k] = (unsigned char)((uint64_t)hlen >> (8 * k));
    const char *step = "write";
    /* one gathered write of the whole file: a few system calls for hundreds of tensors */
    struct iovec *iov = malloc((w->n + 2) * sizeof *iov);
    int ok = iov != NULL;
    if (!ok) errno = ENOMEM;
    if (ok) {
        iov[0] = (struct iovec){len8, 8};
        iov[1] = (struct iovec){header, hlen};
        for (size_t k = 0; k < w->n; k++)
            iov[k + 2] = (struct iovec){(void *)w->t[ord[k]].data, w->t[ord[k]].nbytes};
        ok = tg__io_writev(fd, iov, (int)(w->n + 2), tmp) == 0;
        free(iov);
    }
    if (ok) {
        step = "fsync";
        ok = tg__io_fsync(fd, tmp) == 0;
    }
    int err = errno;
    if (tg__io_close(fd, tmp) != 0 && ok) {
        step = "close";
        err = errno;
        ok = 0;
    }
    if (ok) {
        step = "rename";
        ok = tg__io_rename(tmp, path) == 0;
        err = errno;
    }
    if (!ok) {
        unlink(tmp);
        st = tg_error_set(TG_ERR_IO, "tg_st_writer_save: cannot save '%s' (%s failed): %s", path,
                          step, strerror(err));
    } else {
        /* so that the rename itself survives a crash; best effort: some file systems refuse
         * fsync on directories, and the data are already safe */
        (void)tg__io_fsync_dir(path);
    }
    free(ord);
    free(header);
    free(tmp);
    return st;
}
