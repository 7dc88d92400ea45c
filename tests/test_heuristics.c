/*
 * The MegaMoE format table and launch heuristics (heuristics/). Expected
 * values are worked out by hand from the rules in the headers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "heuristics/mega_moe_config.h"
#include "heuristics/moe_formats.h"
#include "templates/layout/moe_layout.h"

static void test_format_table_rows(void **state) {
    (void)state;
    static const struct {
        const char *name;
        int weight, dispatch, l2, x_scales;
    } want[] = {
        {"bf16", MJ_FMT_BF16, MJ_FMT_BF16, MJ_FMT_BF16, 0},
        {"mxfp8", MJ_FMT_MXFP8, MJ_FMT_MXFP8, MJ_FMT_MXFP8, 0},
        {"mxfp4-a8", MJ_FMT_MXFP4, MJ_FMT_MXFP8, MJ_FMT_MXFP8, 0},
        {"mxfp4-a16", MJ_FMT_MXFP4, MJ_FMT_BF16, MJ_FMT_BF16, 0},
        {"nvfp4", MJ_FMT_NVFP4, MJ_FMT_NVFP4, MJ_FMT_NVFP4, 1},
        {"nvfp4-a16", MJ_FMT_NVFP4, MJ_FMT_BF16, MJ_FMT_BF16, 0},
    };
    int n = (int)(sizeof want / sizeof want[0]);
    assert_int_equal(mj_moe_format_count(), n);
    for (int i = 0; i < n; i++) {
        const mj_moe_format_row *byname = mj_moe_format_by_name(want[i].name);
        const mj_moe_format_row *bypair = mj_moe_format_find(want[i].weight, want[i].dispatch);
        assert_non_null(byname);
        assert_ptr_equal(byname, bypair);
        assert_ptr_equal(byname, mj_moe_format_at(i));
        assert_string_equal(byname->name, want[i].name);
        assert_int_equal(byname->weight_fmt, want[i].weight);
        assert_int_equal(byname->dispatch_fmt, want[i].dispatch);
        assert_int_equal(byname->l2_input_fmt, want[i].l2);
        assert_int_equal(byname->uses_x_scales, want[i].x_scales);
    }
}

static void test_format_table_rejects(void **state) {
    (void)state;
    assert_null(mj_moe_format_at(-1));
    assert_null(mj_moe_format_at(mj_moe_format_count()));
    assert_null(mj_moe_format_by_name(NULL));
    assert_null(mj_moe_format_by_name(""));
    assert_null(mj_moe_format_by_name("BF16"));
    assert_null(mj_moe_format_by_name("mxfp4"));
    /* pairs that are not rows */
    assert_null(mj_moe_format_find(MJ_FMT_BF16, MJ_FMT_MXFP8));
    assert_null(mj_moe_format_find(MJ_FMT_MXFP8, MJ_FMT_BF16));
    assert_null(mj_moe_format_find(MJ_FMT_MXFP4, MJ_FMT_NVFP4));
    assert_null(mj_moe_format_find(MJ_FMT_NVFP4, MJ_FMT_MXFP8));
    assert_null(mj_moe_format_find(MJ_FMT_MXFP4, MJ_FMT_MXFP4));
    assert_null(mj_moe_format_find(4, MJ_FMT_BF16));
    assert_null(mj_moe_format_find(-1, -1));
}

static void test_format_names_unique(void **state) {
    (void)state;
    int n = mj_moe_format_count();
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) {
            const mj_moe_format_row *a = mj_moe_format_at(i), *b = mj_moe_format_at(j);
            assert_true(strcmp(a->name, b->name) != 0);
            assert_false(a->weight_fmt == b->weight_fmt && a->dispatch_fmt == b->dispatch_fmt);
        }
}

/* Per-token scales exist exactly where tokens are dispatched as NVFP4. */
static void test_x_scales_follow_dispatch(void **state) {
    (void)state;
    for (int i = 0; i < mj_moe_format_count(); i++) {
        const mj_moe_format_row *r = mj_moe_format_at(i);
        assert_int_equal(r->uses_x_scales, r->dispatch_fmt == MJ_FMT_NVFP4);
    }
}

