#include "tools/bench/moe_floor.h"

#include <string.h>

#include "templates/layout/symm_layout.h"

double mj_bench_expert_bytes(int fmt, int hidden, int intermediate) {
    const double elems = 3.0 * (double)hidden * (double)intermediate;
    const int group = mj_format_group(fmt);
    return elems * mj_format_bits(fmt) / 8.0 + (group ? elems / group : 0.0);
}

double mj_bench_token_bytes(int dispatch_fmt, int hidden, int topk) {
    const int group = mj_format_group(dispatch_fmt);
    double in = (double)hidden * mj_format_bits(dispatch_fmt) / 8.0 +
                (group ? (double)hidden / group : 0.0) +
                (dispatch_fmt == MJ_FMT_NVFP4 ? 4.0 : 0.0) + 8.0 * topk;
    return in + 2.0 * hidden;
}

double mj_bench_moe_flops(int hidden, int intermediate, double pairs) {
    return 2.0 * 3.0 * (double)hidden * (double)intermediate * pairs;
}

double mj_bench_shared_bytes(int fmt, int hidden, int shared_intermediate, int tokens) {
    return shared_intermediate > 0 && tokens > 0
               ? mj_bench_expert_bytes(fmt, hidden, shared_intermediate)
               : 0.0;
}

int mj_bench_distinct_experts(const int32_t *ids, size_t n, int lo, int hi, unsigned char *seen,
                              size_t *in_range) {
    memset(seen, 0, (size_t)(hi - lo));
    int count = 0;
    *in_range = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < lo || ids[i] >= hi) continue;
        (*in_range)++;
        count += !seen[ids[i] - lo];
        seen[ids[i] - lo] = 1;
    }
    return count;
}

const char *mj_bench_bound_name(mj_bench_bound b) {
    return b == MJ_BENCH_BOUND_COMPUTE ? "compute" : "memory";
}

mj_bench_floor mj_bench_floor_of(double bytes, double flops, double read_gbps, double tflops) {
    mj_bench_floor f = {.memory_us = bytes / (read_gbps * 1e3),
                        .compute_us = flops / (tflops * 1e6)};
    f.bound = f.compute_us > f.memory_us ? MJ_BENCH_BOUND_COMPUTE : MJ_BENCH_BOUND_MEMORY;
    f.floor_us = f.bound == MJ_BENCH_BOUND_COMPUTE ? f.compute_us : f.memory_us;
    return f;
}
