/* The MegaMoE benchmark: one (shape, format row, routing) on one buffer and
 * one set of weights, every token count of a list, the way a server runs
 * (the buffer made once for the largest count). tools/megajit/bench.c runs
 * it over the shapes and rows the command line asks for. */
#ifndef MJ_TOOLS_BENCH_MEGA_MOE_H
#define MJ_TOOLS_BENCH_MEGA_MOE_H

#include <cjson/cJSON.h>

#include "heuristics/moe_formats.h"
#include "include/megajit.h"
#include "tools/bench/ceilings.h"
#include "tools/bench/host_cost.h"
#include "tools/bench/moe_check.h"
#include "tools/bench/moe_floor.h"
#include "tools/bench/moe_phases.h"
#include "tools/bench/moe_routing.h"
#include "tools/bench/moe_shapes.h"

/* One token count. */
typedef struct mj_bench_moe_point {
    int tokens;       /* per rank */
    int block_m;      /* the tile the heuristics picked */
    int sets;         /* input sets rotated over the steps */
    int iters;        /* timed steps of each pass */
    double us;        /* median MegaMoE launch: every rank's, after its pre-dispatch is done */
    double pd_moe_us; /* median pre-dispatch + MegaMoE back to back */
    /* The SM clock right after each pass (mj_bench_sm_clock_mhz): below the
     * card's full clock, the pass ran at its power cap. */
    double us_sm_clock_mhz, pd_moe_sm_clock_mhz;
    double
        experts_hit; /* distinct experts the routing hits on this device's ranks (mean over sets) */
    double bytes;    /* their weights and scales + this device's tokens in and out + shared_bytes */
    double flops;    /* 2 x 3 H I x the (token, slot) pairs this device's experts get, + 2 x 3 H I_s
                      * x this device's tokens with a shared expert */
    double shared_bytes; /* the shared expert's weights and scales, once per local rank; 0: none */
    mj_bench_floor floor;
    /* The bulk-read ceiling kernel's time to read `bytes` in one launch
     * (mj_bench_stream_us; 0: not measured, bytes past 4 GiB) */
    double stream_us;
    mj_bench_check_result check; /* written by the checker pool: read after it finishes */
    int traced;                  /* phases holds one traced launch (options.phases) */
    mj_bench_moe_phases phases;
} mj_bench_moe_point;

typedef struct mj_bench_mega_moe_options {
    const mj_bench_moe_shape *shape;
    const mj_moe_format_row *row;
    const int *tokens; /* per rank, num_tokens of them, each <= max_tokens */
    int num_tokens;
    int max_tokens; /* the buffer's max_tokens_per_rank */
    mj_bench_routing routing;
    int iters; /* timed steps of each pass; 0 = as many as fit ~0.4 s, 3..200 */
    /* nccl_comm NULL: num_ranks ranks emulated on this GPU, the MegaMoE
     * family's SM count divided among them for the run. Else an ncclComm_t of
     * num_ranks ranks: this process is one, and every call is collective. */
    int num_ranks;
    void *nccl_comm;
    const mj_bench_ceilings *ceilings; /* the floor's bandwidth and tensor rate */
    mj_bench_checker *checker;         /* runs each point's check */
    /* Non-NULL: each point's routing is written there (tools/bench/routing_dump.h)
     * and its entry appended to dump_configs. */
    const char *dump_dir;
    cJSON *dump_configs;
    /* Non-NULL: the host cost of a warm call is measured on the first point
     * (one rank on this device only). */
    mj_bench_host_cost *host_cost;
    /* Nonzero: after the timed passes, one more launch of rank 0 on set 0
     * writes phase stamps (mj_moe_args.trace) into point.phases. */
    int phases;
    mj_bench_moe_variant variant; /* activation, clamp, biases, shared expert */
} mj_bench_mega_moe_options;

/* The layer the benchmark runs for shape s in format row `row` and variant v
 * as rank `rank` of `ranks`, on buffers of max_tokens per rank. */
mj_moe_config mj_bench_moe_layer(const mj_bench_moe_shape *s, const mj_moe_format_row *row,
                                 const mj_bench_moe_variant *v, int ranks, int rank,
                                 int max_tokens);

/* Fills points[0..num_tokens) (their checks complete when the checker
 * finishes) and *num_sms, the SM count each rank ran on. The weights are
 * random: MJ_BENCH_WEIGHT_CLASSES projections over all experts
 * (tools/bench/moe_weights.h), loaded once. */
mj_status mj_bench_mega_moe(mj_runtime *rt, const mj_bench_mega_moe_options *o,
                            mj_bench_moe_point *points, int *num_sms);

#endif
