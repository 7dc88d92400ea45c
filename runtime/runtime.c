/* The runtime object: device attachment, cache, templates, per-family
 * settings, statistics and information. */
#include "runtime/runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/env.h"
#include "runtime/error.h"
#include "runtime/kernel_map.h"
#include "runtime/limits.h"
#include "runtime/log.h"
#include "runtime/nvrtc_lib.h"

/* Attaches to the caller's current context, or device 0's primary context. */
static mj_status attach_device(mj_runtime *rt) {
    const mj_cuda *cu = mj_cuda_get();
    if (!cu) {
        /* Not an error: this runtime compiles and caches only. */
        mj_log(MJ_LOG_INFO, "%s; compile and cache only", mj_last_error());
        mj_clear_error();
        return MJ_OK;
    }
    CUresult r = cu->cuCtxGetCurrent(&rt->ctx);
    if (r == CUDA_SUCCESS && rt->ctx) {
        r = cu->cuCtxGetDevice(&rt->device);
    } else {
        int count = 0;
        if (cu->cuDeviceGetCount(&count) != CUDA_SUCCESS || count == 0) {
            mj_log(MJ_LOG_INFO, "no CUDA device; compile and cache only");
            return MJ_OK;
        }
        r = cu->cuDeviceGet(&rt->device, 0);
        if (r == CUDA_SUCCESS) r = cu->cuDevicePrimaryCtxRetain(&rt->ctx, rt->device);
        if (r == CUDA_SUCCESS) rt->owns_primary_ctx = 1;
    }
    if (r != CUDA_SUCCESS) return mj_cuda_fail(r, "attaching to the CUDA device");
    int major = 0, minor = 0;
    cu->cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, rt->device);
    cu->cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, rt->device);
    cu->cuDeviceGetAttribute(&rt->device_sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, rt->device);
    cu->cuDeviceGetName(rt->device_name, sizeof rt->device_name, rt->device);
    rt->cu = cu;
    if (!rt->arch) {
        rt->arch = major == 9 && minor == 0    ? MJ_ARCH_SM90A
                   : major == 10 && minor == 0 ? MJ_ARCH_SM100A
                                               : (mj_arch)0;
        if (!rt->arch)
            return mj_fail(MJ_ERR_UNSUPPORTED,
                           "device %s has compute capability %d.%d; megajit kernels target "
                           "sm_90a and sm_100a",
                           rt->device_name, major, minor);
    }
    return MJ_OK;
}

static mj_status open_cache(mj_runtime *rt, const mj_runtime_options *o, const mj_env *env) {
    rt->cache_disabled = o->cache_disable || env->cache_disable;
    snprintf(rt->cache_dir, sizeof rt->cache_dir, "%s",
             o->cache_dir ? o->cache_dir : env->cache_dir);
    const char *ro = o->cache_ro ? o->cache_ro : env->cache_ro;
    snprintf(rt->cache_ro, sizeof rt->cache_ro, "%s", ro ? ro : "");
    if (rt->cache_disabled) return MJ_OK;
    if (!o->cache_dir && env->cache_dir_fallback)
        mj_log(MJ_LOG_WARN,
               "HOME and XDG_CACHE_HOME are unset (or relative): the kernel cache is %s, which "
               "does not outlive the temporary directory; set MEGAJIT_CACHE_DIR to keep kernels",
               rt->cache_dir);
    mjc_open_opts co = {.dir = rt->cache_dir,
                        .ro_layers = ro,
                        .ro_allow_writable = env->cache_ro_allow_writable,
                        .warn = mj_log_cache_warning};
    char err[1024];
    if (mjc_open(&co, &rt->cache, err, sizeof err) != MJC_OK)
        return mj_fail(MJ_ERR_CACHE, "%s", err);
    snprintf(rt->cache_filesystem, sizeof rt->cache_filesystem, "%s",
             mjc_filesystem_name(rt->cache_dir));
    char journal[sizeof rt->cache_journal_mode];
    mj_log(MJ_LOG_INFO, "kernel cache %s (%s, journal %s)%s%s", mjc_path(rt->cache),
           rt->cache_filesystem, mjc_journal_mode(rt->cache, journal, sizeof journal),
           ro ? ", read-only layers " : "", ro ? ro : "");
    return MJ_OK;
}

mj_status mj_runtime_new(const mj_runtime_options *o, mj_runtime **out) {
    *out = NULL;
    const mj_env *env = mj_env_get();
    mj_runtime *rt = calloc(1, sizeof *rt);
    if (!rt) return mj_fail(MJ_ERR_NOMEM, "out of memory");
    pthread_mutex_init(&rt->lock, NULL);
    pthread_mutex_init(&rt->build_lock, NULL);
    rt->check_device_inputs = o->check_device_inputs;
    rt->compile_disabled_by = env->jit_disable    ? "MEGAJIT_JIT_DISABLE=1"
                              : !o->allow_compile ? "mj_runtime_options.allow_compile = 0"
                                                  : NULL;
    mj_status st = MJ_OK;
    if (o->arch && !(rt->arch = mj_arch_parse(o->arch)))
        st = mj_fail(MJ_ERR_INVALID_ARG, "unknown arch \"%s\" (expected sm_90a or sm_100a)",
                     o->arch);
    if (st == MJ_OK) st = attach_device(rt);
    if (st == MJ_OK && !rt->arch) rt->arch = MJ_ARCH_SM90A;
    snprintf(rt->arch_name, sizeof rt->arch_name, "%s", mj_arch_name(rt->arch));
    if (st == MJ_OK && env->template_dir) {
        st = mj_template_set_from_dir(env->template_dir, &rt->owned_templates);
        rt->templates = rt->owned_templates;
    } else {
        rt->templates = mj_template_set_embedded();
    }
    if (st == MJ_OK) st = open_cache(rt, o, env);
    if (st == MJ_OK && !(rt->kernels = mj_kernel_map_create()))
        st = mj_fail(MJ_ERR_NOMEM, "out of memory");
    if (st != MJ_OK) {
        mj_runtime_free(rt);
        return st;
    }
    *out = rt;
    return MJ_OK;
}

