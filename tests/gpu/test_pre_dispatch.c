/*
 * Pre-dispatch on a GPU against the bit-exact host reference (tests/reference):
 * every format and shape, emulated ranks, input validation, CUDA graphs and
 * per-family settings. Outputs are poisoned before each launch and the whole
 * input region is compared, so an unwritten or stray byte fails like a wrong one.
 *
 *   test_pre_dispatch [--quick] [--seed N]
 *
 * --quick runs a small subset (for compute-sanitizer). The last line is
 * "N passed, N failed"; the exit status is non-zero on any failure.
 */
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

static int g_quick;

static int expect_status(mj_status st, mj_status want, const char *what) {
    printf("  %s -> %s (want %s): %s\n", what, mj_status_name(st), mj_status_name(want),
           mj_last_error());
    return st == want;
}

static int expect_int(long long got, long long want, const char *what) {
    if (got == want) return 1;
    printf("  %s = %lld, want %lld\n", what, got, want);
    return 0;
}

/* ------------------------------------------------------------ random inputs */

static float rnd_sign(void) {
    return (rnd() >> 63) ? -1.0f : 1.0f;
}

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

/* Every 16th element carries qmax * 2^k with k fixed per 32 elements, which
 * pins each group's scale to 2^k (MX) so the other elements land exactly on
 * the quantizer's rounding ties. */
static void gen_tie_row(uint16_t *x, int hidden, int e4m3) {
    static const float e2m1_vals[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f,
                                      0.5f,  1.0f,  1.5f,  2.0f,  3.0f, 4.0f};
    float scale = 1.0f;
    for (int i = 0; i < hidden; i++) {
        if (i % 32 == 0) scale = ldexpf(1.0f, (int)rnd_below(41) - 20);
        float v;
        if (i % 16 == 0) {
            v = e4m3 ? 448.0f : 6.0f;
        } else if (!e4m3) {
            v = e2m1_vals[rnd_below(sizeof e2m1_vals / sizeof e2m1_vals[0])];
        } else if (rnd_below(4) == 0) {
            v = ((float)rnd_below(8) + 0.5f) * ldexpf(1.0f, -9); /* ties between E4M3 subnormals */
        } else {
            v = (1.0f + (float)rnd_below(8) / 8.0f + 1.0f / 16.0f) *
                ldexpf(1.0f, (int)rnd_below(14) - 6);
        }
        x[i] = mjr_bf16_from_f32(rnd_sign() * v * scale);
    }
}

static void gen_row(uint16_t *x, int hidden, int kind) {
    switch (kind) {
    case ROW_RANDOM: {
        float scale = ldexpf(1.0f, (int)rnd_below(33) - 16);
        for (int i = 0; i < hidden; i++)
            x[i] = mjr_bf16_from_f32((2.0f * rnd_unit() - 1.0f) * scale);
        break;
    }
    case ROW_WIDE:
        for (int i = 0; i < hidden; i++)
            x[i] = mjr_bf16_from_f32(rnd_sign() * (1.0f + rnd_unit()) *
                                     ldexpf(1.0f, (int)rnd_below(81) - 40));
        break;
    case ROW_ZERO:
        for (int i = 0; i < hidden; i++)
            x[i] = i % 7 == 3 ? 0x8000 : 0;
        break;
    case ROW_HUGE: {
        float tiny = ldexpf(1.0f, -20 - (int)rnd_below(60));
        for (int i = 0; i < hidden; i++)
            x[i] = mjr_bf16_from_f32((2.0f * rnd_unit() - 1.0f) * tiny);
        x[rnd_below((uint32_t)hidden)] = (rnd() >> 63) ? 0x7F7F : 0xFF7F;
        break;
    }
    case ROW_SUBNORMAL:
        for (int i = 0; i < hidden; i++)
            x[i] = i % 2 ? (uint16_t)((rnd() >> 63 ? 0x8000 : 0) | (1 + rnd_below(127)))
                         : mjr_bf16_from_f32(rnd_sign() * 1e-38f * (0.5f + rnd_unit()));
        break;
    case ROW_NEGATIVE: {
        float scale = ldexpf(1.0f, (int)rnd_below(17) - 8);
        for (int i = 0; i < hidden; i++)
            x[i] = mjr_bf16_from_f32(-(0.01f + rnd_unit()) * scale);
        break;
    }
    case ROW_TIE_E2M1:
    case ROW_TIE_E4M3:
        gen_tie_row(x, hidden, kind == ROW_TIE_E4M3);
        break;
    case ROW_SPECIAL: {
        static const uint16_t specials[] = {0x7F80, 0xFF80, 0x7FC0, 0xFFC0, 0x7F81, 0xFFFF};
        for (int i = 0; i < hidden; i++)
            x[i] = rnd_below(8) == 0 ? specials[rnd_below(6)]
                                     : (uint16_t)((rnd() >> 63 ? 0x8000u : 0u) |
                                                  (rnd_below(255) << 7) | (rnd() & 0x7F));
        break;
    }
    default:
        for (int i = 0; i < hidden; i++)
            x[i] =
                (uint16_t)((rnd() >> 63 ? 0x8000u : 0u) | (rnd_below(255) << 7) | (rnd() & 0x7F));
        break;
    }
}

typedef struct inputs {
    uint16_t *x;    /* [T, H] */
    int32_t *ids;   /* [T, K] */
    float *weights; /* [T, K] */
    float *scales;  /* [NUM_EXPERTS] */
} inputs;

static void gen_ids_row(int32_t *ids, float *w, int masked_row) {
    static const float edge_weights[] = {0.0f, 1.0f, 1e-30f, 1e30f, 0.5f};
    for (int k = 0; k < TOPK; k++) {
        if (masked_row || rnd_below(10) == 0) {
            ids[k] = -1;
            w[k] = 100.0f * (2.0f * rnd_unit() - 1.0f); /* whatever is there must not leak */
            continue;
        }
        int32_t id;
        int dup;
        do {
            id = (int32_t)rnd_below(NUM_EXPERTS);
            dup = 0;
            for (int j = 0; j < k; j++)
                dup |= ids[j] == id;
        } while (dup);
        ids[k] = id;
        w[k] = rnd_below(32) == 0 ? edge_weights[rnd_below(5)] : rnd_unit();
    }
}

/* Fresh inputs for T rows; the first rows cycle through the edge kinds
 * starting at `rotate`, so even T = 1 cases see every kind over a run. */
static void gen_inputs(inputs *in, int hidden, int num_tokens, int rotate) {
    for (int t = 0; t < num_tokens; t++) {
        int kind;
        if (t < ROW_KINDS)
            kind = (t + rotate) % ROW_KINDS;
        else if (rnd_below(16) == 0)
            kind = (int)rnd_below(ROW_KINDS);
        else
            kind = rnd_below(2) ? ROW_RANDOM : ROW_WIDE;
        gen_row(in->x + (size_t)t * (size_t)hidden, hidden, kind);
        gen_ids_row(in->ids + (size_t)t * TOPK, in->weights + (size_t)t * TOPK,
                    (t == 1 && num_tokens > 1) || rnd_below(64) == 0);
    }
    for (int e = 0; e < NUM_EXPERTS; e++)
        in->scales[e] = 0.25f + 3.75f * rnd_unit();
    in->scales[rnd_below(NUM_EXPERTS)] = 0.0f;
    in->scales[rnd_below(NUM_EXPERTS)] = 1.0f;
}

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

