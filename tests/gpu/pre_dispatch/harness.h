/*
 * What the parts of test_pre_dispatch share: the shapes, the inputs, the test
 * context, a rank region, and the functions each part offers the others.
 */
#ifndef MJ_GPU_PRE_DISPATCH_HARNESS_H
#define MJ_GPU_PRE_DISPATCH_HARNESS_H

#include <cuda.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "include/megajit.h"
#include "templates/layout/pre_dispatch_launch.h"
#include "templates/layout/symm_layout.h"
#include "tests/gpu/check.h"
#include "tests/reference/quant.h"

#define POISON 0xA5
#define NUM_EXPERTS 256
#define TOPK 8
/* Largest shapes any test uses, for the shared staging buffers. */
#define MAX_HIDDEN 8192
#define MAX_ROWS 4100
enum row_kind {
    ROW_RANDOM,    /* one magnitude per row */
    ROW_WIDE,      /* magnitudes spread over 2^-40..2^40 inside each group */
    ROW_ZERO,      /* +0 and -0 only */
    ROW_HUGE,      /* one value at the bf16 maximum, the rest tiny */
    ROW_SUBNORMAL, /* bf16 subnormals and values near 1e-38 */
    ROW_NEGATIVE,
    ROW_TIE_E2M1, /* exact E2M1 rounding ties under a pinned block scale */
    ROW_TIE_E4M3, /* exact E4M3 rounding ties under a pinned block scale */
    ROW_RAWBITS,  /* any finite bf16 bit pattern */
    ROW_SPECIAL,  /* raw bits with Inf, quiet and signalling NaN of both signs */
    ROW_KINDS
};
typedef struct inputs {
    uint16_t *x;    /* [T, H] */
    int32_t *ids;   /* [T, K] */
    float *weights; /* [T, K] */
    float *scales;  /* [NUM_EXPERTS] */
} inputs;
/* ----------------------------------------------------------- test context */

typedef struct ctx {
    mj_runtime *rt;       /* check_device_inputs = 0, as in serving */
    mj_runtime *rt_check; /* check_device_inputs = 1 */
    CUstream stream;      /* blocking: orders after the synchronous copies */
    int device_sms;
    CUdeviceptr d_x, d_ids, d_weights, d_scales;
    inputs in;
    uint8_t *img, *got; /* host image of a region, and the device's copy */
    size_t img_cap;
    double ref_s, gpu_s;
} ctx;

typedef struct region {
    mj_symm_buffer *buf;
    int rank, fmt, hidden, max_tokens;
    mj_input_layout l;
    CUdeviceptr base; /* the rank's region: workspace first */
} region;

/* tests/gpu/test_pre_dispatch.c */
extern int g_quick;

/* tests/gpu/pre_dispatch/region.c */
int expect_status(mj_status st, mj_status want, const char *what);
int expect_int(long long got, long long want, const char *what);
/* Synchronous, so the next launch on any stream sees the data. */
void upload(ctx *c, const inputs *in, int hidden, int num_tokens);
void ensure_image(ctx *c, size_t bytes);
/* The rank base as the views report it (checked separately in check_views). */
int region_init(region *g, mj_symm_buffer *buf, int rank, int fmt, int hidden, int max_tokens);
void poison_device(const region *g);
void fetch(const region *g, uint8_t *got);
void reference(ctx *c, const region *g, const inputs *in, uint8_t *img, int num_tokens,
               int with_scales);
mj_status launch(ctx *c, mj_runtime *rt, const region *g, int num_tokens, int with_scales);
/* Compares the input region [x_offset, end) byte for byte. */
int compare(const region *g, const inputs *in, const uint8_t *img, const uint8_t *got,
            int num_tokens);
int all_poison(const region *g, const uint8_t *got);
/* The check slots a launch of num_tokens wrote: each holds its CTA's count of
 * invalid ids, so their sum must be exactly the planted count want_bad. */
int check_slots(const region *g, int num_tokens, uint64_t want_bad);
/* One full check: fresh inputs, poison, launch, compare with the reference. */
int run_case(ctx *c, mj_runtime *rt, const region *g, int num_tokens, int with_scales, int rotate);
/* Views of every rank: base + r * stride + layout offset, with the documented
 * dtypes and shapes; out-of-range ranks are refused. */
int check_views(const mj_symm_buffer *buf, const mj_symm_config *want);
mj_symm_config make_cfg(int fmt, int hidden, int max_tokens, int num_ranks);
mj_symm_buffer *create_buffer(mj_runtime *rt, const mj_symm_config *cfg);
/* A one-rank buffer and its region, with the host images sized for it; NULL
 * (the failure recorded) if either cannot be had. */
mj_symm_buffer *open_region(ctx *c, mj_runtime *rt, int fmt, int hidden, int max_tokens, region *g);

/* tests/gpu/pre_dispatch/inputs.c */
/* Fresh inputs for T rows; the first rows cycle through the edge kinds
 * starting at `rotate`, so even T = 1 cases see every kind over a run. */
void gen_inputs(inputs *in, int hidden, int num_tokens, int rotate);
void inputs_alloc(inputs *in, int hidden, int num_tokens);
void inputs_free(inputs *in);

/* tests/gpu/pre_dispatch/cases.c */
void test_create_errors(ctx *c);
void test_matrix(ctx *c);
/* Emulated ranks: each rank gets its own inputs and token count; all launches
 * happen before any check, so a launch that strays into a neighbour shows. */
void test_ranks(ctx *c);
int region_untouched(ctx *c, const region *g);
/* Refused launches write nothing; a bad device-side id is reported with
 * check_device_inputs and leaves the region untouched either way. */
void test_negative(ctx *c);
/* More top-k ids than the check grid has slots for, so check CTAs stride over
 * several id blocks: a valid launch is correct and a bad id in the last block
 * (a second pass of CTA 7) is still found. */
void test_check_striding(ctx *c);

/* tests/gpu/pre_dispatch/graphs.c */
/* The check runtime must ignore its synchronous check while capturing. */
void test_graphs(ctx *c);
/* A spec that was never compiled cannot be built inside a capture. A runtime
 * without the disk cache and a hidden size used nowhere else make sure of it. */
void test_capture_uncompiled(ctx *c);
/* Settings are per family; results do not depend on the SM count or PDL. */
void test_family(ctx *c);

#endif /* MJ_GPU_PRE_DISPATCH_HARNESS_H */
