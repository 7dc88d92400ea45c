/* One case: models, inputs, the reference, the launch of every rank and the check. */
#include "tests/gpu/mega_moe/harness.h"

static float amax_of(const float *v, size_t n) {
    float m = 0.0f;
    for (size_t i = 0; i < n; i++)
        m = fabsf(v[i]) > m ? fabsf(v[i]) : m;
    return m > 0.0f ? m : 1.0f;
}

void quantize_scaled(int fmt, const float *w, int rows, int cols, float *tmp, uint8_t *data,
                     uint8_t *sf, float *alpha) {
    float s = fmt == MJ_FMT_NVFP4 ? 2688.0f / amax_of(w, (size_t)rows * (size_t)cols) : 1.0f;
    for (size_t i = 0; i < (size_t)rows * (size_t)cols; i++)
        tmp[i] = w[i] * s;
    if (mjr_quantize_weights(fmt, tmp, rows, cols, data, sf) != 0) {
        printf("FATAL mjr_quantize_weights(%d, %d x %d) refused\n", fmt, rows, cols);
        g_failed++;
        finish();
    }
    *alpha = 1.0f / s;
}

model *model_get(ctx *c, int row_index, int alphas) {
    model *m = &c->models[row_index][alphas ? 1 : 0];
    if (m->built) return m;
    const shape *sh = &c->sh;
    int fmt = mj_moe_format_at(row_index)->weight_fmt;
    int bits = mj_format_bits(fmt), group = mj_format_group(fmt);
    size_t H = (size_t)sh->H, I = (size_t)sh->I, E = (size_t)sh->E;
    m->w1b = 2 * I * H * (size_t)bits / 8;
    m->w1sfb = group ? 2 * I * (H / (size_t)group) : 0;
    m->w2b = H * I * (size_t)bits / 8;
    m->w2sfb = group ? H * (I / (size_t)group) : 0;
    m->w1 = xmalloc(E * m->w1b);
    m->w1_sf = xmalloc(E * m->w1sfb);
    m->w2 = xmalloc(E * m->w2b);
    m->w2_sf = xmalloc(E * m->w2sfb);
    m->ag = xmalloc(E * sizeof(float));
    m->au = xmalloc(E * sizeof(float));
    m->a2 = xmalloc(E * sizeof(float));
    m->as = xmalloc(E * sizeof(float));
    float *tmp = xmalloc(2 * I * H * sizeof(float));
    uint64_t saved = g_rng;
    g_rng =
        0x5EEDull + (uint64_t)row_index * 977 + (uint64_t)alphas; /* independent of case order */
    for (size_t e = 0; e < E; e++) {
        const float *w1 = c->master_w1 + e * 2 * I * H, *w2 = c->master_w2 + e * H * I;
        uint8_t *d1 = m->w1 + e * m->w1b, *s1 = m->w1_sf + e * m->w1sfb;
        /* gate and up get separate scales so a swapped alpha shows */
        quantize_scaled(fmt, w1, (int)I, (int)H, tmp, d1, s1, &m->ag[e]);
        quantize_scaled(fmt, w1 + I * H, (int)I, (int)H, tmp, d1 + m->w1b / 2, s1 + m->w1sfb / 2,
                        &m->au[e]);
        quantize_scaled(fmt, w2, (int)H, (int)I, tmp, m->w2 + e * m->w2b, m->w2_sf + e * m->w2sfb,
                        &m->a2[e]);
        m->as[e] = 1.0f;
        if (alphas) {
            m->ag[e] *= 0.5f + 1.5f * rnd_unit();
            m->au[e] *= 0.5f + 1.5f * rnd_unit();
            m->a2[e] *= 0.5f + 1.5f * rnd_unit();
            m->as[e] = 0.5f + 1.5f * rnd_unit();
        }
    }
    g_rng = saved;
    free(tmp);
    m->built = 1;
    return m;
}

