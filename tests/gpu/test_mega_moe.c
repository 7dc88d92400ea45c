/*
 * MegaMoE on a GPU against the fp64 host reference (tests/reference/moe_ref.h):
 * every format row and activation, emulated ranks (1, 2, 4, 8 in one buffer,
 * one non-blocking stream per rank, all in flight together), BLOCK_M
 * independence, CUDA graphs, invalid input, negative controls and a decode
 * timing table. Outputs are poisoned (0xFFFF, a BF16 NaN) before each launch,
 * so an unwritten element fails like a wrong one.
 *
 *   test_mega_moe [--quick] [--seed N] [--timing] [--budget S] [--no-precompile]
 *   launch_ranks --gpus N -- test_mega_moe --real-ranks [--seed N]
 *
 * --real-ranks: one process per GPU under tests/gpu/launch_ranks; rank r uses
 * device r, joins the launcher's NCCL communicator and a symmetric buffer from
 * mj_symm_buffer_create_nccl, and runs every format row (swiglu) plus one
 * clamp case. Every rank draws all ranks' inputs from the same seed (derived
 * from the NCCL id unless --seed is given), so each computes the fp64
 * reference of all ranks on the host and checks its own y and recv_stats.
 *
 * --quick: one row (nvfp4), R = 2, H 256, I 64, E 4, K 2, T <= 8, for
 * compute-sanitizer. --timing: only the decode timing table (bench/RESULTS.md).
 * --budget: seconds after which the remaining cases are skipped and counted as
 * skipped (default 140), so a slow machine still prints its summary. The last
 * line is "N passed, N failed"; the exit status is non-zero on any failure.
 *
 * Pass/fail: calc_diff(y, y_ref) < 1e-3 per rank (< 1e-4 for the bf16 row,
 * which is expected below 1e-5), no poison left in rows < num_tokens, every
 * element finite, rows >= num_tokens untouched, recv_stats equal to the
 * reference's counts.
 *
 * Negative controls (the numeric check must FAIL; the test passes when it
 * does). calc_diff per format row measured on the H200, 2026-11-29
 * (bf16 / mxfp8 / mxfp4-a8 / mxfp4-a16 / nvfp4 / nvfp4-a16):
 *   control swap-gate-up        (gate data loaded as up and vice versa)
 *       0.483 / 0.483 / 0.487 / 0.432 / 0.457 / 0.533 -> detected
 *   control no-routing-weight   (GPU top-k weights all 1.0, reference keeps them)
 *       0.287 / 0.242 / 0.245 / 0.21 / 0.256 / 0.19 -> detected
 *   control wrong-scale         (+1 on every gate scale byte of the one expert
 *                                every token uses; bf16 row skipped, no scales)
 *       - / 0.201 / 0.201 / 0.201 / 0.0054 / 0.00166 -> detected
 *   control wrong-scale-1-byte  (+1 on a single scale byte: informational only,
 *                                its effect is ~1e-4 at these shapes, below the bar)
 *       - / 1.5e-4 / 4.6e-4 / 1.9e-5 / 0 / 7.8e-16 (not counted)
 *   control wrong-alpha         (l2_alpha x2 on the GPU only)
 *       0.2 on every row -> detected
 *   control wrong-peer-offset   (every peer offset set to the own region in every
 *                                rank's args, R = 2 and 4; a hang also counts)
 *       calc_diff=<pending H200 run> -> detected
 */
#include <cuda.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tools/bench/launcher.h"
#include "apis/mega_moe_impl.h"
#include "include/megajit.h"
#include "runtime/families/mega_moe.h"
#include "heuristics/moe_formats.h"
#include "runtime/build_pool.h"
#include "runtime/jit.h"
#include "templates/layout/moe_layout.h"
#include "templates/layout/symm_layout.h"
#include "tests/gpu/check.h"
#include "tests/reference/moe_ref.h"
#include "tests/reference/quant.h"

enum { MAX_R = 8, Y_SLACK = 8, NUM_ROWS_MAX = 8 };
#define POISON16 0xFFFFu
#define CLAMP 7.0f /* 0x40E00000, exact in BF16 */

static int g_quick, g_timing;
static double g_budget_s = 140.0, g_t0;
/* --real-ranks: this process's rank (-1: all ranks emulated here) and communicator. */
static int g_real_rank = -1;
static void *g_comm;

static int mine(int r) {
    return g_real_rank < 0 || r == g_real_rank;
}

/* Past the budget the remaining cases are skipped rather than letting the
 * step's timeout kill the run before the summary. */
static int out_of_time(void) {
    if (now_s() - g_t0 < g_budget_s) return 0;
    g_skipped++;
    printf("SKIP %s (past the %.0f s budget)\n", g_case, g_budget_s);
    return 1;
}

/* ------------------------------------------------------------ random inputs */

static float rnd_sym(void) {
    return 2.0f * rnd_unit() - 1.0f;
}

/* ------------------------------------------------------------ the cases */

enum route {
    ROUTE_RANDOM,   /* distinct ids, one slot in ten masked */
    ROUTE_ONE,      /* slot 0 of every token is the last expert (lives on the last rank) */
    ROUTE_SKEW,     /* even experts only: the odd ones receive nothing */
    ROUTE_DUP,      /* slot 1 repeats slot 0 on even tokens */
    ROUTE_ROTATING, /* routes above rotate with the row index */
    ROUTE_ONE_ONLY = ROUTE_ROTATING, /* slot 0 = the last expert, other slots masked */
};
static const char *const route_names[] = {"random", "one-expert", "odd-experts-idle",
                                          "duplicate-ids", "one-expert-only"};

enum control {
    CTL_NONE,
    CTL_SWAP_GATE_UP,
    CTL_NO_ROUTING_WEIGHT,
    CTL_SCALE_EXPERT,
    CTL_SCALE_BYTE,
    CTL_ALPHA,
    CTL_PEERS,
    CTL_PREPARE, /* no fault: the prepare + mj_jit_launch path itself */
};

typedef struct scenario {
    int ranks;
    int act;
    float clamp;
    int tokens[MAX_R];
    int route;
    int masked_rank; /* all top-k ids -1 on this rank; -1: none */
    int alphas;      /* 1: random alphas and l2_act_scale (NVFP4 has non-1 alphas anyway) */
    int block_m;     /* 0: the heuristic's */
} scenario;

#define SWIGLU MJ_ACT_SWIGLU
#define SWIGLUOAI MJ_ACT_SWIGLUOAI
#define SITU MJ_ACT_SITU

/* Every row runs all of these: every activation (swiglu with and without
 * clamp) at R = 1, 2, 4 and 8; tokens 0, 1 and T_max on some ranks. Token counts are chosen so each
 * (row, scenario) needs at most two kernels (BLOCK_M follows the count). */
static const scenario kMatrix[] = {
    {1, SWIGLU, 0, {64}, ROUTE_RANDOM, -1, 0, 0},
    {1, SWIGLU, CLAMP, {37}, ROUTE_ONE, -1, 1, 0},
    {1, SWIGLUOAI, CLAMP, {1}, ROUTE_RANDOM, -1, 0, 0},
    {1, SITU, 0, {64}, ROUTE_SKEW, -1, 1, 0},
    {2, SWIGLU, 0, {64, 0}, ROUTE_RANDOM, -1, 1, 0},
    {2, SWIGLU, CLAMP, {1, 64}, ROUTE_DUP, -1, 0, 0},
    {2, SWIGLUOAI, CLAMP, {64, 64}, ROUTE_ONE, -1, 1, 0},
    {2, SITU, 0, {64, 64}, ROUTE_SKEW, 1, 0, 0},
    {4, SWIGLU, 0, {64, 0, 1, 64}, ROUTE_RANDOM, 2, 1, 0},
    {4, SWIGLU, CLAMP, {1, 64, 64, 0}, ROUTE_DUP, -1, 0, 0},
    {4, SWIGLUOAI, CLAMP, {64, 64, 1, 64}, ROUTE_ONE, 1, 1, 0},
    {4, SITU, 0, {64, 1, 0, 64}, ROUTE_SKEW, -1, 0, 0},
    {8, SWIGLU, 0, {64, 0, 1, 64, 0, 64, 64, 1}, ROUTE_SKEW, 7, 0, 0},
    {8, SWIGLU, CLAMP, {1, 64, 64, 0, 64, 1, 0, 64}, ROUTE_RANDOM, 3, 1, 0},
    {8, SWIGLUOAI, CLAMP, {64, 64, 1, 64, 0, 64, 1, 64}, ROUTE_DUP, -1, 0, 0},
    {8, SITU, 0, {0, 64, 64, 1, 64, 64, 1, 0}, ROUTE_ONE, 5, 1, 0},
};
static const scenario kQuick[] = {
    {2, SWIGLU, CLAMP, {8, 0}, ROUTE_RANDOM, -1, 1, 0},
    {2, SITU, 0, {1, 8}, ROUTE_DUP, 0, 0, 0},
};
/* Controls, graphs and BLOCK_M sweeps reuse kernels of the matrix. */
static const scenario kControlBase = {1, SWIGLU, 0, {64}, ROUTE_RANDOM, -1, 0, 0};
static const scenario kGraph1 = {1, SWIGLU, CLAMP, {37}, ROUTE_ONE, -1, 1, 0};
static const scenario kGraph2 = {2, SWIGLU, CLAMP, {1, 64}, ROUTE_DUP, -1, 0, 0};
static const scenario kPeers2 = {2, SWIGLU, 0, {64, 64}, ROUTE_RANDOM, -1, 0, 0};
static const scenario kPeers4 = {4, SWIGLU, 0, {64, 64, 64, 64}, ROUTE_RANDOM, -1, 0, 0};
static const scenario kInvalid = {1, SWIGLU, 0, {8}, ROUTE_RANDOM, -1, 0, 0};
static const int kBlockMs[] = {8, 16, 32, 64};

typedef struct shape {
    int H, I, E, K, TMAX;
} shape;
static const shape kFull = {512, 128, 16, 4, 64};
static const shape kQuickShape = {256, 64, 4, 2, 8};
/* Decode timing: DeepSeek-like expert sizes, E reduced so the weights load fast. */
static const shape kTiming = {7168, 2048, 32, 8, 8};

