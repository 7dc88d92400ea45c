/*
 * The benchmark's reading of a MegaMoE phase trace (tools/bench/moe_phases.c)
 * on hand-made stamps: every mean and span it reports, and the traces it
 * must refuse (a CTA that never wrote, stamps out of order).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "templates/layout/moe_layout.h"
#include "tools/bench/moe_phases.h"

static uint64_t trace[2][MJ_MOE_TRACE_WORDS];

/* valid: rows of the task's token tile (tiles of 128 tokens: CTA 1's GEMM 1
 * task is an expert's second tile, of 9; CTA 0's GEMM 2 task one of 32, the
 * last count the phases set apart). */
static void task(int cta, int i, int gemm, uint64_t valid, uint64_t bytes, uint64_t start,
                 uint64_t first, uint64_t loop, uint64_t epi) {
    uint64_t *r = trace[cta] + MJ_MOE_TRACE_HEAD + i * MJ_MOE_TRACE_TASK_WORDS;
    r[MJ_MOE_TT_ID] = (uint64_t)gemm | 3u << 2 | 5u << 16 | valid << 40;
    r[MJ_MOE_TT_BYTES] = bytes;
    r[MJ_MOE_TT_START] = start;
    r[MJ_MOE_TT_FIRST] = first;
    r[MJ_MOE_TT_LOOP] = loop;
    r[MJ_MOE_TT_EPI] = epi;
    /* The producers: weights issued 600 ns, the tile ready 200 ns before the first stage
     * landed; results stored halfway through the epilogue. */
    r[MJ_MOE_TT_ISSUED] = first - 600;
    r[MJ_MOE_TT_READY] = first - 200;
    r[MJ_MOE_TT_STORED] = loop + (epi - loop) / 2;
}

static void head(int cta, uint64_t base, uint64_t computed, uint64_t end, uint64_t tasks) {
    uint64_t *h = trace[cta];
    h[MJ_MOE_TR_ENTRY] = base;
    h[MJ_MOE_TR_INPUTS] = base + 500;
    h[MJ_MOE_TR_ROUTED] = base + 1500;
    h[MJ_MOE_TR_PULLED] = base + 2500;
    h[MJ_MOE_TR_COMPUTED] = computed;
    h[MJ_MOE_TR_END] = end;
    h[MJ_MOE_TR_TASKS] = tasks;
}

/* CTA 0 from t = 1 us: a GEMM 1 task (4 us loop over 8000 B) and a GEMM 2
 * task; CTA 1 from t = 2 us: one GEMM 1 task. Stamps in ns. */
static void fill(void) {
    memset(trace, 0, sizeof trace);
    head(0, 1000, 14000, 16000, 2);
    task(0, 0, 1, 128, 8000, 4000, 5000, 9000, 10000);
    task(0, 1, 2, 32, 3000, 10500, 11000, 13000, 13500);
    head(1, 2000, 12000, 18000, 1);
    task(1, 0, 1, 9, 16000, 5000, 6000, 10000, 12000);
}

