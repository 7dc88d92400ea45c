/* Every kernel a mode of the test launches, built before it starts. */
#include "tests/gpu/mega_moe/harness.h"

#include <signal.h>

/* ------------------------------------------------- parallel precompile */

/* NVRTC compiles are serialized inside one process and the matrix needs ~100
 * kernels (BLOCK_M, SM count, ranks, activation and clamp are all template
 * parameters), so the library's pool of worker processes builds them into the
 * on-disk cache first; the test's runtime then only loads cubins. This
 * process must not have touched CUDA before the pool forks. */
typedef struct spec_list {
    mj_kernel_spec *v;
    char (*desc)[96];
    int n, cap;
} spec_list;

static void plan_add(spec_list *l, const shape *sh, int row_index, const scenario *sc, int sms_full,
                     int quick, mj_arch arch) {
    int sms = sms_for_mode(sms_full, sc->ranks, quick);
    const mj_moe_format_row *row = mj_moe_format_at(row_index);
    for (int r = 0; r < sc->ranks; r++) {
        mj_moe_config mc = moe_cfg(sh, row, sc, r);
        int bm;
        mj_kernel_spec spec;
        memset(&spec, 0, sizeof spec);
        if (mj_mega_moe_block_m(&mc, sc->tokens[r], &bm) != MJ_OK ||
            mj_mega_moe_spec(&mc, bm, sms, g_comm != NULL, arch, &spec) != MJ_OK)
            continue; /* the test itself reports it */
        int dup = 0;
        for (int i = 0; i < l->n && !dup; i++)
            dup = !memcmp(&l->v[i], &spec, sizeof spec);
        if (dup) continue;
        if (l->n == l->cap) {
            l->cap = l->cap ? 2 * l->cap : 64;
            l->v = realloc(l->v, (size_t)l->cap * sizeof *l->v);
            l->desc = realloc(l->desc, (size_t)l->cap * sizeof *l->desc);
            if (!l->v || !l->desc) _exit(3);
        }
        snprintf(l->desc[l->n], sizeof l->desc[0], "%s R=%d %s%s bm=%d sms=%d", row->name,
                 sc->ranks, mj_moe_activation_name(sc->act), sc->clamp > 0 ? "+clamp" : "", bm,
                 sms);
        l->v[l->n++] = spec;
    }
}

static void plan_timing(spec_list *l, int ds, mj_arch arch) {
    for (int i = 0; i < mj_moe_format_count(); i++) {
        scenario sc = {1, SWIGLU, 0, {kTiming.TMAX}, ROUTE_RANDOM, -1, 0, 0};
        plan_add(l, &kTiming, i, &sc, ds, 0, arch);
    }
}

static void plan_quick(spec_list *l, int ds, mj_arch arch) {
    plan_add(l, &kQuickShape, row_index_by_name("mxfp8"), &kInvalid, ds, 1, arch);
    for (size_t s = 0; s < sizeof kQuick / sizeof kQuick[0]; s++)
        plan_add(l, &kQuickShape, row_index_by_name("nvfp4"), &kQuick[s], ds, 1, arch);
}

/* Every kernel the chosen mode launches. The full run also builds the kernels
 * of --quick and --timing, which run.sh starts next with the same cache: the
 * sanitizer runs then load instead of compiling. */
static void plan_all(spec_list *l, int ds, mj_arch arch) {
    if (g_timing) {
        plan_timing(l, ds, arch);
        return;
    }
    const shape *sh = &kFull;
    plan_add(l, sh, row_index_by_name("mxfp8"), &kInvalid, ds, 0, arch);
    for (int i = 0; i < mj_moe_format_count(); i++)
        for (size_t s = 0; s < sizeof kMatrix / sizeof kMatrix[0]; s++)
            plan_add(l, sh, i, &kMatrix[s], ds, 0, arch);
    for (int i = 0; i < mj_moe_format_count(); i++)
        for (size_t b = 0; b < sizeof kBlockMs / sizeof kBlockMs[0]; b++) {
            scenario sc = kControlBase;
            sc.block_m = kBlockMs[b];
            plan_add(l, sh, i, &sc, ds, 0, arch);
        }
    plan_add(l, sh, row_index_by_name("mxfp8"), &kPeers2, ds, 0, arch);
    plan_add(l, sh, row_index_by_name("mxfp8"), &kPeers4, ds, 0, arch);
    plan_quick(l, ds, arch);
    plan_timing(l, ds, arch);
}

/* The device's SM count and architecture, read by a child process: this one
 * must not touch CUDA before the precompile workers fork. 0 without a device. */
static int probe_device(int *sms, char *arch, size_t arch_cap) {
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
        if (mj_runtime_create(&rt, NULL) == MJ_OK && mj_runtime_info(rt, &info) == MJ_OK) {
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

typedef struct precompile_tally {
    const spec_list *plan;
    int compiled, cached, failed;
} precompile_tally;

static mj_status build_planned(mj_runtime *rt, size_t index, void *ctx, mj_build_result *result,
                               double *seconds) {
    const spec_list *plan = ctx;
    return mj_jit_build(rt, &plan->v[index], result, seconds);
}

static void count_built(const mj_build_report *r, void *ctx) {
    precompile_tally *t = ctx;
    if (r->result == MJ_BUILD_COMPILED) {
        t->compiled++;
    } else if (r->result == MJ_BUILD_CACHED) {
        t->cached++;
    } else {
        t->failed++;
        /* The first lines of a compile error are what the kernel author needs. */
        printf("precompile FAILED %s: %s\n", t->plan->desc[r->index], r->error);
    }
}

void precompile(void) {
    const char *dis = getenv("MEGAJIT_CACHE_DISABLE");
    if (dis && !strcmp(dis, "1")) {
        printf("precompile: skipped (MEGAJIT_CACHE_DISABLE=1: workers could not share cubins)\n");
        return;
    }
    int sms = 0;
    char arch[16];
    if (!probe_device(&sms, arch, sizeof arch)) {
        printf("precompile: skipped (no device to plan for)\n");
        return;
    }
    spec_list plan = {0};
    plan_all(&plan, sms, mj_arch_parse(arch));
    int jobs = mj_build_pool_default_jobs();
    if (jobs > 16) jobs = 16;
    if (g_timing && jobs > 6) jobs = 6;
    precompile_tally tally = {.plan = &plan};
    const mj_runtime_options rt_opts = MJ_RUNTIME_OPTIONS_INIT;
    const mj_build_pool pool = {.count = (size_t)plan.n,
                                .jobs = jobs,
                                .runtime = &rt_opts,
                                .build = build_planned,
                                .build_ctx = &plan,
                                .report = count_built,
                                .report_ctx = &tally};
    double t0 = now_s();
    int workers = 0, stop_signal = 0;
    if (mj_build_pool_run(&pool, &workers, &stop_signal) != MJ_OK)
        printf("precompile: %s\n", mj_last_error());
    if (stop_signal) { /* the interrupt was meant for the test */
        fflush(NULL);
        signal(stop_signal, SIG_DFL);
        raise(stop_signal);
    }
    printf("precompile: %d kernels (%d compiled, %d cached, %d failed) by %d workers in %.1f s\n",
           plan.n, tally.compiled, tally.cached, tally.failed, workers, now_s() - t0);
    free(plan.v);
    free(plan.desc);
}