/* Synchronous, so the next launch on any stream sees the data. */
static void upload(ctx *c, const inputs *in, int hidden, int num_tokens) {
    size_t rows = (size_t)num_tokens;
    if (rows) {
        CU(cuMemcpyHtoD(c->d_x, in->x, rows * (size_t)hidden * 2));
        CU(cuMemcpyHtoD(c->d_ids, in->ids, rows * TOPK * 4));
        CU(cuMemcpyHtoD(c->d_weights, in->weights, rows * TOPK * 4));
    }
    CU(cuMemcpyHtoD(c->d_scales, in->scales, NUM_EXPERTS * 4));
    CU(cuCtxSynchronize());
}

static void ensure_image(ctx *c, size_t bytes) {
    if (bytes <= c->img_cap) return;
    free(c->img);
    free(c->got);
    c->img = xmalloc(bytes);
    c->got = xmalloc(bytes);
    c->img_cap = bytes;
}

typedef struct region {
    mj_symm_buffer *buf;
    int rank, fmt, hidden, max_tokens;
    mj_input_layout l;
    CUdeviceptr base; /* the rank's region: workspace first */
} region;

/* The rank base as the views report it (checked separately in check_views). */
static int region_init(region *g, mj_symm_buffer *buf, int rank, int fmt, int hidden,
                       int max_tokens) {
    mj_view v;
    g->buf = buf;
    g->rank = rank;
    g->fmt = fmt;
    g->hidden = hidden;
    g->max_tokens = max_tokens;
    g->l = mj_layout_input(hidden, TOPK, max_tokens, fmt);
    g->base = 0;
    if (!expect_ok(mj_symm_buffer_view(buf, rank, MJ_VIEW_X, &v), "mj_symm_buffer_view(X)"))
        return 0;
    g->base = (CUdeviceptr)(uintptr_t)v.ptr - g->l.x_offset;
    return 1;
}

static void poison_device(const region *g) {
    CU(cuMemsetD8(g->base + g->l.x_offset, POISON, g->l.end - g->l.x_offset));
    CU(cuCtxSynchronize());
}

static void fetch(const region *g, uint8_t *got) {
    CU(cuMemcpyDtoH(got + g->l.x_offset, g->base + g->l.x_offset, g->l.end - g->l.x_offset));
}

static void reference(ctx *c, const region *g, const inputs *in, uint8_t *img, int num_tokens,
                      int with_scales) {
    double t0 = now_s();
    memset(img + g->l.x_offset, POISON, g->l.end - g->l.x_offset);
    mjr_pre_dispatch(g->fmt, g->hidden, TOPK, g->max_tokens, in->x, in->ids, in->weights,
                     with_scales ? in->scales : NULL, num_tokens, img);
    c->ref_s += now_s() - t0;
}

static mj_status launch(ctx *c, mj_runtime *rt, const region *g, int num_tokens, int with_scales) {
    return mj_pre_dispatch(
        rt, g->buf, g->rank, (const void *)(uintptr_t)c->d_x, (const int32_t *)(uintptr_t)c->d_ids,
        (const float *)(uintptr_t)c->d_weights,
        with_scales ? (const float *)(uintptr_t)c->d_scales : NULL, num_tokens, c->stream);
}

/* ------------------------------------------------------------- comparison */

static uint32_t load_u32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static float load_f32(const uint8_t *p) {
    float v;
    memcpy(&v, p, 4);
    return v;
}

static float group_amax(const uint16_t *x, int from, int n) {
    float m = 0.0f;
    for (int i = from; i < from + n; i++) {
        float v = mjr_f32_from_bf16(x[i]);
        v = v < 0 ? -v : v;
        if (v > m) m = v;
    }
    return m;
}

static float decode_elem(int fmt, const uint8_t *row, int e) {
    if (fmt == MJ_FMT_BF16) return mjr_f32_from_bf16((uint16_t)(row[2 * e] | row[2 * e + 1] << 8));
    if (fmt == MJ_FMT_MXFP8) return mjr_f32_from_e4m3(row[e]);
    return mjr_f32_from_e2m1((uint8_t)(e % 2 ? row[e / 2] >> 4 : row[e / 2] & 15));
}

enum { F_X, F_SF, F_IDS, F_W, F_XS, F_GAP, F_COUNT };
static const char *const field_names[F_COUNT] = {"x",      "x_sf",     "topk_idx",
                                                 "topk_w", "x_scales", "alignment gap"};

typedef struct field {
    uint64_t off, row_bytes;
    int present;
} field;

/* Explains the first differing byte of one field in terms of the inputs. */
static void explain(const region *g, const inputs *in, const field *f, int id, uint64_t o,
                    const uint8_t *img, const uint8_t *got, int num_tokens) {
    if (id == F_GAP) {
        printf("    first at region offset %" PRIu64 ": expected 0x%02x got 0x%02x\n", o, img[o],
               got[o]);
        return;
    }
    uint64_t row = (o - f->off) / f->row_bytes, col = (o - f->off) % f->row_bytes;
    int real = (int)row < num_tokens;
    const char *pad = real ? "" : " (padding row)";
    const uint16_t *xrow = real ? in->x + row * (uint64_t)g->hidden : NULL;
    int group = mj_format_group(g->fmt);
    if (id == F_X) {
        int bits = mj_format_bits(g->fmt);
        /* An FP4 byte holds two elements: name the one whose nibble differs. */
        int e = bits == 4 ? (int)(2 * col) + !((img[o] ^ got[o]) & 15)
                          : (int)(col * 8 / (uint64_t)bits);
        uint64_t ro = f->off + row * f->row_bytes;
        printf("    first at row %" PRIu64 "%s, byte %" PRIu64 " (element %d): expected 0x%02x "
               "(%g) got 0x%02x (%g)",
               row, pad, col, e, img[o], decode_elem(g->fmt, img + ro, e), got[o],
               decode_elem(g->fmt, got + ro, e));
        if (real) {
            printf("; input 0x%04x (%g)", xrow[e], mjr_f32_from_bf16(xrow[e]));
            if (group) {
                int gi = e / group;
                uint64_t so = g->l.sf_offset + row * g->l.sf_row_bytes + (uint64_t)gi;
                printf(", group %d amax %g, scale byte expected 0x%02x got 0x%02x", gi,
                       group_amax(xrow, gi * group, group), img[so], got[so]);
            }
        }
        printf("\n");
    } else if (id == F_SF) {
        printf("    first at row %" PRIu64 "%s, group %" PRIu64 ": expected 0x%02x got 0x%02x", row,
               pad, col, img[o], got[o]);
        if (real)
            printf("; input group amax %g, row amax %g", group_amax(xrow, (int)col * group, group),
                   group_amax(xrow, 0, g->hidden));
        printf("\n");
    } else if (id == F_XS) {
        uint64_t a = f->off + row * 4;
        printf("    first at row %" PRIu64 "%s: expected %a (%g) got %a (%g)", row, pad,
               load_f32(img + a), load_f32(img + a), load_f32(got + a), load_f32(got + a));
        if (real) printf("; input row amax %g", group_amax(xrow, 0, g->hidden));
        printf("\n");
    } else {
        int k = (int)(col / 4);
        uint64_t a = f->off + row * f->row_bytes + (uint64_t)k * 4;
        if (id == F_IDS)
            printf("    first at row %" PRIu64 "%s, slot %d: expected %d got %d (0x%08x)", row, pad,
                   k, (int32_t)load_u32(img + a), (int32_t)load_u32(got + a), load_u32(got + a));
        else
            printf("    first at row %" PRIu64 "%s, slot %d: expected %a (%g) got %a (%g)", row,
                   pad, k, load_f32(img + a), load_f32(img + a), load_f32(got + a),
                   load_f32(got + a));
        if (real) {
            int32_t in_id = in->ids[row * TOPK + (uint64_t)k];
            printf("; input id %d weight %a", in_id, in->weights[row * TOPK + (uint64_t)k]);
            if (in_id >= 0 && in_id < NUM_EXPERTS) printf(" expert scale %a", in->scales[in_id]);
        }
        printf("\n");
    }
}

