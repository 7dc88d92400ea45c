/* megajit cache ls | show | stat | verify | rm | gc | export | import */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tools/megajit/cli.h"

static const char kUsage[] =
    "usage: megajit cache <subcommand> [options] [--cache DIR]\n"
    "\n"
    "subcommands:\n"
    "  ls [--family F] [--arch A] [--json]    list entries, the cache's own and those of the\n"
    "                                         MEGAJIT_CACHE_RO snapshots (column LAYER)\n"
    "  show KEY-PREFIX [--source] [--log] [--sass]\n"
    "                                         one entry (key prefix: >= 4 hex digits)\n"
    "  stat [--json]                          totals, file size, journal mode, filesystem\n"
    "  verify [--json]                        check every cubin hash (exit 1 when one is bad)\n"
    "  rm (--key K | --family F | --header PATH | --compiler V | --arch A |\n"
    "      --older-than DAYS | --all)         remove entries\n"
    "  gc --max-bytes N                       evict least recently used entries until the\n"
    "                                         cubins fit N bytes (suffixes K, M, G, T)\n"
    "  export FILE                            write a consistent, compact snapshot\n"
    "                                         (usable as a MEGAJIT_CACHE_RO layer)\n"
    "  import FILE                            copy a snapshot's entries in (existing keys win)\n"
    "\n"
    "every subcommand takes --cache DIR (default: MEGAJIT_CACHE_DIR, else\n"
    "$XDG_CACHE_HOME/megajit, else ~/.cache/megajit; `megajit info` shows it)\n"
    "and -h/--help.\n";

/* Options every subcommand accepts, plus those only some use. */
enum {
    OPT_CACHE = 1000,
    OPT_JSON,
    OPT_FAMILY,
    OPT_ARCH,
    OPT_SOURCE,
    OPT_LOG,
    OPT_SASS,
    OPT_KEY,
    OPT_HEADER,
    OPT_COMPILER,
    OPT_OLDER,
    OPT_ALL,
    OPT_MAX_BYTES,
};

typedef struct options {
    const char *cache;
    int json;
    const char *family;
    const char *arch;
    int source, log, sass;
    int selector; /* mj_cache_selector, -1 = none */
    int selectors_given;
    const char *value;
    const char *max_bytes;
    char **args; /* positional arguments */
    int nargs;
} options;

typedef struct subcommand {
    const char *name;
    int (*run)(const char *name, options *o);
    const char *usage;
    const struct option *longopts;
    int nargs; /* positional arguments required */
} subcommand;

#define COMMON_OPTS                                                                                \
    {"cache", required_argument, NULL, OPT_CACHE}, {                                               \
        "help", no_argument, NULL, 'h'                                                             \
    }

static const struct option kLsOpts[] = {COMMON_OPTS,
                                        {"json", no_argument, NULL, OPT_JSON},
                                        {"family", required_argument, NULL, OPT_FAMILY},
                                        {"arch", required_argument, NULL, OPT_ARCH},
                                        {NULL, 0, NULL, 0}};
static const struct option kShowOpts[] = {COMMON_OPTS,
                                          {"source", no_argument, NULL, OPT_SOURCE},
                                          {"log", no_argument, NULL, OPT_LOG},
                                          {"sass", no_argument, NULL, OPT_SASS},
                                          {NULL, 0, NULL, 0}};
static const struct option kJsonOpts[] = {
    COMMON_OPTS, {"json", no_argument, NULL, OPT_JSON}, {NULL, 0, NULL, 0}};
static const struct option kRmOpts[] = {COMMON_OPTS,
                                        {"json", no_argument, NULL, OPT_JSON},
                                        {"key", required_argument, NULL, OPT_KEY},
                                        {"family", required_argument, NULL, OPT_FAMILY},
                                        {"header", required_argument, NULL, OPT_HEADER},
                                        {"compiler", required_argument, NULL, OPT_COMPILER},
                                        {"arch", required_argument, NULL, OPT_ARCH},
                                        {"older-than", required_argument, NULL, OPT_OLDER},
                                        {"all", no_argument, NULL, OPT_ALL},
                                        {NULL, 0, NULL, 0}};
static const struct option kGcOpts[] = {COMMON_OPTS,
                                        {"json", no_argument, NULL, OPT_JSON},
                                        {"max-bytes", required_argument, NULL, OPT_MAX_BYTES},
                                        {NULL, 0, NULL, 0}};
