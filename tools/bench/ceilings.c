#include "tools/bench/ceilings.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/error.h"
#include "runtime/families/bench_ceilings.h"
#include "runtime/runtime.h"
#include "templates/layout/bench_ceilings.h"
#include "tools/bench/bench.h"
#include "tools/bench/timer.h"

#define WARMUPS 2
#define TIMED 10
/* A read of several GB, so L2 serves nothing and a launch's fixed cost (a few
 * us: bench/RESULTS.md) is a small part of it; smaller when the device has
 * less free memory. */
#define READ_BYTES_MAX (4ull << 30)
#define READ_BYTES_MIN (1ull << 30)
/* Loop iterations of the tensor-rate kernel: 9.6-9.9 ms a launch on the H200
 * (bench/results/2026-12-01: tensor_flops / bf16_tflops). */
#define TENSOR_ITERS 16384ull
/* Dense BF16 FLOPs per SM per clock on Hopper (989 TFLOP/s = 132 SMs x
 * 1.83 GHz x 4096): a measured rate above it did not do its FLOPs. */
#define HOPPER_BF16_FLOPS_PER_CLOCK 4096.0
#define COPY_ITERS 10

typedef struct ceil_run {
    const mj_cuda *cu;
    CUstream stream;
    mj_bench_timer timer;
    CUdeviceptr buf, words, sink;
} ceil_run;

static void ceil_free(ceil_run *c) {
    if (c->stream) c->cu->cuStreamSynchronize(c->stream);
    mj_bench_timer_free(&c->timer);
    CUdeviceptr p[] = {c->buf, c->words, c->sink};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
        if (p[i]) c->cu->cuMemFree(p[i]);
    if (c->stream) c->cu->cuStreamDestroy(c->stream);
}

/* WARMUPS + TIMED launches of a kernel of the family; the median of the
 * timed ones in ms. With regions > 0, launch i reads from *src + (i mod
 * regions) x stride (args[0] is src: the bulk-read kernel's buffer). */
static mj_status time_launches(ceil_run *c, mj_runtime *rt, int kernel, void **args,
                               CUdeviceptr *src, int regions, size_t stride, double *ms) {
    const mj_family_request req = {.num_sms = mj_runtime_family_sms(rt, MJ_FAMILY_BENCH_CEILINGS)};
    mj_kernel *k;
    mj_launch_config lc;
    mj_status st =
        mj_family_prepare(rt, &mj_bench_ceilings_family, kernel, &req, c->stream, &k, &lc);
    const CUdeviceptr base = src ? *src : 0;
    for (int i = 0; st == MJ_OK && i < WARMUPS + TIMED; i++) {
        if (regions > 0) *src = base + (CUdeviceptr)(i % regions) * stride;
        const int timed = i - WARMUPS;
        if (timed >= 0) st = mj_bench_timer_start(&c->timer, timed, c->stream);
        if (st == MJ_OK) st = mj_jit_launch(rt, k, &lc, c->stream, args);
        if (st == MJ_OK && timed >= 0) st = mj_bench_timer_stop(&c->timer, timed, c->stream);
    }
    if (src) *src = base;
    return st == MJ_OK ? mj_bench_timer_median(&c->timer, TIMED, ms) : st;
}

static mj_status time_kernel(ceil_run *c, mj_runtime *rt, int kernel, void **args, double *ms) {
    return time_launches(c, rt, kernel, args, NULL, 0, 0, ms);
}

/* The bulk-read kernel's launch over `chunks` stages of c->buf (rotated over
 * `regions` regions `stride` apart); the median launch in ms, every copy
 * checked completed. */
