/*
 * MegaMoE benchmark: one (shape, format row, routing) on one symmetric buffer
 * and one set of weights, every token count of the list on them (the buffer
 * sized for the largest, as a server creates it once).
 *
 * Per token count: several input sets (tokens, top-k ids and weights; the
 * routing of each hits other experts), cycled so no step finds its weights or
 * tokens in L2; each step pre-dispatches its set. Two passes of CUDA-event
 * timed steps: MegaMoE alone (the events around the launches, after the
 * pre-dispatch is done) and pre-dispatch + MegaMoE back to back. Then one
 * more launch on set 0 with a poisoned output, checked on the host against
 * the fp64 reference (tools/bench/moe_check.h) while the next counts run.
 */
#include "tools/bench/mega_moe.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apis/mega_moe_impl.h"
#include "runtime/clock.h"
#include "runtime/configs.h"
#include "runtime/error.h"
#include "runtime/nccl_lib.h"
#include "runtime/runtime.h"
#include "templates/layout/symm_layout.h"
#include "tools/bench/bench.h"
#include "tools/bench/launcher.h"
#include "tools/bench/moe_weights.h"
#include "tools/bench/routing_dump.h"
#include "tools/bench/timer.h"

/* Input sets per token count: enough that their BF16 tokens exceed twice the
 * L2 where that fits in MAX_SETS (the weights they hit always do: one
 * DeepSeek-V3 expert is 23-88 MB), at least MIN_SETS. */
#define MIN_SETS 4
#define MAX_SETS 8
/* Without --iters: steps of each pass filling about PASS_BUDGET_S. */
#define PASS_BUDGET_S 0.4
#define MIN_AUTO_ITERS 3
#define MAX_AUTO_ITERS 200
/* Synchronized, untimed steps for WARM_S before the passes: the SM clock
 * comes back up from idle (345 MHz on an H100) after the host-side check of
 * the previous token count. Without them a short pass (--iters 10) of a
 * configuration that was not the first of its process read up to 13% slow,
 * MegaMoE alone above pre-dispatch + MegaMoE (Qwen3-235B mxfp4-a16 at T = 64
 * on an H100: 493 against 437 us). Each step waits for the last: steps
 * queued for 0.1 s of host time (up to 1000, the GPU far behind) ran the card
 * into its power cap (700 W, SM clock down to 1410 MHz) and DeepSeek-V3
 * mxfp4-a16 at T = 256 read 2068-2178 against 2030 us (bench/RESULTS.md,
 * thirty-first session). Real ranks (a process each)
 * run WARM_STEPS_RANKS instead: every rank must launch as many steps, as each
 * launch waits for its peers'. */
#define WARM_S 0.05
#define WARM_STEPS_RANKS 10
/* Stream seeds of one configuration: routing, tokens, weights. */
enum { SEED_ROUTING = 1, SEED_TOKENS = 2, SEED_WEIGHTS = 3, SEED_SHARED = 4 };

typedef struct moe_run {
    mj_runtime *rt;
    const mj_cuda *cu;
    const mj_bench_mega_moe_options *o;
    int ranks, local_ranks, own_rank, local_experts;
    int restore_sms, saved_sms; /* emulated ranks: the MegaMoE family's SM count to put back */
    int num_sms;
    int l2_bytes;
    mj_symm_buffer *buf;
    mj_weights *w[MJ_MAX_RANKS];
    CUstream s[MJ_MAX_RANKS];
    CUevent go, done[MJ_MAX_RANKS];
    CUdeviceptr y[MJ_MAX_RANKS];
    CUdeviceptr wdata, wsf;
    mj_bench_weights *hw;
    mj_bench_timer timer;
    uint16_t *y_host; /* one rank's y: max_tokens x H */
} moe_run;

/* One token count's inputs. Routing of every rank (a rank's floor needs who
 * routes to its experts), tokens of the local ranks. */
typedef struct moe_sets {
    int n, tokens;
    int32_t *ids[MAX_SETS]; /* [ranks x tokens][K] */
    float *tw[MAX_SETS];
    uint16_t *x0; /* set 0 of every local rank: [local ranks][tokens][H], for the check */
    CUdeviceptr x[MAX_SETS][MJ_MAX_RANKS], dids[MAX_SETS][MJ_MAX_RANKS],
        dtw[MAX_SETS][MJ_MAX_RANKS];
} moe_sets;

static int global_rank(const moe_run *b, int lr) {
    return b->local_ranks > 1 ? lr : b->own_rank;
}

static mj_status cu_check(CUresult r, const char *what) {
    return r == CUDA_SUCCESS ? MJ_OK : mj_cuda_fail(r, what);
}

static mj_status upload(const mj_cuda *cu, CUdeviceptr *p, const void *h, size_t n,
                        const char *what) {
    CUresult r = cu->cuMemAlloc(p, n);
    if (r != CUDA_SUCCESS) {
        *p = 0;
        return mj_cuda_fail(r, what);
    }
    return cu_check(cu->cuMemcpyHtoD(*p, h, n), what);
}

