/* Invalid input: every refused call launches nothing. */
#include "tests/gpu/mega_moe/harness.h"

/* ---------------------------------------------------------- invalid input */

static int nothing_written(ctx *c, int local) {
    size_t cap = (size_t)(c->sh.TMAX + Y_SLACK) * (size_t)c->sh.H;
    wait_or_die(c, c->s, 1);
    CU(cuMemcpyDtoH(c->y_got[0], c->d_y[0], cap * 2));
    CU(cuMemcpyDtoH(c->stats_got, c->d_stats[0], (size_t)local * 4));
    for (size_t i = 0; i < cap; i++)
        if (c->y_got[0][i] != MJ_BENCH_POISON) {
            printf("  y[%zu] = 0x%04x: something was launched\n", i, c->y_got[0][i]);
            return 0;
        }
    for (int i = 0; i < local; i++)
        if (c->stats_got[i]) {
            printf("  recv_stats[%d] = %d: something was launched\n", i, c->stats_got[i]);
            return 0;
        }
    return 1;
}

/* Refused with `want` and a message naming what was wrong. */
static int expect_status(mj_status st, mj_status want, const char *want_in_msg) {
    const char *msg = mj_last_error();
    printf("  -> %s: %s\n", mj_status_name(st), msg);
    if (st != want) {
        printf("  want %s\n", mj_status_name(want));
        return 0;
    }
    if (!strcasestr(msg, want_in_msg)) {
        printf("  the message does not name \"%s\"\n", want_in_msg);
        return 0;
    }
    return 1;
}

/* Refused with MJ_ERR_INVALID_ARG and a message naming what was wrong. */
static int expect_refused(mj_status st, const char *want_in_msg) {
    return expect_status(st, MJ_ERR_INVALID_ARG, want_in_msg);
}

/* Random MXFP8 weights for every local expert of a config (they are never
 * used numerically: only whether the call is refused). */
static int load_all_random(mj_weights *w, const mj_moe_config *mc, int skip_proj, int skip_expert) {
    int H = mc->hidden, I = mc->intermediate, local = mc->num_experts / mc->num_ranks;
    size_t n = (size_t)H * (size_t)I;
    float *f = xmalloc(n * sizeof(float));
    uint8_t *d = xmalloc(n), *s = xmalloc(n / 32);
    for (size_t i = 0; i < n; i++)
        f[i] = rnd_sym() * 0.05f;
    int ok = 1;
    for (int e = 0; e < local && ok; e++)
        for (int p = 0; p < 3 && ok; p++) {
            if (p == skip_proj && (skip_expert < 0 || skip_expert == e)) continue;
            int rows = p == MJ_PROJ_DOWN ? H : I, cols = p == MJ_PROJ_DOWN ? I : H;
            mjr_quantize_weights(MJ_FMT_MXFP8, f, rows, cols, d, s);
            ok = expect_ok(mj_weights_load(w, e, (mj_projection)p, d, s, 0), "mj_weights_load");
        }
    free(f);
    free(d);
    free(s);
    return ok;
}

