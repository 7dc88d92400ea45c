/*
 * The CUDA driver, loaded at run time: dlopen("libcuda.so.1") and every entry
 * point through cuGetProcAddress (never dlsym of a versioned name), so the
 * library loads and the cache works on machines without a driver.
 */
#ifndef MJ_CUDA_DRIVER_H
#define MJ_CUDA_DRIVER_H

#include <cuda.h>

#include "apis/megajit.h"

#define MJ_CU_FUNCTIONS(X)                                                                         \
    X(cuInit)                                                                                      \
    X(cuDriverGetVersion)                                                                          \
    X(cuGetErrorName)                                                                              \
    X(cuGetErrorString)                                                                            \
    X(cuDeviceGet)                                                                                 \
    X(cuDeviceGetCount)                                                                            \
    X(cuDeviceGetAttribute)                                                                        \
    X(cuDeviceGetName)                                                                             \
    X(cuDevicePrimaryCtxRetain)                                                                    \
    X(cuDevicePrimaryCtxRelease)                                                                   \
    X(cuCtxGetCurrent)                                                                             \
    X(cuCtxSetCurrent)                                                                             \
    X(cuCtxGetDevice)                                                                              \
    X(cuCtxSynchronize)                                                                            \
    X(cuLibraryLoadData)                                                                           \
    X(cuLibraryUnload)                                                                             \
    X(cuLibraryGetKernel)                                                                          \
    X(cuKernelGetFunction)                                                                         \
    X(cuFuncSetAttribute)                                                                          \
    X(cuLaunchKernelEx)                                                                            \
    X(cuStreamIsCapturing)                                                                         \
    X(cuStreamSynchronize)                                                                         \
    X(cuStreamCreate)                                                                              \
    X(cuStreamDestroy)                                                                             \
    X(cuMemAlloc)                                                                                  \
    X(cuMemFree)                                                                                   \
    X(cuMemsetD8Async)                                                                             \
    X(cuMemsetD8)                                                                                  \
    X(cuMemcpyHtoD)                                                                                \
    X(cuMemcpyDtoH)                                                                                \
    X(cuMemcpyDtoDAsync)                                                                           \
    X(cuMemcpyDtoHAsync)                                                                           \
    X(cuEventCreate)                                                                               \
    X(cuEventDestroy)                                                                              \
    X(cuEventRecord)                                                                               \
    X(cuEventSynchronize)                                                                          \
    X(cuEventElapsedTime)

/* Function pointer table; types come from cuda.h's prototypes. */
typedef struct mj_cuda {
#define MJ_CU_FIELD(name) __typeof__(&name) name;
    MJ_CU_FUNCTIONS(MJ_CU_FIELD)
#undef MJ_CU_FIELD
    int driver_version;
} mj_cuda;

/* The process-wide driver table, loaded once. Returns NULL (and sets the
 * thread's error to MJ_ERR_NO_DEVICE with the reason) when there is no driver. */
const mj_cuda *mj_cuda_get(void);

/* Turns a CUresult into a status with "what: cuName (message)". */
mj_status mj_cuda_fail(CUresult r, const char *what);

#endif
