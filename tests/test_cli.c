/*
 * End-to-end tests of the megajit CLI: runs the built binary
 * ($MEGAJIT_BUILD/bin/megajit, default build/bin/megajit) as a child process,
 * each test on a fresh cache directory. Needs NVRTC (not a GPU).
 */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "include/megajit.h"
#include "runtime/pch_dir.h"
#include "runtime/utf8.h"

enum { MAX_ARGS = 32 };

typedef struct fixture {
    char dir[PATH_MAX];        /* scratch directory of the test */
    char cache[PATH_MAX + 32]; /* its cache directory */
    char tmp[PATH_MAX + 32];   /* TMPDIR of every command: must be empty at the end */
    int runs;                  /* names the output files of each run */
} fixture;

typedef struct proc {
    pid_t pid;
    char out_path[PATH_MAX + 32];
    char err_path[PATH_MAX + 32];
} proc;

typedef struct result {
    int status; /* exit status, or 128 + signal */
    char *out;
    char *err;
} result;

/* A manifest with one layer per dispatch format. */
static const char kManifest[] =
    "{\"archs\": [\"sm_90a\"], \"layers\": ["
    "{\"name\": \"a\", \"hidden\": 4096, \"intermediate\": 1536, \"experts\": 128, \"topk\": 8,"
    " \"ranks\": 4, \"max_tokens_per_rank\": 1024, \"weight_format\": \"nvfp4\","
    " \"dispatch_format\": \"bf16\", \"activation\": \"swiglu\", \"num_sms\": 0},"
    "{\"name\": \"b\", \"hidden\": 4096, \"intermediate\": 1536, \"experts\": 128, \"topk\": 8,"
    " \"ranks\": 4, \"max_tokens_per_rank\": 1024, \"weight_format\": \"nvfp4\","
    " \"dispatch_format\": \"mxfp8\", \"activation\": \"swiglu\"},"
    "{\"name\": \"c\", \"hidden\": 4096, \"intermediate\": 1536, \"experts\": 128, \"topk\": 8,"
    " \"ranks\": 4, \"max_tokens_per_rank\": 1024, \"weight_format\": \"nvfp4\","
    " \"dispatch_format\": \"mxfp4\", \"activation\": \"swiglu\"},"
    "{\"name\": \"d\", \"hidden\": 4096, \"intermediate\": 1536, \"experts\": 128, \"topk\": 8,"
    " \"ranks\": 4, \"max_tokens_per_rank\": 1024, \"weight_format\": \"nvfp4\","
    " \"dispatch_format\": \"nvfp4\", \"activation\": \"swigluoai\", \"clamp\": 7.0}]}";

/* Two small pre-dispatch kernels (no MegaMoE kernel exists for sm_100a): the
 * fault tests compile something real, quickly. */
static const char kSmallManifest[] =
    "{\"archs\": [\"sm_100a\"], \"layers\": [{\"hidden\": 1024, \"intermediate\": 256,"
    " \"experts\": 8, \"topk\": 2, \"ranks\": 1, \"max_tokens_per_rank\": 16,"
    " \"weight_format\": \"bf16\", \"dispatch_format\": \"bf16\", \"activation\": \"swiglu\"}]}";

static const char *const kPresets[] = {"deepseek-v3-ep8",  "kimi-k2-ep8",     "qwen3-235b-ep4",
                                       "gpt-oss-120b-ep1", "gpt-oss-20b-ep1", "glm-4.5-ep8",
                                       "minimax-m2-ep8"};

static const char *cli_path(void) {
    static char path[PATH_MAX];
    const char *build = getenv("MEGAJIT_BUILD");
    snprintf(path, sizeof path, "%s/bin/megajit", build && *build ? build : "build");
    return path;
}

/* Output buffers and parsed JSON of the running test. A failed assertion jumps
 * out of the test past its frees; teardown frees what is left, so that
 * LeakSanitizer reports only leaks of the code under test, never the test's
 * own buffers (which once made a failed run look like a library leak). */
enum { MAX_OWNED = 256 };
static struct owned {
    void *p;
    int json;
} owned[MAX_OWNED];
static int num_owned;

static void *own(void *p, int json) {
    assert_true(num_owned < MAX_OWNED);
    owned[num_owned++] = (struct owned){p, json};
    return p;
}

static void release(void *p) {
    for (int i = 0; i < num_owned; i++) {
        if (owned[i].p != p) continue;
        if (owned[i].json)
            cJSON_Delete(p);
        else
            free(p);
        owned[i] = owned[--num_owned];
        return;
    }
}

static void release_all(void) {
    while (num_owned)
        release(owned[0].p);
}

static int setup(void **state) {
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    const char *tmp = getenv("TMPDIR");
    snprintf(f->dir, sizeof f->dir, "%s/megajit-cli-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->cache, sizeof f->cache, "%s/cache", f->dir);
    snprintf(f->tmp, sizeof f->tmp, "%s/tmp", f->dir);
    assert_int_equal(mkdir(f->tmp, 0700), 0);
    *state = f;
    return 0;
}

/* Entries in dir whose names start with prefix ("" = all). */
static int count_entries(const char *dir, const char *prefix, int print) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
            strncmp(e->d_name, prefix, strlen(prefix)) != 0)
            continue;
        if (print) fprintf(stderr, "left behind in TMPDIR: %s\n", e->d_name);
        n++;
    }
    closedir(d);
    return n;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* Fails the test when a command left something in its TMPDIR. */
static int teardown(void **state) {
    fixture *f = *state;
    release_all();
    int left = count_entries(f->tmp, "", 1);
    nftw(f->dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(f);
    return left == 0 ? 0 : -1;
}

static char *slurp(const char *path) {
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    size_t len = 0, cap = 1 << 16;
    char *buf = malloc(cap);
    assert_non_null(buf);
    size_t n;
    while ((n = fread(buf + len, 1, cap - len - 1, fp)) > 0) {
        len += n;
        if (len + 1 == cap) {
            cap *= 2;
            buf = realloc(buf, cap);
            assert_non_null(buf);
        }
    }
    fclose(fp);
    buf[len] = '\0';
    return own(buf, 0);
}

static void write_text(const char *path, const char *text) {
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fputs(text, fp) >= 0, 1);
    assert_int_equal(fclose(fp), 0);
}

