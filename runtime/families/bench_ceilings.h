/* The bench-ceiling family: the kernels `megajit bench` measures the card's
 * read bandwidth, BF16 tensor rate and SM clock with
 * (templates/bench_ceilings.cuh).
 * No MoE layer launches them, so a manifest never lists them. */
#ifndef MJ_FAMILY_BENCH_CEILINGS_H
#define MJ_FAMILY_BENCH_CEILINGS_H

#include "runtime/families/family.h"

enum {
    MJ_BC_KERNEL_BULK_READ = 0,
    MJ_BC_KERNEL_TENSOR_RATE = 1,
    MJ_BC_KERNEL_CLOCK_PROBE = 2,
    MJ_BC_NUM_KERNELS
};

extern const mj_family_desc mj_bench_ceilings_family;

#endif