static int row_index_by_name(const char *name) {
    for (int i = 0; i < mj_moe_format_count(); i++)
        if (!strcmp(mj_moe_format_at(i)->name, name)) return i;
    return -1;
}

static int sms_for_mode(int device_sms, int ranks, int quick) {
    int s = device_sms / ranks;
    /* compute-sanitizer pays per CTA; the tiny quick shapes need few. */
    if (quick && s > 8) s = 8;
    return s < 1 ? 1 : s;
}

static int sms_for(int device_sms, int ranks) {
    return sms_for_mode(device_sms, ranks, g_quick);
}

static int route_of(const scenario *sc, int row_index) {
    return sc->route < ROUTE_ROTATING ? (sc->route + row_index) % ROUTE_ROTATING : sc->route;
}

static mj_moe_config moe_cfg(const shape *sh, const mj_moe_format_row *row, const scenario *sc,
                             int rank) {
    mj_moe_config mc = {
        .struct_size = sizeof(mj_moe_config),
        .hidden = sh->H,
        .intermediate = sh->I,
        .num_experts = sh->E,
        .num_topk = sh->K,
        .num_ranks = sc->ranks,
        .rank = rank,
        .max_tokens_per_rank = sh->TMAX,
        .weight_format = (mj_format)row->weight_fmt,
        .dispatch_format = (mj_format)row->dispatch_fmt,
        .activation = (mj_activation)sc->act,
        .clamp = sc->clamp,
        .block_m = sc->block_m,
    };
    return mc;
}

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
            mj_mega_moe_spec(&mc, bm, sms, arch, &spec) != MJ_OK)
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

/* Builds every planned kernel with the library's worker pool. */
static void precompile(void) {
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
    int workers = 0;
    if (mj_build_pool_run(&pool, &workers) != MJ_OK) printf("precompile: %s\n", mj_last_error());
    printf("precompile: %d kernels (%d compiled, %d cached, %d failed) by %d workers in %.1f s\n",
           plan.n, tally.compiled, tally.cached, tally.failed, workers, now_s() - t0);
    free(plan.v);
    free(plan.desc);
}

/* ----------------------------------------------------------- test context */

typedef struct model {
    int built;
    size_t w1b, w1sfb, w2b, w2sfb; /* bytes per expert */
    uint8_t *w1, *w1_sf, *w2, *w2_sf;
    float *ag, *au, *a2, *as;
} model;

typedef struct ctx {
    mj_runtime *rt; /* check_device_inputs = 0: its synchronous check would deadlock ranks */
    int device_sms;
    shape sh;
    CUstream s[MAX_R];
    CUdeviceptr d_x[MAX_R], d_ids[MAX_R], d_tw[MAX_R], d_y[MAX_R], d_stats[MAX_R];
    uint16_t *x[MAX_R], *y_ref[MAX_R], *y_got[MAX_R];
    int32_t *ids[MAX_R];
    float *tw[MAX_R], *tw_gpu[MAX_R];
    uint8_t *img[MAX_R];
    size_t img_bytes;
    int32_t *stats_ref, *stats_got;
    float *master_w1, *master_w2; /* fp32 [E][2I][H] and [E][H][I] */
    model models[NUM_ROWS_MAX][2];
    double ref_s, wait_timeout_s;
} ctx;

typedef struct run {
    const mj_moe_format_row *row;
    int row_index, ctl, route;
    scenario sc;
    model *m;
    mj_symm_buffer *buf;
    mj_weights *w[MAX_R];
    int local, hot; /* experts per rank; the expert ROUTE_ONE* uses */
} run;

static float amax_of(const float *v, size_t n) {
    float m = 0.0f;
    for (size_t i = 0; i < n; i++)
        m = fabsf(v[i]) > m ? fabsf(v[i]) : m;
    return m > 0.0f ? m : 1.0f;
}

/* NVFP4 weights carry no global scale of their own: w is scaled so its amax is
 * 2688 (448 * 6) and the inverse goes into the alphas, or small groups would
 * fall into E4M3 subnormals (mjr_quantize_weights). */
static void quantize_scaled(int fmt, const float *w, int rows, int cols, float *tmp, uint8_t *data,
                            uint8_t *sf, float *alpha) {
    float s = fmt == MJ_FMT_NVFP4 ? 2688.0f / amax_of(w, (size_t)rows * (size_t)cols) : 1.0f;
    for (size_t i = 0; i < (size_t)rows * (size_t)cols; i++)
        tmp[i] = w[i] * s;
    if (mjr_quantize_weights(fmt, tmp, rows, cols, data, sf) != 0) {
        printf("FATAL mjr_quantize_weights(%d, %d x %d) refused\n", fmt, rows, cols);
        g_failed++;
        finish();
    }
    *alpha = 1.0f / s;
}

static model *model_get(ctx *c, int row_index, int alphas) {
    model *m = &c->models[row_index][alphas ? 1 : 0];
    if (m->built) return m;
    const shape *sh = &c->sh;
    int fmt = mj_moe_format_at(row_index)->weight_fmt;
    int bits = mj_format_bits(fmt), group = mj_format_group(fmt);
    size_t H = (size_t)sh->H, I = (size_t)sh->I, E = (size_t)sh->E;
    m->w1b = 2 * I * H * (size_t)bits / 8;
    m->w1sfb = group ? 2 * I * (H / (size_t)group) : 0;
    m->w2b = H * I * (size_t)bits / 8;
    m->w2sfb = group ? H * (I / (size_t)group) : 0;
    m->w1 = xmalloc(E * m->w1b);
    m->w1_sf = xmalloc(E * m->w1sfb);
    m->w2 = xmalloc(E * m->w2b);
    m->w2_sf = xmalloc(E * m->w2sfb);
    m->ag = xmalloc(E * sizeof(float));
    m->au = xmalloc(E * sizeof(float));
    m->a2 = xmalloc(E * sizeof(float));
    m->as = xmalloc(E * sizeof(float));
    float *tmp = xmalloc(2 * I * H * sizeof(float));
    uint64_t saved = g_rng;
    g_rng =
        0x5EEDull + (uint64_t)row_index * 977 + (uint64_t)alphas; /* independent of case order */
    for (size_t e = 0; e < E; e++) {
        const float *w1 = c->master_w1 + e * 2 * I * H, *w2 = c->master_w2 + e * H * I;
        uint8_t *d1 = m->w1 + e * m->w1b, *s1 = m->w1_sf + e * m->w1sfb;
        /* gate and up get separate scales so a swapped alpha shows */
        quantize_scaled(fmt, w1, (int)I, (int)H, tmp, d1, s1, &m->ag[e]);
        quantize_scaled(fmt, w1 + I * H, (int)I, (int)H, tmp, d1 + m->w1b / 2, s1 + m->w1sfb / 2,
                        &m->au[e]);
        quantize_scaled(fmt, w2, (int)H, (int)I, tmp, m->w2 + e * m->w2b, m->w2_sf + e * m->w2sfb,
                        &m->a2[e]);
        m->as[e] = 1.0f;
        if (alphas) {
            m->ag[e] *= 0.5f + 1.5f * rnd_unit();
            m->au[e] *= 0.5f + 1.5f * rnd_unit();
            m->a2[e] *= 0.5f + 1.5f * rnd_unit();
            m->as[e] = 0.5f + 1.5f * rnd_unit();
        }
    }
    g_rng = saved;
    free(tmp);
    m->built = 1;
    return m;
}

static void model_free(model *m) {
    free(m->w1);
    free(m->w1_sf);
    free(m->w2);
    free(m->w2_sf);
    free(m->ag);
    free(m->au);
    free(m->a2);
    free(m->as);
    memset(m, 0, sizeof *m);
}

/* Polls instead of cuStreamSynchronize so a cross-rank deadlock is reported
 * with the case name instead of running into the step's timeout.
 * Returns 1 done, 0 timed out; a kernel fault is returned in *fault. */
static int wait_streams(ctx *c, const CUstream *s, int n, double timeout_s, CUresult *fault) {
    (void)c;
    double t0 = now_s();
    if (fault) *fault = CUDA_SUCCESS;
    for (;;) {
        int pending = 0;
        for (int i = 0; i < n; i++) {
            CUresult r = cuStreamQuery(s[i]);
            if (r == CUDA_ERROR_NOT_READY) {
                pending++;
            } else if (r != CUDA_SUCCESS) {
                if (fault) {
                    *fault = r;
                    return 1;
                }
                CU(r);
            }
        }
        if (!pending) return 1;
        if (now_s() - t0 > timeout_s) {
            printf("  %d of %d streams still busy after %.0f s:", pending, n, timeout_s);
            for (int i = 0; i < n; i++)
                if (cuStreamQuery(s[i]) == CUDA_ERROR_NOT_READY) printf(" rank %d", i);
            printf("\n");
            return 0;
        }
        struct timespec ts = {0, 50000};
        nanosleep(&ts, NULL);
    }
}

static void wait_or_die(ctx *c, const CUstream *s, int n) {
    if (wait_streams(c, s, n, c->wait_timeout_s, NULL)) return;
    printf("FATAL [%s]: hang (ranks waiting for each other in-kernel?). The context cannot be "
           "recovered; stopping.\n",
           g_case);
    g_failed++;
    finish();
}

