#include "runtime/jit.h"
#include "runtime/clock.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "runtime/cache_key.h"
#include "runtime/device.h"
#include "runtime/env.h"
#include "runtime/error.h"
#include "runtime/families/family.h"
#include "runtime/include_closure.h"
#include "runtime/kernel_map.h"
#include "runtime/log.h"
#include "runtime/nvrtc_lib.h"
#include "runtime/pch_dir.h"
#include "runtime/runtime.h"

/* Everything a miss needs, rendered once from the spec. */
typedef struct build_job {
    const mj_kernel_spec *spec;
    const char *family;
    char name_expression[256];
    char source[1024];
    char arch_option[64];
    const char *options[8];
    int num_options;
    char flags[512];
    const char *compiler;
    mj_closure closure;
    uint8_t key[16];
    char key_hex[33];
    /* NVRTC reuses an automatic PCH from its directory without re-reading
     * in-memory headers (seen with NVRTC 13.0), so each include closure gets
     * its own PCH directory: variants of one template version share a PCH;
     * edited headers never see a stale one. */
    char closure_hex[33];
    char program_name[64];
    char pch_dir_option[4200];
} build_job;

static mj_status prepare(const mj_template_set *templates, const mj_kernel_spec *spec,
                         build_job *job) {
    memset(job, 0, sizeof *job);
    job->spec = spec;
    const mj_family_desc *family = mj_family_get((mj_family)spec->family);
    const char *arch = mj_arch_name((mj_arch)spec->arch);
    if (!family || !arch || !mj_family_kernel_of(spec))
        return mj_fail(MJ_ERR_INVALID_ARG, "kernel spec names an unknown family, kernel or arch");
    job->family = family->name;
    if (mj_family_name_expression(spec, job->name_expression, sizeof job->name_expression) <= 0)
        return mj_fail(MJ_ERR_INVALID_ARG, "kernel spec of %s renders no name", job->family);
    /* Includes first, then a non-directive token, so NVRTC's PCH prefix is the
     * same for every instantiation of a template. */
    snprintf(job->source, sizeof job->source,
             "// megajit %s kernel, instantiated through the name expression\n"
             "// %s\n#include \"%s\"\nstruct mj_pch_stop_marker;\n",
             job->family, job->name_expression, family->template_path);
    if (!(job->compiler = mj_nvrtc_version())) return MJ_ERR_UNSUPPORTED;
    mj_status st = mj_closure_compute(templates, family->template_path, &job->closure);
    if (st != MJ_OK) return st;
    mjc_key_hex(job->closure.hash, job->closure_hex);
    snprintf(job->program_name, sizeof job->program_name, "megajit_%.16s.cu", job->closure_hex);
    snprintf(job->arch_option, sizeof job->arch_option, "--gpu-architecture=%s", arch);
    const char *opts[] = {job->arch_option, MJ_JIT_COMPILE_OPTIONS};
    job->num_options = (int)(sizeof opts / sizeof opts[0]);
    memcpy(job->options, opts, sizeof opts);
    mj_key_normalized_flags(job->options, job->num_options, job->flags, sizeof job->flags);
    char compiler[96];
    snprintf(compiler, sizeof compiler, "nvrtc %s", job->compiler);
    mj_key_parts parts = {job->family, job->closure.hash, job->source,      job->name_expression,
                          compiler,    job->options,      job->num_options, arch};
    mj_key_compute(&parts, job->key);
    mjc_key_hex(job->key, job->key_hex);
    return MJ_OK;
}

static void dump_file(const char *dir, const char *key_hex, const char *ext, const void *data,
                      size_t size) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.%s", dir, key_hex, ext);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, size, f) != size)
        mj_log(MJ_LOG_WARN, "cannot write dump %s: %s", path, strerror(errno));
    if (f) fclose(f);
}