void test_invalid(ctx *c) {
    const shape *sh = &c->sh;
    int row_index = row_index_by_name("mxfp8");
    set_case("invalid: setup (mxfp8 R=1 T=8)");
    run u;
    if (!run_setup(c, &u, row_index, &kInvalid, CTL_NONE)) {
        record(0);
        run_teardown(&u);
        return;
    }
    poison_outputs(c, &u);
    void *y = (void *)(uintptr_t)c->d_y[0];
    int32_t *stats = (int32_t *)(uintptr_t)c->d_stats[0];
    int T = kInvalid.tokens[0];

    set_case("invalid: weights of another config (hidden %d) with the buffer (hidden %d)",
             sh->H == 256 ? 512 : 256, sh->H);
    {
        mj_moe_config mc = moe_cfg(sh, u.row, &kInvalid, 0);
        mc.hidden = sh->H == 256 ? 512 : 256;
        mj_weights *w = NULL;
        int ok = expect_ok(mj_weights_create(c->rt, &mc, &w), "mj_weights_create") &&
                 load_all_random(w, &mc, -1, -1);
        if (ok)
            ok = expect_refused(mj_mega_moe(c->rt, u.buf, w, y, T, stats, c->s[0]), "hidden") &
                 nothing_written(c, u.local);
        if (w) mj_weights_destroy(w);
        record(ok);
    }

    set_case("invalid: num_tokens = max_tokens_per_rank + 1 (%d)", sh->TMAX + 1);
    record(expect_refused(mj_mega_moe(c->rt, u.buf, u.w[0], y, sh->TMAX + 1, stats, c->s[0]),
                          "num_tokens") &
           nothing_written(c, u.local));
    set_case("invalid: num_tokens = -1");
    record(expect_refused(mj_mega_moe(c->rt, u.buf, u.w[0], y, -1, stats, c->s[0]), "num_tokens") &
           nothing_written(c, u.local));

    for (int variant = 0; variant < 2; variant++) {
        mj_moe_config mc = moe_cfg(sh, u.row, &kInvalid, 0);
        int skip_expert = variant ? u.local - 1 : -1;
        if (variant)
            set_case("invalid: every projection loaded except local expert %d's down", skip_expert);
        else
            set_case("invalid: only gate and up loaded (no down projection)");
        mj_weights *w = NULL;
        int ok = expect_ok(mj_weights_create(c->rt, &mc, &w), "mj_weights_create") &&
                 load_all_random(w, &mc, MJ_PROJ_DOWN, skip_expert);
        if (ok)
            ok = expect_refused(mj_mega_moe(c->rt, u.buf, w, y, T, stats, c->s[0]), "down") &
                 nothing_written(c, u.local);
        if (w) mj_weights_destroy(w);
        record(ok);
    }

    /* MXFP4 weights decode into BF16 (weight_image.cuh): a row's scale bytes
     * spread by 127 are refused by name, by 126 taken; unfold_mx_scales
     * changes nothing. */
    set_case("invalid: mxfp4-a8 weights with a row whose scale bytes span 127 refused, 126 loaded");
    {
        mj_moe_config mc =
            moe_cfg(sh, mj_moe_format_at(row_index_by_name("mxfp4-a8")), &kInvalid, 0);
        size_t n = (size_t)sh->H * (size_t)sh->I;
        uint8_t *d = xmalloc(n / 2), *s = xmalloc(n / 32);
        for (size_t i = 0; i < n / 2; i++)
            d[i] = (uint8_t)(i * 37u);
        memset(s, 120, n / 32);
        int ok = 1;
        for (int unfold = 0; unfold < 2; unfold++) {
            mc.unfold_mx_scales = unfold;
            mj_weights *w = NULL;
            s[sh->H / 32 - 1] = 246;
            s[0] = 119; /* row 0 of gate: 119 .. 246 */
            ok = ok && expect_ok(mj_weights_create(c->rt, &mc, &w), "mj_weights_create") &&
                 expect_refused(mj_weights_load(w, 0, MJ_PROJ_GATE, d, s, 0), "within 126");
            s[0] = 120; /* 120 .. 246 */
            ok = ok && expect_ok(mj_weights_load(w, 0, MJ_PROJ_GATE, d, s, 0), "load, span 126");
            if (w) mj_weights_destroy(w);
        }
        free(d);
        free(s);
        record(ok);
    }

    /* MXFP8 weights decode into BF16 (weight_image.cuh): a row's scale bytes
     * spread by 119 are refused by name, by 118 taken. */
    set_case("invalid: mxfp8 weights with a row whose scale bytes span 119 refused, 118 loaded");
    {
        mj_moe_config mc = moe_cfg(sh, mj_moe_format_at(row_index_by_name("mxfp8")), &kInvalid, 0);
        const size_t n = (size_t)sh->H * (size_t)sh->I;
        uint8_t *d = xmalloc(n), *s = xmalloc(n / 32);
        memset(d, 0x38, n); /* E4M3 1.0 */
        memset(s, 125, n / 32);
        s[sh->H / 32 - 1] = 6; /* row 0 of gate: 6 .. 125 */
        mj_weights *w = NULL;
        int ok = expect_ok(mj_weights_create(c->rt, &mc, &w), "mj_weights_create") &&
                 expect_status(mj_weights_load(w, 0, MJ_PROJ_GATE, d, s, 0), MJ_ERR_INVALID_ARG,
                               "within 118");
        s[sh->H / 32 - 1] = 7; /* 7 .. 125 */
        ok = ok && expect_ok(mj_weights_load(w, 0, MJ_PROJ_GATE, d, s, 0), "load, span 118");
        if (w) mj_weights_destroy(w);
        free(d);
        free(s);
        record(ok);
    }

    set_case("invalid: expert biases (no biases, expert, projection, NULL, NaN, device source)");
    {
        mj_moe_config mc = moe_cfg(sh, u.row, &kInvalid, 0);
        float *b = xmalloc((size_t)sh->H * sizeof *b);
        for (int i = 0; i < sh->H; i++)
            b[i] = 0.25f * (float)(i % 7) - 0.5f;
        mj_weights *w = NULL;
        int ok = expect_ok(mj_weights_create(c->rt, &mc, &w), "mj_weights_create") &&
                 expect_refused(mj_weights_load_bias(w, 0, MJ_PROJ_GATE, b, 0), "expert_biases");
        if (w) mj_weights_destroy(w);
        w = NULL;
        mc.expert_biases = 1;
        ok = ok && expect_ok(mj_weights_create(c->rt, &mc, &w), "mj_weights_create(biases)");
        ok = ok && expect_refused(mj_weights_load_bias(w, u.local, MJ_PROJ_GATE, b, 0), "outside");
        ok = ok && expect_refused(mj_weights_load_bias(w, 0, (mj_projection)3, b, 0), "projection");
        ok = ok && expect_refused(mj_weights_load_bias(w, 0, MJ_PROJ_UP, NULL, 0), "NULL");
        b[5] = NAN;
        ok = ok && expect_refused(mj_weights_load_bias(w, 0, MJ_PROJ_DOWN, b, 0), "element 5");
        b[5] = 0.0f;
        CUdeviceptr d;
        CU(cuMemAlloc(&d, (size_t)sh->H * sizeof *b));
        CU(cuMemcpyHtoD(d, b, (size_t)sh->H * sizeof *b));
        ok = ok &&
             expect_ok(mj_weights_load_bias(w, 0, MJ_PROJ_DOWN, (const float *)(uintptr_t)d, 1),
                       "mj_weights_load_bias from the device") &&
             expect_ok(mj_weights_load_bias(w, u.local - 1, MJ_PROJ_GATE, b, 0),
                       "mj_weights_load_bias from the host");
        CU(cuMemFree(d));
        if (w) mj_weights_destroy(w);
        free(b);
        record(ok);
    }

    int sms = sms_for(c->device_sms, 1), other = sms > 1 ? sms - 1 : 2;
    set_case("invalid: buffer sized for %d SMs, MegaMoE family set to %d afterwards", sms, other);
    int ok = expect_ok(mj_family_set_num_sms(c->rt, MJ_FAMILY_MEGA_MOE, other), "set num_sms");
    if (ok)
        ok = expect_refused(mj_mega_moe(c->rt, u.buf, u.w[0], y, T, stats, c->s[0]), "SM") &
             nothing_written(c, u.local);
    record(ok);

    set_case("invalid: SM count restored -> the same call runs and is correct");
    ok = expect_ok(mj_family_set_num_sms(c->rt, MJ_FAMILY_MEGA_MOE, sms), "set num_sms") &&
         expect_ok(mj_mega_moe(c->rt, u.buf, u.w[0], y, T, stats, c->s[0]), "mj_mega_moe");
    if (ok) {
        wait_or_die(c, c->s, 1);
        ok = run_check(c, &u, 1, 1, NULL);
    }
    record(ok);

    if (g_real_rank < 0 && !g_comm) {
        set_case("invalid: 2 emulated ranks of %d SMs each on a %d-SM device", c->device_sms,
                 c->device_sms);
        poison_outputs(c, &u); /* the case before wrote y */
        scenario two = kInvalid;
        two.ranks = 2;
        mj_moe_config mc = moe_cfg(sh, u.row, &two, 0);
        const mj_symm_config cfg = mj_symm_config_of_moe(&mc);
        mj_symm_buffer *buf = NULL;
        mj_weights *w = NULL;
        ok = expect_ok(mj_family_set_num_sms(c->rt, MJ_FAMILY_MEGA_MOE, c->device_sms),
                       "set num_sms") &&
             expect_ok(mj_symm_buffer_create(c->rt, &cfg, &buf), "mj_symm_buffer_create") &&
             expect_ok(mj_weights_create(c->rt, &mc, &w), "mj_weights_create") &&
             load_all_random(w, &mc, -1, -1);
        if (ok)
            ok = expect_refused(mj_mega_moe(c->rt, buf, w, y, T, stats, c->s[0]), "emulated") &
                 nothing_written(c, u.local);
        if (w) mj_weights_destroy(w);
        if (buf) mj_symm_buffer_destroy(buf);
        /* Restored whatever the case gave: the next cases need every SM. */
        const int restored =
            expect_ok(mj_family_set_num_sms(c->rt, MJ_FAMILY_MEGA_MOE, sms), "set num_sms");
        record(ok && restored);
    }
    run_teardown(&u);
}

