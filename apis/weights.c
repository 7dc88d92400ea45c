/* MegaMoE expert weights of one rank, in the kernel's device layout: each
 * expert's image (templates/layout/moe_layout.h), written from the checkpoint
 * layout by the weight-image kernel (templates/mega_moe/weight_image.cuh). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "apis/mega_moe_impl.h"
#include "heuristics/mega_moe_config.h"
#include "runtime/device.h"
#include "runtime/error.h"
#include "runtime/families/mega_moe.h"
#include "runtime/runtime.h"

const char *const mj_moe_projection_names[MJ_MOE_NUM_PROJECTIONS] = {"gate", "up", "down"};

/* A UE8M0 byte e scales by 2^(e - 127). Below 3, the smallest E4M3 subnormal
 * times the scale falls under BF16's smallest subnormal (2^-133); above 246,
 * E4M3's 448 times the scale overflows BF16. Inside, every decoded weight of
 * both MX formats is a BF16 value, which the BF16 tensor-core path relies on. */
#define MX_SCALE_MIN 3
#define MX_SCALE_MAX 246
/* UE4M3 scales are E4M3 bytes >= 0: no sign bit, and 0x7f is NaN. */
#define UE4M3_NAN 0x7f

static void free_device(mj_weights *w) {
    mj_device_free(w->rt, w->image);
    mj_device_free(w->rt, w->shared_image);
    mj_device_free(w->rt, w->alphas);
    mj_device_free(w->rt, w->biases);
    mj_stream_destroy(w->rt, w->stream);
}

/* Argument checks the loaders share; fn names the call in the message. */
static mj_status check_expert(const mj_weights *w, int e, const char *fn) {
    if (e < 0 || e >= w->local_experts)
        return mj_fail(MJ_ERR_INVALID_ARG, "%s: local expert %d outside 0..%d", fn, e,
                       w->local_experts - 1);
    return MJ_OK;
}
static mj_status check_projection(mj_projection proj, const char *fn) {
    if ((unsigned)proj >= MJ_MOE_NUM_PROJECTIONS)
        return mj_fail(MJ_ERR_INVALID_ARG, "%s: unknown projection %d", fn, (int)proj);
    return MJ_OK;
}

/* src's bytes readable on the host, for checks before anything is written:
 * src itself, or (from_device) a copy the caller frees. */
static mj_status host_view(mj_weights *w, const void *src, size_t bytes, int from_device,
                           const char *what, const void **out) {
    *out = src;
    if (!from_device) return MJ_OK;
    void *copy = malloc(bytes);
    if (!copy) return mj_fail(MJ_ERR_NOMEM, "out of memory");
    mj_status st =
        mj_device_download(w->rt, copy, (CUdeviceptr)(uintptr_t)src, bytes, w->stream, what);
    if (st != MJ_OK) {
        free(copy);
        return st;
    }
    *out = copy;
    return MJ_OK;
}

/* Where local expert e's bias of proj starts in the biases array (struct
 * mj_weights), in floats: [E][2I] gate and up rows, then [E][H] down rows.
 * e = E gives the array's length. */
static size_t bias_offset(const mj_weights *w, int e, mj_projection proj) {
    size_t local = (size_t)w->local_experts, inter = (size_t)w->cfg.intermediate;
    if (proj == MJ_PROJ_DOWN) return local * 2 * inter + (size_t)e * (size_t)w->cfg.hidden;
    return (size_t)e * 2 * inter + (proj == MJ_PROJ_UP ? inter : 0);
}