static void dump_compile(const build_job *job, const mj_compile_input *in,
                         const mj_compile_output *out) {
    const char *dir = mj_env_get()->dump_dir;
    if (!dir) return;
    mkdir(dir, 0755);
    dump_file(dir, job->key_hex, "cu", job->source, strlen(job->source));
    dump_file(dir, job->key_hex, "cubin", out->cubin, out->cubin_size);
    dump_file(dir, job->key_hex, "log", out->log, strlen(out->log));
    char virtual_arch[32];
    snprintf(virtual_arch, sizeof virtual_arch, "compute_%s",
             mj_arch_name((mj_arch)job->spec->arch) + 3);
    char *ptx = NULL;
    if (mj_nvrtc_ptx(in, virtual_arch, &ptx) == MJ_OK)
        dump_file(dir, job->key_hex, "ptx", ptx, strlen(ptx));
    free(ptx);
}

static int cubin_is_elf(const void *cubin, size_t size) {
    return size > 64 && memcmp(cubin,
                               "\x7f"
                               "ELF",
                               4) == 0;
}

/* Compiles job and stores the cubin. A store that fails is an error only when
 * the caller asked for the kernel to be stored (precompile); a serving caller
 * has the cubin and keeps it in memory. */
static mj_status compile_and_publish(mj_runtime *rt, build_job *job, int require_store,
                                     mj_compile_output *out) {
    const char *names[64], *sources[64];
    if (job->closure.count > 64) return mj_fail(MJ_ERR_UNSUPPORTED, "too many headers");
    mjc_header headers[64];
    for (int i = 0; i < job->closure.count; i++) {
        names[i] = job->closure.files[i].file->path;
        sources[i] = job->closure.files[i].file->text;
        headers[i].path = names[i];
        memcpy(headers[i].content_hash, job->closure.files[i].content_hash, 16);
    }
    /* The PCH directory is made by the first compile, not by lookups: a process
     * that only hits the cache makes none. PCH options are not keyed. Without a
     * private directory for the PCH, compile without one. */
    const char *pch_dir = mj_pch_dir();
    if (pch_dir) {
        snprintf(job->pch_dir_option, sizeof job->pch_dir_option, "--pch-dir=%s/%.16s", pch_dir,
                 job->closure_hex);
        job->options[job->num_options++] = job->pch_dir_option;
        job->options[job->num_options++] = "--pch";
    }
    mj_compile_input in = {job->program_name,  job->source,  job->name_expression, names, sources,
                           job->closure.count, job->options, job->num_options};
    mj_status st = mj_nvrtc_compile(&in, out);
    if (st != MJ_OK) return st;
    if (!cubin_is_elf(out->cubin, out->cubin_size))
        return mj_fail(MJ_ERR_COMPILE, "NVRTC returned a cubin that is not an ELF image for %s",
                       job->name_expression);
    dump_compile(job, &in, out);
    pthread_mutex_lock(&rt->lock);
    rt->stats.compiles++;
    rt->stats.compile_seconds += out->milliseconds / 1e3;
    pthread_mutex_unlock(&rt->lock);
    mj_log(MJ_LOG_INFO, "compiled %s for %s in %.0f ms (%zu-byte cubin)", job->name_expression,
           mj_arch_name((mj_arch)job->spec->arch), out->milliseconds, out->cubin_size);
    if (!rt->cache) {
        if (!require_store) return MJ_OK;
        return mj_fail(MJ_ERR_CACHE, "compiled %s but did not store it: the cache is disabled",
                       job->name_expression);
    }
    char compiler[96];
    snprintf(compiler, sizeof compiler, "nvrtc %s", job->compiler);
    mjc_entry e = {.family = job->family,
                   .kernel_name = job->name_expression,
                   .lowered_name = out->lowered_name,
                   .arch = mj_arch_name((mj_arch)job->spec->arch),
                   .compiler = compiler,
                   .flags = job->flags,
                   .source = job->source,
                   .log = out->log,
                   .cubin = out->cubin,
                   .cubin_size = out->cubin_size,
                   .compile_ms = out->milliseconds,
                   .headers = headers,
                   .num_headers = (size_t)job->closure.count};
    memcpy(e.key, job->key, 16);
    if (mjc_insert(rt->cache, &e) == MJC_OK) return MJ_OK;
    if (require_store)
        return mj_fail(MJ_ERR_CACHE, "compiled %s but could not store it in the cache: %s",
                       job->name_expression, mjc_errmsg(rt->cache));
    /* One warning says the cache stopped taking kernels; one per kernel would
     * bury the rest of the log (misses run under build_lock, so no race). */
    if (!rt->store_failed)
        mj_log(MJ_LOG_WARN,
               "could not store %s in the cache: %s; kernels this runtime compiles are kept in "
               "memory only (further store failures are not logged)",
               job->name_expression, mjc_errmsg(rt->cache));
    rt->store_failed = 1;
    return MJ_OK;
}

