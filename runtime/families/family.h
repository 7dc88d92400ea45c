/*
 * Kernel families. Each family is one file in runtime/families/ exporting one
 * descriptor: its name, its root template, its kernels with their template
 * parameter lists (the name expression NVRTC instantiates is generated from
 * the list, so the order is written once), and what turns a launch into a
 * spec, a spec into a launch shape and a manifest layer into every spec it can
 * request. table.c lists the descriptors; adding a family is adding a file,
 * a row there and an mj_family value.
 *
 * tests/test_families.c checks every list against the template's own
 * parameter list and compiles every kernel with NVRTC.
 */
#ifndef MJ_FAMILY_H
#define MJ_FAMILY_H

#include <stddef.h>

#include "include/megajit.h"
#include "runtime/jit.h"
#include "runtime/kernel_spec.h"

/* How a parameter is written: as a template argument in the name expression,
 * and in the human description of a spec. */
typedef enum mj_param_kind {
    MJ_PARAM_INT,        /* `int` argument: decimal */
    MJ_PARAM_FORMAT,     /* `int` argument, an mj_format code: described by name */
    MJ_PARAM_ACTIVATION, /* `int` argument, an mj_activation code: described by name */
    MJ_PARAM_FLOAT_BITS, /* `unsigned` argument holding a float's bits (template arguments
                          * must be integral; the bits round-trip exactly): 0x..u, described
                          * as the float */
} mj_param_kind;

typedef struct mj_kernel_param {
    const char *template_name; /* the template parameter it binds ("kHidden") */
    const char *label;         /* its short name in descriptions ("H") */
    mj_param_kind kind;
} mj_kernel_param;

typedef struct mj_family_kernel {
    const char *role;   /* "main", "check": in descriptions of multi-kernel families */
    const char *symbol; /* the __global__ template ("mj::pre_dispatch_kernel") */
    const mj_kernel_param *params;
    int num_params;
} mj_family_kernel;

/* What a launch asks of a family; a manifest layer asks the same, for every
 * token count at once. Configs are validated before they get here. */
typedef struct mj_family_request {
    const mj_symm_config *buffer; /* the symmetric buffer's shape: every family */
    const mj_moe_config *layer;   /* the MoE layer; NULL for a pre-dispatch-only buffer */
    int num_tokens;               /* tokens per rank of this launch */
    int num_sms;                  /* the family's SM count */
    int pdl;                      /* the family's PDL setting */
    int sys_scope;                /* the ranks are processes on other GPUs (not emulated) */
    int shares_device;            /* other ranks' grids run on this GPU at once */
    int projection;               /* MegaMoE's weight-image kernel: the mj_projection it writes */
    int shared_expert;            /* ... of the layer's shared expert (1) or a routed one (0) */
} mj_family_request;

/* Receives one spec of an enumeration; a non-OK status stops it. */
typedef mj_status (*mj_spec_fn)(const mj_kernel_spec *spec, void *ctx);

typedef struct mj_family_desc {
    const char *name;          /* "mega_moe": mj_family_name, the cache's family column */
    const char *template_path; /* root template, relative to templates/ */
    const mj_family_kernel *kernels;
    int num_kernels;
    /* The spec of kernels[kernel] for req on arch. */
    mj_status (*build_spec)(const mj_family_request *req, int kernel, mj_arch arch,
                            mj_kernel_spec *out);
    /* Grid, block, shared memory and PDL of a spec this family built for req. */
    void (*launch_shape)(const mj_kernel_spec *spec, const mj_family_request *req,
                         mj_launch_config *out);
    /* Every spec launches of req->layer (any token count up to its maximum) can
     * request on arch; validates the layer first. No spec for an arch or a
     * layer the family has no kernel for. */
    mj_status (*enumerate)(const mj_family_request *layer, mj_arch arch, mj_spec_fn add, void *ctx);
} mj_family_desc;

/* table.c: the descriptor of a family; NULL for an unknown one. */
const mj_family_desc *mj_family_get(mj_family family);
/* The family kernel a spec names; NULL when it names none. */
const mj_family_kernel *mj_family_kernel_of(const mj_kernel_spec *spec);

/* render.c: the name expression of a spec ("mj::k<7168, 3, 0x40e00000u>"),
 * generated from its kernel's parameter list. Returns the length, or -1 when
 * the spec names no kernel or out is too small. */
int mj_family_name_expression(const mj_kernel_spec *spec, char *out, size_t cap);
/* A short description of a spec ("pre_dispatch.main<H=7168,fmt=mxfp8,K=8> sm_90a"),
 * the same way; -1 as above. */
int mj_family_describe(const mj_kernel_spec *spec, char *out, size_t cap);

/* launch.c: MJ_OK when arch is sm_90a, for a family whose kernels are built
 * on what built_on names and exist for sm_90a only; a clear status else. */
mj_status mj_family_require_sm90a(const char *family, mj_arch arch, const char *built_on);

/* launch.c: builds the spec of kernels[kernel] for req, gets it (from memory,
 * the cache or a compile) and fills its launch shape. */
mj_status mj_family_prepare(mj_runtime *rt, const mj_family_desc *family, int kernel,
                            const mj_family_request *req, mj_stream stream, mj_kernel **k,
                            mj_launch_config *lc);

#endif
