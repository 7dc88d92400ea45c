/*
 * The SM clock the card runs at right now: one thread counts SM cycles
 * (clock64) over kWindowUs of the global timer. A benchmark reads it after a
 * timed pass, to tell a pass at full clock from one at the power cap (where
 * decode-bound kernels slow down and the memory floor does not).
 */
#ifndef MJ_BENCH_CLOCK_PROBE_CUH
#define MJ_BENCH_CLOCK_PROBE_CUH

#include "layout/bench_ceilings.h"
#include "mega_moe/pipeline.cuh"

namespace mj {

/* out[0]: SM cycles, out[1]: global-timer nanoseconds of the same window. */
template <int kWindowUs>
__global__ void __launch_bounds__(MJ_BC_CLOCK_THREADS) bench_clock_probe_kernel(mj_u64 *out) {
    if (threadIdx.x != 0) return;
    const mj_u64 t0 = global_timer_ns();
    const long long c0 = clock64();
    mj_u64 t;
    long long c;
    do {
        t = global_timer_ns();
        c = clock64();
    } while (t - t0 < (mj_u64)kWindowUs * 1000u);
    out[0] = (mj_u64)(c - c0);
    out[1] = t - t0;
}

} // namespace mj

#endif // MJ_BENCH_CLOCK_PROBE_CUH
