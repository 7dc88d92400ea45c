/*
 * MegaMoE benchmark: the median layer time next to the per-rank floor, the
 * time the device needs just to stream the local expert weights that uniform
 * routing touches at its measured copy bandwidth. Decode is weight-bound, so
 * the fraction of that floor is what the kernel leaves on the table.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "include/megajit.h"
#include "runtime/configs.h"
#include "runtime/error.h"
#include "runtime/nccl_lib.h"
#include "runtime/runtime.h"
#include "templates/layout/symm_layout.h"
#include "tools/bench/bench.h"
#include "tools/bench/launcher.h"

#define MOE_DEFAULT_ITERS 100
#define MOE_MAX_ITERS 100000
/* The first steps load the kernels and settle clocks and the ranks' skew. */
#define MOE_WARMUP_STEPS 5
#define COPY_ITERS 20

typedef struct moe_bench {
    const mj_cuda *cu;
    int ranks, local_ranks, own_rank; /* local_ranks: R emulated here, or 1 */
    mj_symm_buffer *buf;
    mj_weights *w[MJ_MAX_RANKS];
    CUstream s[MJ_MAX_RANKS];
    CUdeviceptr x[MJ_MAX_RANKS], ids[MJ_MAX_RANKS], tw[MJ_MAX_RANKS], y[MJ_MAX_RANKS];
    CUdeviceptr wdata, wscales;
    CUevent *events;
    float *times_ms;
    int iters;
    void *host;
} moe_bench;

static void moe_free(moe_bench *b) {
    const mj_cuda *cu = b->cu;
    for (int r = 0; r < b->local_ranks; r++)
        if (b->s[r]) cu->cuStreamSynchronize(b->s[r]);
    if (b->events)
        for (int i = 0; i < 2 * b->iters; i++)
            if (b->events[i]) cu->cuEventDestroy(b->events[i]);
    for (int r = 0; r < b->local_ranks; r++) {
        if (b->w[r]) mj_weights_destroy(b->w[r]);
        CUdeviceptr p[] = {b->x[r], b->ids[r], b->tw[r], b->y[r]};
        for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
            if (p[i]) cu->cuMemFree(p[i]);
        if (b->s[r]) cu->cuStreamDestroy(b->s[r]);
    }
    if (b->wdata) cu->cuMemFree(b->wdata);
    if (b->wscales) cu->cuMemFree(b->wscales);
    if (b->buf) mj_symm_buffer_destroy(b->buf);
    free(b->events);
    free(b->times_ms);
    free(b->host);
}

static mj_status upload(const mj_cuda *cu, CUdeviceptr *p, const void *h, size_t n,
                        const char *what) {
    CUresult r = cu->cuMemAlloc(p, n);
    if (r != CUDA_SUCCESS) {
        *p = 0;
        return mj_cuda_fail(r, what);
    }
    r = cu->cuMemcpyHtoD(*p, h, n);
    return r == CUDA_SUCCESS ? MJ_OK : mj_cuda_fail(r, what);
}

/* Random BF16 of magnitude 2^-9..2^-4 (exponent 118..123): finite through
 * both GEMMs, and the values do not change the time. */
static uint16_t small_bf16(uint64_t *rng) {
    uint64_t v = mj_bench_rng(rng);
    return (uint16_t)((v & 0x807Fu) | ((118u + (unsigned)((v >> 16) % 6)) << 7));
}

/* One expert projection's worth of random weight bytes and scales; every
 * projection of every local expert loads from these (gate and up are [I][H],
 * down [H][I]: the same element count). E4M3 bytes keep exponent <= 7 (never
 * NaN); UE8M0 scales 120..130 and UE4M3 0x30..0x40 are inside the ranges the
 * loader accepts. */
