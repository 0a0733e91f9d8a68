/* Option parsing for the `tg` sub-commands (see cli.h). */
#include "tools/cli.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "tg/json.h"

static const char *usage_synopsis, *usage_description;

void tg_cli_set_usage(const char *synopsis, const char *description) {
    usage_synopsis = synopsis;
    usage_description = description;
}

_Thread_local bool tg_cli_quiet = false; /* per thread: tg train --replicas */

int tg_cli_fail(const char *cmd, int code, const char *fmt, ...) {
    if (tg_cli_quiet) return code;
    va_list ap;
    va_start(ap, fmt);
    char small[1024], *msg = small;
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n >= (int)sizeof small && (msg = malloc((size_t)n + 1))) {
        va_start(ap, fmt);
        vsnprintf(msg, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    if (!msg) msg = small; /* truncated */
    /* a message quotes tokens, file names and lines from the input: control bytes in them (a
     * CR would return the cursor and garble the line) are shown escaped, as C writes them */
    fprintf(stderr, "tg %s: ", cmd);
    for (const unsigned char *c = (const unsigned char *)msg; *c; c++) {
        if (*c >= 0x20 && *c != 0x7f) fputc(*c, stderr);
        else if (*c == '\r') fputs("\\r", stderr);
        else if (*c == '\n') fputs("\\n", stderr);
        else if (*c == '\t') fputs("\\t", stderr);
        else fprintf(stderr, "\\x%02x", *c);
    }
    fputc('\n', stderr);
    if (msg != small) free(msg);
    return code;
}

/* "d_model" and "d-model" name the same option */
static bool same_name(const char *a, const char *b, size_t blen) {
    size_t i = 0;
    for (; i < blen && a[i]; i++) {
        char x = a[i] == '_' ? '-' : a[i], y = b[i] == '_' ? '-' : b[i];
        if (x != y) return false;
    }
    return i == blen && a[i] == '\0';
}

static tg_opt *find_n(tg_opt *opts, const char *name, size_t len) {
    for (tg_opt *o = opts; o->name; o++)
        if (same_name(o->name, name, len)) return o;
    return NULL;
}

tg_opt *tg_cli_find(tg_opt *opts, const char *name) { return find_n(opts, name, strlen(name)); }

static bool in_choices(const char *choices, const char *v) {
    size_t n = strlen(v);
    for (const char *p = choices; p && *p;) {
        const char *e = strchr(p, '|');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && !strncmp(p, v, n)) return true;
        p = e ? e + 1 : NULL;
    }
    return false;
}

static void range_text(const tg_opt *o, char *buf, size_t n) {
    if (o->type == TG_OPT_INT) snprintf(buf, n, "[%.0f, %.0f]", o->min, o->max);
    else snprintf(buf, n, "[%g, %g]", o->min, o->max);
}

/* Set option o from the text v (from the command line or a JSON string). */
static int set_value(const char *cmd, tg_opt *o, const char *v, const char *origin) {
    char r[80];
    switch (o->type) {
    case TG_OPT_INT: {
        char *end;
        errno = 0;
        long long x = strtoll(v, &end, 10);
        if (!*v || *end || errno)
            return tg_cli_fail(cmd, TG_CLI_ERROR, "%s--%s expects an integer, got '%s'", origin, o->name, v);
        if ((double)x < o->min || (double)x > o->max) {
            range_text(o, r, sizeof r);
            return tg_cli_fail(cmd, TG_CLI_ERROR, "%s--%s %s is out of range %s", origin, o->name, v, r);
        }
        *(int64_t *)o->dst = x;
        break;
    }
    case TG_OPT_FLOAT: {
        char *end;
        errno = 0;
        double x = strtod(v, &end);
        /* an underflow (4e-320) is a number, read as the nearest double: ERANGE only for an overflow */
        if (errno == ERANGE && fabs(x) < 1.0) errno = 0;
        if (!*v || *end || errno || !isfinite(x))
            return tg_cli_fail(cmd, TG_CLI_ERROR, "%s--%s expects a number, got '%s'", origin, o->name, v);
        if (x < o->min || x > o->max) {
            range_text(o, r, sizeof r);
            return tg_cli_fail(cmd, TG_CLI_ERROR, "%s--%s %s is out of range %s", origin, o->name, v, r);
        }
        *(double *)o->dst = x;
        break;
    }
    case TG_OPT_STRING:
        if (!*v) return tg_cli_fail(cmd, TG_CLI_ERROR, "%s--%s needs a non-empty value", origin, o->name);
        *(const char **)o->dst = v;
        break;
    case TG_OPT_CHOICE:
        if (!in_choices(o->choices, v))
            return tg_cli_fail(cmd, TG_CLI_ERROR, "%sunknown %s '%s' (one of: %s)", origin, o->name, v, o->choices);
        *(const char **)o->dst = v;
        break;
    case TG_OPT_BOOL:
        if (!strcmp(v, "true") || !strcmp(v, "1") || !strcmp(v, "yes")) *(bool *)o->dst = true;
        else if (!strcmp(v, "false") || !strcmp(v, "0") || !strcmp(v, "no")) *(bool *)o->dst = false;
        else return tg_cli_fail(cmd, TG_CLI_ERROR, "%s--%s expects true or false, got '%s'", origin, o->name, v);
        break;
    }
    o->set = true;
    return TG_CLI_OK;
}

