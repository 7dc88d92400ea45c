#include "tools/bench/host_cost.h"

#include <stdlib.h>
#include <string.h>

#include "apis/mega_moe_impl.h"
#include "runtime/clock.h"
#include "runtime/error.h"
#include "runtime/kernel_map.h"
#include "runtime/runtime.h"
#include "tools/bench/bench.h"

/* 40 x 25 calls of each kind: the median of 1000 is stable to ~0.05 us, and
 * a batch of zero-token launches drains in well under a millisecond. */
#define ROUNDS 40
#define BATCH 25

typedef struct bare_launch {
    CUlaunchConfig config;
    CUlaunchAttribute attrs[1];
    CUfunction function;
} bare_launch;

/* The launch mj_jit_launch makes for lc, built once, as a caller launching
 * the kernel itself would (the kernel is loaded and its shared-memory limit
 * set by one mj_jit_launch first). */
static void bare_of(const mj_kernel *k, const mj_launch_config *lc, CUstream stream,
                    bare_launch *b) {
    memset(b, 0, sizeof *b);
    unsigned n = 0;
    if (lc->pdl) {
        b->attrs[n].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        b->attrs[n].value.programmaticStreamSerializationAllowed = 1;
        n++;
    }
    b->config = (CUlaunchConfig){.gridDimX = lc->grid[0],
                                 .gridDimY = lc->grid[1],
                                 .gridDimZ = lc->grid[2],
                                 .blockDimX = lc->block[0],
                                 .blockDimY = lc->block[1],
                                 .blockDimZ = lc->block[2],
                                 .sharedMemBytes = lc->smem_bytes,
                                 .hStream = stream,
                                 .attrs = b->attrs,
                                 .numAttrs = n};
    b->function = k->function;
}

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
    if (lc.cluster_x > 1)
        return mj_fail(MJ_ERR_UNSUPPORTED, "bench host cost: the MegaMoE kernel launches as a "
                                           "cluster, which the bare launch does not model");
    bare_launch b;
    bare_of(k, &lc, stream, &b);
    float *api = malloc(ROUNDS * BATCH * sizeof *api),
          *bare = malloc(ROUNDS * BATCH * sizeof *bare);
    if (!api || !bare) st = mj_fail(MJ_ERR_NOMEM, "bench host cost: out of host memory");
    for (int round = 0; st == MJ_OK && round < ROUNDS; round++) {
        for (int i = 0; st == MJ_OK && i < BATCH; i++) {
            const double t0 = mj_monotonic_ms();
            st = mj_mega_moe(rt, buf, w, NULL, 0, NULL, stream);
            api[round * BATCH + i] = (float)(mj_monotonic_ms() - t0);
        }
        if (st == MJ_OK) st = drain(cu, stream);
        for (int i = 0; st == MJ_OK && i < BATCH; i++) {
            const double t0 = mj_monotonic_ms();
            CUresult r = cu->cuLaunchKernelEx(&b.config, b.function, params, NULL);
            bare[round * BATCH + i] = (float)(mj_monotonic_ms() - t0);
            if (r != CUDA_SUCCESS) st = mj_cuda_fail(r, "bench host cost: cuLaunchKernelEx");
        }
        if (st == MJ_OK) st = drain(cu, stream);
    }
    if (st == MJ_OK) {
        out->calls = ROUNDS * BATCH;
        out->api_us = mj_bench_median_ms(api, out->calls) * 1e3;
        out->bare_us = mj_bench_median_ms(bare, out->calls) * 1e3;
        out->extra_us = out->api_us - out->bare_us;
    }
    free(api);
    free(bare);
    return st;
}
