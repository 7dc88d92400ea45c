#include "runtime/nccl_lib.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/error.h"

/* ncclCommInitRank's ABI (ncclUniqueId by value) and ncclCommCuDevice date from 2.x;
 * 2.18 is the oldest release tested against CUDA 12+ drivers. */
#define MJ_MIN_NCCL 21800

static mj_nccl nccl;
static int nccl_ok;
static char nccl_error[1024];
static pthread_once_t nccl_once = PTHREAD_ONCE_INIT;

static void *open_nccl(char *path, size_t cap) {
    const char *explicit_path = getenv("MEGAJIT_NCCL_LIB");
    if (explicit_path && *explicit_path) {
        /* An explicit choice must not silently fall back to another library. */
        snprintf(path, cap, "%s", explicit_path);
        return dlopen(path, RTLD_NOW | RTLD_LOCAL);
    }
    snprintf(path, cap, "libnccl.so.2");
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h) return h;
    const char *homes[] = {getenv("CUDA_HOME"), "/usr/local/cuda"};
    for (size_t i = 0; i < sizeof homes / sizeof homes[0]; i++) {
        if (!homes[i] || !*homes[i]) continue;
        snprintf(path, cap, "%s/lib64/libnccl.so.2", homes[i]);
        if ((h = dlopen(path, RTLD_NOW | RTLD_LOCAL))) return h;
    }
    return NULL;
}

static void load_nccl(void) {
    void *lib = open_nccl(nccl.path, sizeof nccl.path);
    if (!lib) {
        snprintf(nccl_error, sizeof nccl_error,
                 "NCCL not found: dlopen of libnccl.so.2 failed (%s); install NCCL >= 2.18 "
                 "or set MEGAJIT_NCCL_LIB, LD_LIBRARY_PATH or CUDA_HOME",
                 dlerror());
        return;
    }
#define MJ_NCCL_LOAD(name)                                                                         \
    {                                                                                              \
        void *p = dlsym(lib, #name);                                                               \
        if (!p) {                                                                                  \
            snprintf(nccl_error, sizeof nccl_error, "%s lacks %s (NCCL >= 2.18 needed)",           \
                     nccl.path, #name);                                                            \
            return;                                                                                \
        }                                                                                          \
        memcpy(&nccl.name, &p, sizeof p);                                                          \
    }
    MJ_NCCL_FUNCTIONS(MJ_NCCL_LOAD)
#undef MJ_NCCL_LOAD
    if (nccl.ncclGetVersion(&nccl.version) != ncclSuccess || nccl.version < MJ_MIN_NCCL) {
        snprintf(nccl_error, sizeof nccl_error, "%s is NCCL version %d; megajit needs >= %d",
                 nccl.path, nccl.version, MJ_MIN_NCCL);
        return;
    }
    nccl_ok = 1;
}

const mj_nccl *mj_nccl_get(void) {
    pthread_once(&nccl_once, load_nccl);
    if (!nccl_ok) {
        mj_fail(MJ_ERR_UNSUPPORTED, "%s", nccl_error);
        return NULL;
    }
    return &nccl;
}

mj_status mj_nccl_fail(const mj_nccl *n, ncclResult_t r, const char *what) {
    const char *msg = n ? n->ncclGetErrorString(r) : NULL;
    return mj_fail(MJ_ERR_CUDA, "%s: NCCL error %d (%s)", what, (int)r, msg ? msg : "?");
}
