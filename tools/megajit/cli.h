/* Shared pieces of the megajit command-line tool. */
#ifndef MEGAJIT_CLI_H
#define MEGAJIT_CLI_H

#include <cjson/cJSON.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>

#include "include/megajit.h"

/* Exit statuses: 1 = the operation failed, 2 = the command line is wrong. */
enum { CLI_EXIT_FAIL = 1, CLI_EXIT_USAGE = 2 };

/* Subcommands; argv[0] is the subcommand's own name. */
int cmd_precompile(int argc, char **argv);
int cmd_cache(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_bench(int argc, char **argv);
/* `megajit bench mega-moe` (tools/megajit/bench_mega_moe.c); argv[0] is "mega-moe". */
int cmd_bench_mega_moe(int argc, char **argv);

/* Prints "megajit CMD: <message>" and the usage to stderr; returns CLI_EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *usage, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Reports what getopt_long rejected (it returned '?' or ':'); returns CLI_EXIT_USAGE. */
int cli_bad_option(const char *cmd, const char *usage, char **argv, int c);
/* The sentence cli_bad_option prints, into out. */
void cli_bad_option_message(char **argv, int c, char *out, size_t cap);
/* Prints "megajit CMD: <what>: <mj_last_error()>"; returns CLI_EXIT_FAIL. */
int cli_fail(const char *cmd, const char *what);
/* Prints obj as JSON on stdout and frees it; CLI_EXIT_FAIL when obj is NULL (out of memory). */
int cli_print_json(cJSON *obj);

/* Strict decimal parse within [min, max]; 0 on success. */
int cli_parse_long(const char *s, long min, long max, long *out);
/* A byte count with an optional K/M/G/T suffix (powers of 1024); 0 on success. */
int cli_parse_bytes(const char *s, int64_t *out);
/* "12.3 MiB" into buf. */
const char *cli_format_bytes(double bytes, char *buf, size_t cap);
/* "2024-05-01 12:34" (local time) into buf; "-" for 0. */
const char *cli_format_time(int64_t unix_seconds, char *buf, size_t cap);

/* A table printed with aligned columns. align holds one 'l' or 'r' per column. */
typedef struct cli_table cli_table;
cli_table *cli_table_new(const char *align, const char *const *headers);
/* Appends one cell; rows wrap after the last column. */
void cli_table_cell(cli_table *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cli_table_print(const cli_table *t, FILE *f);
void cli_table_free(cli_table *t);

#endif