/* Compares the input region [x_offset, end) byte for byte. */
static int compare(const region *g, const inputs *in, const uint8_t *img, const uint8_t *got,
                   int num_tokens) {
    const mj_input_layout *l = &g->l;
    if (!memcmp(img + l->x_offset, got + l->x_offset, l->end - l->x_offset)) return 1;
    uint64_t P = (uint64_t)g->max_tokens;
    field f[F_COUNT] = {
        {l->x_offset, l->x_row_bytes, 1},
        {l->sf_offset, l->sf_row_bytes, l->sf_row_bytes != 0},
        {l->topk_idx_offset, TOPK * 4, 1},
        {l->topk_w_offset, TOPK * 4, 1},
        {l->x_scales_offset, 4, g->fmt == MJ_FMT_NVFP4},
        {0, 1, 1},
    };
    uint64_t count[F_COUNT] = {0}, first[F_COUNT] = {0};
    for (uint64_t o = l->x_offset; o < l->end; o++) {
        if (img[o] == got[o]) continue;
        int id = F_GAP;
        for (int i = 0; i < F_GAP; i++)
            if (f[i].present && o >= f[i].off && o < f[i].off + P * f[i].row_bytes) id = i;
        if (!count[id]++) first[id] = o;
    }
    printf("  mismatch (%s, hidden %d, rows %d of %d, rank %d):\n", mj_format_name(g->fmt),
           g->hidden, num_tokens, g->max_tokens, g->rank);
    for (int i = 0; i < F_COUNT; i++) {
        if (!count[i]) continue;
        printf("  %s: %" PRIu64 " bytes differ\n", field_names[i], count[i]);
        explain(g, in, &f[i], i, first[i], img, got, num_tokens);
    }
    return 0;
}

static int all_poison(const region *g, const uint8_t *got) {
    for (uint64_t o = g->l.x_offset; o < g->l.end; o++)
        if (got[o] != POISON) {
            printf("  region byte %" PRIu64 " is 0x%02x: something was written\n", o, got[o]);
            return 0;
        }
    return 1;
}

/* The check slots a launch of num_tokens wrote: each holds its CTA's count of
 * invalid ids, so their sum must be exactly the planted count want_bad. */
static int check_slots(const region *g, int num_tokens, uint64_t want_bad) {
    uint32_t slots[MJ_WS_PD_CHECK_SLOT_COUNT];
    const unsigned n = mj_pd_check_ctas(TOPK, num_tokens);
    CU(cuMemcpyDtoH(slots, g->base + MJ_WS_PD_CHECK_SLOTS * 4, n * sizeof *slots));
    uint64_t sum = 0;
    for (unsigned i = 0; i < n; i++)
        sum += slots[i];
    if (sum == want_bad) return 1;
    printf("  check slots 0..%u hold %" PRIu64 " invalid ids, expected %" PRIu64 "\n", n - 1, sum,
           want_bad);
    return 0;
}

/* One full check: fresh inputs, poison, launch, compare with the reference. */
static int run_case(ctx *c, mj_runtime *rt, const region *g, int num_tokens, int with_scales,
                    int rotate) {
    gen_inputs(&c->in, g->hidden, num_tokens, rotate);
    upload(c, &c->in, g->hidden, num_tokens);
    poison_device(g);
    double t0 = now_s();
    if (!expect_ok(launch(c, rt, g, num_tokens, with_scales), "mj_pre_dispatch")) return 0;
    /* The host reference runs while the GPU works. */
    reference(c, g, &c->in, c->img, num_tokens, with_scales);
    CU(cuStreamSynchronize(c->stream));
    c->gpu_s += now_s() - t0;
    fetch(g, c->got);
    int ok = compare(g, &c->in, c->img, c->got, num_tokens);
    return check_slots(g, num_tokens, 0) && ok;
}

/* ------------------------------------------------------------------ views */

static size_t dtype_size(mj_dtype d) {
    return d == MJ_DTYPE_BF16 ? 2 : d == MJ_DTYPE_I32 || d == MJ_DTYPE_F32 ? 4 : 1;
}

static int check_view(const mj_symm_buffer *buf, int rank, mj_view_id id, CUdeviceptr want_ptr,
                      int present, mj_dtype dtype, int ndim, int64_t rows, uint64_t row_bytes) {
    mj_view v;
    char what[64];
    snprintf(what, sizeof what, "view %d of rank %d", (int)id, rank);
    mj_status st = mj_symm_buffer_view(buf, rank, id, &v);
    if (!present) {
        if (st == MJ_ERR_NOT_FOUND) return 1;
        printf("  %s: %s, want MJ_ERR_NOT_FOUND (the format has no such field)\n", what,
               mj_status_name(st));
        return 0;
    }
    if (!expect_ok(st, what)) return 0;
    int ok = 1;
    if ((CUdeviceptr)(uintptr_t)v.ptr != want_ptr) {
        printf("  %s: ptr 0x%llx, want 0x%llx (rank base + layout offset)\n", what,
               (unsigned long long)(uintptr_t)v.ptr, (unsigned long long)want_ptr);
        ok = 0;
    }
    ok &= expect_int(v.dtype, dtype, "  dtype");
    ok &= expect_int(v.ndim, ndim, "  ndim");
    ok &= expect_int(v.shape[0], rows, "  shape[0]");
    ok &= expect_int((long long)v.nbytes, (long long)((uint64_t)rows * row_bytes), "  nbytes");
    if (ndim == 2) {
        ok &= expect_int(v.shape[1] * (int64_t)dtype_size(dtype), (long long)row_bytes,
                         "  shape[1] * element size");
        ok &= expect_int(v.row_stride_bytes, (long long)row_bytes, "  row_stride_bytes");
    }
    if (!ok) printf("  (in %s)\n", what);
    return ok;
}

/* Views of every rank: base + r * stride + layout offset, with the documented
 * dtypes and shapes; out-of-range ranks are refused. */