static const struct option kCommonOpts[] = {COMMON_OPTS, {NULL, 0, NULL, 0}};

static int open_cache(const char *name, const options *o, int read_only, mj_cache **c) {
    if (mj_cache_open(o->cache, read_only, c) != MJ_OK) {
        char cmd[32];
        snprintf(cmd, sizeof cmd, "cache %s", name);
        return cli_fail(cmd, "cannot open the cache");
    }
    return 0;
}

static int fail(const char *name, const char *what) {
    char cmd[32];
    snprintf(cmd, sizeof cmd, "cache %s", name);
    return cli_fail(cmd, what);
}

/* ------------------------------------------------------------------- ls */

typedef struct ls_state {
    cli_table *table;
    cJSON *json;
} ls_state;

static cJSON *entry_json(const mj_cache_entry *e) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "key", e->key_hex);
    cJSON_AddStringToObject(o, "family", e->family);
    cJSON_AddStringToObject(o, "kernel_name", e->kernel_name);
    cJSON_AddStringToObject(o, "lowered_name", e->lowered_name);
    cJSON_AddStringToObject(o, "arch", e->arch);
    cJSON_AddStringToObject(o, "compiler", e->compiler);
    cJSON_AddStringToObject(o, "flags", e->flags);
    cJSON_AddNumberToObject(o, "cubin_bytes", (double)e->cubin_bytes);
    cJSON_AddNumberToObject(o, "source_bytes", (double)e->source_bytes);
    cJSON_AddNumberToObject(o, "created_at", (double)e->created_at);
    cJSON_AddNumberToObject(o, "last_used_at", (double)e->last_used_at);
    cJSON_AddNumberToObject(o, "hits", (double)e->hits);
    cJSON_AddNumberToObject(o, "compile_ms", e->compile_ms);
    cJSON_AddStringToObject(o, "layer", e->layer);
    return o;
}

static int ls_entry(const mj_cache_entry *e, void *user) {
    ls_state *s = user;
    if (s->json) {
        cJSON_AddItemToArray(s->json, entry_json(e));
        return 0;
    }
    char size[32], used[32];
    cli_table_cell(s->table, "%.12s", e->key_hex);
    cli_table_cell(s->table, "%s", e->family);
    cli_table_cell(s->table, "%s", e->arch);
    cli_table_cell(s->table, "%s", cli_format_bytes((double)e->cubin_bytes, size, sizeof size));
    cli_table_cell(s->table, "%.0f", e->compile_ms);
    cli_table_cell(s->table, "%lld", (long long)e->hits);
    cli_table_cell(s->table, "%s", cli_format_time(e->last_used_at, used, sizeof used));
    cli_table_cell(s->table, "%s", *e->layer ? e->layer : "cache");
    cli_table_cell(s->table, "%s", e->kernel_name);
    return 0;
}

static int run_ls(const char *name, options *o) {
    static const char *const headers[] = {"KEY",  "FAMILY",    "ARCH",  "CUBIN", "COMPILE MS",
                                          "HITS", "LAST USED", "LAYER", "KERNEL"};
    mj_cache *c;
    int rc = open_cache(name, o, 1, &c);
    if (rc) return rc;
    ls_state s = {0};
    if (o->json)
        s.json = cJSON_CreateArray();
    else
        s.table = cli_table_new("lllrrrlll", headers);
    if (mj_cache_list(c, o->family, o->arch, ls_entry, &s) != MJ_OK) {
        rc = fail(name, "cannot list the cache");
        cJSON_Delete(s.json);
    } else if (o->json) {
        rc = cli_print_json(s.json);
    } else {
        cli_table_print(s.table, stdout);
    }
    cli_table_free(s.table);
    mj_cache_close(c);
    return rc;
}

/* ----------------------------------------------------------------- show */

/* nvdisasm from PATH, else $CUDA_HOME/bin, else /usr/local/cuda/bin; NULL when absent. */
static char *find_nvdisasm(void) {
    const char *path = getenv("PATH");
    const char *cuda = getenv("CUDA_HOME");
    char *dirs = NULL;
    if (asprintf(&dirs, "%s:%s/bin:/usr/local/cuda/bin", path ? path : "",
                 cuda && *cuda ? cuda : "/usr/local/cuda") < 0)
        return NULL;
    char *found = NULL, *save = NULL;
    for (char *d = strtok_r(dirs, ":", &save); d && !found; d = strtok_r(NULL, ":", &save)) {
        char *candidate;
        if (asprintf(&candidate, "%s/nvdisasm", d) < 0) break;
        if (access(candidate, X_OK) == 0)
            found = candidate;
        else
            free(candidate);
    }
    free(dirs);
    return found;
}