static void test_activations(void **state) {
    (void)state;
    for (int i = 0; i < mj_moe_format_count(); i++) {
        const mj_moe_format_row *r = mj_moe_format_at(i);
        assert_true(mj_moe_activation_allowed(r, MJ_ACT_SWIGLU));
        assert_true(mj_moe_activation_allowed(r, MJ_ACT_SWIGLUOAI));
        assert_true(mj_moe_activation_allowed(r, MJ_ACT_SITU));
        assert_false(mj_moe_activation_allowed(r, -1));
        assert_false(mj_moe_activation_allowed(r, MJ_ACT_COUNT));
        assert_false(mj_moe_activation_allowed(r, 31));
    }
    assert_false(mj_moe_activation_allowed(NULL, MJ_ACT_SWIGLU));
    mj_moe_format_row only_situ = *mj_moe_format_at(0);
    only_situ.activation_mask = MJ_ACT_BIT(MJ_ACT_SITU);
    assert_false(mj_moe_activation_allowed(&only_situ, MJ_ACT_SWIGLU));
    assert_true(mj_moe_activation_allowed(&only_situ, MJ_ACT_SITU));

    assert_true(mj_moe_activation_has_clamp(MJ_ACT_SWIGLU));
    assert_true(mj_moe_activation_has_clamp(MJ_ACT_SWIGLUOAI));
    assert_false(mj_moe_activation_has_clamp(MJ_ACT_SITU));
    assert_false(mj_moe_activation_has_clamp(-1));
    assert_false(mj_moe_activation_has_clamp(MJ_ACT_COUNT));

    assert_string_equal(mj_moe_activation_name(MJ_ACT_SWIGLU), "swiglu");
    assert_string_equal(mj_moe_activation_name(MJ_ACT_SWIGLUOAI), "swigluoai");
    assert_string_equal(mj_moe_activation_name(MJ_ACT_SITU), "situ");
    assert_null(mj_moe_activation_name(MJ_ACT_COUNT));
    for (int act = 0; act < MJ_ACT_COUNT; act++)
        assert_int_equal(mj_moe_activation_by_name(mj_moe_activation_name(act)), act);
    assert_int_equal(mj_moe_activation_by_name("relu"), -1);
    assert_int_equal(mj_moe_activation_by_name("SwiGLU"), -1);
    assert_int_equal(mj_moe_activation_by_name(NULL), -1);
    assert_null(mj_moe_activation_name(-1));
}

static void test_block_m_values(void **state) {
    (void)state;
    /* mean = T*R*K/E; pick the first candidate >= mean + sqrt(mean) */
    assert_int_equal(mj_moe_block_m(1, 8, 256, 8), 8);      /* 0.25 + 0.5 */
    assert_int_equal(mj_moe_block_m(0, 8, 256, 8), 8);      /* no tokens */
    assert_int_equal(mj_moe_block_m(4096, 8, 256, 8), 160); /* 1024 + 32 > 160: capped */
    assert_int_equal(mj_moe_block_m(16, 8, 256, 8), 8);     /* 4 + 2 = 6 */
    assert_int_equal(mj_moe_block_m(20, 8, 256, 8), 8);     /* 5 + 2.236 = 7.24 */
    assert_int_equal(mj_moe_block_m(24, 8, 256, 8), 16);    /* 6 + 2.449 = 8.45 */
    assert_int_equal(mj_moe_block_m(36, 8, 256, 8), 16);    /* 9 + 3 = 12 */
    assert_int_equal(mj_moe_block_m(64, 8, 256, 8), 32);    /* 16 + 4 = 20 */
    assert_int_equal(mj_moe_block_m(128, 8, 256, 8), 64);   /* 32 + 5.66 = 37.7 */
    assert_int_equal(mj_moe_block_m(256, 8, 256, 8), 128);  /* 64 + 8 = 72 */
    assert_int_equal(mj_moe_block_m(448, 8, 256, 8), 128);  /* 112 + 10.58 = 122.6 */
    assert_int_equal(mj_moe_block_m(480, 8, 256, 8), 160);  /* 120 + 10.95 = 130.95 */
    assert_int_equal(mj_moe_block_m(572, 8, 256, 8), 160);  /* 143 + 11.96 = 154.96 */
    assert_int_equal(mj_moe_block_m(600, 8, 256, 8), 160);  /* 150 + 12.25 > 160: capped */
    assert_int_equal(mj_moe_block_m(2, 1, 2, 1), 8);        /* mean 1: 1 + 1 = 2 */
    assert_int_equal(mj_moe_block_m(64, 1, 1, 1), 128);     /* 64 + 8 = 72 */
    assert_int_equal(mj_moe_block_m(49, 1, 1, 1), 64);      /* 49 + 7 = 56 */
    /* 12 + 3.46 = 15.46 and 13 + 3.61 = 16.61 straddle 16 */
    assert_int_equal(mj_moe_block_m(12, 1, 1, 1), 16);
    assert_int_equal(mj_moe_block_m(13, 1, 1, 1), 32);
}