static mj_status alloc_all(mj_weights *w) {
    mj_runtime *rt = w->rt;
    mj_u64 e = (mj_u64)w->local_experts;
    const char *what = "allocating the MegaMoE weights";
    mj_status st = mj_stream_create(rt, what, &w->stream);
    if (st == MJ_OK) st = mj_device_alloc(rt, e * w->layout.expert_bytes, what, &w->image);
    if (st == MJ_OK && w->cfg.shared_intermediate)
        st = mj_device_alloc(rt, w->shared_layout.expert_bytes, what, &w->shared_image);
    size_t alpha_bytes = 4 * (size_t)e * sizeof(float);
    if (st == MJ_OK) st = mj_device_alloc(rt, alpha_bytes, what, &w->alphas);
    if (st == MJ_OK) {
        float *ones = malloc(alpha_bytes);
        if (!ones) return mj_fail(MJ_ERR_NOMEM, "out of memory");
        for (size_t i = 0; i < 4 * (size_t)e; i++)
            ones[i] = 1.0f;
        st = mj_device_upload(rt, w->alphas, ones, alpha_bytes, w->stream, what);
        free(ones);
    }
    if (st == MJ_OK && w->cfg.expert_biases) {
        size_t bias_bytes = bias_offset(w, w->local_experts, MJ_PROJ_DOWN) * sizeof(float);
        st = mj_device_alloc(rt, bias_bytes, what, &w->biases);
        if (st == MJ_OK) st = mj_device_zero_private(rt, w->biases, bias_bytes, what);
    }
    return st;
}

mj_status mj_weights_create(mj_runtime *rt, const mj_moe_config *config, mj_weights **out) {
    mj_clear_error();
    if (!rt || !out) return mj_fail(MJ_ERR_INVALID_ARG, "mj_weights_create: NULL argument");
    *out = NULL;
    mj_moe_config accepted;
    const mj_moe_config *cfg = &accepted;
    const mj_moe_format_row *row;
    mj_status st = mj_moe_config_accept(config, &accepted, &row);
    if (st != MJ_OK || (st = mj_runtime_bind(rt)) != MJ_OK) return st;
    mj_weights *w = calloc(1, sizeof *w);
    int local = cfg->num_experts / cfg->num_ranks;
    /* The local experts' projections, then the shared expert's. */
    const int entries = local + (cfg->shared_intermediate ? 1 : 0);
    unsigned char *loaded = calloc((size_t)entries * MJ_MOE_NUM_PROJECTIONS, 1);
    if (!w || !loaded) {
        free(w);
        free(loaded);
        return mj_fail(MJ_ERR_NOMEM, "out of memory");
    }
    w->rt = rt;
    w->cfg = *cfg;
    w->format = row;
    w->local_experts = local;
    const int stage_k = mj_moe_config_stage_k(cfg, row);
    w->layout = mj_layout_moe_weights(cfg->hidden, cfg->intermediate, stage_k,
                                      (int)cfg->weight_format, MJ_MOE_TASK_BLOCKS);
    if (cfg->shared_intermediate) {
        const mj_moe_shared_geometry g = mj_moe_shared_geometry_for(cfg);
        w->shared_layout = mj_layout_moe_weights(cfg->hidden, cfg->shared_intermediate, g.stage_k,
                                                 (int)cfg->shared_format, g.task_blocks);
    }
    w->loaded = loaded;
    w->projections_missing = entries * MJ_MOE_NUM_PROJECTIONS;
    st = alloc_all(w);
    if (st != MJ_OK) {
        free_device(w);
        free(loaded);
        free(w);
        return st;
    }
    *out = w;
    return MJ_OK;
}

void mj_weights_destroy(mj_weights *w) {
    if (!w) return;
    mj_error_snapshot caller_error;
    mj_error_save(&caller_error);
    if (mj_runtime_bind(w->rt) == MJ_OK) free_device(w);
    mj_error_restore(&caller_error);
    free(w->loaded);
    free(w);
}

/* The kernels divide each MX row's scales by a power of two near their
 * largest (templates/mega_moe/weight_image.cuh): a row whose scale exponents
 * spread by more than this would decode its smallest weights to BF16
 * subnormals. E2M1's smallest nonzero magnitude is 2^-1, E4M3's 2^-9 (the
 * mxfp8 row's weights, and a shared expert's MXFP8 ones). */
#define MX_ROW_SPAN_MAX 126
#define MX_ROW_SPAN_MAX_E4M3 118