static mj_status timed_read(ceil_run *c, mj_runtime *rt, uint64_t chunks, int regions,
                            size_t stride, double *ms) {
    const mj_cuda *cu = c->cu;
    CUresult r;
    if (!c->words) {
        if ((r = cu->cuMemAlloc(&c->words, 16)) != CUDA_SUCCESS) {
            c->words = 0;
            return mj_cuda_fail(r, "bench ceilings: cuMemAlloc(words)");
        }
    }
    if ((r = cu->cuMemsetD8Async(c->words, 0, 16, c->stream)) != CUDA_SUCCESS)
        return mj_cuda_fail(r, "bench ceilings: zeroing the bulk-read counters");
    uint64_t timeout_ns = 2000000000ull;
    CUdeviceptr src = c->buf, done = c->words, error = c->words + 8;
    void *args[] = {&src, &chunks, &timeout_ns, &done, &error};
    mj_status st = time_launches(c, rt, MJ_BC_KERNEL_BULK_READ, args, &src, regions, stride, ms);
    if (st != MJ_OK) return st;
    uint64_t words[2];
    if ((r = cu->cuMemcpyDtoH(words, c->words, sizeof words)) != CUDA_SUCCESS)
        return mj_cuda_fail(r, "bench ceilings: reading the bulk-read counters");
    const uint64_t want = (uint64_t)(WARMUPS + TIMED) * chunks * MJ_BC_BULK_STAGE_BYTES;
    if ((uint32_t)words[1] == MJ_BC_ERR_BULK_TIMEOUT)
        return mj_fail(MJ_ERR_CUDA, "bench ceilings: a bulk copy of the read kernel did not "
                                    "complete within 2 s (a kernel bug)");
    if (words[0] != want)
        return mj_fail(MJ_ERR_CUDA,
                       "bench ceilings: the read kernel completed %llu bytes, %llu were issued",
                       (unsigned long long)words[0], (unsigned long long)want);
    return MJ_OK;
}

static mj_status measure_read(ceil_run *c, mj_runtime *rt, mj_bench_ceilings *out) {
    const mj_cuda *cu = c->cu;
    size_t bytes = READ_BYTES_MAX;
    CUresult r;
    while ((r = cu->cuMemAlloc(&c->buf, bytes)) == CUDA_ERROR_OUT_OF_MEMORY &&
           bytes > READ_BYTES_MIN)
        bytes /= 2;
    if (r != CUDA_SUCCESS) {
        c->buf = 0;
        return mj_cuda_fail(r, "bench ceilings: cuMemAlloc(read buffer)");
    }
    /* HBM reads cost the same whatever the bytes (plain allocations are not
     * compressible); a pattern just keeps them from being zeros. */
    if ((r = cu->cuMemsetD8Async(c->buf, 0x5A, bytes, c->stream)) != CUDA_SUCCESS)
        return mj_cuda_fail(r, "bench ceilings: read buffer");
    const uint64_t chunks = bytes / MJ_BC_BULK_STAGE_BYTES;
    double ms;
    mj_status st = timed_read(c, rt, chunks, 0, 0, &ms);
    if (st != MJ_OK) return st;
    out->read_bytes = (double)chunks * MJ_BC_BULK_STAGE_BYTES;
    out->read_gbps = out->read_bytes / (ms * 1e6);
    return MJ_OK;
}

