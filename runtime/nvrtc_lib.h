/*
 * NVRTC, loaded at run time (libnvrtc.so.13), and one compile with the
 * project's conventions: in-memory headers, name expression -> lowered name,
 * automatic PCH whose heap grows when NVRTC reports it too small.
 */
#ifndef MJ_NVRTC_LIB_H
#define MJ_NVRTC_LIB_H

#include <stddef.h>

#include "include/megajit.h"

/* "13.0.88": major.minor from nvrtcVersion and the build number from
 * __CUDACC_VER_BUILD__, so two builds of one minor version key apart.
 * NULL (error set) when NVRTC cannot be loaded. */
const char *mj_nvrtc_version(void);

typedef struct mj_compile_input {
    const char *program_name; /* names NVRTC's automatic PCH file */
    const char *source;
    const char *name_expression;
    const char *const *header_names; /* root-relative, as written in #include "..." */
    const char *const *header_sources;
    int num_headers;
    const char *const *options;
    int num_options;
} mj_compile_input;

typedef struct mj_compile_output {
    void *cubin;
    size_t cubin_size;
    char *lowered_name;
    char *log; /* always set (may be ""); the NVRTC log on failure */
    double milliseconds;
} mj_compile_output;

/* MJ_ERR_COMPILE with the log in the error sentence when NVRTC rejects the source. */
mj_status mj_nvrtc_compile(const mj_compile_input *in, mj_compile_output *out);
/* PTX of the same input with the arch option replaced by compute_XX (for dumps). */
mj_status mj_nvrtc_ptx(const mj_compile_input *in, const char *virtual_arch, char **ptx);
void mj_compile_output_free(mj_compile_output *out);

#endif