static void gen_rank_inputs(ctx *c, run *u, int r) {
    const shape *sh = &c->sh;
    int T = u->sc.tokens[r], H = sh->H, K = sh->K, E = sh->E;
    for (int t = 0; t < T; t++) {
        /* 1..16: large enough that the clamp at 7 bites on some tokens */
        float amp = (float)(1u << rnd_below(5));
        for (int i = 0; i < H; i++)
            c->x[r][(size_t)t * H + i] = mjr_bf16_from_f32(rnd_sym() * amp);
        int32_t *id = c->ids[r] + (size_t)t * K;
        float *w = c->tw[r] + (size_t)t * K;
        for (int k = 0; k < K; k++) {
            int32_t v = -1;
            if (r == u->sc.masked_rank) {
                v = -1;
            } else if (u->route == ROUTE_ONE_ONLY) {
                v = k == 0 ? u->hot : -1;
            } else if (u->route == ROUTE_ONE && k == 0) {
                v = u->hot;
            } else if (u->route == ROUTE_DUP && k == 1 && t % 2 == 0 && id[0] >= 0) {
                v = id[0];
            } else if (u->route == ROUTE_RANDOM && rnd_below(10) == 0) {
                v = -1;
            } else {
                int dup;
                do {
                    v = u->route == ROUTE_SKEW  ? 2 * (int32_t)rnd_below((uint32_t)E / 2)
                        : u->route == ROUTE_ONE ? (int32_t)rnd_below((uint32_t)E - 1)
                                                : (int32_t)rnd_below((uint32_t)E);
                    dup = 0;
                    for (int j = 0; j < k; j++)
                        dup |= id[j] == v;
                } while (dup);
            }
            id[k] = v;
            /* a masked slot's weight must never leak into y */
            w[k] = v < 0 ? 100.0f * rnd_sym() : 0.05f + 0.95f * rnd_unit();
        }
    }
    for (int i = 0; i < T * K; i++)
        c->tw_gpu[r][i] = u->ctl == CTL_NO_ROUTING_WEIGHT ? 1.0f : c->tw[r][i];
}

static void run_teardown(run *u) {
    for (int r = 0; r < MAX_R; r++)
        if (u->w[r]) mj_weights_destroy(u->w[r]);
    if (u->buf) mj_symm_buffer_destroy(u->buf);
    memset(u->w, 0, sizeof u->w);
    u->buf = NULL;
}

/* The wrong-scale controls: +1 on the gate scale bytes of the expert every
 * token uses, in the model the GPU loads from; the caller restores `saved`
 * before the reference runs. Returns how many bytes were changed. */
static int bump_scales(run *u, const shape *sh, uint8_t *saved) {
    int group = mj_format_group(u->row->weight_fmt);
    if (!group) return 0;
    uint8_t *gate_sf = u->m->w1_sf + (size_t)u->hot * u->m->w1sfb;
    memcpy(saved, gate_sf, u->m->w1sfb / 2);
    size_t n = u->ctl == CTL_SCALE_BYTE ? 1 : (size_t)sh->I * (size_t)(sh->H / group);
    int changed = 0;
    for (size_t i = 0; i < n; i++) {
        /* 0x7e is E4M3's 448: +1 would be NaN, which the loader rightly refuses */
        if (u->row->weight_fmt == MJ_FMT_NVFP4 && gate_sf[i] >= 0x7e) continue;
        if (u->row->weight_fmt != MJ_FMT_NVFP4 && gate_sf[i] >= 246) continue;
        gate_sf[i]++;
        changed++;
    }
    return changed;
}

static int load_weights(ctx *c, run *u, int r) {
    const shape *sh = &c->sh;
    model *m = u->m;
    int group = mj_format_group(u->row->weight_fmt);
    for (int le = 0; le < u->local; le++) {
        size_t e = (size_t)r * (size_t)u->local + (size_t)le;
        const uint8_t *g = m->w1 + e * m->w1b, *up = g + m->w1b / 2;
        const uint8_t *gs = m->w1_sf + e * m->w1sfb, *us = gs + m->w1sfb / 2;
        if (u->ctl == CTL_SWAP_GATE_UP) {
            const uint8_t *t = g;
            g = up;
            up = t;
            t = gs;
            gs = us;
            us = t;
        }
        char what[96];
        snprintf(what, sizeof what, "mj_weights_load(rank %d, expert %d)", r, le);
        if (!expect_ok(mj_weights_load(u->w[r], le, MJ_PROJ_GATE, g, group ? gs : NULL, 0), what) ||
            !expect_ok(mj_weights_load(u->w[r], le, MJ_PROJ_UP, up, group ? us : NULL, 0), what) ||
            !expect_ok(mj_weights_load(u->w[r], le, MJ_PROJ_DOWN, m->w2 + e * m->w2b,
                                       group ? m->w2_sf + e * m->w2sfb : NULL, 0),
                       what))
            return 0;
        float a2 = u->ctl == CTL_ALPHA ? 2.0f * m->a2[e] : m->a2[e];
        if (!expect_ok(mj_weights_set_alphas(u->w[r], le, m->ag[e], m->au[e], a2, m->as[e]),
                       "mj_weights_set_alphas"))
            return 0;
    }
    (void)sh;
    return 1;
}

/* Buffer, weights, pre-dispatched inputs and the reference outputs. */
static int run_setup(ctx *c, run *u, int row_index, const scenario *sc, int ctl) {
    const shape *sh = &c->sh;
    memset(u, 0, sizeof *u);
    u->row_index = row_index;
    u->row = mj_moe_format_at(row_index);
    u->sc = *sc;
    u->ctl = ctl;
    u->route = route_of(sc, row_index);
    if (ctl == CTL_SCALE_EXPERT || ctl == CTL_SCALE_BYTE) u->route = ROUTE_ONE_ONLY;
    int R = sc->ranks;
    u->local = sh->E / R;
    u->hot = sh->E - 1;
    u->m = model_get(c, row_index, sc->alphas);

    int local_ranks = g_real_rank < 0 ? R : 1;
    if (!expect_ok(
            mj_family_set_num_sms(c->rt, MJ_FAMILY_MEGA_MOE, sms_for(c->device_sms, local_ranks)),
            "mj_family_set_num_sms(mega_moe)"))
        return 0;
    mj_symm_config cfg = {
        sizeof cfg, sh->H, sh->E, sh->K, sh->TMAX, (mj_format)u->row->dispatch_fmt, R, sh->I};
    if (!expect_ok(g_comm ? mj_symm_buffer_create_nccl(c->rt, &cfg, g_comm, &u->buf)
                          : mj_symm_buffer_create(c->rt, &cfg, &u->buf),
                   "mj_symm_buffer_create"))
        return 0;
    uint8_t *saved = xmalloc(u->m->w1sfb);
    int bumped = ctl == CTL_SCALE_EXPERT || ctl == CTL_SCALE_BYTE ? bump_scales(u, sh, saved) : 0;
    int ok = 1;
    for (int r = 0; r < R && ok; r++) {
        if (!mine(r)) continue;
        mj_moe_config mc = moe_cfg(sh, u->row, sc, r);
        ok = expect_ok(mj_weights_create(c->rt, &mc, &u->w[r]), "mj_weights_create") &&
             load_weights(c, u, r);
    }
    if (bumped) {
        memcpy(u->m->w1_sf + (size_t)u->hot * u->m->w1sfb, saved, u->m->w1sfb / 2);
        printf("  %d scale bytes of expert %d's gate bumped on the GPU only\n", bumped, u->hot);
    }
    free(saved);
    if (!ok) return 0;

    for (int r = 0; r < R; r++) {
        int T = sc->tokens[r];
        gen_rank_inputs(c, u, r);
        if (T && mine(r)) {
            CU(cuMemcpyHtoD(c->d_x[r], c->x[r], (size_t)T * sh->H * 2));
            CU(cuMemcpyHtoD(c->d_ids[r], c->ids[r], (size_t)T * sh->K * 4));
            CU(cuMemcpyHtoD(c->d_tw[r], c->tw_gpu[r], (size_t)T * sh->K * 4));
        }
    }
    CU(cuCtxSynchronize());
    for (int r = 0; r < R; r++) {
        if (!mine(r)) continue;
        char what[64];
        snprintf(what, sizeof what, "mj_pre_dispatch(rank %d)", r);
        if (!expect_ok(mj_pre_dispatch(c->rt, u->buf, r, (const void *)(uintptr_t)c->d_x[r],
                                       (const int32_t *)(uintptr_t)c->d_ids[r],
                                       (const float *)(uintptr_t)c->d_tw[r], NULL, sc->tokens[r],
                                       c->s[r]),
                       what))
            return 0;
    }
    wait_or_die(c, c->s, R);

    /* The reference reads the same quantized inputs from host images of the
     * pre-dispatch (bit-identical to the GPU's, test_pre_dispatch checks that). */
    double t0 = now_s();
    int dfmt = u->row->dispatch_fmt;
    mj_input_layout l = mj_layout_input(sh->H, sh->K, sh->TMAX, dfmt);
    mjr_rank_input in[MAX_R];
    uint16_t *y[MAX_R];
    for (int r = 0; r < R; r++) {
        memset(c->img[r], 0, c->img_bytes);
        mjr_pre_dispatch(dfmt, sh->H, sh->K, sh->TMAX, c->x[r], c->ids[r], c->tw[r], NULL,
                         sc->tokens[r], c->img[r]);
        in[r] = (mjr_rank_input){
            sc->tokens[r],
            c->img[r] + l.x_offset,
            mj_format_group(dfmt) ? c->img[r] + l.sf_offset : NULL,
            dfmt == MJ_FMT_NVFP4 ? (const float *)(c->img[r] + l.x_scales_offset) : NULL,
            (const int32_t *)(c->img[r] + l.topk_idx_offset),
            (const float *)(c->img[r] + l.topk_w_offset),
        };
        y[r] = c->y_ref[r];
    }
    mjr_expert_weights *ew = xmalloc((size_t)sh->E * sizeof *ew);
    for (int e = 0; e < sh->E; e++) {
        model *m = u->m;
        int g = m->w1sfb != 0;
        ew[e] = (mjr_expert_weights){
            m->w1 + (size_t)e * m->w1b,
            g ? m->w1_sf + (size_t)e * m->w1sfb : NULL,
            m->w2 + (size_t)e * m->w2b,
            g ? m->w2_sf + (size_t)e * m->w2sfb : NULL,
            m->ag[e],
            m->au[e],
            m->a2[e],
            m->as[e],
        };
    }
    mjr_moe_shape s = {sh->H,
                       sh->I,
                       sh->E,
                       sh->K,
                       R,
                       sh->TMAX,
                       u->row->weight_fmt,
                       dfmt,
                       u->row->l2_input_fmt,
                       sc->act,
                       sc->clamp > 0,
                       sc->clamp};
    int rc = mjr_moe_forward(&s, ew, in, y, c->stats_ref);
    free(ew);
    c->ref_s += now_s() - t0;
    if (rc != 0) {
        printf("  mjr_moe_forward -> %d (test bug: reference refused the case)\n", rc);
        return 0;
    }
    return 1;
}