static mj_status measure_tensor(ceil_run *c, mj_runtime *rt, mj_bench_ceilings *out) {
    const mj_cuda *cu = c->cu;
    const size_t threads = 128u * MJ_BC_TENSOR_WARPGROUPS, n = (size_t)out->num_sms * threads;
    CUresult r = cu->cuMemAlloc(&c->sink, n * sizeof(float));
    if (r != CUDA_SUCCESS) {
        c->sink = 0;
        return mj_cuda_fail(r, "bench ceilings: cuMemAlloc(tensor sink)");
    }
    uint64_t iters = TENSOR_ITERS;
    void *args[] = {&iters, &c->sink};
    double ms;
    mj_status st = time_kernel(c, rt, MJ_BC_KERNEL_TENSOR_RATE, args, &ms);
    if (st != MJ_OK) return st;
    float *sink = malloc(n * sizeof *sink);
    if (!sink) return mj_fail(MJ_ERR_NOMEM, "bench ceilings: out of host memory");
    r = cu->cuMemcpyDtoH(sink, c->sink, n * sizeof *sink);
    size_t bad = 0, nonzero = 0;
    for (size_t i = 0; r == CUDA_SUCCESS && i < n; i++) {
        bad += !isfinite(sink[i]);
        nonzero += sink[i] != 0.0f;
    }
    free(sink);
    if (r != CUDA_SUCCESS) return mj_cuda_fail(r, "bench ceilings: reading the tensor sink");
    if (bad || !nonzero)
        return mj_fail(MJ_ERR_CUDA,
                       "bench ceilings: the tensor-rate kernel left %zu non-finite and %zu "
                       "non-zero accumulator sums of %zu (it did not run on its data)",
                       bad, nonzero, n);
    out->tensor_flops = (double)out->num_sms * MJ_BC_TENSOR_WARPGROUPS * (double)iters *
                        MJ_BC_TENSOR_FLOPS_PER_ITER;
    out->bf16_tflops = out->tensor_flops / (ms * 1e9);
    int clock_khz = 0;
    if ((r = cu->cuDeviceGetAttribute(&clock_khz, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, rt->device)) !=
        CUDA_SUCCESS)
        return mj_cuda_fail(r, "bench ceilings: cuDeviceGetAttribute(clock rate)");
    const double peak = out->num_sms * (clock_khz * 1e3) * HOPPER_BF16_FLOPS_PER_CLOCK / 1e12;
    if (out->bf16_tflops > 1.02 * peak)
        return mj_fail(MJ_ERR_CUDA,
                       "bench ceilings: the tensor-rate kernel measured %.0f TFLOP/s, above the "
                       "%.0f its %d SMs at %d MHz can do: it did not do the FLOPs counted",
                       out->bf16_tflops, peak, out->num_sms, clock_khz / 1000);
    return MJ_OK;
}

/* The largest stream mj_bench_stream_us times: with the regions that keep
 * L2 from serving it, its buffer stays within what a benchmark run leaves
 * free on an 80 GB card. */
#define STREAM_BYTES_MAX (4ull << 30)

/* Regions of `span` bytes a stream rotates over so that, between two reads
 * of one region, at least twice the L2's bytes are read elsewhere. */
static int stream_regions(size_t span, size_t l2_bytes) {
    const size_t between = 2 * l2_bytes;
    return 1 + (int)((between + span - 1) / span);
}

mj_status mj_bench_stream_us(mj_runtime *rt, double bytes, double *us) {
    if (!rt || !us || !(bytes > 0))
        return mj_fail(MJ_ERR_INVALID_ARG, "mj_bench_stream_us: a runtime, bytes > 0 and us");
    *us = 0;
    if (bytes > (double)STREAM_BYTES_MAX) return MJ_OK;
    mj_status st = mj_runtime_bind(rt);
    if (st != MJ_OK) return st;
    ceil_run c = {.cu = rt->cu};
    const mj_cuda *cu = c.cu;
    int l2 = 0;
    CUresult r = cu->cuDeviceGetAttribute(&l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, rt->device);
    if (r != CUDA_SUCCESS) return mj_cuda_fail(r, "bench stream: cuDeviceGetAttribute(L2 size)");
    const uint64_t chunks = ((uint64_t)bytes + MJ_BC_BULK_STAGE_BYTES - 1) / MJ_BC_BULK_STAGE_BYTES;
    const size_t span = (size_t)chunks * MJ_BC_BULK_STAGE_BYTES;
    const int regions = stream_regions(span, (size_t)l2);
    if ((r = cu->cuStreamCreate(&c.stream, CU_STREAM_NON_BLOCKING)) != CUDA_SUCCESS) {
        c.stream = NULL;
        return mj_cuda_fail(r, "bench stream: cuStreamCreate");
    }
    st = mj_bench_timer_init(&c.timer, cu, TIMED);
    if (st == MJ_OK) {
        r = cu->cuMemAlloc(&c.buf, (size_t)regions * span);
        if (r == CUDA_ERROR_OUT_OF_MEMORY) {
            /* Not measured: the caller prints none. */
            c.buf = 0;
            ceil_free(&c);
            return MJ_OK;
        }
        if (r != CUDA_SUCCESS) {
            c.buf = 0;
            st = mj_cuda_fail(r, "bench stream: cuMemAlloc(read buffer)");
        }
    }
    if (st == MJ_OK &&
        (r = cu->cuMemsetD8Async(c.buf, 0x5A, (size_t)regions * span, c.stream)) != CUDA_SUCCESS)
        st = mj_cuda_fail(r, "bench stream: read buffer");
    double ms = 0;
    if (st == MJ_OK) st = timed_read(&c, rt, chunks, regions, span, &ms);
    ceil_free(&c);
    if (st == MJ_OK) *us = ms * 1e3;
    return st;
}

