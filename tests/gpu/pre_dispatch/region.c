/* One rank region: upload, launch, the reference, the byte-for-byte comparison and the views. */
#include "tests/gpu/pre_dispatch/harness.h"

int expect_status(mj_status st, mj_status want, const char *what) {
    printf("  %s -> %s (want %s): %s\n", what, mj_status_name(st), mj_status_name(want),
           mj_last_error());
    return st == want;
}

int expect_int(long long got, long long want, const char *what) {
    if (got == want) return 1;
    printf("  %s = %lld, want %lld\n", what, got, want);
    return 0;
}

void upload(ctx *c, const inputs *in, int hidden, int num_tokens) {
    size_t rows = (size_t)num_tokens;
    if (rows) {
        CU(cuMemcpyHtoD(c->d_x, in->x, rows * (size_t)hidden * 2));
        CU(cuMemcpyHtoD(c->d_ids, in->ids, rows * TOPK * 4));
        CU(cuMemcpyHtoD(c->d_weights, in->weights, rows * TOPK * 4));
    }
    CU(cuMemcpyHtoD(c->d_scales, in->scales, NUM_EXPERTS * 4));
    CU(cuCtxSynchronize());
}

void ensure_image(ctx *c, size_t bytes) {
    if (bytes <= c->img_cap) return;
    free(c->img);
    free(c->got);
    c->img = xmalloc(bytes);
    c->got = xmalloc(bytes);
    c->img_cap = bytes;
}

int region_init(region *g, mj_symm_buffer *buf, int rank, int fmt, int hidden, int max_tokens) {
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

void poison_device(const region *g) {
    CU(cuMemsetD8(g->base + g->l.x_offset, POISON, g->l.end - g->l.x_offset));
    CU(cuCtxSynchronize());
}

void fetch(const region *g, uint8_t *got) {
    CU(cuMemcpyDtoH(got + g->l.x_offset, g->base + g->l.x_offset, g->l.end - g->l.x_offset));
}

void reference(ctx *c, const region *g, const inputs *in, uint8_t *img, int num_tokens,
               int with_scales) {
    double t0 = now_s();
    memset(img + g->l.x_offset, POISON, g->l.end - g->l.x_offset);
    mjr_pre_dispatch(g->fmt, g->hidden, TOPK, g->max_tokens, in->x, in->ids, in->weights,
                     with_scales ? in->scales : NULL, num_tokens, img);
    c->ref_s += now_s() - t0;
}

mj_status launch(ctx *c, mj_runtime *rt, const region *g, int num_tokens, int with_scales) {
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

int compare(const region *g, const inputs *in, const uint8_t *img, const uint8_t *got,
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

int all_poison(const region *g, const uint8_t *got) {
    for (uint64_t o = g->l.x_offset; o < g->l.end; o++)
        if (got[o] != POISON) {
            printf("  region byte %" PRIu64 " is 0x%02x: something was written\n", o, got[o]);
            return 0;
        }
    return 1;
}

int check_slots(const region *g, int num_tokens, uint64_t want_bad) {
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

int run_case(ctx *c, mj_runtime *rt, const region *g, int num_tokens, int with_scales, int rotate) {
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

int check_views(const mj_symm_buffer *buf, const mj_symm_config *want) {
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

mj_symm_config make_cfg(int fmt, int hidden, int max_tokens, int num_ranks) {
    mj_symm_config cfg = {.struct_size = sizeof(mj_symm_config),
                          .hidden = hidden,
                          .num_experts = NUM_EXPERTS,
                          .num_topk = TOPK,
                          .max_tokens_per_rank = max_tokens,
                          .dispatch_format = (mj_format)fmt,
                          .num_ranks = num_ranks};
    return cfg;
}

mj_symm_buffer *create_buffer(mj_runtime *rt, const mj_symm_config *cfg) {
    mj_symm_buffer *buf = NULL;
    if (!expect_ok(mj_symm_buffer_create(rt, cfg, &buf), "mj_symm_buffer_create")) return NULL;
    return buf;
}

mj_symm_buffer *open_region(ctx *c, mj_runtime *rt, int fmt, int hidden, int max_tokens,
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
