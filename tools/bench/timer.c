#include "tools/bench/timer.h"

#include <stdlib.h>
#include <string.h>

#include "runtime/error.h"
#include "tools/bench/bench.h"

mj_status mj_bench_timer_init(mj_bench_timer *t, const mj_cuda *cu, int intervals) {
    memset(t, 0, sizeof *t);
    t->cu = cu;
    t->events = calloc((size_t)intervals * 2, sizeof *t->events);
    t->ms = calloc((size_t)intervals, sizeof *t->ms);
    if (!t->events || !t->ms) return mj_fail(MJ_ERR_NOMEM, "bench: out of host memory");
    t->capacity = intervals; /* so that free destroys the events made before a failure */
    for (int i = 0; i < 2 * intervals; i++) {
        CUresult r = cu->cuEventCreate(&t->events[i], CU_EVENT_DEFAULT);
        if (r != CUDA_SUCCESS) return mj_cuda_fail(r, "bench: cuEventCreate");
    }
    return MJ_OK;
}

void mj_bench_timer_free(mj_bench_timer *t) {
    for (int i = 0; t->events && i < 2 * t->capacity; i++)
        if (t->events[i]) t->cu->cuEventDestroy(t->events[i]);
    free(t->events);
    free(t->ms);
    memset(t, 0, sizeof *t);
}

mj_status mj_bench_timer_start(mj_bench_timer *t, int i, CUstream stream) {
    CUresult r = t->cu->cuEventRecord(t->events[2 * i], stream);
    return r == CUDA_SUCCESS ? MJ_OK : mj_cuda_fail(r, "bench: cuEventRecord");
}

mj_status mj_bench_timer_stop(mj_bench_timer *t, int i, CUstream stream) {
    CUresult r = t->cu->cuEventRecord(t->events[2 * i + 1], stream);
    return r == CUDA_SUCCESS ? MJ_OK : mj_cuda_fail(r, "bench: cuEventRecord");
}

mj_status mj_bench_timer_median(mj_bench_timer *t, int n, double *ms) {
    CUresult r = t->cu->cuEventSynchronize(t->events[2 * n - 1]);
    if (r != CUDA_SUCCESS) return mj_cuda_fail(r, "bench: the timed work failed");
    for (int i = 0; i < n; i++)
        if ((r = t->cu->cuEventElapsedTime(&t->ms[i], t->events[2 * i], t->events[2 * i + 1])) !=
            CUDA_SUCCESS)
            return mj_cuda_fail(r, "bench: cuEventElapsedTime");
    *ms = mj_bench_median_ms(t->ms, n);
    if (!(*ms > 0.0))
        return mj_fail(MJ_ERR_CUDA, "bench: the median time was not positive (%g ms)", *ms);
    return MJ_OK;
}