/* How a command runs, beyond the defaults (MEGAJIT_CACHE_DIR = the fixture's
 * cache, no MEGAJIT_CACHE_RO, no MEGAJIT_CACHE_DISABLE). */
typedef struct how {
    const char *ro;         /* MEGAJIT_CACHE_RO, or NULL */
    const char *const *env; /* NULL-terminated "NAME=value" (set) or "NAME" (unset) */
    /* Runs in the child just before exec (with the fixture); non-zero fails the
     * command with status 125 and what it printed to stderr. */
    int (*prepare)(const fixture *f);
} how;

/* Starts the CLI with args (NULL-terminated); h may be NULL. */
static void spawn(fixture *f, proc *p, const how *h, const char *const *args) {
    int run = f->runs++;
    snprintf(p->out_path, sizeof p->out_path, "%s/run%d.out", f->dir, run);
    snprintf(p->err_path, sizeof p->err_path, "%s/run%d.err", f->dir, run);
    char *argv[MAX_ARGS + 2];
    int n = 0;
    argv[n++] = (char *)cli_path();
    for (; args[n - 1]; n++) {
        assert_true(n <= MAX_ARGS);
        argv[n] = (char *)args[n - 1];
    }
    argv[n] = NULL;
    fflush(NULL);
    p->pid = fork();
    assert_true(p->pid >= 0);
    if (p->pid == 0) {
        int out = open(p->out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int err = open(p->err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (out < 0 || err < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0) _exit(126);
        if (h && h->ro)
            setenv("MEGAJIT_CACHE_RO", h->ro, 1);
        else
            unsetenv("MEGAJIT_CACHE_RO");
        unsetenv("MEGAJIT_CACHE_DISABLE");
        setenv("MEGAJIT_CACHE_DIR", f->cache, 1);
        setenv("TMPDIR", f->tmp, 1);
        for (const char *const *e = h && h->env ? h->env : NULL; e && *e; e++) {
            const char *eq = strchr(*e, '=');
            char name[64];
            snprintf(name, sizeof name, "%.*s", eq ? (int)(eq - *e) : (int)strlen(*e), *e);
            if (eq)
                setenv(name, eq + 1, 1);
            else
                unsetenv(name);
        }
        if (h && h->prepare && h->prepare(f) != 0) _exit(125);
        execv(argv[0], argv);
        _exit(127);
    }
}

static result finish(proc *p) {
    int status;
    while (waitpid(p->pid, &status, 0) < 0)
        assert_int_equal(errno, EINTR);
    result r;
    r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = slurp(p->out_path);
    r.err = slurp(p->err_path);
    return r;
}

static result run_with(fixture *f, const how *h, ...) {
    const char *args[MAX_ARGS + 1];
    va_list ap;
    va_start(ap, h);
    int n = 0;
    while ((args[n] = va_arg(ap, const char *)) != NULL) {
        n++;
        assert_true(n < MAX_ARGS);
    }
    va_end(ap);
    proc p;
    spawn(f, &p, h, args);
    return finish(&p);
}

#define run(f, ...) run_with(f, NULL, __VA_ARGS__, (const char *)NULL)
#define run_how(f, h, ...) run_with(f, h, __VA_ARGS__, (const char *)NULL)

static void result_free(result *r) {
    release(r->out);
    release(r->err);
}

static void expect_status(const result *r, int status) {
    if (r->status != status)
        fail_msg("exit status %d (wanted %d)\nstdout:\n%s\nstderr:\n%s", r->status, status, r->out,
                 r->err);
}

static void expect_in(const char *haystack, const char *needle) {
    if (!strstr(haystack, needle)) fail_msg("'%s' not found in:\n%s", needle, haystack);
}

static cJSON *parse_json(const result *r) {
    cJSON *j = cJSON_Parse(r->out);
    if (!j) fail_msg("not JSON:\n%s\nstderr:\n%s", r->out, r->err);
    return own(j, 1);
}

static double num(const cJSON *obj, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!cJSON_IsNumber(v)) fail_msg("no number '%s'", key);
    return v->valuedouble;
}

typedef struct counts {
    int kernels, compiled, cached, failed;
} counts;

/* Runs precompile --json with extra args and returns its counts (exit 0 expected). */
static counts precompile_ro(fixture *f, const char *ro, const char *cache,
                            const char *const *extra) {
    const char *args[MAX_ARGS + 1] = {"precompile", "--json", "--cache", cache};
    int n = 4;
    for (; *extra; extra++)
        args[n++] = *extra;
    args[n] = NULL;
    proc p;
    spawn(f, &p, &(how){.ro = ro}, args);
    result r = finish(&p);
    expect_status(&r, 0);
    cJSON *j = parse_json(&r);
    counts c = {(int)num(j, "kernels"), (int)num(j, "compiled"), (int)num(j, "cached"),
                (int)num(j, "failed")};
    assert_true(cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(j, "archs")));
    num(j, "seconds");
    num(j, "jobs");
    release(j);
    result_free(&r);
    return c;
}

static const char *manifest_path(fixture *f) {
    static char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/manifest.json", f->dir);
    write_text(path, kManifest);
    return path;
}

static const char *small_manifest_path(fixture *f) {
    static char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/small.json", f->dir);
    write_text(path, kSmallManifest);
    return path;
}

static int exists(const char *path) {
    return access(path, F_OK) == 0;
}

static int cache_entries(fixture *f, const char *cache) {
    result r = run(f, "cache", "stat", "--json", "--cache", cache);
    expect_status(&r, 0);
    cJSON *j = parse_json(&r);
    int n = (int)num(j, "entries");
    release(j);
    result_free(&r);
    return n;
}

