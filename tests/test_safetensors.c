/* Tests for safetensors reading and writing (core/safetensors.c).
 *
 * Oracles: byte strings from the Rust safetensors crate's own serialisation tests; a file
 * written by the Python package (tests/fixtures/safetensors/python_ref.safetensors, made by
 * tests/fixtures/make_safetensors_fixtures.py); and a file our writer produced that the
 * Python package reads and reproduces byte for byte (tgraph_written.safetensors). Malformed
 * files are written into a fresh temporary directory by each test. */
#include "tg/safetensors.h"

#include "tg_check.h"

#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define FIXTURES TG_TEST_DATA "/fixtures/safetensors/"

/* ---- helpers ---------------------------------------------------------------------------- */

/* One root directory per run, made and removed by the parent process (an unchecked
 * fixture), so that a failing test, which exits its forked child early, still leaves
 * nothing behind. Each test works in its own fresh subdirectory. */
static char rootdir[256];
static char tmpdir[320];

static void make_tmpdir(void) {
    snprintf(tmpdir, sizeof tmpdir, "%s/t_XXXXXX", rootdir);
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

/* rm -r of a path (no symlinks are followed: lstat). */
static void rm_rf(const char *path) {
    struct stat sb;
    if (lstat(path, &sb) != 0) return;
    if (S_ISDIR(sb.st_mode)) {
        DIR *d = opendir(path);
        struct dirent *e;
        while (d && (e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            char sub[1024];
            snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
            rm_rf(sub);
        }
        if (d) closedir(d);
        rmdir(path);
    } else {
        unlink(path);
    }
}

static void remove_tmpdir(void) {
    if (tmpdir[0]) rm_rf(tmpdir);
    tmpdir[0] = '\0';
}

static void root_setup(void) {
    snprintf(rootdir, sizeof rootdir, "/tmp/tg_st_test_XXXXXX");
    if (!mkdtemp(rootdir)) {
        perror("test_safetensors: mkdtemp");
        exit(EXIT_FAILURE);
    }
}

static void root_teardown(void) {
    rm_rf(rootdir);
}

/* Path of name inside the temporary directory (static buffer per call site is enough). */
static const char *tmp_path(const char *name) {
    static char buf[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    return buf[k];
}

static void write_bytes(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(p, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
}

/* Whole file into a malloc'd buffer. */
static unsigned char *read_bytes(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *p = malloc((size_t)len + 1);
    ck_assert_uint_eq(fread(p, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return p;
}

/* Number of entries in a directory, not counting . and .. */
static int dir_entries(const char *dir) {
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

/* A file of 8-byte header length + header text + datalen bytes (0, 1, 2, ...). */
static void write_st(const char *path, const char *header, size_t datalen) {
    size_t hl = strlen(header), n = 8 + hl + datalen;
    unsigned char *p = malloc(n);
    for (int k = 0; k < 8; k++)
        p[k] = (unsigned char)((uint64_t)hl >> (8 * k));
    memcpy(p + 8, header, hl);
    for (size_t i = 0; i < datalen; i++)
        p[8 + hl + i] = (unsigned char)i;
    write_bytes(path, p, n);
    free(p);
}

/* Opening path must fail with st and a message naming the file and holding frag. */
static void open_fails(const char *path, tg_status st, const char *frag) {
    tg_st_file *f = (tg_st_file *)1;
    tg_error_clear();
    tg_status got = tg_st_open(path, &f);
    ck_assert_msg(got == st, "open of %s gave '%s' (%s), expected '%s'", path, tg_status_name(got),
                  tg_error_message(), tg_status_name(st));
    ck_assert_ptr_null(f);
    tg_assert_msg_has(tg_error_message(), path);
    tg_assert_msg_has(tg_error_message(), frag);
}

/* Header text in a fresh file "name" must be rejected with frag. */
static void header_fails(const char *name, const char *header, size_t datalen, const char *frag) {
    const char *p = tmp_path(name);
    write_st(p, header, datalen);
    open_fails(p, TG_ERR_FORMAT, frag);
}

static uint32_t f32_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

/* Assert two floats are the same bit pattern (so -0 and NaN payloads count). */
#define assert_same_f32(a, b)                                                                      \
    ck_assert_msg(f32_bits(a) == f32_bits(b), "%s = %.9g (0x%08x), expected %.9g (0x%08x)", #a,    \
                  (double)(a), f32_bits(a), (double)(b), f32_bits(b))

static size_t find_ok(const tg_st_file *f, const char *name) {
    size_t i = SIZE_MAX;
    ck_assert_msg(tg_st_find(f, name, &i) == TG_OK, "%s", tg_error_message());
    ck_assert_str_eq(tg_st_name(f, i), name);
    return i;
}

/* ---- tests ------------------------------------------------------------------------------ */

START_TEST(st_dtype_table) {
    static const char *names[] = {"BOOL", "U8",  "I8",  "F8_E5M2", "F8_E4M3", "I16", "U16", "F16",
                                  "BF16", "I32", "U32", "F32",     "F64",     "I64", "U64"};
    static const size_t sizes[] = {1, 1, 1, 1, 1, 2, 2, 2, 2, 4, 4, 4, 8, 8, 8};
    ck_assert_int_eq(TG_ST_DTYPE_COUNT, 15);
    for (int d = 0; d < TG_ST_DTYPE_COUNT; d++) {
        ck_assert_str_eq(tg_st_dtype_name((tg_st_dtype)d), names[d]);
        ck_assert_uint_eq(tg_st_dtype_size((tg_st_dtype)d), sizes[d]);
        tg_st_dtype back;
        ck_assert_int_eq(tg_st_dtype_parse(names[d], &back), TG_OK);
        ck_assert_int_eq(back, d);
    }
    tg_st_dtype x;
    ck_assert_int_eq(tg_st_dtype_parse("f32", &x), TG_ERR_NOT_FOUND);
    tg_assert_msg_has(tg_error_message(), "unknown dtype 'f32'");
    ck_assert_str_eq(tg_st_dtype_name(TG_ST_DTYPE_COUNT), "?");
    ck_assert_uint_eq(tg_st_dtype_size(TG_ST_DTYPE_COUNT), 0);
}
END_TEST

/* Byte strings from the Rust crate's tests (safetensors/src/tensor.rs: test_serialization,
 * test_empty): our writer must produce exactly these. */
START_TEST(st_writer_matches_rust_bytes) {
    make_tmpdir();
    static const unsigned char one[] = {
        64, 0,  0,   0,   0,   0,   0,   0,   123, 34,  97,  116, 116, 110, 46,  48,
        34, 58, 123, 34,  100, 116, 121, 112, 101, 34,  58,  34,  70,  51,  50,  34,
        44, 34, 115, 104, 97,  112, 101, 34,  58,  91,  49,  44,  50,  44,  51,  93,
        44, 34, 100, 97,  116, 97,  95,  111, 102, 102, 115, 101, 116, 115, 34,  58,
        91, 48, 44,  50,  52,  93,  125, 125, 0,   0,   0,   0,   0,   0,   128, 63,
        0,  0,  0,   64,  0,   0,   64,  64,  0,   0,   128, 64,  0,   0,   160, 64};
    static const unsigned char empty[] = {8, 0, 0, 0, 0, 0, 0, 0, 123, 125, 32, 32, 32, 32, 32, 32};
    static const unsigned char empty_meta[] = {
        40,  0,   0,   0,  0,  0,  0,   0,   123, 34,  95,  95,  109, 101, 116, 97,
        100, 97,  116, 97, 95, 95, 34,  58,  123, 34,  102, 114, 97,  109, 101, 119,
        111, 114, 107, 34, 58, 34, 112, 116, 34,  125, 125, 32,  32,  32,  32,  32};
    const float data[6] = {0, 1, 2, 3, 4, 5};
    const int64_t shape[3] = {1, 2, 3};
    size_t n;
    unsigned char *got;

    tg_st_writer *w = tg_st_writer_new();
    ck_assert_int_eq(tg_st_writer_add(w, "attn.0", TG_ST_F32, 3, shape, data), TG_OK);
    ck_assert_int_eq(tg_st_writer_save(w, tmp_path("one.safetensors")), TG_OK);
    tg_st_writer_free(w);
    got = read_bytes(tmp_path("one.safetensors"), &n);
    ck_assert_uint_eq(n, sizeof one);
    ck_assert(memcmp(got, one, n) == 0);
    free(got);

    w = tg_st_writer_new();
    ck_assert_int_eq(tg_st_writer_save(w, tmp_path("empty.safetensors")), TG_OK);
    ck_assert_int_eq(tg_st_writer_set_metadata(w, "framework", "pt"), TG_OK);
    ck_assert_int_eq(tg_st_writer_save(w, tmp_path("meta.safetensors")), TG_OK);
    tg_st_writer_free(w);
    got = read_bytes(tmp_path("empty.safetensors"), &n);
    ck_assert_uint_eq(n, sizeof empty);
    ck_assert(memcmp(got, empty, n) == 0);
    free(got);
    got = read_bytes(tmp_path("meta.safetensors"), &n);
    ck_assert_uint_eq(n, sizeof empty_meta);
    ck_assert(memcmp(got, empty_meta, n) == 0);
    free(got);
    remove_tmpdir();
}
END_TEST

START_TEST(st_round_trip) {
    make_tmpdir();
    float w2[2][3] = {{1.5f, -2.0f, 0.25f}, {1e-20f, 3e30f, -0.0f}};
    int32_t ids[4] = {7, -1, 0, 2147483647};
    float scalar = 3.5f;
    double dd[3] = {0.1, -2.0, 1e300};
    uint16_t half[3] = {0x3C00, 0xC000, 0x7BFF}; /* 1, -2, 65504 */
    const int64_t s23[2] = {2, 3}, s4[1] = {4}, s03[2] = {0, 3}, s3[1] = {3}, s111[3] = {1, 1, 3};
    const char *config = "{\"d_model\": 512, \"attention\": \"mha\", \"share_embeddings\": true}";

    tg_st_writer *w = tg_st_writer_new();
    ck_assert_int_eq(tg_st_writer_add(w, "layer.weight", TG_ST_F32, 2, s23, w2), TG_OK);
    ck_assert_int_eq(tg_st_writer_add(w, "ids", TG_ST_I32, 1, s4, ids), TG_OK);
    ck_assert_int_eq(tg_st_writer_add(w, "scalar", TG_ST_F32, 0, NULL, &scalar), TG_OK);
    ck_assert_int_eq(tg_st_writer_add(w, "empty", TG_ST_F32, 2, s03, NULL), TG_OK);
    ck_assert_int_eq(tg_st_writer_add(w, "d", TG_ST_F64, 1, s3, dd), TG_OK);
    ck_assert_int_eq(tg_st_writer_add(w, "h", TG_ST_F16, 3, s111, half), TG_OK);
    ck_assert_uint_eq(tg_st_writer_count(w), 6);
    ck_assert_int_eq(tg_st_writer_set_metadata(w, "format", "tgraph"), TG_OK);
    ck_assert_int_eq(tg_st_writer_set_metadata(w, "config", config), TG_OK);
    ck_assert_int_eq(tg_st_writer_set_metadata(w, "note", "h\xC3\xA9 \"q\"\n\t\\"), TG_OK);
    ck_assert_int_eq(tg_st_writer_set_metadata(w, "format", "tgraph-v1"), TG_OK); /* replace */
    const char *path = tmp_path("rt.safetensors");
    ck_assert_int_eq(tg_st_writer_save(w, path), TG_OK);
    tg_st_writer_free(w);
    ck_assert_int_eq(dir_entries(tmpdir), 1); /* no temporary left behind */

    tg_st_file *f = NULL;
    ck_assert_msg(tg_st_open(path, &f) == TG_OK, "%s", tg_error_message());
    ck_assert_str_eq(tg_st_path(f), path);
    ck_assert_uint_eq(tg_st_count(f), 6);
    /* Header order = data order = dtype descending (F64, F32..., I32, F16), then name. */
    static const char *order[] = {"d", "empty", "layer.weight", "scalar", "ids", "h"};
    for (size_t i = 0; i < 6; i++)
        ck_assert_str_eq(tg_st_name(f, i), order[i]);

    size_t i = find_ok(f, "layer.weight");
    ck_assert_int_eq(tg_st_tensor_dtype(f, i), TG_ST_F32);
    ck_assert_int_eq(tg_st_tensor_ndim(f, i), 2);
    ck_assert(tg_st_tensor_shape(f, i)[0] == 2 && tg_st_tensor_shape(f, i)[1] == 3);
    ck_assert_uint_eq(tg_st_tensor_numel(f, i), 6);
    ck_assert_uint_eq(tg_st_tensor_nbytes(f, i), 24);
    ck_assert(memcmp(tg_st_tensor_data(f, i), w2, 24) == 0);
    i = find_ok(f, "ids");
    ck_assert_int_eq(tg_st_tensor_dtype(f, i), TG_ST_I32);
    ck_assert(memcmp(tg_st_tensor_data(f, i), ids, sizeof ids) == 0);
    i = find_ok(f, "scalar");
    ck_assert_int_eq(tg_st_tensor_ndim(f, i), 0);
    ck_assert_uint_eq(tg_st_tensor_numel(f, i), 1);
    float sc;
    ck_assert_int_eq(tg_st_read_f32(f, i, &sc, 1), TG_OK);
    assert_same_f32(sc, 3.5f);
    i = find_ok(f, "empty");
    ck_assert_uint_eq(tg_st_tensor_numel(f, i), 0);
    ck_assert_uint_eq(tg_st_tensor_nbytes(f, i), 0);
    ck_assert(tg_st_tensor_shape(f, i)[0] == 0 && tg_st_tensor_shape(f, i)[1] == 3);
    i = find_ok(f, "d");
    ck_assert(memcmp(tg_st_tensor_data(f, i), dd, sizeof dd) == 0);
    i = find_ok(f, "h");
    float hf[3];
    ck_assert_int_eq(tg_st_read_f32(f, i, hf, 3), TG_OK);
    ck_assert(hf[0] == 1.0f && hf[1] == -2.0f && hf[2] == 65504.0f);
    /* Every tensor is aligned to its element size (the writer's layout guarantees it). */
    for (size_t k = 0; k < tg_st_count(f); k++)
        ck_assert_msg(
            (uintptr_t)tg_st_tensor_data(f, k) % tg_st_dtype_size(tg_st_tensor_dtype(f, k)) == 0,
            "tensor %s misaligned", tg_st_name(f, k));

    ck_assert_uint_eq(tg_st_metadata_count(f), 3);
    ck_assert_str_eq(tg_st_metadata(f, "format"), "tgraph-v1");
    ck_assert_str_eq(tg_st_metadata(f, "config"), config);
    ck_assert_str_eq(tg_st_metadata(f, "note"), "h\xC3\xA9 \"q\"\n\t\\");
    ck_assert_ptr_null(tg_st_metadata(f, "absent"));
    ck_assert_str_eq(tg_st_metadata_key(f, 1), "config"); /* insertion order kept */
    ck_assert_str_eq(tg_st_metadata_value(f, 0), "tgraph-v1");
    ck_assert_ptr_null(tg_st_metadata_key(f, 3));
    tg_st_close(f);

    /* Header length is a multiple of 8 and the file is exactly 8 + header + data. */
    size_t n;
    unsigned char *bytes = read_bytes(path, &n);
    uint64_t hl = 0;
    for (int k = 7; k >= 0; k--)
        hl = hl << 8 | bytes[k];
    ck_assert_uint_eq(hl % 8, 0);
    ck_assert_uint_eq(n, 8 + hl + 24 + 16 + 4 + 24 + 6);
    /* Padding is 0-7 spaces after the closing brace. */
    size_t end = 8 + (size_t)hl;
    while (end > 8 && bytes[end - 1] == ' ')
        end--;
    ck_assert_int_eq(bytes[end - 1], '}');
    ck_assert_uint_lt(8 + hl - end, 8);
    free(bytes);
    remove_tmpdir();
}
END_TEST

/* The file written by Python's safetensors (see make_safetensors_fixtures.py, REF). */
START_TEST(st_reads_python_fixture) {
    tg_st_file *f = NULL;
    ck_assert_msg(tg_st_open(FIXTURES "python_ref.safetensors", &f) == TG_OK, "%s",
                  tg_error_message());
    ck_assert_uint_eq(tg_st_count(f), 8);
    ck_assert_str_eq(tg_st_metadata(f, "format"), "tgraph");
    ck_assert_str_eq(tg_st_metadata(f, "note"), "h\xC3\xA9llo \"quoted\"\n");

    size_t i = find_ok(f, "f32");
    ck_assert_int_eq(tg_st_tensor_dtype(f, i), TG_ST_F32);
    ck_assert(tg_st_tensor_ndim(f, i) == 2 && tg_st_tensor_shape(f, i)[0] == 2 &&
              tg_st_tensor_shape(f, i)[1] == 3);
    float x[6];
    ck_assert_int_eq(tg_st_read_f32(f, i, x, 6), TG_OK);
    const float ex[6] = {-1.25f, 0.5f, 1.0f / 3.0f, 3.0e38f, 1.0e-45f, -0.0f};
    for (int k = 0; k < 6; k++)
        assert_same_f32(x[k], ex[k]);

    i = find_ok(f, "i32");
    ck_assert_int_eq(tg_st_tensor_dtype(f, i), TG_ST_I32);
    int32_t i32[4];
    memcpy(i32, tg_st_tensor_data(f, i), sizeof i32);
    ck_assert(i32[0] == INT32_MIN && i32[1] == -1 && i32[2] == 0 && i32[3] == INT32_MAX);

    i = find_ok(f, "i64");
    ck_assert_int_eq(tg_st_tensor_dtype(f, i), TG_ST_I64);
    int64_t i64[4];
    memcpy(i64, tg_st_tensor_data(f, i), sizeof i64);
    ck_assert(i64[0] == -(INT64_C(1) << 40) && i64[1] == -1 && i64[2] == 0 &&
              i64[3] == (INT64_C(1) << 40) + 3);
    float i64f[4];
    ck_assert_int_eq(tg_st_read_f32(f, i, i64f, 4), TG_OK);
    ck_assert(i64f[0] == -1099511627776.0f && i64f[1] == -1.0f);

    i = find_ok(f, "f16");
    ck_assert_int_eq(tg_st_tensor_dtype(f, i), TG_ST_F16);
    float h[5];
    ck_assert_int_eq(tg_st_read_f32(f, i, h, 5), TG_OK);
    const float eh[5] = {1.0f, -2.5f, 65504.0f, 0x1p-24f, 0.0999755859375f};
    for (int k = 0; k < 5; k++)
        assert_same_f32(h[k], eh[k]);

    i = find_ok(f, "bf16");
    ck_assert_int_eq(tg_st_tensor_dtype(f, i), TG_ST_BF16);
    float b[4];
    ck_assert_int_eq(tg_st_read_f32(f, i, b, 4), TG_OK);
    const float eb[4] = {1.0f, -3.140625f, 0.015625f, 3.3895313892515355e38f};
    for (int k = 0; k < 4; k++)
        assert_same_f32(b[k], eb[k]);

    i = find_ok(f, "f64");
    ck_assert_int_eq(tg_st_tensor_dtype(f, i), TG_ST_F64);
    double d[2];
    memcpy(d, tg_st_tensor_data(f, i), sizeof d);
    ck_assert(d[0] == 0.1 && d[1] == -1.0e300);
    float df[2];
    ck_assert_int_eq(tg_st_read_f32(f, i, df, 2), TG_OK);
    assert_same_f32(df[0], 0.1f);
    ck_assert(isinf(df[1]) && df[1] < 0);

    i = find_ok(f, "scalar");
    ck_assert_int_eq(tg_st_tensor_ndim(f, i), 0);
    ck_assert_int_eq(tg_st_read_f32(f, i, x, 1), TG_OK);
    assert_same_f32(x[0], 42.0f);

    i = find_ok(f, "empty");
    ck_assert_uint_eq(tg_st_tensor_numel(f, i), 0);
    ck_assert(tg_st_tensor_ndim(f, i) == 2 && tg_st_tensor_shape(f, i)[1] == 3);
    tg_st_close(f);
}
END_TEST

/* Our writer's output for fixed inputs must equal the committed file that Python's
 * safetensors was shown to load (and to reproduce byte for byte) by
 * make_safetensors_fixtures.py. Set TG_ST_WRITE_FIXTURE=<path> to regenerate it. */
START_TEST(st_writer_matches_committed_fixture) {
    make_tmpdir();
    const float fc1[6] = {-1.0f, -0.5f, 0.0f, 0.5f, 1.0f, 1.5f};
    const float bias[2] = {0.25f, -0.125f};
    const int32_t ids[5] = {0, 1, 2, 3, -7};
    const float step = 1000.0f;
    const uint16_t half[2] = {0x3C00, 0xC000}; /* 1.0, -2.0 (little-endian host) */
    const int64_t s23[2] = {2, 3}, s2[1] = {2}, s5[1] = {5};
    tg_st_writer *w = tg_st_writer_new();
    ck_assert_int_eq(tg_st_writer_add(w, "encoder.layers.0.ffn.fc1.weight", TG_ST_F32, 2, s23, fc1),
                     TG_OK);
    ck_assert_int_eq(tg_st_writer_add(w, "encoder.layers.0.ffn.fc1.bias", TG_ST_F32, 1, s2, bias),
                     TG_OK);
    ck_assert_int_eq(tg_st_writer_add(w, "ids", TG_ST_I32, 1, s5, ids), TG_OK);
    ck_assert_int_eq(tg_st_writer_add(w, "step", TG_ST_F32, 0, NULL, &step), TG_OK);
    ck_assert_int_eq(tg_st_writer_add(w, "half", TG_ST_F16, 1, s2, half), TG_OK);
    ck_assert_int_eq(tg_st_writer_set_metadata(w, "format", "tgraph"), TG_OK);
    const char *out = getenv("TG_ST_WRITE_FIXTURE");
    if (out && *out) ck_assert_int_eq(tg_st_writer_save(w, out), TG_OK);
    ck_assert_int_eq(tg_st_writer_save(w, tmp_path("mine.safetensors")), TG_OK);
    tg_st_writer_free(w);
    size_t n1, n2;
    unsigned char *mine = read_bytes(tmp_path("mine.safetensors"), &n1);
    unsigned char *ref = read_bytes(FIXTURES "tgraph_written.safetensors", &n2);
    ck_assert_uint_eq(n1, n2);
    ck_assert_msg(memcmp(mine, ref, n1) == 0, "writer output differs from the fixture");
    free(mine);
    free(ref);
    remove_tmpdir();
}
END_TEST

START_TEST(st_bad_length_field) {
    make_tmpdir();
    const char *p = tmp_path("short.safetensors");
    write_bytes(p, "\x05\0\0\0\0", 5);
    open_fails(p, TG_ERR_FORMAT, "file is 5 bytes, shorter than the 8-byte header length");
    p = tmp_path("zero.safetensors");
    write_bytes(p, "", 0);
    open_fails(p, TG_ERR_FORMAT, "file is 0 bytes");
    /* Header length 2^63 - 1 in a 1024-byte file. */
    unsigned char big[1024] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F};
    p = tmp_path("huge.safetensors");
    write_bytes(p, big, sizeof big);
    open_fails(p, TG_ERR_FORMAT, "header length 9223372036854775807 exceeds file size 1024");
    /* Off by one: header claims one byte more than there is. */
    unsigned char one[10] = {3, 0, 0, 0, 0, 0, 0, 0, '{', '}'};
    p = tmp_path("off1.safetensors");
    write_bytes(p, one, sizeof one);
    open_fails(p, TG_ERR_FORMAT, "header length 3 exceeds file size 10");
    remove_tmpdir();
}
END_TEST

START_TEST(st_bad_header_json) {
    make_tmpdir();
    header_fails("trunc.st", "{\"a\": {\"dtype\": \"F32\"", 0,
                 "header is not valid JSON: tg_json_parse: byte 21");
    header_fails("comma.st", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},}", 4,
                 "trailing comma in object");
    header_fails("utf8.st", "{\"caf\xC3\x28\": 1}", 0, "header is not valid UTF-8 (byte 5");
    header_fails("array.st", "[1, 2]", 0, "header is a JSON array, not an object");
    header_fails("dup.st",
                 "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                 "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
                 8, "duplicate key \"a\"");
    header_fails("nul.st",
                 "{\"a\\u0000b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
                 "contains a NUL character");
    remove_tmpdir();
}
END_TEST

START_TEST(st_bad_entries) {
    make_tmpdir();
    header_fails("nodtype.st", "{\"w\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
                 "tensor 'w': missing \"dtype\"");
    header_fails("noshape.st", "{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4,
                 "tensor 'w': missing \"shape\"");
    header_fails("nooff.st", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4,
                 "tensor 'w': missing \"data_offsets\"");
    header_fails("baddtype.st", "{\"w\":{\"dtype\":\"F31\",\"shape\":[1],\"data_offsets\":[0,4]}}",
                 4, "tensor 'w': unknown dtype 'F31'");
    header_fails("numdtype.st", "{\"w\":{\"dtype\":4,\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
                 "tensor 'w': \"dtype\" is a number, not a string");
    header_fails("negshape.st", "{\"w\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}",
                 4, "tensor 'w': shape[0] is not a non-negative integer");
    header_fails("fracshape.st",
                 "{\"w\":{\"dtype\":\"F32\",\"shape\":[1,1.5],\"data_offsets\":[0,4]}}", 4,
                 "tensor 'w': shape[1] is not a non-negative integer");
    header_fails("strshape.st",
                 "{\"w\":{\"dtype\":\"F32\",\"shape\":\"1\",\"data_offsets\":[0,4]}}", 4,
                 "tensor 'w': \"shape\" is a string, not an array");
    header_fails("off3.st", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", 8,
                 "tensor 'w': \"data_offsets\" must be an array [begin, end]");
    header_fails("notobj.st", "{\"w\":[1,2]}", 0, "tensor 'w': entry is a array, not an object");
    header_fails("overflow.st",
                 "{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4294967296],"
                 "\"data_offsets\":[0,4]}}",
                 4, "tensor 'w': F32 [4294967296, 4294967296, 4294967296] has more bytes");
    remove_tmpdir();
}
END_TEST

START_TEST(st_bad_offsets) {
    make_tmpdir();
    header_fails("endbefore.st", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}}",
                 8, "tensor 'w': data_offsets [8, 4] end before begin");
    header_fails("past.st", "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4,
                 "tensor 'w': data_offsets [0, 8] run past the data buffer of 4 bytes");
    header_fails("size.st", "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,12]}}",
                 12, "tensor 'w': data_offsets [0, 12] hold 12 bytes but F32 [2, 3] needs 24");
    header_fails("overlap.st",
                 "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                 "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
                 12, "tensors 'a' [0, 8] and 'b' [4, 12] overlap");
    /* A zero-sized tensor inside another one overlaps too (as in the Rust crate). */
    header_fails("overlap0.st",
                 "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                 "\"z\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,4]}}",
                 8, "tensors 'a' [0, 8] and 'z' [4, 4] overlap");
    header_fails("gap.st",
                 "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                 "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
                 12, "bytes [4, 8) of the data buffer belong to no tensor (gap before tensor 'b')");
    header_fails("trailing.st", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
                 10, "data buffer has 6 bytes after the last tensor");
    header_fails(
        "hugeoff.st",
        "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,18446744073709551615]}}", 4,
        "tensor 'w': data_offsets[1] is not a non-negative integer");
    remove_tmpdir();
}
END_TEST

START_TEST(st_bad_metadata) {
    make_tmpdir();
    header_fails("metanum.st", "{\"__metadata__\":{\"format\":\"tgraph\",\"epoch\":3}}", 0,
                 "metadata value for key 'epoch' is a number, not a string");
    header_fails("metaobj.st", "{\"__metadata__\":{\"config\":{\"d_model\":512}}}", 0,
                 "metadata value for key 'config' is a object, not a string");
    header_fails("metaarr.st", "{\"__metadata__\":[\"a\"]}", 0,
                 "\"__metadata__\" is a array, not an object");
    header_fails("metanul.st", "{\"__metadata__\":{\"k\":\"a\\u0000b\"}}", 0,
                 "metadata value for key 'k' contains a NUL character");
    /* An empty metadata object and no tensors is a valid (empty) file. */
    const char *p = tmp_path("emptymeta.st");
    write_st(p, "{\"__metadata__\":{}}", 0);
    tg_st_file *f = NULL;
    ck_assert_int_eq(tg_st_open(p, &f), TG_OK);
    ck_assert_uint_eq(tg_st_count(f), 0);
    ck_assert_uint_eq(tg_st_metadata_count(f), 0);
    tg_st_close(f);
    remove_tmpdir();
}
END_TEST

START_TEST(st_open_io_errors) {
    make_tmpdir();
    open_fails(tmp_path("does-not-exist.safetensors"), TG_ERR_IO, "cannot open '");
    tg_assert_msg_has(tg_error_message(), "No such file or directory");
    open_fails(tmpdir, TG_ERR_IO, "is not a regular file");
    tg_st_file *f = (tg_st_file *)1;
    ck_assert_int_eq(tg_st_open(NULL, &f), TG_ERR_INVALID);
    ck_assert_ptr_null(f);
    remove_tmpdir();
}
END_TEST

/* F16/BF16 edge cases through tg_st_open_memory, at an odd (unaligned) data offset. */
START_TEST(st_read_f32_conversions) {
    static const char hdr[] =
        "{\"h\":{\"dtype\":\"F16\",\"shape\":[8],\"data_offsets\":[0,16]},"
        "\"b\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[16,22]},"
        "\"q\":{\"dtype\":\"F8_E4M3\",\"shape\":[2],\"data_offsets\":[22,24]},"
        "\"u\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[24,26]}}";
    /* F16: +0, -0, smallest subnormal, largest subnormal, smallest normal, +inf, -inf, NaN.
     * BF16: 1, -inf, 2^-133 (subnormal). */
    static const uint16_t h[8] = {0x0000, 0x8000, 0x0001, 0x03FF, 0x0400, 0x7C00, 0xFC00, 0x7E00};
    static const uint16_t bf[3] = {0x3F80, 0xFF80, 0x0001};
    size_t hl = sizeof hdr - 1, n = 8 + hl + 26;
    unsigned char *buf = calloc(1, n);
    for (int k = 0; k < 8; k++)
        buf[k] = (unsigned char)((uint64_t)hl >> (8 * k));
    memcpy(buf + 8, hdr, hl);
    unsigned char *d = buf + 8 + hl;
    for (int k = 0; k < 8; k++)
        d[2 * k] = (unsigned char)h[k], d[2 * k + 1] = (unsigned char)(h[k] >> 8);
    for (int k = 0; k < 3; k++)
        d[16 + 2 * k] = (unsigned char)bf[k], d[16 + 2 * k + 1] = (unsigned char)(bf[k] >> 8);
    d[24] = 200;
    d[25] = 7;
    tg_st_file *f = NULL;
    ck_assert_msg(tg_st_open_memory(buf, n, "edge", &f) == TG_OK, "%s", tg_error_message());
    free(buf); /* the file keeps its own copy */
    ck_assert_str_eq(tg_st_path(f), "edge");
    float x[8];
    ck_assert_int_eq(tg_st_read_f32(f, find_ok(f, "h"), x, 8), TG_OK);
    assert_same_f32(x[0], 0.0f);
    assert_same_f32(x[1], -0.0f);
    assert_same_f32(x[2], 0x1p-24f);
    assert_same_f32(x[3], 1023 * 0x1p-24f);
    assert_same_f32(x[4], 0x1p-14f);
    ck_assert(isinf(x[5]) && x[5] > 0);
    ck_assert(isinf(x[6]) && x[6] < 0);
    ck_assert(isnan(x[7]));
    ck_assert_int_eq(tg_st_read_f32(f, find_ok(f, "b"), x, 3), TG_OK);
    assert_same_f32(x[0], 1.0f);
    ck_assert(isinf(x[1]) && x[1] < 0);
    assert_same_f32(x[2], 0x1p-133f);
    ck_assert_int_eq(tg_st_read_f32(f, find_ok(f, "u"), x, 2), TG_OK);
    ck_assert(x[0] == 200.0f && x[1] == 7.0f);
    /* Wrong count, unsupported dtype, bad index: errors, not crashes. */
    ck_assert_int_eq(tg_st_read_f32(f, find_ok(f, "h"), x, 7), TG_ERR_SHAPE);
    tg_assert_msg_has(tg_error_message(), "tensor 'h' in 'edge' has 8 elements, not 7");
    ck_assert_int_eq(tg_st_read_f32(f, find_ok(f, "q"), x, 2), TG_ERR_UNSUPPORTED);
    tg_assert_msg_has(tg_error_message(), "no conversion from F8_E4M3 to F32");
    ck_assert_int_eq(tg_st_read_f32(f, 99, x, 2), TG_ERR_INVALID);
    tg_st_close(f);
}
END_TEST

START_TEST(st_find_and_accessors) {
    tg_st_file *f = NULL;
    ck_assert_int_eq(tg_st_open(FIXTURES "python_ref.safetensors", &f), TG_OK);
    /* Every name is found at its own index. */
    for (size_t i = 0; i < tg_st_count(f); i++) {
        size_t j = SIZE_MAX;
        ck_assert_int_eq(tg_st_find(f, tg_st_name(f, i), &j), TG_OK);
        ck_assert_uint_eq(j, i);
    }
    size_t j = 12345;
    ck_assert_int_eq(tg_st_find(f, "decoder.norm.weight", &j), TG_ERR_NOT_FOUND);
    ck_assert_uint_eq(j, 12345);
    tg_assert_msg_has(tg_error_message(), "no tensor 'decoder.norm.weight' in '");
    tg_assert_msg_has(tg_error_message(), "python_ref.safetensors'");
    ck_assert_int_eq(tg_st_find(f, "__metadata__", &j), TG_ERR_NOT_FOUND);
    size_t n = tg_st_count(f);
    ck_assert_ptr_null(tg_st_name(f, n));
    ck_assert_ptr_null(tg_st_tensor_shape(f, n));
    ck_assert_ptr_null(tg_st_tensor_data(f, n));
    ck_assert_int_eq(tg_st_tensor_dtype(f, n), TG_ST_DTYPE_COUNT);
    ck_assert_uint_eq(tg_st_tensor_nbytes(f, n), 0);
    tg_st_close(f);
    tg_st_close(NULL);
}
END_TEST

START_TEST(st_writer_errors) {
    const float x[2] = {1, 2};
    const int64_t s2[1] = {2}, neg[2] = {2, -1};
    tg_st_writer *w = tg_st_writer_new();
    ck_assert_int_eq(tg_st_writer_add(w, "a", TG_ST_F32, 1, s2, x), TG_OK);
    ck_assert_int_eq(tg_st_writer_add(w, "a", TG_ST_I32, 1, s2, x), TG_ERR_INVALID);
    tg_assert_msg_has(tg_error_message(), "duplicate tensor name 'a'");
    ck_assert_int_eq(tg_st_writer_add_ref(w, "a", TG_ST_F32, 1, s2, x), TG_ERR_INVALID);
    tg_assert_msg_has(tg_error_message(), "tg_st_writer_add_ref: duplicate tensor name 'a'");
    ck_assert_int_eq(tg_st_writer_add(w, "__metadata__", TG_ST_F32, 1, s2, x), TG_ERR_INVALID);
    tg_assert_msg_has(tg_error_message(), "reserved");
    ck_assert_int_eq(tg_st_writer_add(w, "", TG_ST_F32, 1, s2, x), TG_ERR_INVALID);
    tg_assert_msg_has(tg_error_message(), "empty tensor name");
    ck_assert_int_eq(tg_st_writer_add(w, "bad\xFF", TG_ST_F32, 1, s2, x), TG_ERR_INVALID);
    tg_assert_msg_has(tg_error_message(), "not valid UTF-8");
    ck_assert_int_eq(tg_st_writer_add(w, "n", TG_ST_F32, 2, neg, x), TG_ERR_SHAPE);
    tg_assert_msg_has(tg_error_message(), "tensor 'n': dimension 1 is -1");
    ck_assert_int_eq(tg_st_writer_add(w, "nul", TG_ST_F32, 1, s2, NULL), TG_ERR_INVALID);
    tg_assert_msg_has(tg_error_message(), "data is NULL");
    ck_assert_int_eq(tg_st_writer_add(w, "t", TG_ST_DTYPE_COUNT, 1, s2, x), TG_ERR_DTYPE);
    ck_assert_int_eq(tg_st_writer_set_metadata(w, "k", "bad\xC3"), TG_ERR_INVALID);
    tg_assert_msg_has(tg_error_message(), "key 'k'");
    ck_assert_uint_eq(tg_st_writer_count(w), 1); /* failures added nothing */
    tg_st_writer_free(w);
}
END_TEST

/* add copies the data; add_ref reads it at save time. */
START_TEST(st_writer_copy_vs_ref) {
    make_tmpdir();
    float a[2] = {1, 2}, b[2] = {3, 4};
    const int64_t s2[1] = {2};
    tg_st_writer *w = tg_st_writer_new();
    ck_assert_int_eq(tg_st_writer_add(w, "copied", TG_ST_F32, 1, s2, a), TG_OK);
    ck_assert_int_eq(tg_st_writer_add_ref(w, "referenced", TG_ST_F32, 1, s2, b), TG_OK);
    a[0] = 100;
    b[0] = 300;
    ck_assert_int_eq(tg_st_writer_save(w, tmp_path("x.st")), TG_OK);
    tg_st_writer_free(w);
    tg_st_file *f = NULL;
    ck_assert_int_eq(tg_st_open(tmp_path("x.st"), &f), TG_OK);
    float v[2];
    ck_assert_int_eq(tg_st_read_f32(f, find_ok(f, "copied"), v, 2), TG_OK);
    ck_assert(v[0] == 1 && v[1] == 2);
    ck_assert_int_eq(tg_st_read_f32(f, find_ok(f, "referenced"), v, 2), TG_OK);
    ck_assert(v[0] == 300 && v[1] == 4);
    tg_st_close(f);
    remove_tmpdir();
}
END_TEST

static tg_st_writer *small_writer(float first) {
    const float x[3] = {first, 2, 3};
    const int64_t s3[1] = {3};
    tg_st_writer *w = tg_st_writer_new();
    ck_assert_int_eq(tg_st_writer_add(w, "w", TG_ST_F32, 1, s3, x), TG_OK);
    return w;
}

START_TEST(st_save_into_missing_directory) {
    make_tmpdir();
    tg_st_writer *w = small_writer(1);
    const char *p = tmp_path("no/such/dir/ckpt.safetensors");
    ck_assert_int_eq(tg_st_writer_save(w, p), TG_ERR_IO);
    tg_assert_msg_has(tg_error_message(), "cannot create '");
    tg_assert_msg_has(tg_error_message(), "ckpt.safetensors.tmp.");
    tg_assert_msg_has(tg_error_message(), "No such file or directory");
    ck_assert_int_eq(dir_entries(tmpdir), 0); /* nothing created anywhere */
    tg_st_writer_free(w);
    remove_tmpdir();
}
END_TEST

/* A save that fails must leave the previous checkpoint intact. The failure is forced by a
 * directory squatting on the temporary file's name, which we may not remove. */
START_TEST(st_failed_save_keeps_old_file) {
    make_tmpdir();
    const char *p = tmp_path("ckpt.safetensors");
    tg_st_writer *w = small_writer(1);
    ck_assert_int_eq(tg_st_writer_save(w, p), TG_OK);
    tg_st_writer_free(w);
    size_t n0;
    unsigned char *before = read_bytes(p, &n0);

    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", p, (long)getpid());
    ck_assert_int_eq(mkdir(tmp, 0755), 0);
    ck_assert_int_eq(mkdir(tmp_path("ckpt.safetensors.tmp.x"), 0755), 0); /* unrelated */
    char inner[700];
    snprintf(inner, sizeof inner, "%s/keep", tmp);
    write_bytes(inner, "k", 1);
    w = small_writer(99);
    ck_assert_int_eq(tg_st_writer_save(w, p), TG_ERR_IO);
    tg_assert_msg_has(tg_error_message(), "cannot create");
    tg_st_writer_free(w);

    size_t n1;
    unsigned char *after = read_bytes(p, &n1);
    ck_assert_uint_eq(n0, n1);
    ck_assert(memcmp(before, after, n0) == 0);
    tg_st_file *f = NULL;
    ck_assert_int_eq(tg_st_open(p, &f), TG_OK);
    float v[3];
    ck_assert_int_eq(tg_st_read_f32(f, 0, v, 3), TG_OK);
    ck_assert(v[0] == 1.0f);
    tg_st_close(f);
    ck_assert_int_eq(access(inner, F_OK), 0); /* we removed nothing that was not ours */
    free(before);
    free(after);
    remove_tmpdir();
}
END_TEST

/* rename() onto a non-empty directory fails after the data was written: the temporary
 * file must be removed. */
START_TEST(st_failed_rename_removes_temp) {
    make_tmpdir();
    const char *p = tmp_path("target");
    ck_assert_int_eq(mkdir(p, 0755), 0);
    write_bytes(tmp_path("target/x"), "x", 1);
    tg_st_writer *w = small_writer(1);
    ck_assert_int_eq(tg_st_writer_save(w, p), TG_ERR_IO);
    tg_assert_msg_has(tg_error_message(), "rename failed");
    tg_st_writer_free(w);
    ck_assert_int_eq(dir_entries(tmpdir), 1); /* only "target" */
    ck_assert_int_eq(dir_entries(p), 1);
    remove_tmpdir();
}
END_TEST

START_TEST(st_save_replaces_existing) {
    make_tmpdir();
    const char *p = tmp_path("ckpt.safetensors");
    write_bytes(p, "old contents, not a safetensors file", 36);
    tg_st_writer *w = small_writer(7);
    ck_assert_int_eq(tg_st_writer_save(w, p), TG_OK);
    ck_assert_int_eq(tg_st_writer_save(w, p), TG_OK); /* a writer can be saved twice */
    tg_st_writer_free(w);
    ck_assert_int_eq(dir_entries(tmpdir), 1);
    tg_st_file *f = NULL;
    ck_assert_msg(tg_st_open(p, &f) == TG_OK, "%s", tg_error_message());
    float v[3];
    ck_assert_int_eq(tg_st_read_f32(f, 0, v, 3), TG_OK);
    ck_assert(v[0] == 7.0f && v[2] == 3.0f);
    tg_st_close(f);
    remove_tmpdir();
}
END_TEST

Suite *tg_test_suite(void) {
    Suite *s = suite_create("safetensors");
    TCase *tc = tcase_create("safetensors");
    tcase_add_unchecked_fixture(tc, root_setup, root_teardown);
    tcase_add_test(tc, st_dtype_table);
    tcase_add_test(tc, st_writer_matches_rust_bytes);
    tcase_add_test(tc, st_round_trip);
    tcase_add_test(tc, st_reads_python_fixture);
    tcase_add_test(tc, st_writer_matches_committed_fixture);
    tcase_add_test(tc, st_bad_length_field);
    tcase_add_test(tc, st_bad_header_json);
    tcase_add_test(tc, st_bad_entries);
    tcase_add_test(tc, st_bad_offsets);
    tcase_add_test(tc, st_bad_metadata);
    tcase_add_test(tc, st_open_io_errors);
    tcase_add_test(tc, st_read_f32_conversions);
    tcase_add_test(tc, st_find_and_accessors);
    tcase_add_test(tc, st_writer_errors);
    tcase_add_test(tc, st_writer_copy_vs_ref);
    tcase_add_test(tc, st_save_into_missing_directory);
    tcase_add_test(tc, st_failed_save_keeps_old_file);
    tcase_add_test(tc, st_failed_rename_removes_temp);
    tcase_add_test(tc, st_save_replaces_existing);
    suite_add_tcase(s, tc);
    return s;
}