static void test_block_m_monotone(void **state) {
    (void)state;
    static const int shapes[][3] = {{8, 256, 8}, {1, 8, 2}, {4, 64, 6}, {72, 288, 8}, {2, 2, 1}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int prev = 0;
        for (int t = 0; t <= 20000; t++) {
            int bm = mj_moe_block_m(t, shapes[s][0], shapes[s][1], shapes[s][2]);
            assert_true(bm >= prev);
            assert_true(bm == 8 || bm == 16 || bm == 32 || bm == 64 || bm == 128 || bm == 160);
            prev = bm;
        }
        assert_int_equal(prev, 160);
    }
}

static void test_block_m_invalid(void **state) {
    (void)state;
    assert_int_equal(mj_moe_block_m(-1, 8, 256, 8), -1);
    assert_int_equal(mj_moe_block_m(1, 0, 256, 8), -1);
    assert_int_equal(mj_moe_block_m(1, MJ_MAX_RANKS + 1, 73 * 2, 8), -1);
    assert_int_equal(mj_moe_block_m(1, 8, 0, 8), -1);
    assert_int_equal(mj_moe_block_m(1, 8, 4, 1), -1);   /* fewer experts than ranks */
    assert_int_equal(mj_moe_block_m(1, 8, 100, 8), -1); /* not a multiple of ranks */
    assert_int_equal(mj_moe_block_m(1, 8, 256, 0), -1);
    assert_int_equal(mj_moe_block_m(1, 1, 4, 5), -1); /* topk > experts */
    assert_int_equal(mj_moe_block_m(1, MJ_MAX_RANKS, MJ_MAX_RANKS, 1), 8);
}

/* Pool capacity: every pair of every rank plus a partial tile per local expert
 * at the largest tile, and the tiles any tile size can need fit in it. */
static void test_pool_capacity(void **state) {
    (void)state;
    /* 8 ranks * 128 tokens * 8 slots = 8192, + 32 local experts * 160 */
    assert_int_equal(mj_moe_pool_rows(256, 8, 8, 128, 0), 8192 + 32 * 160);
    /* a shared expert adds every own token and one partial tile */
    assert_int_equal(mj_moe_pool_rows(256, 8, 8, 128, 1), 8192 + 32 * 160 + 128 + 160);
    static const int bms[] = {8, 16, 32, 64, 128, 160};
    for (int i = 0; i < 6; i++) {
        /* worst case: every expert holds one pair more than whole tiles */
        mj_u64 rows = 8192, tiles = (rows - 32) / (mj_u64)bms[i] + 32;
        assert_true(tiles <= mj_moe_pool_tiles(256, 8, 8, 128, 0, bms[i]));
        /* ... and the shared expert's 128 rows one more than whole tiles */
        mj_u64 shared_tiles = 128 / (mj_u64)bms[i] + 1;
        assert_true(tiles + shared_tiles <= mj_moe_pool_tiles(256, 8, 8, 128, 1, bms[i]));
    }
}

static mj_moe_problem problem(int tokens) {
    mj_moe_problem p = {tokens, 8, 256, 8, 7168, 2048, 132};
    return p;
}

