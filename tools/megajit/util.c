/* Error reporting, number parsing and formatting, aligned tables. */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/utf8.h"
#include "tools/megajit/cli.h"

/* A CLI has nothing sensible to do without memory but to say so and stop. */
static _Noreturn void out_of_memory(void) {
    fputs("megajit: out of memory\n", stderr);
    exit(CLI_EXIT_FAIL);
}

static void *xrealloc(void *p, size_t n) {
    void *q = realloc(p, n);
    if (!q) out_of_memory();
    return q;
}

int cli_usage_error(const char *cmd, const char *usage, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "megajit %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n\n%s", usage);
    return CLI_EXIT_USAGE;
}

void cli_bad_option_message(char **argv, int c, char *out, size_t cap) {
    const char *arg = argv[optind - 1];
    if (c == ':')
        snprintf(out, cap, "option '%s' needs a value", arg);
    else if (optopt && strncmp(arg, "--", 2) != 0)
        snprintf(out, cap, "unknown option '-%c'", optopt);
    else
        snprintf(out, cap, "unknown option '%s'", arg);
}

int cli_bad_option(const char *cmd, const char *usage, char **argv, int c) {
    char message[256];
    cli_bad_option_message(argv, c, message, sizeof message);
    return cli_usage_error(cmd, usage, "%s", message);
}

int cli_fail(const char *cmd, const char *what) {
    const char *why = mj_last_error();
    fprintf(stderr, "megajit %s: %s%s%s\n", cmd, what, *why ? ": " : "", why);
    return CLI_EXIT_FAIL;
}

/* cJSON copies the bytes of a string as they are, and a path (file names are
 * bytes) or a message quoting one may not be UTF-8, which JSON text must be.
 * Such bytes only occur inside strings (cJSON writes everything else in
 * ASCII), so each becomes the escape \ufffd and the output stays valid. */
static void put_utf8(const char *text) {
    size_t n = strlen(text);
    for (size_t i = 0; i < n;) {
        size_t ok = mj_utf8_valid_prefix(text + i, n - i);
        fwrite(text + i, 1, ok, stdout);
        i += ok;
        if (i < n) {
            fputs("\\ufffd", stdout);
            i++;
        }
    }
    putchar('\n');
}

int cli_print_json(cJSON *obj) {
    char *text = obj ? cJSON_Print(obj) : NULL;
    cJSON_Delete(obj);
    if (!text) {
        fputs("megajit: out of memory\n", stderr);
        return CLI_EXIT_FAIL;
    }
    put_utf8(text);
    cJSON_free(text);
    return 0;
}

int cli_parse_long(const char *s, long min, long max, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || isspace((unsigned char)*s) || *end || errno || v < min || v > max) return -1;
    *out = v;
    return 0;
}

int cli_parse_bytes(const char *s, int64_t *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (!*s || !isdigit((unsigned char)*s) || errno || v < 0) return -1;
    int shift = 0;
    switch (toupper((unsigned char)*end)) {
    case '\0':
        break;
    case 'K':
        shift = 10;
        break;
    case 'M':
        shift = 20;
        break;
    case 'G':
        shift = 30;
        break;
    case 'T':
        shift = 40;
        break;
    default:
        return -1;
    }
    if (*end && end[1] && strcmp(end + 1, "iB") != 0 && strcmp(end + 1, "B") != 0) return -1;
    if (v > (INT64_MAX >> shift)) return -1;
    *out = (int64_t)v << shift;
    return 0;
}

const char *cli_format_bytes(double bytes, char *buf, size_t cap) {
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    size_t u = 0;
    while (bytes >= 1024 && u + 1 < sizeof units / sizeof units[0]) {
        bytes /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(buf, cap, "%.0f B", bytes);
    else
        snprintf(buf, cap, "%.1f %s", bytes, units[u]);
    return buf;
}

const char *cli_format_time(int64_t unix_seconds, char *buf, size_t cap) {
    time_t t = (time_t)unix_seconds;
    struct tm tm;
    if (unix_seconds <= 0 || !localtime_r(&t, &tm) || !strftime(buf, cap, "%Y-%m-%d %H:%M", &tm))
        snprintf(buf, cap, "-");
    return buf;
}

struct cli_table {
    size_t ncols;
    char *align;
    char **cells; /* row-major, headers first */
    size_t count;
    size_t cap;
};

static void table_push(cli_table *t, char *cell) {
    if (t->count == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 64;
        t->cells = xrealloc(t->cells, t->cap * sizeof *t->cells);
    }
    t->cells[t->count++] = cell;
}

cli_table *cli_table_new(const char *align, const char *const *headers) {
    cli_table *t = xrealloc(NULL, sizeof *t);
    memset(t, 0, sizeof *t);
    t->ncols = strlen(align);
    t->align = xrealloc(NULL, t->ncols + 1);
    memcpy(t->align, align, t->ncols + 1);
    for (size_t i = 0; i < t->ncols; i++)
        cli_table_cell(t, "%s", headers[i]);
    return t;
}

void cli_table_cell(cli_table *t, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *cell = NULL;
    int n = vasprintf(&cell, fmt, ap);
    va_end(ap);
    if (n < 0) out_of_memory();
    table_push(t, cell);
}

void cli_table_print(const cli_table *t, FILE *f) {
    size_t *width = xrealloc(NULL, t->ncols * sizeof *width);
    memset(width, 0, t->ncols * sizeof *width);
    for (size_t i = 0; i < t->count; i++) {
        size_t len = strlen(t->cells[i]);
        if (len > width[i % t->ncols]) width[i % t->ncols] = len;
    }
    for (size_t i = 0; i < t->count; i++) {
        size_t c = i % t->ncols;
        int last = c + 1 == t->ncols || i + 1 == t->count;
        if (t->align[c] == 'r')
            fprintf(f, "%*s", (int)width[c], t->cells[i]);
        else
            fprintf(f, "%-*s", last ? 0 : (int)width[c], t->cells[i]);
        fputs(last ? "\n" : "  ", f);
    }
    free(width);
}

void cli_table_free(cli_table *t) {
    if (!t) return;
    for (size_t i = 0; i < t->count; i++)
        free(t->cells[i]);
    free(t->cells);
    free(t->align);
    free(t);
}