static mj_status make_weight_source(moe_bench *b, const mj_bench_mega_moe_options *o,
                                    uint64_t *rng) {
    const size_t elems = (size_t)o->hidden * (size_t)o->intermediate;
    const int fmt = (int)o->weight_format, bits = mj_format_bits(fmt), group = mj_format_group(fmt);
    const size_t data_bytes = elems * (size_t)bits / 8, sf_bytes = group ? elems / group : 0;
    uint8_t *h = malloc(data_bytes > sf_bytes ? data_bytes : sf_bytes);
    if (!h) return mj_fail(MJ_ERR_NOMEM, "bench mega-moe: out of host memory");
    if (fmt == MJ_FORMAT_BF16) {
        uint16_t *v = (uint16_t *)h;
        for (size_t i = 0; i < elems; i++)
            v[i] = small_bf16(rng);
    } else {
        for (size_t i = 0; i < data_bytes; i++) {
            uint8_t v = (uint8_t)mj_bench_rng(rng);
            h[i] = fmt == MJ_FORMAT_MXFP8 ? (uint8_t)((v & 0x80u) | (v & 0x3Fu)) : v;
        }
    }
    mj_status st = upload(b->cu, &b->wdata, h, data_bytes, "bench mega-moe: weight source");
    if (st == MJ_OK && group) {
        for (size_t i = 0; i < sf_bytes; i++) {
            unsigned v = (unsigned)(mj_bench_rng(rng) >> 33);
            h[i] = (uint8_t)(fmt == MJ_FORMAT_NVFP4 ? 0x30u + v % 17u : 120u + v % 11u);
        }
        st = upload(b->cu, &b->wscales, h, sf_bytes, "bench mega-moe: scale source");
    }
    free(h);
    return st;
}

/* Uniform routing: K distinct experts per token, weights in (0.05, 1). */
static mj_status make_rank_inputs(moe_bench *b, int lr, const mj_bench_mega_moe_options *o,
                                  uint64_t *rng) {
    const size_t T = (size_t)o->num_tokens, H = (size_t)o->hidden, K = (size_t)o->num_topk;
    uint16_t *x = b->host;
    int32_t *ids = (int32_t *)(x + T * H);
    float *tw = (float *)(ids + T * K);
    for (size_t i = 0; i < T * H; i++)
        x[i] = (uint16_t)(small_bf16(rng) + (5u << 7)); /* 2^-4..2^1 */
    for (size_t t = 0; t < T; t++)
        for (size_t k = 0; k < K; k++) {
            int32_t v;
            int dup;
            do {
                v = (int32_t)(mj_bench_rng(rng) % (uint64_t)o->num_experts);
                dup = 0;
                for (size_t j = 0; j < k; j++)
                    dup |= ids[t * K + j] == v;
            } while (dup);
            ids[t * K + k] = v;
            tw[t * K + k] = 0.05f + 0.95f * (float)(mj_bench_rng(rng) >> 40) / 16777216.0f;
        }
    mj_status st;
    if ((st = upload(b->cu, &b->x[lr], x, T * H * 2, "bench mega-moe: x")) != MJ_OK ||
        (st = upload(b->cu, &b->ids[lr], ids, T * K * 4, "bench mega-moe: top-k ids")) != MJ_OK ||
        (st = upload(b->cu, &b->tw[lr], tw, T * K * 4, "bench mega-moe: top-k weights")) != MJ_OK)
        return st;
    CUresult r = b->cu->cuMemAlloc(&b->y[lr], T * H * 2);
    return r == CUDA_SUCCESS ? MJ_OK : mj_cuda_fail(r, "bench mega-moe: y");
}

/* The benchmarked layer as rank `rank` sees it; its buffer config derives from it. */
static mj_moe_config layer_of(const mj_bench_mega_moe_options *o, int rank) {
    return (mj_moe_config){.struct_size = sizeof(mj_moe_config),
                           .hidden = o->hidden,
                           .intermediate = o->intermediate,
                           .num_experts = o->num_experts,
                           .num_topk = o->num_topk,
                           .num_ranks = o->num_ranks,
                           .rank = rank,
                           .max_tokens_per_rank = o->num_tokens,
                           .weight_format = o->weight_format,
                           .dispatch_format = o->dispatch_format,
                           .activation = MJ_ACTIVATION_SWIGLU};
}

