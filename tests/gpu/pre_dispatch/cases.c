/* The sections of cases: create errors, the format matrix, emulated ranks, bad input, check
 * striding. */
#include "tests/gpu/pre_dispatch/harness.h"

/* ------------------------------------------------------------------ tests */

void test_create_errors(ctx *c) {
    struct {
        const char *name;
        int fmt, hidden, topk, max_tokens, num_ranks;
    } bad[] = {
        {"hidden 2064 not a multiple of 64", MJ_FMT_MXFP8, 2064, TOPK, 64, 1},
        {"hidden 2056 not a multiple of NVFP4's group 16", MJ_FMT_NVFP4, 2056, TOPK, 64, 1},
        {"hidden 2912 (2880 + 32) not a multiple of 64", MJ_FMT_BF16, 2912, TOPK, 64, 1},
        {"hidden 2912 (2880 + 32) not a multiple of 64", MJ_FMT_MXFP8, 2912, TOPK, 64, 1},
        {"hidden 2912 (2880 + 32) not a multiple of 64", MJ_FMT_MXFP4, 2912, TOPK, 64, 1},
        {"hidden 2912 (2880 + 32) not a multiple of 64", MJ_FMT_NVFP4, 2912, TOPK, 64, 1},
        {"hidden 32 below 64", MJ_FMT_MXFP4, 32, TOPK, 64, 1},
        {"num_ranks 0", MJ_FMT_MXFP8, 2048, TOPK, 64, 0},
        {"num_ranks above MJ_MAX_RANKS", MJ_FMT_MXFP8, 2048, TOPK, 64, MJ_MAX_RANKS + 1},
        {"num_topk 0", MJ_FMT_MXFP8, 2048, 0, 64, 1},
        {"max_tokens_per_rank -1", MJ_FMT_MXFP8, 2048, TOPK, -1, 1},
        {"format out of range", MJ_FORMAT_COUNT_, 2048, TOPK, 64, 1},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *fname = mj_format_name((mj_format)bad[i].fmt);
        set_case("symm_buffer_create refuses %s (%s)", bad[i].name, fname ? fname : "no format");
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

/* Rows whose last warp is partly idle (a thread per 32-element chunk): 64 (2
 * chunks on the warp, 8 rows a CTA), 320 (10), 2304 (8 in the third warp),
 * 2880 (gpt-oss-120b: 26 in the third); the others fill whole warps. The quick
 * set, which the sanitizers run, keeps the smallest row and gpt-oss's. */
void test_matrix(ctx *c) {
    static const int hidden_full[] = {64, 320, 2048, 2304, 2880, 3072, 4096, 7168, 8192};
    static const int hidden_quick[] = {64, 2880, 7168};
    static const int tokens_full[] = {0, 1, 7, 4096};
    static const int tokens_quick[] = {0, 1, 7, 129};
    const int *hs = g_quick ? hidden_quick : hidden_full;
    const int *ts = g_quick ? tokens_quick : tokens_full;
    int nh = g_quick ? (int)(sizeof hidden_quick / sizeof hidden_quick[0])
                     : (int)(sizeof hidden_full / sizeof hidden_full[0]),
        nt = 4;
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

#define MAX_TEST_RANKS 8

void test_ranks(ctx *c) {
    static const int ranks[] = {2, 4, MAX_TEST_RANKS};
    static const int hiddens[] = {7168, 2880, 2048};
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

int region_untouched(ctx *c, const region *g) {
    CU(cuStreamSynchronize(c->stream));
    ensure_image(c, g->l.end);
    fetch(g, c->got);
    return all_poison(g, c->got);
}

void test_negative(ctx *c) {
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

void test_check_striding(ctx *c) {
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