mj_moe_config mj_bench_moe_layer(const mj_bench_moe_shape *s, const mj_moe_format_row *row,
                                 const mj_bench_moe_variant *v, int ranks, int rank,
                                 int max_tokens) {
    return (mj_moe_config){.struct_size = sizeof(mj_moe_config),
                           .hidden = s->hidden,
                           .intermediate = s->intermediate,
                           .num_experts = s->experts,
                           .num_topk = s->topk,
                           .num_ranks = ranks,
                           .rank = rank,
                           .max_tokens_per_rank = max_tokens,
                           .weight_format = (mj_format)row->weight_fmt,
                           .dispatch_format = (mj_format)row->dispatch_fmt,
                           .activation = (mj_activation)v->activation,
                           .clamp = v->clamp,
                           .expert_biases = v->biases,
                           .shared_intermediate = v->shared * s->intermediate,
                           .shared_format =
                               v->shared ? (mj_format)mj_bench_shared_format(v, row) : 0};
}

static mj_moe_config layer_of(const mj_bench_mega_moe_options *o, int rank) {
    return mj_bench_moe_layer(o->shape, o->row, &o->variant, o->num_ranks, rank, o->max_tokens);
}

/* The seed of everything a configuration draws: the same on every rank and
 * for every format row of a shape, so their routing is the same and the
 * PyTorch peer can be given it. */
static uint64_t config_seed(const mj_bench_mega_moe_options *o, int tokens) {
    const mj_bench_moe_shape *s = o->shape;
    const uint64_t parts[] = {
        (uint64_t)s->hidden,  (uint64_t)s->intermediate, (uint64_t)s->experts, (uint64_t)s->topk,
        (uint64_t)o->routing, (uint64_t)o->num_ranks,    (uint64_t)tokens};
    uint64_t h = 0x6d6567616a6974ull; /* "megajit" */
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        h = mj_bench_seed(h, parts[i]);
    return h;
}

/* ------------------------------------------------------------ setup */

static void run_free(moe_run *b) {
    const mj_cuda *cu = b->cu;
    for (int r = 0; r < b->local_ranks; r++)
        if (b->s[r]) cu->cuStreamSynchronize(b->s[r]);
    mj_bench_timer_free(&b->timer);
    for (int r = 0; r < b->local_ranks; r++) {
        if (b->w[r]) mj_weights_destroy(b->w[r]);
        if (b->y[r]) cu->cuMemFree(b->y[r]);
        if (b->done[r]) cu->cuEventDestroy(b->done[r]);
        if (b->s[r]) cu->cuStreamDestroy(b->s[r]);
    }
    if (b->go) cu->cuEventDestroy(b->go);
    if (b->wdata) cu->cuMemFree(b->wdata);
    if (b->wsf) cu->cuMemFree(b->wsf);
    if (b->buf) mj_symm_buffer_destroy(b->buf);
    if (b->restore_sms) mj_family_set_num_sms(b->rt, MJ_FAMILY_MEGA_MOE, b->saved_sms);
    mj_bench_weights_release(b->hw);
    free(b->y_host);
}

/* Every local rank's experts from the weight classes on the device. */
static mj_status load_weights(moe_run *b, int lr) {
    const mj_bench_mega_moe_options *o = b->o;
    mj_moe_config mc = layer_of(o, global_rank(b, lr));
    mj_status st = mj_weights_create(b->rt, &mc, &b->w[lr]);
    const size_t pb = b->hw->data_bytes, sb = b->hw->sf_bytes;
    for (int le = 0; st == MJ_OK && le < b->local_experts; le++) {
        const int e = global_rank(b, lr) * b->local_experts + le;
        const mj_bench_expert_sources src = mj_bench_weights_sources(b->hw, e);
        const int proj[3] = {src.gate, src.up, src.down};
        for (int p = MJ_PROJ_GATE; st == MJ_OK && p <= MJ_PROJ_DOWN; p++) {
            const void *data = (const void *)(uintptr_t)(b->wdata + (size_t)proj[p] * pb);
            const void *sf =
                b->wsf ? (const void *)(uintptr_t)(b->wsf + (size_t)proj[p] * sb) : NULL;
            st = mj_weights_load(b->w[lr], le, (mj_projection)p, data, sf, 1);
        }
        for (int p = MJ_PROJ_GATE; st == MJ_OK && o->variant.biases && p <= MJ_PROJ_DOWN; p++)
            st = mj_weights_load_bias(b->w[lr], le, (mj_projection)p,
                                      mj_bench_weights_bias(b->hw, e, p), 0);
    }
    /* The shared expert, from the host: gate and up are W1's two halves. */
    const mj_bench_weights *hw = b->hw;
    if (st == MJ_OK && o->variant.shared) {
        const size_t d = hw->shared_w1_bytes / 2, sf = hw->shared_w1_sf_bytes / 2;
        const uint8_t *w1_sf = hw->shared_w1_sf;
        st = mj_weights_load_shared(b->w[lr], MJ_PROJ_GATE, hw->shared_w1, w1_sf, 0);
        if (st == MJ_OK)
            st = mj_weights_load_shared(b->w[lr], MJ_PROJ_UP, hw->shared_w1 + d,
                                        w1_sf ? w1_sf + sf : NULL, 0);
        if (st == MJ_OK)
            st = mj_weights_load_shared(b->w[lr], MJ_PROJ_DOWN, hw->shared_w2, hw->shared_w2_sf, 0);
    }
    return st;
}

