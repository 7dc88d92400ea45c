/*
 * megajit precompile: compiles every kernel of a manifest that the cache lacks,
 * with the library's pool of worker processes (runtime/build_pool.h), after
 * making sure the cache can store them at all. Interrupted (SIGINT, SIGTERM,
 * SIGHUP), it reports what was built and what was not, then dies of the
 * signal.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runtime/build_pool.h"
#include "tools/megajit/cli.h"

static const char kUsage[] =
    "usage: megajit precompile (--preset NAME | --manifest FILE) [options]\n"
    "\n"
    "Compiles every kernel the runtime can request for a deployment into the cache.\n"
    "Kernels already cached (or served by a MEGAJIT_CACHE_RO snapshot) are skipped.\n"
    "\n"
    "options:\n"
    "  --preset NAME      an embedded manifest: deepseek-v3-ep8, kimi-k2-ep8,\n"
    "                     qwen3-235b-ep4, gpt-oss-120b-ep1, gpt-oss-20b-ep1, glm-4.5-ep8,\n"
    "                     minimax-m2-ep8\n"
    "  --manifest FILE    a manifest JSON file (docs/manifest.md); '-' reads stdin\n"
    "  --arch LIST        replace the manifest's architectures (sm_90a,sm_100a)\n"
    "  --jobs N           worker processes (default: available CPUs)\n"
    "  --cache DIR        cache directory (default: MEGAJIT_CACHE_DIR, else\n"
    "                     $XDG_CACHE_HOME/megajit, else ~/.cache/megajit)\n"
    "  --json             print one JSON object: kernels, compiled, cached, failed,\n"
    "                     seconds, jobs, cache, archs, failures\n"
    "  -h, --help         this text\n"
    "\n"
    "exit status: 0 every kernel is in the cache, 1 a kernel failed (to compile, or to be\n"
    "stored), 2 bad arguments or manifest, or no writable cache\n";

typedef struct options {
    const char *preset;
    const char *manifest;
    const char *archs;
    const char *cache;
    long jobs;
    int json;
} options;

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static char *read_file(const char *path) {
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!f) return NULL;
    size_t len = 0, cap = 4096;
    char *buf = malloc(cap);
    while (buf) {
        len += fread(buf + len, 1, cap - len - 1, f);
        if (len + 1 < cap) break;
        cap *= 2;
        char *grown = realloc(buf, cap);
        if (!grown) free(buf);
        buf = grown;
    }
    int failed = ferror(f);
    if (f != stdin) fclose(f);
    if (!buf || failed) {
        free(buf);
        return NULL;
    }
    buf[len] = '\0';
    return buf;
}

static int parse_options(int argc, char **argv, options *o) {
    static const struct option longopts[] = {
        {"preset", required_argument, NULL, 'p'}, {"manifest", required_argument, NULL, 'm'},
        {"arch", required_argument, NULL, 'a'},   {"jobs", required_argument, NULL, 'j'},
        {"cache", required_argument, NULL, 'c'},  {"json", no_argument, NULL, 'J'},
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0}};
    memset(o, 0, sizeof *o);
    optind = 0;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":hj:", longopts, NULL)) != -1) {
        switch (c) {
        case 'p':
            o->preset = optarg;
            break;
        case 'm':
            o->manifest = optarg;
            break;
        case 'a':
            o->archs = optarg;
            break;
        case 'c':
            o->cache = optarg;
            break;
        case 'J':
            o->json = 1;
            break;
        case 'j':
            if (cli_parse_long(optarg, 1, MJ_BUILD_POOL_MAX_JOBS, &o->jobs) != 0)
                return cli_usage_error("precompile", kUsage, "--jobs: expected 1..%d, got '%s'",
                                       MJ_BUILD_POOL_MAX_JOBS, optarg);
            break;
        case 'h':
            fputs(kUsage, stdout);
            return -1;
        default:
            return cli_bad_option("precompile", kUsage, argv, c);
        }
    }
    if (optind < argc)
        return cli_usage_error("precompile", kUsage, "unexpected argument '%s'", argv[optind]);
    if (!o->preset == !o->manifest)
        return cli_usage_error("precompile", kUsage, "give exactly one of --preset or --manifest");
    return 0;
}

static int load_manifest(const options *o, mj_manifest **m) {
    mj_status st;
    if (o->preset) {
        st = mj_manifest_preset(o->preset, m);
    } else {
        char *json = read_file(o->manifest);
        if (!json) {
            fprintf(stderr, "megajit precompile: cannot read manifest '%s': %s\n", o->manifest,
                    strerror(errno ? errno : EIO));
            return CLI_EXIT_USAGE;
        }
        st = mj_manifest_parse(json, m);
        free(json);
    }
    if (st == MJ_OK && o->archs) {
        st = mj_manifest_set_archs(*m, o->archs);
        if (st != MJ_OK) {
            mj_manifest_destroy(*m);
            *m = NULL;
        }
    }
    if (st != MJ_OK) {
        fprintf(stderr, "megajit precompile: %s\n", mj_last_error());
        return st == MJ_ERR_NOMEM ? CLI_EXIT_FAIL : CLI_EXIT_USAGE;
    }
    return 0;
}

typedef struct tally {
    size_t total;
    size_t done;
    size_t compiled;
    size_t cached;
    size_t failed;
} tally;

/* What the build pool's reports update and print. */
typedef struct progress {
    const mj_manifest *manifest;
    tally t;
    cJSON *failures;
    int json, bar, lines;
} progress;