int tg_cli_parse(const char *cmd, tg_opt *opts, int argc, char **argv, const char **pos, int max_pos, int *npos) {
    int np = 0;
    bool only_pos = false;
    if (npos) *npos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (only_pos || a[0] != '-' || !a[1]) {
            if (!pos || np >= max_pos)
                return tg_cli_fail(cmd, TG_CLI_ERROR, "unexpected argument '%s' (see tg %s --help)", a, cmd);
            pos[np++] = a;
            continue;
        }
        if (!strcmp(a, "--")) {
            only_pos = true;
            continue;
        }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            tg_cli_usage(stdout, cmd, usage_synopsis, usage_description, opts);
            return TG_CLI_HELP;
        }
        if (a[1] != '-') return tg_cli_fail(cmd, TG_CLI_ERROR, "unknown option '%s' (see tg %s --help)", a, cmd);
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        tg_opt *o = find_n(opts, name, len);
        bool negated = false;
        if (!o && len > 3 && !strncmp(name, "no-", 3)) {
            o = find_n(opts, name + 3, len - 3);
            if (o && o->type != TG_OPT_BOOL) o = NULL;
            negated = o != NULL;
        }
        if (!o) return tg_cli_fail(cmd, TG_CLI_ERROR, "unknown option '--%.*s' (see tg %s --help)", (int)len, name, cmd);
        int rc;
        if (o->type == TG_OPT_BOOL && !eq) {
            *(bool *)o->dst = !negated;
            o->set = true;
            rc = TG_CLI_OK;
        } else if (negated) {
            return tg_cli_fail(cmd, TG_CLI_ERROR, "--no-%s takes no value", o->name);
        } else if (eq) {
            rc = set_value(cmd, o, eq + 1, "");
        } else {
            if (i + 1 >= argc) return tg_cli_fail(cmd, TG_CLI_ERROR, "--%s needs a value", o->name);
            rc = set_value(cmd, o, argv[++i], "");
        }
        if (rc) return rc;
        o->on_cli = true;
    }
    if (npos) *npos = np;
    return TG_CLI_OK;
}

static void value_text(const tg_opt *o, char *buf, size_t n) {
    buf[0] = '\0';
    switch (o->type) {
    case TG_OPT_INT: snprintf(buf, n, "%lld", (long long)*(int64_t *)o->dst); break;
    case TG_OPT_FLOAT: snprintf(buf, n, "%g", *(double *)o->dst); break;
    case TG_OPT_STRING:
    case TG_OPT_CHOICE:
        if (*(const char **)o->dst) snprintf(buf, n, "%s", *(const char **)o->dst);
        break;
    case TG_OPT_BOOL: snprintf(buf, n, "%s", *(bool *)o->dst ? "on" : "off"); break;
    }
}

void tg_cli_usage(FILE *f, const char *cmd, const char *synopsis, const char *description, const tg_opt *opts) {
    fprintf(f, "usage: tg %s %s\n", cmd, synopsis ? synopsis : "[options]");
    if (description) fprintf(f, "\n%s\n", description);
    fprintf(f, "\noptions:\n");
    for (const tg_opt *o = opts; o->name; o++) {
        char left[256], val[64], r[80] = "";
        if (o->type == TG_OPT_BOOL) snprintf(left, sizeof left, "--[no-]%s", o->name);
        else if (o->type == TG_OPT_CHOICE) snprintf(left, sizeof left, "--%s %s", o->name, o->choices);
        else snprintf(left, sizeof left, "--%s %s", o->name, o->metavar ? o->metavar : "X");
        value_text(o, val, sizeof val);
        if (o->type == TG_OPT_INT || o->type == TG_OPT_FLOAT) range_text(o, r, sizeof r);
        if (strlen(left) > 34) fprintf(f, "  %s\n  %-34s %s", left, "", o->help ? o->help : "");
        else fprintf(f, "  %-34s %s", left, o->help ? o->help : "");
        if (val[0]) fprintf(f, " (default %s)", val);
        if (r[0]) fprintf(f, " %s", r);
        fputc('\n', f);
    }
    fprintf(f, "  %-34s %s\n", "-h, --help", "this text");
}

