/*
 * Pre-dispatch benchmark: the kernel's achieved bandwidth next to the device's
 * own copy bandwidth, so the result reads as a fraction of what the memory can do.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "include/megajit.h"
#include "runtime/error.h"
#include "runtime/log.h"
#include "runtime/runtime.h"
#include "templates/layout/symm_layout.h"
#include "tools/bench/bench.h"
#include "tools/bench/timer.h"

#define BENCH_EXPERTS 256
#define BENCH_DEFAULT_ITERS 100
#define BENCH_MAX_ITERS 1000000
#define BENCH_WARMUP 5
/* Enough input sets that their total exceeds twice the L2, so a timed launch
 * never finds its inputs cached by an earlier one; bounded because each set
 * also gets its own output region (an emulated rank, at most MJ_MAX_RANKS). */
#define BENCH_MIN_SETS 4
#define BENCH_MAX_SETS 64
/* A copy this large cannot be served from the 60 MB L2. */
#define BENCH_COPY_MIN_BYTES (256ull << 20)
#define BENCH_COPY_CHUNK (16ull << 20)
/* GPU work queued ahead of the zero-token launches, per timed launch: more than
 * the host needs to enqueue one (bench/RESULTS.md has the measured enqueue
 * time), so the events time the GPU rather than the host. */
#define BENCH_LEAD_US_PER_LAUNCH 25.0

typedef struct bench {
    const mj_cuda *cu;
    CUstream stream;
    mj_bench_timer timer; /* an interval per timed launch */
    mj_symm_buffer *buf;
    int num_sets;
    CUdeviceptr x[BENCH_MAX_SETS];
    CUdeviceptr ids[BENCH_MAX_SETS];
    CUdeviceptr weights[BENCH_MAX_SETS];
    CUdeviceptr copy_src;
    CUdeviceptr copy_dst;
    size_t copy_n; /* bytes of one copy, and its median time, once copy_run has run */
    double copy_ms;
    uint16_t *host_x;
    int32_t *host_ids;
    float *host_weights;
    uint64_t *host_chunk;
} bench;