static int check_views(const mj_symm_buffer *buf, const mj_symm_config *want) {
    mj_symm_config cfg = MJ_SYMM_CONFIG_INIT;
    int sms = -1;
    size_t per_rank = 0;
    if (!expect_ok(mj_symm_buffer_info(buf, &cfg, &sms, &per_rank), "mj_symm_buffer_info"))
        return 0;
    int fmt = (int)want->dispatch_format, H = want->hidden, P = want->max_tokens_per_rank;
    int ok = expect_int(cfg.hidden, H, "info hidden") &
             expect_int(cfg.num_experts, want->num_experts, "info num_experts") &
             expect_int(cfg.num_topk, TOPK, "info num_topk") &
             expect_int(cfg.max_tokens_per_rank, P, "info max_tokens_per_rank") &
             expect_int(cfg.dispatch_format, fmt, "info dispatch_format") &
             expect_int(cfg.num_ranks, want->num_ranks, "info num_ranks") &
             expect_int((long long)per_rank, (long long)mj_layout_rank_bytes(H, TOPK, P, fmt),
                        "info bytes_per_rank");
    printf("  buffer: %d rank(s) of %zu bytes, mega_moe num_sms %d\n", want->num_ranks, per_rank,
           sms);
    mj_input_layout l = mj_layout_input(H, TOPK, P, fmt);
    mj_view v0;
    if (!expect_ok(mj_symm_buffer_view(buf, 0, MJ_VIEW_X, &v0), "view X of rank 0")) return 0;
    CUdeviceptr base0 = (CUdeviceptr)(uintptr_t)v0.ptr - l.x_offset;
    if (base0 % MJ_LAYOUT_ALIGN) {
        printf("  rank 0 base 0x%llx is not %llu-aligned\n", (unsigned long long)base0,
               MJ_LAYOUT_ALIGN);
        ok = 0;
    }
    mj_dtype xd = fmt == MJ_FMT_BF16    ? MJ_DTYPE_BF16
                  : fmt == MJ_FMT_MXFP8 ? MJ_DTYPE_E4M3
                                        : MJ_DTYPE_U8;
    int group = mj_format_group(fmt);
    for (int r = 0; r < want->num_ranks; r++) {
        CUdeviceptr b = base0 + (CUdeviceptr)r * per_rank;
        ok &= check_view(buf, r, MJ_VIEW_X, b + l.x_offset, 1, xd, 2, P, l.x_row_bytes);
        ok &= check_view(buf, r, MJ_VIEW_X_SF, b + l.sf_offset, group != 0, MJ_DTYPE_U8, 2, P,
                         l.sf_row_bytes);
        ok &= check_view(buf, r, MJ_VIEW_TOPK_IDX, b + l.topk_idx_offset, 1, MJ_DTYPE_I32, 2, P,
                         TOPK * 4);
        ok &= check_view(buf, r, MJ_VIEW_TOPK_WEIGHTS, b + l.topk_w_offset, 1, MJ_DTYPE_F32, 2, P,
                         TOPK * 4);
        ok &= check_view(buf, r, MJ_VIEW_X_SCALES, b + l.x_scales_offset, fmt == MJ_FMT_NVFP4,
                         MJ_DTYPE_F32, 1, P, 4);
    }
    mj_view v;
    ok &= expect_status(mj_symm_buffer_view(buf, want->num_ranks, MJ_VIEW_X, &v),
                        MJ_ERR_INVALID_ARG, "view of rank num_ranks");
    ok &= expect_status(mj_symm_buffer_view(buf, -1, MJ_VIEW_X, &v), MJ_ERR_INVALID_ARG,
                        "view of rank -1");
    ok &= expect_status(mj_symm_buffer_view(buf, 0, MJ_VIEW_COUNT_, &v), MJ_ERR_INVALID_ARG,
                        "view id MJ_VIEW_COUNT_");
    return ok;
}

static mj_symm_config make_cfg(int fmt, int hidden, int max_tokens, int num_ranks) {
    mj_symm_config cfg = {.struct_size = sizeof(mj_symm_config),
                          .hidden = hidden,
                          .num_experts = NUM_EXPERTS,
                          .num_topk = TOPK,
                          .max_tokens_per_rank = max_tokens,
                          .dispatch_format = (mj_format)fmt,
                          .num_ranks = num_ranks};
    return cfg;
}

static mj_symm_buffer *create_buffer(mj_runtime *rt, const mj_symm_config *cfg) {
    mj_symm_buffer *buf = NULL;
    if (!expect_ok(mj_symm_buffer_create(rt, cfg, &buf), "mj_symm_buffer_create")) return NULL;
    return buf;
}

/* A one-rank buffer and its region, with the host images sized for it; NULL
 * (the failure recorded) if either cannot be had. */
static mj_symm_buffer *open_region(ctx *c, mj_runtime *rt, int fmt, int hidden, int max_tokens,
                                   region *g) {
    mj_symm_config cfg = make_cfg(fmt, hidden, max_tokens, 1);
    mj_symm_buffer *buf = create_buffer(rt, &cfg);
    if (buf && region_init(g, buf, 0, fmt, hidden, max_tokens)) {
        ensure_image(c, g->l.end);
        return buf;
    }
    record(0);
    if (buf) mj_symm_buffer_destroy(buf);
    return NULL;
}

/* ------------------------------------------------------------------ tests */

static void test_create_errors(ctx *c) {
    struct {
        const char *name;
        int fmt, hidden, topk, max_tokens, num_ranks;
    } bad[] = {
        {"hidden 2064 not a multiple of MXFP8's group 32", MJ_FMT_MXFP8, 2064, TOPK, 64, 1},
        {"hidden 2064 not a multiple of MXFP4's group 32", MJ_FMT_MXFP4, 2064, TOPK, 64, 1},
        {"hidden 2056 not a multiple of NVFP4's group 16", MJ_FMT_NVFP4, 2056, TOPK, 64, 1},
        {"num_ranks 0", MJ_FMT_MXFP8, 2048, TOPK, 64, 0},
        {"num_ranks above MJ_MAX_RANKS", MJ_FMT_MXFP8, 2048, TOPK, 64, MJ_MAX_RANKS + 1},
        {"num_topk 0", MJ_FMT_MXFP8, 2048, 0, 64, 1},
        {"max_tokens_per_rank -1", MJ_FMT_MXFP8, 2048, TOPK, -1, 1},
        {"format out of range", MJ_FORMAT_COUNT_, 2048, TOPK, 64, 1},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        set_case("symm_buffer_create refuses %s", bad[i].name);
        mj_symm_config cfg =
            make_cfg(bad[i].fmt, bad[i].hidden, bad[i].max_tokens, bad[i].num_ranks);
        cfg.num_topk = bad[i].topk;
        mj_symm_buffer *buf = NULL;
        int ok = expect_status(mj_symm_buffer_create(c->rt, &cfg, &buf), MJ_ERR_INVALID_ARG,
                               "mj_symm_buffer_create");
        if (buf) {
            printf("  *out was set to %p on failure\n", (void *)buf);
            mj_symm_buffer_destroy(buf);
            ok = 0;
        }
        record(ok);
    }
    set_case("symm_buffer_create refuses NULL config / output");
    mj_symm_config cfg = make_cfg(MJ_FMT_MXFP8, 2048, 64, 1);
    mj_symm_buffer *buf = NULL;
    int ok =
        expect_status(mj_symm_buffer_create(c->rt, NULL, &buf), MJ_ERR_INVALID_ARG, "NULL config") &
        expect_status(mj_symm_buffer_create(c->rt, &cfg, NULL), MJ_ERR_INVALID_ARG, "NULL out");
    record(ok && !buf);
}

