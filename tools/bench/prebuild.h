/* Compiling every kernel a GPU program will launch before it starts, with the
 * library's pool of worker processes (runtime/build_pool.h): NVRTC compiles
 * are serialized inside one process, and the MegaMoE benchmark and GPU tests
 * need tens of variants (BLOCK_M, SM count, shape and format row are template
 * parameters). The program's own runtime then only loads cubins. The calling
 * process must not have touched CUDA before the pool forks: the device is
 * probed from a child. */
#ifndef MJ_TOOLS_BENCH_PREBUILD_H
#define MJ_TOOLS_BENCH_PREBUILD_H

#include <stddef.h>
#include <stdio.h>

#include "include/megajit.h"
#include "runtime/spec_list.h"

/* The device's SM count and architecture, read by a child process. Returns
 * 1, or 0 without a device (or a driver). */
int mj_bench_probe_device(int *sms, char *arch, size_t arch_cap);

typedef struct mj_bench_prebuild_result {
    int compiled, cached, failed, workers;
    int stop_signal; /* the signal that interrupted the build (0: none): the caller re-raises it */
} mj_bench_prebuild_result;

/* Builds every spec of l into the cache of runtimes opened with opts, with
 * up to `jobs` workers; each failure is printed to log as "<label> FAILED
 * <description>: <error>". MJ_OK unless the pool could not run at all (the message
 * says why); failed kernels are counted, and their launch will say why. */
mj_status mj_bench_prebuild(const mj_spec_list *l, const mj_runtime_options *opts, int jobs,
                            FILE *log, const char *label, mj_bench_prebuild_result *out);

#endif