static int cache_lookup(mj_runtime *rt, const build_job *job, mjc_found *found) {
    if (!rt->cache) return 0;
    int healed = 0;
    int rc = mjc_lookup(rt->cache, job->key, found, &healed);
    if (healed) {
        pthread_mutex_lock(&rt->lock);
        rt->stats.healed++;
        pthread_mutex_unlock(&rt->lock);
    }
    return rc == MJC_OK;
}

/* The cubin and lowered name of job, from the cache or a fresh compile under
 * the per-key lock (so concurrent processes compile each key once). for_launch:
 * a launch's kernel, which the compile switch may forbid and which stays in
 * memory when the cache cannot take it; else precompiling, which must store it. */
static mj_status obtain(mj_runtime *rt, build_job *job, int for_launch, mj_stream capture_stream,
                        void **cubin, size_t *cubin_size, char **lowered, mj_build_result *result) {
    mjc_found found = {0};
    if (cache_lookup(rt, job, &found)) goto hit;
    const char *arch = mj_arch_name((mj_arch)job->spec->arch);
    if (for_launch && rt->compile_disabled_by)
        return mj_fail(MJ_ERR_NOT_FOUND,
                       "kernel %s (%s) is not in the cache and %s forbids compiling it here; "
                       "build it ahead of time with `megajit precompile --manifest FILE --arch "
                       "%s --cache %s`, FILE listing this layer (docs/manifest.md)",
                       job->name_expression, arch, rt->compile_disabled_by, arch,
                       rt->cache_disabled ? "DIR" : rt->cache_dir);
    if (rt->cu && mj_stream_capturing(rt, capture_stream) == 1)
        return mj_fail(MJ_ERR_CAPTURE,
                       "kernel %s (%s) is not compiled and the stream is capturing a CUDA "
                       "graph; precompile it (megajit precompile) or run it once before "
                       "capture",
                       job->name_expression, arch);
    int lock_fd = -1;
    if (rt->cache && mjc_lock_key(rt->cache, job->key, &lock_fd) != MJC_OK)
        mj_log(MJ_LOG_WARN, "compile lock unavailable (%s); compiling anyway",
               mjc_errmsg(rt->cache));
    if (cache_lookup(rt, job, &found)) {
        mjc_unlock_key(lock_fd);
        goto hit;
    }
    mj_compile_output out;
    mj_status st = compile_and_publish(rt, job, !for_launch, &out);
    mjc_unlock_key(lock_fd);
    if (st != MJ_OK) {
        mj_compile_output_free(&out);
        if (result) *result = MJ_BUILD_FAILED;
        return st;
    }
    *cubin = out.cubin;
    *cubin_size = out.cubin_size;
    *lowered = out.lowered_name;
    free(out.log);
    if (result) *result = MJ_BUILD_COMPILED;
    return MJ_OK;
hit:
    pthread_mutex_lock(&rt->lock);
    rt->stats.disk_hits++;
    pthread_mutex_unlock(&rt->lock);
    *cubin = found.cubin;
    *cubin_size = found.cubin_size;
    *lowered = found.lowered_name;
    if (result) *result = MJ_BUILD_CACHED;
    return MJ_OK;
}