shared_model *shared_get(ctx *c, int fmt, int mult) {
    if (fmt < 0 || fmt >= MJ_FMT_COUNT || fmt == MJ_FMT_NVFP4 || mult < 1 || mult > SHARED_MAX) {
        printf("FATAL shared_get(format %d, %d x I): no such shared expert (test bug)\n", fmt,
               mult);
        g_failed++;
        finish();
    }
    shared_model *m = &c->shared[fmt][mult];
    if (m->built) return m;
    const shape *sh = &c->sh;
    const int bits = mj_format_bits(fmt), group = mj_format_group(fmt);
    const size_t H = (size_t)sh->H, IS = (size_t)mult * (size_t)sh->I;
    m->fmt = fmt;
    m->inter = (int)IS;
    m->w1b = 2 * IS * H * (size_t)bits / 8;
    m->w1sfb = group ? 2 * IS * (H / (size_t)group) : 0;
    m->w2b = H * IS * (size_t)bits / 8;
    m->w2sfb = group ? H * (IS / (size_t)group) : 0;
    m->w1 = xmalloc(m->w1b);
    m->w1_sf = xmalloc(m->w1sfb);
    m->w2 = xmalloc(m->w2b);
    m->w2_sf = xmalloc(m->w2sfb);
    float *w1 = xmalloc(2 * IS * H * sizeof(float)), *w2 = xmalloc(H * IS * sizeof(float));
    uint64_t saved = g_rng;
    /* independent of case order, and of the routed experts' weights */
    g_rng = 0x5A4EDE0ull + (uint64_t)fmt * 131 + (uint64_t)mult;
    const float a1 = sqrtf(3.0f / (float)H), a2 = sqrtf(3.0f / (float)IS);
    for (size_t i = 0; i < 2 * IS * H; i++)
        w1[i] = rnd_sym() * a1;
    for (size_t i = 0; i < H * IS; i++)
        w2[i] = rnd_sym() * a2;
    g_rng = saved;
    /* Per-row scales: W1 at once is gate and up quantized apart. */
    if (mjr_quantize_weights(fmt, w1, 2 * (int)IS, (int)H, m->w1, m->w1_sf) != 0 ||
        mjr_quantize_weights(fmt, w2, (int)H, (int)IS, m->w2, m->w2_sf) != 0) {
        printf("FATAL mjr_quantize_weights refused the shared expert (format %d, I_s %zu)\n", fmt,
               IS);
        g_failed++;
        finish();
    }
    free(w1);
    free(w2);
    m->built = 1;
    return m;
}

void shared_free(shared_model *m) {
    free(m->w1);
    free(m->w1_sf);
    free(m->w2);
    free(m->w2_sf);
    memset(m, 0, sizeof *m);
}

void model_free(model *m) {
    free(m->w1);
    free(m->w1_sf);
    free(m->w2);
    free(m->w2_sf);
    free(m->ag);
    free(m->au);
    free(m->a2);
    free(m->as);
    memset(m, 0, sizeof *m);
}

int wait_streams(const CUstream *s, int n, double timeout_s, CUresult *fault) {
    double t0 = now_s();
    if (fault) *fault = CUDA_SUCCESS;
    for (;;) {
        int pending = 0;
        for (int i = 0; i < n; i++) {
            CUresult r = cuStreamQuery(s[i]);
            if (r == CUDA_ERROR_NOT_READY) {
                pending++;
            } else if (r != CUDA_SUCCESS) {
                if (fault) {
                    *fault = r;
                    return 1;
                }
                CU(r);
            }
        }
        if (!pending) return 1;
        if (now_s() - t0 > timeout_s) {
            printf("  %d of %d streams still busy after %.0f s:", pending, n, timeout_s);
            for (int i = 0; i < n; i++)
                if (cuStreamQuery(s[i]) == CUDA_ERROR_NOT_READY) printf(" rank %d", i);
            printf("\n");
            return 0;
        }
        struct timespec ts = {0, 50000};
        nanosleep(&ts, NULL);
    }
}

void wait_or_die(ctx *c, const CUstream *s, int n) {
    if (wait_streams(s, n, c->wait_timeout_s, NULL)) return;
    printf("FATAL [%s]: hang (ranks waiting for each other in-kernel?). The context cannot be "
           "recovered; stopping.\n",
           g_case);
    g_failed++;
    finish();
}