static int disassemble(const char *nvdisasm, const void *cubin, size_t size) {
    const char *tmp = getenv("TMPDIR");
    char *file;
    if (asprintf(&file, "%s/megajit-XXXXXX.cubin", tmp && *tmp ? tmp : "/tmp") < 0) return -1;
    int fd = mkstemps(file, 6);
    int rc = -1;
    if (fd >= 0) {
        FILE *f = fdopen(fd, "wb");
        int written = f && fwrite(cubin, 1, size, f) == size;
        if (f ? fclose(f) != 0 : close(fd) != 0) written = 0;
        if (written) {
            fflush(stdout);
            pid_t pid = fork();
            if (pid == 0) {
                execl(nvdisasm, "nvdisasm", "-c", file, (char *)NULL);
                _exit(127);
            }
            int status;
            if (pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
                WEXITSTATUS(status) == 0)
                rc = 0;
        }
        unlink(file);
    }
    free(file);
    return rc;
}

static int valid_key_prefix(const char *s) {
    size_t n = strlen(s);
    if (n < 4 || n > 32) return 0;
    for (size_t i = 0; i < n; i++)
        if (!isxdigit((unsigned char)s[i])) return 0;
    return 1;
}

static int run_show(const char *name, options *o) {
    const char *prefix = o->args[0];
    if (!valid_key_prefix(prefix))
        return cli_usage_error("cache show", kUsage,
                               "'%s' is not a key prefix (4 to 32 hexadecimal digits)", prefix);
    char *nvdisasm = NULL;
    if (o->sass && !(nvdisasm = find_nvdisasm())) {
        fprintf(stderr, "megajit cache show: --sass needs nvdisasm from the CUDA toolkit, which "
                        "is neither on PATH nor in $CUDA_HOME/bin\n");
        return CLI_EXIT_FAIL;
    }
    mj_cache *c;
    int rc = open_cache(name, o, 1, &c);
    if (rc) {
        free(nvdisasm);
        return rc;
    }
    mj_cache_detail d;
    if (mj_cache_show(c, prefix, &d) != MJ_OK) {
        rc = fail(name, prefix);
    } else {
        const mj_cache_entry *e = &d.entry;
        char size[32], created[32], used[32];
        cli_table *t = cli_table_new("ll", (const char *const[]){"key", e->key_hex});
        cli_table_cell(t, "family");
        cli_table_cell(t, "%s", e->family);
        cli_table_cell(t, "kernel");
        cli_table_cell(t, "%s", e->kernel_name);
        cli_table_cell(t, "symbol");
        cli_table_cell(t, "%s", e->lowered_name);
        cli_table_cell(t, "arch");
        cli_table_cell(t, "%s", e->arch);
        cli_table_cell(t, "compiler");
        cli_table_cell(t, "%s", e->compiler);
        cli_table_cell(t, "flags");
        cli_table_cell(t, "%s", e->flags);
        cli_table_cell(t, "cubin");
        cli_table_cell(t, "%s (%lld bytes)",
                       cli_format_bytes((double)e->cubin_bytes, size, sizeof size),
                       (long long)e->cubin_bytes);
        cli_table_cell(t, "source");
        cli_table_cell(t, "%lld bytes", (long long)e->source_bytes);
        cli_table_cell(t, "compile");
        cli_table_cell(t, "%.1f ms", e->compile_ms);
        cli_table_cell(t, "created");
        cli_table_cell(t, "%s", cli_format_time(e->created_at, created, sizeof created));
        cli_table_cell(t, "last used");
        cli_table_cell(t, "%s", cli_format_time(e->last_used_at, used, sizeof used));
        cli_table_cell(t, "hits");
        cli_table_cell(t, "%lld", (long long)e->hits);
        for (size_t i = 0; d.headers && d.headers[i]; i++) {
            cli_table_cell(t, "%s", i ? "" : "headers");
            cli_table_cell(t, "%s", d.headers[i]);
        }
        cli_table_print(t, stdout);
        cli_table_free(t);
        if (o->source) printf("\n--- source ---\n%s\n", d.source ? d.source : "");
        if (o->log) printf("\n--- NVRTC log ---\n%s\n", d.log && *d.log ? d.log : "(empty)");
        if (o->sass) {
            printf("\n--- SASS ---\n");
            if (disassemble(nvdisasm, d.cubin, d.cubin_size) != 0) {
                fprintf(stderr, "megajit cache show: %s could not disassemble the cubin\n",
                        nvdisasm);
                rc = CLI_EXIT_FAIL;
            }
        }
    }
    free(nvdisasm);
    mj_cache_close(c);
    return rc;
}

