#include "runtime/nvrtc_lib.h"
#include "runtime/clock.h"

#include <dlfcn.h>
#include <nvrtc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "runtime/error.h"
#include "runtime/log.h"

#define MJ_NVRTC_FUNCTIONS(X)                                                                      \
    X(nvrtcVersion)                                                                                \
    X(nvrtcGetErrorString)                                                                         \
    X(nvrtcCreateProgram)                                                                          \
    X(nvrtcDestroyProgram)                                                                         \
    X(nvrtcCompileProgram)                                                                         \
    X(nvrtcGetProgramLogSize)                                                                      \
    X(nvrtcGetProgramLog)                                                                          \
    X(nvrtcGetCUBINSize)                                                                           \
    X(nvrtcGetCUBIN)                                                                               \
    X(nvrtcGetPTXSize)                                                                             \
    X(nvrtcGetPTX)                                                                                 \
    X(nvrtcAddNameExpression)                                                                      \
    X(nvrtcGetLoweredName)                                                                         \
    X(nvrtcGetPCHHeapSize)                                                                         \
    X(nvrtcSetPCHHeapSize)                                                                         \
    X(nvrtcGetPCHCreateStatus)                                                                     \
    X(nvrtcGetPCHHeapSizeRequired)

static struct {
#define MJ_NVRTC_FIELD(name) __typeof__(&name) name;
    MJ_NVRTC_FUNCTIONS(MJ_NVRTC_FIELD)
#undef MJ_NVRTC_FIELD
} nv;
static int nvrtc_ok;
static char nvrtc_error[512];
static char nvrtc_version[64];
static pthread_once_t nvrtc_once = PTHREAD_ONCE_INIT;
/* NVRTC's PCH heap is process-global state; compiles share it one at a time. */
static pthread_mutex_t compile_lock = PTHREAD_MUTEX_INITIALIZER;

static void *open_nvrtc(void) {
    static const char *const names[] = {"libnvrtc.so.13", "libnvrtc.so"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (h) return h;
    }
    const char *home = getenv("CUDA_HOME");
    char path[4096];
    snprintf(path, sizeof path, "%s/lib64/libnvrtc.so.13",
             home && *home ? home : "/usr/local/cuda");
    return dlopen(path, RTLD_NOW | RTLD_LOCAL);
}

static int probe_build_number(void);