static mj_status run_setup(moe_run *b) {
    const mj_bench_mega_moe_options *o = b->o;
    const mj_cuda *cu = b->cu;
    mj_status st;
    CUresult r =
        cu->cuDeviceGetAttribute(&b->l2_bytes, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, b->rt->device);
    if (r != CUDA_SUCCESS) return mj_cuda_fail(r, "bench mega-moe: cuDeviceGetAttribute(L2)");
    /* The buffer records the family SM count and every launch must use the
     * same: emulated ranks share the device for the whole run. */
    if (b->local_ranks > 1) {
        const int sms = b->rt->device_sms / b->local_ranks;
        if (sms < 1)
            return mj_fail(MJ_ERR_INVALID_ARG,
                           "bench mega-moe: %d emulated ranks need at least as many SMs; the "
                           "device has %d",
                           b->local_ranks, b->rt->device_sms);
        if ((st = mj_family_get_num_sms(b->rt, MJ_FAMILY_MEGA_MOE, &b->saved_sms)) != MJ_OK ||
            (st = mj_family_set_num_sms(b->rt, MJ_FAMILY_MEGA_MOE, sms)) != MJ_OK)
            return st;
        b->restore_sms = 1;
    }
    const mj_moe_config layer = layer_of(o, b->own_rank);
    const mj_symm_config cfg = mj_symm_config_of_moe(&layer);
    st = o->nccl_comm ? mj_symm_buffer_create_nccl(b->rt, &cfg, o->nccl_comm, &b->buf)
                      : mj_symm_buffer_create(b->rt, &cfg, &b->buf);
    if (st == MJ_OK) st = mj_symm_buffer_info(b->buf, NULL, &b->num_sms, NULL);
    if (st != MJ_OK) return st;

    const mj_bench_moe_shape *sh = o->shape;
    b->hw = mj_bench_weights_new(o->row->weight_fmt, sh->hidden, sh->intermediate,
                                 MJ_BENCH_WEIGHT_CLASSES, o->variant.biases,
                                 mj_bench_seed(config_seed(o, 0), SEED_WEIGHTS));
    if (!b->hw || (o->variant.shared &&
                   mj_bench_weights_add_shared(b->hw, mj_bench_shared_format(&o->variant, o->row),
                                               o->variant.shared * sh->intermediate,
                                               mj_bench_seed(config_seed(o, 0), SEED_SHARED)) != 0))
        return mj_fail(MJ_ERR_NOMEM, "bench mega-moe: out of host memory (weights)");
    const size_t ring = (size_t)(b->hw->classes + 1);
    if ((st = upload(cu, &b->wdata, b->hw->data, ring * b->hw->data_bytes,
                     "bench mega-moe: weight source")) != MJ_OK ||
        (b->hw->sf && (st = upload(cu, &b->wsf, b->hw->sf, ring * b->hw->sf_bytes,
                                   "bench mega-moe: scale source")) != MJ_OK))
        return st;
    const size_t y_bytes = (size_t)o->max_tokens * (size_t)sh->hidden * 2;
    if ((r = cu->cuEventCreate(&b->go, CU_EVENT_DISABLE_TIMING)) != CUDA_SUCCESS) {
        b->go = NULL;
        return mj_cuda_fail(r, "bench mega-moe: cuEventCreate");
    }
    for (int lr = 0; lr < b->local_ranks; lr++) {
        if ((r = cu->cuStreamCreate(&b->s[lr], CU_STREAM_NON_BLOCKING)) != CUDA_SUCCESS) {
            b->s[lr] = NULL;
            return mj_cuda_fail(r, "bench mega-moe: cuStreamCreate");
        }
        if ((r = cu->cuEventCreate(&b->done[lr], CU_EVENT_DISABLE_TIMING)) != CUDA_SUCCESS) {
            b->done[lr] = NULL;
            return mj_cuda_fail(r, "bench mega-moe: cuEventCreate");
        }
        if ((r = cu->cuMemAlloc(&b->y[lr], y_bytes)) != CUDA_SUCCESS) {
            b->y[lr] = 0;
            return mj_cuda_fail(r, "bench mega-moe: cuMemAlloc(y)");
        }
        if ((st = load_weights(b, lr)) != MJ_OK) return st;
    }
    b->y_host = malloc(y_bytes);
    if (!b->y_host) return mj_fail(MJ_ERR_NOMEM, "bench mega-moe: out of host memory (y)");
    return mj_bench_timer_init(&b->timer, cu, o->iters ? o->iters : MAX_AUTO_ITERS);
}

