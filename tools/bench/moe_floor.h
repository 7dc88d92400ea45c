/* The floor a MegaMoE launch is measured against (pure: no device): the
 * longer of streaming the bytes it must move at the measured read bandwidth
 * and doing its FLOPs at the measured BF16 tensor rate. */
#ifndef MJ_TOOLS_BENCH_MOE_FLOOR_H
#define MJ_TOOLS_BENCH_MOE_FLOOR_H

#include <stddef.h>
#include <stdint.h>

/* Bytes of one expert's three projections (gate, up: [I][H]; down: [H][I])
 * in weight format fmt (MJ_FMT_*): the elements and their block scales, as a
 * checkpoint stores them. */
double mj_bench_expert_bytes(int fmt, int hidden, int intermediate);
/* Bytes one token moves: in, as pre-dispatch left it (x in the dispatch
 * format, its block scales, the NVFP4 per-token scale, topk ids and
 * weights), and out (y, BF16). */
double mj_bench_token_bytes(int dispatch_fmt, int hidden, int topk);
/* FLOPs of `pairs` valid (token, slot) pairs: 2 x 3 H I each (GEMM 1 gate
 * and up, GEMM 2 down). A fused shared expert's are
 * mj_bench_moe_flops(H, I_s, tokens): each token is one more pair. */
double mj_bench_moe_flops(int hidden, int intermediate, double pairs);
/* Bytes a fused shared expert of intermediate size shared_intermediate (0:
 * none) in weight format fmt adds to one rank's launch of `tokens` tokens:
 * every token runs it, so with tokens > 0 its W1 and W2 and their scales
 * are read once (mj_bench_expert_bytes at I_s), else nothing. */
double mj_bench_shared_bytes(int fmt, int hidden, int shared_intermediate, int tokens);

/* Distinct experts in [lo, hi) among ids[0..n) (negative ids are masked
 * slots), and in *in_range how many ids fall there; seen is scratch of
 * hi - lo bytes. */
int mj_bench_distinct_experts(const int32_t *ids, size_t n, int lo, int hi, unsigned char *seen,
                              size_t *in_range);

typedef enum mj_bench_bound {
    MJ_BENCH_BOUND_MEMORY = 0,
    MJ_BENCH_BOUND_COMPUTE = 1
} mj_bench_bound;
const char *mj_bench_bound_name(mj_bench_bound b); /* "memory", "compute" */

typedef struct mj_bench_floor {
    double memory_us;  /* bytes / read bandwidth */
    double compute_us; /* flops / tensor rate */
    double floor_us;   /* the larger */
    mj_bench_bound bound;
} mj_bench_floor;
/* read_gbps: 1e9 bytes per second; tflops: 1e12 FLOPs per second (both > 0).
 * A tie is memory-bound. */
mj_bench_floor mj_bench_floor_of(double bytes, double flops, double read_gbps, double tflops);

#endif