void mj_runtime_free(mj_runtime *rt) {
    if (!rt) return;
    mj_kernel_map_destroy(rt->kernels, rt->cu);
    if (rt->cache) mjc_close(rt->cache);
    mj_template_set_free(rt->owned_templates);
    if (rt->owns_primary_ctx) rt->cu->cuDevicePrimaryCtxRelease(rt->device);
    pthread_mutex_destroy(&rt->build_lock);
    pthread_mutex_destroy(&rt->lock);
    free(rt);
}

mj_status mj_runtime_bind(mj_runtime *rt) {
    if (!rt->cu)
        return mj_fail(MJ_ERR_NO_DEVICE, "no CUDA device: this runtime can compile and cache "
                                         "kernels but not launch them");
    CUcontext cur = NULL;
    if (rt->cu->cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == rt->ctx) return MJ_OK;
    CUresult r = rt->cu->cuCtxSetCurrent(rt->ctx);
    return r == CUDA_SUCCESS ? MJ_OK : mj_cuda_fail(r, "cuCtxSetCurrent");
}

mj_status mj_runtime_set_family_sms(mj_runtime *rt, mj_family family, int num_sms) {
    int max = rt->cu ? rt->device_sms : MJ_LIMIT_NUM_SMS_MAX;
    if (num_sms < 0 || num_sms > max)
        return mj_fail(MJ_ERR_INVALID_ARG, "%s: SM count %d outside 0..%d (0 = all)",
                       mj_family_name(family), num_sms, max);
    pthread_mutex_lock(&rt->lock);
    rt->families[family].num_sms = num_sms;
    pthread_mutex_unlock(&rt->lock);
    return MJ_OK;
}

void mj_runtime_set_family_pdl(mj_runtime *rt, mj_family family, int enable) {
    pthread_mutex_lock(&rt->lock);
    rt->families[family].pdl = enable != 0;
    pthread_mutex_unlock(&rt->lock);
}

mj_family_settings mj_runtime_family_settings(const mj_runtime *rt, mj_family family) {
    pthread_mutex_lock((pthread_mutex_t *)&rt->lock);
    mj_family_settings s = rt->families[family];
    pthread_mutex_unlock((pthread_mutex_t *)&rt->lock);
    return s;
}

int mj_runtime_family_sms(const mj_runtime *rt, mj_family family) {
    int n = mj_runtime_family_settings(rt, family).num_sms;
    return n ? n : rt->device_sms;
}

mj_runtime_stats mj_runtime_read_stats(const mj_runtime *rt) {
    pthread_mutex_lock((pthread_mutex_t *)&rt->lock);
    mj_runtime_stats s = rt->stats;
    s.memory_hits = __atomic_load_n(&rt->stats.memory_hits, __ATOMIC_RELAXED);
    pthread_mutex_unlock((pthread_mutex_t *)&rt->lock);
    return s;
}

/* dst = src under rt's lock, written only when it changes: an mj_info handed
 * out earlier keeps pointing at the same text. */
static void keep_text(mj_runtime *rt, char *dst, size_t cap, const char *src) {
    pthread_mutex_lock(&rt->lock);
    if (strncmp(dst, src, cap)) snprintf(dst, cap, "%s", src);
    pthread_mutex_unlock(&rt->lock);
}

void mj_runtime_describe(mj_runtime *rt, mj_info *info) {
    const char *nv = mj_nvrtc_version();
    keep_text(rt, rt->nvrtc_version, sizeof rt->nvrtc_version, nv ? nv : "");
    /* Read now: the database may have been created (at the first store) since open. */
    char journal[sizeof rt->cache_journal_mode] = "";
    if (rt->cache) mjc_journal_mode(rt->cache, journal, sizeof journal);
    keep_text(rt, rt->cache_journal_mode, sizeof rt->cache_journal_mode, journal);
    *info = (mj_info){
        .megajit_version = MJ_VERSION_STRING,
        .nvrtc_version = rt->nvrtc_version,
        .driver_version = rt->cu ? rt->cu->driver_version : 0,
        .device_name = rt->cu ? rt->device_name : "",
        .device_sms = rt->cu ? rt->device_sms : 0,
        .arch = rt->arch_name,
        .cache_path = rt->cache ? mjc_path(rt->cache) : "",
        .cache_filesystem = rt->cache_filesystem,
        .cache_journal_mode = rt->cache_journal_mode,
        .cache_ro_layers = rt->cache_ro,
        .cache_disabled = rt->cache_disabled,
    };
}
