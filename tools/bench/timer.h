/* CUDA-event timing of many intervals on a stream: a start and a stop event
 * per interval, read back once all are recorded, so the host never waits
 * between them and the GPU never waits on the host. */
#ifndef MJ_TOOLS_BENCH_TIMER_H
#define MJ_TOOLS_BENCH_TIMER_H

#include "include/megajit.h"
#include "runtime/cuda_driver.h"

typedef struct mj_bench_timer {
    const mj_cuda *cu;
    CUevent *events; /* 2 per interval */
    float *ms;
    int capacity;
} mj_bench_timer;

/* Room for `intervals` intervals. */
mj_status mj_bench_timer_init(mj_bench_timer *t, const mj_cuda *cu, int intervals);
void mj_bench_timer_free(mj_bench_timer *t);
/* Records interval i's start or stop event on stream. */
mj_status mj_bench_timer_start(mj_bench_timer *t, int i, CUstream stream);
mj_status mj_bench_timer_stop(mj_bench_timer *t, int i, CUstream stream);
/* Waits for interval n - 1 to stop and returns the median of intervals
 * 0..n-1, in ms; an error if it is not positive. */
mj_status mj_bench_timer_median(mj_bench_timer *t, int n, double *ms);

#endif
