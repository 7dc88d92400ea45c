/*
 * MegaMoE on a GPU against the fp64 host reference (tests/reference/moe_ref.h):
 * every format row and activation, emulated ranks (1, 2, 4, 8 in one buffer,
 * one non-blocking stream per rank, all in flight together), BLOCK_M
 * independence, CUDA graphs, invalid input, negative controls and every row at
 * gpt-oss-120b's hidden and intermediate, 2880 (kGptOss: each row's weight
 * images loaded from host and from device must be equal, each case relaunched
 * twice must repeat its bits; timing is
 * `megajit bench mega-moe`'s, against ceilings it measures). Outputs are poisoned (0xFFFF, a BF16
 * NaN) before each launch, so an unwritten element fails like a wrong one. The parts live in
 * tests/gpu/mega_moe/: the scenarios, the precompile plan, one case's run and
 * check, the sections of cases and invalid input, the shared expert's section.
 *
 * The shared expert (--section shared): a fused shared expert of I_s = I and
 * 2I in the row's weight format on the bf16 and mxfp8 rows (the kernel fuses
 * no other pair yet), R = 1 and 2, a rank of all-masked tokens (y = the
 * shared output alone), biases, alphas, every activation; its controls
 * (reference-without-shared-expert, wrong-shared-scale: every gate scale byte
 * of the shared expert + 1 in the reference, swap-shared-gate-up: the GPU
 * loads the shared gate as up), its invalid configs and loads (fusable pairs
 * not built yet: MJ_ERR_UNSUPPORTED; unfusable ones, bad sizes, a launch
 * before every shared projection is loaded, a buffer of another
 * shared_intermediate: MJ_ERR_INVALID_ARG), and 1000 CUDA-graph replays.
 * --quick: one small case (mxfp8, R = 2, I_s = 2I, one rank all masked) and
 * the invalid input.
 *
 *   test_mega_moe [--quick] [--seed N] [--budget S] [--no-precompile] [--section NAME]
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
 * compute-sanitizer.
 * --section NAME: only the sections whose name contains NAME (their names are
 * printed at the end of every run), e.g. --section gpt-oss.
 * --budget: seconds after which the remaining cases are skipped and counted as
 * skipped (default 140), so a slow machine still prints its summary. The last
 * line is "N passed, N failed"; the exit status is non-zero on any failure.
 *
 * Pass/fail: calc_diff(y, y_ref) below mj_bench_check_bar per rank (1e-4 for
 * the bf16 row, else 1e-3), no poison left in rows < num_tokens, every
 * element finite, rows >= num_tokens untouched, recv_stats equal to the
 * reference's counts.
 *
 * Negative controls: the numeric check must FAIL on each, and the test passes
 * when it does. swap-gate-up loads the gate data as up and vice versa;
 * no-routing-weight gives the GPU top-k weights of 1.0 while the reference
 * keeps them; wrong-scale adds 1 to every gate scale byte of the one expert
 * every token uses (rows without block scales skip it; the same route runs
 * unfaulted first and must pass); wrong-alpha doubles l2_alpha on the GPU
 * only; wrong-peer-offset sets every peer offset to the own region in every
 * rank's args (R = 2 and 4; a hang also counts as detected). The calc_diff
 * each control gave on each format row is in bench/RESULTS.md.
 */
#include "tests/gpu/mega_moe/harness.h"

int g_quick;
double g_budget_s = 140.0;
double g_t0;
/* --real-ranks: this process's rank (-1: all ranks emulated here) and communicator. */
int g_real_rank = -1;
void *g_comm;
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
    /* About the size of the values they join: gate and up are about the token
     * amplitude (1..16) over 1.7, GEMM 2 outputs far larger; a down bias that
     * small next to them would let the control that drops its routing weight
     * pass (calc_diff below 1e-3). */
    c->bias1 = xmalloc(E * 2 * I * sizeof(float));
    c->bias2 = xmalloc(E * H * sizeof(float));
    for (size_t i = 0; i < E * 2 * I; i++)
        c->bias1[i] = rnd_sym() * 4.0f;
    for (size_t i = 0; i < E * H; i++)
        c->bias2[i] = rnd_sym() * 16.0f;
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
    for (int f = 0; f < MJ_FMT_COUNT; f++)
        for (int m = 0; m <= SHARED_MAX; m++)
            shared_free(&c->shared[f][m]);
    free(c->stats_ref);
    free(c->stats_got);
    free(c->master_w1);
    free(c->master_w2);
    free(c->bias1);
    free(c->bias2);
}

/* gpt-oss-120b's sizes take buffers and weights of their own: the context is
 * rebuilt for them, then for the main shape again, which the peer-offset
 * controls after the sections use. */
static void gpt_oss_section(ctx *c) {
    const shape main_shape = c->sh;
    ctx_free(c);
    c->sh = kGptOss;
    ctx_alloc(c);
    test_weight_images(c);
    test_gpt_oss(c);
    ctx_free(c);
    c->sh = main_shape;
    ctx_alloc(c);
}

int main(int argc, char **argv) {
    uint64_t seed = (uint64_t)time(NULL) * 0x9E3779B97F4A7C15ull ^ (uint64_t)clock();
    int do_precompile = 1, real_ranks = 0, seed_given = 0;
    const char *only_section = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--real-ranks")) {
            real_ranks = 1;
        } else if (!strcmp(argv[i], "--quick")) {
            g_quick = 1;
        } else if (!strcmp(argv[i], "--no-precompile")) {
            do_precompile = 0;
        } else if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
            seed = strtoull(argv[++i], NULL, 0);
            seed_given = 1;
        } else if (!strcmp(argv[i], "--section") && i + 1 < argc) {
            only_section = argv[++i];
        } else if (!strcmp(argv[i], "--budget") && i + 1 < argc) {
            g_budget_s = strtod(argv[++i], NULL);
        } else {
            fprintf(
                stderr,
                "usage: %s [--quick] [--seed N] [--budget S] [--no-precompile] [--section NAME]\n"
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
    c.sh = g_quick ? kQuickShape : kFull;
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
        {"invalid input", test_invalid, 1},
        {"format x activation x ranks", test_matrix, 1},
        {"shared expert", test_shared, 1},
        {"block_m independence", test_block_m, 0},
        {"cuda graphs", test_graphs, 0},
        {"negative controls", test_controls, 0},
        {"gpt-oss-120b shape", gpt_oss_section, 0},
    };
    enum { NUM_SECTIONS = sizeof sections / sizeof sections[0] };
    double section_s[NUM_SECTIONS + 1] = {0};
    if (real_ranks) {
        test_real_ranks(&c, world);
    } else {
        int sections_run = 0;
        for (int i = 0; i < NUM_SECTIONS; i++) {
            if (g_quick && !sections[i].in_quick) continue;
            if (only_section && !strstr(sections[i].name, only_section)) continue;
            sections_run++;
            double t0 = now_s();
            sections[i].fn(&c);
            section_s[i] = now_s() - t0;
        }
        if (only_section && !sections_run) {
            set_case("--section %s", only_section);
            printf("  no section's name contains \"%s\"\n", only_section);
            record(0);
        }
        print_runtime_stats("runtime", c.rt);
        for (int i = 0; i < NUM_SECTIONS; i++)
            printf("  %-30s %7.2f s\n", sections[i].name, section_s[i]);
        printf("host reference %.2f s, total %.2f s\n", c.ref_s, now_s() - g_t0);
        /* Last: a wrong peer offset can hang or fault the kernels for good. */
        if (!g_quick && !only_section) {
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