static void gen_rank_inputs(ctx *c, run *u, int r) {
    const shape *sh = &c->sh;
    int T = u->sc.tokens[r], H = sh->H, K = sh->K, E = sh->E;
    for (int t = 0; t < T; t++) {
        /* 1..16: large enough that the clamp at 7 bites on some tokens */
        float amp = (float)(1u << rnd_below(5));
        for (int i = 0; i < H; i++)
            c->x[r][(size_t)t * H + i] = mjr_bf16_from_f32(rnd_sym() * amp);
        int32_t *id = c->ids[r] + (size_t)t * K;
        float *w = c->tw[r] + (size_t)t * K;
        for (int k = 0; k < K; k++) {
            int32_t v = -1;
            if (r == u->sc.masked_rank) {
                v = -1;
            } else if (u->route == ROUTE_ONE_ONLY) {
                v = k == 0 ? u->hot : -1;
            } else if (u->route == ROUTE_ONE && k == 0) {
                v = u->hot;
            } else if (u->route == ROUTE_DUP && k == 1 && t % 2 == 0 && id[0] >= 0) {
                v = id[0];
            } else if (u->route == ROUTE_RANDOM && rnd_below(10) == 0) {
                v = -1;
            } else {
                int dup;
                do {
                    v = u->route == ROUTE_SKEW  ? 2 * (int32_t)rnd_below((uint32_t)E / 2)
                        : u->route == ROUTE_ONE ? (int32_t)rnd_below((uint32_t)E - 1)
                                                : (int32_t)rnd_below((uint32_t)E);
                    dup = 0;
                    for (int j = 0; j < k; j++)
                        dup |= id[j] == v;
                } while (dup);
            }
            id[k] = v;
            /* a masked slot's weight must never leak into y */
            w[k] = v < 0 ? 100.0f * rnd_sym() : 0.05f + 0.95f * rnd_unit();
        }
    }
    for (int i = 0; i < T * K; i++)
        c->tw_gpu[r][i] = u->ctl == CTL_NO_ROUTING_WEIGHT ? 1.0f : c->tw[r][i];
}

void run_teardown(run *u) {
    for (int r = 0; r < MAX_R; r++)
        if (u->w[r]) mj_weights_destroy(u->w[r]);
    if (u->buf) mj_symm_buffer_destroy(u->buf);
    memset(u->w, 0, sizeof u->w);
    u->buf = NULL;
}

/* The gate and up projections' data (g, up) and scales (gs, us) exchanged:
 * the gate/up negative controls. */
static void swap_gate_up(const uint8_t **g, const uint8_t **up, const uint8_t **gs,
                         const uint8_t **us) {
    const uint8_t *t = *g;
    *g = *up;
    *up = t;
    t = *gs;
    *gs = *us;
    *us = t;
}

/* The wrong-scale controls: +1 on the gate scale bytes of the expert every
 * token uses, in the model the GPU loads from; the caller restores `saved`
 * before the reference runs. Returns how many bytes were changed. */
static int bump_scales(run *u, const shape *sh, uint8_t *saved) {
    int group = mj_format_group(u->row->weight_fmt);
    if (!group) return 0;
    uint8_t *gate_sf = u->m->w1_sf + (size_t)u->hot * u->m->w1sfb;
    memcpy(saved, gate_sf, u->m->w1sfb / 2);
    size_t n = (size_t)sh->I * (size_t)(sh->H / group);
    int changed = 0;
    for (size_t i = 0; i < n; i++) {
        /* 0x7e is E4M3's 448: +1 would be NaN, which the loader rightly refuses */
        if (u->row->weight_fmt == MJ_FMT_NVFP4 && gate_sf[i] >= 0x7e) continue;
        if (u->row->weight_fmt != MJ_FMT_NVFP4 && gate_sf[i] >= 246) continue;
        gate_sf[i]++;
        changed++;
    }
    return changed;
}

static int load_weights(const ctx *c, run *u, int r) {
    model *m = u->m;
    int group = mj_format_group(u->row->weight_fmt);
    for (int le = 0; le < u->local; le++) {
        size_t e = (size_t)r * (size_t)u->local + (size_t)le;
        const uint8_t *g = m->w1 + e * m->w1b, *up = g + m->w1b / 2;
        const uint8_t *gs = m->w1_sf + e * m->w1sfb, *us = gs + m->w1sfb / 2;
        if (u->ctl == CTL_SWAP_GATE_UP) swap_gate_up(&g, &up, &gs, &us);
        char what[96];
        snprintf(what, sizeof what, "mj_weights_load(rank %d, expert %d)", r, le);
        if (!expect_ok(mj_weights_load(u->w[r], le, MJ_PROJ_GATE, g, group ? gs : NULL, 0), what) ||
            !expect_ok(mj_weights_load(u->w[r], le, MJ_PROJ_UP, up, group ? us : NULL, 0), what) ||
            !expect_ok(mj_weights_load(u->w[r], le, MJ_PROJ_DOWN, m->w2 + e * m->w2b,
                                       group ? m->w2_sf + e * m->w2sfb : NULL, 0),
                       what))
            return 0;
        float a2 = u->ctl == CTL_ALPHA ? 2.0f * m->a2[e] : m->a2[e];
        if (!expect_ok(mj_weights_set_alphas(u->w[r], le, m->ag[e], m->au[e], a2, m->as[e]),
                       "mj_weights_set_alphas"))
            return 0;
        if (!u->sc.biases) continue;
        const int I = c->sh.I, H = c->sh.H;
        const float *b1 = c->bias1 + e * 2 * (size_t)I;
        if (!expect_ok(mj_weights_load_bias(u->w[r], le, MJ_PROJ_GATE, b1, 0),
                       "mj_weights_load_bias(gate)") ||
            !expect_ok(mj_weights_load_bias(u->w[r], le, MJ_PROJ_UP, b1 + I, 0),
                       "mj_weights_load_bias(up)") ||
            !expect_ok(mj_weights_load_bias(u->w[r], le, MJ_PROJ_DOWN, c->bias2 + e * (size_t)H, 0),
                       "mj_weights_load_bias(down)"))
            return 0;
    }
    return 1;
}