/* ----------------------------------------------------------------- stat */

static int run_stat(const char *name, options *o) {
    mj_cache *c;
    int rc = open_cache(name, o, 1, &c);
    if (rc) return rc;
    mj_cache_stats s;
    if (mj_cache_stat(c, &s) != MJ_OK) {
        rc = fail(name, "cannot read the cache statistics");
    } else if (o->json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "path", mj_cache_path(c));
        cJSON_AddNumberToObject(j, "entries", (double)s.entries);
        cJSON_AddNumberToObject(j, "cubin_bytes", (double)s.cubin_bytes);
        cJSON_AddNumberToObject(j, "file_bytes", (double)s.file_bytes);
        cJSON_AddNumberToObject(j, "hits", (double)s.hits);
        cJSON_AddNumberToObject(j, "compile_ms_total", s.compile_ms_total);
        cJSON_AddNumberToObject(j, "compile_ms_max", s.compile_ms_max);
        cJSON_AddStringToObject(j, "journal_mode", s.journal_mode ? s.journal_mode : "");
        cJSON_AddStringToObject(j, "filesystem", s.filesystem ? s.filesystem : "");
        rc = cli_print_json(j);
    } else {
        char cubin[32], file[32];
        cli_table *t = cli_table_new("ll", (const char *const[]){"path", mj_cache_path(c)});
        cli_table_cell(t, "entries");
        cli_table_cell(t, "%lld", (long long)s.entries);
        cli_table_cell(t, "cubins");
        cli_table_cell(t, "%s", cli_format_bytes((double)s.cubin_bytes, cubin, sizeof cubin));
        cli_table_cell(t, "on disk");
        cli_table_cell(t, "%s (database + WAL)",
                       cli_format_bytes((double)s.file_bytes, file, sizeof file));
        cli_table_cell(t, "hits");
        cli_table_cell(t, "%lld", (long long)s.hits);
        cli_table_cell(t, "compile time");
        cli_table_cell(t, "%.1f s total, %.0f ms max", s.compile_ms_total / 1000, s.compile_ms_max);
        cli_table_cell(t, "journal mode");
        cli_table_cell(t, "%s",
                       s.journal_mode && *s.journal_mode ? s.journal_mode : "(no database yet)");
        cli_table_cell(t, "filesystem");
        cli_table_cell(t, "%s", s.filesystem ? s.filesystem : "");
        cli_table_print(t, stdout);
        cli_table_free(t);
    }
    mj_cache_close(c);
    return rc;
}

/* --------------------------------------------------------------- verify */

typedef struct verify_state {
    cJSON *bad;
    int json;
} verify_state;

static void verify_bad(const char *key_hex, const char *reason, void *user) {
    verify_state *s = user;
    if (s->json) {
        cJSON *b = cJSON_CreateObject();
        cJSON_AddStringToObject(b, "key", key_hex);
        cJSON_AddStringToObject(b, "reason", reason);
        cJSON_AddItemToArray(s->bad, b);
    } else {
        printf("bad  %s  %s\n", key_hex, reason);
    }
}

static int run_verify(const char *name, options *o) {
    mj_cache *c;
    int rc = open_cache(name, o, 1, &c);
    if (rc) return rc;
    verify_state s = {.json = o->json, .bad = o->json ? cJSON_CreateArray() : NULL};
    int64_t checked = 0, bad = 0;
    if (mj_cache_verify(c, &checked, &bad, verify_bad, &s) != MJ_OK) {
        rc = fail(name, "cannot verify the cache");
        cJSON_Delete(s.bad);
    } else {
        if (o->json) {
            cJSON *j = cJSON_CreateObject();
            cJSON_AddNumberToObject(j, "checked", (double)checked);
            cJSON_AddNumberToObject(j, "bad", (double)bad);
            cJSON_AddItemToObject(j, "bad_entries", s.bad);
            rc = cli_print_json(j);
        } else {
            printf("%lld entries checked, %lld bad\n", (long long)checked, (long long)bad);
        }
        if (!rc && bad) rc = CLI_EXIT_FAIL;
    }
    mj_cache_close(c);
    return rc;
}

