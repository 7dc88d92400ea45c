/*
 * megajit precompile: compiles every kernel of a manifest that the cache lacks.
 *
 * Work is spread over long-lived fork()ed workers rather than one process per
 * kernel: NVRTC's precompiled-header state lives in the process, so a worker
 * that compiles many kernels pays for it once. Workers claim kernel indices
 * from an atomic counter in shared memory (so a slow kernel never holds up a
 * queue) and report each result over one pipe; a report is smaller than
 * PIPE_BUF, so reports of different workers never interleave.
 *
 * Workers open their own runtime after fork(): neither SQLite connections nor
 * CUDA state may cross a fork. They die with the parent (PR_SET_PDEATHSIG) so a
 * killed precompile leaves no orphan writing into the cache, and they end
 * through exit() so the library removes what they made (their PCH directory).
 *
 * Interruption (SIGINT, SIGTERM, SIGHUP): the first signal asks every worker to
 * stop after the kernel it is compiling, so each still exits normally; the
 * parent then reports and dies of the signal. A second signal kills the
 * workers at once; what they leave, the next compiling process removes.
 */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tools/megajit/cli.h"

static const char kUsage[] =
    "usage: megajit precompile (--preset NAME | --manifest FILE) [options]\n"
    "\n"
    "Compiles every kernel the runtime can request for a deployment into the cache.\n"
    "Kernels already cached (or served by a MEGAJIT_CACHE_RO snapshot) are skipped.\n"
    "\n"
    "options:\n"
    "  --preset NAME      an embedded manifest: deepseek-v3-ep8, kimi-k2-ep8,\n"
    "                     qwen3-235b-ep4, gpt-oss-120b-ep1\n"
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

enum { MAX_JOBS = 256, ERROR_CHARS = 400 };

typedef struct report {
    uint64_t index;
    int32_t result; /* mj_build_result */
    double seconds;
    char error[ERROR_CHARS];
} report;
_Static_assert(sizeof(report) <= 512, "a report must be written atomically to a pipe");

typedef struct shared_state {
    atomic_size_t next_index;
} shared_state;

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
            if (cli_parse_long(optarg, 1, MAX_JOBS, &o->jobs) != 0)
                return cli_usage_error("precompile", kUsage, "--jobs: expected 1..%d, got '%s'",
                                       MAX_JOBS, optarg);
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

static long default_jobs(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? n : 1;
}

static int write_all(int fd, const void *buf, size_t len) {
    const char *p = buf;
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static const int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP};
static volatile sig_atomic_t stop_signal; /* parent: the first signal received */
static volatile sig_atomic_t stopping;    /* worker: stop after the current kernel */
static pid_t worker_pids[MAX_JOBS];
static volatile sig_atomic_t num_workers;

static void parent_on_signal(int sig) {
    int again = stop_signal != 0;
    if (!again) stop_signal = sig;
    for (int i = 0; i < num_workers; i++)
        kill(worker_pids[i], again ? SIGKILL : SIGTERM);
}

static void worker_on_signal(int sig) {
    (void)sig;
    stopping = 1;
}

static void on_stop_signals(void (*handler)(int)) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sa.sa_flags = SA_RESTART; /* NVRTC and SQLite need not see EINTR */
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof kStopSignals / sizeof kStopSignals[0]; i++)
        sigaction(kStopSignals[i], &sa, NULL);
}

static void block_stop_signals(int how) {
    sigset_t set;
    sigemptyset(&set);
    for (size_t i = 0; i < sizeof kStopSignals / sizeof kStopSignals[0]; i++)
        sigaddset(&set, kStopSignals[i]);
    sigprocmask(how, &set, NULL);
}

static _Noreturn void worker(const mj_manifest *m, shared_state *shared, int fd,
                             const mj_runtime_options *rt_opts, pid_t parent) {
    on_stop_signals(worker_on_signal);
    block_stop_signals(SIG_UNBLOCK); /* blocked by the parent around fork() */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(CLI_EXIT_FAIL);
    size_t n = mj_manifest_kernel_count(m);
    mj_runtime *rt = NULL;
    char rt_error[ERROR_CHARS] = "";
    if (mj_runtime_create(&rt, rt_opts) != MJ_OK)
        snprintf(rt_error, sizeof rt_error, "cannot open the runtime: %s", mj_last_error());
    while (!stopping) {
        size_t i = atomic_fetch_add(&shared->next_index, 1);
        if (i >= n) break;
        report r;
        memset(&r, 0, sizeof r);
        r.index = i;
        r.result = MJ_BUILD_FAILED;
        if (!rt) {
            snprintf(r.error, sizeof r.error, "%s", rt_error);
        } else {
            mj_build_result result;
            if (mj_manifest_build_kernel(rt, m, i, &result, &r.seconds) == MJ_OK)
                r.result = result;
            else
                snprintf(r.error, sizeof r.error, "%s", mj_last_error());
        }
        if (write_all(fd, &r, sizeof r) != 0) break;
    }
    mj_runtime_destroy(rt);
    exit(0);
}