static void show_progress(const tally *t, const char *what, int bar) {
    if (bar) {
        enum { WIDTH = 30 };
        size_t filled = t->total ? t->done * WIDTH / t->total : WIDTH;
        char cells[WIDTH + 1];
        for (size_t i = 0; i < WIDTH; i++)
            cells[i] = i < filled ? '#' : '.';
        cells[WIDTH] = '\0';
        fprintf(stderr, "\r\033[K[%s] %zu/%zu  compiled %zu  cached %zu  failed %zu  %.60s", cells,
                t->done, t->total, t->compiled, t->cached, t->failed, what);
        if (t->done == t->total) fputc('\n', stderr);
    }
    fflush(stderr);
}

static void on_report(const mj_build_report *r, void *ctx) {
    progress *p = ctx;
    tally *t = &p->t;
    t->done++;
    const char *what = mj_manifest_kernel_describe(p->manifest, r->index);
    const char *label = "failed";
    if (r->result == MJ_BUILD_COMPILED) {
        t->compiled++;
        label = "compiled";
    } else if (r->result == MJ_BUILD_CACHED) {
        t->cached++;
        label = "cached";
    } else {
        t->failed++;
        cJSON *f = cJSON_CreateObject();
        cJSON_AddStringToObject(f, "kernel", what);
        cJSON_AddStringToObject(f, "error", r->error);
        cJSON_AddItemToArray(p->failures, f);
        if (p->bar) fputs("\r\033[K", stderr);
        if (!p->json) fprintf(stderr, "megajit precompile: %s: %s\n", what, r->error);
    }
    if (p->lines)
        fprintf(stderr, "[%*zu/%zu] %-8s %6.2f s  %s\n", (int)snprintf(NULL, 0, "%zu", t->total),
                t->done, t->total, label, r->seconds, what);
    show_progress(t, what, p->bar);
}

static mj_status build_kernel(mj_runtime *rt, size_t index, void *ctx, mj_build_result *result,
                              double *seconds) {
    return mj_manifest_build_kernel(rt, ctx, index, result, seconds);
}

static void archs_of(const mj_manifest *m, cJSON *out) {
    size_t n = mj_manifest_kernel_count(m);
    for (size_t i = 0; i < n; i++) {
        const char *arch = strrchr(mj_manifest_kernel_describe(m, i), ' ');
        if (!arch) continue;
        arch++;
        int seen = 0;
        const cJSON *a;
        cJSON_ArrayForEach(a, out) seen |= strcmp(a->valuestring, arch) == 0;
        if (!seen) cJSON_AddItemToArray(out, cJSON_CreateString(arch));
    }
}

