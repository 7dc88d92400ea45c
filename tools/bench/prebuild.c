#include "tools/bench/prebuild.h"

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/build_pool.h"
#include "runtime/jit.h"

int mj_bench_probe_device(int *sms, char *arch, size_t arch_cap) {
    struct {
        int sms;
        char arch[16];
    } probe = {0, ""};
    int fds[2];
    if (pipe(fds) != 0) return 0;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        mj_runtime *rt = NULL;
        mj_info info;
        if (mj_runtime_create(&rt, NULL) == MJ_OK && mj_runtime_has_device(rt) &&
            mj_runtime_info(rt, &info) == MJ_OK) {
            probe.sms = info.device_sms;
            snprintf(probe.arch, sizeof probe.arch, "%s", info.arch);
        }
        _exit(write(fds[1], &probe, sizeof probe) == (ssize_t)sizeof probe ? 0 : 1);
    }
    close(fds[1]);
    if (pid < 0 || read(fds[0], &probe, sizeof probe) != (ssize_t)sizeof probe) probe.sms = 0;
    close(fds[0]);
    if (pid > 0) waitpid(pid, NULL, 0);
    *sms = probe.sms;
    snprintf(arch, arch_cap, "%s", probe.arch);
    return probe.sms > 0;
}

typedef struct tally {
    const mj_spec_list *list;
    FILE *log;
    const char *label;
    mj_bench_prebuild_result *out;
} tally;

static mj_status build_one(mj_runtime *rt, size_t index, void *ctx, mj_build_result *result,
                           double *seconds) {
    const mj_spec_list *l = ctx;
    return mj_jit_build(rt, &l->specs[index], result, seconds);
}

static void count_one(const mj_build_report *r, void *ctx) {
    tally *t = ctx;
    if (r->result == MJ_BUILD_COMPILED) {
        t->out->compiled++;
    } else if (r->result == MJ_BUILD_CACHED) {
        t->out->cached++;
    } else {
        t->out->failed++;
        /* The first lines of a compile error are what the kernel author needs. */
        fprintf(t->log, "%s FAILED %s: %s\n", t->label, t->list->descriptions[r->index], r->error);
    }
}

mj_status mj_bench_prebuild(const mj_spec_list *l, const mj_runtime_options *opts, int jobs,
                            FILE *log, const char *label, mj_bench_prebuild_result *out) {
    memset(out, 0, sizeof *out);
    tally t = {l, log, label, out};
    const size_t n = l->count;
    const mj_build_pool pool = {.count = n,
                                .jobs = jobs < 1           ? 1
                                        : (size_t)jobs > n ? (n ? (int)n : 1)
                                                           : jobs,
                                .runtime = opts,
                                .build = build_one,
                                .build_ctx = (void *)l,
                                .report = count_one,
                                .report_ctx = &t};
    return mj_build_pool_run(&pool, &out->workers, &out->stop_signal);
}