static void test_matrix(ctx *c) {
    static const int hidden_full[] = {2048, 2304, 3072, 4096, 7168, 8192};
    static const int hidden_quick[] = {2304, 7168};
    static const int tokens_full[] = {0, 1, 7, 4096};
    static const int tokens_quick[] = {0, 1, 7, 129};
    const int *hs = g_quick ? hidden_quick : hidden_full;
    const int *ts = g_quick ? tokens_quick : tokens_full;
    int nh = g_quick ? 2 : 6, nt = 4;
    int max_tokens = g_quick ? 136 : MAX_ROWS;
    int rotate = 0;
    for (int fmt = 0; fmt < MJ_FORMAT_COUNT_; fmt++) {
        for (int hi = 0; hi < nh; hi++) {
            int H = hs[hi];
            set_case("views %s hidden %d", mj_format_name((mj_format)fmt), H);
            mj_symm_config cfg = make_cfg(fmt, H, max_tokens, 1);
            mj_symm_buffer *buf = create_buffer(c->rt, &cfg);
            if (!buf) {
                record(0);
                continue;
            }
            region g;
            int ok = region_init(&g, buf, 0, fmt, H, max_tokens);
            record(ok && check_views(buf, &cfg));
            if (ok) {
                ensure_image(c, g.l.end);
                for (int ti = 0; ti < nt; ti++) {
                    for (int s = 0; s < 2; s++) {
                        set_case("pre_dispatch %s hidden %d tokens %d/%d%s",
                                 mj_format_name((mj_format)fmt), H, ts[ti], max_tokens,
                                 s ? " expert_scales" : "");
                        record(run_case(c, c->rt, &g, ts[ti], s, rotate++));
                    }
                }
            }
            mj_symm_buffer_destroy(buf);
        }
    }
}

static void inputs_alloc(inputs *in, int hidden, int num_tokens) {
    size_t rows = num_tokens > 0 ? (size_t)num_tokens : 1;
    in->x = xmalloc(rows * (size_t)hidden * 2);
    in->ids = xmalloc(rows * TOPK * 4);
    in->weights = xmalloc(rows * TOPK * 4);
    in->scales = xmalloc(NUM_EXPERTS * 4);
}

static void inputs_free(inputs *in) {
    free(in->x);
    free(in->ids);
    free(in->weights);
    free(in->scales);
    memset(in, 0, sizeof *in);
}

#define MAX_TEST_RANKS 8

/* Emulated ranks: each rank gets its own inputs and token count; all launches
 * happen before any check, so a launch that strays into a neighbour shows. */
static void test_ranks(ctx *c) {
    static const int ranks[] = {2, 4, MAX_TEST_RANKS};
    static const int hiddens[] = {7168, 3072, 2048};
    int nr = g_quick ? 1 : 3;
    int P = g_quick ? 72 : 1030;
    for (int ri = 0; ri < nr; ri++) {
        int R = ranks[ri], H = hiddens[ri];
        for (int fmt = 0; fmt < MJ_FORMAT_COUNT_; fmt++) {
            const char *fname = mj_format_name((mj_format)fmt);
            set_case("ranks %d %s hidden %d: views", R, fname, H);
            mj_symm_config cfg = make_cfg(fmt, H, P, R);
            mj_symm_buffer *buf = create_buffer(c->rt, &cfg);
            if (!buf) {
                record(0);
                continue;
            }
            record(check_views(buf, &cfg));
            region g[MAX_TEST_RANKS];
            inputs in[MAX_TEST_RANKS];
            uint8_t *imgs[MAX_TEST_RANKS] = {0};
            int tokens[MAX_TEST_RANKS] = {0}, ok = 1;
            memset(in, 0, sizeof in);
            for (int r = 0; r < R; r++)
                ok &= region_init(&g[r], buf, r, fmt, H, P);
            for (int r = 0; r < R && ok; r++)
                poison_device(&g[r]);
            for (int r = 0; r < R && ok; r++) {
                tokens[r] = r == 0 ? P : r == 1 ? 0 : 1 + (int)rnd_below((uint32_t)P);
                set_case("ranks %d %s hidden %d: launch rank %d tokens %d", R, fname, H, r,
                         tokens[r]);
                inputs_alloc(&in[r], H, tokens[r]);
                gen_inputs(&in[r], H, tokens[r], r);
                upload(c, &in[r], H, tokens[r]);
                if (!expect_ok(launch(c, c->rt, &g[r], tokens[r], r % 2), "mj_pre_dispatch")) {
                    record(0);
                    ok = 0;
                    break;
                }
                CU(cuStreamSynchronize(c->stream));
                imgs[r] = xmalloc(g[r].l.end);
                reference(c, &g[r], &in[r], imgs[r], tokens[r], r % 2);
            }
            for (int r = 0; r < R && ok; r++) {
                set_case("ranks %d %s hidden %d: rank %d tokens %d/%d", R, fname, H, r, tokens[r],
                         P);
                ensure_image(c, g[r].l.end);
                fetch(&g[r], c->got);
                int rank_ok = compare(&g[r], &in[r], imgs[r], c->got, tokens[r]);
                record(check_slots(&g[r], tokens[r], 0) && rank_ok);
            }
            for (int r = 0; r < R; r++) {
                free(imgs[r]);
                inputs_free(&in[r]);
            }
            mj_symm_buffer_destroy(buf);
        }
    }
}

static int region_untouched(ctx *c, const region *g) {
    CU(cuStreamSynchronize(c->stream));
    ensure_image(c, g->l.end);
    fetch(g, c->got);
    return all_poison(g, c->got);
}

/* Refused launches write nothing; a bad device-side id is reported with
 * check_device_inputs and leaves the region untouched either way. */