mj_status mj_bench_sm_clock_mhz(mj_runtime *rt, mj_stream stream, double *mhz) {
    if (!rt || !mhz) return mj_fail(MJ_ERR_INVALID_ARG, "mj_bench_sm_clock_mhz: a runtime and mhz");
    *mhz = 0;
    mj_status st = mj_runtime_bind(rt);
    if (st != MJ_OK) return st;
    const mj_cuda *cu = rt->cu;
    const mj_family_request req = {.num_sms = mj_runtime_family_sms(rt, MJ_FAMILY_BENCH_CEILINGS)};
    mj_kernel *k;
    mj_launch_config lc;
    st = mj_family_prepare(rt, &mj_bench_ceilings_family, MJ_BC_KERNEL_CLOCK_PROBE, &req, stream,
                           &k, &lc);
    if (st != MJ_OK) return st;
    CUdeviceptr out = 0;
    CUresult r = cu->cuMemAlloc(&out, 2 * sizeof(uint64_t));
    if (r != CUDA_SUCCESS) return mj_cuda_fail(r, "bench clock: cuMemAlloc");
    void *args[] = {&out};
    st = mj_jit_launch(rt, k, &lc, stream, args);
    uint64_t host[2] = {0, 0};
    if (st == MJ_OK && (r = cu->cuStreamSynchronize(stream)) != CUDA_SUCCESS)
        st = mj_cuda_fail(r, "bench clock: the probe failed");
    if (st == MJ_OK && (r = cu->cuMemcpyDtoH(host, out, sizeof host)) != CUDA_SUCCESS)
        st = mj_cuda_fail(r, "bench clock: reading the probe");
    cu->cuMemFree(out);
    if (st == MJ_OK && host[1] == 0)
        st = mj_fail(MJ_ERR_CUDA, "bench clock: the probe counted no time");
    if (st == MJ_OK) *mhz = (double)host[0] * 1e3 / (double)host[1];
    return st;
}

mj_status mj_bench_measure_ceilings(mj_runtime *rt, mj_bench_ceilings *out) {
    memset(out, 0, sizeof *out);
    mj_status st = mj_runtime_bind(rt);
    if (st != MJ_OK) return st;
    ceil_run c = {.cu = rt->cu};
    CUresult r = c.cu->cuStreamCreate(&c.stream, CU_STREAM_NON_BLOCKING);
    if (r != CUDA_SUCCESS) {
        c.stream = NULL;
        st = mj_cuda_fail(r, "bench ceilings: cuStreamCreate");
    }
    out->num_sms = mj_runtime_family_sms(rt, MJ_FAMILY_BENCH_CEILINGS);
    if (st == MJ_OK) st = mj_bench_timer_init(&c.timer, c.cu, TIMED);
    if (st == MJ_OK) st = measure_read(&c, rt, out);
    if (st == MJ_OK) st = measure_tensor(&c, rt, out);
    ceil_free(&c); /* raw driver calls: the thread's error stays */
    if (st != MJ_OK) return st;
    return mj_bench_copy_gbps(rt, 0, COPY_ITERS, &out->copy_gbps);
}
