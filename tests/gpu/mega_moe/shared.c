/* The fused shared expert: cases against the fp64 reference, negative
 * controls, invalid input and a CUDA graph. */
#include "tests/gpu/mega_moe/harness.h"

/* ------------------------------------------------------------ the section */

static int shared_row(const char *name) {
    const int i = row_index_by_name(name);
    if (i < 0) {
        set_case("shared expert: format row %s", name);
        printf("  no format row is called %s (test bug)\n", name);
        record(0);
    }
    return i;
}

/* One case of kShared (or kSharedQuick) on one row; returns whether it passed. */
static int shared_case(ctx *c, int row_index, const scenario *sc) {
    run probe = {.row = mj_moe_format_at(row_index), .sc = *sc, .route = route_of(sc, row_index)};
    char d[256];
    describe(&probe, d, sizeof d);
    set_case("shared %s", d);
    if (out_of_time()) return 1;
    double worst = 0;
    const int ok = run_case(c, row_index, sc, CTL_NONE, 1, &worst) == CASE_PASSED;
    printf("  worst calc_diff %.3g\n", worst);
    record(ok);
    return ok;
}

/* A control passes when the numeric check fails on it, after its run went
 * through; kSharedControl ran unfaulted (and passed) among the cases. */
static void shared_control(ctx *c, int row_index, int ctl) {
    const mj_moe_format_row *row = mj_moe_format_at(row_index);
    set_case("control %s %s", control_name(ctl), row->name);
    if (ctl == CTL_SHARED_SCALE && !mj_format_group(mj_moe_shared_format_of(row))) {
        printf("  skipped: a %s shared expert has no block scales\n", row->name);
        return;
    }
    if (out_of_time()) return;
    double worst = 0;
    const int result = run_case(c, row_index, kSharedControl, ctl, 0, &worst);
    printf("  control %s %s: calc_diff=%.3g -> %s\n", control_name(ctl), row->name, worst,
           result == CASE_FAILED   ? "detected"
           : result == CASE_PASSED ? "NOT detected"
                                   : "did not run (setup or launch failed)");
    record(result == CASE_FAILED);
}

void test_shared(ctx *c) {
    if (g_quick) {
        const int mxfp8 = shared_row("mxfp8"), mxfp4_a8 = shared_row("mxfp4-a8");
        if (mxfp8 >= 0) shared_case(c, mxfp8, &kSharedQuick);
        if (mxfp4_a8 >= 0) shared_case(c, mxfp4_a8, &kSharedQuick);
        test_invalid_shared(c);
        return;
    }
    const size_t rows = sizeof kSharedRows / sizeof kSharedRows[0];
    for (size_t k = 0; k < rows; k++) {
        const int i = shared_row(kSharedRows[k]);
        if (i < 0) continue;
        const mj_moe_format_row *row = mj_moe_format_at(i);
        /* What this test assumes of the library: the row's kernels fuse a
         * shared expert (in their own weight format, or mxfp8 beside
         * mxfp4-a8's MXFP4 experts: the shared expert's own K loop). */
        const int fmt = mj_moe_shared_format_of(row);
        set_case("shared %s: the kernel fuses a %s shared expert", row->name,
                 fmt >= 0 ? mj_format_name((mj_format)fmt) : "(no)");
        record(fmt >= 0 && mj_moe_shared_compiled(row, fmt));
        int base_ok = 0; /* kSharedControl (a case of kShared) passed */
        for (size_t s = 0; s < sizeof kShared / sizeof kShared[0]; s++) {
            const int ok = shared_case(c, i, &kShared[s]);
            if (&kShared[s] == kSharedControl) base_ok = ok;
        }
        /* A control says something only where its unfaulted run passes. */
        static const int ctls[] = {CTL_SHARED_DROPPED, CTL_SHARED_SCALE, CTL_SHARED_SWAP};
        for (size_t j = 0; j < sizeof ctls / sizeof ctls[0]; j++) {
            if (!base_ok) {
                set_case("control %s %s", control_name(ctls[j]), row->name);
                printf("  not run: the unfaulted case failed\n");
                record(0);
                continue;
            }
            shared_control(c, i, ctls[j]);
        }
    }
    test_invalid_shared(c);
    const int mxfp8 = shared_row("mxfp8");
    if (mxfp8 >= 0) test_graph(c, mxfp8, kSharedGraph);
}