static int verify_status(fixture *f) {
    result r = run(f, "cache", "verify", "--cache", f->cache);
    int s = r.status;
    result_free(&r);
    return s;
}

/* ------------------------------------------------------------------ tests */

static void test_help(void **state) {
    fixture *f = *state;
    static const char *const cmds[][4] = {
        {"--help", NULL, NULL},          {"precompile", "--help", NULL},
        {"cache", "--help", NULL},       {"cache", "ls", "--help"},
        {"cache", "show", "--help"},     {"cache", "stat", "--help"},
        {"cache", "verify", "--help"},   {"cache", "rm", "--help"},
        {"cache", "gc", "--help"},       {"cache", "export", "--help"},
        {"cache", "import", "--help"},   {"info", "--help", NULL},
        {"bench", "--help", NULL},       {"bench", "pre-dispatch", "--help"},
        {"bench", "mega-moe", "--help"},
    };
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        proc p;
        spawn(f, &p, NULL, cmds[i]);
        result r = finish(&p);
        expect_status(&r, 0);
        expect_in(r.out, "usage: megajit");
        result_free(&r);
    }
    result r = run(f, "--version");
    expect_status(&r, 0);
    expect_in(r.out, "megajit ");
    result_free(&r);
}

static void test_bad_flags(void **state) {
    fixture *f = *state;
    static const struct {
        const char *args[8];
        const char *message;
    } cases[] = {
        {{"precompile", "--preset", "qwen3-235b-ep4", "--bogus"}, "--bogus"},
        {{"precompile", "--preset", "qwen3-235b-ep4", "--jobs", "0"}, "--jobs"},
        {{"precompile", "--preset", "no-such-model"}, "no-such-model"},
        {{"precompile", "--preset", "qwen3-235b-ep4", "--arch", "sm_80"}, "sm_80"},
        {{"precompile"}, "--preset"},
        {{"precompile", "--preset", "qwen3-235b-ep4", "--manifest", "x.json"}, "--manifest"},
        {{"precompile", "--manifest", "/nonexistent/m.json"}, "/nonexistent/m.json"},
        {{"cache", "rm"}, "--family"},
        {{"cache", "rm", "--all", "--family", "pre_dispatch"}, "exactly one"},
        {{"cache", "gc", "--max-bytes", "lots"}, "lots"},
        {{"cache", "rm", "--older-than", "1e400"}, "1e400"},
        {{"cache", "rm", "--older-than", "inf"}, "inf"},
        {{"cache", "rm", "--older-than", "-1"}, "-1"},
        {{"cache", "show", "xyz"}, "xyz"},
        {{"cache", "frobnicate"}, "frobnicate"},
        {{"cache", "ls", "--json", "--cache"}, "--cache"},
        {{"bench", "pre-dispatch", "--format", "fp7"}, "fp7"},
        {{"bench", "mega-moe", "--shape", "llama"}, "unknown shape 'llama'"},
        {{"bench", "mega-moe", "--routing", "zipf"}, "expected uniform or skewed"},
        {{"bench", "mega-moe", "--tokens", "8,256", "--max-tokens", "64"},
         "--max-tokens 64 is below the largest --tokens value (256)"},
        {{"bench", "mega-moe", "--shape", "all", "--topk", "4"}, "name it with --shape"},
        {{"info", "--verbose"}, "--verbose"},
        {{"transmogrify"}, "transmogrify"},
        {{NULL}, "usage"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        proc p;
        spawn(f, &p, NULL, cases[i].args);
        result r = finish(&p);
        expect_status(&r, 2);
        expect_in(r.err, cases[i].message);
        result_free(&r);
    }
}

static void test_bad_manifests(void **state) {
    fixture *f = *state;
    static const char layer_head[] = "{\"archs\": [\"sm_90a\"], \"layers\": [{";
    static const char good_fields[] =
        "\"hidden\": 7168, \"intermediate\": 2048, \"topk\": 8,"
        " \"max_tokens_per_rank\": 4096, \"weight_format\": \"mxfp4\", \"activation\": \"swiglu\"";
    static const struct {
        const char *fields; /* appended to good_fields */
        const char *message;
    } cases[] = {
        {", \"experts\": 256, \"ranks\": 8, \"dispatch_format\": \"mxfp8\", \"bogus\": 1",
         "layers[0].bogus"},
        {", \"experts\": 256, \"ranks\": 8, \"dispatch_format\": \"fp7\"",
         "layers[0].dispatch_format"},
        {", \"experts\": 256, \"ranks\": 3, \"dispatch_format\": \"mxfp8\"", "layers[0].experts"},
        {", \"experts\": 256, \"ranks\": 8", "layers[0].dispatch_format"},
        {", \"experts\": \"256\", \"ranks\": 8, \"dispatch_format\": \"mxfp8\"",
         "layers[0].experts"},
        {", \"experts\": 4, \"ranks\": 1, \"dispatch_format\": \"mxfp8\"", "layers[0].topk"},
        {", \"experts\": 256, \"ranks\": 8, \"dispatch_format\": \"mxfp8\", \"clamp\": \"7\"",
         "layers[0].clamp"},
    };
    char path[PATH_MAX + 32], text[2048];
    snprintf(path, sizeof path, "%s/bad.json", f->dir);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(text, sizeof text, "%s%s%s}]}", layer_head, good_fields, cases[i].fields);
        write_text(path, text);
        result r = run(f, "precompile", "--manifest", path, "--cache", f->cache);
        expect_status(&r, 2);
        expect_in(r.err, cases[i].message);
        result_free(&r);
    }
    static const struct {
        const char *text;
        const char *message;
    } whole[] = {
        {"{\"archs\": [\"sm_90a\"], \"layers\": [{\"hidden\": 1.5}]}",
         "layers[0].hidden: must be an integer"},
        {"{\"archs\": [\"sm_90a\"], \"layers\": [], \"extra\": 1}", "extra"},
        {"{\"archs\": [\"sm_75\"], \"layers\": []}", "archs[0]"},
        {"{\"archs\": [\"sm_90a\"]}", "layers"},
        {"{\"archs\": [\"sm_90a\"], ", "invalid JSON"},
    };
    for (size_t i = 0; i < sizeof whole / sizeof whole[0]; i++) {
        write_text(path, whole[i].text);
        result r = run(f, "precompile", "--manifest", path, "--cache", f->cache);
        expect_status(&r, 2);
        expect_in(r.err, whole[i].message);
        result_free(&r);
    }
    /* The message of a later layer names that layer. */
    snprintf(text, sizeof text,
             "%s%s, \"experts\": 256, \"ranks\": 8, \"dispatch_format\": \"mxfp8\"},"
             " {%s, \"experts\": 256, \"ranks\": 8, \"dispatch_format\": \"mxfp8\","
             " \"hidden\": 100}]}",
             layer_head, good_fields, good_fields + strlen("\"hidden\": 7168, "));
    write_text(path, text);
    result r = run(f, "precompile", "--manifest", path, "--cache", f->cache);
    expect_status(&r, 2);
    expect_in(r.err, "layers[1].hidden: must be a multiple of 64 in 64..8192 (got 100)");
    result_free(&r);
    /* Absurd values are refused while parsing: nothing was compiled or created. */
    static const struct {
        const char *fields;
        const char *message;
    } absurd[] = {
        {"\"intermediate\": 2147483520, \"experts\": 256, \"ranks\": 8", "layers[0].intermediate"},
        {"\"intermediate\": 2048, \"experts\": 2147483647, \"ranks\": 1", "layers[0].experts"},
        {"\"intermediate\": 2048, \"experts\": 256, \"ranks\": 73", "layers[0].ranks"},
    };
    for (size_t i = 0; i < sizeof absurd / sizeof absurd[0]; i++) {
        snprintf(text, sizeof text,
                 "{\"archs\": [\"sm_90a\"], \"layers\": [{\"hidden\": 7168, \"topk\": 8,"
                 " \"max_tokens_per_rank\": 4096, \"weight_format\": \"mxfp4\","
                 " \"dispatch_format\": \"mxfp8\", \"activation\": \"swiglu\", \"num_sms\": 1,"
                 " %s}]}",
                 absurd[i].fields);
        write_text(path, text);
        r = run(f, "precompile", "--manifest", path, "--json", "--cache", f->cache);
        expect_status(&r, 2);
        expect_in(r.err, absurd[i].message);
        assert_string_equal(r.out, "");
        assert_false(exists(f->cache));
        result_free(&r);
    }
}