static void poison_outputs(ctx *c, const run *u) {
    for (int r = 0; r < u->sc.ranks; r++) {
        if (!mine(r)) continue;
        CU(cuMemsetD16(c->d_y[r], (unsigned short)POISON16,
                       (size_t)(c->sh.TMAX + Y_SLACK) * c->sh.H));
        CU(cuMemsetD32(c->d_stats[r], 0, (size_t)u->local));
    }
    CU(cuCtxSynchronize());
}

/* Launches every rank back to back, each on its own stream, after loading
 * every rank's kernel (a load may wait for kernels already spinning). A
 * refused launch after an accepted one leaves the accepted ranks waiting
 * forever. */
static int run_launch(ctx *c, run *u, const CUstream *streams) {
    for (int r = 0; r < u->sc.ranks; r++) {
        if (!mine(r)) continue;
        mj_status st = mj_mega_moe_warmup(c->rt, u->buf, u->w[r], u->sc.tokens[r]);
        if (st != MJ_OK) {
            printf("  warm-up of rank %d -> %s: %s\n", r, mj_status_name(st), mj_last_error());
            return 0;
        }
    }
    /* Real ranks: every peer's inputs are pre-dispatched and its kernel is
     * loaded before any rank's kernel starts waiting for the others. */
    if (g_comm && !expect_ok(mj_launcher_barrier(g_comm, u->sc.ranks), "barrier before launch"))
        return 0;
    for (int r = 0; r < u->sc.ranks; r++) {
        if (!mine(r)) continue;
        int T = u->sc.tokens[r];
        void *y = (void *)(uintptr_t)c->d_y[r];
        int32_t *st_ptr = (int32_t *)(uintptr_t)c->d_stats[r];
        mj_status st;
        if (u->ctl == CTL_PEERS || u->ctl == CTL_PREPARE) {
            mj_kernel *k = NULL;
            mj_launch_config lc;
            mj_moe_args args;
            st = mj_mega_moe_prepare(c->rt, u->buf, u->w[r], y, T, st_ptr, streams[r], &k, &lc,
                                     &args);
            if (st == MJ_OK && u->ctl == CTL_PEERS) {
                /* Every peer offset collapses onto the own region, on every
                 * rank: each rank still gets R barrier signals (all its own),
                 * so nothing hangs, but tokens never reach remote experts.
                 * Swapping two peers on every rank is no control: the kernel
                 * sees a consistent relabeling (calc_diff 0 on the H200). */
                for (int p = 0; p < u->sc.ranks; p++)
                    args.peers.offsets[p] = 0;
            }
            if (st == MJ_OK) {
                void *params[] = {&args};
                st = mj_jit_launch(c->rt, k, &lc, streams[r], params);
            }
        } else {
            st = mj_mega_moe(c->rt, u->buf, u->w[r], y, T, st_ptr, streams[r]);
        }
        if (st != MJ_OK) {
            printf("  launch of rank %d -> %s: %s\n", r, mj_status_name(st), mj_last_error());
            if (r > 0 || g_comm) {
                printf("FATAL [%s]: other ranks are in flight and will wait for rank %d forever\n",
                       g_case, r);
                g_failed++;
                finish();
            }
            return 0;
        }
    }
    return 1;
}

static float bf(uint16_t b) {
    return mjr_f32_from_bf16(b);
}

/* Prints the worst token rows of one rank (calc_diff per row) and their ids. */
static void explain_rows(ctx *c, int r, int T) {
    const shape *sh = &c->sh;
    int worst[3] = {-1, -1, -1};
    double wd[3] = {-1, -1, -1};
    for (int t = 0; t < T; t++) {
        double d = mjr_calc_diff(c->y_ref[r] + (size_t)t * sh->H, c->y_got[r] + (size_t)t * sh->H,
                                 (size_t)sh->H);
        if (isnan(d)) d = 1e9;
        for (int j = 0; j < 3; j++)
            if (d > wd[j]) {
                for (int q = 2; q > j; q--) {
                    wd[q] = wd[q - 1];
                    worst[q] = worst[q - 1];
                }
                wd[j] = d;
                worst[j] = t;
                break;
            }
    }
    for (int j = 0; j < 3 && worst[j] >= 0; j++) {
        int t = worst[j];
        printf("    token %d: calc_diff %.3g, ids [", t, wd[j]);
        for (int k = 0; k < sh->K; k++)
            printf("%s%d", k ? " " : "", c->ids[r][(size_t)t * sh->K + k]);
        printf("] weights [");
        for (int k = 0; k < sh->K; k++)
            printf("%s%.3g", k ? " " : "", (double)c->tw[r][(size_t)t * sh->K + k]);
        printf("]\n");
    }
}

/* Fetches y and recv_stats of every rank and compares them with the
 * reference (stats times stats_mult, for graph replays). verbose: print the
 * per-rank line and, on failure, the first differing element. */
static int run_check(ctx *c, const run *u, int stats_mult, int verbose, double *worst_out) {
    const shape *sh = &c->sh;
    int is_bf16 = u->row->weight_fmt == MJ_FMT_BF16 && u->row->dispatch_fmt == MJ_FMT_BF16;
    double tol = is_bf16 ? 1e-4 : 1e-3, worst = 0;
    int ok_all = 1;
    size_t cap = (size_t)(sh->TMAX + Y_SLACK) * (size_t)sh->H;
    for (int r = 0; r < u->sc.ranks; r++) {
        if (!mine(r)) continue;
        int T = u->sc.tokens[r];
        size_t n = (size_t)T * (size_t)sh->H;
        CU(cuMemcpyDtoH(c->y_got[r], c->d_y[r], cap * 2));
        CU(cuMemcpyDtoH(c->stats_got + (size_t)r * u->local, c->d_stats[r], (size_t)u->local * 4));
        size_t poison = 0, nonfinite = 0, past = 0, differ = 0, first = (size_t)-1;
        for (size_t i = 0; i < n; i++) {
            uint16_t g = c->y_got[r][i];
            if (g == POISON16)
                poison++;
            else if ((g & 0x7F80u) == 0x7F80u)
                nonfinite++;
            if (g != c->y_ref[r][i]) {
                differ++;
                if (first == (size_t)-1) first = i;
            }
        }
        for (size_t i = n; i < cap; i++)
            past += c->y_got[r][i] != POISON16;
        double d = mjr_calc_diff(c->y_ref[r], c->y_got[r], n);
        if (isnan(d) || d > worst) worst = isnan(d) ? INFINITY : d;
        int stats_ok = 1, first_stat = -1;
        for (int le = 0; le < u->local; le++) {
            long long want = (long long)stats_mult * c->stats_ref[r * u->local + le];
            if (c->stats_got[r * u->local + le] != want) {
                stats_ok = 0;
                if (first_stat < 0) first_stat = le;
            }
        }
        int ok = d < tol && !poison && !nonfinite && !past && stats_ok;
        ok_all &= ok;
        if (!verbose) continue;
        if (ok && !is_bf16) continue;
        printf("  rank %d: T=%d calc_diff=%.3g (bar %.0e)%s, %zu of %zu elements differ bitwise", r,
               T, d, tol, is_bf16 && d >= 1e-5 && d < tol ? " [bf16 row expected < 1e-5]" : "",
               differ, n);
        if (poison) printf(", %zu unwritten (poison)", poison);
        if (nonfinite) printf(", %zu non-finite", nonfinite);
        if (past) printf(", %zu written past num_tokens", past);
        printf("\n");
        if (!ok && first != (size_t)-1) {
            size_t t = first / (size_t)sh->H, h = first % (size_t)sh->H;
            printf(
                "    first differing element y[%zu][%zu]: expected 0x%04x (%g) got 0x%04x (%g)\n",
                t, h, c->y_ref[r][first], (double)bf(c->y_ref[r][first]), c->y_got[r][first],
                (double)bf(c->y_got[r][first]));
        }
        if (!ok && d >= tol) explain_rows(c, r, T);
        if (!stats_ok)
            printf("    recv_stats[%d] (global expert %d) = %d, want %lld (x%d); all got/want:",
                   first_stat, r * u->local + first_stat, c->stats_got[r * u->local + first_stat],
                   (long long)stats_mult * c->stats_ref[r * u->local + first_stat], stats_mult);
        if (!stats_ok) {
            for (int le = 0; le < u->local; le++)
                printf(" %d/%lld", c->stats_got[r * u->local + le],
                       (long long)stats_mult * c->stats_ref[r * u->local + le]);
            printf("\n");
        }
    }
    if (worst_out) *worst_out = worst;
    return ok_all;
}

static void describe(const run *u, char *out, size_t cap) {
    int n = snprintf(out, cap, "%s R=%d %s%s T=[", u->row->name, u->sc.ranks,
                     mj_moe_activation_name(u->sc.act), u->sc.clamp > 0 ? "+clamp7" : "");
    for (int r = 0; r < u->sc.ranks && n > 0 && (size_t)n < cap; r++)
        n += snprintf(out + n, cap - (size_t)n, "%s%d", r ? "," : "", u->sc.tokens[r]);
    if (n > 0 && (size_t)n < cap)
        snprintf(out + n, cap - (size_t)n, "] route=%s%s%s bm=%s", route_names[u->route],
                 u->sc.masked_rank >= 0 ? " masked-rank" : "", u->sc.alphas ? " alphas" : "",
                 u->sc.block_m ? "forced" : "auto");
}

/* One full case: setup, poison, launch, check. Returns the check result;
 * *worst gets the largest calc_diff over ranks. */
static int run_case(ctx *c, int row_index, const scenario *sc, int ctl, int verbose,
                    double *worst) {
    run u;
    int ok = run_setup(c, &u, row_index, sc, ctl);
    if (ok) {
        poison_outputs(c, &u);
        ok = run_launch(c, &u, c->s);
        if (ok) {
            wait_or_die(c, c->s, sc->ranks);
            ok = run_check(c, &u, 1, verbose, worst);
        }
    }
    run_teardown(&u);
    return ok;
}