/* ---------------------------------------------------------- input sets */

static void sets_free(const mj_cuda *cu, moe_sets *s) {
    for (int i = 0; i < MAX_SETS; i++) {
        free(s->ids[i]);
        free(s->tw[i]);
        for (int r = 0; r < MJ_MAX_RANKS; r++) {
            CUdeviceptr p[] = {s->x[i][r], s->dids[i][r], s->dtw[i][r]};
            for (size_t j = 0; j < sizeof p / sizeof p[0]; j++)
                if (p[j]) cu->cuMemFree(p[j]);
        }
    }
    free(s->x0);
    free(s);
}

/* Random BF16 tokens of magnitude 2^-4..2^1 (exponent 123..128). */
static void fill_tokens(uint64_t seed, uint16_t *x, size_t n) {
    uint64_t rng = seed;
    for (size_t i = 0; i < n; i++) {
        uint64_t v = mj_bench_rng(&rng);
        x[i] = (uint16_t)((v & 0x807Fu) | ((123u + (unsigned)((v >> 16) % 6)) << 7));
    }
}

static mj_status sets_make(moe_run *b, int tokens, moe_sets **out) {
    const mj_bench_mega_moe_options *o = b->o;
    const mj_bench_moe_shape *sh = o->shape;
    const size_t T = (size_t)tokens, H = (size_t)sh->hidden, K = (size_t)sh->topk;
    const size_t x_bytes = T * H * 2;
    moe_sets *s = calloc(1, sizeof *s);
    uint16_t *x = malloc(x_bytes);
    if (!s || !x) {
        free(s);
        free(x);
        return mj_fail(MJ_ERR_NOMEM, "bench mega-moe: out of host memory (inputs)");
    }
    *out = s;
    s->tokens = tokens;
    s->n = MIN_SETS;
    while (s->n < MAX_SETS && (size_t)s->n * x_bytes <= 2 * (size_t)b->l2_bytes)
        s->n++;
    s->x0 = malloc((size_t)b->local_ranks * x_bytes);
    mj_status st = s->x0 ? MJ_OK : mj_fail(MJ_ERR_NOMEM, "bench mega-moe: out of host memory");
    const uint64_t seed = config_seed(o, tokens);
    for (int i = 0; st == MJ_OK && i < s->n; i++) {
        const size_t pairs = (size_t)b->ranks * T * K;
        s->ids[i] = malloc(pairs * sizeof(int32_t));
        s->tw[i] = malloc(pairs * sizeof(float));
        if (!s->ids[i] || !s->tw[i]) {
            st = mj_fail(MJ_ERR_NOMEM, "bench mega-moe: out of host memory (routing)");
            break;
        }
        const uint64_t set_seed = mj_bench_seed(seed, (uint64_t)i);
        for (int r = 0; st == MJ_OK && r < b->ranks; r++)
            if (mj_bench_route(o->routing, sh->experts, sh->topk, tokens,
                               mj_bench_seed(set_seed, SEED_ROUTING), r,
                               s->ids[i] + (size_t)r * T * K, s->tw[i] + (size_t)r * T * K))
                st = mj_fail(MJ_ERR_NOMEM, "bench mega-moe: out of host memory (routing)");
        for (int lr = 0; st == MJ_OK && lr < b->local_ranks; lr++) {
            const int r = global_rank(b, lr);
            uint16_t *xh = i == 0 ? s->x0 + (size_t)lr * T * H : x;
            fill_tokens(mj_bench_seed(mj_bench_seed(set_seed, SEED_TOKENS), (uint64_t)r), xh,
                        T * H);
            if ((st = upload(b->cu, &s->x[i][lr], xh, x_bytes, "bench mega-moe: x")) == MJ_OK &&
                (st = upload(b->cu, &s->dids[i][lr], s->ids[i] + (size_t)r * T * K,
                             T * K * sizeof(int32_t), "bench mega-moe: top-k ids")) == MJ_OK)
                st = upload(b->cu, &s->dtw[i][lr], s->tw[i] + (size_t)r * T * K,
                            T * K * sizeof(float), "bench mega-moe: top-k weights");
        }
    }
    free(x);
    /* Uploads from pageable memory may still be in flight on return. */
    if (st == MJ_OK) st = cu_check(b->cu->cuCtxSynchronize(), "bench mega-moe: inputs");
    if (st == MJ_OK && o->dump_dir)
        st = mj_bench_dump_routing(o->dump_dir, o->dump_configs, sh, o->routing, b->ranks, tokens,
                                   s->n, s->ids, s->tw);
    return st;
}

