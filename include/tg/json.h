/* tgraph — a small, strict JSON reader and writer (RFC 8259).
 *
 * Used for safetensors headers and checkpoint metadata (docs/model.md §4). The parser builds a DOM
 * tree of tg_json nodes:
 *   - strict grammar: no comments, no trailing commas, no leading zeros, no NaN/Infinity,
 *     no byte-order mark, nothing but whitespace after the top-level value;
 *   - strings must be valid UTF-8 (no overlong forms, no encoded surrogates, nothing above
 *     U+10FFFF); \u escapes are decoded, surrogate pairs joined, lone surrogates rejected;
 *   - numbers are kept as double (an integer lexeme that fits int64_t is also kept exactly,
 *     see tg_json_int64); numbers that overflow a double are rejected;
 *   - nesting deeper than TG_JSON_MAX_DEPTH is rejected (no stack overflow on hostile input);
 *   - objects keep their keys in file order; duplicate keys are an error;
 *   - errors name the byte offset (and line:column), e.g.
 *     "tg_json_parse: byte 17 (line 1, column 18): expected ':' after object key".
 *
 * Ownership: a tree is owned by its root; tg_json_free(root) frees every node below it.
 * Pointers returned by accessors point into the tree and live as long as the root. Nodes
 * added to an array or object with tg_json_array_append / tg_json_object_set become owned
 * by that container. */
#ifndef TG_JSON_H
#define TG_JSON_H

#include "tg/export.h"

#include <stddef.h>
#include <stdint.h>

#include "tg/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Deepest nesting of arrays/objects the parser accepts (the top-level value is depth 1). */
#define TG_JSON_MAX_DEPTH 256

typedef enum tg_json_type {
    TG_JSON_NULL,
    TG_JSON_BOOL,
    TG_JSON_NUMBER,
    TG_JSON_STRING,
    TG_JSON_ARRAY,
    TG_JSON_OBJECT
} tg_json_type;

typedef struct tg_json tg_json;

/* ---- parsing ------------------------------------------------------------------------- */

/* Parse len bytes of text (need not be NUL-terminated) into a new tree. On success *out
 * owns the tree (free with tg_json_free); on failure *out is NULL and the message gives the
 * byte offset of the problem. */
TG_API tg_status tg_json_parse(const char *text, size_t len, tg_json **out);

/* Free a tree (NULL is fine). Only free roots: a node inside a container belongs to it. */
TG_API void tg_json_free(tg_json *v);

/* ---- reading ------------------------------------------------------------------------- */

/* The node's type. Every accessor below accepts NULL (a missing member) and treats it as
 * an absent value; tg_json_kind(NULL) is TG_JSON_NULL. */
TG_API tg_json_type tg_json_kind(const tg_json *v);

/* A constant lowercase name for a type ("null", "boolean", "number", "string", "array",
 * "object"), for error messages. */
TG_API const char *tg_json_type_name(tg_json_type t);

/* Value of a boolean (0 or 1); 0 for any other type. */
TG_API int tg_json_bool(const tg_json *v);

/* Value of a number; 0.0 for any other type. */
TG_API double tg_json_number(const tg_json *v);

/* Read a number as an exact integer: succeeds for an integer lexeme that fits int64_t, or
 * for a number with an integral value of magnitude <= 2^53 (e.g. "1e3"). Fails with
 * TG_ERR_FORMAT for non-numbers, fractions and integers a double cannot hold exactly. */
TG_API tg_status tg_json_int64(const tg_json *v, int64_t *out);

/* NUL-terminated UTF-8 contents of a string node (NULL for other types). The string may
 * contain NULs from "\u0000" escapes: tg_json_string_len gives the true byte length. The
 * pointer lives as long as the tree. */
TG_API const char *tg_json_string(const tg_json *v);
TG_API size_t tg_json_string_len(const tg_json *v);

/* Number of elements of an array or members of an object; 0 for other types. */
TG_API size_t tg_json_size(const tg_json *v);

/* Element i of an array, or the value of member i of an object (file order); NULL if i is
 * out of range or v is neither. Borrowed pointer. */
TG_API const tg_json *tg_json_at(const tg_json *v, size_t i);

/* Key of member i of an object (NUL-terminated, borrowed); NULL if out of range. */
TG_API const char *tg_json_key(const tg_json *v, size_t i);

/* Value of the member named key (NUL-terminated) of an object; NULL if v is not an object
 * or has no such key. Constant time on average (objects are hashed). Borrowed pointer. */
TG_API const tg_json *tg_json_get(const tg_json *v, const char *key);

/* ---- building -------------------------------------------------------------------------- */

/* Constructors return a new node owned by the caller (until added to a container), or NULL
 * with the error set (out of memory; invalid UTF-8 for strings; non-finite numbers). */
TG_API tg_json *tg_json_new_null(void);
TG_API tg_json *tg_json_new_bool(int b);
TG_API tg_json *tg_json_new_number(double x);
/* Copies len bytes of s, which must be valid UTF-8 (may contain NULs). */
TG_API tg_json *tg_json_new_string(const char *s, size_t len);
TG_API tg_json *tg_json_new_array(void);
TG_API tg_json *tg_json_new_object(void);

/* Append item to an array. Takes ownership of item on success and on failure (a failed
 * append frees item, so builder code need not clean up). */
TG_API tg_status tg_json_array_append(tg_json *arr, tg_json *item);

/* Set member key of an object to value: appended if new, replaced in place (old value freed)
 * if the key exists. key is copied and must be valid UTF-8. Takes ownership of value on
 * success and on failure. */
TG_API tg_status tg_json_object_set(tg_json *obj, const char *key, tg_json *value);

/* ---- writing --------------------------------------------------------------------------- */

/* Serialise a tree. indent = 0 gives compact output (no spaces at all), indent > 0 pretty
 * output with that many spaces per level. Numbers are written with the fewest digits that
 * read back to the same double; integral values within 2^53 print without a fraction.
 * On success *out is a NUL-terminated malloc'd string owned by the caller (free()), and
 * *out_len (if not NULL) its length. Parsing the output gives an equal tree. */
TG_API tg_status tg_json_print(const tg_json *v, int indent, char **out, size_t *out_len);

/* Quote len bytes of UTF-8 as a JSON string literal, with the surrounding quotes: '"' and
 * '\\' escaped, control characters as \n, \t, ... or \u00XX; other characters (including
 * non-ASCII) copied. Fails with TG_ERR_FORMAT on invalid UTF-8. *out is malloc'd, owned by
 * the caller; *out_len (if not NULL) gets its length. */
TG_API tg_status tg_json_quote(const char *s, size_t len, char **out, size_t *out_len);

/* Check that len bytes are valid UTF-8 (the same rules the parser applies). Returns the
 * offset of the first bad byte, or len if all are valid. */
TG_API size_t tg_json_utf8_check(const char *s, size_t len);

#ifdef __cplusplus
}
#endif
#endif