/* ------------------------------------------------------------ sections */

static void test_matrix(ctx *c) {
    const scenario *tab = g_quick ? kQuick : kMatrix;
    size_t n = g_quick ? sizeof kQuick / sizeof kQuick[0] : sizeof kMatrix / sizeof kMatrix[0];
    for (int i = 0; i < mj_moe_format_count(); i++) {
        if (g_quick && i != row_index_by_name("nvfp4")) continue;
        for (size_t s = 0; s < n; s++) {
            run probe = {.row = mj_moe_format_at(i), .sc = tab[s], .route = route_of(&tab[s], i)};
            char d[256];
            describe(&probe, d, sizeof d);
            set_case("matrix %s", d);
            if (!mj_moe_activation_allowed(probe.row, tab[s].act)) {
                printf("  activation not allowed for row %s: skipped by the table\n",
                       probe.row->name);
                continue;
            }
            if (out_of_time()) continue;
            double worst = 0;
            int ok = run_case(c, i, &tab[s], CTL_NONE, 1, &worst);
            printf("  worst calc_diff %.3g\n", worst);
            record(ok);
        }
    }
}

/* Output must not depend on BLOCK_M beyond fp32 accumulation order: each
 * forced size must pass against the reference; bitwise equality is reported. */
static void test_block_m(ctx *c) {
    const shape *sh = &c->sh;
    size_t n = (size_t)kControlBase.tokens[0] * (size_t)sh->H;
    uint16_t *first = xmalloc(n * 2);
    for (int i = 0; i < mj_moe_format_count(); i++) {
        uint64_t seed = g_rng;
        int equal = 1, ok_all = 1, ran = 0;
        for (size_t b = 0; b < sizeof kBlockMs / sizeof kBlockMs[0]; b++) {
            scenario sc = kControlBase;
            sc.block_m = kBlockMs[b];
            set_case("block_m %s forced %d (T=%d R=1 swiglu)", mj_moe_format_at(i)->name,
                     sc.block_m, sc.tokens[0]);
            if (out_of_time()) continue;
            mj_moe_config mc = moe_cfg(sh, mj_moe_format_at(i), &sc, 0);
            int bm = -1;
            int ok = expect_ok(mj_mega_moe_block_m(&mc, sc.tokens[0], &bm), "mj_mega_moe_block_m");
            if (ok && bm != sc.block_m) {
                printf("  mj_mega_moe_block_m = %d, want the forced %d\n", bm, sc.block_m);
                ok = 0;
            }
            g_rng = seed; /* the same inputs for every size */
            double worst = 0;
            ok &= run_case(c, i, &sc, CTL_NONE, 1, &worst);
            printf("  calc_diff %.3g\n", worst);
            record(ok);
            ok_all &= ok;
            if (!ran)
                memcpy(first, c->y_got[0], n * 2);
            else if (memcmp(first, c->y_got[0], n * 2))
                equal = 0;
            ran++;
        }
        if (ran > 1)
            printf("INFO block_m %s: outputs for BLOCK_M 8/16/32/64 are %s%s\n",
                   mj_moe_format_at(i)->name, equal ? "bitwise identical" : "NOT bitwise identical",
                   equal ? "" : " (allowed: fp32 accumulation order; each passed the reference)");
        (void)ok_all;
    }
    free(first);
}

static int check_capture_ok(mj_status st, CUresult er) {
    int ok = expect_ok(st, "mj_mega_moe while capturing");
    if (er != CUDA_SUCCESS) {
        const char *name = "?";
        cuGetErrorName(er, &name);
        printf("  cuStreamEndCapture -> %s (something illegal during capture)\n", name);
        ok = 0;
    }
    return ok;
}

/* Eager warm-up, then a capture of all ranks (R = 2: stream 1 forked from
 * and joined back into stream 0's capture by events), 1000 replays: y equals
 * the eager y bitwise and recv_stats grew by 1000 x the counts. */
static void test_graph(ctx *c, int row_index, const scenario *sc) {
    const int replays = 1000;
    const shape *sh = &c->sh;
    int R = sc->ranks;
    set_case("graph %s R=%d: eager warm-up", mj_moe_format_at(row_index)->name, R);
    if (out_of_time()) return;
    run u;
    uint16_t *eager[MAX_R] = {0};
    size_t cap = (size_t)(sh->TMAX + Y_SLACK) * (size_t)sh->H;
    CUgraph graph = NULL;
    CUgraphExec exec = NULL;
    CUevent fork_ev = NULL, join_ev = NULL;
    int ok = run_setup(c, &u, row_index, sc, CTL_NONE);
    if (ok) {
        poison_outputs(c, &u);
        ok = run_launch(c, &u, c->s);
        if (ok) {
            wait_or_die(c, c->s, R);
            ok = run_check(c, &u, 1, 1, NULL);
        }
    }
    record(ok);
    if (!ok) goto out;
    for (int r = 0; r < R; r++) {
        eager[r] = xmalloc(cap * 2);
        memcpy(eager[r], c->y_got[r], cap * 2);
    }

    set_case("graph %s R=%d: capture (nothing runs)", u.row->name, R);
    poison_outputs(c, &u);
    CU(cuEventCreate(&fork_ev, CU_EVENT_DISABLE_TIMING));
    CU(cuEventCreate(&join_ev, CU_EVENT_DISABLE_TIMING));
    CU(cuStreamBeginCapture(c->s[0], CU_STREAM_CAPTURE_MODE_GLOBAL));
    mj_status st = MJ_OK;
    if (R > 1) {
        CU(cuEventRecord(fork_ev, c->s[0]));
        for (int r = 1; r < R; r++)
            CU(cuStreamWaitEvent(c->s[r], fork_ev, 0));
    }
    for (int r = 0; r < R && st == MJ_OK; r++)
        st = mj_mega_moe(c->rt, u.buf, u.w[r], (void *)(uintptr_t)c->d_y[r], sc->tokens[r],
                         (int32_t *)(uintptr_t)c->d_stats[r], c->s[r]);
    if (st != MJ_OK) printf("  %s\n", mj_last_error());
    if (R > 1)
        for (int r = 1; r < R; r++) {
            CU(cuEventRecord(join_ev, c->s[r]));
            CU(cuStreamWaitEvent(c->s[0], join_ev, 0));
        }
    CUresult er = cuStreamEndCapture(c->s[0], &graph);
    ok = check_capture_ok(st, er);
    wait_or_die(c, c->s, R);
    CU(cuMemcpyDtoH(c->y_got[0], c->d_y[0], cap * 2));
    for (size_t i = 0; i < cap && ok; i++)
        if (c->y_got[0][i] != POISON16) {
            printf("  y[%zu] written during capture\n", i);
            ok = 0;
        }
    record(ok);
    if (!ok) goto out;
    CU(cuGraphInstantiate(&exec, graph, 0));

    set_case("graph %s R=%d: %d replays = eager bitwise, recv_stats x%d", u.row->name, R, replays,
             replays);
    double t0 = now_s();
    for (int i = 0; i < replays; i++)
        CU(cuGraphLaunch(exec, c->s[0]));
    wait_or_die(c, c->s, 1);
    double el = now_s() - t0;
    ok = run_check(c, &u, replays, 1, NULL);
    for (int r = 0; r < R; r++)
        if (memcmp(eager[r], c->y_got[r], cap * 2)) {
            size_t i = 0;
            while (eager[r][i] == c->y_got[r][i])
                i++;
            printf("  rank %d differs from the eager run at element %zu: eager 0x%04x got 0x%04x\n",
                   r, i, eager[r][i], c->y_got[r][i]);
            ok = 0;
        }
    printf("  %d replays in %.3f s (%.1f us each, including launch)\n", replays, el,
           1e6 * el / replays);
    record(ok);
out:
    if (exec) CU(cuGraphExecDestroy(exec));
    if (graph) CU(cuGraphDestroy(graph));
    if (fork_ev) CU(cuEventDestroy(fork_ev));
    if (join_ev) CU(cuEventDestroy(join_ev));
    for (int r = 0; r < MAX_R; r++)
        free(eager[r]);
    run_teardown(&u);
}

static void test_graphs(ctx *c) {
    test_graph(c, row_index_by_name("nvfp4"), &kGraph1);
    test_graph(c, row_index_by_name("mxfp4-a8"), &kGraph2);
}

static const char *control_name(int ctl) {
    switch (ctl) {
    case CTL_SWAP_GATE_UP:
        return "swap-gate-up";
    case CTL_NO_ROUTING_WEIGHT:
        return "no-routing-weight";
    case CTL_SCALE_EXPERT:
        return "wrong-scale";
    case CTL_SCALE_BYTE:
        return "wrong-scale-1-byte";
    case CTL_ALPHA:
        return "wrong-alpha";
    case CTL_PEERS:
        return "wrong-peer-offset";
    default:
        return "none";
    }
}

/* A control passes when the numeric check fails on it. */
static void test_controls(ctx *c) {
    static const int ctls[] = {CTL_SWAP_GATE_UP, CTL_NO_ROUTING_WEIGHT, CTL_SCALE_EXPERT,
                               CTL_SCALE_BYTE, CTL_ALPHA};
    for (int i = 0; i < mj_moe_format_count(); i++) {
        const mj_moe_format_row *row = mj_moe_format_at(i);
        for (size_t j = 0; j < sizeof ctls / sizeof ctls[0]; j++) {
            int ctl = ctls[j];
            set_case("control %s %s", control_name(ctl), row->name);
            if ((ctl == CTL_SCALE_EXPERT || ctl == CTL_SCALE_BYTE) &&
                !mj_format_group(row->weight_fmt)) {
                printf("  skipped: %s weights have no block scales\n", row->name);
                continue;
            }
            if (out_of_time()) continue;
            double worst = 0;
            int passed = run_case(c, i, &kControlBase, ctl, 0, &worst);
            if (ctl == CTL_SCALE_BYTE) {
                printf("INFO control %s %s: calc_diff=%.3g -> %s (informational)\n",
                       control_name(ctl), row->name, worst, passed ? "below the bar" : "detected");
                continue;
            }
            printf("  control %s %s: calc_diff=%.3g -> %s\n", control_name(ctl), row->name, worst,
                   passed ? "NOT detected" : "detected");
            record(!passed);
        }
    }
}