/* The shared expert's three projections for rank r (CTL_SHARED_SWAP: gate
 * and up exchanged, data and scales). */
static int load_shared(run *u, int r) {
    const shared_model *sm = u->sm;
    const int scaled = sm->w1sfb != 0;
    const uint8_t *g = sm->w1, *up = sm->w1 + sm->w1b / 2;
    const uint8_t *gs = sm->w1_sf, *us = sm->w1_sf + sm->w1sfb / 2;
    if (u->ctl == CTL_SHARED_SWAP) swap_gate_up(&g, &up, &gs, &us);
    char what[96];
    snprintf(what, sizeof what, "mj_weights_load_shared(rank %d)", r);
    return expect_ok(mj_weights_load_shared(u->w[r], MJ_PROJ_GATE, g, scaled ? gs : NULL, 0),
                     what) &&
           expect_ok(mj_weights_load_shared(u->w[r], MJ_PROJ_UP, up, scaled ? us : NULL, 0),
                     what) &&
           expect_ok(
               mj_weights_load_shared(u->w[r], MJ_PROJ_DOWN, sm->w2, scaled ? sm->w2_sf : NULL, 0),
               what);
}

int run_setup(ctx *c, run *u, int row_index, const scenario *sc, int ctl) {
    const shape *sh = &c->sh;
    memset(u, 0, sizeof *u);
    u->row_index = row_index;
    u->row = mj_moe_format_at(row_index);
    u->sc = *sc;
    u->ctl = ctl;
    u->route = route_of(sc, row_index);
    if (ctl == CTL_SCALE_EXPERT) u->route = ROUTE_ONE_ONLY;
    int R = sc->ranks;
    u->local = sh->E / R;
    u->hot = sh->E - 1;
    u->m = model_get(c, row_index, sc->alphas);
    u->sm = sc->shared ? shared_get(c, shared_format_of(sc, u->row), sc->shared) : NULL;

    int local_ranks = g_real_rank < 0 ? R : 1;
    if (!expect_ok(
            mj_family_set_num_sms(c->rt, MJ_FAMILY_MEGA_MOE, sms_for(c->device_sms, local_ranks)),
            "mj_family_set_num_sms(mega_moe)"))
        return 0;
    const mj_moe_config layer = moe_cfg(sh, u->row, sc, 0);
    const mj_symm_config cfg = mj_symm_config_of_moe(&layer);
    if (!expect_ok(g_comm ? mj_symm_buffer_create_nccl(c->rt, &cfg, g_comm, &u->buf)
                          : mj_symm_buffer_create(c->rt, &cfg, &u->buf),
                   "mj_symm_buffer_create"))
        return 0;
    uint8_t *saved = xmalloc(u->m->w1sfb);
    int bumped = ctl == CTL_SCALE_EXPERT ? bump_scales(u, sh, saved) : 0;
    int ok = 1;
    for (int r = 0; r < R && ok; r++) {
        if (!mine(r)) continue;
        mj_moe_config mc = moe_cfg(sh, u->row, sc, r);
        if (ctl == CTL_ACT_PARAM) mc.swiglu_alpha = -1.0f; /* precompile.c plans it */
        ok = expect_ok(mj_weights_create(c->rt, &mc, &u->w[r]), "mj_weights_create") &&
             load_weights(c, u, r) && (!u->sm || load_shared(u, r));
    }
    if (bumped) {
        memcpy(u->m->w1_sf + (size_t)u->hot * u->m->w1sfb, saved, u->m->w1sfb / 2);
        printf("  %d scale bytes of expert %d's gate bumped on the GPU only\n", bumped, u->hot);
    }
    free(saved);
    if (!ok) return 0;

    for (int r = 0; r < R; r++) {
        int T = sc->tokens[r];
        gen_rank_inputs(c, u, r);
        if (T && mine(r)) {
            CU(cuMemcpyHtoD(c->d_x[r], c->x[r], (size_t)T * sh->H * 2));
            CU(cuMemcpyHtoD(c->d_ids[r], c->ids[r], (size_t)T * sh->K * 4));
            CU(cuMemcpyHtoD(c->d_tw[r], c->tw_gpu[r], (size_t)T * sh->K * 4));
        }
    }
    CU(cuCtxSynchronize());
    for (int r = 0; r < R; r++) {
        if (!mine(r)) continue;
        char what[64];
        snprintf(what, sizeof what, "mj_pre_dispatch(rank %d)", r);
        if (!expect_ok(mj_pre_dispatch(c->rt, u->buf, r, (const void *)(uintptr_t)c->d_x[r],
                                       (const int32_t *)(uintptr_t)c->d_ids[r],
                                       (const float *)(uintptr_t)c->d_tw[r], NULL, sc->tokens[r],
                                       c->s[r]),
                       what))
            return 0;
    }
    wait_or_die(c, c->s, R);

    /* The reference reads the same quantized inputs from host images of the
     * pre-dispatch (bit-identical to the GPU's, test_pre_dispatch checks that). */
    double t0 = now_s();
    int dfmt = u->row->dispatch_fmt;
    mj_input_layout l = mj_layout_input(sh->H, sh->K, sh->TMAX, dfmt);
    mjr_rank_input in[MAX_R];
    uint16_t *y[MAX_R];
    for (int r = 0; r < R; r++) {
        memset(c->img[r], 0, c->img_bytes);
        mjr_pre_dispatch(dfmt, sh->H, sh->K, sh->TMAX, c->x[r], c->ids[r], c->tw[r], NULL,
                         sc->tokens[r], c->img[r]);
        in[r] = (mjr_rank_input){
            sc->tokens[r],
            c->img[r] + l.x_offset,
            mj_format_group(dfmt) ? c->img[r] + l.sf_offset : NULL,
            dfmt == MJ_FMT_NVFP4 ? (const float *)(c->img[r] + l.x_scales_offset) : NULL,
            (const int32_t *)(c->img[r] + l.topk_idx_offset),
            (const float *)(c->img[r] + l.topk_w_offset),
        };
        y[r] = c->y_ref[r];
    }
    mjr_expert_weights *ew = xmalloc((size_t)(sh->E + 1) * sizeof *ew);
    for (int e = 0; e < sh->E; e++) {
        model *m = u->m;
        int g = m->w1sfb != 0;
        ew[e] = (mjr_expert_weights){
            m->w1 + (size_t)e * m->w1b,
            g ? m->w1_sf + (size_t)e * m->w1sfb : NULL,
            m->w2 + (size_t)e * m->w2b,
            g ? m->w2_sf + (size_t)e * m->w2sfb : NULL,
            m->ag[e],
            m->au[e],
            m->a2[e],
            m->as[e],
            sc->biases ? c->bias1 + (size_t)e * 2 * (size_t)sh->I : NULL,
            sc->biases ? c->bias2 + (size_t)e * (size_t)sh->H : NULL,
        };
    }
    mjr_moe_shape s = {sh->H,
                       sh->I,
                       sh->E,
                       sh->K,
                       R,
                       sh->TMAX,
                       u->row->weight_fmt,
                       dfmt,
                       u->row->l2_input_fmt,
                       sc->act,
                       sc->clamp > 0,
                       sc->clamp,
                       {sc->act_params[0], sc->act_params[1]},
                       u->ctl == CTL_BIAS_UNWEIGHTED};
    /* The shared expert is experts[E]: alphas 1, no biases. */
    uint8_t *bumped_sf = NULL;
    if (u->sm && ctl != CTL_SHARED_DROPPED) {
        const shared_model *sm = u->sm;
        const uint8_t *w1_sf = sm->w1sfb ? sm->w1_sf : NULL;
        if (ctl == CTL_SHARED_SCALE && sm->w1sfb) {
            /* Every scale byte of the gate doubles its weights in the
             * reference only: one byte or one row moves y by too little
             * against the 1e-3 bar to be a reliable control. */
            bumped_sf = xmalloc(sm->w1sfb);
            memcpy(bumped_sf, sm->w1_sf, sm->w1sfb);
            int changed = 0;
            for (size_t i = 0; i < sm->w1sfb / 2; i++)
                if (bumped_sf[i] < 254) bumped_sf[i]++, changed++;
            printf("  %d scale bytes of the shared expert's gate bumped in the reference only\n",
                   changed);
            w1_sf = bumped_sf;
        }
        ew[sh->E] = (mjr_expert_weights){.w1 = sm->w1,
                                         .w1_sf = w1_sf,
                                         .w2 = sm->w2,
                                         .w2_sf = sm->w2sfb ? sm->w2_sf : NULL,
                                         .l1_alpha_gate = 1.0f,
                                         .l1_alpha_up = 1.0f,
                                         .l2_alpha = 1.0f,
                                         .l2_act_scale = 1.0f};
        s.shared_inter = sm->inter;
        s.shared_fmt = sm->fmt;
    }
    int rc = mjr_moe_forward(&s, ew, in, y, c->stats_ref);
    free(bumped_sf);
    free(ew);
    c->ref_s += now_s() - t0;
    if (rc != 0) {
        printf("  mjr_moe_forward -> %d (test bug: reference refused the case)\n", rc);
        return 0;
    }
    return 1;
}

