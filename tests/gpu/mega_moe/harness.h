/*
 * What the parts of test_mega_moe share: the scenarios and shapes, the test
 * context, one run of a case, and the functions each part offers the others.
 */
#ifndef MJ_GPU_MEGA_MOE_HARNESS_H
#define MJ_GPU_MEGA_MOE_HARNESS_H

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

#include "apis/mega_moe_impl.h"
#include "heuristics/mega_moe_config.h"
#include "heuristics/moe_formats.h"
#include "include/megajit.h"
#include "runtime/build_pool.h"
#include "runtime/configs.h"
#include "runtime/families/mega_moe.h"
#include "runtime/jit.h"
#include "templates/layout/moe_layout.h"
#include "templates/layout/symm_layout.h"
#include "tests/gpu/check.h"
#include "tools/bench/moe_check.h"
#include "tests/reference/moe_ref.h"
#include "tests/reference/quant.h"
#include "tools/bench/launcher.h"

enum { MAX_R = 8, Y_SLACK = 8, NUM_ROWS_MAX = 8, SHARED_MAX = 2 };
#define CLAMP 7.0f /* 0x40E00000, exact in BF16 */
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
    CTL_ALPHA,
    CTL_ACT_PARAM,       /* the kernel's swiglu alpha -1 (the gate mirrored), the reference's 1 */
    CTL_BIAS_UNWEIGHTED, /* the reference's down bias without the routing weight */
    CTL_PEERS,
    CTL_PREPARE,        /* no fault: the prepare + mj_jit_launch path itself */
    CTL_SHARED_DROPPED, /* the reference without the shared expert (the GPU runs it) */
    CTL_SHARED_SCALE,   /* the reference reads the shared gate's scale bytes + 1 */
    CTL_SHARED_SWAP,    /* the GPU loads the shared gate's data and scales as up and vice versa */
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
    /* The activation's parameters, 0 = standard (mj_moe_config: swiglu_alpha
     * and swiglu_beta, or situ_gate_beta and situ_up_beta). */
    float act_params[2];
    int biases; /* mj_moe_config.expert_biases, with ctx's random biases loaded */
    /* A fused shared expert of intermediate size shared x I
     * (mj_moe_config.shared_intermediate and shared_format, the buffer's
     * shared_intermediate; ctx's random shared weights loaded with
     * mj_weights_load_shared); 0: none. At most SHARED_MAX. */
    int shared;
    /* 1 + its weight format (MJ_FMT_*); 0: mj_moe_shared_format_of(row)
     * (shared_format_of). */
    int shared_fmt;
} scenario;

#define SWIGLU MJ_ACT_SWIGLU
#define SWIGLUOAI MJ_ACT_SWIGLUOAI
#define SITU MJ_ACT_SITU

/* Every row runs all of these: every activation (swiglu with and without
 * clamp; swiglu and situ with parameters of their own too; expert biases on
 * and off) at R = 1, 2, 4 and 8; tokens 0, 1 and T_max on some ranks. Token counts are chosen so
 * each (row, scenario) needs at most two kernels (BLOCK_M follows the count). */
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
    {1, SWIGLU, CLAMP, {64}, ROUTE_RANDOM, -1, 1, 0, {1.5f, 0.25f}},
    {2, SITU, 0, {37, 64}, ROUTE_DUP, -1, 0, 0, {3.0f, 20.0f}},
    {1, SWIGLUOAI, CLAMP, {64}, ROUTE_RANDOM, -1, 1, 0, {0, 0}, 1},
    {2, SWIGLU, 0, {1, 37}, ROUTE_DUP, 0, 0, 0, {0, 0}, 1},
};
static const scenario kQuick[] = {
    {2, SWIGLU, CLAMP, {8, 0}, ROUTE_RANDOM, -1, 1, 0},
    {2, SITU, 0, {1, 8}, ROUTE_DUP, 0, 0, 0, {3.0f, 20.0f}},
    {1, SWIGLUOAI, CLAMP, {8}, ROUTE_RANDOM, -1, 1, 0, {0, 0}, 1},
};
/* Controls, graphs and BLOCK_M sweeps reuse kernels of the matrix. */
static const scenario kControlBase = {1, SWIGLU, 0, {64}, ROUTE_RANDOM, -1, 0, 0};
static const scenario kBiasControl = {1, SWIGLU, 0, {64}, ROUTE_RANDOM, -1, 0, 0, {0, 0}, 1};
static const scenario kGraph1 = {1, SWIGLU, CLAMP, {37}, ROUTE_ONE, -1, 1, 0};
static const scenario kGraph2 = {2, SWIGLU, CLAMP, {1, 64}, ROUTE_DUP, -1, 0, 0};
static const scenario kPeers2 = {2, SWIGLU, 0, {64, 64}, ROUTE_RANDOM, -1, 0, 0};
static const scenario kPeers4 = {4, SWIGLU, 0, {64, 64, 64, 64}, ROUTE_RANDOM, -1, 0, 0};
static const scenario kInvalid = {1, SWIGLU, 0, {8}, ROUTE_RANDOM, -1, 0, 0};
/* Each row runs the sizes up to its own cap, mj_moe_max_block_m. */
static const int kBlockMs[] = {8, 16, 32, 64, 128, 160};