static mj_status load_rank_weights(moe_bench *b, mj_runtime *rt, int lr,
                                   const mj_bench_mega_moe_options *o) {
    mj_moe_config mc = layer_of(o, b->local_ranks > 1 ? lr : b->own_rank);
    mj_status st = mj_weights_create(rt, &mc, &b->w[lr]);
    const void *data = (const void *)(uintptr_t)b->wdata;
    const void *sf = b->wscales ? (const void *)(uintptr_t)b->wscales : NULL;
    for (int e = 0; st == MJ_OK && e < o->num_experts / o->num_ranks; e++)
        for (int p = MJ_PROJ_GATE; st == MJ_OK && p <= MJ_PROJ_DOWN; p++)
            st = mj_weights_load(b->w[lr], e, (mj_projection)p, data, sf, 1);
    return st;
}

/* All local ranks' launches of one step, back to back on their own streams:
 * emulated ranks wait for each other inside the kernel, so all must be in flight. */
static mj_status launch_step(moe_bench *b, mj_runtime *rt, int num_tokens) {
    for (int lr = 0; lr < b->local_ranks; lr++) {
        mj_status st = mj_mega_moe(rt, b->buf, b->w[lr], (void *)(uintptr_t)b->y[lr], num_tokens,
                                   NULL, b->s[lr]);
        if (st != MJ_OK) return st;
    }
    return MJ_OK;
}

static mj_status sync_all(moe_bench *b) {
    for (int lr = 0; lr < b->local_ranks; lr++) {
        CUresult r = b->cu->cuStreamSynchronize(b->s[lr]);
        if (r != CUDA_SUCCESS) return mj_cuda_fail(r, "bench mega-moe: stream synchronize");
    }
    return MJ_OK;
}