/* --------------------------------------------------------------- floor */

/* What this device must move and compute for each set, averaged: the
 * experts hit on its ranks (emulated: all of them; a real rank: its own),
 * their bytes, and its tokens in and out; with a shared expert, each local
 * rank's copy of it (every token of the rank runs it) and one more pair per
 * token. */
static mj_status floor_of(const moe_run *b, const moe_sets *s, mj_bench_moe_point *p) {
    const mj_bench_mega_moe_options *o = b->o;
    const mj_bench_moe_shape *sh = o->shape;
    const size_t pairs = (size_t)b->ranks * (size_t)s->tokens * (size_t)sh->topk;
    const double expert_bytes =
        mj_bench_expert_bytes(o->row->weight_fmt, sh->hidden, sh->intermediate);
    const double token_bytes = mj_bench_token_bytes(o->row->dispatch_fmt, sh->hidden, sh->topk);
    unsigned char *seen = malloc((size_t)b->local_experts);
    if (!seen) return mj_fail(MJ_ERR_NOMEM, "out of memory");
    double hit = 0, routed = 0;
    for (int i = 0; i < s->n; i++)
        for (int lr = 0; lr < b->local_ranks; lr++) {
            const int lo = global_rank(b, lr) * b->local_experts, hi = lo + b->local_experts;
            size_t in_range;
            hit += mj_bench_distinct_experts(s->ids[i], pairs, lo, hi, seen, &in_range);
            routed += (double)in_range;
        }
    free(seen);
    p->experts_hit = hit / s->n;
    const int shared_inter = o->variant.shared * sh->intermediate;
    p->shared_bytes =
        (double)b->local_ranks * mj_bench_shared_bytes(mj_bench_shared_format(&o->variant, o->row),
                                                       sh->hidden, shared_inter, s->tokens);
    p->bytes = p->experts_hit * expert_bytes + (double)b->local_ranks * s->tokens * token_bytes +
               p->shared_bytes;
    p->flops = mj_bench_moe_flops(sh->hidden, sh->intermediate, routed / s->n) +
               mj_bench_moe_flops(sh->hidden, shared_inter, (double)b->local_ranks * s->tokens);
    p->floor =
        mj_bench_floor_of(p->bytes, p->flops, o->ceilings->read_gbps, o->ceilings->bf16_tflops);
    return MJ_OK;
}

/* --------------------------------------------------------------- steps */

/* The other local ranks' streams wait for what stream 0 has done so far. */
static mj_status fork_streams(moe_run *b) {
    if (b->local_ranks == 1) return MJ_OK;
    mj_status st = cu_check(b->cu->cuEventRecord(b->go, b->s[0]), "bench mega-moe: cuEventRecord");
    for (int lr = 1; st == MJ_OK && lr < b->local_ranks; lr++)
        st = cu_check(b->cu->cuStreamWaitEvent(b->s[lr], b->go, 0),
                      "bench mega-moe: cuStreamWaitEvent");
    return st;
}

/* Stream 0 waits for everything the other local ranks' streams have queued. */
static mj_status join_streams(moe_run *b) {
    mj_status st = MJ_OK;
    for (int lr = 1; st == MJ_OK && lr < b->local_ranks; lr++)
        if ((st = cu_check(b->cu->cuEventRecord(b->done[lr], b->s[lr]),
                           "bench mega-moe: cuEventRecord")) == MJ_OK)
            st = cu_check(b->cu->cuStreamWaitEvent(b->s[0], b->done[lr], 0),
                          "bench mega-moe: cuStreamWaitEvent");
    return st;
}

static mj_status pre_dispatch_all(moe_run *b, const moe_sets *s, int set) {
    mj_status st = MJ_OK;
    for (int lr = 0; st == MJ_OK && lr < b->local_ranks; lr++)
        st = mj_pre_dispatch(b->rt, b->buf, global_rank(b, lr),
                             (const void *)(uintptr_t)s->x[set][lr],
                             (const int32_t *)(uintptr_t)s->dids[set][lr],
                             (const float *)(uintptr_t)s->dtw[set][lr], NULL, s->tokens, b->s[lr]);
    return st;
}

/* Every local rank's launch from first_rank on, back to back on its own
 * stream: emulated ranks wait for each other inside the kernel, so all must
 * be in flight. */
static mj_status mega_moe_all(moe_run *b, int tokens, int first_rank) {
    mj_status st = MJ_OK;
    for (int lr = first_rank; st == MJ_OK && lr < b->local_ranks; lr++)
        st = mj_mega_moe(b->rt, b->buf, b->w[lr], (void *)(uintptr_t)b->y[lr], tokens, NULL,
                         b->s[lr]);
    return st;
}

typedef enum pass { PASS_MOE, PASS_PD_MOE } pass;

