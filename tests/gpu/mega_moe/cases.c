/* The sections of cases: the matrix, BLOCK_M, CUDA graphs, negative controls, real ranks,
 * gpt-oss-120b's shape. */
#include "tests/gpu/mega_moe/harness.h"

/* ------------------------------------------------------------ sections */

void test_matrix(ctx *c) {
    const scenario *tab = g_quick ? kQuick : kMatrix;
    size_t n = g_quick ? sizeof kQuick / sizeof kQuick[0] : sizeof kMatrix / sizeof kMatrix[0];
    for (int i = 0; i < mj_moe_format_count(); i++) {
        if (g_quick && i != row_index_by_name("nvfp4")) continue;
        for (size_t s = 0; s < n; s++) {
            run probe = {.row = mj_moe_format_at(i), .sc = tab[s], .route = route_of(&tab[s], i)};
            char d[256];
            describe(&probe, d, sizeof d);
            set_case("matrix %s", d);
            if (!mj_moe_activation_allowed(probe.row, tab[s].act)) {
                printf("  activation not allowed for row %s: skipped by the table\n",
                       probe.row->name);
                continue;
            }
            if (out_of_time()) continue;
            double worst = 0;
            int ok = run_case(c, i, &tab[s], CTL_NONE, 1, &worst) == CASE_PASSED;
            printf("  worst calc_diff %.3g\n", worst);
            record(ok);
        }
    }
}

/* Every BLOCK_M a row allows on the same inputs, five times: random routing
 * (about 16 tokens an expert: the narrow loops), 38 tokens on one expert (a
 * 64-token tile's 40-column loop), 44 (its full loop; 32-token tiles full
 * and partial; a 128-token tile's 64-column loop), 2 ranks of 40 on one
 * expert (80: a 128-token tile's 96-column loop) and 4 ranks of 40 (a full
 * 160-token tile). */
void test_block_m(ctx *c) {
    static const scenario kOneExpert38 = {1, SWIGLU, 0, {38}, ROUTE_ONE, -1, 0, 0};
    static const scenario kOneExpert44 = {1, SWIGLU, 0, {44}, ROUTE_ONE, -1, 0, 0};
    static const scenario kOneExpert80 = {2, SWIGLU, 0, {40, 40}, ROUTE_ONE, -1, 0, 0};
    static const scenario kOneExpert160 = {4, SWIGLU, 0, {40, 40, 40, 40}, ROUTE_ONE, -1, 0, 0};
    const scenario *bases[] = {&kControlBase, &kOneExpert38, &kOneExpert44, &kOneExpert80,
                               &kOneExpert160};
    const shape *sh = &c->sh;
    size_t n = (size_t)kControlBase.tokens[0] * (size_t)sh->H;
    uint16_t *first = xmalloc(n * 2);
    for (size_t s = 0; s < sizeof bases / sizeof bases[0]; s++) {
        const size_t bytes = (size_t)bases[s]->tokens[0] * (size_t)sh->H * 2;
        for (int i = 0; i < mj_moe_format_count(); i++) {
            uint64_t seed = g_rng;
            int equal = 1, ran = 0;
            for (size_t b = 0; b < sizeof kBlockMs / sizeof kBlockMs[0]; b++) {
                if (kBlockMs[b] > mj_moe_max_block_m(mj_moe_format_at(i))) continue;
                scenario sc = *bases[s];
                sc.block_m = kBlockMs[b];
                set_case("block_m %s forced %d (T=%d R=%d swiglu, %s routing)",
                         mj_moe_format_at(i)->name, sc.block_m, sc.tokens[0], sc.ranks,
                         s ? "one-expert" : "random");
                if (out_of_time()) continue;
                mj_moe_config mc = moe_cfg(sh, mj_moe_format_at(i), &sc, 0);
                int bm = -1;
                int ok =
                    expect_ok(mj_mega_moe_block_m(&mc, sc.tokens[0], &bm), "mj_mega_moe_block_m");
                if (ok && bm != sc.block_m) {
                    printf("  mj_mega_moe_block_m = %d, want the forced %d\n", bm, sc.block_m);
                    ok = 0;
                }
                g_rng = seed; /* the same inputs for every size */
                double worst = 0;
                ok &= run_case(c, i, &sc, CTL_NONE, 1, &worst) == CASE_PASSED;
                printf("  calc_diff %.3g\n", worst);
                record(ok);
                if (!ran)
                    memcpy(first, c->y_got[0], bytes);
                else if (memcmp(first, c->y_got[0], bytes))
                    equal = 0;
                ran++;
            }
            if (ran > 1)
                printf("INFO block_m %s (%s routing): outputs for BLOCK_M 8 to %d are %s\n",
                       mj_moe_format_at(i)->name, s ? "one-expert" : "random",
                       mj_moe_max_block_m(mj_moe_format_at(i)),
                       equal ? "bitwise identical"
                             : "NOT bitwise identical (allowed: fp32 accumulation order inside "
                               "the tensor cores; each size is checked against the reference "
                               "above)");
        }
    }
    free(first);
}