/* Last: a wrong offset may fault or hang the kernels, which ends the context. */
static void test_peer_control(ctx *c, const scenario *sc) {
    int row_index = row_index_by_name("mxfp8");
    double worst = 0;
    set_case("control baseline: prepare + mj_jit_launch unmodified, mxfp8 R=%d", sc->ranks);
    if (out_of_time()) return;
    int ok = run_case(c, row_index, sc, CTL_PREPARE, 1, &worst);
    printf("  calc_diff %.3g\n", worst);
    record(ok);
    if (!ok) return;

    set_case("control %s mxfp8 R=%d", control_name(CTL_PEERS), sc->ranks);
    run u;
    if (!run_setup(c, &u, row_index, sc, CTL_PEERS)) {
        record(0);
        run_teardown(&u);
        return;
    }
    poison_outputs(c, &u);
    if (!run_launch(c, &u, c->s)) {
        record(0);
        run_teardown(&u);
        return;
    }
    CUresult fault;
    if (!wait_streams(c, c->s, sc->ranks, 20.0, &fault)) {
        printf("  control %s R=%d: calc_diff=n/a -> detected (kernels hang; stopping, the "
               "context cannot be recovered)\n",
               control_name(CTL_PEERS), sc->ranks);
        record(1);
        finish();
    }
    if (fault != CUDA_SUCCESS) {
        const char *name = "?";
        cuGetErrorName(fault, &name);
        printf("  control %s R=%d: calc_diff=n/a -> detected (kernel fault %s; stopping)\n",
               control_name(CTL_PEERS), sc->ranks, name);
        record(1);
        finish();
    }
    int passed = run_check(c, &u, 1, 0, &worst);
    printf("  control %s R=%d: calc_diff=%.3g -> %s\n", control_name(CTL_PEERS), sc->ranks, worst,
           passed ? "NOT detected" : "detected");
    record(!passed);
    run_teardown(&u);
}

/* ---------------------------------------------------------- invalid input */

static int nothing_written(ctx *c, int local) {
    size_t cap = (size_t)(c->sh.TMAX + Y_SLACK) * (size_t)c->sh.H;
    wait_or_die(c, c->s, 1);
    CU(cuMemcpyDtoH(c->y_got[0], c->d_y[0], cap * 2));
    CU(cuMemcpyDtoH(c->stats_got, c->d_stats[0], (size_t)local * 4));
    for (size_t i = 0; i < cap; i++)
        if (c->y_got[0][i] != POISON16) {
            printf("  y[%zu] = 0x%04x: something was launched\n", i, c->y_got[0][i]);
            return 0;
        }
    for (int i = 0; i < local; i++)
        if (c->stats_got[i]) {
            printf("  recv_stats[%d] = %d: something was launched\n", i, c->stats_got[i]);
            return 0;
        }
    return 1;
}

static int expect_refused(mj_status st, const char *want_in_msg, int hard) {
    const char *msg = mj_last_error();
    printf("  -> %s: %s\n", mj_status_name(st), msg);
    if (st != MJ_ERR_INVALID_ARG) {
        printf("  want MJ_ERR_INVALID_ARG\n");
        return 0;
    }
    if (!msg[0]) {
        printf("  empty error message\n");
        return 0;
    }
    if (want_in_msg && !strcasestr(msg, want_in_msg)) {
        printf("  %s: the message does not name \"%s\"\n", hard ? "FAIL" : "NOTE", want_in_msg);
        return !hard;
    }
    return 1;
}

/* Random MXFP8 weights for every local expert of a config (they are never
 * used numerically: only whether the call is refused). */
static int load_all_random(mj_weights *w, const mj_moe_config *mc, int skip_proj, int skip_expert) {
    int H = mc->hidden, I = mc->intermediate, local = mc->num_experts / mc->num_ranks;
    size_t n = (size_t)H * (size_t)I;
    float *f = xmalloc(n * sizeof(float));
    uint8_t *d = xmalloc(n), *s = xmalloc(n / 32);
    for (size_t i = 0; i < n; i++)
        f[i] = rnd_sym() * 0.05f;
    int ok = 1;
    for (int e = 0; e < local && ok; e++)
        for (int p = 0; p < 3 && ok; p++) {
            if (p == skip_proj && (skip_expert < 0 || skip_expert == e)) continue;
            int rows = p == MJ_PROJ_DOWN ? H : I, cols = p == MJ_PROJ_DOWN ? I : H;
            mjr_quantize_weights(MJ_FMT_MXFP8, f, rows, cols, d, s);
            ok = expect_ok(mj_weights_load(w, e, (mj_projection)p, d, s, 0), "mj_weights_load");
        }
    free(f);
    free(d);
    free(s);
    return ok;
}

static void test_invalid(ctx *c) {
    const shape *sh = &c->sh;
    int row_index = row_index_by_name("mxfp8");
    set_case("invalid: setup (mxfp8 R=1 T=8)");
    run u;
    if (!run_setup(c, &u, row_index, &kInvalid, CTL_NONE)) {
        record(0);
        run_teardown(&u);
        return;
    }
    poison_outputs(c, &u);
    void *y = (void *)(uintptr_t)c->d_y[0];
    int32_t *stats = (int32_t *)(uintptr_t)c->d_stats[0];
    int T = kInvalid.tokens[0];

    set_case("invalid: weights of another config (hidden %d) with the buffer (hidden %d)",
             sh->H == 256 ? 512 : 256, sh->H);
    {
        mj_moe_config mc = moe_cfg(sh, u.row, &kInvalid, 0);
        mc.hidden = sh->H == 256 ? 512 : 256;
        mj_weights *w = NULL;
        int ok = expect_ok(mj_weights_create(c->rt, &mc, &w), "mj_weights_create") &&
                 load_all_random(w, &mc, -1, -1);
        if (ok)
            ok = expect_refused(mj_mega_moe(c->rt, u.buf, w, y, T, stats, c->s[0]), "hidden", 0) &
                 nothing_written(c, u.local);
        if (w) mj_weights_destroy(w);
        record(ok);
    }

    set_case("invalid: num_tokens = max_tokens_per_rank + 1 (%d)", sh->TMAX + 1);
    record(expect_refused(mj_mega_moe(c->rt, u.buf, u.w[0], y, sh->TMAX + 1, stats, c->s[0]),
                          "num_tokens", 0) &
           nothing_written(c, u.local));
    set_case("invalid: num_tokens = -1");
    record(
        expect_refused(mj_mega_moe(c->rt, u.buf, u.w[0], y, -1, stats, c->s[0]), "num_tokens", 0) &
        nothing_written(c, u.local));

    for (int variant = 0; variant < 2; variant++) {
        mj_moe_config mc = moe_cfg(sh, u.row, &kInvalid, 0);
        int skip_expert = variant ? u.local - 1 : -1;
        if (variant)
            set_case("invalid: every projection loaded except local expert %d's down", skip_expert);
        else
            set_case("invalid: only gate and up loaded (no down projection)");
        mj_weights *w = NULL;
        int ok = expect_ok(mj_weights_create(c->rt, &mc, &w), "mj_weights_create") &&
                 load_all_random(w, &mc, MJ_PROJ_DOWN, skip_expert);
        if (ok)
            ok = expect_refused(mj_mega_moe(c->rt, u.buf, w, y, T, stats, c->s[0]), "down", 1) &
                 nothing_written(c, u.local);
        if (w) mj_weights_destroy(w);
        record(ok);
    }

    int sms = sms_for(c->device_sms, 1), other = sms > 1 ? sms - 1 : 2;
    set_case("invalid: buffer sized for %d SMs, MegaMoE family set to %d afterwards", sms, other);
    int ok = expect_ok(mj_family_set_num_sms(c->rt, MJ_FAMILY_MEGA_MOE, other), "set num_sms");
    if (ok)
        ok = expect_refused(mj_mega_moe(c->rt, u.buf, u.w[0], y, T, stats, c->s[0]), "SM", 0) &
             nothing_written(c, u.local);
    record(ok);

    set_case("invalid: SM count restored -> the same call runs and is correct");
    ok = expect_ok(mj_family_set_num_sms(c->rt, MJ_FAMILY_MEGA_MOE, sms), "set num_sms") &&
         expect_ok(mj_mega_moe(c->rt, u.buf, u.w[0], y, T, stats, c->s[0]), "mj_mega_moe");
    if (ok) {
        wait_or_die(c, c->s, 1);
        ok = run_check(c, &u, 1, 1, NULL);
    }
    record(ok);
    run_teardown(&u);
}

/* ------------------------------------------------------------- timing */

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* One decode-sized launch per row: R = 1, T = 8, median of 50 launches timed
 * with events. Weight bytes are what the routed experts must stream once. */
