#include "tools/bench/moe_routing.h"

#include <stdlib.h>
#include <string.h>

#include "tools/bench/bench.h"

/* Independent streams of one seed: the hot set must not depend on T. */
enum { STREAM_HOT = 1, STREAM_TOKENS = 2 };

const char *mj_bench_routing_name(mj_bench_routing r) {
    return r == MJ_BENCH_ROUTING_SKEWED ? "skewed" : "uniform";
}

int mj_bench_routing_parse(const char *name, mj_bench_routing *out) {
    if (strcmp(name, "uniform") == 0)
        *out = MJ_BENCH_ROUTING_UNIFORM;
    else if (strcmp(name, "skewed") == 0)
        *out = MJ_BENCH_ROUTING_SKEWED;
    else
        return -1;
    return 0;
}

int mj_bench_hot_count(int experts) {
    int n = (experts + 5) / 10;
    return n < 1 ? 1 : n;
}

static int below(uint64_t *rng, int n) {
    return (int)(mj_bench_rng(rng) % (uint64_t)n);
}

void mj_bench_hot_set(int experts, uint64_t seed, int32_t *hot) {
    uint64_t rng = mj_bench_seed(seed, STREAM_HOT);
    const int n = mj_bench_hot_count(experts);
    for (int i = 0; i < n; i++) {
        int32_t e;
        int dup;
        do {
            e = (int32_t)below(&rng, experts);
            dup = 0;
            for (int j = 0; j < i; j++)
                dup |= hot[j] == e;
        } while (dup);
        hot[i] = e;
    }
}

/* A draw from pool (n ids, or [0, experts) when pool is NULL) that is not in
 * taken[0..k) and, for the whole range, not marked in skip. */
static int32_t draw_distinct(uint64_t *rng, const int32_t *pool, int n, const unsigned char *skip,
                             const int32_t *taken, int k) {
    for (;;) {
        const int32_t e = pool ? pool[below(rng, n)] : (int32_t)below(rng, n);
        if (skip && skip[e]) continue;
        int dup = 0;
        for (int j = 0; j < k; j++)
            dup |= taken[j] == e;
        if (!dup) return e;
    }
}

int mj_bench_route(mj_bench_routing kind, int experts, int topk, int tokens, uint64_t seed,
                   int part, int32_t *ids, float *weights) {
    const int skewed = kind == MJ_BENCH_ROUTING_SKEWED;
    const int n_hot = mj_bench_hot_count(experts);
    int32_t *hot = skewed ? malloc((size_t)n_hot * sizeof *hot) : NULL;
    unsigned char *is_hot = skewed ? calloc((size_t)experts, 1) : NULL;
    if (skewed && (!hot || !is_hot)) {
        free(hot);
        free(is_hot);
        return -1;
    }
    if (skewed) {
        mj_bench_hot_set(experts, seed, hot);
        for (int i = 0; i < n_hot; i++)
            is_hot[hot[i]] = 1;
    }
    uint64_t rng = mj_bench_seed(mj_bench_seed(seed, STREAM_TOKENS), (uint64_t)part);
    for (int t = 0; t < tokens; t++) {
        int32_t *id = ids + (size_t)t * (size_t)topk;
        int h = 0;
        if (skewed) {
            /* Half of this token's slots, alternating the rounding of odd topk. */
            h = (int)(((long long)topk * (t + 1)) / 2 - ((long long)topk * t) / 2);
            if (h > n_hot) h = n_hot;
            if (topk - h > experts - n_hot) h = topk - (experts - n_hot);
        }
        for (int k = 0; k < topk; k++)
            id[k] = k < h ? draw_distinct(&rng, hot, n_hot, NULL, id, k)
                          : draw_distinct(&rng, NULL, experts, is_hot, id, k);
        /* Hot slots first would put them in the same positions every token. */
        for (int k = topk - 1; k > 0; k--) {
            const int j = below(&rng, k + 1);
            const int32_t v = id[k];
            id[k] = id[j];
            id[j] = v;
        }
        for (int k = 0; k < topk; k++)
            weights[(size_t)t * (size_t)topk + (size_t)k] =
                0.05f + 0.95f * (float)(mj_bench_rng(&rng) >> 40) / 16777216.0f;
    }
    free(hot);
    free(is_hot);
    return 0;
}