static void load_nvrtc(void) {
    void *lib = open_nvrtc();
    if (!lib) {
        snprintf(nvrtc_error, sizeof nvrtc_error,
                 "NVRTC not found (libnvrtc.so.13; set LD_LIBRARY_PATH or CUDA_HOME): %s",
                 dlerror());
        return;
    }
#define MJ_NVRTC_LOAD(name)                                                                        \
    {                                                                                              \
        void *p = dlsym(lib, #name);                                                               \
        if (!p) {                                                                                  \
            snprintf(nvrtc_error, sizeof nvrtc_error, "NVRTC lacks %s (NVRTC >= 12.8 needed)",     \
                     #name);                                                                       \
            return;                                                                                \
        }                                                                                          \
        memcpy(&nv.name, &p, sizeof p);                                                            \
    }
    MJ_NVRTC_FUNCTIONS(MJ_NVRTC_LOAD)
#undef MJ_NVRTC_LOAD
    int major = 0, minor = 0;
    nv.nvrtcVersion(&major, &minor);
    nvrtc_ok = 1;
    int build = probe_build_number();
    snprintf(nvrtc_version, sizeof nvrtc_version, "%d.%d.%d", major, minor, build);
}

static char *program_log(nvrtcProgram prog) {
    size_t n = 0;
    if (nv.nvrtcGetProgramLogSize(prog, &n) != NVRTC_SUCCESS || n == 0) n = 1;
    char *log = calloc(1, n + 1);
    if (log && n > 1) nv.nvrtcGetProgramLog(prog, log);
    return log;
}

static nvrtcResult create_program(const mj_compile_input *in, nvrtcProgram *prog) {
    return nv.nvrtcCreateProgram(prog, in->source, in->program_name, in->num_headers,
                                 in->header_sources, in->header_names);
}

/* The build number is not in nvrtcVersion(); the compiler macro carries it into
 * the PTX of a probe kernel. */
static int probe_build_number(void) {
    static const char src[] = "extern \"C\" __global__ void mj_probe(int *out) {"
                              " *out = __CUDACC_VER_BUILD__; }\n";
    const char *opts[] = {"--gpu-architecture=compute_90"};
    nvrtcProgram prog;
    if (nv.nvrtcCreateProgram(&prog, src, "mj_probe.cu", 0, NULL, NULL) != NVRTC_SUCCESS) return -1;
    int build = -1;
    size_t n = 0;
    if (nv.nvrtcCompileProgram(prog, 1, opts) == NVRTC_SUCCESS &&
        nv.nvrtcGetPTXSize(prog, &n) == NVRTC_SUCCESS) {
        char *ptx = malloc(n + 1);
        if (ptx && nv.nvrtcGetPTX(prog, ptx) == NVRTC_SUCCESS) {
            ptx[n] = '\0';
            /* The constant is stored as "st.global.u32 [%rdN], BUILD;". */
            const char *st = strstr(ptx, "st.global.u32");
            const char *comma = st ? strchr(st, ',') : NULL;
            if (comma) build = atoi(comma + 1);
        }
        free(ptx);
    }
    nv.nvrtcDestroyProgram(&prog);
    return build;
}

const char *mj_nvrtc_version(void) {
    pthread_once(&nvrtc_once, load_nvrtc);
    if (!nvrtc_ok) {
        mj_fail(MJ_ERR_UNSUPPORTED, "%s", nvrtc_error);
        return NULL;
    }
    return nvrtc_version;
}

/* NVRTC writes into --pch-dir but does not create it. */
static void make_pch_dirs(const mj_compile_input *in) {
    for (int i = 0; i < in->num_options; i++)
        if (strncmp(in->options[i], "--pch-dir=", 10) == 0) mkdir(in->options[i] + 10, 0700);
}

/* After a compile with --pch, NVRTC reports when the PCH heap was too small to
 * create the header; growing it lets the next compile of the process use one. */
static void grow_pch_heap(nvrtcProgram prog) {
    if (nv.nvrtcGetPCHCreateStatus(prog) != NVRTC_ERROR_PCH_CREATE_HEAP_EXHAUSTED) return;
    size_t need = 0, have = 0;
    if (nv.nvrtcGetPCHHeapSizeRequired(prog, &need) != NVRTC_SUCCESS) return;
    nv.nvrtcGetPCHHeapSize(&have);
    if (need <= have) return;
    size_t grown = need + need / 4;
    if (nv.nvrtcSetPCHHeapSize(grown) == NVRTC_SUCCESS)
        mj_log(MJ_LOG_INFO, "NVRTC PCH heap grown from %zu to %zu bytes", have, grown);
}

mj_status mj_nvrtc_compile(const mj_compile_input *in, mj_compile_output *out) {
    memset(out, 0, sizeof *out);
    if (!mj_nvrtc_version()) return MJ_ERR_UNSUPPORTED;
    pthread_mutex_lock(&compile_lock);
    double t0 = mj_monotonic_ms();
    mj_status st = MJ_OK;
    make_pch_dirs(in);
    nvrtcProgram prog;
    nvrtcResult r = create_program(in, &prog);
    if (r != NVRTC_SUCCESS) {
        pthread_mutex_unlock(&compile_lock);
        out->log = calloc(1, 1);
        return mj_fail(MJ_ERR_COMPILE, "nvrtcCreateProgram: %s", nv.nvrtcGetErrorString(r));
    }
    r = nv.nvrtcAddNameExpression(prog, in->name_expression);
    if (r == NVRTC_SUCCESS) r = nv.nvrtcCompileProgram(prog, in->num_options, in->options);
    out->log = program_log(prog);
    if (r != NVRTC_SUCCESS) {
        st = mj_fail(MJ_ERR_COMPILE, "NVRTC failed to compile %s: %s\n%s", in->name_expression,
                     nv.nvrtcGetErrorString(r), out->log ? out->log : "");
        goto done;
    }
    grow_pch_heap(prog);
    const char *lowered = NULL;
    if (nv.nvrtcGetLoweredName(prog, in->name_expression, &lowered) != NVRTC_SUCCESS || !lowered) {
        st = mj_fail(MJ_ERR_COMPILE, "NVRTC gave no lowered name for %s", in->name_expression);
        goto done;
    }
    out->lowered_name = strdup(lowered);
    size_t n = 0;
    if (nv.nvrtcGetCUBINSize(prog, &n) != NVRTC_SUCCESS || n == 0 || !(out->cubin = malloc(n)) ||
        nv.nvrtcGetCUBIN(prog, out->cubin) != NVRTC_SUCCESS) {
        st = mj_fail(MJ_ERR_COMPILE,
                     "NVRTC produced no cubin for %s (is the arch real, e.g. "
                     "sm_90a, not compute_90a?)",
                     in->name_expression);
        goto done;
    }
    out->cubin_size = n;
done:
    out->milliseconds = mj_monotonic_ms() - t0;
    nv.nvrtcDestroyProgram(&prog);
    pthread_mutex_unlock(&compile_lock);
    if (!out->log) out->log = calloc(1, 1);
    if (st != MJ_OK) {
        free(out->cubin);
        free(out->lowered_name);
        out->cubin = NULL;
        out->lowered_name = NULL;
    }
    return st;
}

mj_status mj_nvrtc_ptx(const mj_compile_input *in, const char *virtual_arch, char **ptx) {
    *ptx = NULL;
    if (!mj_nvrtc_version()) return MJ_ERR_UNSUPPORTED;
    const char *opts[64];
    char arch_opt[64];
    int n = 0;
    snprintf(arch_opt, sizeof arch_opt, "--gpu-architecture=%s", virtual_arch);
    for (int i = 0; i < in->num_options && n < 63; i++) {
        if (strncmp(in->options[i], "--gpu-architecture=", 19) == 0)
            opts[n++] = arch_opt;
        else if (strncmp(in->options[i], "--pch", 5) != 0)
            opts[n++] = in->options[i];
    }
    pthread_mutex_lock(&compile_lock);
    nvrtcProgram prog;
    mj_status st = MJ_ERR_COMPILE;
    if (create_program(in, &prog) == NVRTC_SUCCESS) {
        size_t size = 0;
        if (nv.nvrtcAddNameExpression(prog, in->name_expression) == NVRTC_SUCCESS &&
            nv.nvrtcCompileProgram(prog, n, opts) == NVRTC_SUCCESS &&
            nv.nvrtcGetPTXSize(prog, &size) == NVRTC_SUCCESS && (*ptx = malloc(size + 1)) &&
            nv.nvrtcGetPTX(prog, *ptx) == NVRTC_SUCCESS) {
            (*ptx)[size] = '\0';
            st = MJ_OK;
        }
        nv.nvrtcDestroyProgram(&prog);
    }
    pthread_mutex_unlock(&compile_lock);
    if (st != MJ_OK) {
        free(*ptx);
        *ptx = NULL;
        return mj_fail(st, "PTX dump of %s failed", in->name_expression);
    }
    return MJ_OK;
}

void mj_compile_output_free(mj_compile_output *out) {
    free(out->cubin);
    free(out->lowered_name);
    free(out->log);
    memset(out, 0, sizeof *out);
}