static int check_capture_ok(mj_status st, CUresult er) {
    int ok = expect_ok(st, "mj_mega_moe while capturing");
    if (er != CUDA_SUCCESS) {
        const char *name = "?";
        cuGetErrorName(er, &name);
        printf("  cuStreamEndCapture -> %s (something illegal during capture)\n", name);
        ok = 0;
    }
    return ok;
}

/* Eager warm-up, then a capture of all ranks (R = 2: stream 1 forked from
 * and joined back into stream 0's capture by events), 1000 replays: y equals
 * the eager y bitwise and recv_stats grew by 1000 x the counts. */
void test_graph(ctx *c, int row_index, const scenario *sc) {
    const int replays = 1000;
    const shape *sh = &c->sh;
    int R = sc->ranks;
    set_case("graph %s R=%d%s: eager warm-up", mj_moe_format_at(row_index)->name, R,
             sc->shared ? " shared" : "");
    if (out_of_time()) return;
    run u;
    uint16_t *eager[MAX_R] = {0};
    size_t cap = (size_t)(sh->TMAX + Y_SLACK) * (size_t)sh->H;
    CUgraph graph = NULL;
    CUgraphExec exec = NULL;
    CUevent fork_ev = NULL, join_ev = NULL;
    int ok = run_setup(c, &u, row_index, sc, CTL_NONE);
    if (ok) {
        poison_outputs(c, &u);
        ok = run_launch(c, &u, c->s);
        if (ok) {
            wait_or_die(c, c->s, R);
            ok = run_check(c, &u, 1, 1, NULL);
        }
    }
    record(ok);
    if (!ok) goto out;
    for (int r = 0; r < R; r++) {
        eager[r] = xmalloc(cap * 2);
        memcpy(eager[r], c->y_got[r], cap * 2);
    }

    set_case("graph %s R=%d%s: capture (nothing runs)", u.row->name, R,
             sc->shared ? " shared" : "");
    poison_outputs(c, &u);
    CU(cuEventCreate(&fork_ev, CU_EVENT_DISABLE_TIMING));
    CU(cuEventCreate(&join_ev, CU_EVENT_DISABLE_TIMING));
    CU(cuStreamBeginCapture(c->s[0], CU_STREAM_CAPTURE_MODE_GLOBAL));
    mj_status st = MJ_OK;
    if (R > 1) {
        CU(cuEventRecord(fork_ev, c->s[0]));
        for (int r = 1; r < R; r++)
            CU(cuStreamWaitEvent(c->s[r], fork_ev, 0));
    }
    for (int r = 0; r < R && st == MJ_OK; r++)
        st = mj_mega_moe(c->rt, u.buf, u.w[r], (void *)(uintptr_t)c->d_y[r], sc->tokens[r],
                         (int32_t *)(uintptr_t)c->d_stats[r], c->s[r]);
    if (st != MJ_OK) printf("  %s\n", mj_last_error());
    if (R > 1)
        for (int r = 1; r < R; r++) {
            CU(cuEventRecord(join_ev, c->s[r]));
            CU(cuStreamWaitEvent(c->s[0], join_ev, 0));
        }
    CUresult er = cuStreamEndCapture(c->s[0], &graph);
    ok = check_capture_ok(st, er);
    wait_or_die(c, c->s, R);
    CU(cuMemcpyDtoH(c->y_got[0], c->d_y[0], cap * 2));
    for (size_t i = 0; i < cap && ok; i++)
        if (c->y_got[0][i] != MJ_BENCH_POISON) {
            printf("  y[%zu] written during capture\n", i);
            ok = 0;
        }
    record(ok);
    if (!ok) goto out;
    CU(cuGraphInstantiate(&exec, graph, 0));

    set_case("graph %s R=%d%s: %d replays = eager bitwise, recv_stats x%d", u.row->name, R,
             sc->shared ? " shared" : "", replays, replays);
    double t0 = now_s();
    for (int i = 0; i < replays; i++)
        CU(cuGraphLaunch(exec, c->s[0]));
    wait_or_die(c, c->s, 1);
    double el = now_s() - t0;
    ok = run_check(c, &u, replays, 1, NULL);
    for (int r = 0; r < R; r++)
        if (memcmp(eager[r], c->y_got[r], cap * 2)) {
            size_t i = 0;
            while (eager[r][i] == c->y_got[r][i])
                i++;
            printf("  rank %d differs from the eager run at element %zu: eager 0x%04x got 0x%04x\n",
                   r, i, eager[r][i], c->y_got[r][i]);
            ok = 0;
        }
    printf("  %d replays in %.3f s (%.1f us each, including launch)\n", replays, el,
           1e6 * el / replays);
    record(ok);
out:
    if (exec) CU(cuGraphExecDestroy(exec));
    if (graph) CU(cuGraphDestroy(graph));
    if (fork_ev) CU(cuEventDestroy(fork_ev));
    if (join_ev) CU(cuEventDestroy(join_ev));
    for (int r = 0; r < MAX_R; r++)
        free(eager[r]);
    run_teardown(&u);
}

