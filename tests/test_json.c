/* Tests for the strict JSON parser and writer (core/json.c). */
#include "tg/json.h"

#include "tg_check.h"

#include <stdio.h>
#include <stdlib.h>

/* Parse a NUL-terminated literal; fail the test with the library's message if it fails. */
static tg_json *parse_ok(const char *text) {
    tg_json *v = NULL;
    tg_status st = tg_json_parse(text, strlen(text), &v);
    ck_assert_msg(st == TG_OK, "parse of <%s> failed: %s", text, tg_error_message());
    ck_assert_ptr_nonnull(v);
    return v;
}

/* Parse text that must fail with TG_ERR_FORMAT and a message containing frag. */
static void parse_bad_n(const char *text, size_t len, const char *frag) {
    tg_json *v = (tg_json *)1;
    tg_error_clear();
    tg_status st = tg_json_parse(text, len, &v);
    ck_assert_msg(st == TG_ERR_FORMAT, "parse of <%.*s> gave %s, expected a format error", (int)len,
                  text, tg_status_name(st));
    ck_assert_ptr_null(v);
    tg_assert_msg_has(tg_error_message(), frag);
}
static void parse_bad(const char *text, const char *frag) {
    parse_bad_n(text, strlen(text), frag);
}

/* Print compactly and compare with the expected text. */
static void print_is(const tg_json *v, const char *expect) {
    char *out = NULL;
    size_t n = 0;
    ck_assert_int_eq(tg_json_print(v, 0, &out, &n), TG_OK);
    ck_assert_str_eq(out, expect);
    ck_assert_uint_eq(n, strlen(expect));
    free(out);
}

/* Structural equality, numbers compared bit-for-bit via ==, -0 vs 0 by signbit. */
static int json_equal(const tg_json *a, const tg_json *b) {
    if (tg_json_kind(a) != tg_json_kind(b)) return 0;
    switch (tg_json_kind(a)) {
    case TG_JSON_NULL:
        return 1;
    case TG_JSON_BOOL:
        return tg_json_bool(a) == tg_json_bool(b);
    case TG_JSON_NUMBER:
        return tg_json_number(a) == tg_json_number(b) &&
               signbit(tg_json_number(a)) == signbit(tg_json_number(b));
    case TG_JSON_STRING:
        return tg_json_string_len(a) == tg_json_string_len(b) &&
               memcmp(tg_json_string(a), tg_json_string(b), tg_json_string_len(a)) == 0;
    case TG_JSON_ARRAY:
    case TG_JSON_OBJECT:
        if (tg_json_size(a) != tg_json_size(b)) return 0;
        for (size_t i = 0; i < tg_json_size(a); i++) {
            if (tg_json_kind(a) == TG_JSON_OBJECT &&
                strcmp(tg_json_key(a, i), tg_json_key(b, i)) != 0)
                return 0;
            if (!json_equal(tg_json_at(a, i), tg_json_at(b, i))) return 0;
        }
        return 1;
    }
    return 0;
}

/* print(parse(text)) at the given indent, then parse again: the trees must be equal. */
static void round_trip(const char *text, int indent) {
    tg_json *a = parse_ok(text), *b = NULL;
    char *out = NULL;
    size_t n;
    ck_assert_int_eq(tg_json_print(a, indent, &out, &n), TG_OK);
    ck_assert_msg(tg_json_parse(out, n, &b) == TG_OK, "reparse of <%s>: %s", out,
                  tg_error_message());
    ck_assert_msg(json_equal(a, b), "round trip of <%s> gave <%s>", text, out);
    free(out);
    tg_json_free(a);
    tg_json_free(b);
}