/* Uniform in [-1, 1). */
static float rng_sym(uint64_t *s) {
    return (float)(mj_bench_rng(s) >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

static uint16_t bf16_rne(float f) {
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return (uint16_t)((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16);
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

float mj_bench_median_ms(float *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_float);
    return n % 2 ? v[n / 2] : 0.5f * (v[n / 2 - 1] + v[n / 2]);
}

static void bench_free(bench *b) {
    const mj_cuda *cu = b->cu;
    if (b->stream) cu->cuStreamSynchronize(b->stream);
    mj_bench_timer_free(&b->timer);
    for (int s = 0; s < BENCH_MAX_SETS; s++) {
        if (b->x[s]) cu->cuMemFree(b->x[s]);
        if (b->ids[s]) cu->cuMemFree(b->ids[s]);
        if (b->weights[s]) cu->cuMemFree(b->weights[s]);
    }
    if (b->copy_src) cu->cuMemFree(b->copy_src);
    if (b->copy_dst) cu->cuMemFree(b->copy_dst);
    if (b->buf) mj_symm_buffer_destroy(b->buf);
    if (b->stream) cu->cuStreamDestroy(b->stream);
    free(b->host_x);
    free(b->host_ids);
    free(b->host_weights);
    free(b->host_chunk);
}

/* Frees b and returns st with the error sentence it had: freeing calls back
 * into the runtime, which may replace the thread's error. */
static mj_status bench_finish(bench *b, mj_status st) {
    mj_error_snapshot why;
    mj_error_save(&why);
    bench_free(b);
    mj_error_restore(&why);
    return st;
}

/* Random rows of varied magnitude (one power-of-two scale per row), so every
 * block scale differs and the quantizer does its full work. */
static void fill_host_set(bench *b, uint64_t *rng, int hidden, int num_tokens, int topk) {
    for (int t = 0; t < num_tokens; t++) {
        float scale = ldexpf(1.0f, (int)(mj_bench_rng(rng) % 33) - 16);
        uint16_t *row = b->host_x + (size_t)t * (size_t)hidden;
        for (int h = 0; h < hidden; h++)
            row[h] = bf16_rne(rng_sym(rng) * scale);
    }
    for (size_t i = 0; i < (size_t)num_tokens * (size_t)topk; i++) {
        b->host_ids[i] = (int32_t)(mj_bench_rng(rng) % BENCH_EXPERTS);
        b->host_weights[i] = 0.5f * (rng_sym(rng) + 1.0f);
    }
}

/* Times each of n calls of op between its own pair of events (enqueued back
 * to back, so the GPU never waits on the host); the median in *ms. */
typedef mj_status (*bench_op)(bench *b, int i, void *user);

static mj_status time_each(bench *b, int n, bench_op op, void *user, double *ms) {
    mj_status st = MJ_OK;
    for (int i = 0; st == MJ_OK && i < n; i++)
        if ((st = mj_bench_timer_start(&b->timer, i, b->stream)) == MJ_OK &&
            (st = op(b, i, user)) == MJ_OK)
            st = mj_bench_timer_stop(&b->timer, i, b->stream);
    return st == MJ_OK ? mj_bench_timer_median(&b->timer, n, ms) : st;
}

typedef struct pd_args {
    mj_runtime *rt;
    int num_tokens;
} pd_args;

static mj_status op_pre_dispatch(bench *b, int i, void *user) {
    const pd_args *a = user;
    int s = i % b->num_sets;
    return mj_pre_dispatch(a->rt, b->buf, s, (const void *)(uintptr_t)b->x[s],
                           (const int32_t *)(uintptr_t)b->ids[s],
                           (const float *)(uintptr_t)b->weights[s], NULL, a->num_tokens, b->stream);
}

static mj_status op_copy(bench *b, int i, void *user) {
    (void)i;
    size_t n = *(const size_t *)user;
    CUresult r = b->cu->cuMemcpyDtoDAsync(b->copy_dst, b->copy_src, n, b->stream);
    return r == CUDA_SUCCESS ? MJ_OK : mj_cuda_fail(r, "bench: cuMemcpyDtoDAsync");
}

static mj_status alloc(const mj_cuda *cu, CUdeviceptr *p, size_t bytes, const char *what) {
    CUresult r = cu->cuMemAlloc(p, bytes);
    if (r != CUDA_SUCCESS) {
        *p = 0;
        return mj_cuda_fail(r, what);
    }
    return MJ_OK;
}

/* Times iters copies of at least min_bytes on b's stream and timer (both
 * sized by the caller); *gbps counts bytes read plus bytes written. */
static mj_status copy_run(bench *b, size_t min_bytes, int iters, uint64_t *rng, double *gbps) {
    const mj_cuda *cu = b->cu;
    CUresult r;
    mj_status st;
    size_t copy_n = min_bytes < BENCH_COPY_MIN_BYTES ? BENCH_COPY_MIN_BYTES : min_bytes;
    copy_n = (copy_n + 255) & ~(size_t)255;
    b->host_chunk = malloc(BENCH_COPY_CHUNK);
    if (!b->host_chunk) return mj_fail(MJ_ERR_NOMEM, "bench: out of host memory");
    if ((st = alloc(cu, &b->copy_src, copy_n, "bench: cuMemAlloc(copy source)")) != MJ_OK ||
        (st = alloc(cu, &b->copy_dst, copy_n, "bench: cuMemAlloc(copy destination)")) != MJ_OK)
        return st;
    for (size_t i = 0; i < BENCH_COPY_CHUNK / sizeof(uint64_t); i++)
        b->host_chunk[i] = mj_bench_rng(rng);
    for (size_t off = 0; off < copy_n; off += BENCH_COPY_CHUNK) {
        size_t n = copy_n - off < BENCH_COPY_CHUNK ? copy_n - off : BENCH_COPY_CHUNK;
        if ((r = cu->cuMemcpyHtoD(b->copy_src + off, b->host_chunk, n)) != CUDA_SUCCESS)
            return mj_cuda_fail(r, "bench: cuMemcpyHtoD(copy source)");
    }
    if ((r = cu->cuCtxSynchronize()) != CUDA_SUCCESS)
        return mj_cuda_fail(r, "bench: cuCtxSynchronize(copy source)");
    for (int i = 0; i < 3; i++)
        if ((st = op_copy(b, i, &copy_n)) != MJ_OK) return st;
    if ((r = cu->cuStreamSynchronize(b->stream)) != CUDA_SUCCESS)
        return mj_cuda_fail(r, "bench: copy warm-up");
    double copy_ms;
    if ((st = time_each(b, iters, op_copy, &copy_n, &copy_ms)) != MJ_OK) return st;
    *gbps = 2.0 * (double)copy_n / (copy_ms * 1e6);
    b->copy_n = copy_n;
    b->copy_ms = copy_ms;
    return MJ_OK;
}

/* The fixed cost of one launch: the median time of zero-token pre-dispatch
 * launches (same kernels and launch path, writing only the padding slots),
 * queued behind copies that keep the GPU busy while the host enqueues them.
 * Needs copy_run first (its buffers and copy time size the lead). */
static mj_status launch_run(bench *b, mj_runtime *rt, int iters, double *us) {
    const int lead = (int)(iters * BENCH_LEAD_US_PER_LAUNCH / (b->copy_ms * 1e3)) + 1;
    mj_status st;
    for (int i = 0; i < lead; i++)
        if ((st = op_copy(b, i, &b->copy_n)) != MJ_OK) return st;
    pd_args args = {rt, 0};
    double ms;
    if ((st = time_each(b, iters, op_pre_dispatch, &args, &ms)) != MJ_OK) return st;
    *us = ms * 1e3;
    return MJ_OK;
}

static mj_status bench_run(bench *b, mj_runtime *rt, mj_format fmt, int hidden, int num_tokens,
                           int topk, int iters, mj_bench_pre_dispatch_result *out) {
    const mj_cuda *cu = b->cu;
    CUresult r;
    mj_status st;
    const size_t T = (size_t)num_tokens, H = (size_t)hidden, K = (size_t)topk;
    const size_t x_bytes = T * H * 2, pair_bytes = T * K * 4;
    const int group = mj_format_group((int)fmt);

    int l2 = 0;
    r = cu->cuDeviceGetAttribute(&l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, rt->device);
    if (r != CUDA_SUCCESS) return mj_cuda_fail(r, "bench: cuDeviceGetAttribute(L2 size)");
    const size_t set_bytes = x_bytes + 2 * pair_bytes;
    /* A power of two, so it divides the expert count as emulated ranks must. */
    b->num_sets = BENCH_MIN_SETS;
    while (b->num_sets < BENCH_MAX_SETS && (size_t)b->num_sets * set_bytes <= 2 * (size_t)l2)
        b->num_sets *= 2;
    if ((size_t)b->num_sets * set_bytes <= 2 * (size_t)l2)
        mj_log(MJ_LOG_WARN,
               "bench pre-dispatch: %d input sets of %zu bytes do not exceed twice the %d-byte "
               "L2; inputs of this small shape may be partly cache-resident",
               b->num_sets, set_bytes, l2);

    /* Each input set writes its own emulated rank's region, so outputs rotate too. */
    mj_symm_config cfg = {.struct_size = sizeof(mj_symm_config),
                          .hidden = hidden,
                          .num_experts = BENCH_EXPERTS,
                          .num_topk = topk,
                          .max_tokens_per_rank = num_tokens,
                          .dispatch_format = fmt,
                          .num_ranks = b->num_sets};
    if ((st = mj_symm_buffer_create(rt, &cfg, &b->buf)) != MJ_OK) return st;

    if ((r = cu->cuStreamCreate(&b->stream, CU_STREAM_NON_BLOCKING)) != CUDA_SUCCESS)
        return mj_cuda_fail(r, "bench: cuStreamCreate");
    if ((st = mj_bench_timer_init(&b->timer, cu, iters)) != MJ_OK) return st;
    b->host_x = malloc(x_bytes);
    b->host_ids = malloc(pair_bytes);
    b->host_weights = malloc(pair_bytes);
    if (!b->host_x || !b->host_ids || !b->host_weights)
        return mj_fail(MJ_ERR_NOMEM, "bench: out of host memory");

    uint64_t rng = (uint64_t)time(NULL) ^ ((uint64_t)clock() << 32) ^ 0x9E3779B97F4A7C15ull;
    for (int s = 0; s < b->num_sets; s++) {
        if ((st = alloc(cu, &b->x[s], x_bytes, "bench: cuMemAlloc(x)")) != MJ_OK ||
            (st = alloc(cu, &b->ids[s], pair_bytes, "bench: cuMemAlloc(topk ids)")) != MJ_OK ||
            (st = alloc(cu, &b->weights[s], pair_bytes, "bench: cuMemAlloc(topk weights)")) !=
                MJ_OK)
            return st;
        fill_host_set(b, &rng, hidden, num_tokens, topk);
        if ((r = cu->cuMemcpyHtoD(b->x[s], b->host_x, x_bytes)) != CUDA_SUCCESS ||
            (r = cu->cuMemcpyHtoD(b->ids[s], b->host_ids, pair_bytes)) != CUDA_SUCCESS ||
            (r = cu->cuMemcpyHtoD(b->weights[s], b->host_weights, pair_bytes)) != CUDA_SUCCESS)
            return mj_cuda_fail(r, "bench: cuMemcpyHtoD(inputs)");
    }
    /* A pageable upload may still be in flight when cuMemcpyHtoD returns, and the
     * stream is non-blocking. */
    if ((r = cu->cuCtxSynchronize()) != CUDA_SUCCESS)
        return mj_cuda_fail(r, "bench: cuCtxSynchronize(inputs)");

    /* The first launch compiles or loads the kernels; the rest settle clocks. */
    pd_args args = {rt, num_tokens};
    for (int i = 0; i < BENCH_WARMUP; i++)
        if ((st = op_pre_dispatch(b, i, &args)) != MJ_OK) return st;
    if ((r = cu->cuStreamSynchronize(b->stream)) != CUDA_SUCCESS)
        return mj_cuda_fail(r, "bench: pre-dispatch warm-up");
    double kernel_ms;
    if ((st = time_each(b, iters, op_pre_dispatch, &args, &kernel_ms)) != MJ_OK) return st;

    double bytes = (double)x_bytes + (double)(T * H * (size_t)mj_format_bits((int)fmt) / 8) +
                   (group ? (double)(T * (H / (size_t)group)) : 0.0) +
                   (fmt == MJ_FORMAT_NVFP4 ? 4.0 * (double)T : 0.0) + 4.0 * (double)pair_bytes;

    if ((st = copy_run(b, (size_t)(bytes / 2), iters, &rng, &out->copy_gbps)) != MJ_OK ||
        (st = launch_run(b, rt, iters, &out->launch_us)) != MJ_OK)
        return st;
    out->bytes = bytes;
    out->kernel_us = kernel_ms * 1e3;
    out->kernel_gbps = bytes / (kernel_ms * 1e6);
    /* The copy moved at least as many bytes as the kernel; scale its time to the same bytes. */
    out->copy_us = bytes / (out->copy_gbps * 1e3);
    out->fraction_of_copy = out->kernel_gbps / out->copy_gbps;
    out->floor_us = out->launch_us + out->copy_us;
    out->fraction_of_floor = out->floor_us / out->kernel_us;
    return MJ_OK;
}

mj_status mj_bench_pre_dispatch(mj_runtime *rt, mj_format fmt, int hidden, int num_tokens,
                                int num_topk, int iters, mj_bench_pre_dispatch_result *out) {
    if (!rt || !out)
        return mj_fail(MJ_ERR_INVALID_ARG, "mj_bench_pre_dispatch: rt and out must not be NULL");
    if ((int)fmt < 0 || fmt >= MJ_FORMAT_COUNT_)
        return mj_fail(MJ_ERR_INVALID_ARG, "mj_bench_pre_dispatch: unknown format %d", (int)fmt);
    if (hidden <= 0 || num_tokens <= 0 || num_topk <= 0 || iters < 0 || iters > BENCH_MAX_ITERS)
        return mj_fail(MJ_ERR_INVALID_ARG,
                       "mj_bench_pre_dispatch: hidden (%d), num_tokens (%d) and num_topk (%d) "
                       "must be positive and iters (%d) in 0..%d (0 = %d)",
                       hidden, num_tokens, num_topk, iters, BENCH_MAX_ITERS, BENCH_DEFAULT_ITERS);
    if (iters == 0) iters = BENCH_DEFAULT_ITERS;
    mj_status st = mj_runtime_bind(rt);
    if (st != MJ_OK) return st;

    bench b;
    memset(&b, 0, sizeof b);
    b.cu = rt->cu;
    memset(out, 0, sizeof *out);
    st = bench_finish(&b, bench_run(&b, rt, fmt, hidden, num_tokens, num_topk, iters, out));
    if (st != MJ_OK) memset(out, 0, sizeof *out);
    return st;
}

mj_status mj_bench_copy_gbps(mj_runtime *rt, size_t min_bytes, int iters, double *gbps) {
    mj_status st = mj_runtime_bind(rt);
    if (st != MJ_OK) return st;
    bench b;
    memset(&b, 0, sizeof b);
    b.cu = rt->cu;
    CUresult r = b.cu->cuStreamCreate(&b.stream, CU_STREAM_NON_BLOCKING);
    if (r != CUDA_SUCCESS) return bench_finish(&b, mj_cuda_fail(r, "bench: cuStreamCreate"));
    if ((st = mj_bench_timer_init(&b.timer, b.cu, iters)) != MJ_OK) return bench_finish(&b, st);
    uint64_t rng = (uint64_t)time(NULL) ^ 0x9E3779B97F4A7C15ull;
    return bench_finish(&b, copy_run(&b, min_bytes, iters, &rng, gbps));
}
