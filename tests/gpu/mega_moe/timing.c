/* The decode timing table (bench/RESULTS.md). */
#include "tests/gpu/mega_moe/harness.h"

/* ------------------------------------------------------------- timing */

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

void test_timing(ctx *c) {
    const shape *sh = &kTiming;
    const int iters = 50, T = sh->TMAX, TILE = 64;
    const size_t H = (size_t)sh->H, I = (size_t)sh->I;
    CUdeviceptr d_x, d_ids, d_tw, d_y, d_w1, d_w1sf, d_w2, d_w2sf;
    CU(cuMemAlloc(&d_x, (size_t)T * H * 2));
    CU(cuMemAlloc(&d_ids, (size_t)T * sh->K * 4));
    CU(cuMemAlloc(&d_tw, (size_t)T * sh->K * 4));
    CU(cuMemAlloc(&d_y, (size_t)T * H * 2));
    CU(cuMemAlloc(&d_w1, 2 * I * H * 2));
    CU(cuMemAlloc(&d_w1sf, 2 * I * (H / 16)));
    CU(cuMemAlloc(&d_w2, H * I * 2));
    CU(cuMemAlloc(&d_w2sf, H * (I / 16)));
    uint16_t *x = xmalloc((size_t)T * H * 2), *y = xmalloc((size_t)T * H * 2);
    int32_t *ids = xmalloc((size_t)T * sh->K * 4);
    float *tw = xmalloc((size_t)T * sh->K * 4);
    for (size_t i = 0; i < (size_t)T * H; i++)
        x[i] = mjr_bf16_from_f32(rnd_sym());
    int hit[64] = {0}, experts_hit = 0;
    for (int t = 0; t < T; t++)
        for (int k = 0; k < sh->K; k++) {
            int v, dup;
            do {
                v = (int)rnd_below((uint32_t)sh->E);
                dup = 0;
                for (int j = 0; j < k; j++)
                    dup |= ids[t * sh->K + j] == v;
            } while (dup);
            ids[t * sh->K + k] = v;
            tw[t * sh->K + k] = 0.05f + 0.95f * rnd_unit();
            if (!hit[v]++) experts_hit++;
        }
    CU(cuMemcpyHtoD(d_x, x, (size_t)T * H * 2));
    CU(cuMemcpyHtoD(d_ids, ids, (size_t)T * sh->K * 4));
    CU(cuMemcpyHtoD(d_tw, tw, (size_t)T * sh->K * 4));
    /* Rows of one quantized 64-row tile repeat through each projection: the
     * values do not change the time, and quantizing 32 full experts on the host
     * would take longer than the whole GPU run. */
    float *tile = xmalloc((size_t)TILE * H * sizeof(float)), *tmp = xmalloc((size_t)TILE * H * 4);
    for (size_t i = 0; i < (size_t)TILE * H; i++)
        tile[i] = rnd_sym() * 0.03f;
    uint8_t *hw1 = xmalloc(2 * I * H * 2), *hw1sf = xmalloc(2 * I * (H / 16));
    uint8_t *hw2 = xmalloc(H * I * 2), *hw2sf = xmalloc(H * (I / 16));

    printf("\nMegaMoE decode timing: R=1, H=%d, I=%d, E=%d, K=%d, T=%d tokens, %d SMs, swiglu\n",
           sh->H, sh->I, sh->E, sh->K, T, c->device_sms);
    printf("| row | tokens | block_m | us (median of %d) | us (min) | experts hit | weight bytes "
           "| GB/s | HBM floor us (4.3 TB/s) |\n",
           iters);
    printf("|---|---|---|---|---|---|---|---|---|\n");
    CUevent ev0[50], ev1[50];
    for (int i = 0; i < iters; i++) {
        CU(cuEventCreate(&ev0[i], CU_EVENT_DEFAULT));
        CU(cuEventCreate(&ev1[i], CU_EVENT_DEFAULT));
    }
    if (!expect_ok(mj_family_set_num_sms(c->rt, MJ_FAMILY_MEGA_MOE, c->device_sms),
                   "mj_family_set_num_sms")) {
        record(0);
        return;
    }
    for (int ri = 0; ri < mj_moe_format_count(); ri++) {
        const mj_moe_format_row *row = mj_moe_format_at(ri);
        scenario sc = {1, SWIGLU, 0, {T}, ROUTE_RANDOM, -1, 0, 0};
        set_case("timing %s", row->name);
        int fmt = row->weight_fmt, bits = mj_format_bits(fmt), group = mj_format_group(fmt);
        size_t rb1 = H * (size_t)bits / 8, rb2 = I * (size_t)bits / 8;
        size_t sb1 = group ? H / (size_t)group : 0, sb2 = group ? I / (size_t)group : 0;
        float a1, a2;
        quantize_scaled(fmt, tile, TILE, (int)H, tmp, hw1, hw1sf, &a1);
        for (size_t r = TILE; r < 2 * I; r++) {
            memcpy(hw1 + r * rb1, hw1 + (r % TILE) * rb1, rb1);
            if (group) memcpy(hw1sf + r * sb1, hw1sf + (r % TILE) * sb1, sb1);
        }
        quantize_scaled(fmt, tile, TILE, (int)I, tmp, hw2, hw2sf, &a2);
        for (size_t r = TILE; r < H; r++) {
            memcpy(hw2 + r * rb2, hw2 + (r % TILE) * rb2, rb2);
            if (group) memcpy(hw2sf + r * sb2, hw2sf + (r % TILE) * sb2, sb2);
        }
        CU(cuMemcpyHtoD(d_w1, hw1, 2 * I * rb1));
        CU(cuMemcpyHtoD(d_w2, hw2, H * rb2));
        if (group) {
            CU(cuMemcpyHtoD(d_w1sf, hw1sf, 2 * I * sb1));
            CU(cuMemcpyHtoD(d_w2sf, hw2sf, H * sb2));
        }
        mj_symm_config cfg = {sizeof cfg, sh->H, sh->E, sh->K, T, (mj_format)row->dispatch_fmt,
                              1,          sh->I};
        mj_moe_config mc = moe_cfg(sh, row, &sc, 0);
        mj_symm_buffer *buf = NULL;
        mj_weights *w = NULL;
        int ok = expect_ok(mj_symm_buffer_create(c->rt, &cfg, &buf), "mj_symm_buffer_create") &&
                 expect_ok(mj_weights_create(c->rt, &mc, &w), "mj_weights_create");
        for (int e = 0; ok && e < sh->E; e++) {
            const void *s1 = group ? (const void *)(uintptr_t)d_w1sf : NULL;
            const void *s1u = group ? (const void *)(uintptr_t)(d_w1sf + I * sb1) : NULL;
            const void *s2 = group ? (const void *)(uintptr_t)d_w2sf : NULL;
            ok =
                expect_ok(mj_weights_load(w, e, MJ_PROJ_GATE, (const void *)(uintptr_t)d_w1, s1, 1),
                          "load gate") &&
                expect_ok(mj_weights_load(w, e, MJ_PROJ_UP,
                                          (const void *)(uintptr_t)(d_w1 + I * rb1), s1u, 1),
                          "load up") &&
                expect_ok(mj_weights_load(w, e, MJ_PROJ_DOWN, (const void *)(uintptr_t)d_w2, s2, 1),
                          "load down") &&
                expect_ok(mj_weights_set_alphas(w, e, a1, a1, a2, 1.0f), "set alphas");
        }
        int bm = 0;
        if (ok) ok = expect_ok(mj_mega_moe_block_m(&mc, T, &bm), "mj_mega_moe_block_m");
        if (ok)
            ok = expect_ok(mj_pre_dispatch(c->rt, buf, 0, (const void *)(uintptr_t)d_x,
                                           (const int32_t *)(uintptr_t)d_ids,
                                           (const float *)(uintptr_t)d_tw, NULL, T, c->s[0]),
                           "mj_pre_dispatch");
        /* warm-up (compiles or loads), then a smoke check of the output */
        for (int i = 0; ok && i < 3; i++)
            ok = expect_ok(mj_mega_moe(c->rt, buf, w, (void *)(uintptr_t)d_y, T, NULL, c->s[0]),
                           "mj_mega_moe");
        if (ok) {
            wait_or_die(c, c->s, 1);
            CU(cuMemsetD16(d_y, (unsigned short)POISON16, (size_t)T * H));
            CU(cuCtxSynchronize());
            ok = expect_ok(mj_mega_moe(c->rt, buf, w, (void *)(uintptr_t)d_y, T, NULL, c->s[0]),
                           "mj_mega_moe");
            wait_or_die(c, c->s, 1);
            CU(cuMemcpyDtoH(y, d_y, (size_t)T * H * 2));
            size_t bad = 0;
            for (size_t i = 0; i < (size_t)T * H; i++)
                bad += (y[i] & 0x7F80u) == 0x7F80u;
            if (bad) {
                printf("  %zu output elements unwritten or non-finite\n", bad);
                ok = 0;
            }
        }
        float us[50];
        for (int i = 0; ok && i < iters; i++) {
            CU(cuEventRecord(ev0[i], c->s[0]));
            ok = expect_ok(mj_mega_moe(c->rt, buf, w, (void *)(uintptr_t)d_y, T, NULL, c->s[0]),
                           "mj_mega_moe");
            CU(cuEventRecord(ev1[i], c->s[0]));
        }
        if (ok) {
            wait_or_die(c, c->s, 1);
            for (int i = 0; i < iters; i++) {
                float ms;
                CU(cuEventElapsedTime(&ms, ev0[i], ev1[i]));
                us[i] = 1000.0f * ms;
            }
            qsort(us, (size_t)iters, sizeof us[0], cmp_float);
            double med = 0.5 * (us[iters / 2 - 1] + us[iters / 2]);
            double bytes = (double)experts_hit * 3.0 * (double)H * (double)I * bits / 8.0;
            printf("| %s | %d | %d | %.1f | %.1f | %d | %.3e | %.0f | %.1f |\n", row->name, T, bm,
                   med, (double)us[0], experts_hit, bytes, bytes / med / 1e3, bytes / 4.3e12 * 1e6);
        }
        record(ok);
        if (w) mj_weights_destroy(w);
        if (buf) mj_symm_buffer_destroy(buf);
    }
    printf("(weight bytes = distinct experts hit x 3 x H x I x bits / 8, block scales excluded)\n");
    for (int i = 0; i < iters; i++) {
        CU(cuEventDestroy(ev0[i]));
        CU(cuEventDestroy(ev1[i]));
    }
    CU(cuMemFree(d_x));
    CU(cuMemFree(d_ids));
    CU(cuMemFree(d_tw));
    CU(cuMemFree(d_y));
    CU(cuMemFree(d_w1));
    CU(cuMemFree(d_w1sf));
    CU(cuMemFree(d_w2));
    CU(cuMemFree(d_w2sf));
    free(x);
    free(y);
    free(ids);
    free(tw);
    free(tile);
    free(tmp);
    free(hw1);
    free(hw1sf);
    free(hw2);
    free(hw2sf);
}

/* One process per rank: every format row with swiglu, plus one clamp case.
 * A failed setup or launch leaves the peers' collectives out of step, so it
 * ends the run (the launcher then stops the others); a failed check does not. */
