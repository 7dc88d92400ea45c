#include "runtime/vmm.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/error.h"

typedef enum handle_mode { MODE_AUTO, MODE_FD, MODE_FABRIC } handle_mode;

/* What each rank tells the others before anything is imported. */
typedef struct vmm_info {
    uint64_t stride;
    int32_t fabric; /* this rank's allocation can be exported as a FABRIC handle */
    int32_t device; /* ordinal in that process, for messages only */
    char bus_id[16];
    char host[40];
    CUmemFabricHandle fabric_handle;
} vmm_info;

static handle_mode mode_from_env(void) {
    const char *s = getenv("MEGAJIT_SYMM_HANDLE");
    if (s && strcmp(s, "fd") == 0) return MODE_FD;
    if (s && strcmp(s, "fabric") == 0) return MODE_FABRIC;
    return MODE_AUTO;
}

/* Processes on one host share the kernel's boot id even across containers,
 * which is what file-descriptor passing needs; hostnames can differ there. */
static void host_id(char *out, size_t cap) {
    memset(out, 0, cap);
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
        if (fgets(out, (int)cap, f)) out[strcspn(out, "\n")] = 0;
        fclose(f);
    }
    if (!out[0]) gethostname(out, cap - 1);
}

static mj_status allocate(mj_vmm *v, size_t bytes, handle_mode mode, vmm_info *me) {
    const mj_cuda *cu = v->cu;
    int fabric_attr = 0;
    cu->cuDeviceGetAttribute(&fabric_attr, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED,
                             v->device);
    CUmemAllocationProp prop = {
        .type = CU_MEM_ALLOCATION_TYPE_PINNED,
        .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = (int)v->device}};
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    if (fabric_attr && mode != MODE_FD) prop.requestedHandleTypes |= CU_MEM_HANDLE_TYPE_FABRIC;
    size_t gran = 0;
    CUresult r =
        cu->cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
    if (r != CUDA_SUCCESS) return mj_cuda_fail(r, "querying the VMM allocation granularity");
    v->stride = (bytes + gran - 1) / gran * gran;
    CUmemGenericAllocationHandle h = 0;
    r = cu->cuMemCreate(&h, v->stride, &prop, 0);
    /* Without an IMEX channel FABRIC is refused; NCCL retries the same way. */
    if ((r == CUDA_ERROR_NOT_PERMITTED || r == CUDA_ERROR_NOT_SUPPORTED) &&
        (prop.requestedHandleTypes & CU_MEM_HANDLE_TYPE_FABRIC) && mode != MODE_FABRIC) {
        prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
        r = cu->cuMemCreate(&h, v->stride, &prop, 0);
    }
    if (r != CUDA_SUCCESS) {
        char what[160];
        snprintf(what, sizeof what, "rank %d: cuMemCreate of %zu bytes on device %d%s",
                 v->group.rank, v->stride, (int)v->device,
                 mode == MODE_FABRIC ? " with FABRIC handles (MEGAJIT_SYMM_HANDLE=fabric)" : "");
        return mj_cuda_fail(r, what);
    }
    v->peers[v->group.rank].handle = h;
    me->stride = v->stride;
    me->device = (int32_t)v->device;
    if (prop.requestedHandleTypes & CU_MEM_HANDLE_TYPE_FABRIC) {
        r = cu->cuMemExportToShareableHandle(&me->fabric_handle, h, CU_MEM_HANDLE_TYPE_FABRIC, 0);
        me->fabric = r == CUDA_SUCCESS;
    }
    if (mode == MODE_FABRIC && !me->fabric)
        return mj_fail(MJ_ERR_UNSUPPORTED,
                       "rank %d: device %d gives no FABRIC handles (needs an IMEX channel) but "
                       "MEGAJIT_SYMM_HANDLE=fabric",
                       v->group.rank, (int)v->device);
    r = cu->cuDeviceGetPCIBusId(me->bus_id, (int)sizeof me->bus_id, v->device);
    if (r != CUDA_SUCCESS) return mj_cuda_fail(r, "reading the device's PCI bus id");
    host_id(me->host, sizeof me->host);
    return MJ_OK;
}