/* One step on set `set`; timed as interval i when i >= 0. PASS_MOE: the
 * events bracket the MegaMoE launches only, after every rank's
 * pre-dispatch; PASS_PD_MOE: both, back to back. */
static mj_status step(moe_run *b, const moe_sets *s, int set, pass p, int i) {
    mj_status st = MJ_OK;
    if (p == PASS_MOE && (st = pre_dispatch_all(b, s, set)) == MJ_OK) st = join_streams(b);
    if (st == MJ_OK && i >= 0) st = mj_bench_timer_start(&b->timer, i, b->s[0]);
    if (st == MJ_OK) st = fork_streams(b);
    if (st == MJ_OK && p == PASS_PD_MOE) st = pre_dispatch_all(b, s, set);
    if (st == MJ_OK) st = mega_moe_all(b, s->tokens, 0);
    if (st == MJ_OK) st = join_streams(b);
    if (st == MJ_OK && i >= 0) st = mj_bench_timer_stop(&b->timer, i, b->s[0]);
    return st;
}

/* Synchronizes every local stream and turns any rank's device error word (a
 * wait that timed out in the kernel) into a status naming it. */
static mj_status settle(moe_run *b) {
    mj_status st = MJ_OK;
    for (int lr = 0; st == MJ_OK && lr < b->local_ranks; lr++)
        st = cu_check(b->cu->cuStreamSynchronize(b->s[lr]), "bench mega-moe: a launch failed");
    for (int lr = 0; st == MJ_OK && lr < b->local_ranks; lr++)
        st = mj_mega_moe_check_errors(b->rt, b->buf, global_rank(b, lr), b->s[lr]);
    return st;
}

/* Real ranks: nobody starts a launch that waits for peers while one of them
 * still compiles or loads. */
static mj_status align_ranks(moe_run *b) {
    return b->o->nccl_comm ? mj_launcher_barrier(b->o->nccl_comm, b->ranks) : MJ_OK;
}

static mj_status time_pass(moe_run *b, const moe_sets *s, pass p, int iters, double *us) {
    mj_status st = align_ranks(b);
    for (int i = 0; st == MJ_OK && i < iters; i++)
        st = step(b, s, i % s->n, p, i);
    double ms = 0;
    if (st == MJ_OK) st = mj_bench_timer_median(&b->timer, iters, &ms);
    if (st == MJ_OK) st = settle(b);
    *us = ms * 1e3;
    return st;
}

/* Kernels loaded (compiled when the cache lacks them), clocks settled; the
 * host time of one synchronized step sizes the passes. */
static mj_status warm_up(moe_run *b, const moe_sets *s, double *step_s) {
    mj_status st = MJ_OK;
    for (int lr = 0; st == MJ_OK && lr < b->local_ranks; lr++)
        st = mj_mega_moe_warmup(b->rt, b->buf, b->w[lr], s->tokens);
    if (st == MJ_OK) st = align_ranks(b);
    if (st == MJ_OK) st = step(b, s, 0, PASS_PD_MOE, -1);
    if (st == MJ_OK) st = settle(b);
    const double t0 = mj_monotonic_ms();
    if (st == MJ_OK) st = step(b, s, 1 % s->n, PASS_PD_MOE, -1);
    if (st == MJ_OK) st = settle(b);
    *step_s = (mj_monotonic_ms() - t0) / 1e3;
    const double warm_until = mj_monotonic_ms() + WARM_S * 1e3;
    for (int i = 0;
         st == MJ_OK && (b->o->nccl_comm ? i < WARM_STEPS_RANKS : mj_monotonic_ms() < warm_until);
         i++) {
        st = step(b, s, i % s->n, PASS_PD_MOE, -1);
        if (st == MJ_OK) st = settle(b);
    }
    return st;
}

/* --------------------------------------------------------------- check */

/* Set 0 once more with every y poisoned; its scan now, its reference on the
 * checker pool. */