void poison_outputs(ctx *c, const run *u) {
    for (int r = 0; r < u->sc.ranks; r++) {
        if (!mine(r)) continue;
        CU(cuMemsetD16(c->d_y[r], (unsigned short)MJ_BENCH_POISON,
                       (size_t)(c->sh.TMAX + Y_SLACK) * c->sh.H));
        CU(cuMemsetD32(c->d_stats[r], 0, (size_t)u->local));
    }
    CU(cuCtxSynchronize());
}

int run_launch(ctx *c, run *u, const CUstream *streams) {
    for (int r = 0; r < u->sc.ranks; r++) {
        if (!mine(r)) continue;
        mj_status st = mj_mega_moe_warmup(c->rt, u->buf, u->w[r], u->sc.tokens[r]);
        if (st != MJ_OK) {
            printf("  warm-up of rank %d -> %s: %s\n", r, mj_status_name(st), mj_last_error());
            return 0;
        }
    }
    /* Real ranks: every peer's inputs are pre-dispatched and its kernel is
     * loaded before any rank's kernel starts waiting for the others. */
    if (g_comm && !expect_ok(mj_launcher_barrier(g_comm, u->sc.ranks), "barrier before launch"))
        return 0;
    for (int r = 0; r < u->sc.ranks; r++) {
        if (!mine(r)) continue;
        int T = u->sc.tokens[r];
        void *y = (void *)(uintptr_t)c->d_y[r];
        int32_t *st_ptr = (int32_t *)(uintptr_t)c->d_stats[r];
        mj_status st;
        if (u->ctl == CTL_PEERS || u->ctl == CTL_PREPARE) {
            mj_kernel *k = NULL;
            mj_launch_config lc;
            mj_moe_args args;
            st = mj_mega_moe_prepare(c->rt, u->buf, u->w[r], y, T, st_ptr, streams[r], &k, &lc,
                                     &args);
            if (st == MJ_OK && u->ctl == CTL_PEERS) {
                /* Every peer offset collapses onto the own region, on every
                 * rank: each rank still gets R barrier signals (all its own),
                 * so nothing hangs, but tokens never reach remote experts.
                 * Swapping two peers on every rank is no control: the kernel
                 * sees a consistent relabeling (bench/RESULTS.md, first session). */
                for (int p = 0; p < u->sc.ranks; p++)
                    args.peers.offsets[p] = 0;
            }
            if (st == MJ_OK) {
                void *params[] = {&args};
                st = mj_jit_launch(c->rt, k, &lc, streams[r], params);
            }
        } else {
            st = mj_mega_moe(c->rt, u->buf, u->w[r], y, T, st_ptr, streams[r]);
        }
        if (st != MJ_OK) {
            printf("  launch of rank %d -> %s: %s\n", r, mj_status_name(st), mj_last_error());
            if (r > 0 || g_comm) {
                printf("FATAL [%s]: other ranks are in flight and will wait for rank %d forever\n",
                       g_case, r);
                g_failed++;
                finish();
            }
            return 0;
        }
    }
    return 1;
}