/* Identical on every rank (same inputs), so every rank takes the same branch. */
static mj_status check_layout(const mj_vmm *v, const vmm_info *all, int *fabric) {
    const int n = v->group.nranks;
    *fabric = 1;
    for (int r = 0; r < n; r++) {
        if (all[r].stride != all[0].stride)
            return mj_fail(MJ_ERR_INVALID_ARG,
                           "ranks disagree on the symmetric region size: rank 0 has %llu bytes, "
                           "rank %d has %llu (every rank must pass the same config)",
                           (unsigned long long)all[0].stride, r, (unsigned long long)all[r].stride);
        *fabric &= all[r].fabric;
    }
    if (*fabric) return MJ_OK;
    for (int r = 1; r < n; r++)
        if (strcmp(all[r].host, all[0].host) != 0)
            return mj_fail(MJ_ERR_UNSUPPORTED,
                           "ranks 0 and %d run on different hosts, and file descriptors cannot "
                           "cross hosts: multi-host symmetric buffers need FABRIC handles on "
                           "every rank (an NVLink domain with IMEX channels)",
                           r);
    return MJ_OK;
}

/* Local half of the P2P check: peers whose device this process can see. A peer
 * hidden by CUDA_VISIBLE_DEVICES is left to cuMemSetAccess, whose failure is
 * reported with the same advice. */
static mj_status check_peer_access(const mj_vmm *v, const vmm_info *all) {
    const int self = v->group.rank;
    for (int r = 0; r < v->group.nranks; r++) {
        if (r == self || strcmp(all[r].host, all[self].host) != 0 ||
            strcmp(all[r].bus_id, all[self].bus_id) == 0)
            continue;
        CUdevice peer;
        if (v->cu->cuDeviceGetByPCIBusId(&peer, all[r].bus_id) != CUDA_SUCCESS) continue;
        int can = 0;
        CUresult res = v->cu->cuDeviceCanAccessPeer(&can, v->device, peer);
        if (res != CUDA_SUCCESS) return mj_cuda_fail(res, "cuDeviceCanAccessPeer");
        if (!can)
            return mj_fail(MJ_ERR_UNSUPPORTED,
                           "rank %d (device %d, PCI %s) cannot access rank %d's device (%d, PCI "
                           "%s): no peer-to-peer path between these GPUs (NVLink or PCIe P2P "
                           "disabled); symmetric buffers need every pair of ranks to be peers",
                           self, (int)v->device, all[self].bus_id, r, (int)peer, all[r].bus_id);
    }
    return MJ_OK;
}

/* Imports every peer's allocation: FABRIC handles from the all-gather, or file
 * descriptors over the host's Unix sockets. Local: failures are agreed on later. */