/* NVRTC compiles every kernel of every preset for sm_90a and sm_100a. */
static void test_presets_compile_all_archs(void **state) {
    fixture *f = *state;
    for (size_t i = 0; i < sizeof kPresets / sizeof kPresets[0]; i++) {
        char cache[PATH_MAX + 64];
        snprintf(cache, sizeof cache, "%s/%s", f->dir, kPresets[i]);
        const char *const extra[] = {"--preset", kPresets[i], "--arch", "sm_90a,sm_100a",
                                     "--jobs",   "2",         NULL};
        counts first = precompile_ro(f, NULL, cache, extra);
        assert_true(first.kernels >= 4);
        assert_int_equal(first.failed, 0);
        assert_int_equal(first.compiled, first.kernels);
        counts second = precompile_ro(f, NULL, cache, extra);
        assert_int_equal(second.kernels, first.kernels);
        assert_int_equal(second.cached, second.kernels);
        assert_int_equal(second.compiled, 0);
        assert_int_equal(second.failed, 0);
    }
}

/* Eight processes racing on one empty cache compile each kernel exactly once. */
static void test_concurrent_precompile(void **state) {
    fixture *f = *state;
    enum { PROCS = 8 };
    const char *manifest = manifest_path(f);
    const char *const args[] = {"precompile", "--manifest", manifest, "--json",
                                "--cache",    f->cache,     NULL};
    proc procs[PROCS];
    for (int i = 0; i < PROCS; i++)
        spawn(f, &procs[i], NULL, args);
    int kernels = -1, compiled = 0;
    for (int i = 0; i < PROCS; i++) {
        result r = finish(&procs[i]);
        expect_status(&r, 0);
        cJSON *j = parse_json(&r);
        if (kernels < 0) kernels = (int)num(j, "kernels");
        assert_int_equal((int)num(j, "kernels"), kernels);
        assert_int_equal((int)num(j, "failed"), 0);
        assert_int_equal((int)num(j, "compiled") + (int)num(j, "cached"), kernels);
        compiled += (int)num(j, "compiled");
        release(j);
        result_free(&r);
    }
    assert_true(kernels >= 4);
    assert_int_equal(compiled, kernels);

    result r = run(f, "cache", "ls", "--json", "--arch", "sm_90a", "--cache", f->cache);
    expect_status(&r, 0);
    cJSON *list = parse_json(&r);
    assert_int_equal(cJSON_GetArraySize(list), kernels);
    const cJSON *first = cJSON_GetArrayItem(list, 0);
    const char *key = cJSON_GetObjectItemCaseSensitive(first, "key")->valuestring;
    const char *kernel = cJSON_GetObjectItemCaseSensitive(first, "kernel_name")->valuestring;
    char prefix[9];
    snprintf(prefix, sizeof prefix, "%.8s", key);

    result shown = run(f, "cache", "show", prefix, "--source", "--cache", f->cache);
    expect_status(&shown, 0);
    expect_in(shown.out, key);
    expect_in(shown.out, kernel);
    expect_in(shown.out, "--- source ---");
    result_free(&shown);
    /* --sass either disassembles or says nvdisasm is missing. */
    shown = run(f, "cache", "show", prefix, "--sass", "--cache", f->cache);
    if (shown.status != 0) {
        expect_status(&shown, 1);
        expect_in(shown.err, "nvdisasm");
    }
    result_free(&shown);
    release(list);
    result_free(&r);

    r = run(f, "cache", "ls", "--cache", f->cache);
    expect_status(&r, 0);
    expect_in(r.out, "KEY");
    expect_in(r.out, prefix);
    result_free(&r);
    r = run(f, "cache", "ls", "--json", "--arch", "sm_100a", "--cache", f->cache);
    expect_status(&r, 0);
    list = parse_json(&r);
    assert_int_equal(cJSON_GetArraySize(list), 0);
    release(list);
    result_free(&r);
}

