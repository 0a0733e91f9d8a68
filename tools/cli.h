/* Option parsing shared by the `tg` sub-commands: a table of long options, each writing into a
 * variable of the command, with range checks for numbers and clear messages.
 *
 * Syntax: --name VALUE, --name=VALUE; booleans as --name, --no-name or --name=true|false;
 * -h / --help prints the usage. A JSON object (a --config file, or the options a resumed run
 * stored) can set the options the command line did not: keys are the option names with '-' or
 * '_' ("d_model" and "d-model" are the same key). */
#ifndef TG_TOOLS_CLI_H
#define TG_TOOLS_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

typedef enum tg_opt_type {
    TG_OPT_INT,    /* int64_t *, range [min, max] */
    TG_OPT_FLOAT,  /* double *, range [min, max], finite */
    TG_OPT_STRING, /* const char ** (points into argv or into the JSON kept alive by the caller) */
    TG_OPT_BOOL,   /* bool * */
    TG_OPT_CHOICE, /* const char **, one of `choices` ("a|b|c") */
} tg_opt_type;

typedef struct tg_opt {
    const char *name; /* long name without "--"; NULL ends a table */
    tg_opt_type type;
    void *dst;
    double min, max;     /* numeric range, inclusive */
    const char *choices; /* TG_OPT_CHOICE: "a|b|c" */
    const char *metavar; /* "N", "FILE", ... for the usage text */
    const char *help;
    /* filled by the parser */
    bool on_cli; /* given on the command line */
    bool set;    /* given on the command line or by a JSON object */
} tg_opt;

/* Exit codes of every sub-command. */
enum { TG_EXIT_OK = 0, TG_EXIT_RUNTIME = 1, TG_EXIT_USAGE = 2, TG_EXIT_INTERRUPTED = 130 };

/* What tg_cli_parse found. */
enum { TG_CLI_OK = 0, TG_CLI_HELP = 1, TG_CLI_ERROR = 2 };

/* Parse argv[1..argc) (argv[0] is the sub-command's name) into the table. Positional arguments
 * go to pos[0..max_pos) with their count in *npos (pos may be NULL: then none are allowed).
 * "--" ends the options. On TG_CLI_HELP the usage was printed to stdout; on TG_CLI_ERROR a
 * message "tg CMD: ..." was printed to stderr. */
int tg_cli_parse(const char *cmd, tg_opt *opts, int argc, char **argv, const char **pos, int max_pos, int *npos);

/* Print "usage: ..." with a synopsis, a description and the option table (current values as
 * defaults). */
void tg_cli_usage(FILE *f, const char *cmd, const char *synopsis, const char *description, const tg_opt *opts);
/* Set by a command before parsing so that --help can print its usage. */
void tg_cli_set_usage(const char *synopsis, const char *description);

/* Apply the members of a JSON object (text) to the options not given on the command line.
 * origin names the source in messages. strict: an unknown key is an error (a config file);
 * otherwise unknown keys are skipped. The caller must keep `*json_keep` (returned tree, free
 * with tg_json_free) alive while string options point into it. Returns TG_CLI_OK or
 * TG_CLI_ERROR (message printed). */
struct tg_json;
int tg_cli_apply_json(const char *cmd, tg_opt *opts, const char *text, size_t len, const char *origin, bool strict,
                      struct tg_json **json_keep);

/* The options' current values as a JSON object (keys with '_'), skipping the names listed in
 * `skip` (NULL-terminated, may be NULL). *out malloc'ed; returns 0 or -1 on out of memory. */
int tg_cli_to_json(const tg_opt *opts, const char *const *skip, char **out);

/* The option called name (NULL if none). */
tg_opt *tg_cli_find(tg_opt *opts, const char *name);

/* Print "tg CMD: <message>" to stderr (printf-style) and return code. */
int tg_cli_fail(const char *cmd, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Read a whole file into a NUL-terminated buffer (malloc'ed); NULL with errno on failure. */
/* When true, tg_cli_fail prints nothing (ranks > 0 of a training group: rank 0 speaks for all). */
extern _Thread_local bool tg_cli_quiet;

char *tg_cli_read_file(const char *path, size_t *len);

#endif
