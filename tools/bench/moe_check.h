/* The MegaMoE benchmark's output checks (pure: no device): each timed
 * configuration's output against the fp64 reference (tests/reference) on a
 * sample of tokens, plus a scan that every element was written and is
 * finite. The references run on a pool of host threads while the GPU times
 * the next configurations. */
#ifndef MJ_TOOLS_BENCH_MOE_CHECK_H
#define MJ_TOOLS_BENCH_MOE_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "heuristics/moe_formats.h"
#include "tools/bench/moe_weights.h"

/* What the benchmark's layers compute besides their shape and format row
 * (`megajit bench mega-moe` --activation, --clamp, --biases, --shared). All
 * zero: swiglu, no clamp, no biases, no shared expert. */
typedef struct mj_bench_moe_variant {
    int activation; /* MJ_ACT_* */
    float clamp;    /* > 0: the swiglu family's clamp; 0: none */
    int biases;     /* random expert biases, per weight class (moe_weights.h) */
    /* A fused shared expert of intermediate size shared x the routed one, in
     * mj_bench_shared_format, with random weights of its own
     * (mj_bench_weights_add_shared); 0: none. */
    int shared;
    /* 1 + its weight format (MJ_FMT_*); 0: mj_moe_shared_format_of(row). */
    int shared_format;
} mj_bench_moe_variant;

/* The weight format of v's shared expert beside row's experts. */
int mj_bench_shared_format(const mj_bench_moe_variant *v, const mj_moe_format_row *row);

/* The output is poisoned with this before the checked launch (a BF16 NaN). */
#define MJ_BENCH_POISON 0xFFFFu
/* Every token is checked up to this many; beyond, MJ_BENCH_CHECK_SAMPLE
 * evenly spaced ones (the first and the last among them): the fp64
 * reference of a large layer is slow on the host. */
#define MJ_BENCH_CHECK_ALL 8
#define MJ_BENCH_CHECK_SAMPLE 4

/* The tokens checked among `total`: their indices in idx (room for
 * MJ_BENCH_CHECK_ALL), their count returned. */
int mj_bench_check_sample(int total, int *idx);

typedef struct mj_bench_check_result {
    int done; /* the reference ran (or the check could not: see message) */
    int ok;
    double calc_diff;
    double bar;                        /* calc_diff must stay below it: mj_bench_check_bar */
    int tokens;                        /* how many were compared with the reference */
    size_t unwritten, nonfinite, past; /* from the scan */
    char message[200];                 /* why it failed; "" when ok */
} mj_bench_check_result;

/* The calc_diff a configuration's output must stay below: 1e-4 when both
 * operands are BF16 (no quantization anywhere), else 1e-3. */
double mj_bench_check_bar(int weight_fmt, int dispatch_fmt);

/* Counts, over y's first `written` elements, those still MJ_BENCH_POISON
 * (unwritten) and the other non-finite ones; over the rest up to `total`,
 * those no longer MJ_BENCH_POISON (written past num_tokens). */
void mj_bench_scan_output(const uint16_t *y, size_t written, size_t total, size_t *unwritten,
                          size_t *nonfinite, size_t *past);

typedef struct mj_bench_check_job mj_bench_check_job;

/* A check of n tokens of one configuration of variant v (its activation,
 * clamp and shared expert, whose weights are w's: v->shared needs
 * mj_bench_weights_add_shared of v->shared x intermediate, or the reference
 * refuses the check; the biases are w's): their BF16 rows x (n x H, before pre-dispatch,
 * which the job applies with the reference quantizer), their global top-k ids
 * and weights (n x K), and the rows y the kernel wrote (n x H). Copies
 * everything; holds a reference to w. out->unwritten, nonfinite and past must
 * already hold the scan. NULL when out of memory. */
mj_bench_check_job *mj_bench_check_job_new(mj_bench_weights *w, const mj_moe_format_row *row,
                                           const mj_bench_moe_variant *v, int hidden,
                                           int intermediate, int topk, int n, const uint16_t *x,
                                           const int32_t *ids, const float *tw, const uint16_t *y,
                                           mj_bench_check_result *out);

typedef struct mj_bench_checker mj_bench_checker;
/* A pool of `threads` host threads (>= 1); NULL when none could start. */
mj_bench_checker *mj_bench_checker_new(int threads);
/* Queues job (owned by the pool from now on). */
void mj_bench_checker_submit(mj_bench_checker *c, mj_bench_check_job *job);
/* Waits for every queued job, stops the threads and frees the pool. */
void mj_bench_checker_finish(mj_bench_checker *c);

#endif
