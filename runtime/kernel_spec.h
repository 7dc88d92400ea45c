/*
 * A kernel spec: the POD that names one specialization of a kernel of a
 * family (runtime/families/). Its bytes are the in-memory cache key, so unused
 * fields must be zero (build specs with mj_kernel_spec_init).
 */
#ifndef MJ_KERNEL_SPEC_H
#define MJ_KERNEL_SPEC_H

#include <stdint.h>
#include <string.h>

#include "include/megajit.h"

#define MJ_SPEC_MAX_PARAMS 28

typedef enum mj_arch {
    MJ_ARCH_SM90A = 90,
    MJ_ARCH_SM100A = 100,
} mj_arch;

typedef struct mj_kernel_spec {
    int32_t family; /* mj_family */
    int32_t kernel; /* index into the family's kernels */
    int32_t arch;   /* mj_arch */
    int32_t num_params;
    int32_t params[MJ_SPEC_MAX_PARAMS]; /* in the order of the kernel's parameter list */
} mj_kernel_spec;

static inline void mj_kernel_spec_init(mj_kernel_spec *s, mj_family family, int kernel,
                                       mj_arch arch) {
    memset(s, 0, sizeof *s);
    s->family = (int32_t)family;
    s->kernel = kernel;
    s->arch = (int32_t)arch;
}

/* "sm_90a" <-> MJ_ARCH_SM90A; 0 / NULL for unknown. */
mj_arch mj_arch_parse(const char *name);
const char *mj_arch_name(mj_arch arch);

#endif
