#include "tools/bench/moe_phases.h"

#include <string.h>

#include "templates/layout/moe_layout.h"

/* from <= to: mj_bench_moe_phases_of checks the order before it measures. */
static double us_between(uint64_t from, uint64_t to) {
    return (double)(to - from) / 1e3;
}

int mj_bench_moe_phases_of(const uint64_t *trace, int ctas, mj_bench_moe_phases *out) {
    if (!trace || ctas < 1 || !out) return -1;
    memset(out, 0, sizeof *out);
    out->ctas = ctas;
    uint64_t t0 = UINT64_MAX, last_entry = 0, t_end = 0, last_compute = 0;
    for (int c = 0; c < ctas; c++) {
        const uint64_t *h = trace + (size_t)c * MJ_MOE_TRACE_WORDS;
        const uint64_t entry = h[MJ_MOE_TR_ENTRY];
        if (!entry || h[MJ_MOE_TR_INPUTS] < entry || h[MJ_MOE_TR_ROUTED] < h[MJ_MOE_TR_INPUTS] ||
            h[MJ_MOE_TR_PULLED] < h[MJ_MOE_TR_ROUTED] ||
            h[MJ_MOE_TR_COMPUTED] < h[MJ_MOE_TR_PULLED] || h[MJ_MOE_TR_END] < h[MJ_MOE_TR_COMPUTED])
            return -1;
        t0 = entry < t0 ? entry : t0;
        last_entry = entry > last_entry ? entry : last_entry;
        t_end = h[MJ_MOE_TR_END] > t_end ? h[MJ_MOE_TR_END] : t_end;
        last_compute = h[MJ_MOE_TR_COMPUTED] > last_compute ? h[MJ_MOE_TR_COMPUTED] : last_compute;
    }
    out->span_us = us_between(t0, t_end);
    out->entry_skew_us = us_between(t0, last_entry);
    out->last_compute_us = us_between(t0, last_compute);
    double loop_total = 0;
    int with_tasks = 0;
    uint64_t g_start[2] = {UINT64_MAX, UINT64_MAX}, g_end[2] = {0, 0};
    for (int c = 0; c < ctas; c++) {
        const uint64_t *h = trace + (size_t)c * MJ_MOE_TRACE_WORDS;
        out->inputs_us += us_between(h[MJ_MOE_TR_ENTRY], h[MJ_MOE_TR_INPUTS]);
        out->routing_us += us_between(h[MJ_MOE_TR_INPUTS], h[MJ_MOE_TR_ROUTED]);
        out->pull_us += us_between(h[MJ_MOE_TR_ROUTED], h[MJ_MOE_TR_PULLED]);
        out->combine_us += us_between(h[MJ_MOE_TR_COMPUTED], h[MJ_MOE_TR_END]);
        const uint64_t n = h[MJ_MOE_TR_TASKS];
        const uint64_t traced = n < MJ_MOE_TRACE_TASKS ? n : MJ_MOE_TRACE_TASKS;
        out->untraced += (int)(n - traced);
        uint64_t prev_end = h[MJ_MOE_TR_PULLED];
        if (traced) {
            const uint64_t first = h[MJ_MOE_TRACE_HEAD + MJ_MOE_TT_FIRST];
            if (first < h[MJ_MOE_TR_ENTRY]) return -1;
            out->first_stage_us += us_between(h[MJ_MOE_TR_ENTRY], first);
            with_tasks++;
        }
        for (uint64_t i = 0; i < traced; i++) {
            const uint64_t *r = h + MJ_MOE_TRACE_HEAD + i * MJ_MOE_TRACE_TASK_WORDS;
            const int g = (int)(r[MJ_MOE_TT_ID] & 3u) - 1;
            if (g < 0 || g > 1 || r[MJ_MOE_TT_START] < prev_end ||
                r[MJ_MOE_TT_FIRST] < r[MJ_MOE_TT_START] || r[MJ_MOE_TT_LOOP] < r[MJ_MOE_TT_FIRST] ||
                r[MJ_MOE_TT_STORED] < r[MJ_MOE_TT_LOOP] || r[MJ_MOE_TT_EPI] < r[MJ_MOE_TT_STORED] ||
                !r[MJ_MOE_TT_ISSUED] || r[MJ_MOE_TT_ISSUED] > r[MJ_MOE_TT_FIRST] ||
                !r[MJ_MOE_TT_READY] || r[MJ_MOE_TT_READY] > r[MJ_MOE_TT_FIRST])
                return -1;
            mj_bench_moe_gemm_phases *p = &out->gemm[g];
            const double loop = us_between(r[MJ_MOE_TT_FIRST], r[MJ_MOE_TT_LOOP]);
            p->tasks++;
            p->task_us += us_between(r[MJ_MOE_TT_START], r[MJ_MOE_TT_EPI]);
            p->first_us += us_between(r[MJ_MOE_TT_START], r[MJ_MOE_TT_FIRST]);
            p->loop_us += loop;
            if ((r[MJ_MOE_TT_ID] >> 40) <= MJ_BENCH_MOE_NARROW_ROWS) {
                p->narrow_tasks++;
                p->narrow_loop_us += loop;
            }
            p->epilogue_us += us_between(r[MJ_MOE_TT_LOOP], r[MJ_MOE_TT_EPI]);
            p->stores_us += us_between(r[MJ_MOE_TT_LOOP], r[MJ_MOE_TT_STORED]);
            p->release_us += us_between(r[MJ_MOE_TT_STORED], r[MJ_MOE_TT_EPI]);
            p->weights_us += us_between(r[MJ_MOE_TT_ISSUED], r[MJ_MOE_TT_FIRST]);
            p->tile_us += us_between(r[MJ_MOE_TT_READY], r[MJ_MOE_TT_FIRST]);
            if (r[MJ_MOE_TT_READY] > r[MJ_MOE_TT_ISSUED])
                p->tile_lag_us += us_between(r[MJ_MOE_TT_ISSUED], r[MJ_MOE_TT_READY]);
            if (loop > 0) p->loop_gbps += (double)r[MJ_MOE_TT_BYTES] / (loop * 1e3);
            loop_total += loop;
            out->between_us += us_between(prev_end, r[MJ_MOE_TT_START]);
            prev_end = r[MJ_MOE_TT_EPI];
            g_start[g] = r[MJ_MOE_TT_START] < g_start[g] ? r[MJ_MOE_TT_START] : g_start[g];
            g_end[g] = r[MJ_MOE_TT_EPI] > g_end[g] ? r[MJ_MOE_TT_EPI] : g_end[g];
        }
    }
    out->inputs_us /= ctas;
    out->routing_us /= ctas;
    out->pull_us /= ctas;
    out->combine_us /= ctas;
    out->between_us /= ctas;
    if (with_tasks) out->first_stage_us /= with_tasks;
    for (int g = 0; g < 2; g++) {
        mj_bench_moe_gemm_phases *p = &out->gemm[g];
        if (!p->tasks) continue;
        p->narrow_loop_share = p->loop_us > 0 ? p->narrow_loop_us / p->loop_us : 0;
        if (p->narrow_tasks) p->narrow_loop_us /= p->narrow_tasks;
        p->task_us /= p->tasks;
        p->first_us /= p->tasks;
        p->loop_us /= p->tasks;
        p->epilogue_us /= p->tasks;
        p->stores_us /= p->tasks;
        p->release_us /= p->tasks;
        p->weights_us /= p->tasks;
        p->tile_us /= p->tasks;
        p->tile_lag_us /= p->tasks;
        p->loop_gbps /= p->tasks;
        p->start_us = us_between(t0, g_start[g]);
        p->end_us = us_between(t0, g_end[g]);
    }
    out->busy = out->span_us > 0 ? loop_total / (ctas * out->span_us) : 0;
    return 0;
}
