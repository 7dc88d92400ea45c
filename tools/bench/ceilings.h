/* The card's limits, measured in the same run as what is divided by them:
 * the read bandwidth of bulk copies into shared memory (the ceiling for
 * streaming weights), the device copy bandwidth, and the dense BF16 tensor
 * rate of wgmma. The kernels are the bench-ceiling family's
 * (runtime/families/bench_ceilings.c), on every SM of the device. */
#ifndef MJ_TOOLS_BENCH_CEILINGS_H
#define MJ_TOOLS_BENCH_CEILINGS_H

#include "include/megajit.h"

typedef struct mj_bench_ceilings {
    double read_gbps;    /* bulk-copy read bandwidth, 1e9 bytes per second */
    double read_bytes;   /* bytes one bulk-read launch reads */
    double copy_gbps;    /* cuMemcpyDtoD, bytes read + written per second / 1e9 */
    double bf16_tflops;  /* dense BF16 tensor rate, 1e12 FLOPs per second */
    double tensor_flops; /* FLOPs of one tensor-rate launch */
    int num_sms;
} mj_bench_ceilings;

/* Medians over timed launches after warm-ups, each checked: every bulk copy
 * counted completed, every tensor-rate accumulator finite, and the rate
 * below what the SM clock allows. */
mj_status mj_bench_measure_ceilings(mj_runtime *rt, mj_bench_ceilings *out);

/* The time the bulk-read kernel takes to read `bytes` once on every SM: the
 * median of timed single launches (after warm-ups), each from another region
 * of a buffer large enough that L2 holds none of what it reads, every copy
 * checked completed. A configuration's weights streamed by the ceiling
 * kernel itself, in one launch: the launch, the ramp and the tail included,
 * which the floor's steady bandwidth leaves out (what matters at small T).
 * *us = 0 (and MJ_OK) where bytes exceed 4 GiB or the device cannot hold the
 * buffer. */
mj_status mj_bench_stream_us(mj_runtime *rt, double bytes, double *us);

/* The SM clock the card runs at now, in MHz: the clock-probe kernel's SM
 * cycles over 100 us of the global timer, launched on `stream` after what it
 * follows and waited for. Read after a timed pass, it tells whether the pass
 * ran at full clock or at the card's power cap. */
mj_status mj_bench_sm_clock_mhz(mj_runtime *rt, mj_stream stream, double *mhz);

#endif