/* mj_moe_stage_k of a layer: `local` experts on each of 8 ranks, no shared expert. */
static int stage_k_of(int hidden, int inter, int local, int shared, const char *row) {
    mj_moe_problem p = {0, 8, 8 * local, 8, hidden, inter, 132, shared};
    return mj_moe_stage_k(&p, row ? mj_moe_format_by_name(row) : NULL);
}

static void test_stage_k(void **state) {
    (void)state;
    /* four 64-row weight blocks and a token tile (128 BF16 tokens) each
     * within 32 KB: FP4 weights 128; BF16 64; MXFP8 128, a 65 KB stage of a
     * full tile, while two such stages fit beside the routing tables */
    assert_int_equal(stage_k_of(7168, 2048, 32, 0, "mxfp4-a8"), 128);
    assert_int_equal(stage_k_of(7168, 2048, 32, 0, "mxfp4-a16"), 128);
    assert_int_equal(stage_k_of(7168, 2048, 32, 0, "nvfp4"), 128);
    assert_int_equal(stage_k_of(7168, 2048, 32, 0, "mxfp8"), 128);
    assert_int_equal(stage_k_of(7168, 2048, 256, 1, "mxfp8"), 128);
    assert_int_equal(stage_k_of(7168, 2048, 32, 0, "bf16"), 64);
    /* past that, stages of a full tile within 52 KB: MXFP8 64 (two 65 KB
     * stages, the epilogue and the tables of 3130 routes over 8 ranks fit,
     * of 3131 not; a shared expert is one more route) */
    assert_int_equal(stage_k_of(7168, 2048, 3130, 0, "mxfp8"), 128);
    assert_int_equal(stage_k_of(7168, 2048, 3129, 1, "mxfp8"), 128);
    assert_int_equal(stage_k_of(7168, 2048, 3131, 0, "mxfp8"), 64);
    assert_int_equal(stage_k_of(7168, 2048, 3130, 1, "mxfp8"), 64);
    assert_int_equal(stage_k_of(7168, 2048, 4096, 0, "mxfp8"), 64);
    assert_int_equal(stage_k_of(7168, 2048, 4096, 1, "mxfp8"), 64);
    assert_int_equal(stage_k_of(7168, 2048, 4096, 0, "nvfp4"), 128);
    /* gpt-oss: 2880 = 64 * 45; the largest multiple of 64 dividing it within
     * 32 KB (128 does not divide it) */
    assert_int_equal(stage_k_of(2880, 2880, 128, 0, "mxfp4-a8"), 64);
    assert_int_equal(stage_k_of(2880, 2880, 128, 0, "mxfp8"), 64);
    assert_int_equal(stage_k_of(4096, 1536, 16, 0, "mxfp4-a8"), 128);
    assert_int_equal(stage_k_of(64, 128, 1, 0, "bf16"), 64);
    assert_int_equal(stage_k_of(32, 128, 1, 0, "bf16"), 0);
    assert_int_equal(stage_k_of(7168, 2048, 32, 0, NULL), 0);
    mj_moe_problem bad = {0, 3, 8, 8, 7168, 2048, 132, 0}; /* experts not a multiple of ranks */
    assert_int_equal(mj_moe_stage_k(&bad, mj_moe_format_by_name("bf16")), 0);
    assert_int_equal(mj_moe_stage_k(NULL, mj_moe_format_by_name("bf16")), 0);
}

/* p's heuristic tile (T = 4096 on DeepSeek-V3) stops at 128, and 160 is refused. */
static void expect_capped_at_128(const mj_moe_problem *p, const mj_moe_format_row *row) {
    mj_moe_kernel_config c;
    assert_int_equal(mj_moe_problem_max_block_m(p, row), 128);
    assert_int_equal(mj_moe_pick_block_m(p, row), 128);
    assert_int_equal(mj_moe_kernel_config_for(p, row, 0, &c), 0);
    assert_int_equal(c.block_m, 128);
    assert_int_equal(mj_moe_kernel_config_for(p, row, 160, &c), -1);
}

