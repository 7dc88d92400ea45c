/*
 * The runtime object: the device it launches on (or none), the architecture it
 * compiles for, the kernel cache, the loaded kernels and the per-family
 * settings. apis/runtime.c checks the public calls' arguments and calls these.
 */
#ifndef MJ_RUNTIME_H
#define MJ_RUNTIME_H

#include <pthread.h>

#include "cache/cache.h"
#include "include/megajit.h"
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
    /* NULL: launches compile missing kernels; else the switch that forbids it. */
    const char *compile_disabled_by;

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

/* A runtime from options the caller checked (never NULL). Without a CUDA
 * driver it still opens, for compiling and caching only. */
mj_status mj_runtime_new(const mj_runtime_options *opts, mj_runtime **out);
void mj_runtime_free(mj_runtime *rt);

/* Makes rt's context current on the calling thread; MJ_ERR_NO_DEVICE without one. */
mj_status mj_runtime_bind(mj_runtime *rt);

/* Per-family settings; family must be valid. The setter checks num_sms
 * against the device (0 = all SMs). */
mj_status mj_runtime_set_family_sms(mj_runtime *rt, mj_family family, int num_sms);
void mj_runtime_set_family_pdl(mj_runtime *rt, mj_family family, int enable);
mj_family_settings mj_runtime_family_settings(const mj_runtime *rt, mj_family family);
/* The effective SM count of a family (resolves 0 to the device's). */
int mj_runtime_family_sms(const mj_runtime *rt, mj_family family);

mj_runtime_stats mj_runtime_read_stats(const mj_runtime *rt);
/* Fills info; its strings are owned by rt. */
void mj_runtime_describe(mj_runtime *rt, mj_info *info);

#endif