static mj_status moe_run(moe_bench *b, mj_runtime *rt, const mj_bench_mega_moe_options *o,
                         mj_bench_mega_moe_result *out) {
    const mj_cuda *cu = b->cu;
    CUresult r;
    mj_status st;
    uint64_t rng = ((uint64_t)time(NULL) ^ ((uint64_t)clock() << 32) ^ 0x9E3779B97F4A7C15ull) +
                   (uint64_t)b->own_rank * 0xD1B54A32D192ED03ull;
    const size_t T = (size_t)o->num_tokens, H = (size_t)o->hidden, K = (size_t)o->num_topk;
    b->host = malloc(T * H * 2 + 2 * T * K * 4);
    b->events = calloc((size_t)b->iters * 2, sizeof *b->events);
    b->times_ms = calloc((size_t)b->iters, sizeof *b->times_ms);
    if (!b->host || !b->events || !b->times_ms)
        return mj_fail(MJ_ERR_NOMEM, "bench mega-moe: out of host memory");
    for (int i = 0; i < 2 * b->iters; i++)
        if ((r = cu->cuEventCreate(&b->events[i], CU_EVENT_DEFAULT)) != CUDA_SUCCESS)
            return mj_cuda_fail(r, "bench mega-moe: cuEventCreate");

    /* The buffer records the family SM count: emulated ranks share the device. */
    int saved_sms = 0;
    if ((st = mj_family_get_num_sms(rt, MJ_FAMILY_MEGA_MOE, &saved_sms)) != MJ_OK) return st;
    if (b->local_ranks > 1) {
        int sms = rt->device_sms / b->local_ranks;
        if ((st = mj_family_set_num_sms(rt, MJ_FAMILY_MEGA_MOE, sms < 1 ? 1 : sms)) != MJ_OK)
            return st;
    }
    const mj_moe_config layer = layer_of(o, b->own_rank);
    const mj_symm_config cfg = mj_symm_config_of_moe(&layer);
    st = o->nccl_comm ? mj_symm_buffer_create_nccl(rt, &cfg, o->nccl_comm, &b->buf)
                      : mj_symm_buffer_create(rt, &cfg, &b->buf);
    int run_sms = 0;
    if (st == MJ_OK) st = mj_symm_buffer_info(b->buf, NULL, &run_sms, NULL);
    mj_status restore = mj_family_set_num_sms(rt, MJ_FAMILY_MEGA_MOE, saved_sms);
    if (st != MJ_OK || (st = restore) != MJ_OK) return st;

    if ((st = make_weight_source(b, o, &rng)) != MJ_OK) return st;
    for (int lr = 0; lr < b->local_ranks; lr++) {
        if ((r = cu->cuStreamCreate(&b->s[lr], CU_STREAM_NON_BLOCKING)) != CUDA_SUCCESS)
            return mj_cuda_fail(r, "bench mega-moe: cuStreamCreate");
        if ((st = load_rank_weights(b, rt, lr, o)) != MJ_OK ||
            (st = make_rank_inputs(b, lr, o, &rng)) != MJ_OK)
            return st;
    }
    /* Uploads from pageable memory may still be in flight on return. */
    if ((r = cu->cuCtxSynchronize()) != CUDA_SUCCESS)
        return mj_cuda_fail(r, "bench mega-moe: inputs");
    for (int lr = 0; lr < b->local_ranks; lr++) {
        int rank = b->local_ranks > 1 ? lr : b->own_rank;
        st = mj_pre_dispatch(rt, b->buf, rank, (const void *)(uintptr_t)b->x[lr],
                             (const int32_t *)(uintptr_t)b->ids[lr],
                             (const float *)(uintptr_t)b->tw[lr], NULL, o->num_tokens, b->s[lr]);
        if (st != MJ_OK) return st;
    }
    if ((st = sync_all(b)) != MJ_OK) return st;
    for (int lr = 0; lr < b->local_ranks; lr++)
        if ((st = mj_mega_moe_warmup(rt, b->buf, b->w[lr], o->num_tokens)) != MJ_OK) return st;
    /* Real ranks: nobody spins in the kernel while a peer still compiles. */
    if (o->nccl_comm && (st = mj_launcher_barrier(o->nccl_comm, o->num_ranks)) != MJ_OK) return st;
    for (int i = 0; i < MOE_WARMUP_STEPS; i++)
        if ((st = launch_step(b, rt, o->num_tokens)) != MJ_OK) return st;
    if ((st = sync_all(b)) != MJ_OK) return st;
    if (o->nccl_comm && (st = mj_launcher_barrier(o->nccl_comm, o->num_ranks)) != MJ_OK) return st;

    /* A step ends on the first local rank's stream only when every rank's
     * kernel of that step has run: they wait for each other inside. */
    for (int i = 0; i < b->iters; i++) {
        if ((r = cu->cuEventRecord(b->events[2 * i], b->s[0])) != CUDA_SUCCESS)
            return mj_cuda_fail(r, "bench mega-moe: cuEventRecord");
        if ((st = launch_step(b, rt, o->num_tokens)) != MJ_OK) return st;
        if ((r = cu->cuEventRecord(b->events[2 * i + 1], b->s[0])) != CUDA_SUCCESS)
            return mj_cuda_fail(r, "bench mega-moe: cuEventRecord");
    }
    if ((st = sync_all(b)) != MJ_OK) return st;
    for (int i = 0; i < b->iters; i++)
        if ((r = cu->cuEventElapsedTime(&b->times_ms[i], b->events[2 * i], b->events[2 * i + 1])) !=
            CUDA_SUCCESS)
            return mj_cuda_fail(r, "bench mega-moe: cuEventElapsedTime");
    const double step_ms = mj_bench_median_ms(b->times_ms, b->iters);
    if (step_ms <= 0.0)
        return mj_fail(MJ_ERR_CUDA, "bench mega-moe: the median step time was not positive");

    const int fmt = (int)o->weight_format, group = mj_format_group(fmt);
    const double E = o->num_experts, local = E / o->num_ranks;
    const double hit = local * (1.0 - pow(1.0 - (double)o->num_topk / E,
                                          (double)o->num_tokens * (double)o->num_ranks));
    const double hi = (double)o->hidden * (double)o->intermediate;
    const double per_expert = 3.0 * hi * mj_format_bits(fmt) / 8.0 + (group ? 3.0 * hi / group : 0);
    double gbps = 0;
    if ((st = mj_bench_copy_gbps(rt, 0, COPY_ITERS, &gbps)) != MJ_OK) return st;
    out->kernel_us = step_ms * 1e3;
    out->experts_hit = hit;
    out->weight_bytes = hit * per_expert;
    out->copy_gbps = gbps;
    out->rank_floor_us = out->weight_bytes / (gbps * 1e3);
    out->ranks_on_device = b->local_ranks;
    out->floor_us = out->rank_floor_us * b->local_ranks;
    out->fraction_of_floor = out->floor_us / out->kernel_us;
    out->num_sms = run_sms;
    return mj_mega_moe_block_m(&layer, o->num_tokens, &out->block_m);
}