static float bf(uint16_t b) {
    return mjr_f32_from_bf16(b);
}

/* Prints the worst token rows of one rank (calc_diff per row) and their ids. */
static void explain_rows(ctx *c, int r, int T) {
    const shape *sh = &c->sh;
    int worst[3] = {-1, -1, -1};
    double wd[3] = {-1, -1, -1};
    for (int t = 0; t < T; t++) {
        double d = mjr_calc_diff(c->y_ref[r] + (size_t)t * sh->H, c->y_got[r] + (size_t)t * sh->H,
                                 (size_t)sh->H);
        if (isnan(d)) d = 1e9;
        for (int j = 0; j < 3; j++)
            if (d > wd[j]) {
                for (int q = 2; q > j; q--) {
                    wd[q] = wd[q - 1];
                    worst[q] = worst[q - 1];
                }
                wd[j] = d;
                worst[j] = t;
                break;
            }
    }
    for (int j = 0; j < 3 && worst[j] >= 0; j++) {
        int t = worst[j];
        printf("    token %d: calc_diff %.3g, ids [", t, wd[j]);
        for (int k = 0; k < sh->K; k++)
            printf("%s%d", k ? " " : "", c->ids[r][(size_t)t * sh->K + k]);
        printf("] weights [");
        for (int k = 0; k < sh->K; k++)
            printf("%s%.3g", k ? " " : "", (double)c->tw[r][(size_t)t * sh->K + k]);
        printf("]\n");
    }
}