mj_status mj_jit_build(mj_runtime *rt, const mj_kernel_spec *spec, mj_build_result *result,
                       double *seconds) {
    const double t0 = mj_monotonic_ms();
    *result = MJ_BUILD_FAILED;
    build_job job;
    pthread_mutex_lock(&rt->build_lock);
    mj_status st = prepare(rt->templates, spec, &job);
    void *cubin = NULL;
    char *lowered = NULL;
    size_t size = 0;
    if (st == MJ_OK) st = obtain(rt, &job, 0, NULL, &cubin, &size, &lowered, result);
    pthread_mutex_unlock(&rt->build_lock);
    mj_closure_free(&job.closure);
    free(cubin);
    free(lowered);
    if (seconds) *seconds = (mj_monotonic_ms() - t0) / 1e3;
    return st;
}

/* Loads the function (cuFuncLoad) at its first request rather than inside a
 * launch: loading can wait for kernels already running, and the kernels of
 * emulated ranks spin until every rank's kernel runs. */
static mj_status load(mj_runtime *rt, struct mj_kernel *k) {
    const mj_cuda *cu = rt->cu;
    pthread_mutex_lock(&k->load_lock);
    mj_status st = MJ_OK;
    if (!k->function) {
        CUfunction fn = NULL;
        CUkernel kernel = NULL;
        CUresult r = cu->cuLibraryLoadData(&k->library, k->cubin, NULL, NULL, 0, NULL, NULL, 0);
        if (r != CUDA_SUCCESS) {
            k->library = NULL;
            st = mj_cuda_fail(r, "cuLibraryLoadData");
        } else if ((r = cu->cuLibraryGetKernel(&kernel, k->library, k->lowered_name)) !=
                       CUDA_SUCCESS ||
                   (r = cu->cuKernelGetFunction(&fn, kernel)) != CUDA_SUCCESS ||
                   (r = cu->cuFuncLoad(fn)) != CUDA_SUCCESS) {
            st = mj_cuda_fail(r, k->name_expression);
        } else {
            free(k->cubin);
            k->cubin = NULL;
            __atomic_store_n(&k->function, fn, __ATOMIC_RELEASE);
        }
    }
    pthread_mutex_unlock(&k->load_lock);
    return st;
}

mj_status mj_jit_get(mj_runtime *rt, const mj_kernel_spec *spec, mj_stream stream,
                     mj_kernel **out) {
    uint64_t hash = mj_kernel_spec_hash(spec);
    struct mj_kernel *k = mj_kernel_map_find(rt->kernels, spec, hash);
    if (k) {
        __atomic_fetch_add(&rt->stats.memory_hits, 1, __ATOMIC_RELAXED);
        *out = k;
        return MJ_OK;
    }
    pthread_mutex_lock(&rt->build_lock);
    k = mj_kernel_map_find(rt->kernels, spec, hash);
    mj_status st = MJ_OK;
    build_job job = {0};
    if (!k) {
        st = prepare(rt->templates, spec, &job);
        struct mj_kernel *fresh = st == MJ_OK ? calloc(1, sizeof *fresh) : NULL;
        if (st == MJ_OK && !fresh) st = mj_fail(MJ_ERR_NOMEM, "out of memory");
        if (st == MJ_OK) {
            fresh->spec = *spec;
            fresh->spec_hash = hash;
            pthread_mutex_init(&fresh->load_lock, NULL);
            snprintf(fresh->name_expression, sizeof fresh->name_expression, "%s",
                     job.name_expression);
            st = obtain(rt, &job, 1, stream, &fresh->cubin, &fresh->cubin_size,
                        &fresh->lowered_name, NULL);
            if (st == MJ_OK) {
                k = mj_kernel_map_insert(rt->kernels, fresh);
                if (!k) st = mj_fail(MJ_ERR_NOMEM, "out of memory");
            } else {
                mj_kernel_free(fresh);
            }
        }
        mj_closure_free(&job.closure);
    }
    pthread_mutex_unlock(&rt->build_lock);
    /* First use loads the module too, before anything of the caller runs. */
    if (st == MJ_OK && rt->cu && !__atomic_load_n(&k->function, __ATOMIC_ACQUIRE)) st = load(rt, k);
    *out = k;
    return st;
}