/* Flips one byte of one stored cubin through SQLite, as disk corruption would. */
static void corrupt_one_cubin(const char *cache) {
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/megajit-cache.db", cache);
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    sqlite3_busy_timeout(db, 10000);
    sqlite3_stmt *sel;
    assert_int_equal(sqlite3_prepare_v2(db, "SELECT rowid, cubin FROM entry ORDER BY rowid LIMIT 1",
                                        -1, &sel, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(sel), SQLITE_ROW);
    sqlite3_int64 rowid = sqlite3_column_int64(sel, 0);
    int size = sqlite3_column_bytes(sel, 1);
    assert_true(size > 0);
    unsigned char *cubin = malloc((size_t)size);
    assert_non_null(cubin);
    memcpy(cubin, sqlite3_column_blob(sel, 1), (size_t)size);
    sqlite3_finalize(sel);
    cubin[size / 2] ^= 0x5a;
    sqlite3_stmt *upd;
    assert_int_equal(
        sqlite3_prepare_v2(db, "UPDATE entry SET cubin = ? WHERE rowid = ?", -1, &upd, NULL),
        SQLITE_OK);
    sqlite3_bind_blob(upd, 1, cubin, size, SQLITE_TRANSIENT);
    sqlite3_bind_int64(upd, 2, rowid);
    assert_int_equal(sqlite3_step(upd), SQLITE_DONE);
    assert_int_equal(sqlite3_changes(db), 1);
    sqlite3_finalize(upd);
    assert_int_equal(sqlite3_close(db), SQLITE_OK);
    free(cubin);
}

static void test_verify_and_heal(void **state) {
    fixture *f = *state;
    const char *const extra[] = {"--manifest", manifest_path(f), "--jobs", "2", NULL};
    counts c = precompile_ro(f, NULL, f->cache, extra);
    assert_int_equal(c.compiled, c.kernels);
    assert_int_equal(verify_status(f), 0);

    corrupt_one_cubin(f->cache);
    result r = run(f, "cache", "verify", "--json", "--cache", f->cache);
    expect_status(&r, 1);
    cJSON *j = parse_json(&r);
    assert_int_equal((int)num(j, "bad"), 1);
    assert_int_equal((int)num(j, "checked"), c.kernels);
    release(j);
    result_free(&r);

    c = precompile_ro(f, NULL, f->cache, extra);
    assert_int_equal(c.compiled, 1);
    assert_int_equal(c.cached, c.kernels - 1);
    assert_int_equal(verify_status(f), 0);
}

static void test_rm_gc_stat(void **state) {
    fixture *f = *state;
    const char *const extra[] = {"--manifest", manifest_path(f), "--jobs", "2", NULL};
    counts c = precompile_ro(f, NULL, f->cache, extra);
    assert_int_equal(cache_entries(f, f->cache), c.kernels);

    result r = run(f, "cache", "stat", "--cache", f->cache);
    expect_status(&r, 0);
    expect_in(r.out, "entries");
    expect_in(r.out, "journal mode");
    result_free(&r);

    r = run(f, "cache", "rm", "--arch", "sm_100a", "--cache", f->cache);
    expect_status(&r, 0);
    expect_in(r.out, "removed 0 entries");
    result_free(&r);

    r = run(f, "cache", "gc", "--max-bytes", "0", "--json", "--cache", f->cache);
    expect_status(&r, 0);
    cJSON *j = parse_json(&r);
    assert_int_equal((int)num(j, "cubin_bytes"), 0);
    release(j);
    result_free(&r);
    assert_int_equal(cache_entries(f, f->cache), 0);

    c = precompile_ro(f, NULL, f->cache, extra);
    assert_int_equal(c.compiled, c.kernels);
    r = run(f, "cache", "rm", "--family", "pre_dispatch", "--cache", f->cache);
    expect_status(&r, 0);
    result_free(&r);
    /* the manifest's MegaMoE kernels stay until their own family is removed */
    assert_true(cache_entries(f, f->cache) > 0);
    r = run(f, "cache", "rm", "--family", "mega_moe", "--cache", f->cache);
    expect_status(&r, 0);
    result_free(&r);
    assert_int_equal(cache_entries(f, f->cache), 0);
}

static void test_export_snapshot(void **state) {
    fixture *f = *state;
    const char *const extra[] = {"--manifest", manifest_path(f), "--jobs", "2", NULL};
    counts c = precompile_ro(f, NULL, f->cache, extra);
    assert_int_equal(c.compiled, c.kernels);

    char snapshot[PATH_MAX + 32], fresh[PATH_MAX + 32], imported[PATH_MAX + 32];
    snprintf(snapshot, sizeof snapshot, "%s/snapshot.db", f->dir);
    snprintf(fresh, sizeof fresh, "%s/fresh", f->dir);
    snprintf(imported, sizeof imported, "%s/imported", f->dir);
    result r = run(f, "cache", "export", snapshot, "--cache", f->cache);
    expect_status(&r, 0);
    result_free(&r);

    counts served = precompile_ro(f, snapshot, fresh, extra);
    assert_int_equal(served.kernels, c.kernels);
    assert_int_equal(served.cached, c.kernels);
    assert_int_equal(served.compiled, 0);

    r = run(f, "cache", "import", snapshot, "--cache", imported);
    expect_status(&r, 0);
    expect_in(r.out, "imported");
    result_free(&r);
    assert_int_equal(cache_entries(f, imported), c.kernels);

    /* cache ls shows what the snapshot serves, marked with its layer. */
    const how layered = {.ro = snapshot};
    r = run_how(f, &layered, "cache", "ls", "--json", "--cache", fresh);
    expect_status(&r, 0);
    cJSON *list = parse_json(&r);
    assert_int_equal(cJSON_GetArraySize(list), c.kernels);
    const cJSON *e;
    cJSON_ArrayForEach(e, list) {
        assert_string_equal(cJSON_GetObjectItemCaseSensitive(e, "layer")->valuestring, snapshot);
    }
    release(list);
    result_free(&r);
    r = run_how(f, &layered, "cache", "ls", "--cache", f->cache);
    expect_status(&r, 0);
    expect_in(r.out, "LAYER");
    expect_in(r.out, " cache ");
    expect_in(r.out, snapshot);
    result_free(&r);

    /* Into a directory that does not exist: said so, no SQLite URI. */
    char missing[PATH_MAX + 64];
    snprintf(missing, sizeof missing, "%s/no/such/dir/snap.db", f->dir);
    r = run(f, "cache", "export", missing, "--cache", f->cache);
    expect_status(&r, 1);
    expect_in(r.err, "does not exist");
    if (strstr(r.err, "file:")) fail_msg("an internal URI in: %s", r.err);
    result_free(&r);
}

/* Waits (at most a minute) until a worker of p has made its PCH directory:
 * a compile is then under way. */
static void wait_for_compile(fixture *f, const proc *p) {
    for (int i = 0; i < 6000 && count_entries(f->tmp, MJ_PCH_DIR_PREFIX, 0) < 1; i++) {
        struct timespec nap = {0, 10 * 1000 * 1000};
        nanosleep(&nap, NULL);
        if (waitpid(p->pid, NULL, WNOHANG) != 0) fail_msg("the precompile ended before compiling");
    }
    assert_true(count_entries(f->tmp, MJ_PCH_DIR_PREFIX, 0) >= 1);
}

/* A precompile killed mid-way leaves a cache the next run completes, and the
 * PCH directory its worker could not remove is removed by the next run. */
static void test_killed_precompile(void **state) {
    fixture *f = *state;
    const char *manifest = manifest_path(f);
    /* One worker stretches the run well past the kill. */
    const char *const args[] = {"precompile",     "--manifest", manifest, "--arch",
                                "sm_90a,sm_100a", "--jobs",     "1",      "--json",
                                "--cache",        f->cache,     NULL};
    proc p;
    spawn(f, &p, NULL, args);
    wait_for_compile(f, &p);
    kill(p.pid, SIGKILL);
    result r = finish(&p);
    result_free(&r);
    /* The worker dies with its parent (SIGKILL): nothing of it runs at exit. */
    assert_int_equal(count_entries(f->tmp, MJ_PCH_DIR_PREFIX, 0), 1);

    counts c = precompile_ro(f, NULL, f->cache, args + 1);
    assert_true(c.kernels >= 8);
    assert_int_equal(c.failed, 0);
    assert_true(c.compiled >= 1);
    assert_int_equal(c.compiled + c.cached, c.kernels);
    assert_int_equal(verify_status(f), 0);
    assert_int_equal(cache_entries(f, f->cache), c.kernels);
    assert_int_equal(count_entries(f->tmp, "", 1), 0);
}

/* Ctrl-C: the workers finish the kernel at hand and exit cleanly, the
 * precompile reports what it did and dies of the signal, nothing is left. */
static void test_interrupted_precompile(void **state) {
    fixture *f = *state;
    const char *const args[] = {"precompile", "--manifest", manifest_path(f), "--jobs", "1",
                                "--json",     "--cache",    f->cache,         NULL};
    proc p;
    spawn(f, &p, NULL, args);
    wait_for_compile(f, &p);
    kill(p.pid, SIGINT);
    result r = finish(&p);
    expect_status(&r, 128 + SIGINT);
    cJSON *j = parse_json(&r);
    int kernels = (int)num(j, "kernels"), failed = (int)num(j, "failed");
    assert_true(failed >= 1 && failed < kernels);
    expect_in(r.out, "interrupted");
    assert_int_equal(count_entries(f->tmp, "", 1), 0);
    assert_int_equal(verify_status(f), 0);
    assert_int_equal(cache_entries(f, f->cache), kernels - failed);
    result_free(&r);
}

static void test_info(void **state) {
    fixture *f = *state;
    result r = run(f, "info", "--json", "--cache", f->cache);
    expect_status(&r, 0);
    cJSON *j = parse_json(&r);
    const cJSON *path = cJSON_GetObjectItemCaseSensitive(j, "cache_path");
    assert_true(cJSON_IsString(path));
    expect_in(path->valuestring, f->cache);
    const cJSON *layers = cJSON_GetObjectItemCaseSensitive(j, "cache_ro_layers");
    assert_true(cJSON_IsArray(layers));
    assert_int_equal(cJSON_GetArraySize(layers), 0);
    assert_true(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(j, "megajit_version")));
    release(j);
    result_free(&r);
    r = run(f, "info", "--cache", f->cache);
    expect_status(&r, 0);
    expect_in(r.out, "journal mode");
    result_free(&r);
    /* MEGAJIT_CACHE_RO is a list: an array in JSON, one row each in the table. */
    const how two = {.ro = "/snapshots/a.db::/snapshots/b c.db"};
    r = run_how(f, &two, "info", "--json", "--cache", f->cache);
    expect_status(&r, 0);
    j = parse_json(&r);
    layers = cJSON_GetObjectItemCaseSensitive(j, "cache_ro_layers");
    assert_int_equal(cJSON_GetArraySize(layers), 2);
    assert_string_equal(cJSON_GetArrayItem(layers, 0)->valuestring, "/snapshots/a.db");
    assert_string_equal(cJSON_GetArrayItem(layers, 1)->valuestring, "/snapshots/b c.db");
    release(j);
    result_free(&r);
}