/* ------------------------------------------------- the shared expert */

/* Random MXFP8 projections first..last of the shared expert of mc. */
static int load_shared_random(mj_weights *w, const mj_moe_config *mc, int first, int last) {
    const int H = mc->hidden, IS = mc->shared_intermediate;
    const size_t n = (size_t)H * (size_t)IS;
    float *f = xmalloc(n * sizeof(float));
    uint8_t *d = xmalloc(n), *s = xmalloc(n / 32);
    for (size_t i = 0; i < n; i++)
        f[i] = rnd_sym() * 0.05f;
    int ok = 1;
    for (int p = first; p <= last && ok; p++) {
        const int rows = p == MJ_PROJ_DOWN ? H : IS, cols = p == MJ_PROJ_DOWN ? IS : H;
        mjr_quantize_weights(MJ_FMT_MXFP8, f, rows, cols, d, s);
        ok = expect_ok(mj_weights_load_shared(w, (mj_projection)p, d, s, 0),
                       "mj_weights_load_shared");
    }
    free(f);
    free(d);
    free(s);
    return ok;
}

/* mj_weights_create refuses a shared expert of this format and size on this
 * row (of intermediate size inter; 0: the shape's) with `want`, naming
 * `field`, and creates nothing. */
static void create_refused(ctx *c, const char *row_name, int inter, int shared_fmt,
                           int shared_inter, mj_status want, const char *field, const char *why) {
    const mj_moe_format_row *row = mj_moe_format_at(row_index_by_name(row_name));
    set_case(
        "invalid shared: %s row, shared_format %s, shared_intermediate %d (%s) -> %s", row_name,
        mj_format_name((mj_format)shared_fmt) ? mj_format_name((mj_format)shared_fmt) : "(unknown)",
        shared_inter, why, mj_status_name(want));
    mj_moe_config mc = moe_cfg(&c->sh, row, &kInvalid, 0);
    if (inter) mc.intermediate = inter;
    mc.shared_intermediate = shared_inter;
    mc.shared_format = (mj_format)shared_fmt;
    mj_weights *w = NULL;
    int ok = expect_status(mj_weights_create(c->rt, &mc, &w), want, field);
    if (w) {
        printf("  weights were created all the same\n");
        mj_weights_destroy(w);
        ok = 0;
    }
    record(ok);
}