void mj_jit_launch_config(const mj_launch_config *cfg, mj_stream stream,
                          CUlaunchAttribute attrs[MJ_JIT_LAUNCH_ATTRS], CUlaunchConfig *out) {
    unsigned n = 0;
    if (cfg->cluster_x > 1) {
        attrs[n].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
        attrs[n].value.clusterDim.x = cfg->cluster_x;
        attrs[n].value.clusterDim.y = 1;
        attrs[n].value.clusterDim.z = 1;
        n++;
    }
    if (cfg->pdl) {
        attrs[n].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        attrs[n].value.programmaticStreamSerializationAllowed = 1;
        n++;
    }
    *out = (CUlaunchConfig){
        .gridDimX = cfg->grid[0],
        .gridDimY = cfg->grid[1],
        .gridDimZ = cfg->grid[2],
        .blockDimX = cfg->block[0],
        .blockDimY = cfg->block[1],
        .blockDimZ = cfg->block[2],
        .sharedMemBytes = cfg->smem_bytes,
        .hStream = (CUstream)stream,
        .attrs = attrs,
        .numAttrs = n,
    };
}

mj_status mj_jit_launch(mj_runtime *rt, mj_kernel *k, const mj_launch_config *cfg, mj_stream stream,
                        void **args) {
    const mj_cuda *cu = rt->cu;
    if (!cu) return mj_fail(MJ_ERR_NO_DEVICE, "no CUDA device: cannot launch kernels");
    CUfunction fn = __atomic_load_n(&k->function, __ATOMIC_ACQUIRE);
    if (!fn) {
        mj_status st = load(rt, k);
        if (st != MJ_OK) return st;
        fn = k->function;
    }
    if (cfg->smem_bytes > __atomic_load_n(&k->max_dynamic_smem, __ATOMIC_ACQUIRE)) {
        pthread_mutex_lock(&k->load_lock);
        CUresult r = CUDA_SUCCESS;
        int resident = cfg->ctas_per_sm;
        const char *what = "cuFuncSetAttribute(max dynamic smem)";
        if (cfg->smem_bytes > k->max_dynamic_smem) {
            r = cu->cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                       (int)cfg->smem_bytes);
            /* All of the SM's memory to shared memory: two CTAs of half of it
             * each fit only so. */
            if (r == CUDA_SUCCESS && cfg->ctas_per_sm > 1) {
                what = "cuFuncSetAttribute(shared memory carveout)";
                r = cu->cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
                                           CU_SHAREDMEM_CARVEOUT_MAX_SHARED);
            }
            if (r == CUDA_SUCCESS && cfg->ctas_per_sm > 1) {
                what = "cuOccupancyMaxActiveBlocksPerMultiprocessor";
                r = cu->cuOccupancyMaxActiveBlocksPerMultiprocessor(
                    &resident, fn, (int)(cfg->block[0] * cfg->block[1] * cfg->block[2]),
                    cfg->smem_bytes);
            }
            if (r == CUDA_SUCCESS && resident >= cfg->ctas_per_sm)
                __atomic_store_n(&k->max_dynamic_smem, cfg->smem_bytes, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&k->load_lock);
        if (r != CUDA_SUCCESS) return mj_cuda_fail(r, what);
        if (resident < cfg->ctas_per_sm)
            return mj_fail(MJ_ERR_UNSUPPORTED,
                           "%s: %d CTAs of %u bytes of shared memory fit an SM, its grid needs %d "
                           "resident together",
                           k->name_expression, resident, cfg->smem_bytes, cfg->ctas_per_sm);
    }
    CUlaunchAttribute attrs[MJ_JIT_LAUNCH_ATTRS];
    CUlaunchConfig lc;
    mj_jit_launch_config(cfg, stream, attrs, &lc);
    CUresult r = cu->cuLaunchKernelEx(&lc, fn, args, NULL);
    if (r != CUDA_SUCCESS) return mj_cuda_fail(r, k->name_expression);
    return MJ_OK;
}

mj_status mj_jit_cache_key(const mj_template_set *set, const mj_kernel_spec *spec,
                           uint8_t key[16]) {
    build_job job;
    mj_status st = prepare(set, spec, &job);
    if (st == MJ_OK) memcpy(key, job.key, 16);
    mj_closure_free(&job.closure);
    return st;
}