int run_check(ctx *c, const run *u, int stats_mult, int verbose, double *worst_out) {
    const shape *sh = &c->sh;
    const int is_bf16 = u->row->weight_fmt == MJ_FMT_BF16 && u->row->dispatch_fmt == MJ_FMT_BF16;
    const double tol = mj_bench_check_bar(u->row->weight_fmt, u->row->dispatch_fmt);
    double worst = 0;
    int ok_all = 1;
    size_t cap = (size_t)(sh->TMAX + Y_SLACK) * (size_t)sh->H;
    for (int r = 0; r < u->sc.ranks; r++) {
        if (!mine(r)) continue;
        int T = u->sc.tokens[r];
        size_t n = (size_t)T * (size_t)sh->H;
        CU(cuMemcpyDtoH(c->y_got[r], c->d_y[r], cap * 2));
        CU(cuMemcpyDtoH(c->stats_got + (size_t)r * u->local, c->d_stats[r], (size_t)u->local * 4));
        size_t poison, nonfinite, past, differ = 0, first = (size_t)-1;
        mj_bench_scan_output(c->y_got[r], n, cap, &poison, &nonfinite, &past);
        for (size_t i = 0; i < n; i++)
            if (c->y_got[r][i] != c->y_ref[r][i]) {
                differ++;
                if (first == (size_t)-1) first = i;
            }
        double d = mjr_calc_diff(c->y_ref[r], c->y_got[r], n);
        if (isnan(d) || d > worst) worst = isnan(d) ? INFINITY : d;
        int stats_ok = 1, first_stat = -1;
        for (int le = 0; le < u->local; le++) {
            long long want = (long long)stats_mult * c->stats_ref[r * u->local + le];
            if (c->stats_got[r * u->local + le] != want) {
                stats_ok = 0;
                if (first_stat < 0) first_stat = le;
            }
        }
        int ok = d < tol && !poison && !nonfinite && !past && stats_ok;
        ok_all &= ok;
        if (!verbose) continue;
        if (ok && !is_bf16) continue;
        printf("  rank %d: T=%d calc_diff=%.3g (bar %.0e), %zu of %zu elements differ bitwise", r,
               T, d, tol, differ, n);
        if (poison) printf(", %zu unwritten (poison)", poison);
        if (nonfinite) printf(", %zu non-finite", nonfinite);
        if (past) printf(", %zu written past num_tokens", past);
        printf("\n");
        if (!ok && first != (size_t)-1) {
            size_t t = first / (size_t)sh->H, h = first % (size_t)sh->H;
            printf(
                "    first differing element y[%zu][%zu]: expected 0x%04x (%g) got 0x%04x (%g)\n",
                t, h, c->y_ref[r][first], (double)bf(c->y_ref[r][first]), c->y_got[r][first],
                (double)bf(c->y_got[r][first]));
        }
        if (!ok && d >= tol) explain_rows(c, r, T);
        if (!stats_ok)
            printf("    recv_stats[%d] (global expert %d) = %d, want %lld (x%d); all got/want:",
                   first_stat, r * u->local + first_stat, c->stats_got[r * u->local + first_stat],
                   (long long)stats_mult * c->stats_ref[r * u->local + first_stat], stats_mult);
        if (!stats_ok) {
            for (int le = 0; le < u->local; le++)
                printf(" %d/%lld", c->stats_got[r * u->local + le],
                       (long long)stats_mult * c->stats_ref[r * u->local + le]);
            printf("\n");
        }
    }
    if (worst_out) *worst_out = worst;
    return ok_all;
}