static void test_config_values(void **state) {
    (void)state;
    mj_moe_kernel_config c;
    mj_moe_problem p = problem(1);
    /* decode, mxfp4-a8: 8 tokens a tile; stage = 4 * (4 KB + 256) + 8 * 128 * 2 = 19456;
     * the deepest ring, 8 stages, + epilogue 2 * 8 * 288 + tables fit */
    assert_int_equal(mj_moe_kernel_config_for(&p, mj_moe_format_by_name("mxfp4-a8"), 0, &c), 0);
    assert_int_equal(c.block_m, 8);
    assert_int_equal(c.stage_k, 128);
    assert_int_equal(c.stages, 8);
    assert_true(c.smem_bytes <= 232448);
    /* prefill: BF16 weights in 128-token tiles: 32 KB weights + 16 KB tokens a stage */
    p = problem(4096);
    assert_int_equal(mj_moe_kernel_config_for(&p, mj_moe_format_by_name("bf16"), 0, &c), 0);
    assert_int_equal(c.block_m, 128);
    assert_int_equal(c.stage_k, 64);
    assert_int_equal(c.stages, 3);
    /* E2M1 weights in 160-token tiles: 40 KB tokens a stage, two stages */
    assert_int_equal(mj_moe_kernel_config_for(&p, mj_moe_format_by_name("mxfp4-a16"), 0, &c), 0);
    assert_int_equal(c.block_m, 160);
    assert_int_equal(c.stages, 2);
    assert_int_equal(mj_moe_kernel_config_for(&p, mj_moe_format_by_name("mxfp4-a8"), 0, &c), 0);
    assert_int_equal(c.block_m, 160);
    assert_int_equal(mj_moe_kernel_config_for(&p, mj_moe_format_by_name("nvfp4-a16"), 0, &c), 0);
    assert_int_equal(c.block_m, 160);
    assert_int_equal(mj_moe_kernel_config_for(&p, mj_moe_format_by_name("nvfp4"), 0, &c), 0);
    assert_int_equal(c.block_m, 160);
    /* MXFP8 weights stop at 128 */
    assert_int_equal(mj_moe_kernel_config_for(&p, mj_moe_format_by_name("mxfp8"), 0, &c), 0);
    assert_int_equal(c.block_m, 128);
    /* a forced tile size */
    assert_int_equal(mj_moe_kernel_config_for(&p, mj_moe_format_by_name("bf16"), 16, &c), 0);
    assert_int_equal(c.block_m, 16);
    assert_int_equal(mj_moe_kernel_config_for(&p, mj_moe_format_by_name("mxfp8"), 160, &c), -1);
    assert_int_equal(mj_moe_kernel_config_for(&p, mj_moe_format_by_name("bf16"), 12, &c), -1);
    /* beside a fused shared expert the heuristic stops at 128, and 160 is
     * refused; so with mxfp4-a8's expert biases (an MXFP8 GEMM 2 input), while
     * mxfp4-a16's biases keep 160 */
    const mj_moe_format_row *a16 = mj_moe_format_by_name("mxfp4-a16");
    mj_moe_problem shared = p, biased = p;
    shared.shared_expert = 1;
    biased.expert_biases = 1;
    expect_capped_at_128(&shared, a16);
    expect_capped_at_128(&biased, mj_moe_format_by_name("mxfp4-a8"));
    assert_int_equal(mj_moe_problem_max_block_m(&biased, a16), 160);
    /* 4096 experts on one rank: 160-token tiles' ring does not fit beside the
     * routing tables, so the heuristic takes the largest smaller tile */
    mj_moe_problem many = {65536, 1, 4096, 8, 7168, 2048, 132};
    assert_int_equal(mj_moe_block_m(65536, 1, 4096, 8), 160);
    assert_int_equal(mj_moe_kernel_config_for(&many, a16, 0, &c), 0);
    assert_int_equal(c.block_m, 128);
    assert_int_equal(mj_moe_kernel_config_for(&many, a16, 160, &c), -1);
    /* gpt-oss shape runs natively */
    mj_moe_problem odd = {64, 1, 128, 4, 2880, 2880, 132};
    assert_int_equal(mj_moe_kernel_config_for(&odd, mj_moe_format_by_name("mxfp4-a8"), 0, &c), 0);
    assert_int_equal(c.stage_k, 64);
}