/* A precompile with no writable cache is refused before it compiles anything
 * (exit 2), instead of compiling everything and storing nothing. */
static void test_no_writable_cache_refused(void **state) {
    fixture *f = *state;
    const char *manifest = small_manifest_path(f);
    result r = run(f, "precompile", "--manifest", manifest, "--json", "--cache", "");
    expect_status(&r, 2);
    expect_in(r.err, "no writable cache: the cache directory is \"\"");
    assert_string_equal(r.out, "");
    result_free(&r);

    const how disabled = {.env = (const char *const[]){"MEGAJIT_CACHE_DISABLE=1", NULL}};
    r = run_how(f, &disabled, "precompile", "--manifest", manifest, "--json");
    expect_status(&r, 2);
    expect_in(r.err, "MEGAJIT_CACHE_DISABLE=1");
    assert_string_equal(r.out, "");
    assert_false(exists(f->cache));
    result_free(&r);

    /* A database written by a newer megajit is read-only to this one. */
    char db[PATH_MAX + 64];
    snprintf(db, sizeof db, "%s/megajit-cache.db", f->cache);
    assert_int_equal(mkdir(f->cache, 0700), 0);
    sqlite3 *c = NULL;
    assert_int_equal(sqlite3_open(db, &c), SQLITE_OK);
    assert_int_equal(sqlite3_exec(c,
                                  "PRAGMA application_id=0x4D4A4954; PRAGMA user_version=99;"
                                  "CREATE TABLE entry(x)",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(c);
    r = run(f, "precompile", "--manifest", manifest, "--cache", f->cache);
    expect_status(&r, 2);
    expect_in(r.err, "newer megajit");
    result_free(&r);
}

/* Runs in the child before it execs the precompile: a private mount namespace
 * whose cache directory is a 4 MiB tmpfs, the cache created on it, then the
 * filesystem filled up. A process that forks off here keeps a connection to the
 * cache open while the precompile runs (and then exits with its status): with
 * one connection alive SQLite reuses the allocated shared-memory file instead of
 * creating it anew, so the precompile can open the cache, and storing a kernel
 * needs space the filesystem no longer has. */
static int fill_cache_filesystem(const fixture *f) {
    mj_cache *c = NULL;
    if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
        mkdir(f->cache, 0700) != 0 ||
        mount("tmpfs", f->cache, "tmpfs", 0, "size=4m,mode=0700") != 0) {
        perror("private tmpfs");
        return 1;
    }
    if (mj_cache_create(f->cache, &c) != MJ_OK) {
        fprintf(stderr, "%s\n", mj_last_error());
        return 1;
    }
    mj_cache_close(c);
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/megajit-cache.db", f->cache);
    sqlite3 *holder = NULL;
    if (sqlite3_open(path, &holder) != SQLITE_OK ||
        sqlite3_exec(holder, "SELECT count(*) FROM entry", NULL, NULL, NULL) != SQLITE_OK) {
        fprintf(stderr, "holding %s: %s\n", path, sqlite3_errmsg(holder));
        return 1;
    }
    snprintf(path, sizeof path, "%s/filler", f->cache);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    static const char block[4096];
    while (fd >= 0 && write(fd, block, sizeof block) > 0) {
    }
    if (fd < 0 || errno != ENOSPC) {
        perror("filling the tmpfs");
        return 1;
    }
    close(fd);
    pid_t pid = fork();
    if (pid == 0) return 0;
    int status = 0;
    while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    _exit(pid > 0 && WIFEXITED(status) ? WEXITSTATUS(status) : 126);
}

/* 1 when this process may mount a private tmpfs (root, or CAP_SYS_ADMIN). */
static int can_mount_tmpfs(const fixture *f) {
    char dir[PATH_MAX + 32];
    snprintf(dir, sizeof dir, "%s/probe", f->dir);
    assert_int_equal(mkdir(dir, 0700), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(unshare(CLONE_NEWNS) == 0 && mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0 &&
                      mount("tmpfs", dir, "tmpfs", 0, "size=64k") == 0
                  ? 0
                  : 1);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    rmdir(dir);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* A kernel compiled but not stored (the cache's filesystem is full) is a failed
 * kernel: exit 1, counted, and its reason given. */
static void test_full_filesystem_fails(void **state) {
    fixture *f = *state;
    if (!can_mount_tmpfs(f)) {
        print_message("skipped: mounting a private tmpfs needs root (CAP_SYS_ADMIN)\n");
        skip();
    }
    const how full = {.prepare = fill_cache_filesystem};
    result r = run_how(f, &full, "precompile", "--manifest", small_manifest_path(f), "--json");
    expect_status(&r, 1);
    cJSON *j = parse_json(&r);
    int kernels = (int)num(j, "kernels");
    assert_true(kernels >= 2);
    assert_int_equal((int)num(j, "failed"), kernels);
    assert_int_equal((int)num(j, "compiled"), 0);
    const cJSON *failures = cJSON_GetObjectItemCaseSensitive(j, "failures");
    assert_int_equal(cJSON_GetArraySize(failures), kernels);
    const cJSON *fl;
    cJSON_ArrayForEach(fl, failures) {
        const char *why = cJSON_GetObjectItemCaseSensitive(fl, "error")->valuestring;
        expect_in(why, "could not store it in the cache");
        expect_in(why, "full");
    }
    release(j);
    result_free(&r);
}

/* Commands that only look, or find nothing to do, leave no cache behind. */
static void test_read_only_commands_create_nothing(void **state) {
    fixture *f = *state;
    char snapshot[PATH_MAX + 32];
    snprintf(snapshot, sizeof snapshot, "%s/snap.db", f->dir);
    static const struct {
        const char *args[6];
        int status;
        const char *out, *err;
    } cases[] = {
        {{"info"}, 0, "(no database yet)"},
        {{"info", "--json"}, 0, "cache_path"},
        {{"cache", "ls"}, 0, "KEY"},
        {{"cache", "ls", "--json"}, 0, "[]"},
        {{"cache", "stat"}, 0, "(no database yet)"},
        {{"cache", "stat", "--json"}, 0, "\"entries\":\t0"},
        {{"cache", "verify"}, 0, "0 entries checked, 0 bad"},
        {{"cache", "rm", "--all"}, 0, "removed 0 entries"},
        {{"cache", "gc", "--max-bytes", "0"}, 0, "removed 0 entries"},
        {{"cache", "show", "abcd"}, 1, "", "no cache entry has a key starting with abcd"},
        {{"bench", "pre-dispatch", "--iters", "1"}, 1, "", "needs a CUDA device"},
        {{"bench", "mega-moe", "--tokens", "1"}, 1, "", "needs a CUDA device"},
        /* gpt-oss-120b's hidden 2880 (a multiple of 64, not of 256) runs natively. */
        {{"bench", "mega-moe", "--shape", "gpt-oss-120b"}, 1, "", "needs a CUDA device"},
        /* Nothing runnable is said before any device is looked for. */
        {{"bench", "mega-moe", "--hidden", "2912"},
         1,
         "not runnable: hidden must be a multiple of 64 in 64..8192 (got 2912)"},
        {{"bench", "mega-moe", "--hidden", "2912", "--json"}, 1, "\"not runnable\""},
    };
    /* The bench commands find no device even on a GPU machine. */
    const how no_device = {.env = (const char *const[]){"CUDA_VISIBLE_DEVICES=", NULL}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        proc p;
        spawn(f, &p, &no_device, cases[i].args);
        result r = finish(&p);
        expect_status(&r, cases[i].status);
        expect_in(r.out, cases[i].out);
        if (cases[i].err) expect_in(r.err, cases[i].err);
        if (exists(f->cache))
            fail_msg("'%s %s' created %s", cases[i].args[0], cases[i].args[1], f->cache);
        result_free(&r);
    }
    result r = run(f, "cache", "export", snapshot);
    expect_status(&r, 1);
    expect_in(r.err, "nothing to export");
    assert_false(exists(snapshot));
    assert_false(exists(f->cache));
    result_free(&r);
}

/* A cache directory others can write is refused, saying how to fix it. */
static void test_unsafe_cache_refused(void **state) {
    fixture *f = *state;
    assert_int_equal(mkdir(f->cache, 0700), 0);
    assert_int_equal(chmod(f->cache, 01777), 0);
    result r = run(f, "precompile", "--manifest", small_manifest_path(f), "--cache", f->cache);
    expect_status(&r, 2);
    expect_in(r.err, "writable by every user (mode 1777)");
    expect_in(r.err, "chmod go-w");
    result_free(&r);
    assert_int_equal(count_entries(f->cache, "", 0), 0);
}

/* The default cache directory: XDG_CACHE_HOME, then HOME (relative values of
 * either ignored), then a per-user directory in TMPDIR, never one every user
 * shares. */
static void test_default_cache_dir(void **state) {
    fixture *f = *state;
    char home[PATH_MAX + 64], xdg[PATH_MAX + 64], want[PATH_MAX + 128];
    snprintf(home, sizeof home, "HOME=%s/home", f->dir);
    snprintf(xdg, sizeof xdg, "XDG_CACHE_HOME=%s/xdg", f->dir);
    const struct {
        const char *home, *xdg; /* environment entries */
        const char *under;      /* the cache path, after the fixture directory */
    } cases[] = {
        {home, xdg, "/xdg/megajit/"},
        {home, "XDG_CACHE_HOME=relative/cache", "/home/.cache/megajit/"},
        {"HOME", "XDG_CACHE_HOME", "/tmp/megajit-cache-"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const how h = {
            .env = (const char *const[]){"MEGAJIT_CACHE_DIR", cases[i].home, cases[i].xdg, NULL}};
        result r = run_how(f, &h, "info", "--json");
        expect_status(&r, 0);
        cJSON *j = parse_json(&r);
        snprintf(want, sizeof want, "%s%s", f->dir, cases[i].under);
        expect_in(cJSON_GetObjectItemCaseSensitive(j, "cache_path")->valuestring, want);
        /* The temporary one is named in a warning that says how to choose. */
        if (strcmp(cases[i].home, "HOME") == 0) expect_in(r.err, "set MEGAJIT_CACHE_DIR");
        release(j);
        result_free(&r);
    }
}

/* JSON output is valid UTF-8 even when a path in it is not. */
static void test_json_output_is_utf8(void **state) {
    fixture *f = *state;
    char cache[PATH_MAX + 32];
    snprintf(cache, sizeof cache, "%s/caf\xe9", f->dir); /* Latin-1, not UTF-8 */
    result r = run(f, "info", "--json", "--cache", cache);
    expect_status(&r, 0);
    assert_int_equal(mj_utf8_valid_prefix(r.out, strlen(r.out)), strlen(r.out));
    cJSON *j = parse_json(&r);
    expect_in(cJSON_GetObjectItemCaseSensitive(j, "cache_path")->valuestring, "caf\xef\xbf\xbd");
    release(j);
    result_free(&r);
}

int main(void) {
    if (access(cli_path(), X_OK) != 0) {
        fprintf(stderr, "test_cli: %s is missing (build it with `make cli`)\n", cli_path());
        return 1;
    }
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_help),
        T(test_bad_flags),
        T(test_bad_manifests),
        T(test_presets_compile_all_archs),
        T(test_concurrent_precompile),
        T(test_verify_and_heal),
        T(test_rm_gc_stat),
        T(test_export_snapshot),
        T(test_killed_precompile),
        T(test_interrupted_precompile),
        T(test_info),
        T(test_no_writable_cache_refused),
        T(test_full_filesystem_fails),
        T(test_read_only_commands_create_nothing),
        T(test_unsafe_cache_refused),
        T(test_default_cache_dir),
        T(test_json_output_is_utf8),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
