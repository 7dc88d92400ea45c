/* Every kernel a mode of the test launches, built before it starts. */
#include "tests/gpu/mega_moe/harness.h"

#include "runtime/configs.h"
#include "runtime/env.h"
#include "tools/bench/prebuild.h"

/* ------------------------------------------------- parallel precompile */

/* The matrix needs many kernels (BLOCK_M, SM count, ranks, activation and
 * clamp are all template parameters; the run prints how many): the library's
 * pool of worker processes builds them into the on-disk cache first
 * (tools/bench/prebuild.h), and the test's runtime then only loads cubins. */

static void plan_add(mj_spec_list *l, const shape *sh, int row_index, const scenario *sc,
                     int sms_full, int quick, mj_arch arch) {
    int sms = sms_for_mode(sms_full, sc->ranks, quick);
    const mj_moe_format_row *row = mj_moe_format_at(row_index);
    for (int r = 0; r < sc->ranks; r++) {
        mj_moe_config mc = moe_cfg(sh, row, sc, r);
        mj_kernel_spec spec;
        memset(&spec, 0, sizeof spec);
        /* The launch's own request: its token count and whether emulated
         * ranks share the GPU pick the tile and the CTAs an SM. */
        const mj_symm_config buffer = mj_symm_config_of_moe(&mc);
        const mj_family_request req = {.buffer = &buffer,
                                       .layer = &mc,
                                       .num_tokens = sc->tokens[r],
                                       .num_sms = sms,
                                       .sys_scope = g_comm != NULL,
                                       .shares_device = sc->ranks > 1 && g_comm == NULL};
        if (mj_mega_moe_family.build_spec(&req, MJ_MOE_KERNEL_MAIN, arch, &spec) != MJ_OK)
            continue; /* the test itself reports it */
        if (mj_spec_list_add(&spec, l) != MJ_OK) _exit(3);
        /* A shared expert's weight image has a kernel of its own (its
         * intermediate size and format); the routed one's is listed beside
         * it (the list keeps one of equal specs). */
        for (int shared = 0; sc->shared && shared <= 1; shared++) {
            memset(&spec, 0, sizeof spec);
            if (mj_mega_moe_image_spec(&mc, shared, arch, &spec) != MJ_OK) continue;
            if (mj_spec_list_add(&spec, l) != MJ_OK) _exit(3);
        }
    }
}

/* The shared expert's section on its rows, in each format that fuses: its
 * cases (the controls and the graph run cases of them) and the invalid
 * input's launch. */
static void plan_shared(mj_spec_list *l, const shape *sh, int ds, int quick, mj_arch arch) {
    const int mxfp8 = row_index_by_name("mxfp8");
    plan_add(l, sh, mxfp8, &kSharedInvalid, ds, quick, arch);
    if (quick) {
        for (size_t k = 0; k < sizeof kSharedQuickRows / sizeof kSharedQuickRows[0]; k++)
            plan_add(l, sh, row_index_by_name(kSharedQuickRows[k]), &kSharedQuick, ds, quick, arch);
        return;
    }
    for (size_t k = 0; k < sizeof kSharedRows / sizeof kSharedRows[0]; k++) {
        const int i = row_index_by_name(kSharedRows[k]);
        for (int f = 0; f < MJ_FMT_COUNT; f++) {
            if (!mj_moe_shared_fusable(mj_moe_format_at(i), f)) continue;
            for (size_t s = 0; s < sizeof kShared / sizeof kShared[0]; s++) {
                const scenario sc = with_shared_format(&kShared[s], f);
                plan_add(l, sh, i, &sc, ds, quick, arch);
            }
        }
    }
}

static void plan_quick(mj_spec_list *l, int ds, mj_arch arch) {
    plan_add(l, &kQuickShape, row_index_by_name("mxfp8"), &kInvalid, ds, 1, arch);
    for (size_t s = 0; s < sizeof kQuick / sizeof kQuick[0]; s++)
        plan_add(l, &kQuickShape, row_index_by_name("nvfp4"), &kQuick[s], ds, 1, arch);
    plan_shared(l, &kQuickShape, ds, 1, arch);
}

/* Every kernel the full run launches, and those of --quick, which run.sh
 * starts next with the same cache: the sanitizer runs then load instead of
 * compiling. */
static void plan_all(mj_spec_list *l, int ds, mj_arch arch) {
    const shape *sh = &kFull;
    plan_add(l, sh, row_index_by_name("mxfp8"), &kInvalid, ds, 0, arch);
    for (int i = 0; i < mj_moe_format_count(); i++)
        for (size_t s = 0; s < sizeof kMatrix / sizeof kMatrix[0]; s++)
            plan_add(l, sh, i, &kMatrix[s], ds, 0, arch);
    for (int i = 0; i < mj_moe_format_count(); i++)
        for (size_t b = 0; b < sizeof kBlockMs / sizeof kBlockMs[0]; b++) {
            if (kBlockMs[b] > mj_moe_max_block_m(mj_moe_format_at(i))) continue;
            scenario sc = kControlBase;
            sc.block_m = kBlockMs[b];
            plan_add(l, sh, i, &sc, ds, 0, arch);
        }
    for (int i = 0; i < mj_moe_format_count(); i++) {
        scenario sc = kControlBase; /* the kernel of the wrong-swiglu-alpha control */
        sc.act_params[0] = -1.0f;
        plan_add(l, sh, i, &sc, ds, 0, arch);
        plan_add(l, sh, i, &kBiasControl, ds, 0, arch);
    }
    plan_shared(l, sh, ds, 0, arch);
    plan_add(l, sh, row_index_by_name("mxfp8"), &kPeers2, ds, 0, arch);
    plan_add(l, sh, row_index_by_name("mxfp8"), &kPeers4, ds, 0, arch);
    for (int i = 0; i < mj_moe_format_count(); i++) {
        plan_add(l, &kGptOss, i, &kGptOssCase, ds, 0, arch);
        plan_add(l, &kGptOss, i, &kGptOssOneRank, ds, 0, arch);
        plan_add(l, &kGptOss, i, &kGptOssBiased8, ds, 0, arch);
    }
    plan_quick(l, ds, arch);
}

void precompile(void) {
    if (mj_env_get()->cache_disable) {
        printf("precompile: skipped (MEGAJIT_CACHE_DISABLE: workers could not share cubins)\n");
        return;
    }
    int sms = 0;
    char arch[16];
    if (!mj_bench_probe_device(&sms, arch, sizeof arch)) {
        printf("precompile: skipped (no device to plan for)\n");
        return;
    }
    mj_spec_list plan = {0};
    plan_all(&plan, sms, mj_arch_parse(arch));
    int jobs = mj_build_pool_default_jobs();
    if (jobs > 16) jobs = 16;
    const mj_runtime_options rt_opts = MJ_RUNTIME_OPTIONS_INIT;
    double t0 = now_s();
    mj_bench_prebuild_result r;
    if (mj_bench_prebuild(&plan, &rt_opts, jobs, stdout, "precompile", &r) != MJ_OK)
        printf("precompile: %s\n", mj_last_error());
    mj_build_pool_die_of(r.stop_signal); /* the interrupt was meant for the test */
    printf("precompile: %zu kernels (%d compiled, %d cached, %d failed) by %d workers in %.1f s\n",
           plan.count, r.compiled, r.cached, r.failed, r.workers, now_s() - t0);
    mj_spec_list_free(&plan);
}