/* Two CTAs an SM: E2M1 weights in stages of K 64 and tiles of at most 16
 * tokens, each CTA in half the SM's shared memory; one CTA otherwise, where
 * GEMM 1 quantizes MXFP8, beside a shared expert, in launches of fewer than
 * two tasks an SM, and where other ranks share the GPU. */
static void test_config_two_ctas(void **state) {
    (void)state;
    mj_moe_kernel_config c;
    const char *e2m1[] = {"mxfp4-a16", "nvfp4", "nvfp4-a16"};
    for (int i = 0; i < 3; i++) {
        const mj_moe_format_row *row = mj_moe_format_by_name(e2m1[i]);
        mj_moe_problem gpt = {64, 1, 128, 4, 2880, 2880, 132};
        assert_int_equal(mj_moe_kernel_config_for(&gpt, row, 0, &c), 0);
        assert_int_equal(c.block_m, 8);
        assert_int_equal(c.ctas_per_sm, 2);
        assert_true(c.stages >= 4);
        assert_true(2 * (c.smem_bytes + 1024) <= 233472);
        assert_int_equal(mj_moe_kernel_config_for(&gpt, row, 16, &c), 0);
        assert_int_equal(c.ctas_per_sm, 2);
        assert_int_equal(mj_moe_kernel_config_for(&gpt, row, 32, &c), 0);
        assert_int_equal(c.ctas_per_sm, 1);
        /* one token hits 4 experts: 4 x (23 + 12) tasks, fewer than two an SM */
        mj_moe_problem one = gpt;
        one.num_tokens = 1;
        assert_int_equal(mj_moe_kernel_config_for(&one, row, 0, &c), 0);
        assert_int_equal(c.block_m, 8);
        assert_int_equal(c.ctas_per_sm, 1);
        one.num_tokens = 8;
        assert_int_equal(mj_moe_kernel_config_for(&one, row, 0, &c), 0);
        assert_int_equal(c.ctas_per_sm, 2);
        mj_moe_problem shared = gpt, shares = gpt, biased = gpt;
        shared.shared_expert = 1;
        shares.shares_device = 1;
        biased.expert_biases = 1;
        assert_int_equal(mj_moe_kernel_config_for(&biased, row, 8, &c), 0);
        assert_int_equal(c.ctas_per_sm, 2);
        assert_int_equal(mj_moe_kernel_config_for(&biased, row, 16, &c), 0);
        assert_int_equal(c.ctas_per_sm, 1);
        assert_int_equal(mj_moe_kernel_config_for(&shared, row, 0, &c), 0);
        assert_int_equal(c.ctas_per_sm, 1);
        assert_int_equal(mj_moe_kernel_config_for(&shares, row, 0, &c), 0);
        assert_int_equal(c.ctas_per_sm, 1);
        assert_int_equal(c.stages, 8);
        /* stages of K 128 keep one */
        mj_moe_problem dsv3 = problem(1);
        assert_int_equal(mj_moe_kernel_config_for(&dsv3, row, 0, &c), 0);
        assert_int_equal(c.block_m, 8);
        assert_int_equal(c.ctas_per_sm, 1);
    }
    /* test_mega_moe's one-rank gpt-oss case (8 experts, 16 tokens, about 280
     * tasks) runs the two-CTA kernels: it must keep picking them */
    mj_moe_problem gpu_case = {16, 1, 8, 4, 2880, 2880, 132};
    assert_int_equal(mj_moe_kernel_config_for(&gpu_case, mj_moe_format_by_name("nvfp4"), 0, &c), 0);
    assert_int_equal(c.block_m, 16);
    assert_int_equal(c.ctas_per_sm, 2);
    /* and its 8-token case with expert biases (gpt-oss's own) too */
    gpu_case.expert_biases = 1;
    assert_int_equal(mj_moe_kernel_config_for(&gpu_case, mj_moe_format_by_name("nvfp4"), 8, &c), 0);
    assert_int_equal(c.ctas_per_sm, 2);
    const char *one[] = {"mxfp4-a8", "mxfp8", "bf16"};
    for (int i = 0; i < 3; i++) {
        mj_moe_problem gpt = {64, 1, 128, 4, 2880, 2880, 132};
        assert_int_equal(mj_moe_kernel_config_for(&gpt, mj_moe_format_by_name(one[i]), 0, &c), 0);
        assert_int_equal(c.ctas_per_sm, 1);
    }
}

