/*
 * The MegaMoE benchmark's routing (tools/bench/moe_routing.c): distinct ids
 * per token, determinism by seed, and the skewed distribution: exactly half
 * of the (token, slot) pairs on the 10% hot experts; and the files it is
 * handed to the PyTorch peer in (tools/bench/routing_dump.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <cjson/cJSON.h>
#include <stdio.h>

#include "tests/scratch_dir.h"
#include "tools/bench/moe_routing.h"
#include "tools/bench/routing_dump.h"

typedef struct routed {
    int32_t *ids;
    float *w;
} routed;

static routed route(mj_bench_routing kind, int experts, int topk, int tokens, uint64_t seed) {
    routed r = {malloc((size_t)tokens * (size_t)topk * sizeof(int32_t)),
                malloc((size_t)tokens * (size_t)topk * sizeof(float))};
    assert_non_null(r.ids);
    assert_non_null(r.w);
    assert_int_equal(mj_bench_route(kind, experts, topk, tokens, seed, 0, r.ids, r.w), 0);
    return r;
}

static void routed_free(routed *r) {
    free(r->ids);
    free(r->w);
}

/* Every id in range, distinct within its token; every weight in [0.05, 1). */
static void expect_valid(const routed *r, int experts, int topk, int tokens) {
    for (int t = 0; t < tokens; t++)
        for (int k = 0; k < topk; k++) {
            const int32_t e = r->ids[t * topk + k];
            assert_in_range(e, 0, experts - 1);
            for (int j = 0; j < k; j++)
                if (r->ids[t * topk + j] == e) fail_msg("token %d: expert %d twice", t, e);
            const float w = r->w[t * topk + k];
            assert_true(w >= 0.05f && w < 1.0f);
        }
}

static void test_names(void **state) {
    (void)state;
    mj_bench_routing r;
    assert_int_equal(mj_bench_routing_parse("skewed", &r), 0);
    assert_int_equal(r, MJ_BENCH_ROUTING_SKEWED);
    assert_string_equal(mj_bench_routing_name(r), "skewed");
    assert_int_equal(mj_bench_routing_parse("uniform", &r), 0);
    assert_string_equal(mj_bench_routing_name(r), "uniform");
    assert_int_equal(mj_bench_routing_parse("Uniform", &r), -1);
    assert_int_equal(mj_bench_hot_count(256), 26);
    assert_int_equal(mj_bench_hot_count(384), 38);
    assert_int_equal(mj_bench_hot_count(128), 13);
    assert_int_equal(mj_bench_hot_count(5), 1);
    assert_int_equal(mj_bench_hot_count(4), 1);
}

static void test_uniform(void **state) {
    (void)state;
    enum { E = 256, K = 8, T = 10000 };
    routed r = route(MJ_BENCH_ROUTING_UNIFORM, E, K, T, 42);
    expect_valid(&r, E, K, T);
    /* 80000 pairs: 312.5 per expert, sd ~17.6; the seed is fixed, so this
     * bounds the generator, not luck. */
    int count[E] = {0};
    for (int i = 0; i < T * K; i++)
        count[r.ids[i]]++;
    for (int e = 0; e < E; e++)
        if (count[e] < 230 || count[e] > 400) fail_msg("expert %d got %d pairs", e, count[e]);
    routed_free(&r);
}

static void test_deterministic(void **state) {
    (void)state;
    for (int kind = 0; kind < 2; kind++) {
        routed a = route((mj_bench_routing)kind, 128, 4, 64, 7);
        routed b = route((mj_bench_routing)kind, 128, 4, 64, 7);
        routed c = route((mj_bench_routing)kind, 128, 4, 64, 8);
        assert_memory_equal(a.ids, b.ids, 64 * 4 * sizeof(int32_t));
        assert_memory_equal(a.w, b.w, 64 * 4 * sizeof(float));
        assert_memory_not_equal(a.ids, c.ids, 64 * 4 * sizeof(int32_t));
        routed_free(&a);
        routed_free(&b);
        routed_free(&c);
    }
    /* Parts of one seed (ranks) draw their own tokens around one hot set. */
    int32_t p0[64 * 8], p1[64 * 8];
    float w0[64 * 8], w1[64 * 8];
    assert_int_equal(mj_bench_route(MJ_BENCH_ROUTING_SKEWED, 256, 8, 64, 5, 0, p0, w0), 0);
    assert_int_equal(mj_bench_route(MJ_BENCH_ROUTING_SKEWED, 256, 8, 64, 5, 1, p1, w1), 0);
    assert_memory_not_equal(p0, p1, sizeof p0);
    int32_t hot[26];
    mj_bench_hot_set(256, 5, hot);
    int on_hot = 0;
    for (int i = 0; i < 64 * 8; i++)
        for (int h = 0; h < 26; h++)
            on_hot += (p0[i] == hot[h]) + (p1[i] == hot[h]);
    assert_int_equal(on_hot, 64 * 8); /* half of both parts' 1024 pairs */
}