typedef struct shape {
    int H, I, E, K, TMAX;
} shape;
static const shape kFull = {512, 128, 16, 4, 64};
static const shape kQuickShape = {256, 64, 4, 2, 8};
/* gpt-oss-120b's hidden and intermediate (2880: a multiple of 64, not of 256;
 * 45 GEMM 2 row blocks, an odd count; stage K 64) and top-4,
 * with 8 experts (enough for 4 distinct ids on even experts only), on two
 * emulated ranks with gpt-oss's swigluoai and clamp. Not in --quick. */
static const shape kGptOss = {2880, 2880, 8, 4, 16};
static const scenario kGptOssCase = {2, SWIGLUOAI, CLAMP, {16, 5}, ROUTE_RANDOM, -1, 1, 0};
/* One rank of 16 tokens: 16-token tiles and about 280 tasks, so the E2M1
 * rows but mxfp4-a8 run two CTAs an SM (heuristics/mega_moe_config.c); the
 * emulated ranks above keep one. */
static const scenario kGptOssOneRank = {1, SWIGLUOAI, CLAMP, {16}, ROUTE_RANDOM, -1, 1, 0};
/* The same in 8-token tiles with expert biases, as gpt-oss runs at T = 8 to
 * 64: at least 280 tasks, so two CTAs an SM for the E2M1 rows but mxfp4-a8
 * (the case above has no biases, the emulated ranks one CTA); experts of
 * more than 8 tokens take two tiles. */
static const scenario kGptOssBiased8 = {1,  SWIGLUOAI, CLAMP, {16},   ROUTE_RANDOM,
                                        -1, 1,         8,     {0, 0}, 1};

/* The shared expert (tests/gpu/mega_moe/shared.c), on every row in each
 * format that fuses into it (mj_moe_shared_fusable): I_s = I and 2I, at
 * R = 1 and 2, tokens 0, 1, 37 and T_max; a rank whose every slot is masked
 * (its y is the shared expert's output alone); routed alphas beside the
 * shared expert's 1s; expert biases (the shared expert has none); a clamp,
 * swigluoai, situ and a swiglu of parameters of its own. Fields as kMatrix's,
 * then the shared expert's I_s / I. */
static const scenario kShared[] = {
    {1, SWIGLU, 0, {37}, ROUTE_RANDOM, -1, 0, 0, {0, 0}, 0, 1},
    {1, SWIGLU, CLAMP, {64}, ROUTE_ONE, -1, 1, 0, {0, 0}, 0, 2},
    {2, SWIGLU, 0, {1, 64}, ROUTE_DUP, -1, 0, 0, {0, 0}, 0, 1},
    {2, SITU, 0, {37, 64}, ROUTE_RANDOM, 1, 0, 0, {0, 0}, 0, 2},
    {2, SWIGLU, 0, {0, 37}, ROUTE_SKEW, -1, 1, 0, {0, 0}, 0, 2},
    {2, SWIGLUOAI, CLAMP, {64, 37}, ROUTE_RANDOM, 0, 0, 0, {0, 0}, 1, 1},
    {1, SWIGLU, CLAMP, {64}, ROUTE_RANDOM, -1, 1, 0, {1.5f, 0.25f}, 1, 2},
};
/* --quick: one small case, R = 2, its second rank all masked (on the
 * rows of kSharedQuickRows, in their shared_format_of). */