void test_invalid_shared(ctx *c) {
    const shape *sh = &c->sh;
    const int I = sh->I;
    /* The fusable pairs (include/megajit.h): bf16 -> bf16; mxfp8, mxfp4-a8,
     * mxfp4-a16 -> mxfp8; nvfp4, nvfp4-a16 -> mxfp8 or bf16; the rest are
     * invalid. The kernels run them all where the shared expert's stages fit
     * the routed ones': bf16 beside nvfp4 not at stage K 64 (intermediate
     * 64), a valid request this build cannot serve. */
    create_refused(c, "bf16", 0, MJ_FORMAT_NVFP4, I, MJ_ERR_INVALID_ARG, "shared_format",
                   "not fusable");
    create_refused(c, "bf16", 0, MJ_FORMAT_MXFP8, I, MJ_ERR_INVALID_ARG, "shared_format",
                   "not fusable: a bf16 row fuses bf16 only");
    create_refused(c, "mxfp4-a16", 0, MJ_FORMAT_MXFP4, I, MJ_ERR_INVALID_ARG, "shared_format",
                   "not fusable");
    create_refused(c, "mxfp8", 0, (int)MJ_FORMAT_COUNT_ + 3, I, MJ_ERR_INVALID_ARG, "shared_format",
                   "no such format");
    create_refused(c, "nvfp4", 64, MJ_FORMAT_BF16, 128, MJ_ERR_UNSUPPORTED, "stage K of 64",
                   "fusable, no stage fits at stage K 64");
    create_refused(c, "nvfp4-a16", 64, MJ_FORMAT_BF16, 64, MJ_ERR_UNSUPPORTED, "stage K of 64",
                   "fusable, no stage fits at stage K 64");
    create_refused(c, "mxfp8", 0, MJ_FORMAT_MXFP8, 0, MJ_ERR_INVALID_ARG, "shared_format",
                   "a format without a shared expert");
    create_refused(c, "mxfp8", 0, MJ_FORMAT_MXFP8, I + I / 2, MJ_ERR_INVALID_ARG,
                   "shared_intermediate", "not a multiple of intermediate");
    create_refused(c, "mxfp8", 0, MJ_FORMAT_MXFP8, -I, MJ_ERR_INVALID_ARG, "shared_intermediate",
                   "negative");

    /* MXFP8 shared weights decoded into BF16: a row's scale bytes
     * spread by 119 are refused by name, by 118 taken (weight_image.cuh). */
    set_case("invalid shared: mxfp4-a16 row, MXFP8 shared gate with a row's scale bytes 119 apart "
             "refused, 118 apart loaded");
    {
        mj_moe_config mc =
            moe_cfg(sh, mj_moe_format_at(row_index_by_name("mxfp4-a16")), &kInvalid, 0);
        mc.shared_intermediate = I;
        mc.shared_format = MJ_FORMAT_MXFP8;
        const size_t n = (size_t)sh->H * (size_t)I;
        uint8_t *d = xmalloc(n), *s = xmalloc(n / 32);
        memset(d, 0x38, n); /* E4M3 1.0 */
        memset(s, 125, n / 32);
        s[sh->H / 32 - 1] = 6; /* row 0: bytes 6..125 */
        mj_weights *w = NULL;
        int ok = expect_ok(mj_weights_create(c->rt, &mc, &w), "mj_weights_create") &&
                 expect_status(mj_weights_load_shared(w, MJ_PROJ_GATE, d, s, 0), MJ_ERR_INVALID_ARG,
                               "within 118");
        s[sh->H / 32 - 1] = 7; /* bytes 7..125 */
        ok = ok && expect_ok(mj_weights_load_shared(w, MJ_PROJ_GATE, d, s, 0),
                             "mj_weights_load_shared, a span of 118");
        if (w) mj_weights_destroy(w);
        free(d);
        free(s);
        record(ok);
    }

    const int row_index = row_index_by_name("mxfp8");
    set_case("invalid shared: a buffer of shared_intermediate %d (intermediate %d)", I + I / 2, I);
    {
        mj_moe_config mc = moe_cfg(sh, mj_moe_format_at(row_index), &kSharedInvalid, 0);
        mj_symm_config cfg = mj_symm_config_of_moe(&mc);
        cfg.shared_intermediate = I + I / 2;
        mj_symm_buffer *buf = NULL;
        int ok = expect_refused(mj_symm_buffer_create(c->rt, &cfg, &buf), "shared_intermediate");
        if (buf) {
            printf("  the buffer was created all the same\n");
            mj_symm_buffer_destroy(buf);
            ok = 0;
        }
        record(ok);
    }

    /* A correct layer with a shared expert: the refusals below use its buffer. */
    set_case("invalid shared: setup (mxfp8 R=1 T=8, shared_intermediate %d)", I);
    if (out_of_time()) return;
    run u;
    if (!run_setup(c, &u, row_index, &kSharedInvalid, CTL_NONE)) {
        record(0);
        run_teardown(&u);
        return;
    }
    record(1);
    poison_outputs(c, &u);
    void *y = (void *)(uintptr_t)c->d_y[0];
    int32_t *stats = (int32_t *)(uintptr_t)c->d_stats[0];
    const int T = kSharedInvalid.tokens[0];
    const mj_moe_config shared_cfg = moe_cfg(sh, u.row, &kSharedInvalid, 0);
    const mj_moe_config plain_cfg = moe_cfg(sh, u.row, &kInvalid, 0);

    set_case("invalid shared: mj_weights_load_shared on weights without a shared expert, a bad "
             "projection, NULL data, missing scales");
    {
        mj_weights *plain = NULL, *w = NULL;
        const size_t n = (size_t)sh->H * (size_t)I;
        uint8_t *d = xmalloc(n), *s = xmalloc(n / 32);
        int ok =
            expect_ok(mj_weights_create(c->rt, &plain_cfg, &plain), "mj_weights_create") &&
            expect_refused(mj_weights_load_shared(plain, MJ_PROJ_GATE, d, s, 0),
                           "shared_intermediate") &&
            expect_ok(mj_weights_create(c->rt, &shared_cfg, &w), "mj_weights_create(shared)") &&
            expect_refused(mj_weights_load_shared(w, (mj_projection)3, d, s, 0), "projection") &&
            expect_refused(mj_weights_load_shared(w, MJ_PROJ_UP, NULL, s, 0), "NULL") &&
            expect_refused(mj_weights_load_shared(w, MJ_PROJ_DOWN, d, NULL, 0), "scales") &&
            expect_refused(mj_weights_load_shared(NULL, MJ_PROJ_GATE, d, s, 0), "NULL");
        if (plain) mj_weights_destroy(plain);
        if (w) mj_weights_destroy(w);
        free(d);
        free(s);
        record(ok);
    }

    /* Every routed projection loaded, the shared expert's not (all), then
     * without its down: refused, nothing written; with the down loaded the
     * same call runs and writes every row. */
    set_case("invalid shared: launch refused until all three shared projections are loaded");
    {
        mj_weights *w = NULL;
        int ok = expect_ok(mj_weights_create(c->rt, &shared_cfg, &w), "mj_weights_create") &&
                 load_all_random(w, &shared_cfg, -1, -1);
        if (ok)
            ok = expect_refused(mj_mega_moe(c->rt, u.buf, w, y, T, stats, c->s[0]),
                                "shared expert's gate") &
                 nothing_written(c, u.local);
        ok = ok && load_shared_random(w, &shared_cfg, MJ_PROJ_GATE, MJ_PROJ_UP);
        if (ok)
            ok = expect_refused(mj_mega_moe(c->rt, u.buf, w, y, T, stats, c->s[0]),
                                "shared expert's down") &
                 nothing_written(c, u.local);
        ok = ok && load_shared_random(w, &shared_cfg, MJ_PROJ_DOWN, MJ_PROJ_DOWN) &&
             expect_ok(mj_mega_moe(c->rt, u.buf, w, y, T, stats, c->s[0]),
                       "mj_mega_moe, every projection loaded");
        if (ok) {
            const size_t cap = (size_t)(sh->TMAX + Y_SLACK) * (size_t)sh->H;
            size_t unwritten, nonfinite, past;
            wait_or_die(c, c->s, 1);
            CU(cuMemcpyDtoH(c->y_got[0], c->d_y[0], cap * 2));
            mj_bench_scan_output(c->y_got[0], (size_t)T * (size_t)sh->H, cap, &unwritten,
                                 &nonfinite, &past);
            if (unwritten || nonfinite || past) {
                printf("  %zu unwritten, %zu non-finite, %zu written past num_tokens\n", unwritten,
                       nonfinite, past);
                ok = 0;
            }
        }
        if (w) mj_weights_destroy(w);
        record(ok);
    }

    /* The buffer's shared_intermediate must be the weights'. */
    set_case("invalid shared: weights with a shared expert on a buffer without, and the reverse");
    {
        poison_outputs(c, &u);
        const mj_symm_config plain_buf_cfg = mj_symm_config_of_moe(&plain_cfg);
        mj_symm_buffer *plain_buf = NULL;
        mj_weights *plain = NULL;
        int ok = expect_ok(mj_symm_buffer_create(c->rt, &plain_buf_cfg, &plain_buf),
                           "mj_symm_buffer_create(no shared expert)") &&
                 expect_ok(mj_weights_create(c->rt, &plain_cfg, &plain), "mj_weights_create") &&
                 load_all_random(plain, &plain_cfg, -1, -1);
        if (ok)
            ok = expect_refused(mj_mega_moe(c->rt, plain_buf, u.w[0], y, T, stats, c->s[0]),
                                "shared_intermediate") &
                 nothing_written(c, u.local);
        if (ok)
            ok = expect_refused(mj_mega_moe(c->rt, u.buf, plain, y, T, stats, c->s[0]),
                                "shared_intermediate") &
                 nothing_written(c, u.local);
        if (plain) mj_weights_destroy(plain);
        if (plain_buf) mj_symm_buffer_destroy(plain_buf);
        record(ok);
    }

    /* The layer the refusals ran beside is still correct. */
    set_case("invalid shared: the correct layer's launch after the refusals");
    poison_outputs(c, &u);
    int ok = run_launch(c, &u, c->s);
    if (ok) {
        wait_or_die(c, c->s, 1);
        ok = run_check(c, &u, 1, 1, NULL);
    }
    record(ok);
    run_teardown(&u);
}