mj_status mj_bench_mega_moe(mj_runtime *rt, const mj_bench_mega_moe_options *o,
                            mj_bench_mega_moe_result *out) {
    if (!rt || !o || !out)
        return mj_fail(MJ_ERR_INVALID_ARG, "mj_bench_mega_moe: rt, o and out must not be NULL");
    if ((int)o->weight_format < 0 || o->weight_format >= MJ_FORMAT_COUNT_ ||
        (int)o->dispatch_format < 0 || o->dispatch_format >= MJ_FORMAT_COUNT_)
        return mj_fail(MJ_ERR_INVALID_ARG, "mj_bench_mega_moe: unknown format");
    if (o->hidden <= 0 || o->intermediate <= 0 || o->num_experts <= 0 || o->num_topk <= 0 ||
        o->num_topk > o->num_experts || o->num_tokens <= 0 || o->num_ranks < 1 ||
        o->num_ranks > MJ_MAX_RANKS || o->num_experts % o->num_ranks || o->iters < 0 ||
        o->iters > MOE_MAX_ITERS)
        return mj_fail(MJ_ERR_INVALID_ARG,
                       "mj_bench_mega_moe: hidden %d, intermediate %d, experts %d, topk %d "
                       "(<= experts), tokens %d must be positive, ranks %d in 1..%d dividing the "
                       "experts, iters %d in 0..%d (0 = %d)",
                       o->hidden, o->intermediate, o->num_experts, o->num_topk, o->num_tokens,
                       o->num_ranks, MJ_MAX_RANKS, o->iters, MOE_MAX_ITERS, MOE_DEFAULT_ITERS);
    mj_status st = mj_runtime_bind(rt);
    if (st != MJ_OK) return st;
    moe_bench b;
    memset(&b, 0, sizeof b);
    b.cu = rt->cu;
    b.ranks = o->num_ranks;
    b.local_ranks = o->nccl_comm ? 1 : o->num_ranks;
    b.iters = o->iters ? o->iters : MOE_DEFAULT_ITERS;
    if (o->nccl_comm) {
        const mj_nccl *n = mj_nccl_get();
        if (!n) return MJ_ERR_UNSUPPORTED;
        ncclResult_t nr = n->ncclCommUserRank((ncclComm_t)o->nccl_comm, &b.own_rank);
        if (nr != ncclSuccess) return mj_nccl_fail(n, nr, "mj_bench_mega_moe: ncclCommUserRank");
    }
    memset(out, 0, sizeof *out);
    st = moe_run(&b, rt, o, out);
    char why[1024];
    snprintf(why, sizeof why, "%s", mj_last_error());
    moe_free(&b);
    if (st == MJ_OK) return MJ_OK;
    memset(out, 0, sizeof *out);
    return mj_fail(st, "%s", why);
}