static mj_status import_peers(mj_vmm *v, const vmm_info *all, mj_fd_channel *chan, int own_fd) {
    const mj_cuda *cu = v->cu;
    const int self = v->group.rank, n = v->group.nranks;
    int *fds = malloc(sizeof *fds * (size_t)n);
    if (!fds) return mj_fail(MJ_ERR_NOMEM, "out of memory");
    mj_status st =
        v->fabric ? MJ_OK : mj_fd_channel_exchange(chan, own_fd, fds, MJ_VMM_FD_TIMEOUT_MS);
    for (int r = 0; st == MJ_OK && r < n; r++) {
        if (r == self) continue;
        CUmemFabricHandle fh = all[r].fabric_handle;
        void *shareable = v->fabric ? (void *)&fh : (void *)(intptr_t)fds[r];
        CUresult res = cu->cuMemImportFromShareableHandle(
            &v->peers[r].handle, shareable,
            v->fabric ? CU_MEM_HANDLE_TYPE_FABRIC : CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
        if (res != CUDA_SUCCESS) {
            char what[96];
            snprintf(what, sizeof what, "rank %d: importing rank %d's %s", self, r,
                     v->fabric ? "FABRIC handle" : "file descriptor");
            st = mj_cuda_fail(res, what);
        }
    }
    /* The imported handles keep the memory alive; the descriptors are spent. */
    if (!v->fabric)
        for (int r = 0; r < n; r++)
            if (r != self && fds[r] >= 0) close(fds[r]);
    free(fds);
    return st;
}

static mj_status map_all(mj_vmm *v) {
    const mj_cuda *cu = v->cu;
    const int n = v->group.nranks;
    size_t total = v->stride * (size_t)n;
    CUresult res = cu->cuMemAddressReserve(&v->base, total, 0, 0, 0);
    if (res != CUDA_SUCCESS) {
        v->base = 0;
        return mj_cuda_fail(res, "reserving the symmetric address range");
    }
    for (int r = 0; r < n; r++) {
        res =
            cu->cuMemMap(v->base + (CUdeviceptr)r * v->stride, v->stride, 0, v->peers[r].handle, 0);
        if (res != CUDA_SUCCESS) {
            char what[64];
            snprintf(what, sizeof what, "mapping rank %d's memory", r);
            return mj_cuda_fail(res, what);
        }
        v->peers[r].mapped = 1;
    }
    /* Only the local device: peers grant their own devices access. */
    CUmemAccessDesc access = {
        .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = (int)v->device},
        .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    res = cu->cuMemSetAccess(v->base, total, &access, 1);
    if (res != CUDA_SUCCESS) {
        char what[200];
        snprintf(what, sizeof what,
                 "rank %d: granting device %d access to the peers' memory (are all GPUs "
                 "peer-to-peer capable and visible?)",
                 v->group.rank, (int)v->device);
        return mj_cuda_fail(res, what);
    }
    /* Complete before the barrier, without waiting on (or for) the caller's work. */
    return mj_cuda_zero_private(cu, v->base + (CUdeviceptr)v->group.rank * v->stride, v->stride,
                                "zeroing the symmetric region");
}

mj_status mj_vmm_create(const mj_cuda *cu, CUdevice device, const mj_group *g, size_t bytes,
                        mj_vmm *out) {
    memset(out, 0, sizeof *out);
    if (g->nranks < 1 || g->rank < 0 || g->rank >= g->nranks || !g->allgather)
        return mj_fail(MJ_ERR_INVALID_ARG, "rank %d outside 0..%d or no all-gather", g->rank,
                       g->nranks - 1);
    mj_vmm *v = out;
    v->cu = cu;
    v->group = *g;
    v->device = device;
    v->peers = calloc((size_t)g->nranks, sizeof *v->peers);
    vmm_info *all = calloc((size_t)g->nranks, sizeof *all);
    vmm_info me;
    memset(&me, 0, sizeof me);
    mj_status st = v->peers && all ? allocate(v, bytes, mode_from_env(), &me)
                                   : mj_fail(MJ_ERR_NOMEM, "out of memory");
    if ((st = mj_group_agree(g, st, "allocating its symmetric memory")) == MJ_OK)
        st = g->allgather(g->ctx, &me, all, sizeof me);
    if (st == MJ_OK) st = check_layout(v, all, &v->fabric);
    for (int r = 0; st == MJ_OK && r < g->nranks; r++)
        if (r != g->rank && strcmp(all[r].host, me.host) == 0 &&
            strcmp(all[r].bus_id, me.bus_id) == 0)
            v->shares_device = 1;
    if (st == MJ_OK) st = mj_group_agree(g, check_peer_access(v, all), "checking peer access");
    mj_fd_channel *chan = NULL;
    int own_fd = -1;
    if (st == MJ_OK && !v->fabric) {
        CUresult res = cu->cuMemExportToShareableHandle(
            &own_fd, v->peers[g->rank].handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
        st = res == CUDA_SUCCESS ? MJ_OK : mj_cuda_fail(res, "exporting a POSIX file descriptor");
        /* Ranks enter the exchange together, or the others would wait out its timeout. */
        st = mj_group_agree(g, st, "exporting its memory as a file descriptor");
        if (st == MJ_OK) st = mj_fd_channel_open(g, &chan);
    }
    if (st == MJ_OK) {
        mj_status local = import_peers(v, all, chan, own_fd);
        if (local == MJ_OK) local = map_all(v);
        /* Also the first-launch barrier: past it every region is mapped and zeroed. */
        st = mj_group_agree(g, local, "importing and mapping the peers' memory");
    }
    mj_fd_channel_close(chan);
    if (own_fd >= 0) close(own_fd);
    free(all);
    if (st != MJ_OK) mj_vmm_destroy(v);
    return st;
}

void mj_vmm_destroy(mj_vmm *v) {
    if (!v->cu) return;
    for (int r = 0; v->peers && r < v->group.nranks; r++) {
        if (v->peers[r].mapped) v->cu->cuMemUnmap(v->base + (CUdeviceptr)r * v->stride, v->stride);
        if (v->peers[r].handle) v->cu->cuMemRelease(v->peers[r].handle);
    }
    if (v->base) v->cu->cuMemAddressFree(v->base, v->stride * (size_t)v->group.nranks);
    free(v->peers);
    memset(v, 0, sizeof *v);
}