/* Hot pairs per token and in all, for experts E, top-k K, T tokens. */
static void expect_skew(int E, int K, int T, uint64_t seed, int per_token_even, int total) {
    routed r = route(MJ_BENCH_ROUTING_SKEWED, E, K, T, seed);
    expect_valid(&r, E, K, T);
    const int n_hot = mj_bench_hot_count(E);
    int32_t *hot = malloc((size_t)n_hot * sizeof *hot);
    unsigned char *is_hot = calloc((size_t)E, 1);
    assert_non_null(hot);
    assert_non_null(is_hot);
    mj_bench_hot_set(E, seed, hot);
    for (int i = 0; i < n_hot; i++) {
        assert_in_range(hot[i], 0, E - 1);
        if (is_hot[hot[i]]) fail_msg("hot expert %d twice", hot[i]);
        is_hot[hot[i]] = 1;
    }
    int sum = 0, first_slot_hot = 0;
    for (int t = 0; t < T; t++) {
        int h = 0;
        for (int k = 0; k < K; k++)
            h += is_hot[r.ids[t * K + k]];
        if (per_token_even >= 0 && h != per_token_even)
            fail_msg("E %d K %d: token %d has %d hot slots, want %d", E, K, t, h, per_token_even);
        sum += h;
        first_slot_hot += is_hot[r.ids[t * K]];
    }
    if (sum != total) fail_msg("E %d K %d T %d: %d hot pairs, want %d", E, K, T, sum, total);
    /* The hot slots are shuffled among the token's slots. */
    if (per_token_even > 0 && per_token_even < K)
        assert_true(first_slot_hot > 0 && first_slot_hot < T);
    free(hot);
    free(is_hot);
    routed_free(&r);
}

static void test_skewed(void **state) {
    (void)state;
    expect_skew(256, 8, 1000, 1, 4, 4000); /* deepseek-v3: 26 hot experts */
    expect_skew(384, 8, 500, 2, 4, 2000);  /* kimi-k2: 38 */
    expect_skew(128, 4, 777, 3, 2, 1554);  /* gpt-oss-120b: 13 */
    expect_skew(100, 3, 5, 4, -1, 7);      /* odd top-k: 1, 2, 1, 2, 1 = floor(15 / 2) */
    /* A hot set too small for half of a token's slots: all of it, no more. */
    expect_skew(16, 8, 50, 5, 2, 100);
    expect_skew(8, 8, 20, 6, 1, 20);
    /* The hot set depends on the seed alone, not on how many tokens follow:
     * 10 and 1000 tokens of one seed put their hot pairs on the same experts. */
    expect_skew(256, 8, 10, 99, 4, 40);
    expect_skew(256, 8, 1000, 99, 4, 4000);
    /* The cold experts: spread over all of them. */
    routed r = route(MJ_BENCH_ROUTING_SKEWED, 256, 8, 4000, 9);
    int32_t hot[26];
    mj_bench_hot_set(256, 9, hot);
    int count[256] = {0};
    for (int i = 0; i < 4000 * 8; i++)
        count[r.ids[i]]++;
    int cold_seen = 0;
    for (int e = 0; e < 256; e++) {
        int is_hot = 0;
        for (int i = 0; i < 26; i++)
            is_hot |= hot[i] == e;
        if (!is_hot) cold_seen += count[e] > 0;
        /* hot: 16000 / 26 = 615 each; cold: 16000 / 230 = 70 each */
        if (is_hot && (count[e] < 500 || count[e] > 750))
            fail_msg("hot expert %d got %d pairs", e, count[e]);
    }
    assert_int_equal(cold_seen, 230);
    routed_free(&r);
}

static char *slurp(const char *dir, const char *name, size_t *len) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("%s is missing", path);
    char *buf = malloc(1 << 20);
    if (!buf) fail_msg("out of memory");
    *len = fread(buf, 1, (1 << 20) - 1, f);
    buf[*len] = '\0';
    fclose(f);
    return buf;
}

/* Two sets of 2 ranks x 3 tokens: the files hold them in rank order, the
 * index names them; a second configuration appends. */
