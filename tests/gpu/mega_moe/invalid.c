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

/* Refused with MJ_ERR_INVALID_ARG and a message naming what was wrong. */
static int expect_refused(mj_status st, const char *want_in_msg) {
    const char *msg = mj_last_error();
    printf("  -> %s: %s\n", mj_status_name(st), msg);
    if (st != MJ_ERR_INVALID_ARG) {
        printf("  want MJ_ERR_INVALID_ARG\n");
        return 0;
    }
    if (!strcasestr(msg, want_in_msg)) {
        printf("  the message does not name \"%s\"\n", want_in_msg);
        return 0;
    }
    return 1;
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

    set_case("invalid: mxfp4-a8 weights with a row whose scale bytes span 27 (folded scales)");
    {
        mj_moe_config mc =
            moe_cfg(sh, mj_moe_format_at(row_index_by_name("mxfp4-a8")), &kInvalid, 0);
        size_t n = (size_t)sh->H * (size_t)sh->I;
        uint8_t *d = xmalloc(n / 2), *s = xmalloc(n / 32);
        for (size_t i = 0; i < n / 2; i++)
            d[i] = (uint8_t)(i * 37u);
        memset(s, 120, n / 32);
        s[sh->H / 32 - 1] = 147; /* row 0 of gate: 120 .. 147 */
        mj_weights *w = NULL;
        int ok = expect_ok(mj_weights_create(c->rt, &mc, &w), "mj_weights_create") &&
                 expect_refused(mj_weights_load(w, 0, MJ_PROJ_GATE, d, s, 0), "unfold_mx_scales");
        if (w) mj_weights_destroy(w);
        w = NULL;
        /* Within 26 the folded weights take it; unfolded ones take any spread. */
        s[sh->H / 32 - 1] = 146;
        ok = ok && expect_ok(mj_weights_create(c->rt, &mc, &w), "mj_weights_create") &&
             expect_ok(mj_weights_load(w, 0, MJ_PROJ_GATE, d, s, 0), "load, span 26");
        if (w) mj_weights_destroy(w);
        w = NULL;
        s[sh->H / 32 - 1] = 147;
        mc.unfold_mx_scales = 1;
        ok = ok && expect_ok(mj_weights_create(c->rt, &mc, &w), "mj_weights_create") &&
             expect_ok(mj_weights_load(w, 0, MJ_PROJ_GATE, d, s, 0), "load, unfolded, span 27");
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