int cmd_precompile(int argc, char **argv) {
    options o;
    int rc = parse_options(argc, argv, &o);
    if (rc) return rc < 0 ? 0 : rc;
    mj_manifest *m = NULL;
    rc = load_manifest(&o, &m);
    if (rc) return rc;

    /* A precompile that could store nothing is refused before any compile, and
     * creating the cache here spares the workers creating it at once. */
    mj_cache *cache = NULL;
    if (mj_cache_create(o.cache, &cache) != MJ_OK) {
        fprintf(stderr, "megajit precompile: no writable cache: %s\n", mj_last_error());
        mj_manifest_destroy(m);
        return CLI_EXIT_USAGE;
    }
    char cache_path[4200];
    snprintf(cache_path, sizeof cache_path, "%s", mj_cache_path(cache));
    mj_cache_close(cache);

    size_t n = mj_manifest_kernel_count(m);
    long jobs = o.jobs ? o.jobs : mj_build_pool_default_jobs();
    if ((size_t)jobs > n) jobs = n ? (long)n : 1;
    cJSON *archs = cJSON_CreateArray();
    archs_of(m, archs);
    mj_runtime_options rt_opts = MJ_RUNTIME_OPTIONS_INIT;
    rt_opts.cache_dir = o.cache;
    if (cJSON_GetArraySize(archs) > 0) rt_opts.arch = cJSON_GetArrayItem(archs, 0)->valuestring;

    progress p = {.manifest = m,
                  .t = {.total = n},
                  .failures = cJSON_CreateArray(),
                  .json = o.json,
                  .bar = !o.json && isatty(STDERR_FILENO)};
    p.lines = !o.json && !p.bar;
    mj_build_pool pool = {.count = n,
                          .jobs = (int)jobs,
                          .runtime = &rt_opts,
                          .build = build_kernel,
                          .build_ctx = m,
                          .report = on_report,
                          .report_ctx = &p};
    double start = now_seconds();
    int workers = 0, stop_signal = 0;
    if (mj_build_pool_run(&pool, &workers, &stop_signal) != MJ_OK) {
        fprintf(stderr, "megajit precompile: %s\n", mj_last_error());
        cJSON_Delete(archs);
        cJSON_Delete(p.failures);
        mj_manifest_destroy(m);
        return CLI_EXIT_FAIL;
    }
    double seconds = now_seconds() - start;
    const tally t = p.t;
    cJSON *failures = p.failures;

    if (o.json) {
        cJSON *out = cJSON_CreateObject();
        cJSON_AddNumberToObject(out, "kernels", (double)n);
        cJSON_AddNumberToObject(out, "compiled", (double)t.compiled);
        cJSON_AddNumberToObject(out, "cached", (double)t.cached);
        cJSON_AddNumberToObject(out, "failed", (double)t.failed);
        cJSON_AddNumberToObject(out, "seconds", seconds);
        cJSON_AddNumberToObject(out, "jobs", (double)jobs);
        cJSON_AddStringToObject(out, "cache", cache_path);
        cJSON_AddItemToObject(out, "archs", archs);
        cJSON_AddItemToObject(out, "failures", failures);
        archs = failures = NULL;
        rc = cli_print_json(out);
    } else {
        printf("%zu kernels: %zu compiled, %zu cached, %zu failed in %.1f s with %ld job%s\n", n,
               t.compiled, t.cached, t.failed, seconds, jobs, jobs == 1 ? "" : "s");
        printf("cache: %s\n", cache_path);
    }
    cJSON_Delete(archs);
    cJSON_Delete(failures);
    mj_manifest_destroy(m);
    mj_build_pool_die_of(stop_signal);
    if (rc) return rc;
    return t.failed ? CLI_EXIT_FAIL : 0;
}