/* e: the local expert, or -1 for the shared expert (fn: the loader). */
static mj_status check_scales(const mj_weights *w, int e, mj_projection proj,
                              const unsigned char *sf, int rows, int groups) {
    const int shared = e < 0;
    int fmt = (int)(shared ? w->cfg.shared_format : w->cfg.weight_format);
    int rebased = fmt == MJ_FORMAT_MXFP4 || fmt == MJ_FORMAT_MXFP8;
    unsigned span_max = fmt == MJ_FORMAT_MXFP8 ? MX_ROW_SPAN_MAX_E4M3 : MX_ROW_SPAN_MAX;
    char who[64];
    if (shared)
        snprintf(who, sizeof who, "mj_weights_load_shared: the shared expert's");
    else
        snprintf(who, sizeof who, "mj_weights_load: local expert %d", e);
    for (int r = 0; r < rows; r++) {
        unsigned lo = 255, hi = 0;
        for (int g = 0; g < groups; g++) {
            unsigned b = sf[(size_t)r * (size_t)groups + (size_t)g];
            lo = b < lo ? b : lo;
            hi = b > hi ? b : hi;
            if (fmt == MJ_FORMAT_NVFP4 && (b & 0x80u || b == UE4M3_NAN))
                return mj_fail(MJ_ERR_INVALID_ARG,
                               "%s %s: scale byte %u at row %d "
                               "group %d is not a UE4M3 scale (negative or NaN)",
                               who, mj_moe_projection_names[proj], b, r, g);
            if (fmt != MJ_FORMAT_NVFP4 && (b < MX_SCALE_MIN || b > MX_SCALE_MAX))
                return mj_fail(MJ_ERR_INVALID_ARG,
                               "%s %s: scale byte %u at row %d "
                               "group %d would make decoded weights inexact in BF16 (MX weight "
                               "scale bytes must be %d..%d)",
                               who, mj_moe_projection_names[proj], b, r, g, MX_SCALE_MIN,
                               MX_SCALE_MAX);
        }
        if (rebased && hi - lo > span_max)
            return mj_fail(MJ_ERR_INVALID_ARG,
                           "%s %s: row %d's scale bytes span %u..%u; %s weights decode "
                           "into BF16 here, where a row's MX scales must lie within %u of each "
                           "other (its smallest weights would leave BF16's normal range)",
                           who, mj_moe_projection_names[proj], r, lo, hi,
                           mj_format_name((mj_format)fmt), span_max);
    }
    return MJ_OK;
}

/* Runs the weight-image kernel over one projection of local expert e (-1:
 * the shared expert); host sources go through a device staging copy first.
 * Returns when the image is written. */
static mj_status write_image(mj_weights *w, int e, mj_projection proj, const void *data,
                             const void *scales, size_t data_bytes, size_t sf_bytes,
                             int from_device) {
    mj_runtime *rt = w->rt;
    const mj_symm_config buffer = mj_symm_config_of_moe(&w->cfg);
    const mj_family_request req = {
        .buffer = &buffer, .layer = &w->cfg, .projection = (int)proj, .shared_expert = e < 0};
    mj_kernel *k;
    mj_launch_config lc;
    mj_status st =
        mj_family_prepare(rt, &mj_mega_moe_family, MJ_MOE_KERNEL_IMAGE, &req, NULL, &k, &lc);
    if (st != MJ_OK) return st;
    CUdeviceptr staging = 0, src = (CUdeviceptr)(uintptr_t)data,
                src_sf = (CUdeviceptr)(uintptr_t)scales;
    if (!from_device) {
        const char *what = "mj_weights_load: staging the projection";
        st = mj_device_alloc(rt, data_bytes + sf_bytes, what, &staging);
        if (st == MJ_OK) st = mj_device_upload(rt, staging, data, data_bytes, w->stream, what);
        if (st == MJ_OK && sf_bytes)
            st = mj_device_upload(rt, staging + data_bytes, scales, sf_bytes, w->stream, what);
        src = staging;
        src_sf = sf_bytes ? staging + data_bytes : 0;
    }
    if (st == MJ_OK) {
        const CUdeviceptr image =
            e < 0 ? w->shared_image : w->image + (CUdeviceptr)e * w->layout.expert_bytes;
        mj_moe_image_args args = {(const unsigned char *)(uintptr_t)src,
                                  (const unsigned char *)(uintptr_t)src_sf,
                                  (unsigned char *)(uintptr_t)image, (int)proj};
        void *params[] = {&args};
        st = mj_jit_launch(rt, k, &lc, w->stream, params);
        if (st == MJ_OK)
            st = mj_stream_synchronize(rt, w->stream, "mj_weights_load: writing the image");
    }
    mj_device_free(rt, staging);
    return st;
}

