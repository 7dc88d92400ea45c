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
 * through; base (kSharedControl in the shared expert's format) ran
 * unfaulted (and passed) among the cases. */
static void shared_control(ctx *c, int row_index, const scenario *base, int ctl) {
    const mj_moe_format_row *row = mj_moe_format_at(row_index);
    const char *fmt = mj_format_name((mj_format)shared_format_of(base, row));
    set_case("control %s %s shared %s", control_name(ctl), row->name, fmt);
    if (ctl == CTL_SHARED_SCALE && !mj_format_group(shared_format_of(base, row))) {
        printf("  skipped: a %s shared expert has no block scales\n", fmt);
        return;
    }
    if (out_of_time()) return;
    double worst = 0;
    const int result = run_case(c, row_index, base, ctl, 0, &worst);
    printf("  control %s %s shared %s: calc_diff=%.3g -> %s\n", control_name(ctl), row->name, fmt,
           worst,
           result == CASE_FAILED   ? "detected"
           : result == CASE_PASSED ? "NOT detected"
                                   : "did not run (setup or launch failed)");
    record(result == CASE_FAILED);
}

/* Every case and control of a row with a shared expert in format fmt. */
static void shared_format_cases(ctx *c, int row_index, int fmt) {
    const mj_moe_format_row *row = mj_moe_format_at(row_index);
    /* What this test assumes of the library: the layer fuses it (its stages
     * fit the routed ring slot at this shape's stage K). */
    const scenario first = with_shared_format(&kShared[0], fmt);
    const mj_moe_config mc = moe_cfg(&c->sh, row, &first, 0);
    set_case("shared %s: a %s shared expert fuses", row->name, mj_format_name((mj_format)fmt));
    const mj_status st = mj_moe_config_check(&mc, NULL);
    if (st != MJ_OK) printf("  %s\n", mj_last_error());
    record(st == MJ_OK);
    if (st != MJ_OK) return;
    int base_ok = 0; /* kSharedControl (a case of kShared) passed */
    for (size_t s = 0; s < sizeof kShared / sizeof kShared[0]; s++) {
        const scenario sc = with_shared_format(&kShared[s], fmt);
        const int ok = shared_case(c, row_index, &sc);
        if (&kShared[s] == kSharedControl) base_ok = ok;
    }
    /* A control says something only where its unfaulted run passes. */
    static const int ctls[] = {CTL_SHARED_DROPPED, CTL_SHARED_SCALE, CTL_SHARED_SWAP};
    const scenario base = with_shared_format(kSharedControl, fmt);
    for (size_t j = 0; j < sizeof ctls / sizeof ctls[0]; j++) {
        if (!base_ok) {
            set_case("control %s %s shared %s", control_name(ctls[j]), row->name,
                     mj_format_name((mj_format)fmt));
            printf("  not run: the unfaulted case failed\n");
            record(0);
            continue;
        }
        shared_control(c, row_index, &base, ctls[j]);
    }
}

void test_shared(ctx *c) {
    if (g_quick) {
        for (size_t k = 0; k < sizeof kSharedQuickRows / sizeof kSharedQuickRows[0]; k++) {
            const int i = shared_row(kSharedQuickRows[k]);
            if (i >= 0) shared_case(c, i, &kSharedQuick);
        }
        test_invalid_shared(c);
        return;
    }
    const size_t rows = sizeof kSharedRows / sizeof kSharedRows[0];
    for (size_t k = 0; k < rows; k++) {
        const int i = shared_row(kSharedRows[k]);
        if (i < 0) continue;
        for (int f = 0; f < MJ_FMT_COUNT; f++)
            if (mj_moe_shared_fusable(mj_moe_format_at(i), f)) shared_format_cases(c, i, f);
    }
    test_invalid_shared(c);
    const int mxfp8 = shared_row("mxfp8");
    if (mxfp8 >= 0) test_graph(c, mxfp8, kSharedGraph);
}