/* Every row, every token count: a sane, deterministic config. */
static void test_config_all_rows(void **state) {
    (void)state;
    for (int i = 0; i < mj_moe_format_count(); i++) {
        const mj_moe_format_row *r = mj_moe_format_at(i);
        for (int t = 0; t <= 8192; t += 37) {
            mj_moe_problem p = problem(t);
            mj_moe_kernel_config a, b;
            assert_int_equal(mj_moe_kernel_config_for(&p, r, 0, &a), 0);
            assert_int_equal(mj_moe_kernel_config_for(&p, r, 0, &b), 0);
            assert_memory_equal(&a, &b, sizeof a);
            int want = mj_moe_block_m(t, 8, 256, 8);
            assert_int_equal(a.block_m,
                             want < mj_moe_max_block_m(r) ? want : mj_moe_max_block_m(r));
            assert_int_equal(a.stage_k, mj_moe_stage_k(&p, r));
            assert_true(a.stages >= 2 && a.stages <= 8);
            assert_true(a.smem_bytes <= 232448);
            assert_int_equal(a.ctas_per_sm, 1); /* stages of K 128 here */
            /* the deepest ring that fits */
            if (a.stages < 8)
                assert_true(mj_moe_smem_bytes(7168, 2048, r->weight_fmt, a.stage_k, a.block_m,
                                              a.stages + 1, 256 / 8, 8) > 232448);
        }
    }
}

static void test_config_invalid(void **state) {
    (void)state;
    const mj_moe_format_row *bf16 = mj_moe_format_by_name("bf16");
    mj_moe_kernel_config c;
    memset(&c, 0x5a, sizeof c);
    mj_moe_kernel_config poison = c;
    mj_moe_problem p = problem(1);
    assert_int_equal(mj_moe_kernel_config_for(NULL, bf16, 0, &c), -1);
    assert_int_equal(mj_moe_kernel_config_for(&p, NULL, 0, &c), -1);
    assert_int_equal(mj_moe_kernel_config_for(&p, bf16, 0, NULL), -1);
    mj_moe_problem bad[] = {
        {-1, 8, 256, 8, 7168, 2048, 132}, {1, 0, 256, 8, 7168, 2048, 132},
        {1, 8, 255, 8, 7168, 2048, 132},  {1, 8, 256, 0, 7168, 2048, 132},
        {1, 8, 256, 8, 7200, 2048, 132},  {1, 8, 256, 8, 0, 2048, 132},
        {1, 8, 256, 8, 7168, 2016, 132},  {1, 8, 256, 8, 7168, -64, 132},
        {1, 8, 256, 8, 7168, 2048, 0},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        /* both with the heuristic's BLOCK_M and with a forced one */
        assert_int_equal(mj_moe_kernel_config_for(&bad[i], bf16, 0, &c), -1);
        assert_int_equal(mj_moe_kernel_config_for(&bad[i], bf16, 16, &c), -1);
        assert_memory_equal(&c, &poison, sizeof c);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_format_table_rows),   cmocka_unit_test(test_format_table_rejects),
        cmocka_unit_test(test_format_names_unique), cmocka_unit_test(test_x_scales_follow_dispatch),
        cmocka_unit_test(test_activations),         cmocka_unit_test(test_block_m_values),
        cmocka_unit_test(test_block_m_monotone),    cmocka_unit_test(test_block_m_invalid),
        cmocka_unit_test(test_pool_capacity),       cmocka_unit_test(test_stage_k),
        cmocka_unit_test(test_config_values),       cmocka_unit_test(test_config_two_ctas),
        cmocka_unit_test(test_config_all_rows),     cmocka_unit_test(test_config_invalid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