void test_graphs(ctx *c) {
    test_graph(c, row_index_by_name("nvfp4"), &kGraph1);
    test_graph(c, row_index_by_name("mxfp4-a8"), &kGraph2);
}

const char *control_name(int ctl) {
    switch (ctl) {
    case CTL_SWAP_GATE_UP:
        return "swap-gate-up";
    case CTL_NO_ROUTING_WEIGHT:
        return "no-routing-weight";
    case CTL_SCALE_EXPERT:
        return "wrong-scale";
    case CTL_ALPHA:
        return "wrong-alpha";
    case CTL_ACT_PARAM:
        return "wrong-swiglu-alpha";
    case CTL_BIAS_UNWEIGHTED:
        return "down-bias-without-routing-weight";
    case CTL_PEERS:
        return "wrong-peer-offset";
    case CTL_SHARED_DROPPED:
        return "reference-without-shared-expert";
    case CTL_SHARED_SCALE:
        return "wrong-shared-scale";
    case CTL_SHARED_SWAP:
        return "swap-shared-gate-up";
    default:
        return "none";
    }
}

/* A fault counts as detected only when the run went through and its check
 * failed; the unfaulted baseline of the scale control's route must pass (the
 * other controls share test_block_m's passing route). */
void test_controls(ctx *c) {
    static const int ctls[] = {CTL_SWAP_GATE_UP, CTL_NO_ROUTING_WEIGHT, CTL_SCALE_EXPERT,
                               CTL_ALPHA,        CTL_ACT_PARAM,         CTL_BIAS_UNWEIGHTED};
    scenario one_expert = kControlBase;
    one_expert.route = ROUTE_ONE_ONLY;
    for (int i = 0; i < mj_moe_format_count(); i++) {
        const mj_moe_format_row *row = mj_moe_format_at(i);
        int scaled = mj_format_group(row->weight_fmt) != 0;
        double worst = 0;
        if (scaled && !out_of_time()) {
            set_case("control baseline %s %s", route_names[ROUTE_ONE_ONLY], row->name);
            record(run_case(c, i, &one_expert, CTL_NONE, 0, &worst) == CASE_PASSED);
        }
        for (size_t j = 0; j < sizeof ctls / sizeof ctls[0]; j++) {
            int ctl = ctls[j];
            set_case("control %s %s", control_name(ctl), row->name);
            if (ctl == CTL_SCALE_EXPERT && !scaled) {
                printf("  skipped: %s weights have no block scales\n", row->name);
                continue;
            }
            if (out_of_time()) continue;
            /* the bias control needs a layer with biases, whose unfaulted run must pass */
            const scenario *base = ctl == CTL_BIAS_UNWEIGHTED ? &kBiasControl : &kControlBase;
            if (base == &kBiasControl) {
                set_case("control baseline biases %s", row->name);
                record(run_case(c, i, base, CTL_NONE, 0, &worst) == CASE_PASSED);
                set_case("control %s %s", control_name(ctl), row->name);
            }
            int result = run_case(c, i, base, ctl, 0, &worst);
            printf("  control %s %s: calc_diff=%.3g -> %s\n", control_name(ctl), row->name, worst,
                   result == CASE_FAILED   ? "detected"
                   : result == CASE_PASSED ? "NOT detected"
                                           : "did not run (setup or launch failed)");
            record(result == CASE_FAILED);
        }
    }
}