typedef struct tally {
    size_t total;
    size_t done;
    size_t compiled;
    size_t cached;
    size_t failed;
} tally;

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
    long jobs = o.jobs ? o.jobs : default_jobs();
    if ((size_t)jobs > n) jobs = n ? (long)n : 1;
    cJSON *archs = cJSON_CreateArray();
    archs_of(m, archs);
    mj_runtime_options rt_opts = {.cache_dir = o.cache};
    if (cJSON_GetArraySize(archs) > 0) rt_opts.arch = cJSON_GetArrayItem(archs, 0)->valuestring;

    shared_state *shared =
        mmap(NULL, sizeof *shared, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    int fds[2] = {-1, -1};
    if (shared == MAP_FAILED || pipe(fds) != 0) {
        fprintf(stderr, "megajit precompile: cannot set up workers: %s\n", strerror(errno));
        cJSON_Delete(archs);
        mj_manifest_destroy(m);
        return CLI_EXIT_FAIL;
    }
    atomic_init(&shared->next_index, 0);
    fflush(NULL);

    double start = now_seconds();
    pid_t parent = getpid();
    on_stop_signals(parent_on_signal);
    while (n > 0 && num_workers < jobs && !stop_signal) {
        /* Blocked until the worker has its own handler and is in worker_pids. */
        block_stop_signals(SIG_BLOCK);
        pid_t pid = fork();
        if (pid == 0) {
            close(fds[0]);
            worker(m, shared, fds[1], &rt_opts, parent);
        }
        if (pid > 0) worker_pids[num_workers++] = pid;
        block_stop_signals(SIG_UNBLOCK);
        if (pid < 0) break;
    }
    close(fds[1]);
    if (n > 0 && num_workers == 0 && !stop_signal)
        fprintf(stderr, "megajit precompile: cannot start a worker: %s\n", strerror(errno));

    int bar = !o.json && isatty(STDERR_FILENO);
    int lines = !o.json && !bar;
    tally t = {.total = n};
    unsigned char *reported = calloc(n ? n : 1, 1);
    if (!reported) {
        fputs("megajit precompile: out of memory\n", stderr);
        return CLI_EXIT_FAIL;
    }
    cJSON *failures = cJSON_CreateArray();
    report r;
    size_t got = 0;
    for (;;) {
        ssize_t k = read(fds[0], (char *)&r + got, sizeof r - got);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        got += (size_t)k;
        if (got < sizeof r) continue;
        got = 0;
        if (r.index >= n || reported[r.index]) continue;
        reported[r.index] = 1;
        t.done++;
        const char *what = mj_manifest_kernel_describe(m, r.index);
        const char *label = "failed";
        if (r.result == MJ_BUILD_COMPILED) {
            t.compiled++;
            label = "compiled";
        } else if (r.result == MJ_BUILD_CACHED) {
            t.cached++;
            label = "cached";
        } else {
            t.failed++;
            r.error[sizeof r.error - 1] = '\0';
            cJSON *f = cJSON_CreateObject();
            cJSON_AddStringToObject(f, "kernel", what);
            cJSON_AddStringToObject(f, "error", r.error);
            cJSON_AddItemToArray(failures, f);
            if (bar) fputs("\r\033[K", stderr);
            if (!o.json) fprintf(stderr, "megajit precompile: %s: %s\n", what, r.error);
        }
        if (lines)
            fprintf(stderr, "[%*zu/%zu] %-8s %6.2f s  %s\n", (int)snprintf(NULL, 0, "%zu", n),
                    t.done, n, label, r.seconds, what);
        show_progress(&t, what, bar);
    }
    close(fds[0]);
    int crashed = 0;
    for (long i = 0; i < num_workers; i++) {
        int status;
        while (waitpid(worker_pids[i], &status, 0) < 0 && errno == EINTR) {
        }
        crashed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    }
    for (size_t i = 0; i < n; i++) {
        if (reported[i]) continue;
        t.failed++;
        const char *why = stop_signal ? "interrupted"
                          : crashed   ? "its worker process died"
                                      : "no worker could build it";
        cJSON *f = cJSON_CreateObject();
        cJSON_AddStringToObject(f, "kernel", mj_manifest_kernel_describe(m, i));
        cJSON_AddStringToObject(f, "error", why);
        cJSON_AddItemToArray(failures, f);
        if (!o.json)
            fprintf(stderr, "megajit precompile: %s: %s\n", mj_manifest_kernel_describe(m, i), why);
    }
    free(reported);
    munmap(shared, sizeof *shared);
    double seconds = now_seconds() - start;

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
    if (stop_signal) {
        /* Dying of the signal tells the caller (a shell, make) what happened. */
        fflush(NULL);
        signal(stop_signal, SIG_DFL);
        raise(stop_signal);
    }
    if (rc) return rc;
    return t.failed ? CLI_EXIT_FAIL : 0;
}
