#include "tools/bench/host_cost.h"

#include <stdlib.h>
#include <string.h>

#include "apis/mega_moe_impl.h"
#include "runtime/clock.h"
#include "runtime/error.h"
#include "runtime/kernel_map.h"
#include "runtime/runtime.h"
#include "tools/bench/bench.h"

/* 40 batches of 25 calls of each kind: the median of 1000, each batch of
 * zero-token launches drained before the next. */
#define ROUNDS 40
#define BATCH 25

static mj_status drain(const mj_cuda *cu, CUstream stream) {
    CUresult r = cu->cuStreamSynchronize(stream);
    return r == CUDA_SUCCESS ? MJ_OK : mj_cuda_fail(r, "bench host cost: a launch failed");
}

mj_status mj_bench_host_cost_measure(mj_runtime *rt, mj_symm_buffer *buf, const mj_weights *w,
                                     CUstream stream, mj_bench_host_cost *out) {
    memset(out, 0, sizeof *out);
    const mj_cuda *cu = rt->cu;
    mj_kernel *k;
    mj_launch_config lc;
    mj_moe_args args;
    mj_status st = mj_mega_moe_prepare(rt, buf, w, NULL, 0, NULL, stream, &k, &lc, &args);
    void *params[] = {&args};
    if (st == MJ_OK) st = mj_jit_launch(rt, k, &lc, stream, params);
    if (st == MJ_OK) st = drain(cu, stream);
    if (st != MJ_OK) return st;
    /* The launch mj_jit_launch makes, built once, as a caller launching the
     * kernel itself would (the first launch above loaded it and set its
     * shared-memory limit). */
    CUlaunchAttribute attrs[MJ_JIT_LAUNCH_ATTRS];
    CUlaunchConfig bare;
    mj_jit_launch_config(&lc, stream, attrs, &bare);
    const CUfunction fn = k->function;
    float *api = malloc(ROUNDS * BATCH * sizeof *api), *raw = malloc(ROUNDS * BATCH * sizeof *raw);
    if (!api || !raw) st = mj_fail(MJ_ERR_NOMEM, "bench host cost: out of host memory");
    for (int round = 0; st == MJ_OK && round < ROUNDS; round++) {
        for (int i = 0; st == MJ_OK && i < BATCH; i++) {
            const double t0 = mj_monotonic_ms();
            st = mj_mega_moe(rt, buf, w, NULL, 0, NULL, stream);
            api[round * BATCH + i] = (float)(mj_monotonic_ms() - t0);
        }
        if (st == MJ_OK) st = drain(cu, stream);
        for (int i = 0; st == MJ_OK && i < BATCH; i++) {
            const double t0 = mj_monotonic_ms();
            CUresult r = cu->cuLaunchKernelEx(&bare, fn, params, NULL);
            raw[round * BATCH + i] = (float)(mj_monotonic_ms() - t0);
            if (r != CUDA_SUCCESS) st = mj_cuda_fail(r, "bench host cost: cuLaunchKernelEx");
        }
        if (st == MJ_OK) st = drain(cu, stream);
    }
    if (st == MJ_OK) {
        out->calls = ROUNDS * BATCH;
        out->api_us = mj_bench_median_ms(api, out->calls) * 1e3;
        out->bare_us = mj_bench_median_ms(raw, out->calls) * 1e3;
        out->extra_us = out->api_us - out->bare_us;
    }
    free(api);
    free(raw);
    return st;
}
