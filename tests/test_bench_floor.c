/*
 * The MegaMoE benchmark's floor (tools/bench/moe_floor.c) on cases worked out
 * by hand: bytes of the experts a routing hits, token bytes, FLOPs, and which
 * bound sets the floor.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "templates/layout/codes.h"
#include "tools/bench/moe_floor.h"

static void test_expert_bytes(void **state) {
    (void)state;
    /* 3 x 256 x 64 = 49152 elements; scales one per 32 (MX) or 16 (NVFP4). */
    assert_true(mj_bench_expert_bytes(MJ_FMT_BF16, 256, 64) == 98304.0);
    assert_true(mj_bench_expert_bytes(MJ_FMT_MXFP8, 256, 64) == 49152.0 + 1536.0);
    assert_true(mj_bench_expert_bytes(MJ_FMT_MXFP4, 256, 64) == 24576.0 + 1536.0);
    assert_true(mj_bench_expert_bytes(MJ_FMT_NVFP4, 256, 64) == 24576.0 + 3072.0);
    /* DeepSeek-V3 MXFP4: 44040192 elements, 22020096 + 1376256 bytes. */
    assert_true(mj_bench_expert_bytes(MJ_FMT_MXFP4, 7168, 2048) == 23396352.0);
}

static void test_token_bytes(void **state) {
    (void)state;
    /* in: x, scales, NVFP4 scale, 8 ids and 8 weights; out: 7168 BF16. */
    assert_true(mj_bench_token_bytes(MJ_FMT_BF16, 7168, 8) == 14336.0 + 64.0 + 14336.0);
    assert_true(mj_bench_token_bytes(MJ_FMT_MXFP8, 7168, 8) == 7168.0 + 224.0 + 64.0 + 14336.0);
    assert_true(mj_bench_token_bytes(MJ_FMT_MXFP4, 7168, 8) == 3584.0 + 224.0 + 64.0 + 14336.0);
    assert_true(mj_bench_token_bytes(MJ_FMT_NVFP4, 7168, 8) ==
                3584.0 + 448.0 + 4.0 + 64.0 + 14336.0);
}

static void test_flops(void **state) {
    (void)state;
    /* 2 x 3 x 7168 x 2048 = 88080384 per pair. */
    assert_true(mj_bench_moe_flops(7168, 2048, 1) == 88080384.0);
    assert_true(mj_bench_moe_flops(7168, 2048, 8) == 704643072.0);
    assert_true(mj_bench_moe_flops(7168, 2048, 0) == 0.0);
}

static void test_distinct_experts(void **state) {
    (void)state;
    const int32_t ids[] = {3, 5, 3, -1, 7, 12, 5, 15};
    unsigned char seen[16];
    size_t in;
    assert_int_equal(mj_bench_distinct_experts(ids, 8, 0, 8, seen, &in), 3); /* 3 5 7 */
    assert_int_equal(in, 5);
    assert_int_equal(mj_bench_distinct_experts(ids, 8, 8, 16, seen, &in), 2); /* 12 15 */
    assert_int_equal(in, 2);
    assert_int_equal(mj_bench_distinct_experts(ids, 8, 4, 13, seen, &in), 3); /* 5 7 12 */
    assert_int_equal(in, 4);
    assert_int_equal(mj_bench_distinct_experts(ids, 0, 0, 16, seen, &in), 0);
    assert_int_equal(in, 0);
    const int32_t masked[] = {-1, -1};
    assert_int_equal(mj_bench_distinct_experts(masked, 2, 0, 16, seen, &in), 0);
    assert_int_equal(in, 0);
}