static void test_dump(void **state) {
    (void)state;
    const mj_bench_moe_shape shape = {"qwen3-235b", 4096, 1536, 128, 8};
    routed sets[2] = {route(MJ_BENCH_ROUTING_SKEWED, 128, 8, 6, 1),
                      route(MJ_BENCH_ROUTING_SKEWED, 128, 8, 6, 2)};
    int32_t *ids[2] = {sets[0].ids, sets[1].ids};
    float *w[2] = {sets[0].w, sets[1].w};
    char dir[128];
    snprintf(dir, sizeof dir, "%s/routing/uniform", scratch_dir); /* parents made too */
    cJSON *configs = cJSON_CreateArray();
    assert_int_equal(
        mj_bench_dump_routing(dir, configs, &shape, MJ_BENCH_ROUTING_SKEWED, 2, 3, 2, ids, w),
        MJ_OK);
    assert_int_equal(
        mj_bench_dump_routing(dir, configs, &shape, MJ_BENCH_ROUTING_SKEWED, 2, 1, 1, ids, w),
        MJ_OK);
    assert_int_equal(mj_bench_dump_index(dir, configs), MJ_OK);
    cJSON_Delete(configs);
    size_t len;
    for (int s = 0; s < 2; s++) {
        char name[64];
        snprintf(name, sizeof name, "qwen3-235b-skewed-r2-t3-s%d.ids", s);
        char *got = slurp(dir, name, &len);
        assert_int_equal(len, 6 * 8 * sizeof(int32_t));
        assert_memory_equal(got, ids[s], len);
        free(got);
        snprintf(name, sizeof name, "qwen3-235b-skewed-r2-t3-s%d.weights", s);
        got = slurp(dir, name, &len);
        assert_int_equal(len, 6 * 8 * sizeof(float));
        assert_memory_equal(got, w[s], len);
        free(got);
    }
    char *text = slurp(dir, "index.json", &len);
    cJSON *index = cJSON_Parse(text);
    free(text);
    assert_non_null(index);
    assert_int_equal(cJSON_GetObjectItem(index, "version")->valueint, 1);
    const cJSON *list = cJSON_GetObjectItem(index, "configs");
    assert_int_equal(cJSON_GetArraySize(list), 2);
    const cJSON *c = cJSON_GetArrayItem(list, 0);
    assert_string_equal(cJSON_GetObjectItem(c, "shape")->valuestring, "qwen3-235b");
    assert_string_equal(cJSON_GetObjectItem(c, "routing")->valuestring, "skewed");
    assert_int_equal(cJSON_GetObjectItem(c, "hidden")->valueint, 4096);
    assert_int_equal(cJSON_GetObjectItem(c, "intermediate")->valueint, 1536);
    assert_int_equal(cJSON_GetObjectItem(c, "experts")->valueint, 128);
    assert_int_equal(cJSON_GetObjectItem(c, "topk")->valueint, 8);
    assert_int_equal(cJSON_GetObjectItem(c, "ranks")->valueint, 2);
    assert_int_equal(cJSON_GetObjectItem(c, "tokens_per_rank")->valueint, 3);
    assert_int_equal(cJSON_GetObjectItem(c, "tokens")->valueint, 6);
    const cJSON *set1 = cJSON_GetArrayItem(cJSON_GetObjectItem(c, "sets"), 1);
    assert_string_equal(cJSON_GetObjectItem(set1, "ids")->valuestring,
                        "qwen3-235b-skewed-r2-t3-s1.ids");
    assert_string_equal(cJSON_GetObjectItem(set1, "weights")->valuestring,
                        "qwen3-235b-skewed-r2-t3-s1.weights");
    cJSON_Delete(index);
    /* A directory that cannot be made is an error naming it. */
    configs = cJSON_CreateArray();
    assert_int_equal(mj_bench_dump_routing("/proc/no/such/dir", configs, &shape,
                                           MJ_BENCH_ROUTING_SKEWED, 2, 3, 1, ids, w),
                     MJ_ERR_IO);
    assert_non_null(strstr(mj_last_error(), "/proc/no/such/dir"));
    cJSON_Delete(configs);
    routed_free(&sets[0]);
    routed_free(&sets[1]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),         cmocka_unit_test(test_uniform),
        cmocka_unit_test(test_deterministic), cmocka_unit_test(test_skewed),
        cmocka_unit_test(test_dump),
    };
    return cmocka_run_group_tests(tests, scratch_dir_create, scratch_dir_remove);
}