static mj_status check_point(moe_run *b, const moe_sets *s, mj_bench_moe_point *p) {
    const mj_bench_mega_moe_options *o = b->o;
    const mj_bench_moe_shape *sh = o->shape;
    const size_t T = (size_t)s->tokens, H = (size_t)sh->hidden, K = (size_t)sh->topk;
    const size_t y_elems = (size_t)o->max_tokens * H;
    mj_status st = MJ_OK;
    for (int lr = 0; st == MJ_OK && lr < b->local_ranks; lr++)
        st = cu_check(b->cu->cuMemsetD8Async(b->y[lr], (unsigned char)(MJ_BENCH_POISON & 0xFF),
                                             y_elems * 2, b->s[lr]),
                      "bench mega-moe: poisoning y");
    if (st == MJ_OK) st = align_ranks(b);
    if (st == MJ_OK) st = step(b, s, 0, PASS_PD_MOE, -1);
    if (st == MJ_OK) st = settle(b);

    const int total = b->local_ranks * s->tokens;
    int idx[MJ_BENCH_CHECK_ALL];
    const int n = mj_bench_check_sample(total, idx);
    uint16_t *x = malloc((size_t)n * H * 2), *y = malloc((size_t)n * H * 2);
    int32_t *ids = malloc((size_t)n * K * sizeof *ids);
    float *tw = malloc((size_t)n * K * sizeof *tw);
    if (st == MJ_OK && (!x || !y || !ids || !tw))
        st = mj_fail(MJ_ERR_NOMEM, "bench mega-moe: out of host memory (check)");
    mj_bench_check_result *out = &p->check;
    for (int lr = 0; st == MJ_OK && lr < b->local_ranks; lr++) {
        st = cu_check(b->cu->cuMemcpyDtoH(b->y_host, b->y[lr], y_elems * 2),
                      "bench mega-moe: reading y");
        size_t unwritten, nonfinite, past;
        mj_bench_scan_output(b->y_host, T * H, y_elems, &unwritten, &nonfinite, &past);
        out->unwritten += unwritten;
        out->nonfinite += nonfinite;
        out->past += past;
        /* The sampled tokens of this rank: global index lr x T + t. */
        for (int i = 0; st == MJ_OK && i < n; i++) {
            if (idx[i] / s->tokens != lr) continue;
            const size_t t = (size_t)(idx[i] % s->tokens), r = (size_t)global_rank(b, lr);
            memcpy(x + (size_t)i * H, s->x0 + ((size_t)lr * T + t) * H, H * 2);
            memcpy(y + (size_t)i * H, b->y_host + t * H, H * 2);
            memcpy(ids + (size_t)i * K, s->ids[0] + (r * T + t) * K, K * sizeof *ids);
            memcpy(tw + (size_t)i * K, s->tw[0] + (r * T + t) * K, K * sizeof *tw);
        }
    }
    mj_bench_check_job *job =
        st == MJ_OK ? mj_bench_check_job_new(b->hw, o->row, &o->variant, sh->hidden,
                                             sh->intermediate, sh->topk, n, x, ids, tw, y, out)
                    : NULL;
    if (st == MJ_OK && !job) st = mj_fail(MJ_ERR_NOMEM, "bench mega-moe: out of host memory");
    if (job) mj_bench_checker_submit(o->checker, job);
    free(x);
    free(y);
    free(ids);
    free(tw);
    return st;
}

/* ------------------------------------------------------------- phases */

/* Set 0 once more, rank 0's launch with phase stamps (the other emulated
 * ranks run untraced beside it). */
static mj_status trace_point(moe_run *b, const moe_sets *s, mj_bench_moe_point *p) {
    const mj_cuda *cu = b->cu;
    mj_kernel *k;
    mj_launch_config lc;
    mj_moe_args args;
    mj_status st = mj_mega_moe_prepare(b->rt, b->buf, b->w[0], (void *)(uintptr_t)b->y[0],
                                       s->tokens, NULL, b->s[0], &k, &lc, &args);
    if (st != MJ_OK) return st;
    const int ctas = (int)lc.grid[0];
    const size_t bytes = (size_t)ctas * MJ_MOE_TRACE_WORDS * sizeof(uint64_t);
    uint64_t *host = malloc(bytes);
    if (!host) return mj_fail(MJ_ERR_NOMEM, "bench mega-moe: out of host memory (trace)");
    CUdeviceptr trace = 0;
    st = cu_check(cu->cuMemAlloc(&trace, bytes), "bench mega-moe: allocating the trace");
    if (st == MJ_OK)
        st = cu_check(cu->cuMemsetD8Async(trace, 0, bytes, b->s[0]),
                      "bench mega-moe: zeroing the trace");
    if (st == MJ_OK) st = align_ranks(b);
    if (st == MJ_OK) st = pre_dispatch_all(b, s, 0);
    if (st == MJ_OK) st = join_streams(b);
    if (st == MJ_OK) st = fork_streams(b);
    if (st == MJ_OK) {
        args.trace = (mj_u64 *)(uintptr_t)trace;
        void *params[] = {&args};
        st = mj_jit_launch(b->rt, k, &lc, b->s[0], params);
    }
    if (st == MJ_OK) st = mega_moe_all(b, s->tokens, 1); // the other ranks, untraced
    if (st == MJ_OK) st = join_streams(b);
    if (st == MJ_OK) st = settle(b);
    if (st == MJ_OK)
        st = cu_check(cu->cuMemcpyDtoH(host, trace, bytes), "bench mega-moe: reading the trace");
    if (st == MJ_OK && mj_bench_moe_phases_of(host, ctas, &p->phases) != 0)
        st = mj_fail(MJ_ERR_CUDA, "bench mega-moe: the traced launch left incomplete stamps");
    if (st == MJ_OK) p->traced = 1;
    if (trace) cu->cuMemFree(trace);
    free(host);
    return st;
}

/* --------------------------------------------------------------- points */