static void test_bound(void **state) {
    (void)state;
    /* 1e9 bytes at 1000 GB/s: 1000 us; 1e12 FLOPs at 500 TFLOP/s: 2000 us. */
    mj_bench_floor f = mj_bench_floor_of(1e9, 1e12, 1000.0, 500.0);
    assert_true(f.memory_us == 1000.0);
    assert_true(f.compute_us == 2000.0);
    assert_true(f.floor_us == 2000.0);
    assert_int_equal(f.bound, MJ_BENCH_BOUND_COMPUTE);
    assert_string_equal(mj_bench_bound_name(f.bound), "compute");
    f = mj_bench_floor_of(4e9, 1e12, 1000.0, 500.0);
    assert_true(f.floor_us == 4000.0);
    assert_int_equal(f.bound, MJ_BENCH_BOUND_MEMORY);
    assert_string_equal(mj_bench_bound_name(f.bound), "memory");
    /* A tie is memory-bound. */
    assert_int_equal(mj_bench_floor_of(2e9, 1e12, 1000.0, 500.0).bound, MJ_BENCH_BOUND_MEMORY);
    /* DeepSeek-V3 MXFP4 x MXFP8 at T = 1: 8 experts and one token at 4590 GB/s
     * is the 40.8 us of the design brief; the FLOPs take 0.88 us at 800. */
    const double bytes = 8 * 23396352.0 + (7168.0 + 224.0 + 64.0 + 14336.0);
    f = mj_bench_floor_of(bytes, mj_bench_moe_flops(7168, 2048, 8), 4590.0, 800.0);
    assert_int_equal(f.bound, MJ_BENCH_BOUND_MEMORY);
    assert_true(f.floor_us > 40.78 && f.floor_us < 40.79);
    assert_true(f.compute_us > 0.880 && f.compute_us < 0.881);
}

/* A fused shared expert (--shared): all of its weights and scales once per
 * rank when the rank has tokens, and one more pair per token. */
static void test_shared(void **state) {
    (void)state;
    /* 3 x 256 x 128 = 98304 E4M3 bytes + 3072 scales; BF16 2 bytes, no scales */
    assert_true(mj_bench_shared_bytes(MJ_FMT_MXFP8, 256, 128, 1) == 98304.0 + 3072.0);
    assert_true(mj_bench_shared_bytes(MJ_FMT_MXFP8, 256, 128, 4096) == 98304.0 + 3072.0);
    assert_true(mj_bench_shared_bytes(MJ_FMT_BF16, 256, 128, 37) == 196608.0);
    assert_true(mj_bench_shared_bytes(MJ_FMT_MXFP8, 256, 128, 1) ==
                mj_bench_expert_bytes(MJ_FMT_MXFP8, 256, 128));
    /* no tokens, no shared expert: nothing */
    assert_true(mj_bench_shared_bytes(MJ_FMT_MXFP8, 256, 128, 0) == 0.0);
    assert_true(mj_bench_shared_bytes(MJ_FMT_MXFP8, 256, 0, 64) == 0.0);
    /* DeepSeek-V3 MXFP8, a shared expert of one expert's size (I_s = 2048):
     * 44040192 + 1376256 bytes. At T = 1 the 8 routed experts, the shared
     * one and the token at 4590 GB/s: 89.06 us instead of 79.16; the FLOPs
     * (9 pairs) take 0.99 us at 800 TFLOP/s. */
    const double shared = mj_bench_shared_bytes(MJ_FMT_MXFP8, 7168, 2048, 1);
    assert_true(shared == 45416448.0);
    const double expert = mj_bench_expert_bytes(MJ_FMT_MXFP8, 7168, 2048);
    const double token = mj_bench_token_bytes(MJ_FMT_MXFP8, 7168, 8);
    const double flops = mj_bench_moe_flops(7168, 2048, 8) + mj_bench_moe_flops(7168, 2048, 1);
    assert_true(flops == 9 * 88080384.0);
    mj_bench_floor f =
        mj_bench_floor_of(8 * expert + token, mj_bench_moe_flops(7168, 2048, 8), 4590.0, 800.0);
    assert_true(f.floor_us > 79.161 && f.floor_us < 79.162);
    f = mj_bench_floor_of(8 * expert + shared + token, flops, 4590.0, 800.0);
    assert_int_equal(f.bound, MJ_BENCH_BOUND_MEMORY);
    assert_true(f.floor_us > 89.056 && f.floor_us < 89.057);
    assert_true(f.compute_us > 0.990 && f.compute_us < 0.991);
    /* I_s = 2I: twice the bytes and twice the FLOPs per token */
    assert_true(mj_bench_shared_bytes(MJ_FMT_MXFP8, 7168, 4096, 8) == 2 * shared);
    assert_true(mj_bench_moe_flops(7168, 4096, 8) == 2 * mj_bench_moe_flops(7168, 2048, 8));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_expert_bytes), cmocka_unit_test(test_token_bytes),
        cmocka_unit_test(test_flops),        cmocka_unit_test(test_distinct_experts),
        cmocka_unit_test(test_bound),        cmocka_unit_test(test_shared),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
