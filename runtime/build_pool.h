/*
 * Builds many kernels into the on-disk cache with a pool of worker processes:
 * `megajit precompile` over a manifest, the GPU tests over their own specs.
 *
 * Work is spread over long-lived fork()ed workers rather than one process per
 * kernel: NVRTC's precompiled-header state lives in the process, so a worker
 * that compiles many kernels pays for it once. Workers claim item indices
 * from an atomic counter in shared memory (so a slow kernel never holds up a
 * queue) and report each result over one pipe; a report is at most PIPE_BUF
 * bytes, so reports of different workers never interleave.
 *
 * Workers open their own runtime after fork(): neither SQLite connections nor
 * CUDA state may cross a fork, so the calling process must not have touched
 * CUDA yet. Workers die with the caller (PR_SET_PDEATHSIG), so a killed build
 * leaves no orphan writing into the cache, and they end through exit() so the
 * library removes what they made (their PCH directory, runtime/pch_dir.h).
 *
 * Interruption (SIGINT, SIGTERM, SIGHUP) while the pool runs: the first signal
 * asks every worker to stop after the item it is building, so each still
 * exits normally; the items nobody built are reported "interrupted" and the
 * caller learns the signal (to die of it once it has reported). A second
 * signal kills the workers at once; what they leave, the next compiling
 * process removes. The caller's own handlers are back when the pool returns.
 */
#ifndef MJ_BUILD_POOL_H
#define MJ_BUILD_POOL_H

#include <stddef.h>

#include "include/megajit.h"

enum { MJ_BUILD_POOL_MAX_JOBS = 256, MJ_BUILD_ERROR_CHARS = 1500 };

typedef struct mj_build_report {
    size_t index;
    mj_build_result result;
    double seconds;
    char error[MJ_BUILD_ERROR_CHARS]; /* why it failed; "" otherwise */
} mj_build_report;

/* Builds item `index` with the worker's own runtime (in a worker process). */
typedef mj_status (*mj_build_item_fn)(mj_runtime *rt, size_t index, void *ctx,
                                      mj_build_result *result, double *seconds);
/* Receives, in the calling process, one report per item in completion order;
 * items no worker reported come last, failed, saying why ("interrupted" after
 * a stop signal). */
typedef void (*mj_build_report_fn)(const mj_build_report *report, void *ctx);

typedef struct mj_build_pool {
    size_t count;                      /* items 0 .. count - 1 */
    int jobs;                          /* worker processes, 1 .. MJ_BUILD_POOL_MAX_JOBS */
    const mj_runtime_options *runtime; /* what each worker opens (complete, not NULL) */
    mj_build_item_fn build;
    void *build_ctx;
    mj_build_report_fn report;
    void *report_ctx;
} mj_build_pool;

/* Creates the cache database first (so workers do not race to create it),
 * runs the workers and returns once every item is reported. *workers gets
 * how many started, *stop_signal the signal that interrupted the run (0:
 * none). MJ_OK unless the pool could not be set up at all. */
mj_status mj_build_pool_run(const mj_build_pool *pool, int *workers, int *stop_signal);

/* After a run a signal stopped (stop_signal != 0): flushes stdio and dies of
 * that signal, so the caller (a shell, make) sees what happened. Returns
 * when stop_signal is 0. */
void mj_build_pool_die_of(int stop_signal);

/* Worker processes for the CPUs this process may run on, at most
 * MJ_BUILD_POOL_MAX_JOBS (what mj_build_pool_run takes). */
int mj_build_pool_default_jobs(void);

#endif