int tg_cli_apply_json(const char *cmd, tg_opt *opts, const char *text, size_t len, const char *origin, bool strict,
                      struct tg_json **json_keep) {
    tg_json *j = NULL;
    *json_keep = NULL;
    if (tg_json_parse(text, len, &j) != TG_OK)
        return tg_cli_fail(cmd, TG_CLI_ERROR, "%s: %s", origin, tg_error_message());
    if (tg_json_kind(j) != TG_JSON_OBJECT) {
        tg_json_free(j);
        return tg_cli_fail(cmd, TG_CLI_ERROR, "%s: expected a JSON object of options", origin);
    }
    char where[512];
    snprintf(where, sizeof where, "%s: ", origin);
    for (size_t i = 0; i < tg_json_size(j); i++) {
        const char *key = tg_json_key(j, i);
        const tg_json *v = tg_json_at(j, i);
        tg_opt *o = tg_cli_find(opts, key);
        if (!o) {
            if (!strict) continue;
            tg_cli_fail(cmd, TG_CLI_ERROR, "%s: unknown option '%s'", origin, key);
            tg_json_free(j);
            return TG_CLI_ERROR;
        }
        if (o->on_cli || tg_json_kind(v) == TG_JSON_NULL) continue; /* the command line wins */
        char buf[64];
        const char *s = NULL;
        tg_json_type k = tg_json_kind(v);
        bool ok = true;
        if (o->type == TG_OPT_BOOL) {
            ok = k == TG_JSON_BOOL;
            s = tg_json_bool(v) ? "true" : "false";
        } else if (o->type == TG_OPT_INT || o->type == TG_OPT_FLOAT) {
            ok = k == TG_JSON_NUMBER;
            snprintf(buf, sizeof buf, o->type == TG_OPT_INT ? "%.0f" : "%.17g", tg_json_number(v));
            if (o->type == TG_OPT_INT && ok && tg_json_number(v) != floor(tg_json_number(v))) ok = false;
            s = buf;
        } else {
            ok = k == TG_JSON_STRING;
            s = tg_json_string(v);
        }
        if (!ok) {
            tg_cli_fail(cmd, TG_CLI_ERROR, "%s: option '%s' must be %s, not %s", origin, key,
                        o->type == TG_OPT_BOOL    ? "true or false"
                        : o->type == TG_OPT_INT   ? "an integer"
                        : o->type == TG_OPT_FLOAT ? "a number"
                                                  : "a string",
                        tg_json_type_name(k));
            tg_json_free(j);
            return TG_CLI_ERROR;
        }
        if (set_value(cmd, o, s, where)) {
            tg_json_free(j);
            return TG_CLI_ERROR;
        }
    }
    *json_keep = j;
    return TG_CLI_OK;
}

int tg_cli_to_json(const tg_opt *opts, const char *const *skip, char **out) {
    tg_json *o = tg_json_new_object();
    int rc = o ? 0 : -1;
    for (const tg_opt *p = opts; rc == 0 && p->name; p++) {
        bool skipped = false;
        for (const char *const *s = skip; s && *s; s++) skipped |= !strcmp(*s, p->name);
        if (skipped) continue;
        char key[128];
        snprintf(key, sizeof key, "%s", p->name);
        for (char *c = key; *c; c++)
            if (*c == '-') *c = '_';
        tg_json *v = NULL;
        switch (p->type) {
        case TG_OPT_INT: v = tg_json_new_number((double)*(int64_t *)p->dst); break;
        case TG_OPT_FLOAT: v = tg_json_new_number(*(double *)p->dst); break;
        case TG_OPT_BOOL: v = tg_json_new_bool(*(bool *)p->dst); break;
        case TG_OPT_STRING:
        case TG_OPT_CHOICE: {
            const char *s = *(const char **)p->dst;
            v = s ? tg_json_new_string(s, strlen(s)) : tg_json_new_null();
            break;
        }
        }
        if (!v || tg_json_object_set(o, key, v) != TG_OK) rc = -1;
    }
    if (rc == 0 && tg_json_print(o, 0, out, NULL) != TG_OK) rc = -1;
    tg_json_free(o);
    return rc;
}

char *tg_cli_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) break;
        char *nb = realloc(buf, 2 * cap + 1);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    bool err = ferror(f);
    fclose(f);
    if (!buf || err) {
        free(buf);
        errno = err ? EIO : ENOMEM;
        return NULL;
    }
    buf[n] = '\0';
    if (len) *len = n;
    return buf;
}