START_TEST(json_scalars) {
    tg_json *v = parse_ok("  null ");
    ck_assert_int_eq(tg_json_kind(v), TG_JSON_NULL);
    tg_json_free(v);
    v = parse_ok("true");
    ck_assert_int_eq(tg_json_kind(v), TG_JSON_BOOL);
    ck_assert_int_eq(tg_json_bool(v), 1);
    tg_json_free(v);
    v = parse_ok("\t\r\nfalse\n");
    ck_assert_int_eq(tg_json_bool(v), 0);
    tg_json_free(v);
    v = parse_ok("-12.5e-1");
    ck_assert_int_eq(tg_json_kind(v), TG_JSON_NUMBER);
    ck_assert(tg_json_number(v) == -1.25);
    tg_json_free(v);
    v = parse_ok("\"abc\"");
    ck_assert_str_eq(tg_json_string(v), "abc");
    ck_assert_uint_eq(tg_json_string_len(v), 3);
    ck_assert_ptr_null(tg_json_at(v, 0)); /* not a container */
    ck_assert_uint_eq(tg_json_size(v), 0);
    tg_json_free(v);
    v = parse_ok("\"\"");
    ck_assert_str_eq(tg_json_string(v), "");
    tg_json_free(v);
}
END_TEST

START_TEST(json_numbers) {
    static const struct {
        const char *text;
        double x;
    } cases[] = {
        {"0", 0.0},         {"-0", -0.0},
        {"1e3", 1000.0},    {"1E+3", 1000.0},
        {"2.5e-3", 0.0025}, {"0.1", 0.1},
        {"-7", -7.0},       {"123456789", 123456789.0},
        {"5e-324", 5e-324}, {"1.7976931348623157e308", 1.7976931348623157e308},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tg_json *v = parse_ok(cases[i].text);
        ck_assert_msg(tg_json_number(v) == cases[i].x &&
                          signbit(tg_json_number(v)) == signbit(cases[i].x),
                      "%s parsed as %.17g", cases[i].text, tg_json_number(v));
        tg_json_free(v);
    }
    /* Integers beyond 2^53 stay exact through tg_json_int64 and printing. */
    int64_t k = 0;
    tg_json *v = parse_ok("9007199254740993");
    ck_assert_int_eq(tg_json_int64(v, &k), TG_OK);
    ck_assert(k == 9007199254740993LL);
    print_is(v, "9007199254740993");
    tg_json_free(v);
    v = parse_ok("-9223372036854775808");
    ck_assert_int_eq(tg_json_int64(v, &k), TG_OK);
    ck_assert(k == INT64_MIN);
    tg_json_free(v);
    v = parse_ok("1e3"); /* integral value written with an exponent */
    ck_assert_int_eq(tg_json_int64(v, &k), TG_OK);
    ck_assert(k == 1000);
    tg_json_free(v);
    v = parse_ok("1.5");
    ck_assert_int_eq(tg_json_int64(v, &k), TG_ERR_FORMAT);
    tg_assert_msg_has(tg_error_message(), "not an integer");
    tg_json_free(v);
    v = parse_ok("9223372036854775808"); /* INT64_MAX + 1: not exact as int64 or double */
    ck_assert_int_eq(tg_json_int64(v, &k), TG_ERR_FORMAT);
    tg_assert_msg_has(tg_error_message(), "too large");
    tg_json_free(v);
    v = parse_ok("\"1\"");
    ck_assert_int_eq(tg_json_int64(v, &k), TG_ERR_FORMAT);
    tg_assert_msg_has(tg_error_message(), "expected a number, got string");
    tg_json_free(v);
}
END_TEST

START_TEST(json_bad_numbers) {
    parse_bad("01", "leading zeros");
    parse_bad("-01", "leading zeros");
    parse_bad("1.", "expected a digit after the decimal point");
    parse_bad(".5", "unexpected '.'");
    parse_bad("+1", "unexpected '+'");
    parse_bad("-", "'-' must be followed by a digit");
    parse_bad("1e", "expected a digit in the exponent");
    parse_bad("1e+", "expected a digit in the exponent");
    parse_bad("1e400", "out of range");
    parse_bad("-1e400", "out of range");
    parse_bad("NaN", "unexpected 'N'");
    parse_bad("Infinity", "unexpected 'I'");
    parse_bad("0x10", "unexpected 'x' after the JSON value");
}
END_TEST