static const scenario kSharedQuick = {2, SWIGLU, CLAMP, {8, 1}, ROUTE_RANDOM, 1, 0,
                                      0, {0, 0}, 0,     2};
/* The shared expert's negative controls and CUDA graph: cases of kShared
 * (their unfaulted runs, their kernels). */
static const scenario *const kSharedControl = &kShared[0];
static const scenario *const kSharedGraph = &kShared[2];
/* The shared expert's invalid input (invalid.c): mxfp8 R = 1 T = 8 with I_s = I. */
static const scenario kSharedInvalid = {1, SWIGLU, 0, {8}, ROUTE_RANDOM, -1, 0, 0, {0, 0}, 0, 1};
/* The rows the shared section runs: every row. In --quick: a shared expert
 * in the row's format (mxfp8), and in another (mxfp4-a8 and nvfp4: MXFP8
 * decoded into BF16, in block pairs). */
static const char *const kSharedRows[] = {"bf16",      "mxfp8", "mxfp4-a8",
                                          "mxfp4-a16", "nvfp4", "nvfp4-a16"};
static const char *const kSharedQuickRows[] = {"mxfp8", "mxfp4-a8", "nvfp4"};
/* ----------------------------------------------------------- test context */

typedef struct model {
    int built;
    size_t w1b, w1sfb, w2b, w2sfb; /* bytes per expert */
    uint8_t *w1, *w1_sf, *w2, *w2_sf;
    float *ag, *au, *a2, *as;
} model;

/* One shared expert in checkpoint layout: W1 [2 I_s][H] (gate rows, then up
 * rows), W2 [H][I_s], with their scales; alphas 1, no biases. */
typedef struct shared_model {
    int built, fmt, inter;
    size_t w1b, w1sfb, w2b, w2sfb; /* bytes */
    uint8_t *w1, *w1_sf, *w2, *w2_sf;
} shared_model;

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
    float *bias1, *bias2;         /* fp32 [E][2I] and [E][H], for scenarios with biases */
    model models[NUM_ROWS_MAX][2];
    shared_model shared[MJ_FMT_COUNT][SHARED_MAX + 1]; /* [format][I_s / I] */
    double ref_s, wait_timeout_s;
} ctx;

typedef struct run {
    const mj_moe_format_row *row;
    int row_index, ctl, route;
    scenario sc;
    model *m;
    shared_model *sm; /* the scenario's shared expert; NULL: none */
    mj_symm_buffer *buf;
    mj_weights *w[MAX_R];
    int local, hot; /* experts per rank; the expert ROUTE_ONE* uses */
} run;

/* tests/gpu/test_mega_moe.c */
extern int g_quick;
extern double g_budget_s;
extern double g_t0;
extern int g_real_rank;
extern void *g_comm;

/* tests/gpu/mega_moe/scenarios.c */
int mine(int r);
/* Past the budget the remaining cases are skipped rather than letting the
 * step's timeout kill the run before the summary. */
int out_of_time(void);
float rnd_sym(void);
int row_index_by_name(const char *name);
int sms_for_mode(int device_sms, int ranks, int quick);
int sms_for(int device_sms, int ranks);
int route_of(const scenario *sc, int row_index);
mj_moe_config moe_cfg(const shape *sh, const mj_moe_format_row *row, const scenario *sc, int rank);
/* The weight format of sc's shared expert beside row's experts. */
int shared_format_of(const scenario *sc, const mj_moe_format_row *row);
/* sc with a shared expert in format fmt. */
scenario with_shared_format(const scenario *sc, int fmt);

/* tests/gpu/mega_moe/precompile.c */
/* Builds every planned kernel with the library's worker pool. */
void precompile(void);

/* tests/gpu/mega_moe/run.c */
/* NVFP4 weights carry no global scale of their own: w is scaled so its amax is
 * 2688 (448 * 6) and the inverse goes into the alphas, or small groups would
 * fall into E4M3 subnormals (mjr_quantize_weights). */
void quantize_scaled(int fmt, const float *w, int rows, int cols, float *tmp, uint8_t *data,
                     uint8_t *sf, float *alpha);