static mj_status run_point(moe_run *b, int tokens, int first, mj_bench_moe_point *p) {
    const mj_bench_mega_moe_options *o = b->o;
    memset(p, 0, sizeof *p);
    p->tokens = tokens;
    const mj_moe_config layer = layer_of(o, b->own_rank);
    mj_status st = mj_mega_moe_block_m(&layer, tokens, &p->block_m);
    moe_sets *s = NULL;
    if (st == MJ_OK) st = sets_make(b, tokens, &s);
    if (st == MJ_OK) {
        p->sets = s->n;
        st = floor_of(b, s, p);
    }
    if (st == MJ_OK) st = mj_bench_stream_us(b->rt, p->bytes, &p->stream_us);
    double step_s = 0;
    if (st == MJ_OK) st = warm_up(b, s, &step_s);
    if (st == MJ_OK && first && o->host_cost)
        st = mj_bench_host_cost_measure(b->rt, b->buf, b->w[0], b->s[0], o->host_cost);
    if (st == MJ_OK) {
        const double fit = PASS_BUDGET_S / (step_s > 0 ? step_s : 1e-6);
        p->iters = o->iters               ? o->iters
                   : fit < MIN_AUTO_ITERS ? MIN_AUTO_ITERS
                   : fit > MAX_AUTO_ITERS ? MAX_AUTO_ITERS
                                          : (int)fit;
        st = time_pass(b, s, PASS_MOE, p->iters, &p->us);
    }
    if (st == MJ_OK) st = mj_bench_sm_clock_mhz(b->rt, b->s[0], &p->us_sm_clock_mhz);
    if (st == MJ_OK) st = time_pass(b, s, PASS_PD_MOE, p->iters, &p->pd_moe_us);
    if (st == MJ_OK) st = mj_bench_sm_clock_mhz(b->rt, b->s[0], &p->pd_moe_sm_clock_mhz);
    if (st == MJ_OK) st = check_point(b, s, p);
    if (st == MJ_OK && o->phases) st = trace_point(b, s, p);
    if (s) sets_free(b->cu, s);
    return st;
}

mj_status mj_bench_mega_moe(mj_runtime *rt, const mj_bench_mega_moe_options *o,
                            mj_bench_moe_point *points, int *num_sms) {
    if (!rt || !o || !points || !num_sms || !o->shape || !o->row || !o->tokens || !o->ceilings ||
        !o->checker || !o->dump_dir != !o->dump_configs)
        return mj_fail(MJ_ERR_INVALID_ARG, "mj_bench_mega_moe: missing an argument");
    if (o->num_ranks < 1 || o->num_ranks > MJ_MAX_RANKS || o->shape->experts % o->num_ranks ||
        o->num_tokens < 1 || o->iters < 0 || (o->host_cost && (o->nccl_comm || o->num_ranks > 1)))
        return mj_fail(MJ_ERR_INVALID_ARG,
                       "mj_bench_mega_moe: ranks %d must divide the %d experts, at least one token "
                       "count, iters >= 0, and the host cost needs one rank on the device",
                       o->num_ranks, o->shape->experts);
    for (int i = 0; i < o->num_tokens; i++)
        if (o->tokens[i] < 1 || o->tokens[i] > o->max_tokens)
            return mj_fail(MJ_ERR_INVALID_ARG,
                           "mj_bench_mega_moe: %d tokens is outside 1..%d (max_tokens)",
                           o->tokens[i], o->max_tokens);
    /* A point that never runs still says which token count it was. */
    memset(points, 0, (size_t)o->num_tokens * sizeof *points);
    for (int i = 0; i < o->num_tokens; i++)
        points[i].tokens = o->tokens[i];
    mj_status st = mj_runtime_bind(rt);
    if (st != MJ_OK) return st;
    moe_run b;
    memset(&b, 0, sizeof b);
    b.rt = rt;
    b.cu = rt->cu;
    b.o = o;
    b.ranks = o->num_ranks;
    b.local_ranks = o->nccl_comm ? 1 : o->num_ranks;
    b.local_experts = o->shape->experts / o->num_ranks;
    if (o->nccl_comm) {
        const mj_nccl *n = mj_nccl_get();
        if (!n) return MJ_ERR_UNSUPPORTED;
        ncclResult_t nr = n->ncclCommUserRank((ncclComm_t)o->nccl_comm, &b.own_rank);
        if (nr != ncclSuccess) return mj_nccl_fail(n, nr, "mj_bench_mega_moe: ncclCommUserRank");
    }
    st = run_setup(&b);
    *num_sms = b.num_sms;
    for (int i = 0; st == MJ_OK && i < o->num_tokens; i++)
        st = run_point(&b, o->tokens[i], i == 0, &points[i]);
    /* Freeing calls into the runtime, which may replace the thread's error. */
    mj_error_snapshot why;
    mj_error_save(&why);
    run_free(&b);
    mj_error_restore(&why);
    return st;
}