START_TEST(json_escapes) {
    tg_json *v = parse_ok("\"a\\\"b\\\\c\\/d\\be\\ff\\ng\\rh\\ti\"");
    ck_assert_str_eq(tg_json_string(v), "a\"b\\c/d\be\ff\ng\rh\ti");
    tg_json_free(v);
    /* U+00E9 (2 bytes), U+20AC (3 bytes), U+1F600 as the surrogate pair D83D DE00 (4 bytes). */
    v = parse_ok("\"\\u00e9\\u20AC\\uD83D\\uDE00\"");
    ck_assert_str_eq(tg_json_string(v), "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80");
    tg_json_free(v);
    /* The largest code point U+10FFFF = DBFF DFFF. */
    v = parse_ok("\"\\udbff\\udfff\"");
    ck_assert_str_eq(tg_json_string(v), "\xF4\x8F\xBF\xBF");
    tg_json_free(v);
    /* \u0000 is kept: length counts it. */
    v = parse_ok("\"a\\u0000b\"");
    ck_assert_uint_eq(tg_json_string_len(v), 3);
    ck_assert(memcmp(tg_json_string(v), "a\0b", 4) == 0);
    print_is(v, "\"a\\u0000b\"");
    tg_json_free(v);
    /* Raw UTF-8 passes through unchanged. */
    v = parse_ok("\"h\xC3\xA9llo \xE4\xB8\xAD\"");
    ck_assert_str_eq(tg_json_string(v), "h\xC3\xA9llo \xE4\xB8\xAD");
    tg_json_free(v);
}
END_TEST

START_TEST(json_bad_strings) {
    parse_bad("\"\\uD83D\"", "high surrogate \\uD83D not followed by a low surrogate");
    parse_bad("\"\\uD83Dx\"", "not followed by a low surrogate");
    parse_bad("\"\\uD83D\\u0041\"", "not followed by a low surrogate");
    parse_bad("\"\\uDE00\"", "lone low surrogate \\uDE00");
    parse_bad("\"\\u12G4\"", "\\u must be followed by 4 hex digits");
    parse_bad("\"\\x\"", "invalid escape in string: backslash followed by 'x'");
    parse_bad("\"a\nb\"", "control character 0x0A in string");
    parse_bad("\"abc", "unterminated string (opened at byte 0)");
    parse_bad("[\"ab\\", "unterminated string (opened at byte 1)");
    parse_bad("'a'", "unexpected '''");
}
END_TEST

START_TEST(json_utf8_validation) {
    /* Each is rejected with the offset of the bad byte: overlong '/', overlong 3-byte,
     * an encoded surrogate, above U+10FFFF, a lone continuation byte, a truncated
     * sequence, and bytes that never occur in UTF-8. */
    parse_bad("\"\xC0\xAF\"", "byte 1 (line 1, column 2): invalid UTF-8 byte 0xC0");
    parse_bad("\"ab\xE0\x80\xAF\"", "byte 3 (line 1, column 4): invalid UTF-8 byte 0xE0");
    parse_bad("\"\xED\xA0\x80\"", "invalid UTF-8 byte 0xED");
    parse_bad("\"\xF4\x90\x80\x80\"", "invalid UTF-8 byte 0xF4");
    parse_bad("\"\x80\"", "invalid UTF-8 byte 0x80");
    parse_bad("\"\xE2\x82\"", "invalid UTF-8 byte 0xE2");
    parse_bad("\"\xFF\"", "invalid UTF-8 byte 0xFF");
    /* The standalone checker agrees, and accepts the valid extremes. */
    ck_assert_uint_eq(tg_json_utf8_check("a\xC3\xA9\xF4\x8F\xBF\xBF", 7), 7);
    ck_assert_uint_eq(tg_json_utf8_check("ab\xED\xA0\x80", 5), 2);
    ck_assert_uint_eq(tg_json_utf8_check("\xEF\xBF\xBF\xF0\x90\x80", 6), 3);
}
END_TEST