void model_free(model *m);
/* The row's checkpoint weights at the context's shape (built once, kept in c). */
model *model_get(ctx *c, int row_index, int alphas);
/* A shared expert of intermediate size mult x I in weight format fmt (BF16,
 * MXFP8 or MXFP4: no alphas to absorb an NVFP4 global scale) at the context's
 * shape, from fp32 weights that depend on fmt and mult only (built once,
 * kept in c). */
shared_model *shared_get(ctx *c, int fmt, int mult);
void shared_free(shared_model *m);
/* Polls instead of cuStreamSynchronize so a cross-rank deadlock is reported
 * with the case name instead of running into the step's timeout.
 * Returns 1 done, 0 timed out; a kernel fault is returned in *fault. */
int wait_streams(const CUstream *s, int n, double timeout_s, CUresult *fault);
void wait_or_die(ctx *c, const CUstream *s, int n);
void run_teardown(run *u);
/* Buffer, weights, pre-dispatched inputs and the reference outputs. */
int run_setup(ctx *c, run *u, int row_index, const scenario *sc, int ctl);
void poison_outputs(ctx *c, const run *u);
/* Launches every rank back to back, each on its own stream, after loading
 * every rank's kernel (a load may wait for kernels already spinning). A
 * refused launch after an accepted one leaves the accepted ranks waiting
 * forever. */
int run_launch(ctx *c, run *u, const CUstream *streams);
/* Fetches y and recv_stats of every rank and compares them with the
 * reference (stats times stats_mult, for graph replays). verbose: print the
 * per-rank line and, on failure, the first differing element. */
int run_check(ctx *c, const run *u, int stats_mult, int verbose, double *worst_out);
void describe(const run *u, char *out, size_t cap);
/* How a case ended: its check passed, its check failed, or it never got to the
 * check (setup or launch refused). */
enum { CASE_BROKEN = -1, CASE_FAILED = 0, CASE_PASSED = 1 };
/* One full case: setup, poison, launch, check. Returns how it ended; *worst
 * gets the largest calc_diff over ranks. */
int run_case(ctx *c, int row_index, const scenario *sc, int ctl, int verbose, double *worst);
/* run_case, then `relaunches` more launches on the same pre-dispatched inputs:
 * each must pass and repeat the first launch's bits (NUMERICS.md: the same
 * inputs give the same output). */
int run_case_relaunched(ctx *c, int row_index, const scenario *sc, int ctl, int verbose,
                        int relaunches, double *worst);

/* tests/gpu/mega_moe/cases.c */
void test_matrix(ctx *c);
/* Eager launch checked against the reference, capture of every rank, 1000
 * replays: y bitwise the eager y, recv_stats 1000 x the counts. */
void test_graph(ctx *c, int row_index, const scenario *sc);
/* "swap-gate-up", ...: a control's name in the output. */
const char *control_name(int ctl);
/* Output must not depend on BLOCK_M beyond fp32 accumulation order: each
 * forced size must pass against the reference; bitwise equality is reported. */
void test_block_m(ctx *c);
void test_graphs(ctx *c);
/* A control passes when the numeric check fails on it. */
void test_controls(ctx *c);
/* Last: a wrong offset may fault or hang the kernels, which ends the context. */
void test_peer_control(ctx *c, const scenario *sc);
void test_real_ranks(ctx *c, int world);
/* Every format row at kGptOss; the context must have been allocated for it. */
void test_gpt_oss(ctx *c);
/* Every row: experts loaded from host memory give the images that the same
 * experts loaded from device memory give, bit for bit. */
void test_weight_images(ctx *c);

/* tests/gpu/mega_moe/invalid.c */
void test_invalid(ctx *c);
/* The shared expert's configs, loads and launches that must be refused. */
void test_invalid_shared(ctx *c);

/* tests/gpu/mega_moe/shared.c */
/* The fused shared expert: kShared on kSharedRows against the reference, its
 * negative controls, its invalid input and a CUDA graph (--quick:
 * kSharedQuick on mxfp8 and mxfp4-a8, and the invalid input). */
void test_shared(ctx *c);

#endif /* MJ_GPU_MEGA_MOE_HARNESS_H */
