#include "runtime/build_pool.h"

#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cache/cache.h"
#include "runtime/env.h"
#include "runtime/error.h"
#include "runtime/log.h"
#include "runtime/pch_dir.h"
#include "runtime/runtime.h"

_Static_assert(sizeof(mj_build_report) <= PIPE_BUF,
               "a report must be written atomically to a pipe");

typedef struct shared_state {
    atomic_size_t next_index;
} shared_state;

int mj_build_pool_default_jobs(void) {
    cpu_set_t set;
    long n = sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0
                 ? CPU_COUNT(&set)
                 : sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > MJ_BUILD_POOL_MAX_JOBS ? MJ_BUILD_POOL_MAX_JOBS : (int)n;
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
enum { NUM_STOP_SIGNALS = (int)(sizeof kStopSignals / sizeof kStopSignals[0]) };
static volatile sig_atomic_t stop_signal; /* caller: the first signal received */
static volatile sig_atomic_t stopping;    /* worker: stop after the current item */
static pid_t worker_pids[MJ_BUILD_POOL_MAX_JOBS];
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

/* Installs handler for the stop signals; the previous actions go to old. */
static void on_stop_signals(void (*handler)(int), struct sigaction *old) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sa.sa_flags = SA_RESTART; /* NVRTC and SQLite need not see EINTR */
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < NUM_STOP_SIGNALS; i++)
        sigaction(kStopSignals[i], &sa, old ? &old[i] : NULL);
}

static void block_stop_signals(int how) {
    sigset_t set;
    sigemptyset(&set);
    for (int i = 0; i < NUM_STOP_SIGNALS; i++)
        sigaddset(&set, kStopSignals[i]);
    sigprocmask(how, &set, NULL);
}

static _Noreturn void worker(const mj_build_pool *pool, shared_state *shared, int fd,
                             pid_t parent) {
    on_stop_signals(worker_on_signal, NULL);
    block_stop_signals(SIG_UNBLOCK); /* blocked by the caller around fork() */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1); /* nothing made yet */
    mj_runtime *rt = NULL;
    char rt_error[MJ_BUILD_ERROR_CHARS] = "";
    if (mj_runtime_new(pool->runtime, &rt) != MJ_OK)
        snprintf(rt_error, sizeof rt_error, "cannot open the runtime: %s", mj_last_error());
    int tmpdir_set = 0;
    while (!stopping) {
        size_t i = atomic_fetch_add(&shared->next_index, 1);
        if (i >= pool->count) break;
        // NVRTC's own temporary files (EDG's) go to TMPDIR: inside this
        // worker's PCH directory, the next run removes them when a kill left
        // them behind. Made once an item is claimed, so that the directory
        // means a build is under way, which a stop signal lets finish.
        if (!tmpdir_set) {
            const char *pch = mj_pch_dir();
            if (pch) setenv("TMPDIR", pch, 1);
            tmpdir_set = 1;
        }
        mj_build_report r;
        memset(&r, 0, sizeof r);
        r.index = i;
        r.result = MJ_BUILD_FAILED;
        // NVRTC's front end installs handlers of its own for these signals
        // while it compiles, and they end the process (status 4) with the item
        // half built and unreported. Held back during the item, a stop request
        // reaches our handler once the item is done.
        block_stop_signals(SIG_BLOCK);
        if (!rt) {
            snprintf(r.error, sizeof r.error, "%s", rt_error);
        } else {
            mj_build_result result = MJ_BUILD_FAILED;
            mj_clear_error();
            if (pool->build(rt, i, pool->build_ctx, &result, &r.seconds) == MJ_OK)
                r.result = result;
            else
                snprintf(r.error, sizeof r.error, "%s", mj_last_error());
        }
        on_stop_signals(worker_on_signal, NULL);
        block_stop_signals(SIG_UNBLOCK);
        if (write_all(fd, &r, sizeof r) != 0) break;
    }
    mj_runtime_free(rt);
    exit(0);
}

/* The database the workers will share, created before they start. When this
 * fails each worker reports why it cannot open the cache. */
static void create_cache(const mj_runtime_options *o) {
    const mj_env *env = mj_env_get();
    if (o->cache_disable || env->cache_disable) return;
    mjc_open_opts co = {.dir = o->cache_dir ? o->cache_dir : env->cache_dir,
                        .create = 1,
                        .warn = mj_log_cache_warning};
    mjc_db *db = NULL;
    char err[512];
    if (mjc_open(&co, &db, err, sizeof err) == MJC_OK) mjc_close(db);
}