/* mj_weights_load of local expert e, or (e = -1) mj_weights_load_shared; fn
 * names the call in messages. The projection is checked already. */
static mj_status load_projection(mj_weights *w, int e, mj_projection proj, const void *data,
                                 const void *scales, int from_device, const char *fn) {
    char who[64];
    if (e < 0)
        snprintf(who, sizeof who, "%s: the shared expert's", fn);
    else
        snprintf(who, sizeof who, "%s: local expert %d", fn, e);
    if (!data) return mj_fail(MJ_ERR_INVALID_ARG, "%s: data is NULL", fn);
    const mj_format format = e < 0 ? w->cfg.shared_format : w->cfg.weight_format;
    int fmt = (int)format, group = mj_format_group(fmt);
    if (group && !scales)
        return mj_fail(MJ_ERR_INVALID_ARG, "%s %s: missing scales (%s weights are block-scaled)",
                       who, mj_moe_projection_names[proj], mj_format_name(format));
    if (!group && scales)
        return mj_fail(MJ_ERR_INVALID_ARG, "%s %s: bf16 weights take no scales", who,
                       mj_moe_projection_names[proj]);
    mj_status st = mj_runtime_bind(w->rt);
    /* The caller's writes into device sources come first, on whatever stream:
     * the scale check below reads them too. */
    char what[64];
    snprintf(what, sizeof what, "%s: waiting for the sources", fn);
    if (st == MJ_OK && from_device) st = mj_device_synchronize(w->rt, what);
    if (st != MJ_OK) return st;
    int hidden = w->cfg.hidden, inter = e < 0 ? w->cfg.shared_intermediate : w->cfg.intermediate;
    int rows = proj == MJ_PROJ_DOWN ? hidden : inter;
    int cols = proj == MJ_PROJ_DOWN ? inter : hidden;
    size_t data_bytes = (size_t)rows * (size_t)cols * (size_t)mj_format_bits(fmt) / 8;
    int groups = group ? cols / group : 0;
    size_t sf_bytes = (size_t)rows * (size_t)groups;
    if (group) {
        /* Checked on the host before anything is written: a rejected load
         * leaves the previous contents intact. */
        const void *host_sf;
        snprintf(what, sizeof what, "%s: reading the scales", fn);
        st = host_view(w, scales, sf_bytes, from_device, what, &host_sf);
        if (st != MJ_OK) return st;
        st = check_scales(w, e, proj, host_sf, rows, groups);
        if (from_device) free((void *)host_sf);
        if (st != MJ_OK) return st;
    }
    /* Returns when the image is written: the caller may free its source. */
    if ((st = write_image(w, e, proj, data, scales, data_bytes, sf_bytes, from_device)) != MJ_OK)
        return st;
    const int entry = e < 0 ? w->local_experts : e;
    unsigned char *loaded = &w->loaded[entry * MJ_MOE_NUM_PROJECTIONS + (int)proj];
    w->projections_missing -= !*loaded;
    *loaded = 1;
    return MJ_OK;
}

mj_status mj_weights_load(mj_weights *w, int local_expert, mj_projection proj, const void *data,
                          const void *scales, int from_device) {
    mj_clear_error();
    if (!w) return mj_fail(MJ_ERR_INVALID_ARG, "mj_weights_load: weights are NULL");
    mj_status st = check_expert(w, local_expert, "mj_weights_load");
    if (st == MJ_OK) st = check_projection(proj, "mj_weights_load");
    return st != MJ_OK ? st
                       : load_projection(w, local_expert, proj, data, scales, from_device,
                                         "mj_weights_load");
}

