#include "tools/bench/moe_weights.h"

#include <stdlib.h>
#include <string.h>

#include "templates/layout/symm_layout.h"
#include "tools/bench/bench.h"

/* The values do not change the time; they only have to stay finite through
 * both GEMMs and inside the loader's ranges. */
static void fill_projection(int fmt, uint64_t *rng, uint8_t *data, size_t n, uint8_t *sf,
                            size_t nsf) {
    if (fmt == MJ_FMT_BF16) {
        for (size_t i = 0; i + 1 < n; i += 2) {
            uint64_t v = mj_bench_rng(rng);
            uint16_t b = (uint16_t)((v & 0x807Fu) | ((118u + (unsigned)((v >> 16) % 6)) << 7));
            memcpy(data + i, &b, 2);
        }
    } else {
        for (size_t i = 0; i < n; i++) {
            uint8_t v = (uint8_t)(mj_bench_rng(rng) >> 24);
            data[i] = fmt == MJ_FMT_MXFP8 ? (uint8_t)(v & 0xBFu) : v; /* E4M3 exponent <= 7 */
        }
        for (size_t i = 0; i < nsf; i++) {
            unsigned v = (unsigned)(mj_bench_rng(rng) >> 33);
            sf[i] = (uint8_t)(fmt == MJ_FMT_NVFP4 ? 0x30u + v % 17u : 120u + v % 11u);
        }
    }
}

mj_bench_weights *mj_bench_weights_new(int fmt, int hidden, int intermediate, int classes,
                                       int biases, uint64_t seed) {
    mj_bench_weights *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    const size_t elems = (size_t)hidden * (size_t)intermediate;
    const size_t per_class = 2 * (size_t)intermediate + (size_t)hidden;
    const int group = mj_format_group(fmt);
    w->refs = 1;
    w->fmt = fmt;
    w->classes = classes;
    w->hidden = hidden;
    w->intermediate = intermediate;
    w->data_bytes = elems * (size_t)mj_format_bits(fmt) / 8;
    w->sf_bytes = group ? elems / (size_t)group : 0;
    w->data = malloc((size_t)(classes + 1) * w->data_bytes);
    w->sf = group ? malloc((size_t)(classes + 1) * w->sf_bytes) : NULL;
    w->bias = biases ? malloc((size_t)classes * per_class * sizeof(float)) : NULL;
    if (!w->data || (group && !w->sf) || (biases && !w->bias)) {
        mj_bench_weights_release(w);
        return NULL;
    }
    uint64_t rng = mj_bench_seed(seed, (uint64_t)fmt);
    for (int c = 0; c < classes; c++)
        fill_projection(fmt, &rng, w->data + (size_t)c * w->data_bytes, w->data_bytes,
                        w->sf ? w->sf + (size_t)c * w->sf_bytes : NULL, w->sf_bytes);
    memcpy(w->data + (size_t)classes * w->data_bytes, w->data, w->data_bytes);
    if (w->sf) memcpy(w->sf + (size_t)classes * w->sf_bytes, w->sf, w->sf_bytes);
    for (size_t i = 0; w->bias && i < (size_t)classes * per_class; i++)
        w->bias[i] = (float)((int)(mj_bench_rng(&rng) >> 40) - (1 << 23)) * 0x1p-27f;
    return w;
}

int mj_bench_weights_add_shared(mj_bench_weights *w, int shared_fmt, int shared_intermediate,
                                uint64_t seed) {
    if (shared_fmt < 0 || shared_fmt >= MJ_FMT_COUNT) return -1;
    const int group = mj_format_group(shared_fmt);
    if (w->shared_intermediate || shared_intermediate < 1 || (group && shared_intermediate % group))
        return -1;
    const size_t elems = (size_t)w->hidden * (size_t)shared_intermediate;
    const size_t data = elems * (size_t)mj_format_bits(shared_fmt) / 8,
                 sf = group ? elems / (size_t)group : 0;
    uint8_t *w1 = malloc(2 * data), *w2 = malloc(data);
    uint8_t *w1_sf = group ? malloc(2 * sf) : NULL, *w2_sf = group ? malloc(sf) : NULL;
    if (!w1 || !w2 || (group && (!w1_sf || !w2_sf))) {
        free(w1);
        free(w2);
        free(w1_sf);
        free(w2_sf);
        return -1;
    }
    uint64_t rng = mj_bench_seed(seed, (uint64_t)shared_fmt);
    fill_projection(shared_fmt, &rng, w1, 2 * data, w1_sf, 2 * sf);
    fill_projection(shared_fmt, &rng, w2, data, w2_sf, sf);
    w->shared_fmt = shared_fmt;
    w->shared_intermediate = shared_intermediate;
    w->shared_w1 = w1;
    w->shared_w1_sf = w1_sf;
    w->shared_w2 = w2;
    w->shared_w2_sf = w2_sf;
    w->shared_w1_bytes = 2 * data;
    w->shared_w1_sf_bytes = 2 * sf;
    w->shared_w2_bytes = data;
    w->shared_w2_sf_bytes = sf;
    return 0;
}

mj_bench_weights *mj_bench_weights_retain(mj_bench_weights *w) {
    __atomic_add_fetch(&w->refs, 1, __ATOMIC_RELAXED);
    return w;
}

void mj_bench_weights_release(mj_bench_weights *w) {
    if (!w || __atomic_sub_fetch(&w->refs, 1, __ATOMIC_ACQ_REL) > 0) return;
    free(w->data);
    free(w->sf);
    free(w->bias);
    free(w->shared_w1);
    free(w->shared_w1_sf);
    free(w->shared_w2);
    free(w->shared_w2_sf);
    free(w);
}

mj_bench_expert_sources mj_bench_weights_sources(const mj_bench_weights *w, int expert) {
    const int c = expert % w->classes;
    return (mj_bench_expert_sources){c, c + 1, (c + 2) % w->classes};
}

mjr_expert_weights mj_bench_weights_class(const mj_bench_weights *w, int c) {
    const mj_bench_expert_sources s = mj_bench_weights_sources(w, c);
    return (mjr_expert_weights){
        .w1 = w->data + (size_t)s.gate * w->data_bytes,
        .w1_sf = w->sf ? w->sf + (size_t)s.gate * w->sf_bytes : NULL,
        .w2 = w->data + (size_t)s.down * w->data_bytes,
        .w2_sf = w->sf ? w->sf + (size_t)s.down * w->sf_bytes : NULL,
        .l1_alpha_gate = 1.0f,
        .l1_alpha_up = 1.0f,
        .l2_alpha = 1.0f,
        .l2_act_scale = 1.0f,
        .b1 = mj_bench_weights_bias(w, c, 0),
        .b2 = mj_bench_weights_bias(w, c, 2),
    };
}

mjr_expert_weights mj_bench_weights_shared(const mj_bench_weights *w) {
    return (mjr_expert_weights){.w1 = w->shared_w1,
                                .w1_sf = w->shared_w1_sf,
                                .w2 = w->shared_w2,
                                .w2_sf = w->shared_w2_sf,
                                .l1_alpha_gate = 1.0f,
                                .l1_alpha_up = 1.0f,
                                .l2_alpha = 1.0f,
                                .l2_act_scale = 1.0f};
}

const float *mj_bench_weights_bias(const mj_bench_weights *w, int expert, int proj) {
    if (!w->bias) return NULL;
    const size_t inter = (size_t)w->intermediate;
    return w->bias + (size_t)(expert % w->classes) * (2 * inter + (size_t)w->hidden) +
           (size_t)proj * inter;
}