static void test_negative(ctx *c) {
    const int fmt = MJ_FMT_NVFP4, H = 2048, P = 64, T = 7;
    mj_symm_config cfg = make_cfg(fmt, H, P, 2);
    set_case("negative: create buffer");
    mj_symm_buffer *buf = create_buffer(c->rt_check, &cfg);
    if (!buf) {
        record(0);
        return;
    }
    region g[2];
    if (!region_init(&g[0], buf, 0, fmt, H, P) || !region_init(&g[1], buf, 1, fmt, H, P)) {
        record(0);
        mj_symm_buffer_destroy(buf);
        return;
    }
    gen_inputs(&c->in, H, T, 0);
    upload(c, &c->in, H, T);
    poison_device(&g[0]);
    poison_device(&g[1]);
    const void *x = (const void *)(uintptr_t)c->d_x;
    const int32_t *ids = (const int32_t *)(uintptr_t)c->d_ids;
    const float *w = (const float *)(uintptr_t)c->d_weights;
    const float *sc = (const float *)(uintptr_t)c->d_scales;
    struct {
        const char *name;
        mj_runtime *rt;
        mj_symm_buffer *buf;
        int rank;
        const void *x;
        const int32_t *ids;
        const float *w;
        int tokens;
    } bad[] = {
        {"NULL runtime", NULL, buf, 0, x, ids, w, T},
        {"NULL buffer", c->rt_check, NULL, 0, x, ids, w, T},
        {"a buffer of another runtime", c->rt, buf, 0, x, ids, w, T},
        {"NULL x", c->rt_check, buf, 0, NULL, ids, w, T},
        {"NULL topk ids", c->rt_check, buf, 0, x, NULL, w, T},
        {"NULL topk weights", c->rt_check, buf, 0, x, ids, NULL, T},
        {"tokens above max_tokens_per_rank", c->rt_check, buf, 0, x, ids, w, P + 1},
        {"negative tokens", c->rt_check, buf, 0, x, ids, w, -1},
        {"rank == num_ranks", c->rt_check, buf, 2, x, ids, w, T},
        {"rank -1", c->rt_check, buf, -1, x, ids, w, T},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        set_case("negative: %s -> MJ_ERR_INVALID_ARG, nothing written", bad[i].name);
        int ok = expect_status(mj_pre_dispatch(bad[i].rt, bad[i].buf, bad[i].rank, bad[i].x,
                                               bad[i].ids, bad[i].w, sc, bad[i].tokens, c->stream),
                               MJ_ERR_INVALID_ARG, "mj_pre_dispatch");
        ok &= region_untouched(c, &g[0]);
        ok &= region_untouched(c, &g[1]);
        record(ok);
    }

    /* Bad ids go with expert_scales so an unchecked scales[id] read shows under memcheck. */
    static const int32_t bad_ids[] = {NUM_EXPERTS, -2};
    for (int i = 0; i < 2; i++) {
        set_case("negative: id %d with check_device_inputs -> MJ_ERR_INVALID_ARG, nothing written",
                 bad_ids[i]);
        int32_t saved = c->in.ids[3 * TOPK + 2];
        c->in.ids[3 * TOPK + 2] = bad_ids[i];
        upload(c, &c->in, H, T);
        c->in.ids[3 * TOPK + 2] = saved;
        int ok = expect_status(launch(c, c->rt_check, &g[1], T, 1), MJ_ERR_INVALID_ARG,
                               "mj_pre_dispatch");
        ok &= region_untouched(c, &g[1]) & region_untouched(c, &g[0]) & check_slots(&g[1], T, 1);
        record(ok);
    }
    set_case("negative: a valid launch after refused ones is correct");
    record(run_case(c, c->rt_check, &g[1], T, 1, 3));
    mj_symm_buffer_destroy(buf);

    /* Without the check the launch is accepted but still writes nothing. */
    set_case("negative: bad id without check_device_inputs: accepted, nothing written");
    buf = create_buffer(c->rt, &cfg);
    if (!buf || !region_init(&g[0], buf, 0, fmt, H, P)) {
        record(0);
        if (buf) mj_symm_buffer_destroy(buf);
        return;
    }
    gen_inputs(&c->in, H, T, 5);
    c->in.ids[TOPK + 5] = NUM_EXPERTS + 7;
    upload(c, &c->in, H, T);
    poison_device(&g[0]);
    int ok = expect_ok(launch(c, c->rt, &g[0], T, 1), "mj_pre_dispatch");
    CU(cuStreamSynchronize(c->stream));
    fetch(&g[0], c->got);
    ok &= all_poison(&g[0], c->got) & check_slots(&g[0], T, 1);
    record(ok);
    set_case("negative: next valid launch without the check is correct, its slots clear");
    record(run_case(c, c->rt, &g[0], T, 0, 6));
    mj_symm_buffer_destroy(buf);
}

/* More top-k ids than the check grid has slots for, so check CTAs stride over
 * several id blocks: a valid launch is correct and a bad id in the last block
 * (a second pass of CTA 7) is still found. */
static void test_check_striding(ctx *c) {
    const int fmt = MJ_FMT_MXFP4, H = 256;
    const int T = MJ_WS_PD_CHECK_SLOT_COUNT * MJ_PD_CHECK_IDS_PER_CTA / TOPK + 1000;
    set_case("check striding: %d tokens, %u check CTAs for %d id blocks", T,
             mj_pd_check_ctas(TOPK, T),
             (T * TOPK + MJ_PD_CHECK_IDS_PER_CTA - 1) / MJ_PD_CHECK_IDS_PER_CTA);
    region g;
    mj_symm_buffer *buf = open_region(c, c->rt_check, fmt, H, T, &g);
    if (!buf) return;
    const CUdeviceptr saved[3] = {c->d_x, c->d_ids, c->d_weights};
    CU(cuMemAlloc(&c->d_x, (size_t)T * H * 2));
    CU(cuMemAlloc(&c->d_ids, (size_t)T * TOPK * 4));
    CU(cuMemAlloc(&c->d_weights, (size_t)T * TOPK * 4));
    inputs in;
    inputs_alloc(&in, H, T);
    gen_inputs(&in, H, T, 1);
    upload(c, &in, H, T);

    poison_device(&g);
    int ok = expect_ok(launch(c, c->rt_check, &g, T, 1), "mj_pre_dispatch");
    CU(cuStreamSynchronize(c->stream));
    reference(c, &g, &in, c->img, T, 1);
    fetch(&g, c->got);
    ok &= compare(&g, &in, c->img, c->got, T);
    record(check_slots(&g, T, 0) && ok);

    set_case("check striding: a bad id in the last slot -> MJ_ERR_INVALID_ARG, nothing written");
    in.ids[(size_t)T * TOPK - 1] = NUM_EXPERTS;
    upload(c, &in, H, T);
    poison_device(&g);
    ok = expect_status(launch(c, c->rt_check, &g, T, 1), MJ_ERR_INVALID_ARG, "mj_pre_dispatch");
    record(region_untouched(c, &g) & check_slots(&g, T, 1) & ok);

    inputs_free(&in);
    CU(cuMemFree(c->d_x));
    CU(cuMemFree(c->d_ids));
    CU(cuMemFree(c->d_weights));
    c->d_x = saved[0];
    c->d_ids = saved[1];
    c->d_weights = saved[2];
    mj_symm_buffer_destroy(buf);
}

static int graph_replays(ctx *c, CUgraphExec exec, const region *g, int replays, int num_tokens) {
    poison_device(g);
    for (int i = 0; i < replays; i++)
        CU(cuGraphLaunch(exec, c->stream));
    CU(cuStreamSynchronize(c->stream));
    fetch(g, c->got);
    int ok = compare(g, &c->in, c->img, c->got, num_tokens);
    return check_slots(g, num_tokens, 0) && ok;
}

/* Capture after a warm-up; replays must equal the reference, and read the
 * input buffers' current contents. */