void test_peer_control(ctx *c, const scenario *sc) {
    int row_index = row_index_by_name("mxfp8");
    double worst = 0;
    set_case("control baseline: prepare + mj_jit_launch unmodified, mxfp8 R=%d", sc->ranks);
    if (out_of_time()) return;
    int ok = run_case(c, row_index, sc, CTL_PREPARE, 1, &worst) == CASE_PASSED;
    printf("  calc_diff %.3g\n", worst);
    record(ok);
    if (!ok) return;

    set_case("control %s mxfp8 R=%d", control_name(CTL_PEERS), sc->ranks);
    run u;
    if (!run_setup(c, &u, row_index, sc, CTL_PEERS)) {
        record(0);
        run_teardown(&u);
        return;
    }
    poison_outputs(c, &u);
    if (!run_launch(c, &u, c->s)) {
        record(0);
        run_teardown(&u);
        return;
    }
    CUresult fault;
    if (!wait_streams(c->s, sc->ranks, 20.0, &fault)) {
        printf("  control %s R=%d: calc_diff=n/a -> detected (kernels hang; stopping, the "
               "context cannot be recovered)\n",
               control_name(CTL_PEERS), sc->ranks);
        record(1);
        finish();
    }
    if (fault != CUDA_SUCCESS) {
        const char *name = "?";
        cuGetErrorName(fault, &name);
        printf("  control %s R=%d: calc_diff=n/a -> detected (kernel fault %s; stopping)\n",
               control_name(CTL_PEERS), sc->ranks, name);
        record(1);
        finish();
    }
    int passed = run_check(c, &u, 1, 0, &worst);
    printf("  control %s R=%d: calc_diff=%.3g -> %s\n", control_name(CTL_PEERS), sc->ranks, worst,
           passed ? "NOT detected" : "detected");
    record(!passed);
    run_teardown(&u);
}

void test_real_ranks(ctx *c, int world) {
    for (int i = 0; i <= mj_moe_format_count(); i++) {
        int clamp_case = i == mj_moe_format_count();
        int row_index = clamp_case ? row_index_by_name("nvfp4") : i;
        scenario sc = {world, SWIGLU, 0, {0}, ROUTE_RANDOM, -1, 0, 0};
        if (clamp_case) {
            sc.clamp = CLAMP;
            sc.route = ROUTE_DUP;
            sc.alphas = 1;
        }
        static const int pattern[] = {64, 37, 1, 0};
        for (int r = 0; r < world; r++)
            sc.tokens[r] = pattern[r % 4];
        run u = {.row = mj_moe_format_at(row_index), .sc = sc, .route = route_of(&sc, row_index)};
        char d[256];
        describe(&u, d, sizeof d);
        set_case("real-ranks rank %d of %d: %s", g_real_rank, world, d);
        if (!run_setup(c, &u, row_index, &sc, CTL_NONE)) {
            record(0);
            finish();
        }
        poison_outputs(c, &u);
        if (!run_launch(c, &u, c->s)) {
            record(0);
            finish();
        }
        wait_or_die(c, c->s, world);
        double worst = 0;
        int ok = run_check(c, &u, 1, 1, &worst);
        run_teardown(&u);
        printf("  worst calc_diff %.3g\n", worst);
        record(ok);
    }
}

void test_gpt_oss(ctx *c) {
    const scenario *cases[] = {&kGptOssCase, &kGptOssOneRank, &kGptOssBiased8};
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < mj_moe_format_count(); i++) {
            run probe = {
                .row = mj_moe_format_at(i), .sc = *cases[k], .route = route_of(cases[k], i)};
            char d[256];
            describe(&probe, d, sizeof d);
            set_case("gpt-oss H=%d I=%d E=%d K=%d %s, relaunched twice", c->sh.H, c->sh.I, c->sh.E,
                     c->sh.K, d);
            if (out_of_time()) continue;
            double worst = 0;
            int ok = run_case_relaunched(c, i, cases[k], CTL_NONE, 1, 2, &worst) == CASE_PASSED;
            printf("  worst calc_diff %.3g\n", worst);
            record(ok);
        }
}

/* The bytes of an expert image that a load writes (not the alignment padding). */
static int image_bytes_differ(const mj_moe_weight_layout *l, int bits, const uint8_t *a,
                              const uint8_t *b, size_t *first) {
    const size_t data = (size_t)(l->w1.bytes + l->w2.bytes);
    for (size_t i = 0; i < data; i++)
        if (a[i] != b[i]) return *first = i, 1;
    if (bits != 4) return 0;
    const size_t rs = (size_t)l->row_scale_offset,
                 n = (size_t)(l->w1.rows + l->w2.rows) * 4; /* fp32 [2I + H] */
    for (size_t i = rs; i < rs + n; i++)
        if (a[i] != b[i]) return *first = i, 1;
    return 0;
}