START_TEST(json_objects_keep_order) {
    tg_json *v = parse_ok("{\"z\": 1, \"a\": [true, null, \"x\"], \"m\": {\"k\": -2}, \"\": 0}");
    ck_assert_int_eq(tg_json_kind(v), TG_JSON_OBJECT);
    ck_assert_uint_eq(tg_json_size(v), 4);
    ck_assert_str_eq(tg_json_key(v, 0), "z");
    ck_assert_str_eq(tg_json_key(v, 1), "a");
    ck_assert_str_eq(tg_json_key(v, 2), "m");
    ck_assert_str_eq(tg_json_key(v, 3), "");
    ck_assert_ptr_null(tg_json_key(v, 4));
    ck_assert(tg_json_number(tg_json_get(v, "z")) == 1.0);
    const tg_json *a = tg_json_get(v, "a");
    ck_assert_uint_eq(tg_json_size(a), 3);
    ck_assert_int_eq(tg_json_kind(tg_json_at(a, 1)), TG_JSON_NULL);
    ck_assert_str_eq(tg_json_string(tg_json_at(a, 2)), "x");
    ck_assert_ptr_null(tg_json_at(a, 3));
    ck_assert(tg_json_number(tg_json_get(tg_json_get(v, "m"), "k")) == -2.0);
    ck_assert_ptr_null(tg_json_get(v, "missing"));
    ck_assert_ptr_null(tg_json_get(tg_json_get(v, "missing"), "k")); /* NULL-safe chaining */
    ck_assert_ptr_nonnull(tg_json_get(v, ""));
    print_is(v, "{\"z\":1,\"a\":[true,null,\"x\"],\"m\":{\"k\":-2},\"\":0}");
    tg_json_free(v);
}
END_TEST

START_TEST(json_large_object_lookup) {
    /* 500 keys: exercises the hash index (objects above 8 members), in file order. */
    char *text = malloc(500 * 24 + 16);
    size_t n = 0;
    n += (size_t)sprintf(text + n, "{");
    for (int i = 0; i < 500; i++)
        n += (size_t)sprintf(text + n, "%s\"k%d\":%d", i ? "," : "", (i * 37) % 500, i);
    n += (size_t)sprintf(text + n, "}");
    tg_json *v = parse_ok(text);
    ck_assert_uint_eq(tg_json_size(v), 500);
    for (int i = 0; i < 500; i++) {
        char key[16];
        sprintf(key, "k%d", (i * 37) % 500);
        ck_assert_str_eq(tg_json_key(v, (size_t)i), key);
        const tg_json *x = tg_json_get(v, key);
        ck_assert_msg(x && tg_json_number(x) == i, "lookup of %s", key);
    }
    ck_assert_ptr_null(tg_json_get(v, "k500"));
    tg_json_free(v);
    /* A duplicate far into a big object is still caught. */
    memcpy(text + n - 1, ",\"k37\":1}", 10);
    parse_bad(text, "duplicate key \"k37\" in object");
    free(text);
}
END_TEST