/* ------------------------------------------------------------ rm and gc */

static int run_rm(const char *name, options *o) {
    if (o->selectors_given != 1)
        return cli_usage_error("cache rm", kUsage,
                               "give exactly one of --key, --family, --header, --compiler, "
                               "--arch, --older-than, --all");
    if (o->selector == MJ_CACHE_SELECT_OLDER) {
        char *end;
        errno = 0;
        double days = strtod(o->value, &end);
        if (!*o->value || *end || errno || !isfinite(days) || !(days >= 0))
            return cli_usage_error("cache rm", kUsage,
                                   "--older-than: expected a number of days, got '%s'", o->value);
    }
    if (o->selector == MJ_CACHE_SELECT_KEY && !valid_key_prefix(o->value))
        return cli_usage_error("cache rm", kUsage,
                               "--key: '%s' is not a key prefix (4 to 32 hexadecimal digits)",
                               o->value);
    mj_cache *c;
    int rc = open_cache(name, o, 0, &c);
    if (rc) return rc;
    int64_t removed = 0;
    if (mj_cache_remove(c, (mj_cache_selector)o->selector, o->value, &removed) != MJ_OK) {
        rc = fail(name, "cannot remove entries");
    } else if (o->json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddNumberToObject(j, "removed", (double)removed);
        rc = cli_print_json(j);
    } else {
        printf("removed %lld entr%s\n", (long long)removed, removed == 1 ? "y" : "ies");
    }
    mj_cache_close(c);
    return rc;
}

static int run_gc(const char *name, options *o) {
    int64_t max_bytes;
    if (!o->max_bytes) return cli_usage_error("cache gc", kUsage, "--max-bytes is required");
    if (cli_parse_bytes(o->max_bytes, &max_bytes) != 0)
        return cli_usage_error("cache gc", kUsage,
                               "--max-bytes: expected a byte count like 500M, got '%s'",
                               o->max_bytes);
    mj_cache *c;
    int rc = open_cache(name, o, 0, &c);
    if (rc) return rc;
    int64_t removed = 0, after = 0;
    if (mj_cache_gc(c, max_bytes, &removed, &after) != MJ_OK) {
        rc = fail(name, "cannot collect the cache");
    } else if (o->json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddNumberToObject(j, "removed", (double)removed);
        cJSON_AddNumberToObject(j, "cubin_bytes", (double)after);
        rc = cli_print_json(j);
    } else {
        char size[32];
        printf("removed %lld entr%s; cubins now take %s\n", (long long)removed,
               removed == 1 ? "y" : "ies", cli_format_bytes((double)after, size, sizeof size));
    }
    mj_cache_close(c);
    return rc;
}

/* ------------------------------------------------------ export / import */

static int run_export(const char *name, options *o) {
    mj_cache *c;
    int rc = open_cache(name, o, 1, &c);
    if (rc) return rc;
    if (mj_cache_export(c, o->args[0]) != MJ_OK)
        rc = fail(name, o->args[0]);
    else
        printf("exported %s to %s\n", mj_cache_path(c), o->args[0]);
    mj_cache_close(c);
    return rc;
}

static int run_import(const char *name, options *o) {
    mj_cache *c;
    int rc = open_cache(name, o, 0, &c);
    if (rc) return rc;
    int64_t imported = 0;
    if (mj_cache_import(c, o->args[0], &imported) != MJ_OK)
        rc = fail(name, o->args[0]);
    else
        printf("imported %lld entr%s from %s\n", (long long)imported, imported == 1 ? "y" : "ies",
               o->args[0]);
    mj_cache_close(c);
    return rc;
}