static void report_missing(const mj_build_pool *pool, const unsigned char *reported, int crashed,
                           int started, int fork_errno, int interrupted) {
    for (size_t i = 0; i < pool->count; i++) {
        if (reported[i]) continue;
        mj_build_report r;
        memset(&r, 0, sizeof r);
        r.index = i;
        r.result = MJ_BUILD_FAILED;
        if (interrupted)
            snprintf(r.error, sizeof r.error, "interrupted");
        else if (crashed)
            snprintf(r.error, sizeof r.error, "its worker process died");
        else if (!started)
            snprintf(r.error, sizeof r.error, "no worker could start: %s", strerror(fork_errno));
        else
            snprintf(r.error, sizeof r.error, "no worker could build it");
        pool->report(&r, pool->report_ctx);
    }
}

mj_status mj_build_pool_run(const mj_build_pool *pool, int *workers, int *stopped_by) {
    *workers = 0;
    *stopped_by = 0;
    if (pool->jobs < 1 || pool->jobs > MJ_BUILD_POOL_MAX_JOBS || !pool->runtime || !pool->build ||
        !pool->report)
        return mj_fail(MJ_ERR_INVALID_ARG,
                       "build pool: jobs %d outside 1..%d or a callback missing", pool->jobs,
                       MJ_BUILD_POOL_MAX_JOBS);
    if (pool->count == 0) return MJ_OK;
    unsigned char *reported = calloc(pool->count, 1);
    shared_state *shared =
        mmap(NULL, sizeof *shared, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    int fds[2] = {-1, -1};
    if (!reported || shared == MAP_FAILED || pipe(fds) != 0) {
        mj_status st = mj_fail(MJ_ERR_IO, "cannot set up build workers: %s", strerror(errno));
        free(reported);
        if (shared != MAP_FAILED) munmap(shared, sizeof *shared);
        return st;
    }
    atomic_init(&shared->next_index, 0);
    create_cache(pool->runtime);
    fflush(NULL);

    pid_t parent = getpid();
    int fork_errno = 0;
    size_t jobs = (size_t)pool->jobs < pool->count ? (size_t)pool->jobs : pool->count;
    stop_signal = 0;
    num_workers = 0;
    struct sigaction old[NUM_STOP_SIGNALS];
    on_stop_signals(parent_on_signal, old);
    while ((size_t)num_workers < jobs && !stop_signal) {
        /* Blocked until the worker has its own handler and is in worker_pids. */
        block_stop_signals(SIG_BLOCK);
        pid_t pid = fork();
        if (pid == 0) {
            close(fds[0]);
            worker(pool, shared, fds[1], parent);
        }
        if (pid > 0) worker_pids[num_workers++] = pid;
        if (pid < 0) fork_errno = errno;
        block_stop_signals(SIG_UNBLOCK);
        if (pid < 0) break;
    }
    const int started = num_workers;
    close(fds[1]);

    mj_build_report r;
    size_t got = 0;
    for (;;) {
        ssize_t k = read(fds[0], (char *)&r + got, sizeof r - got);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        got += (size_t)k;
        if (got < sizeof r) continue;
        got = 0;
        if (r.index >= pool->count || reported[r.index]) continue;
        reported[r.index] = 1;
        r.error[sizeof r.error - 1] = '\0';
        pool->report(&r, pool->report_ctx);
    }
    close(fds[0]);
    int crashed = 0;
    for (int i = 0; i < started; i++) {
        int status = 0;
        while (waitpid(worker_pids[i], &status, 0) < 0 && errno == EINTR) {
        }
        crashed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    }
    /* No worker is left to signal: the caller's handlers come back. */
    block_stop_signals(SIG_BLOCK);
    num_workers = 0;
    for (int i = 0; i < NUM_STOP_SIGNALS; i++)
        sigaction(kStopSignals[i], &old[i], NULL);
    block_stop_signals(SIG_UNBLOCK);
    report_missing(pool, reported, crashed, started, fork_errno, stop_signal != 0);
    free(reported);
    munmap(shared, sizeof *shared);
    *workers = started;
    *stopped_by = stop_signal;
    return MJ_OK;
}

void mj_build_pool_die_of(int stop_signal) {
    if (!stop_signal) return;
    fflush(NULL);
    signal(stop_signal, SIG_DFL);
    raise(stop_signal);
}