static void test_timing(ctx *c) {
    const shape *sh = &kTiming;
    const int iters = 50, T = sh->TMAX, TILE = 64;
    const size_t H = (size_t)sh->H, I = (size_t)sh->I;
    CUdeviceptr d_x, d_ids, d_tw, d_y, d_w1, d_w1sf, d_w2, d_w2sf;
    CU(cuMemAlloc(&d_x, (size_t)T * H * 2));
    CU(cuMemAlloc(&d_ids, (size_t)T * sh->K * 4));
    CU(cuMemAlloc(&d_tw, (size_t)T * sh->K * 4));
    CU(cuMemAlloc(&d_y, (size_t)T * H * 2));
    CU(cuMemAlloc(&d_w1, 2 * I * H * 2));
    CU(cuMemAlloc(&d_w1sf, 2 * I * (H / 16)));
    CU(cuMemAlloc(&d_w2, H * I * 2));
    CU(cuMemAlloc(&d_w2sf, H * (I / 16)));
    uint16_t *x = xmalloc((size_t)T * H * 2), *y = xmalloc((size_t)T * H * 2);
    int32_t *ids = xmalloc((size_t)T * sh->K * 4);
    float *tw = xmalloc((size_t)T * sh->K * 4);
    for (size_t i = 0; i < (size_t)T * H; i++)
        x[i] = mjr_bf16_from_f32(rnd_sym());
    int hit[64] = {0}, experts_hit = 0;
    for (int t = 0; t < T; t++)
        for (int k = 0; k < sh->K; k++) {
            int v, dup;
            do {
                v = (int)rnd_below((uint32_t)sh->E);
                dup = 0;
                for (int j = 0; j < k; j++)
                    dup |= ids[t * sh->K + j] == v;
            } while (dup);
            ids[t * sh->K + k] = v;
            tw[t * sh->K + k] = 0.05f + 0.95f * rnd_unit();
            if (!hit[v]++) experts_hit++;
        }
    CU(cuMemcpyHtoD(d_x, x, (size_t)T * H * 2));
    CU(cuMemcpyHtoD(d_ids, ids, (size_t)T * sh->K * 4));
    CU(cuMemcpyHtoD(d_tw, tw, (size_t)T * sh->K * 4));
    /* Rows of one quantized 64-row tile repeat through each projection: the
     * values do not change the time, and quantizing 32 full experts on the host
     * would take longer than the whole GPU run. */
    float *tile = xmalloc((size_t)TILE * H * sizeof(float)), *tmp = xmalloc((size_t)TILE * H * 4);
    for (size_t i = 0; i < (size_t)TILE * H; i++)
        tile[i] = rnd_sym() * 0.03f;
    uint8_t *hw1 = xmalloc(2 * I * H * 2), *hw1sf = xmalloc(2 * I * (H / 16));
    uint8_t *hw2 = xmalloc(H * I * 2), *hw2sf = xmalloc(H * (I / 16));

    printf("\nMegaMoE decode timing: R=1, H=%d, I=%d, E=%d, K=%d, T=%d tokens, %d SMs, swiglu\n",
           sh->H, sh->I, sh->E, sh->K, T, c->device_sms);
    printf("| row | tokens | block_m | us (median of %d) | us (min) | experts hit | weight bytes "
           "| GB/s | HBM floor us (4.3 TB/s) |\n",
           iters);
    printf("|---|---|---|---|---|---|---|---|---|\n");
    CUevent ev0[50], ev1[50];
    for (int i = 0; i < iters; i++) {
        CU(cuEventCreate(&ev0[i], CU_EVENT_DEFAULT));
        CU(cuEventCreate(&ev1[i], CU_EVENT_DEFAULT));
    }
    if (!expect_ok(mj_family_set_num_sms(c->rt, MJ_FAMILY_MEGA_MOE, c->device_sms),
                   "mj_family_set_num_sms")) {
        record(0);
        return;
    }
    for (int ri = 0; ri < mj_moe_format_count(); ri++) {
        const mj_moe_format_row *row = mj_moe_format_at(ri);
        scenario sc = {1, SWIGLU, 0, {T}, ROUTE_RANDOM, -1, 0, 0};
        set_case("timing %s", row->name);
        int fmt = row->weight_fmt, bits = mj_format_bits(fmt), group = mj_format_group(fmt);
        size_t rb1 = H * (size_t)bits / 8, rb2 = I * (size_t)bits / 8;
        size_t sb1 = group ? H / (size_t)group : 0, sb2 = group ? I / (size_t)group : 0;
        float a1, a2;
        quantize_scaled(fmt, tile, TILE, (int)H, tmp, hw1, hw1sf, &a1);
        for (size_t r = TILE; r < 2 * I; r++) {
            memcpy(hw1 + r * rb1, hw1 + (r % TILE) * rb1, rb1);
            if (group) memcpy(hw1sf + r * sb1, hw1sf + (r % TILE) * sb1, sb1);
        }
        quantize_scaled(fmt, tile, TILE, (int)I, tmp, hw2, hw2sf, &a2);
        for (size_t r = TILE; r < H; r++) {
            memcpy(hw2 + r * rb2, hw2 + (r % TILE) * rb2, rb2);
            if (group) memcpy(hw2sf + r * sb2, hw2sf + (r % TILE) * sb2, sb2);
        }
        CU(cuMemcpyHtoD(d_w1, hw1, 2 * I * rb1));
        CU(cuMemcpyHtoD(d_w2, hw2, H * rb2));
        if (group) {
            CU(cuMemcpyHtoD(d_w1sf, hw1sf, 2 * I * sb1));
            CU(cuMemcpyHtoD(d_w2sf, hw2sf, H * sb2));
        }
        mj_symm_config cfg = {sizeof cfg, sh->H, sh->E, sh->K, T, (mj_format)row->dispatch_fmt,
                              1,          sh->I};
        mj_moe_config mc = moe_cfg(sh, row, &sc, 0);
        mj_symm_buffer *buf = NULL;
        mj_weights *w = NULL;
        int ok = expect_ok(mj_symm_buffer_create(c->rt, &cfg, &buf), "mj_symm_buffer_create") &&
                 expect_ok(mj_weights_create(c->rt, &mc, &w), "mj_weights_create");
        for (int e = 0; ok && e < sh->E; e++) {
            const void *s1 = group ? (const void *)(uintptr_t)d_w1sf : NULL;
            const void *s1u = group ? (const void *)(uintptr_t)(d_w1sf + I * sb1) : NULL;
            const void *s2 = group ? (const void *)(uintptr_t)d_w2sf : NULL;
            ok =
                expect_ok(mj_weights_load(w, e, MJ_PROJ_GATE, (const void *)(uintptr_t)d_w1, s1, 1),
                          "load gate") &&
                expect_ok(mj_weights_load(w, e, MJ_PROJ_UP,
                                          (const void *)(uintptr_t)(d_w1 + I * rb1), s1u, 1),
                          "load up") &&
                expect_ok(mj_weights_load(w, e, MJ_PROJ_DOWN, (const void *)(uintptr_t)d_w2, s2, 1),
                          "load down") &&
                expect_ok(mj_weights_set_alphas(w, e, a1, a1, a2, 1.0f), "set alphas");
        }
        int bm = 0;
        if (ok) ok = expect_ok(mj_mega_moe_block_m(&mc, T, &bm), "mj_mega_moe_block_m");
        if (ok)
            ok = expect_ok(mj_pre_dispatch(c->rt, buf, 0, (const void *)(uintptr_t)d_x,
                                           (const int32_t *)(uintptr_t)d_ids,
                                           (const float *)(uintptr_t)d_tw, NULL, T, c->s[0]),
                           "mj_pre_dispatch");
        /* warm-up (compiles or loads), then a smoke check of the output */
        for (int i = 0; ok && i < 3; i++)
            ok = expect_ok(mj_mega_moe(c->rt, buf, w, (void *)(uintptr_t)d_y, T, NULL, c->s[0]),
                           "mj_mega_moe");
        if (ok) {
            wait_or_die(c, c->s, 1);
            CU(cuMemsetD16(d_y, (unsigned short)POISON16, (size_t)T * H));
            CU(cuCtxSynchronize());
            ok = expect_ok(mj_mega_moe(c->rt, buf, w, (void *)(uintptr_t)d_y, T, NULL, c->s[0]),
                           "mj_mega_moe");
            wait_or_die(c, c->s, 1);
            CU(cuMemcpyDtoH(y, d_y, (size_t)T * H * 2));
            size_t bad = 0;
            for (size_t i = 0; i < (size_t)T * H; i++)
                bad += (y[i] & 0x7F80u) == 0x7F80u;
            if (bad) {
                printf("  %zu output elements unwritten or non-finite\n", bad);
                ok = 0;
            }
        }
        float us[50];
        for (int i = 0; ok && i < iters; i++) {
            CU(cuEventRecord(ev0[i], c->s[0]));
            ok = expect_ok(mj_mega_moe(c->rt, buf, w, (void *)(uintptr_t)d_y, T, NULL, c->s[0]),
                           "mj_mega_moe");
            CU(cuEventRecord(ev1[i], c->s[0]));
        }
        if (ok) {
            wait_or_die(c, c->s, 1);
            for (int i = 0; i < iters; i++) {
                float ms;
                CU(cuEventElapsedTime(&ms, ev0[i], ev1[i]));
                us[i] = 1000.0f * ms;
            }
            qsort(us, (size_t)iters, sizeof us[0], cmp_float);
            double med = 0.5 * (us[iters / 2 - 1] + us[iters / 2]);
            double bytes = (double)experts_hit * 3.0 * (double)H * (double)I * bits / 8.0;
            printf("| %s | %d | %d | %.1f | %.1f | %d | %.3e | %.0f | %.1f |\n", row->name, T, bm,
                   med, (double)us[0], experts_hit, bytes, bytes / med / 1e3, bytes / 4.3e12 * 1e6);
        }
        record(ok);
        if (w) mj_weights_destroy(w);
        if (buf) mj_symm_buffer_destroy(buf);
    }
    printf("(weight bytes = distinct experts hit x 3 x H x I x bits / 8, block scales excluded)\n");
    for (int i = 0; i < iters; i++) {
        CU(cuEventDestroy(ev0[i]));
        CU(cuEventDestroy(ev1[i]));
    }
    CU(cuMemFree(d_x));
    CU(cuMemFree(d_ids));
    CU(cuMemFree(d_tw));
    CU(cuMemFree(d_y));
    CU(cuMemFree(d_w1));
    CU(cuMemFree(d_w1sf));
    CU(cuMemFree(d_w2));
    CU(cuMemFree(d_w2sf));
    free(x);
    free(y);
    free(ids);
    free(tw);
    free(tile);
    free(tmp);
    free(hw1);
    free(hw1sf);
    free(hw2);
    free(hw2sf);
}

/* One process per rank: every format row with swiglu, plus one clamp case.
 * A failed setup or launch leaves the peers' collectives out of step, so it
 * ends the run (the launcher then stops the others); a failed check does not. */
