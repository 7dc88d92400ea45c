#include "runtime/cuda_driver.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "runtime/error.h"

static mj_cuda driver;
static int driver_ok;
static char driver_error[512];
static pthread_once_t driver_once = PTHREAD_ONCE_INIT;

/* The minimum driver for CUDA 13 cubins (NVRTC 13 emits them). */
#define MJ_MIN_DRIVER 13000

typedef CUresult (*get_proc_fn)(const char *, void **, int, cuuint64_t,
                                CUdriverProcAddressQueryResult *);

static void load_driver(void) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(driver_error, sizeof driver_error,
                 "no CUDA driver on this machine (dlopen libcuda.so.1: %s)", dlerror());
        return;
    }
    get_proc_fn get_proc = (get_proc_fn)dlsym(lib, "cuGetProcAddress_v2");
    if (!get_proc) {
        snprintf(driver_error, sizeof driver_error,
                 "libcuda.so.1 has no cuGetProcAddress_v2 (driver older than CUDA 12)");
        return;
    }
#define MJ_CU_LOAD(name, version)                                                                  \
    {                                                                                              \
        CUdriverProcAddressQueryResult q;                                                          \
        void *p = NULL;                                                                            \
        CUresult r = get_proc(#name, &p, version, CU_GET_PROC_ADDRESS_DEFAULT, &q);                \
        if (r != CUDA_SUCCESS || q != CU_GET_PROC_ADDRESS_SUCCESS || !p) {                         \
            snprintf(driver_error, sizeof driver_error,                                            \
                     r == CUDA_ERROR_STUB_LIBRARY                                                  \
                         ? "no CUDA driver on this machine (only the toolkit's stub libcuda)"      \
                         : "the CUDA driver lacks %s (error %d); a driver >= 580 is needed",       \
                     #name, (int)r);                                                               \
            return;                                                                                \
        }                                                                                          \
        memcpy(&driver.name, &p, sizeof p);                                                        \
    }
    MJ_CU_FUNCTIONS(MJ_CU_LOAD)
#undef MJ_CU_LOAD
    CUresult r = driver.cuInit(0);
    if (r != CUDA_SUCCESS) {
        const char *msg = NULL;
        driver.cuGetErrorString(r, &msg);
        snprintf(driver_error, sizeof driver_error, "cuInit failed: %s", msg ? msg : "?");
        return;
    }
    driver.cuDriverGetVersion(&driver.driver_version);
    if (driver.driver_version < MJ_MIN_DRIVER) {
        snprintf(driver_error, sizeof driver_error,
                 "the CUDA driver supports CUDA %d.%d; megajit's cubins need 13.0 (driver >= 580)",
                 driver.driver_version / 1000, driver.driver_version % 1000 / 10);
        return;
    }
    driver_ok = 1;
}

const mj_cuda *mj_cuda_get(void) {
    pthread_once(&driver_once, load_driver);
    if (!driver_ok) {
        mj_fail(MJ_ERR_NO_DEVICE, "%s", driver_error);
        return NULL;
    }
    return &driver;
}

mj_status mj_cuda_fail(CUresult r, const char *what) {
    const char *name = "?", *msg = "?";
    if (driver_ok) {
        driver.cuGetErrorName(r, &name);
        driver.cuGetErrorString(r, &msg);
    }
    mj_status s = r == CUDA_ERROR_OUT_OF_MEMORY ? MJ_ERR_NOMEM : MJ_ERR_CUDA;
    return mj_fail(s, "%s: %s (%s)", what, name ? name : "?", msg ? msg : "?");
}

mj_status mj_cuda_zero_private(const mj_cuda *cu, CUdeviceptr p, size_t bytes, const char *what) {
    CUstream s = NULL;
    CUresult r = cu->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
    if (r == CUDA_SUCCESS) r = cu->cuMemsetD8Async(p, 0, bytes, s);
    if (r == CUDA_SUCCESS) r = cu->cuStreamSynchronize(s);
    if (s) cu->cuStreamDestroy(s);
    return r == CUDA_SUCCESS ? MJ_OK : mj_cuda_fail(r, what);
}
