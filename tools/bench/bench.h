/* The benchmarks behind `megajit bench` (tools/bench/, linked into the CLI,
 * never part of the library) and the pieces they share. */
#ifndef MJ_TOOLS_BENCH_H
#define MJ_TOOLS_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "include/megajit.h"

/* xorshift64*: fast enough to fill gigabytes of random weights. The state
 * must not be 0 (mj_bench_seed never returns 0). */
uint64_t mj_bench_rng(uint64_t *state);
/* A generator state derived from h and v (splitmix64 of their mix): chained
 * over the parts of a configuration, the same parts give the same stream on
 * every rank and in every run. Never 0. */
uint64_t mj_bench_seed(uint64_t h, uint64_t v);
/* Sorts v and returns its median. */
float mj_bench_median_ms(float *v, int n);
/* The device's copy bandwidth (bytes read + written per second / 1e9): median
 * of iters cuMemcpyDtoD of at least min_bytes (and at least 256 MiB, so the L2
 * cannot serve it) on the runtime's device. */
mj_status mj_bench_copy_gbps(mj_runtime *rt, size_t min_bytes, int iters, double *gbps);

/* Times pre-dispatch on fresh random data (median over iters launches, CUDA events)
 * next to a device-to-device copy of the same byte count, on the current device. */
typedef struct mj_bench_pre_dispatch_result {
    double bytes;            /* bytes the kernel must move: BF16 in + quantized out + ids/weights */
    double kernel_us;        /* median pre-dispatch time (check + main kernel) */
    double kernel_gbps;      /* bytes / kernel_us */
    double copy_us;          /* median cuMemcpyDtoD time moving the same bytes (read + write) */
    double copy_gbps;        /* device copy bandwidth, bytes read + written */
    double fraction_of_copy; /* kernel_gbps / copy_gbps */
    double launch_us;        /* median zero-token pre-dispatch: the fixed cost of a launch */
    double floor_us;         /* launch_us + copy_us: a launch that moved its bytes at copy speed */
    double fraction_of_floor; /* floor_us / kernel_us */
} mj_bench_pre_dispatch_result;
mj_status mj_bench_pre_dispatch(mj_runtime *rt, mj_format fmt, int hidden, int num_tokens,
                                int num_topk, int iters, mj_bench_pre_dispatch_result *out);

/* One MegaMoE layer (swiglu, DeepSeek-V3 shape by default in the CLI) timed on
 * random weights and uniform routing (K distinct experts per token):
 * pre-dispatch once, mj_mega_moe_warmup of every rank, then the median over
 * iters steps (all ranks' launches in flight, CUDA events on the first local
 * rank's stream). nccl_comm NULL: all num_ranks ranks are emulated on this
 * GPU with the MegaMoE family's SM count divided among them, so the device
 * holds every expert's weights (DeepSeek-V3 BF16: 22.5 GB). Non-NULL (an
 * ncclComm_t of num_ranks ranks on the runtime's device): this process is one
 * rank, the buffer comes from mj_symm_buffer_create_nccl, and the call is
 * collective. Emulated ranks that fail mid-launch leave the others spinning. */
typedef struct mj_bench_mega_moe_options {
    mj_format weight_format; /* with dispatch_format: one supported MegaMoE pair */
    mj_format dispatch_format;
    int hidden;
    int intermediate;
    int num_experts;
    int num_topk;
    int num_tokens; /* per rank */
    int iters;      /* 0 = 100 */
    int num_ranks;
    void *nccl_comm;
} mj_bench_mega_moe_options;

typedef struct mj_bench_mega_moe_result {
    double kernel_us;     /* median step time */
    double experts_hit;   /* expected distinct local experts per rank: E/R (1 - (1 - K/E)^(T R)) */
    double weight_bytes;  /* per rank: experts_hit x 3 H I bits / 8 plus block-scale bytes */
    double copy_gbps;     /* device copy bandwidth measured in the same call */
    double rank_floor_us; /* weight_bytes / copy_gbps: one rank on its own GPU */
    int ranks_on_device;  /* num_ranks when emulated, 1 with a communicator */
    double floor_us;      /* rank_floor_us x ranks_on_device: what this device must stream */
    double fraction_of_floor; /* floor_us / kernel_us */
    int block_m;
    int num_sms; /* per rank */
} mj_bench_mega_moe_result;
mj_status mj_bench_mega_moe(mj_runtime *rt, const mj_bench_mega_moe_options *o,
                            mj_bench_mega_moe_result *out);

#endif