static void test_real_ranks(ctx *c, int world) {
    for (int i = 0; i <= mj_moe_format_count(); i++) {
        int clamp_case = i == mj_moe_format_count();
        int row_index = clamp_case ? row_index_by_name("nvfp4") : i;
        scenario sc = {world, SWIGLU, 0, {0}, ROUTE_RANDOM, -1, 0, 0};
        if (clamp_case) {
            sc.clamp = CLAMP;
            sc.route = ROUTE_DUP;
            sc.alphas = 1;
        }
        static const int pattern[] = {64, 37, 1, 0};
        for (int r = 0; r < world; r++)
            sc.tokens[r] = pattern[r % 4];
        run u = {.row = mj_moe_format_at(row_index), .sc = sc, .route = route_of(&sc, row_index)};
        char d[256];
        describe(&u, d, sizeof d);
        set_case("real-ranks rank %d of %d: %s", g_real_rank, world, d);
        if (!run_setup(c, &u, row_index, &sc, CTL_NONE)) {
            record(0);
            finish();
        }
        poison_outputs(c, &u);
        if (!run_launch(c, &u, c->s)) {
            record(0);
            finish();
        }
        wait_or_die(c, c->s, world);
        double worst = 0;
        int ok = run_check(c, &u, 1, 1, &worst);
        run_teardown(&u);
        printf("  worst calc_diff %.3g\n", worst);
        record(ok);
    }
}

/* ------------------------------------------------------------------ main */

static void ctx_alloc(ctx *c) {
    const shape *sh = &c->sh;
    size_t rows = (size_t)(sh->TMAX + Y_SLACK);
    size_t H = (size_t)sh->H, I = (size_t)sh->I, E = (size_t)sh->E, K = (size_t)sh->K;
    for (int r = 0; r < MAX_R; r++) {
        CU(cuStreamCreate(&c->s[r], CU_STREAM_NON_BLOCKING));
        CU(cuMemAlloc(&c->d_x[r], rows * H * 2));
        CU(cuMemAlloc(&c->d_ids[r], rows * K * 4));
        CU(cuMemAlloc(&c->d_tw[r], rows * K * 4));
        CU(cuMemAlloc(&c->d_y[r], rows * H * 2));
        CU(cuMemAlloc(&c->d_stats[r], E * 4));
        c->x[r] = xmalloc(rows * H * 2);
        c->y_ref[r] = xmalloc(rows * H * 2);
        c->y_got[r] = xmalloc(rows * H * 2);
        c->ids[r] = xmalloc(rows * K * 4);
        c->tw[r] = xmalloc(rows * K * 4);
        c->tw_gpu[r] = xmalloc(rows * K * 4);
    }
    /* BF16 dispatch has the largest input region */
    c->img_bytes = mj_layout_input(sh->H, sh->K, sh->TMAX, MJ_FMT_BF16).end;
    for (int f = MJ_FMT_MXFP8; f <= MJ_FMT_NVFP4; f++) {
        size_t b = mj_layout_input(sh->H, sh->K, sh->TMAX, f).end;
        if (b > c->img_bytes) c->img_bytes = b;
    }
    for (int r = 0; r < MAX_R; r++)
        c->img[r] = xmalloc(c->img_bytes);
    c->stats_ref = xmalloc(E * 4);
    c->stats_got = xmalloc(E * 4);
    c->master_w1 = xmalloc(E * 2 * I * H * sizeof(float));
    c->master_w2 = xmalloc(E * H * I * sizeof(float));
    uint64_t saved = g_rng;
    g_rng = 0x9E3779B97F4A7C15ull; /* the weights do not depend on --seed: only routing does */
    float a1 = sqrtf(3.0f / (float)H), a2 = sqrtf(3.0f / (float)I);
    for (size_t i = 0; i < E * 2 * I * H; i++)
        c->master_w1[i] = rnd_sym() * a1;
    for (size_t i = 0; i < E * H * I; i++)
        c->master_w2[i] = rnd_sym() * a2;
    g_rng = saved;
}

static void ctx_free(ctx *c) {
    for (int r = 0; r < MAX_R; r++) {
        CU(cuStreamDestroy(c->s[r]));
        CU(cuMemFree(c->d_x[r]));
        CU(cuMemFree(c->d_ids[r]));
        CU(cuMemFree(c->d_tw[r]));
        CU(cuMemFree(c->d_y[r]));
        CU(cuMemFree(c->d_stats[r]));
        free(c->x[r]);
        free(c->y_ref[r]);
        free(c->y_got[r]);
        free(c->ids[r]);
        free(c->tw[r]);
        free(c->tw_gpu[r]);
        free(c->img[r]);
    }
    for (int i = 0; i < NUM_ROWS_MAX; i++)
        for (int a = 0; a < 2; a++)
            model_free(&c->models[i][a]);
    free(c->stats_ref);
    free(c->stats_got);
    free(c->master_w1);
    free(c->master_w2);
}

int main(int argc, char **argv) {
    uint64_t seed = (uint64_t)time(NULL) * 0x9E3779B97F4A7C15ull ^ (uint64_t)clock();
    int do_precompile = 1, real_ranks = 0, seed_given = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--real-ranks")) {
            real_ranks = 1;
        } else if (!strcmp(argv[i], "--quick")) {
            g_quick = 1;
        } else if (!strcmp(argv[i], "--timing")) {
            g_timing = 1;
        } else if (!strcmp(argv[i], "--no-precompile")) {
            do_precompile = 0;
        } else if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
            seed = strtoull(argv[++i], NULL, 0);
            seed_given = 1;
        } else if (!strcmp(argv[i], "--budget") && i + 1 < argc) {
            g_budget_s = strtod(argv[++i], NULL);
        } else {
            fprintf(stderr,
                    "usage: %s [--quick] [--timing] [--seed N] [--budget S] [--no-precompile]\n"
                    "       launch_ranks --gpus N -- %s --real-ranks [--seed N]\n",
                    argv[0], argv[0]);
            return 2;
        }
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    int world = 1;
    if (real_ranks) {
        if (!mj_launcher_env(&g_real_rank, &world) || world > MAX_R) {
            fprintf(stderr,
                    "%s --real-ranks: run it under launch_ranks --gpus N (2 <= N <= %d): "
                    "MEGAJIT_RANK, MEGAJIT_WORLD or MEGAJIT_NCCL_ID is missing\n",
                    argv[0], MAX_R);
            return 2;
        }
        /* All ranks need the same inputs; the NCCL id is the same for every
         * rank and new for every launch. */
        if (!seed_given) {
            seed = 1469598103934665603ull;
            for (const char *p = getenv("MEGAJIT_NCCL_ID"); *p; p++)
                seed = (seed ^ (unsigned char)*p) * 1099511628211ull;
        }
        /* Each rank compiles only its own kernels; the workers would repeat
         * every rank's matrix on every rank. */
        do_precompile = 0;
    }
    g_t0 = now_s();
    g_rng = seed ? seed : 1;
    printf("test_mega_moe %s, seed %" PRIu64 " (rerun with --seed %" PRIu64 ")\n",
           real_ranks ? "--real-ranks"
           : g_timing ? "--timing"
           : g_quick  ? "--quick"
                      : "full",
           seed, seed);
    /* Emulated ranks spin on each other inside the kernel; a lazily loaded
     * kernel may need a context synchronization to load, which would wait for
     * a spinning rank forever (CUDA lazy-loading caveat). */
    setenv("CUDA_MODULE_LOADING", "EAGER", 0);
    printf("CUDA_MODULE_LOADING=%s\n", getenv("CUDA_MODULE_LOADING"));

    /* Before this process touches CUDA: the workers must initialize their own. */
    if (do_precompile && !g_quick) precompile();

    int dev_index = g_real_rank < 0 ? 0 : g_real_rank, device_sms;
    CUdevice dev = attach_device(dev_index, &device_sms);
    if (real_ranks) {
        set_case("rank %d joining %d ranks", g_real_rank, world);
        if (!expect_ok(mj_launcher_join(g_real_rank, world, &g_comm), "mj_launcher_join")) {
            record(0);
            finish();
        }
    }

    ctx c;
    memset(&c, 0, sizeof c);
    c.device_sms = device_sms;
    c.sh = g_timing ? kFull : g_quick ? kQuickShape : kFull;
    c.wait_timeout_s = g_quick ? 90.0 : 20.0;

    set_case("runtime create");
    mj_runtime_options opts = MJ_RUNTIME_OPTIONS_INIT;
    c.rt = open_runtime(&opts, "mj_runtime_create");
    printf("runtime arch %s; shapes H=%d I=%d E=%d K=%d T_max=%d\n", mj_runtime_arch(c.rt), c.sh.H,
           c.sh.I, c.sh.E, c.sh.K, c.sh.TMAX);
    ctx_alloc(&c);

    static const struct {
        const char *name;
        void (*fn)(ctx *);
        int in_quick;
    } sections[] = {
        {"invalid input", test_invalid, 1},        {"format x activation x ranks", test_matrix, 1},
        {"block_m independence", test_block_m, 0}, {"cuda graphs", test_graphs, 0},
        {"negative controls", test_controls, 0},
    };
    enum { NUM_SECTIONS = sizeof sections / sizeof sections[0] };
    double section_s[NUM_SECTIONS + 1] = {0};
    if (real_ranks) {
        test_real_ranks(&c, world);
    } else if (g_timing) {
        double t0 = now_s();
        test_timing(&c);
        section_s[0] = now_s() - t0;
        printf("  %-30s %7.2f s\n", "timing", section_s[0]);
    } else {
        for (int i = 0; i < NUM_SECTIONS; i++) {
            if (g_quick && !sections[i].in_quick) continue;
            double t0 = now_s();
            sections[i].fn(&c);
            section_s[i] = now_s() - t0;
        }
        print_runtime_stats("runtime", c.rt);
        for (int i = 0; i < NUM_SECTIONS; i++)
            printf("  %-30s %7.2f s\n", sections[i].name, section_s[i]);
        printf("host reference %.2f s, total %.2f s\n", c.ref_s, now_s() - g_t0);
        /* Last: a wrong peer offset can hang or fault the kernels for good. */
        if (!g_quick) {
            double t0 = now_s();
            test_peer_control(&c, &kPeers2);
            test_peer_control(&c, &kPeers4);
            printf("  %-30s %7.2f s\n", "peer-offset controls", now_s() - t0);
        }
    }
    printf("total %.2f s\n", now_s() - g_t0);
    ctx_free(&c);
    mj_runtime_destroy(c.rt);
    mj_launcher_leave(g_comm);
    CU(cuDevicePrimaryCtxRelease(dev));
    finish();
}