START_TEST(json_bad_structure) {
    parse_bad("", "byte 0 (line 1, column 1): unexpected end of input, expected a value");
    parse_bad("   ", "unexpected end of input");
    parse_bad("[1,2,]", "byte 4 (line 1, column 5): trailing comma in array");
    parse_bad("{\"a\":1,}", "trailing comma in object");
    parse_bad("[1 2]", "expected ',' or ']' after array element, found '2'");
    parse_bad("{\"a\" 1}", "expected ':' after object key, found '1'");
    parse_bad("{\"a\":1 \"b\":2}", "expected ',' or '}' after object member");
    parse_bad("{a:1}", "expected a string key in object, found 'a'");
    parse_bad("{\"a\":1,\"a\":2}", "byte 7 (line 1, column 8): duplicate key \"a\" in object");
    parse_bad("[1", "expected ',' or ']' after array element, found end of input");
    parse_bad("{\"a\":", "unexpected end of input, expected a value");
    parse_bad("{} {}", "unexpected '{' after the JSON value");
    parse_bad("tru", "invalid literal (expected 'true')");
    parse_bad("nul", "invalid literal (expected 'null')");
    parse_bad("[1] // c", "unexpected '/' after the JSON value");
    parse_bad("\xEF\xBB\xBF{}", "byte-order mark is not allowed");
    parse_bad("{\n  \"a\": 1,\n  \"b\": x\n}", "byte 19 (line 3, column 8): unexpected 'x'");
    parse_bad_n("[1]\0", 4, "unexpected byte 0x00 after the JSON value");
}
END_TEST

START_TEST(json_depth_limit) {
    char *text = malloc(2 * (TG_JSON_MAX_DEPTH + 1) + 1);
    /* Exactly the limit parses. */
    for (int i = 0; i < TG_JSON_MAX_DEPTH; i++) {
        text[i] = '[';
        text[TG_JSON_MAX_DEPTH + i] = ']';
    }
    text[2 * TG_JSON_MAX_DEPTH] = '\0';
    tg_json *v = parse_ok(text);
    tg_json_free(v);
    /* One more level is refused at the offending bracket. */
    for (int i = 0; i <= TG_JSON_MAX_DEPTH; i++) {
        text[i] = '[';
        text[TG_JSON_MAX_DEPTH + 1 + i] = ']';
    }
    text[2 * (TG_JSON_MAX_DEPTH + 1)] = '\0';
    char frag[64];
    snprintf(frag, sizeof frag, "byte %d", TG_JSON_MAX_DEPTH);
    parse_bad(text, "nesting deeper than 256 levels");
    parse_bad(text, frag);
    free(text);
    /* A hostile 100k-deep input fails cleanly rather than overflowing the stack. */
    size_t deep = 100000;
    text = malloc(deep + 1);
    memset(text, '[', deep);
    text[deep] = '\0';
    parse_bad(text, "nesting deeper");
    free(text);
}
END_TEST

START_TEST(json_print_and_round_trip) {
    tg_json *v = parse_ok("{\"a\": [1, 2.5, -0.125, 1e21, 0.1], \"b\": {}, \"c\": [], "
                          "\"d\": \"q\\\"\\\\\\u0001\\n\\u001f\\u007f\"}");
    print_is(v, "{\"a\":[1,2.5,-0.125,1e+21,0.1],\"b\":{},\"c\":[],"
                "\"d\":\"q\\\"\\\\\\u0001\\n\\u001f\x7f\"}");
    char *out = NULL;
    ck_assert_int_eq(tg_json_print(v, 2, &out, NULL), TG_OK);
    ck_assert_str_eq(out, "{\n  \"a\": [\n    1,\n    2.5,\n    -0.125,\n    1e+21,\n    0.1\n"
                          "  ],\n  \"b\": {},\n  \"c\": [],\n  \"d\": \"q\\\"\\\\\\u0001\\n\\u001f"
                          "\x7f\"\n}");
    free(out);
    tg_json_free(v);
    round_trip("[0.1, 0.2, 0.30000000000000004, 1e-300, 5e-324, 1.7976931348623157e308, "
               "-0, 123456789012345678, 2.2250738585072014e-308, 3.141592653589793]",
               0);
    round_trip("{\"x\": {\"y\": [[], {}, [null, true, false]]}, \"s\": \"\\uD83D\\uDE00\\u0000\"}",
               4);
    round_trip("\"\xE4\xB8\xAD\\t\"", 0);
}
END_TEST

