/*
 * The CUDA driver, loaded at run time: dlopen("libcuda.so.1") and every entry
 * point through cuGetProcAddress (never dlsym of a versioned name), so the
 * library loads and the cache works on machines without a driver.
 */
#ifndef MJ_CUDA_DRIVER_H
#define MJ_CUDA_DRIVER_H

#include <cuda.h>
#include <cudaTypedefs.h>

#include "include/megajit.h"

#define MJ_CU_FUNCTIONS(X)                                                                         \
    X(cuInit, 2000)                                                                                \
    X(cuDriverGetVersion, 2020)                                                                    \
    X(cuGetErrorName, 6000)                                                                        \
    X(cuGetErrorString, 6000)                                                                      \
    X(cuDeviceGet, 2000)                                                                           \
    X(cuDeviceGetCount, 2000)                                                                      \
    X(cuDeviceGetAttribute, 2000)                                                                  \
    X(cuDeviceGetName, 2000)                                                                       \
    X(cuDevicePrimaryCtxRetain, 7000)                                                              \
    X(cuDevicePrimaryCtxRelease, 11000)                                                            \
    X(cuCtxGetCurrent, 4000)                                                                       \
    X(cuCtxSetCurrent, 4000)                                                                       \
    X(cuCtxGetDevice, 2000)                                                                        \
    X(cuCtxSynchronize, 2000)                                                                      \
    X(cuLibraryLoadData, 12000)                                                                    \
    X(cuLibraryUnload, 12000)                                                                      \
    X(cuLibraryGetKernel, 12000)                                                                   \
    X(cuKernelGetFunction, 12000)                                                                  \
    X(cuFuncLoad, 12040)                                                                           \
    X(cuFuncSetAttribute, 9000)                                                                    \
    X(cuOccupancyMaxActiveBlocksPerMultiprocessor, 6050)                                           \
    X(cuLaunchKernelEx, 11060)                                                                     \
    X(cuStreamIsCapturing, 10000)                                                                  \
    X(cuStreamSynchronize, 2000)                                                                   \
    X(cuStreamCreate, 2000)                                                                        \
    X(cuStreamDestroy, 4000)                                                                       \
    X(cuStreamWaitEvent, 3020)                                                                     \
    X(cuMemAlloc, 3020)                                                                            \
    X(cuMemFree, 3020)                                                                             \
    X(cuMemsetD8Async, 3020)                                                                       \
    X(cuMemsetD8, 3020)                                                                            \
    X(cuMemcpyHtoD, 3020)                                                                          \
    X(cuMemcpyDtoH, 3020)                                                                          \
    X(cuMemcpyDtoDAsync, 3020)                                                                     \
    X(cuMemcpyDtoHAsync, 3020)                                                                     \
    X(cuEventCreate, 2000)                                                                         \
    X(cuEventDestroy, 4000)                                                                        \
    X(cuEventRecord, 2000)                                                                         \
    X(cuEventSynchronize, 2000)                                                                    \
    X(cuEventElapsedTime, 12080)                                                                   \
    X(cuMemcpyHtoDAsync, 3020)                                                                     \
    X(cuDeviceGetPCIBusId, 4010)                                                                   \
    X(cuDeviceGetByPCIBusId, 4010)                                                                 \
    X(cuDeviceCanAccessPeer, 4000)                                                                 \
    X(cuMemGetAllocationGranularity, 10020)                                                        \
    X(cuMemCreate, 10020)                                                                          \
    X(cuMemRelease, 10020)                                                                         \
    X(cuMemExportToShareableHandle, 10020)                                                         \
    X(cuMemImportFromShareableHandle, 10020)                                                       \
    X(cuMemAddressReserve, 10020)                                                                  \
    X(cuMemAddressFree, 10020)                                                                     \
    X(cuMemMap, 10020)                                                                             \
    X(cuMemUnmap, 10020)                                                                           \
    X(cuMemSetAccess, 10020)

/* Function pointer table. Each entry is fetched at the ABI version whose
 * prototype cuda.h gives that name (cuMemAlloc is cuMemAlloc_v2, 3020;
 * cuCtxGetDevice stays the 2000 one although CUDA 13 added a _v2 with another
 * signature), and typed with the matching PFN from cudaTypedefs.h. */
typedef struct mj_cuda {
#define MJ_CU_FIELD(name, version) PFN_##name##_v##version name;
    MJ_CU_FUNCTIONS(MJ_CU_FIELD)
#undef MJ_CU_FIELD
    int driver_version;
} mj_cuda;

/* The process-wide driver table, loaded once. Returns NULL (and sets the
 * thread's error to MJ_ERR_NO_DEVICE with the reason) when there is no driver. */
const mj_cuda *mj_cuda_get(void);

/* Turns a CUresult into a status with "what: cuName (message)". */
mj_status mj_cuda_fail(CUresult r, const char *what);

/* Zeroes bytes at p on a stream of its own and returns when that is done:
 * complete before any later launch on any stream, without waiting for (or
 * on) work already queued elsewhere. */
mj_status mj_cuda_zero_private(const mj_cuda *cu, CUdeviceptr p, size_t bytes, const char *what);

#endif