void describe(const run *u, char *out, size_t cap) {
    int n = snprintf(out, cap, "%s R=%d %s%s", u->row->name, u->sc.ranks,
                     mj_moe_activation_name(u->sc.act), u->sc.clamp > 0 ? "+clamp7" : "");
    if (n > 0 && (size_t)n < cap && (u->sc.act_params[0] != 0 || u->sc.act_params[1] != 0))
        n += snprintf(out + n, cap - (size_t)n, "(%g,%g)", (double)u->sc.act_params[0],
                      (double)u->sc.act_params[1]);
    if (n > 0 && (size_t)n < cap) n += snprintf(out + n, cap - (size_t)n, " T=[");
    for (int r = 0; r < u->sc.ranks && n > 0 && (size_t)n < cap; r++)
        n += snprintf(out + n, cap - (size_t)n, "%s%d", r ? "," : "", u->sc.tokens[r]);
    if (n > 0 && (size_t)n < cap)
        n += snprintf(out + n, cap - (size_t)n, "] route=%s%s%s%s bm=%s", route_names[u->route],
                      u->sc.masked_rank >= 0 ? " masked-rank" : "", u->sc.alphas ? " alphas" : "",
                      u->sc.biases ? " biases" : "", u->sc.block_m ? "forced" : "auto");
    if (n > 0 && (size_t)n < cap && u->sc.shared)
        snprintf(out + n, cap - (size_t)n, " shared=%dI(%s)", u->sc.shared,
                 mj_format_name((mj_format)shared_format_of(&u->sc, u->row)));
}

/* Whether rank r's output of this launch repeats `first` (the first launch's,
 * copied there when it is NULL). */
static int same_as_first(ctx *c, const run *u, int r, int n, uint16_t **first) {
    const size_t count = (size_t)u->sc.tokens[r] * (size_t)c->sh.H;
    if (!*first) {
        *first = xmalloc(count ? count * 2 : 1);
        memcpy(*first, c->y_got[r], count * 2);
        return 1;
    }
    size_t differ = 0;
    for (size_t i = 0; i < count; i++)
        differ += (*first)[i] != c->y_got[r][i];
    if (differ)
        printf("  relaunch %d, rank %d: %zu elements differ from the first launch\n", n, r, differ);
    return differ == 0;
}

int run_case_relaunched(ctx *c, int row_index, const scenario *sc, int ctl, int verbose,
                        int relaunches, double *worst) {
    run u;
    int launched = 0, ok_all = 1;
    uint16_t *first[MAX_R] = {0};
    if (run_setup(c, &u, row_index, sc, ctl)) {
        for (int n = 0; n <= relaunches && ok_all; n++) {
            poison_outputs(c, &u);
            if (!run_launch(c, &u, c->s)) {
                ok_all = 0;
                break;
            }
            launched++;
            wait_or_die(c, c->s, sc->ranks);
            double w = 0;
            int ok = run_check(c, &u, 1, verbose && n == 0, &w);
            if (worst && w > *worst) *worst = w;
            for (int r = 0; r < sc->ranks; r++) {
                if (!mine(r)) continue;
                if (mj_mega_moe_check_errors(c->rt, u.buf, r, c->s[r]) != MJ_OK) {
                    printf("  device error: %s\n", mj_last_error());
                    if (ctl == CTL_NONE || ctl == CTL_PREPARE) ok = 0;
                }
                ok &= same_as_first(c, &u, r, n, &first[r]);
            }
            ok_all &= ok;
        }
    }
    for (int r = 0; r < MAX_R; r++)
        free(first[r]);
    run_teardown(&u);
    return !launched ? CASE_BROKEN : ok_all ? CASE_PASSED : CASE_FAILED;
}

int run_case(ctx *c, int row_index, const scenario *sc, int ctl, int verbose, double *worst) {
    if (worst) *worst = 0;
    return run_case_relaunched(c, row_index, sc, ctl, verbose, 0, worst);
}