START_TEST(json_build) {
    tg_json *o = tg_json_new_object();
    ck_assert_int_eq(tg_json_object_set(o, "name", tg_json_new_string("t\xC3\xA9", 3)), TG_OK);
    tg_json *arr = tg_json_new_array();
    ck_assert_int_eq(tg_json_array_append(arr, tg_json_new_number(3)), TG_OK);
    ck_assert_int_eq(tg_json_array_append(arr, tg_json_new_bool(1)), TG_OK);
    ck_assert_int_eq(tg_json_array_append(arr, tg_json_new_null()), TG_OK);
    ck_assert_int_eq(tg_json_object_set(o, "list", arr), TG_OK);
    ck_assert_int_eq(tg_json_object_set(o, "n", tg_json_new_number(0.5)), TG_OK);
    /* Setting an existing key replaces the value in place, order unchanged. */
    ck_assert_int_eq(tg_json_object_set(o, "name", tg_json_new_string("x", 1)), TG_OK);
    print_is(o, "{\"name\":\"x\",\"list\":[3,true,null],\"n\":0.5}");
    /* Invalid inputs are refused with the error set, and ownership rules hold (a failed
     * set frees the value: valgrind/ASan would flag a leak or double free here). */
    tg_error_clear();
    ck_assert_ptr_null(tg_json_new_string("\xC3", 1));
    tg_assert_msg_has(tg_error_message(), "invalid UTF-8 at byte 0");
    ck_assert_ptr_null(tg_json_new_number(NAN));
    tg_assert_msg_has(tg_error_message(), "cannot be written as JSON");
    ck_assert_int_eq(tg_json_object_set(o, "bad\xFF", tg_json_new_null()), TG_ERR_FORMAT);
    ck_assert_int_eq(tg_json_array_append(o, tg_json_new_null()), TG_ERR_INVALID);
    tg_assert_msg_has(tg_error_message(), "not an array");
    ck_assert_uint_eq(tg_json_size(o), 3);
    tg_json_free(o);
}
END_TEST

START_TEST(json_quote) {
    char *q = NULL;
    size_t n = 0;
    ck_assert_int_eq(tg_json_quote("a\"b\\c\n\t\x01\xC3\xA9", 10, &q, &n), TG_OK);
    ck_assert_str_eq(q, "\"a\\\"b\\\\c\\n\\t\\u0001\xC3\xA9\"");
    ck_assert_uint_eq(n, strlen(q));
    free(q);
    ck_assert_int_eq(tg_json_quote("", 0, &q, NULL), TG_OK);
    ck_assert_str_eq(q, "\"\"");
    free(q);
    ck_assert_int_eq(tg_json_quote("ok\xED\xA0\x80", 5, &q, NULL), TG_ERR_FORMAT);
    ck_assert_ptr_null(q);
    tg_assert_msg_has(tg_error_message(), "invalid UTF-8 at byte 2");
}
END_TEST

Suite *tg_test_suite(void) {
    Suite *s = suite_create("json");
    TCase *tc = tcase_create("json");
    tcase_add_test(tc, json_scalars);
    tcase_add_test(tc, json_numbers);
    tcase_add_test(tc, json_bad_numbers);
    tcase_add_test(tc, json_escapes);
    tcase_add_test(tc, json_bad_strings);
    tcase_add_test(tc, json_utf8_validation);
    tcase_add_test(tc, json_objects_keep_order);
    tcase_add_test(tc, json_large_object_lookup);
    tcase_add_test(tc, json_bad_structure);
    tcase_add_test(tc, json_depth_limit);
    tcase_add_test(tc, json_print_and_round_trip);
    tcase_add_test(tc, json_build);
    tcase_add_test(tc, json_quote);
    suite_add_tcase(s, tc);
    return s;
}