static const subcommand kSubcommands[] = {
    {"ls", run_ls,
     "usage: megajit cache ls [--family F] [--arch A] [--json] [--cache DIR]\n"
     "  entries of the cache, then of each MEGAJIT_CACHE_RO snapshot (LAYER: cache or the\n"
     "  snapshot's path; JSON: \"layer\", \"\" for the cache)\n",
     kLsOpts, 0},
    {"show", run_show,
     "usage: megajit cache show KEY-PREFIX [--source] [--log] [--sass] [--cache DIR]\n"
     "  --sass disassembles the cubin with nvdisasm (PATH or $CUDA_HOME/bin)\n",
     kShowOpts, 1},
    {"stat", run_stat, "usage: megajit cache stat [--json] [--cache DIR]\n", kJsonOpts, 0},
    {"verify", run_verify,
     "usage: megajit cache verify [--json] [--cache DIR]\n"
     "exit status 1 when an entry is bad (a later lookup deletes and rebuilds it)\n",
     kJsonOpts, 0},
    {"rm", run_rm,
     "usage: megajit cache rm (--key K | --family F | --header PATH | --compiler V |\n"
     "                         --arch A | --older-than DAYS | --all) [--json] [--cache DIR]\n"
     "  --header PATH removes every entry whose include closure has the template header\n"
     "  --older-than DAYS removes entries not used for DAYS days\n",
     kRmOpts, 0},
    {"gc", run_gc,
     "usage: megajit cache gc --max-bytes N [--json] [--cache DIR]\n"
     "  evicts least recently used entries until the cubins fit N bytes (suffixes K, M, G, T)\n",
     kGcOpts, 0},
    {"export", run_export,
     "usage: megajit cache export FILE [--cache DIR]\n"
     "  FILE is a consistent, compact snapshot usable in MEGAJIT_CACHE_RO\n",
     kCommonOpts, 1},
    {"import", run_import,
     "usage: megajit cache import FILE [--cache DIR]\n"
     "  copies the snapshot's entries into the cache; existing keys win\n",
     kCommonOpts, 1},
};

static void set_selector(options *o, mj_cache_selector sel, const char *value) {
    o->selector = (int)sel;
    o->value = value;
    o->selectors_given++;
}

int cmd_cache(int argc, char **argv) {
    if (argc < 2) {
        fputs(kUsage, stderr);
        return CLI_EXIT_USAGE;
    }
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        fputs(kUsage, stdout);
        return 0;
    }
    const subcommand *sub = NULL;
    for (size_t i = 0; i < sizeof kSubcommands / sizeof kSubcommands[0]; i++)
        if (strcmp(argv[1], kSubcommands[i].name) == 0) sub = &kSubcommands[i];
    if (!sub) return cli_usage_error("cache", kUsage, "unknown subcommand '%s'", argv[1]);

    char cmd[32];
    snprintf(cmd, sizeof cmd, "cache %s", sub->name);
    options o = {.selector = -1};
    argc--;
    argv++;
    optind = 0;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":h", sub->longopts, NULL)) != -1) {
        switch (c) {
        case 'h':
            fputs(sub->usage, stdout);
            return 0;
        case OPT_CACHE:
            o.cache = optarg;
            break;
        case OPT_JSON:
            o.json = 1;
            break;
        case OPT_SOURCE:
            o.source = 1;
            break;
        case OPT_LOG:
            o.log = 1;
            break;
        case OPT_SASS:
            o.sass = 1;
            break;
        case OPT_MAX_BYTES:
            o.max_bytes = optarg;
            break;
        case OPT_KEY:
            set_selector(&o, MJ_CACHE_SELECT_KEY, optarg);
            break;
        case OPT_HEADER:
            set_selector(&o, MJ_CACHE_SELECT_HEADER, optarg);
            break;
        case OPT_COMPILER:
            set_selector(&o, MJ_CACHE_SELECT_COMPILER, optarg);
            break;
        case OPT_OLDER:
            set_selector(&o, MJ_CACHE_SELECT_OLDER, optarg);
            break;
        case OPT_ALL:
            set_selector(&o, MJ_CACHE_SELECT_ALL, "");
            break;
        /* ls filters by family and arch; rm selects by them. */
        case OPT_FAMILY:
            o.family = optarg;
            set_selector(&o, MJ_CACHE_SELECT_FAMILY, optarg);
            break;
        case OPT_ARCH:
            o.arch = optarg;
            set_selector(&o, MJ_CACHE_SELECT_ARCH, optarg);
            break;
        default:
            return cli_bad_option(cmd, sub->usage, argv, c);
        }
    }
    o.args = argv + optind;
    o.nargs = argc - optind;
    if (o.nargs != sub->nargs) {
        if (o.nargs < sub->nargs) return cli_usage_error(cmd, sub->usage, "missing argument");
        return cli_usage_error(cmd, sub->usage, "unexpected argument '%s'", o.args[sub->nargs]);
    }
    return sub->run(sub->name, &o);
}
