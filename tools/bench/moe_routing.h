/* Top-k routing for the MegaMoE benchmark (pure: no device). Deterministic by
 * seed, so every rank, every format row and the PyTorch peer can regenerate
 * or read the same routing. */
#ifndef MJ_TOOLS_BENCH_MOE_ROUTING_H
#define MJ_TOOLS_BENCH_MOE_ROUTING_H

#include <stddef.h>
#include <stdint.h>

typedef enum mj_bench_routing {
    MJ_BENCH_ROUTING_UNIFORM = 0, /* every expert equally likely */
    MJ_BENCH_ROUTING_SKEWED = 1,  /* half of the (token, slot) pairs on 10% of the experts */
} mj_bench_routing;

const char *mj_bench_routing_name(mj_bench_routing r); /* "uniform", "skewed" */
/* 0 and *out for "uniform" or "skewed", -1 otherwise. */
int mj_bench_routing_parse(const char *name, mj_bench_routing *out);

/* How many experts skewed routing makes hot: 10% of them, rounded, at least 1. */
int mj_bench_hot_count(int experts);
/* The hot experts of skewed routing with this seed: mj_bench_hot_count(experts)
 * distinct ids in [0, experts), written to hot. */
void mj_bench_hot_set(int experts, uint64_t seed, int32_t *hot);

/* Routes `tokens` tokens of one part of a batch (a rank's: part = the rank):
 * ids[t * topk + k] are distinct per token, in
 * [0, experts) (topk <= experts), weights in [0.05, 1). Uniform: each token's
 * ids are a uniform draw of topk distinct experts. Skewed: token t puts
 * topk (t + 1) / 2 - topk t / 2 of its slots (so floor(topk tokens / 2) pairs
 * in all) on distinct experts of mj_bench_hot_set(experts, seed) and the
 * rest on distinct others, the slots in random order; when the hot set (or
 * the rest) is too small for that, as close to it as distinct ids allow.
 * Every part of one seed shares its hot set (the skew is the batch's, not a
 * rank's) and draws its own tokens. Returns 0, -1 when out of memory
 * (nothing useful written). */
int mj_bench_route(mj_bench_routing kind, int experts, int topk, int tokens, uint64_t seed,
                   int part, int32_t *ids, float *weights);

#endif
