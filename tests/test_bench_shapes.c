/*
 * The MegaMoE benchmark's named shapes (tools/bench/moe_shapes.c) and the
 * reason a shape cannot run, in the library's own limits.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "heuristics/moe_formats.h"
#include "templates/layout/codes.h"
#include "tools/bench/moe_shapes.h"

static void test_table(void **state) {
    (void)state;
    assert_int_equal(mj_bench_moe_shape_count(), 4);
    assert_string_equal(mj_bench_moe_shape_at(0)->name, "deepseek-v3");
    assert_null(mj_bench_moe_shape_at(4));
    assert_null(mj_bench_moe_shape_at(-1));
    const mj_bench_moe_shape *s = mj_bench_moe_shape_by_name("gpt-oss-120b");
    assert_non_null(s);
    assert_int_equal(s->hidden, 2880);
    assert_int_equal(s->intermediate, 2880);
    assert_int_equal(s->experts, 128);
    assert_int_equal(s->topk, 4);
    assert_null(mj_bench_moe_shape_by_name("all"));
    assert_null(mj_bench_moe_shape_by_name(NULL));
}

static void test_runnable(void **state) {
    (void)state;
    char why[256];
    /* Every named shape, gpt-oss-120b's hidden 2880 (a multiple of 64, not of
     * 256) included, in every dispatch format. */
    for (int i = 0; i < mj_bench_moe_shape_count(); i++)
        for (int fmt = 0; fmt < MJ_FMT_COUNT; fmt++) {
            assert_int_equal(
                mj_bench_moe_unrunnable(mj_bench_moe_shape_at(i), fmt, 1, 4096, 0, why, sizeof why),
                0);
            assert_string_equal(why, "");
        }
    assert_int_equal(mj_bench_moe_unrunnable(mj_bench_moe_shape_by_name("deepseek-v3"),
                                             MJ_FMT_MXFP8, 8, 64, 0, why, sizeof why),
                     0);
    /* A hidden size off the 64 grid, in the library's words. */
    const mj_bench_moe_shape off_grid = {"custom", 2880 + 32, 2880, 128, 4};
    assert_int_equal(mj_bench_moe_unrunnable(&off_grid, MJ_FMT_MXFP8, 1, 4096, 0, why, sizeof why),
                     1);
    assert_string_equal(why, "hidden must be a multiple of 64 in 64..8192 (got 2912)");
    /* Other limits in the library's words, naming the field. */
    assert_int_equal(mj_bench_moe_unrunnable(mj_bench_moe_shape_by_name("deepseek-v3"), MJ_FMT_BF16,
                                             3, 4096, 0, why, sizeof why),
                     1);
    assert_non_null(strstr(why, "experts must be a multiple of ranks (3)"));
    const mj_bench_moe_shape odd = {"custom", 4096, 1000, 64, 4};
    assert_int_equal(mj_bench_moe_unrunnable(&odd, MJ_FMT_BF16, 1, 64, 0, why, sizeof why), 1);
    assert_non_null(strstr(why, "intermediate must be a multiple of 64"));
    assert_non_null(strstr(why, "(got 1000)"));
}

/* --shared: the shared expert's size in the library's shape rules, and its
 * format (mj_moe_shared_format_of) in the library's fusion rules. */
static void test_shared(void **state) {
    (void)state;
    char why[256];
    const mj_bench_moe_shape *ds = mj_bench_moe_shape_by_name("deepseek-v3");
    for (int n = 1; n <= 2; n++) {
        assert_int_equal(mj_bench_moe_unrunnable(ds, MJ_FMT_MXFP8, 8, 4096, n * ds->intermediate,
                                                 why, sizeof why),
                         0);
        assert_string_equal(why, "");
    }
    /* 17 x 2048 is past the 32768 an intermediate size may have */
    assert_int_equal(
        mj_bench_moe_unrunnable(ds, MJ_FMT_MXFP8, 1, 64, 17 * ds->intermediate, why, sizeof why),
        1);
    assert_non_null(strstr(why, "shared_intermediate"));
    assert_non_null(strstr(why, "(got 34816)"));

    /* Every row fuses one: its own weight format (bf16, mxfp8) or MXFP8;
     * --shared-format bf16 beside nvfp4 where its half stages fit (stage K
     * 128: DeepSeek-V3, not gpt-oss-120b's 2880), mxfp4 nowhere. */
    const mj_bench_moe_shape *oss = mj_bench_moe_shape_by_name("gpt-oss-120b");
    for (int i = 0; i < mj_moe_format_count(); i++) {
        const mj_moe_format_row *row = mj_moe_format_at(i);
        assert_int_equal(mj_bench_moe_shared_unrunnable(ds, row, 0, -1, why, sizeof why), 0);
        assert_string_equal(why, "");
        if (mj_bench_moe_shared_unrunnable(ds, row, 2, -1, why, sizeof why))
            fail_msg("row %s: --shared 2 refused (%s)", row->name, why);
        assert_string_equal(why, "");
        assert_int_equal(mj_bench_moe_shared_unrunnable(ds, row, 1, MJ_FMT_MXFP4, why, sizeof why),
                         1);
        assert_non_null(strstr(why, "--shared: shared_format mxfp4: a shared expert fuses into"));
    }
    const mj_moe_format_row *nvfp4 = mj_moe_format_by_name("nvfp4");
    assert_int_equal(mj_bench_moe_shared_unrunnable(ds, nvfp4, 1, MJ_FMT_BF16, why, sizeof why), 0);
    assert_int_equal(mj_bench_moe_shared_unrunnable(oss, nvfp4, 1, MJ_FMT_BF16, why, sizeof why),
                     1);
    assert_non_null(strstr(why, "at this layer's stage K of 64"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_runnable),
        cmocka_unit_test(test_shared),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
