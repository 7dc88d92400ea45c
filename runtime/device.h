/*
 * Device memory and stream calls on a runtime's device, for the entry points
 * in apis/, which never call the driver themselves. The caller has bound rt
 * (mj_runtime_bind); a failure becomes a status whose message starts with
 * `what`.
 */
#ifndef MJ_DEVICE_H
#define MJ_DEVICE_H

#include <stddef.h>

#include "runtime/runtime.h"
#include "runtime/vmm.h"

mj_status mj_device_alloc(mj_runtime *rt, size_t bytes, const char *what, CUdeviceptr *out);
/* 0 is a no-op; a failure is ignored (it only happens on teardown paths). */
void mj_device_free(mj_runtime *rt, CUdeviceptr p);
/* Zeroing and copies run on `stream`, after its earlier work, and are complete
 * when they return. Not the plain cuMemsetD8 / cuMemcpyHtoD: those go to the
 * legacy stream, which orders nothing against non-blocking streams, and a
 * pageable cuMemcpyHtoD may return before its DMA has landed (a kernel on
 * another stream then reads part of the old bytes: the weight images of
 * bench/RESULTS.md, seventh session). */
mj_status mj_device_zero(mj_runtime *rt, CUdeviceptr p, size_t bytes, mj_stream stream,
                         const char *what);
/* Zeroing complete before the caller's next launch on any stream (a private
 * stream: mj_cuda_zero_private). */
mj_status mj_device_zero_private(mj_runtime *rt, CUdeviceptr p, size_t bytes, const char *what);
mj_status mj_device_upload(mj_runtime *rt, CUdeviceptr dst, const void *src, size_t bytes,
                           mj_stream stream, const char *what);
mj_status mj_device_download(mj_runtime *rt, void *dst, CUdeviceptr src, size_t bytes,
                             mj_stream stream, const char *what);
/* Waits for everything queued in rt's context. */
mj_status mj_device_synchronize(mj_runtime *rt, const char *what);

/* A non-blocking stream of rt's own (it never waits for the legacy stream). */
mj_status mj_stream_create(mj_runtime *rt, const char *what, mj_stream *out);
/* NULL is a no-op. */
void mj_stream_destroy(mj_runtime *rt, mj_stream stream);
mj_status mj_stream_synchronize(mj_runtime *rt, mj_stream stream, const char *what);
/* 1 when stream is capturing a CUDA graph, 0 when not, -1 when it cannot tell. */
int mj_stream_capturing(mj_runtime *rt, mj_stream stream);

/* This process's rank of a symmetric allocation over g on rt's device
 * (collective, runtime/vmm.h). */
mj_status mj_device_map_symmetric(mj_runtime *rt, const mj_group *g, size_t bytes, mj_vmm *out);

#endif
