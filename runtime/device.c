#include "runtime/device.h"

#include "runtime/error.h"

mj_status mj_device_alloc(mj_runtime *rt, size_t bytes, const char *what, CUdeviceptr *out) {
    *out = 0;
    CUresult r = rt->cu->cuMemAlloc(out, bytes);
    if (r == CUDA_SUCCESS) return MJ_OK;
    *out = 0;
    return mj_cuda_fail(r, what);
}

void mj_device_free(mj_runtime *rt, CUdeviceptr p) {
    if (p) rt->cu->cuMemFree(p);
}

static mj_status finish_on(mj_runtime *rt, CUresult r, mj_stream stream, const char *what) {
    if (r == CUDA_SUCCESS) r = rt->cu->cuStreamSynchronize((CUstream)stream);
    return r == CUDA_SUCCESS ? MJ_OK : mj_cuda_fail(r, what);
}

mj_status mj_device_zero(mj_runtime *rt, CUdeviceptr p, size_t bytes, mj_stream stream,
                         const char *what) {
    return finish_on(rt, rt->cu->cuMemsetD8Async(p, 0, bytes, (CUstream)stream), stream, what);
}

mj_status mj_device_zero_private(mj_runtime *rt, CUdeviceptr p, size_t bytes, const char *what) {
    return mj_cuda_zero_private(rt->cu, p, bytes, what);
}

mj_status mj_device_upload(mj_runtime *rt, CUdeviceptr dst, const void *src, size_t bytes,
                           mj_stream stream, const char *what) {
    return finish_on(rt, rt->cu->cuMemcpyHtoDAsync(dst, src, bytes, (CUstream)stream), stream,
                     what);
}

mj_status mj_device_download(mj_runtime *rt, void *dst, CUdeviceptr src, size_t bytes,
                             mj_stream stream, const char *what) {
    return finish_on(rt, rt->cu->cuMemcpyDtoHAsync(dst, src, bytes, (CUstream)stream), stream,
                     what);
}

mj_status mj_device_synchronize(mj_runtime *rt, const char *what) {
    CUresult r = rt->cu->cuCtxSynchronize();
    return r == CUDA_SUCCESS ? MJ_OK : mj_cuda_fail(r, what);
}

mj_status mj_stream_create(mj_runtime *rt, const char *what, mj_stream *out) {
    CUstream s = NULL;
    CUresult r = rt->cu->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
    *out = r == CUDA_SUCCESS ? (mj_stream)s : NULL;
    return r == CUDA_SUCCESS ? MJ_OK : mj_cuda_fail(r, what);
}

void mj_stream_destroy(mj_runtime *rt, mj_stream stream) {
    if (stream) rt->cu->cuStreamDestroy((CUstream)stream);
}

mj_status mj_stream_synchronize(mj_runtime *rt, mj_stream stream, const char *what) {
    CUresult r = rt->cu->cuStreamSynchronize((CUstream)stream);
    return r == CUDA_SUCCESS ? MJ_OK : mj_cuda_fail(r, what);
}

int mj_stream_capturing(mj_runtime *rt, mj_stream stream) {
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    if (rt->cu->cuStreamIsCapturing((CUstream)stream, &cs) != CUDA_SUCCESS) return -1;
    return cs != CU_STREAM_CAPTURE_STATUS_NONE;
}

mj_status mj_device_map_symmetric(mj_runtime *rt, const mj_group *g, size_t bytes, mj_vmm *out) {
    return mj_vmm_create(rt->cu, rt->device, g, bytes, out);
}