/* A host load once let the image kernel read its staging copy before the
 * upload had landed (a pageable cuMemcpyHtoD returns early, and the legacy
 * stream it used orders nothing against the loader's stream): the last rows of
 * a projection were then old bytes (bench/RESULTS.md, seventh session). The
 * device path waits for the context first, so the two must agree. */
void test_weight_images(ctx *c) {
    const shape *sh = &c->sh;
    static const scenario sc = {1, SWIGLU, 0, {1}, ROUTE_RANDOM, -1, 0, 0};
    for (int i = 0; i < mj_moe_format_count(); i++) {
        const mj_moe_format_row *row = mj_moe_format_at(i);
        set_case("weight images %s H=%d I=%d E=%d: loaded from host = loaded from device",
                 row->name, sh->H, sh->I, sh->E);
        if (out_of_time()) continue;
        model *m = model_get(c, i, 0);
        const size_t E = (size_t)sh->E;
        const int bits = mj_format_bits(row->weight_fmt);
        mj_moe_config mc = moe_cfg(sh, row, &sc, 0);
        mj_weights *w[2] = {NULL, NULL};
        CUdeviceptr d[4] = {0, 0, 0, 0};
        const uint8_t *h[4] = {m->w1, m->w1_sf, m->w2, m->w2_sf};
        const size_t n[4] = {E * m->w1b, E * m->w1sfb, E * m->w2b, E * m->w2sfb};
        int ok = expect_ok(mj_weights_create(c->rt, &mc, &w[0]), "mj_weights_create") &&
                 expect_ok(mj_weights_create(c->rt, &mc, &w[1]), "mj_weights_create");
        for (int j = 0; j < 4 && ok; j++)
            if (n[j]) {
                CU(cuMemAlloc(&d[j], n[j]));
                CU(cuMemcpyHtoD(d[j], h[j], n[j]));
            }
        CU(cuCtxSynchronize());
        for (size_t e = 0; e < E && ok; e++)
            for (int p = 0; p < MJ_MOE_NUM_PROJECTIONS && ok; p++) {
                /* gate and up are the two halves of W1's [2I][H] rows */
                const int down = p == MJ_PROJ_DOWN;
                const size_t db = down ? m->w2b : m->w1b / 2, sb = down ? m->w2sfb : m->w1sfb / 2;
                const size_t doff = e * (down ? m->w2b : m->w1b) + (p == MJ_PROJ_UP ? db : 0);
                const size_t soff = e * (down ? m->w2sfb : m->w1sfb) + (p == MJ_PROJ_UP ? sb : 0);
                const int dj = down ? 2 : 0;
                ok = expect_ok(mj_weights_load(w[0], (int)e, (mj_projection)p, h[dj] + doff,
                                               sb ? h[dj + 1] + soff : NULL, 0),
                               "mj_weights_load (host)") &&
                     expect_ok(mj_weights_load(
                                   w[1], (int)e, (mj_projection)p,
                                   (const void *)(uintptr_t)(d[dj] + doff),
                                   sb ? (const void *)(uintptr_t)(d[dj + 1] + soff) : NULL, 1),
                               "mj_weights_load (device)");
            }
        size_t differ = 0, first = 0;
        int first_e = -1;
        if (ok) {
            const mj_moe_weight_layout *l = &w[0]->layout;
            uint8_t *img[2] = {xmalloc(l->expert_bytes), xmalloc(l->expert_bytes)};
            for (size_t e = 0; e < E; e++) {
                for (int k = 0; k < 2; k++)
                    CU(cuMemcpyDtoH(img[k], w[k]->image + (CUdeviceptr)(e * l->expert_bytes),
                                    l->expert_bytes));
                size_t at;
                if (image_bytes_differ(l, bits, img[0], img[1], &at)) {
                    if (first_e < 0) first_e = (int)e, first = at;
                    differ++;
                }
            }
            free(img[0]);
            free(img[1]);
        }
        if (differ)
            printf("  %zu of %zu experts' images differ; first: expert %d, byte %zu\n", differ, E,
                   first_e, first);
        for (int j = 0; j < 4; j++)
            if (d[j]) CU(cuMemFree(d[j]));
        mj_weights_destroy(w[0]);
        mj_weights_destroy(w[1]);
        record(ok && differ == 0);
    }
}
