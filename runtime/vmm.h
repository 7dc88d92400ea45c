/*
 * Symmetric device memory across processes with CUDA VMM: each rank creates
 * its region with cuMemCreate, exports it (FABRIC handle when every rank got
 * one, else a POSIX file descriptor sent over a Unix socket), and maps every
 * rank's region into one reserved range, rank r at base + r * stride. Kernels
 * then reach peer r's copy of any field as own address + (r - rank) * stride.
 */
#ifndef MJ_VMM_H
#define MJ_VMM_H

#include <cuda.h>

#include "runtime/cuda_driver.h"
#include "runtime/fd_exchange.h"

/* How long a rank waits for its peers' descriptors before giving up. */
#define MJ_VMM_FD_TIMEOUT_MS 60000

typedef struct mj_vmm_peer {
    CUmemGenericAllocationHandle handle; /* own allocation, or the imported peer's; 0 = none */
    int mapped;
} mj_vmm_peer;

typedef struct mj_vmm {
    const mj_cuda *cu;
    mj_group group;
    CUdevice device;
    CUdeviceptr base; /* reserved range of nranks * stride bytes */
    size_t stride;    /* bytes per rank, a multiple of the recommended granularity */
    int fabric;       /* 1: FABRIC handles were exchanged; 0: POSIX file descriptors */
    /* 1: another rank runs on this GPU (same host and PCI bus id), so both
     * ranks' grids must fit on it together. */
    int shares_device;
    mj_vmm_peer *peers;
} mj_vmm;

/* Collective over g. Needs a context of `device` current on the calling thread.
 * Every rank's region is zeroed before any rank returns, so a successful return
 * on one rank means every peer has finished allocating, mapping and zeroing
 * (the first-launch barrier). Environment: MEGAJIT_SYMM_HANDLE = auto (default),
 * fd (never FABRIC) or fabric (fail unless every rank gets FABRIC handles). */
mj_status mj_vmm_create(const mj_cuda *cu, CUdevice device, const mj_group *g, size_t bytes,
                        mj_vmm *out);

/* Local: unmaps every rank, releases the handles, frees the range. The caller
 * first makes sure no peer still accesses this rank's memory (a barrier). */
void mj_vmm_destroy(mj_vmm *v);

#endif
