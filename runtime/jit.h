/*
 * Get-or-build of kernels and their launch.
 *
 * mj_jit_get is the serving path: an in-memory hit does no allocation, string
 * formatting or source hashing. A miss renders the source, builds the cache key,
 * consults the on-disk cache (and snapshots), and compiles under the per-key lock.
 */
#ifndef MJ_JIT_H
#define MJ_JIT_H

/* NVRTC options of every kernel after --gpu-architecture (part of the cache
 * key); tests that compile kernels themselves use the same. */
#define MJ_JIT_COMPILE_OPTIONS "-std=c++20", "-default-device", "--fmad=false"

#include "include/megajit.h"
#include "runtime/cuda_driver.h"
#include "runtime/kernel_spec.h"
#include "runtime/templates.h"

typedef struct mj_kernel mj_kernel;

typedef struct mj_launch_config {
    unsigned grid[3];
    unsigned block[3];
    unsigned smem_bytes;
    unsigned cluster_x; /* 0 or 1: no cluster */
    int pdl;            /* programmatic dependent launch */
    /* CTAs an SM that must be resident together (a persistent grid of more
     * CTAs than SMs); 0 or 1: none. Checked with the occupancy calculator
     * where the kernel's dynamic shared memory is first raised. */
    int ctas_per_sm;
} mj_launch_config;

/* Loaded (or lazily loadable) kernel for spec: the launch path. A kernel that
 * must be compiled is refused with MJ_ERR_NOT_FOUND when the runtime may not
 * compile (MEGAJIT_JIT_DISABLE, allow_compile = 0), and with MJ_ERR_CAPTURE
 * while `stream` captures a CUDA graph. Loads the module only with a device. */
mj_status mj_jit_get(mj_runtime *rt, const mj_kernel_spec *spec, mj_stream stream, mj_kernel **out);

/* Launches with cuLaunchKernelEx; args as for cuLaunchKernel. */
mj_status mj_jit_launch(mj_runtime *rt, mj_kernel *k, const mj_launch_config *cfg, mj_stream stream,
                        void **args);

/* The cuLaunchKernelEx configuration mj_jit_launch makes of cfg on stream;
 * its attributes live in attrs. */
#define MJ_JIT_LAUNCH_ATTRS 2
void mj_jit_launch_config(const mj_launch_config *cfg, mj_stream stream,
                          CUlaunchAttribute attrs[MJ_JIT_LAUNCH_ATTRS], CUlaunchConfig *out);

/* Ensures spec is in the on-disk cache (compiles when missing, whatever the
 * runtime's compile switch: this is what precompiling is). Needs no device.
 * A kernel compiled but not stored is MJ_ERR_CACHE. */
mj_status mj_jit_build(mj_runtime *rt, const mj_kernel_spec *spec, mj_build_result *result,
                       double *seconds);

/* The on-disk cache key of spec when compiled from the given template set. */
mj_status mj_jit_cache_key(const mj_template_set *set, const mj_kernel_spec *spec, uint8_t key[16]);

#endif
