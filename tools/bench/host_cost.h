/* What a warm mj_mega_moe call costs the host beyond launching its kernel:
 * the median host time of the public call next to that of a bare
 * cuLaunchKernelEx of the same kernel with the same launch shape and
 * argument, both enqueuing zero-token launches (trivially short GPU work), in
 * alternating batches with the stream drained between batches so neither
 * waits on a full launch queue. */
#ifndef MJ_TOOLS_BENCH_HOST_COST_H
#define MJ_TOOLS_BENCH_HOST_COST_H

#include "include/megajit.h"
#include "runtime/cuda_driver.h"

typedef struct mj_bench_host_cost {
    double api_us;   /* one mj_mega_moe call */
    double bare_us;  /* one cuLaunchKernelEx */
    double extra_us; /* api_us - bare_us */
    int calls;       /* timed calls of each */
} mj_bench_host_cost;

/* buf and weights: one rank's (a rank of emulated ranks would wait for the
 * others inside the kernel). */
mj_status mj_bench_host_cost_measure(mj_runtime *rt, mj_symm_buffer *buf, const mj_weights *w,
                                     CUstream stream, mj_bench_host_cost *out);

#endif
