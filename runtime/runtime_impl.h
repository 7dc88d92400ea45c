/* The runtime object, shared by the public entry points in apis/. */
#ifndef MJ_RUNTIME_IMPL_H
#define MJ_RUNTIME_IMPL_H

#include <pthread.h>

#include "apis/megajit.h"
#include "cache/cache.h"
#include "runtime/cuda_driver.h"
#include "runtime/kernel_spec.h"
#include "runtime/templates.h"

typedef struct mj_family_settings {
    int num_sms; /* 0 = all */
    int pdl;
} mj_family_settings;

typedef struct mj_kernel_map mj_kernel_map;

struct mj_runtime {
    pthread_mutex_t lock; /* guards families and stats */
    mj_family_settings families[MJ_FAMILY_COUNT_];
    mj_runtime_stats stats;

    const mj_cuda *cu; /* NULL without a driver */
    CUdevice device;
    CUcontext ctx;
    int owns_primary_ctx;
    int device_sms;
    char device_name[128];

    mj_arch arch;
    char arch_name[16];
    int check_device_inputs;

    mjc_db *cache;    /* NULL when disabled */
    int store_failed; /* a failed store was logged; later ones are not (build_lock) */
    char cache_dir[4096];
    char cache_ro[4096];
    int cache_disabled;

    const mj_template_set *templates; /* embedded, or MEGAJIT_TEMPLATE_DIR's */
    mj_template_set *owned_templates;
    pthread_mutex_t build_lock; /* one miss at a time per process: compiles share NVRTC */
    mj_kernel_map *kernels;

    /* Strings behind mj_runtime_info. */
    char nvrtc_version[64];
    char cache_filesystem[32];
    char cache_journal_mode[16];
};

/* Makes rt's context current on the calling thread; MJ_ERR_NO_DEVICE without one. */
mj_status mj_runtime_bind(mj_runtime *rt);
/* The effective SM count of a family (resolves 0 to the device's). */
int mj_runtime_family_sms(mj_runtime *rt, mj_family family);
int mj_runtime_family_pdl(mj_runtime *rt, mj_family family);

#endif