static void test_graph(ctx *c, mj_runtime *rt, const char *rt_name) {
    const int fmt = MJ_FMT_NVFP4, H = 7168;
    int P = g_quick ? 136 : MAX_ROWS, T = g_quick ? 129 : 4096;
    set_case("graph (%s): warm-up launch", rt_name);
    region g;
    mj_symm_buffer *buf = open_region(c, rt, fmt, H, P, &g);
    if (!buf) return;
    record(run_case(c, rt, &g, T, 1, 1));

    set_case("graph (%s): a warm launch compiles nothing", rt_name);
    mj_runtime_stats before, after;
    int ok = expect_ok(mj_runtime_get_stats(rt, &before), "mj_runtime_get_stats") &&
             expect_ok(launch(c, rt, &g, T, 1), "mj_pre_dispatch") &&
             expect_ok(mj_runtime_get_stats(rt, &after), "mj_runtime_get_stats");
    CU(cuStreamSynchronize(c->stream));
    if (ok) {
        ok &= expect_int((long long)after.compiles, (long long)before.compiles, "compiles");
        ok &= expect_int((long long)after.disk_hits, (long long)before.disk_hits, "disk_hits");
        if (after.memory_hits <= before.memory_hits) {
            printf("  memory_hits did not grow (%" PRIu64 ")\n", after.memory_hits);
            ok = 0;
        }
    }
    record(ok);

    set_case("graph (%s): capture", rt_name);
    poison_device(&g);
    CU(cuStreamBeginCapture(c->stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
    mj_status st = launch(c, rt, &g, T, 1);
    CUgraph graph = NULL;
    CUresult er = cuStreamEndCapture(c->stream, &graph);
    ok = expect_ok(st, "mj_pre_dispatch while capturing");
    if (er != CUDA_SUCCESS) {
        const char *name = "?";
        cuGetErrorName(er, &name);
        printf("  cuStreamEndCapture -> %s (the launch did something illegal in capture)\n", name);
        ok = 0;
    }
    if (ok) {
        size_t nodes = 0;
        CU(cuGraphGetNodes(graph, NULL, &nodes));
        if (!nodes) {
            printf("  the captured graph is empty\n");
            ok = 0;
        }
    }
    CU(cuStreamSynchronize(c->stream));
    fetch(&g, c->got);
    ok &= all_poison(&g, c->got); /* capturing runs nothing */
    record(ok);
    if (!ok) {
        if (graph) cuGraphDestroy(graph);
        mj_symm_buffer_destroy(buf);
        return;
    }
    CUgraphExec exec;
    CU(cuGraphInstantiate(&exec, graph, 0));

    set_case("graph (%s): one replay", rt_name);
    record(graph_replays(c, exec, &g, 1, T));
    set_case("graph (%s): 100 replays, same result", rt_name);
    record(graph_replays(c, exec, &g, 100, T));
    set_case("graph (%s): replay reads new inputs in place", rt_name);
    gen_inputs(&c->in, H, T, 4);
    upload(c, &c->in, H, T);
    reference(c, &g, &c->in, c->img, T, 1);
    record(graph_replays(c, exec, &g, 1, T));

    CU(cuGraphExecDestroy(exec));
    CU(cuGraphDestroy(graph));
    mj_symm_buffer_destroy(buf);
}

/* The check runtime must ignore its synchronous check while capturing. */
static void test_graphs(ctx *c) {
    test_graph(c, c->rt, "serving runtime");
    test_graph(c, c->rt_check, "check_device_inputs runtime");
}

/* A spec that was never compiled cannot be built inside a capture. A runtime
 * without the disk cache and a hidden size used nowhere else make sure of it. */
static void test_capture_uncompiled(ctx *c) {
    const int fmt = MJ_FMT_MXFP8, H = 2560, P = 64, T = 7;
    set_case("capture of an uncompiled spec -> MJ_ERR_CAPTURE naming the kernel");
    mj_runtime_options opts = MJ_RUNTIME_OPTIONS_INIT;
    opts.cache_disable = 1;
    mj_runtime *rt = NULL;
    if (!expect_ok(mj_runtime_create(&rt, &opts), "mj_runtime_create(cache_disable)")) {
        record(0);
        return;
    }
    region g;
    mj_symm_buffer *buf = open_region(c, rt, fmt, H, P, &g);
    if (!buf) {
        mj_runtime_destroy(rt);
        return;
    }
    gen_inputs(&c->in, H, T, 2);
    upload(c, &c->in, H, T);
    poison_device(&g);
    CU(cuStreamBeginCapture(c->stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
    mj_status st = launch(c, rt, &g, T, 0);
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", mj_last_error());
    CUgraph graph = NULL;
    CUresult er = cuStreamEndCapture(c->stream, &graph);
    if (graph) CU(cuGraphDestroy(graph));
    int ok = expect_status(st, MJ_ERR_CAPTURE, "mj_pre_dispatch while capturing");
    if (!strstr(msg, "pre_dispatch")) {
        printf("  the message does not name the kernel (no \"pre_dispatch\"): %s\n", msg);
        ok = 0;
    }
    if (er != CUDA_SUCCESS) {
        const char *name = "?";
        cuGetErrorName(er, &name);
        printf("  cuStreamEndCapture -> %s (the refused call broke the capture)\n", name);
        ok = 0;
    }
    ok &= region_untouched(c, &g);
    record(ok);

    set_case("after the refused capture the same spec compiles and runs");
    record(run_case(c, rt, &g, T, 0, 2));
    mj_symm_buffer_destroy(buf);
    mj_runtime_destroy(rt);
}

static int check_family(mj_runtime *rt, int want_pd_sms, int want_moe_sms, int want_pd_pdl,
                        int want_moe_pdl) {
    int pd_sms = -1, moe_sms = -1, pd_pdl = -1, moe_pdl = -1;
    int ok = expect_ok(mj_family_get_num_sms(rt, MJ_FAMILY_PRE_DISPATCH, &pd_sms), "get sms") &
             expect_ok(mj_family_get_num_sms(rt, MJ_FAMILY_MEGA_MOE, &moe_sms), "get sms") &
             expect_ok(mj_family_get_pdl(rt, MJ_FAMILY_PRE_DISPATCH, &pd_pdl), "get pdl") &
             expect_ok(mj_family_get_pdl(rt, MJ_FAMILY_MEGA_MOE, &moe_pdl), "get pdl");
    if (want_pd_sms >= 0) ok &= expect_int(pd_sms, want_pd_sms, "pre_dispatch num_sms");
    if (want_moe_sms >= 0) ok &= expect_int(moe_sms, want_moe_sms, "mega_moe num_sms");
    if (want_pd_pdl >= 0) ok &= expect_int(pd_pdl, want_pd_pdl, "pre_dispatch pdl");
    if (want_moe_pdl >= 0) ok &= expect_int(moe_pdl, want_moe_pdl, "mega_moe pdl");
    return ok;
}

/* Settings are per family; results do not depend on the SM count or PDL. */
static void test_family(ctx *c) {
    mj_runtime *rt = NULL;
    set_case("family settings");
    if (!expect_ok(mj_runtime_create(&rt, NULL), "mj_runtime_create")) {
        record(0);
        return;
    }
    const int PD = MJ_FAMILY_PRE_DISPATCH, MOE = MJ_FAMILY_MEGA_MOE;
    int moe_sms = c->device_sms < 100 ? c->device_sms : 100;
    int ok = expect_ok(mj_family_set_num_sms(rt, PD, 66), "set pre_dispatch sms 66") &
             expect_ok(mj_family_set_num_sms(rt, MOE, moe_sms), "set mega_moe sms");
    ok &= check_family(rt, 66, moe_sms, -1, -1);
    ok &= expect_ok(mj_family_set_num_sms(rt, PD, 0), "set pre_dispatch sms 0");
    ok &= check_family(rt, 0, moe_sms, -1, -1);
    ok &= expect_ok(mj_family_set_num_sms(rt, MOE, 0), "set mega_moe sms 0") &
          expect_ok(mj_family_set_num_sms(rt, PD, 66), "set pre_dispatch sms 66");
    ok &= check_family(rt, 66, 0, -1, -1);
    ok &= expect_status(mj_family_set_num_sms(rt, PD, -1), MJ_ERR_INVALID_ARG, "sms -1") &
          expect_status(mj_family_set_num_sms(rt, PD, c->device_sms + 1), MJ_ERR_INVALID_ARG,
                        "sms above the device's") &
          expect_status(mj_family_set_num_sms(rt, MJ_FAMILY_COUNT_, 1), MJ_ERR_INVALID_ARG,
                        "unknown family");
    ok &= check_family(rt, 66, 0, -1, -1);
    ok &= expect_ok(mj_family_set_pdl(rt, PD, 1), "set pre_dispatch pdl 1") &
          expect_ok(mj_family_set_pdl(rt, MOE, 0), "set mega_moe pdl 0");
    ok &= check_family(rt, 66, 0, 1, 0);
    ok &= expect_ok(mj_family_set_pdl(rt, MOE, 1), "set mega_moe pdl 1");
    ok &= check_family(rt, 66, 0, 1, 1);
    ok &= expect_ok(mj_family_set_pdl(rt, PD, 0), "set pre_dispatch pdl 0");
    ok &= check_family(rt, 66, 0, 0, 1);
    ok &= expect_status(mj_family_get_num_sms(rt, PD, NULL), MJ_ERR_INVALID_ARG, "NULL out");
    record(ok);

    struct {
        int sms, pdl, fmt, hidden, tokens;
    } runs[] = {
        {66, 1, MJ_FMT_NVFP4, 7168, g_quick ? 129 : 4096},
        {1, 0, MJ_FMT_MXFP4, 3072, g_quick ? 129 : 1000},
        {c->device_sms, 1, MJ_FMT_MXFP8, 4096, g_quick ? 129 : 4096},
    };
    int P = g_quick ? 136 : MAX_ROWS;
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        set_case("pre_dispatch with num_sms %d pdl %d: %s hidden %d tokens %d", runs[i].sms,
                 runs[i].pdl, mj_format_name((mj_format)runs[i].fmt), runs[i].hidden,
                 runs[i].tokens);
        if (!expect_ok(mj_family_set_num_sms(rt, PD, runs[i].sms), "set sms") ||
            !expect_ok(mj_family_set_pdl(rt, PD, runs[i].pdl), "set pdl")) {
            record(0);
            continue;
        }
        region g;
        mj_symm_buffer *buf = open_region(c, rt, runs[i].fmt, runs[i].hidden, P, &g);
        if (!buf) continue;
        record(run_case(c, rt, &g, runs[i].tokens, 1, (int)i));
        mj_symm_buffer_destroy(buf);
    }
    mj_runtime_destroy(rt);
}

int main(int argc, char **argv) {
    uint64_t seed = (uint64_t)time(NULL) * 0x9E3779B97F4A7C15ull ^ (uint64_t)clock();
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) {
            g_quick = 1;
        } else if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
            seed = strtoull(argv[++i], NULL, 0);
        } else {
            fprintf(stderr, "usage: %s [--quick] [--seed N]\n", argv[0]);
            return 2;
        }
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    g_rng = seed ? seed : 1;
    printf("test_pre_dispatch %s, seed %" PRIu64 " (rerun with --seed %" PRIu64 ")\n",
           g_quick ? "--quick" : "full", seed, seed);
    double t_start = now_s();

    int device_sms;
    CUdevice dev = attach_device(0, &device_sms);

    ctx c;
    memset(&c, 0, sizeof c);
    c.device_sms = device_sms;

    set_case("runtime create");
    mj_runtime_options opts = MJ_RUNTIME_OPTIONS_INIT;
    mj_runtime_options check_opts = MJ_RUNTIME_OPTIONS_INIT;
    check_opts.check_device_inputs = 1;
    c.rt = open_runtime(&opts, "mj_runtime_create");
    c.rt_check = open_runtime(&check_opts, "mj_runtime_create(check)");
    printf("runtime arch %s\n", mj_runtime_arch(c.rt));

    CU(cuStreamCreate(&c.stream, CU_STREAM_DEFAULT));
    CU(cuMemAlloc(&c.d_x, (size_t)MAX_ROWS * MAX_HIDDEN * 2));
    CU(cuMemAlloc(&c.d_ids, (size_t)MAX_ROWS * TOPK * 4));
    CU(cuMemAlloc(&c.d_weights, (size_t)MAX_ROWS * TOPK * 4));
    CU(cuMemAlloc(&c.d_scales, NUM_EXPERTS * 4));
    c.in.x = xmalloc((size_t)MAX_ROWS * MAX_HIDDEN * 2);
    c.in.ids = xmalloc((size_t)MAX_ROWS * TOPK * 4);
    c.in.weights = xmalloc((size_t)MAX_ROWS * TOPK * 4);
    c.in.scales = xmalloc(NUM_EXPERTS * 4);

    static const struct {
        const char *name;
        void (*fn)(ctx *);
    } sections[] = {
        {"create errors", test_create_errors},
        {"format x hidden x tokens", test_matrix},
        {"emulated ranks", test_ranks},
        {"negative", test_negative},
        {"check striding", test_check_striding},
        {"graph", test_graphs},
        {"capture uncompiled", test_capture_uncompiled},
        {"family settings", test_family},
    };
    enum { NUM_SECTIONS = sizeof sections / sizeof sections[0] };
    double section_s[NUM_SECTIONS];
    for (int i = 0; i < NUM_SECTIONS; i++) {
        double t0 = now_s();
        sections[i].fn(&c);
        section_s[i] = now_s() - t0;
    }

    print_runtime_stats("serving runtime", c.rt);
    for (int i = 0; i < NUM_SECTIONS; i++)
        printf("  %-26s %7.2f s\n", sections[i].name, section_s[i]);
    printf("host reference %.2f s, launch-to-sync %.2f s, total %.2f s\n", c.ref_s, c.gpu_s,
           now_s() - t_start);

    CU(cuStreamDestroy(c.stream));
    CU(cuMemFree(c.d_x));
    CU(cuMemFree(c.d_ids));
    CU(cuMemFree(c.d_weights));
    CU(cuMemFree(c.d_scales));
    mj_runtime_destroy(c.rt_check);
    mj_runtime_destroy(c.rt);
    CU(cuDevicePrimaryCtxRelease(dev));
    free(c.in.x);
    free(c.in.ids);
    free(c.in.weights);
    free(c.in.scales);
    free(c.img);
    free(c.got);
    finish();
}