static void test_means(void **state) {
    (void)state;
    fill();
    mj_bench_moe_phases p;
    assert_int_equal(mj_bench_moe_phases_of(&trace[0][0], 2, &p), 0);
    assert_int_equal(p.ctas, 2);
    assert_int_equal(p.untraced, 0);
    assert_true(p.span_us == 17.0); /* 1 us -> 18 us */
    assert_true(p.entry_skew_us == 1.0);
    assert_true(p.inputs_us == 0.5);
    assert_true(p.routing_us == 1.0);
    assert_true(p.pull_us == 1.0);
    assert_true(p.first_stage_us == 4.0); /* CTA 0: 1 -> 5 us; CTA 1: 2 -> 6 us */
    assert_int_equal(p.gemm[0].tasks, 2);
    assert_true(p.gemm[0].task_us == 6.5); /* (6 + 7) / 2 */
    assert_true(p.gemm[0].first_us == 1.0);
    assert_true(p.gemm[0].loop_us == 4.0);
    assert_true(p.gemm[0].epilogue_us == 1.5); /* (1 + 2) / 2 */
    assert_true(p.gemm[0].stores_us == 0.75);
    assert_true(p.gemm[0].release_us == 0.75);
    assert_true(p.gemm[0].weights_us == 0.6);
    assert_true(p.gemm[0].tile_us == 0.2);
    assert_true(p.gemm[0].tile_lag_us == 0.4);
    assert_true(p.gemm[0].loop_gbps == 3.0);     /* (8000 / 4 us + 16000 / 4 us) / 2 = 3 GB/s */
    assert_int_equal(p.gemm[0].narrow_tasks, 1); /* CTA 1's tile of 9 rows */
    assert_true(p.gemm[0].narrow_loop_us == 4.0);
    assert_true(p.gemm[0].narrow_loop_share == 0.5);
    assert_int_equal(p.gemm[1].narrow_tasks, 1); /* CTA 0's tile of 32 rows */
    assert_true(p.gemm[1].narrow_loop_us == 2.0);
    assert_true(p.gemm[1].narrow_loop_share == 1.0);
    assert_true(p.gemm[0].start_us == 3.0);
    assert_true(p.gemm[0].end_us == 11.0);
    assert_int_equal(p.gemm[1].tasks, 1);
    assert_true(p.gemm[1].loop_us == 2.0);
    assert_true(p.gemm[1].loop_gbps == 1.5);
    assert_true(p.gemm[1].start_us == 9.5);
    /* CTA 0: pulled 3.5 -> 4 us, 10 -> 10.5 us; CTA 1: 4.5 -> 5 us. */
    assert_true(p.between_us == 0.75);
    assert_true(p.combine_us == 4.0); /* (2 + 6) / 2 */
    assert_true(p.last_compute_us == 13.0);
    assert_true(p.busy == 10.0 / (2 * 17.0));
}

static void test_untraced(void **state) {
    (void)state;
    fill();
    trace[1][MJ_MOE_TR_TASKS] = MJ_MOE_TRACE_TASKS + 7;
    for (int i = 1; i < MJ_MOE_TRACE_TASKS; i++) {
        const uint64_t t = 12000 + 10 * (uint64_t)i;
        task(1, i, 2, 128, 100, t, t + 1, t + 2, t + 3);
    }
    trace[1][MJ_MOE_TR_COMPUTED] = 17000;
    mj_bench_moe_phases p;
    assert_int_equal(mj_bench_moe_phases_of(&trace[0][0], 2, &p), 0);
    assert_int_equal(p.untraced, 7);
    assert_int_equal(p.gemm[1].tasks, MJ_MOE_TRACE_TASKS);
}

static void test_refused(void **state) {
    (void)state;
    mj_bench_moe_phases p;
    fill();
    trace[1][MJ_MOE_TR_ENTRY] = 0; /* a CTA that never wrote */
    assert_int_equal(mj_bench_moe_phases_of(&trace[0][0], 2, &p), -1);
    fill();
    trace[0][MJ_MOE_TR_END] = 13000; /* before its last task finished */
    assert_int_equal(mj_bench_moe_phases_of(&trace[0][0], 2, &p), -1);
    fill();
    task(0, 1, 2, 128, 3000, 9500, 11000, 13000, 13500); /* starts before the previous ends */
    assert_int_equal(mj_bench_moe_phases_of(&trace[0][0], 2, &p), -1);
    fill();
    trace[0][MJ_MOE_TRACE_HEAD + MJ_MOE_TT_STORED] = 8000; /* stored before the K loop ended */
    assert_int_equal(mj_bench_moe_phases_of(&trace[0][0], 2, &p), -1);
    fill();
    trace[0][MJ_MOE_TRACE_HEAD + MJ_MOE_TT_READY] = 5500; /* tile ready after its stage landed */
    assert_int_equal(mj_bench_moe_phases_of(&trace[0][0], 2, &p), -1);
    fill();
    trace[0][MJ_MOE_TRACE_HEAD + MJ_MOE_TT_ISSUED] = 0; /* the weight producer never wrote */
    assert_int_equal(mj_bench_moe_phases_of(&trace[0][0], 2, &p), -1);
    fill();
    trace[0][MJ_MOE_TRACE_HEAD + MJ_MOE_TT_ID] = 0; /* no GEMM */
    assert_int_equal(mj_bench_moe_phases_of(&trace[0][0], 2, &p), -1);
    assert_int_equal(mj_bench_moe_phases_of(NULL, 2, &p), -1);
    assert_int_equal(mj_bench_moe_phases_of(&trace[0][0], 0, &p), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_means),
        cmocka_unit_test(test_untraced),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