mj_status mj_weights_load_shared(mj_weights *w, mj_projection proj, const void *data,
                                 const void *scales, int from_device) {
    mj_clear_error();
    if (!w) return mj_fail(MJ_ERR_INVALID_ARG, "mj_weights_load_shared: weights are NULL");
    if (!w->cfg.shared_intermediate)
        return mj_fail(MJ_ERR_INVALID_ARG,
                       "mj_weights_load_shared: these weights have no shared expert (create them "
                       "with mj_moe_config.shared_intermediate > 0)");
    mj_status st = check_projection(proj, "mj_weights_load_shared");
    return st != MJ_OK
               ? st
               : load_projection(w, -1, proj, data, scales, from_device, "mj_weights_load_shared");
}

mj_status mj_weights_load_bias(mj_weights *w, int local_expert, mj_projection proj,
                               const float *bias, int from_device) {
    mj_clear_error();
    if (!w) return mj_fail(MJ_ERR_INVALID_ARG, "mj_weights_load_bias: weights are NULL");
    if (!w->cfg.expert_biases)
        return mj_fail(MJ_ERR_INVALID_ARG,
                       "mj_weights_load_bias: these weights have no biases (create them with "
                       "mj_moe_config.expert_biases = 1)");
    int e = local_expert;
    mj_status st = check_expert(w, e, "mj_weights_load_bias");
    if (st == MJ_OK) st = check_projection(proj, "mj_weights_load_bias");
    if (st != MJ_OK) return st;
    if (!bias) return mj_fail(MJ_ERR_INVALID_ARG, "mj_weights_load_bias: bias is NULL");
    size_t n = (size_t)(proj == MJ_PROJ_DOWN ? w->cfg.hidden : w->cfg.intermediate);
    st = mj_runtime_bind(w->rt);
    if (st == MJ_OK && from_device)
        st = mj_device_synchronize(w->rt, "mj_weights_load_bias: waiting for the source");
    /* Checked on the host before anything is written: a rejected load leaves
     * the previous values. */
    const void *view = NULL;
    if (st == MJ_OK)
        st = host_view(w, bias, n * sizeof(float), from_device,
                       "mj_weights_load_bias: reading the bias", &view);
    if (st != MJ_OK) return st;
    const float *host = view;
    for (size_t i = 0; st == MJ_OK && i < n; i++)
        if (!isfinite(host[i]))
            st = mj_fail(MJ_ERR_INVALID_ARG,
                         "mj_weights_load_bias: local expert %d %s: element %zu is %g (biases "
                         "must be finite)",
                         e, mj_moe_projection_names[proj], i, (double)host[i]);
    if (st == MJ_OK)
        st = mj_device_upload(w->rt,
                              w->biases + (CUdeviceptr)(bias_offset(w, e, proj) * sizeof(float)),
                              host, n * sizeof *host, w->stream, "mj_weights_load_bias: copying");
    if (from_device) free((void *)host);
    return st;
}

mj_status mj_weights_set_alphas(mj_weights *w, int local_expert, float l1_alpha_gate,
                                float l1_alpha_up, float l2_alpha, float l2_act_scale) {
    mj_clear_error();
    if (!w) return mj_fail(MJ_ERR_INVALID_ARG, "mj_weights_set_alphas: weights are NULL");
    int e = local_expert;
    mj_status st = check_expert(w, e, "mj_weights_set_alphas");
    if (st != MJ_OK) return st;
    const float values[4] = {l1_alpha_gate, l1_alpha_up, l2_alpha, l2_act_scale};
    static const char *const names[4] = {"l1_alpha_gate", "l1_alpha_up", "l2_alpha",
                                         "l2_act_scale"};
    for (int i = 0; i < 4; i++)
        if (!isfinite(values[i]))
            return mj_fail(MJ_ERR_INVALID_ARG, "mj_weights_set_alphas: %s %g is not finite",
                           names[i], (double)values[i]);
    st = mj_runtime_bind(w->rt);
    if (st != MJ_OK) return st;
    for (int i = 0; i < 4 && st == MJ_OK; i++)
        st = mj_device_upload(
            w->rt,
            w->alphas + ((CUdeviceptr)i * (CUdeviceptr)w->local_experts + (CUdeviceptr)e) * 4,
            &values[i], sizeof(float), w->stream, "mj_weights_set_alphas: copying");
    return st;
}
