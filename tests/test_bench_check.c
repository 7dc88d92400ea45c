/*
 * The MegaMoE benchmark's checks (tools/bench/moe_check.c) and the weights
 * they compare against (tools/bench/moe_weights.c), on a small shape for
 * every format row: a kernel output equal to the fp64 reference of the full
 * expert set passes, a wrong or partly written one fails and says why.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "heuristics/moe_formats.h"
#include "templates/layout/symm_layout.h"
#include "tests/reference/moe_ref.h"
#include "tests/reference/quant.h"
#include "tools/bench/bench.h"
#include "tools/bench/moe_check.h"
#include "tools/bench/moe_routing.h"

enum { H = 256, I = 64, E = 8, K = 2, N = 3 };

static void test_sample(void **state) {
    (void)state;
    int idx[MJ_BENCH_CHECK_ALL];
    assert_int_equal(mj_bench_check_sample(1, idx), 1);
    assert_int_equal(idx[0], 0);
    assert_int_equal(mj_bench_check_sample(8, idx), 8);
    for (int i = 0; i < 8; i++)
        assert_int_equal(idx[i], i);
    assert_int_equal(mj_bench_check_sample(9, idx), 4);
    const int nine[] = {0, 2, 5, 8};
    assert_memory_equal(idx, nine, sizeof nine);
    assert_int_equal(mj_bench_check_sample(4096, idx), 4);
    const int big[] = {0, 1365, 2730, 4095};
    assert_memory_equal(idx, big, sizeof big);
}

static void test_scan(void **state) {
    (void)state;
    uint16_t y[8] = {0x3f80, MJ_BENCH_POISON, 0x7f80, 0xffc0,
                     0x0000, MJ_BENCH_POISON, 0x1234, MJ_BENCH_POISON};
    size_t unwritten, nonfinite, past;
    mj_bench_scan_output(y, 5, 8, &unwritten, &nonfinite, &past);
    assert_int_equal(unwritten, 1);
    assert_int_equal(nonfinite, 2); /* +inf and a NaN other than the poison */
    assert_int_equal(past, 1);      /* 0x1234 after the 5 written */
}

/* gate = projection c, up = c + 1 adjacent to it, down = c + 2, all mod the
 * class count, and the ring's extra projection repeats the first. */
static void test_weight_classes(void **state) {
    (void)state;
    mj_bench_weights *w = mj_bench_weights_new(MJ_FMT_MXFP4, H, I, 3, 0, 5);
    assert_non_null(w);
    assert_null(w->bias);
    assert_null(mj_bench_weights_bias(w, 1, 0));
    assert_int_equal(w->data_bytes, (size_t)H * I / 2);
    assert_int_equal(w->sf_bytes, (size_t)H * I / 32);
    assert_memory_equal(w->data + 3 * w->data_bytes, w->data, w->data_bytes);
    assert_memory_equal(w->sf + 3 * w->sf_bytes, w->sf, w->sf_bytes);
    assert_memory_not_equal(w->data, w->data + w->data_bytes, w->data_bytes);
    for (int e = 0; e < 7; e++) {
        const mj_bench_expert_sources s = mj_bench_weights_sources(w, e);
        assert_int_equal(s.gate, e % 3);
        assert_int_equal(s.up, s.gate + 1);
        assert_int_equal(s.down, (e % 3 + 2) % 3);
    }
    mj_bench_weights_release(w);

    /* biases: per class, gate then up then down, shared by the class's experts */
    w = mj_bench_weights_new(MJ_FMT_MXFP4, H, I, 3, 1, 5);
    assert_non_null(w);
    assert_ptr_equal(mj_bench_weights_bias(w, 4, 0), w->bias + (2 * I + H));
    assert_ptr_equal(mj_bench_weights_bias(w, 4, 1), w->bias + (2 * I + H) + I);
    assert_ptr_equal(mj_bench_weights_bias(w, 2, 2), w->bias + 2 * (2 * I + H) + 2 * I);
    const mjr_expert_weights c1 = mj_bench_weights_class(w, 1);
    assert_ptr_equal(c1.b1, mj_bench_weights_bias(w, 1, 0));
    assert_ptr_equal(c1.b2, mj_bench_weights_bias(w, 1, 2));
    int nonzero = 0;
    for (int i = 0; i < 3 * (2 * I + H); i++) {
        assert_true(fabsf(w->bias[i]) <= 0.0625f);
        nonzero += w->bias[i] != 0.0f;
    }
    assert_true(nonzero > 3 * (2 * I + H) * 9 / 10);
    mj_bench_weights_release(w);
}

/* The reference over all E experts, each assembled from its projections
 * independently of the ring: what the device's weights compute. */
static void reference_all_experts(const mj_bench_weights *w, const mj_moe_format_row *row,
                                  const mj_bench_moe_variant *v, const uint16_t *x,
                                  const int32_t *ids, const float *tw, uint16_t *y) {
    const size_t pb = w->data_bytes, sb = w->sf_bytes;
    uint8_t *w1 = malloc(E * 2 * pb), *w1sf = malloc(E * 2 * sb + 1);
    assert_true(w1 && w1sf);
    mjr_expert_weights ex[E + 1]; /* ex[E]: the shared expert, with v->shared */
    for (int e = 0; e < E; e++) {
        const int c = e % w->classes;
        const int up = (c + 1) % w->classes, down = (c + 2) % w->classes;
        memcpy(w1 + (size_t)e * 2 * pb, w->data + (size_t)c * pb, pb);
        memcpy(w1 + (size_t)e * 2 * pb + pb, w->data + (size_t)up * pb, pb);
        if (sb) {
            memcpy(w1sf + (size_t)e * 2 * sb, w->sf + (size_t)c * sb, sb);
            memcpy(w1sf + (size_t)e * 2 * sb + sb, w->sf + (size_t)up * sb, sb);
        }
        ex[e] = (mjr_expert_weights){w1 + (size_t)e * 2 * pb,
                                     sb ? w1sf + (size_t)e * 2 * sb : NULL,
                                     w->data + (size_t)down * pb,
                                     sb ? w->sf + (size_t)down * sb : NULL,
                                     1.0f,
                                     1.0f,
                                     1.0f,
                                     1.0f,
                                     mj_bench_weights_bias(w, e, 0),
                                     mj_bench_weights_bias(w, e, 2)};
    }
    const int fmt = row->dispatch_fmt, group = mj_format_group(fmt);
    const size_t xb = (size_t)H * (size_t)mj_format_bits(fmt) / 8, xsb = group ? H / group : 0;
    uint8_t *xq = malloc(N * xb), *xsf = malloc(N * xsb + 1);
    assert_true(xq && xsf);
    float xs[N];
    for (int t = 0; t < N; t++)
        mjr_quantize_row(fmt, x + t * H, H, xq + t * xb, xsf + t * xsb, &xs[t]);
    const mjr_moe_shape s = {.hidden = H,
                             .inter = I,
                             .experts = E,
                             .topk = K,
                             .ranks = 1,
                             .max_tokens = N,
                             .weight_fmt = row->weight_fmt,
                             .dispatch_fmt = fmt,
                             .l2_fmt = row->l2_input_fmt,
                             .activation = v->activation,
                             .has_clamp = v->clamp > 0,
                             .clamp = v->clamp,
                             .shared_inter = v->shared * I,
                             .shared_fmt = w->shared_fmt};
    if (v->shared) {
        assert_int_equal(w->shared_intermediate, v->shared * I);
        ex[E] = (mjr_expert_weights){w->shared_w1, w->shared_w1_sf,
                                     w->shared_w2, w->shared_w2_sf,
                                     1.0f,         1.0f,
                                     1.0f,         1.0f,
                                     NULL,         NULL};
    }
    const mjr_rank_input in = {N, xq, group ? xsf : NULL, fmt == MJ_FMT_NVFP4 ? xs : NULL, ids, tw};
    uint16_t *const ys[1] = {y};
    assert_int_equal(mjr_moe_forward(&s, ex, &in, ys, NULL), 0);
    free(w1);
    free(w1sf);
    free(xq);
    free(xsf);
}

static void test_jobs(void **state) {
    (void)state;
    const int rows = mj_moe_format_count();
    mj_bench_checker *ck = mj_bench_checker_new(3);
    assert_non_null(ck);
    mj_bench_check_result *res = calloc((size_t)rows * 4, sizeof *res);
    assert_non_null(res);
    uint16_t x[N * H], y[N * H], bad[N * H], holed[N * H];
    int32_t ids[N * K];
    float tw[N * K];
    uint64_t rng = 11;
    for (int i = 0; i < N * H; i++)
        x[i] = mjr_bf16_from_f32((float)(int64_t)(mj_bench_rng(&rng) % 2001 - 1000) / 500.0f);
    assert_int_equal(mj_bench_route(MJ_BENCH_ROUTING_UNIFORM, E, K, N, 3, 0, ids, tw), 0);
    /* every other row runs gpt-oss's kind of layer: swigluoai, a clamp, biases */
    const mj_bench_moe_variant plain = {0}, oss = {MJ_ACT_SWIGLUOAI, 1.5f, 1, 0};
    for (int r = 0; r < rows; r++) {
        const mj_moe_format_row *row = mj_moe_format_at(r);
        const mj_bench_moe_variant *var = r % 2 ? &oss : &plain;
        mj_bench_weights *w =
            mj_bench_weights_new(row->weight_fmt, H, I, 3, var->biases, 17 + (uint64_t)r);
        assert_non_null(w);
        reference_all_experts(w, row, var, x, ids, tw, y);
        /* right; rows of tokens 0 and 1 swapped; one element counted
         * unwritten by the scan; and that element still poison */
        memcpy(bad, y, sizeof bad);
        memcpy(bad, y + H, H * sizeof *y);
        memcpy(bad + H, y, H * sizeof *y);
        memcpy(holed, y, sizeof holed);
        holed[H + 5] = MJ_BENCH_POISON;
        const uint16_t *outs[4] = {y, bad, y, holed};
        for (int v = 0; v < 4; v++) {
            mj_bench_check_result *out = &res[r * 4 + v];
            if (v >= 2) out->unwritten = 1;
            mj_bench_check_job *j =
                mj_bench_check_job_new(w, row, var, H, I, K, N, x, ids, tw, outs[v], out);
            assert_non_null(j);
            mj_bench_checker_submit(ck, j);
        }
        mj_bench_weights_release(w); /* the jobs hold their own references */
    }
    mj_bench_checker_finish(ck);
    for (int r = 0; r < rows; r++) {
        const char *name = mj_moe_format_at(r)->name;
        const mj_bench_check_result *ok = &res[r * 4], *wrong = &res[r * 4 + 1],
                                    *holes = &res[r * 4 + 2], *nan = &res[r * 4 + 3];
        if (!ok->done || !ok->ok || ok->calc_diff != 0.0)
            fail_msg("%s: the reference's own output failed: %s", name, ok->message);
        assert_string_equal(ok->message, "");
        assert_int_equal(ok->tokens, N);
        assert_true(ok->bar == (r == 0 ? 1e-4 : 1e-3));
        if (!wrong->done || wrong->ok || !strstr(wrong->message, "calc_diff"))
            fail_msg("%s: swapped rows passed (%s)", name, wrong->message);
        if (!holes->done || holes->ok || strcmp(holes->message, "1 elements of y unwritten") != 0)
            fail_msg("%s: an unwritten element passed (%s)", name, holes->message);
        if (!nan->done || nan->ok ||
            strcmp(nan->message, "calc_diff undefined over 3 tokens (y holds NaN); 1 elements "
                                 "of y unwritten") != 0)
            fail_msg("%s: a poisoned element passed (%s)", name, nan->message);
    }
    free(res);
}

/* The shared expert's random weights: W1 [2 I_s][H] and W2 [H][I_s] in the
 * ring's format, added once, alphas 1 and no biases in the reference's view. */
static void test_shared_weights(void **state) {
    (void)state;
    mj_bench_weights *w = mj_bench_weights_new(MJ_FMT_MXFP8, H, I, 3, 1, 5);
    assert_non_null(w);
    assert_int_equal(w->shared_intermediate, 0);
    assert_null(mj_bench_weights_shared(w).w1);
    assert_int_equal(mj_bench_weights_add_shared(w, w->fmt, 0, 9), -1);
    assert_int_equal(mj_bench_weights_add_shared(w, w->fmt, 2 * I + 16, 9),
                     -1); /* not a group multiple */
    assert_int_equal(mj_bench_weights_add_shared(w, w->fmt, 2 * I, 9), 0);
    assert_int_equal(mj_bench_weights_add_shared(w, w->fmt, I, 9), -1); /* one already */
    assert_int_equal(w->shared_intermediate, 2 * I);
    assert_int_equal(w->shared_w1_bytes, (size_t)2 * 2 * I * H);
    assert_int_equal(w->shared_w1_sf_bytes, (size_t)2 * 2 * I * H / 32);
    assert_int_equal(w->shared_w2_bytes, (size_t)2 * I * H);
    assert_int_equal(w->shared_w2_sf_bytes, (size_t)2 * I * H / 32);
    for (size_t i = 0; i < w->shared_w1_sf_bytes; i++)
        assert_true(w->shared_w1_sf[i] >= 120 && w->shared_w1_sf[i] <= 130);
    for (size_t i = 0; i < w->shared_w2_bytes; i++)
        assert_int_equal(w->shared_w2[i] & 0x40, 0); /* E4M3 exponent <= 7, never NaN */
    const mjr_expert_weights sh = mj_bench_weights_shared(w);
    assert_ptr_equal(sh.w1, w->shared_w1);
    assert_ptr_equal(sh.w1_sf, w->shared_w1_sf);
    assert_ptr_equal(sh.w2, w->shared_w2);
    assert_ptr_equal(sh.w2_sf, w->shared_w2_sf);
    assert_true(sh.l1_alpha_gate == 1.0f && sh.l1_alpha_up == 1.0f && sh.l2_alpha == 1.0f &&
                sh.l2_act_scale == 1.0f);
    assert_null(sh.b1);
    assert_null(sh.b2);
    mj_bench_weights_release(w);

    w = mj_bench_weights_new(MJ_FMT_BF16, H, I, 3, 0, 5);
    assert_non_null(w);
    assert_int_equal(mj_bench_weights_add_shared(w, w->fmt, I, 9), 0);
    assert_int_equal(w->shared_w1_bytes, (size_t)2 * I * H * 2);
    assert_null(w->shared_w1_sf);
    assert_null(w->shared_w2_sf);
    mj_bench_weights_release(w);

    /* In another format than the experts' (MXFP8 beside NVFP4, BF16 beside
     * it): its own element and scale sizes; an unknown format is refused. */
    w = mj_bench_weights_new(MJ_FMT_NVFP4, H, I, 3, 0, 6);
    assert_non_null(w);
    assert_int_equal(mj_bench_weights_add_shared(w, MJ_FMT_COUNT, I, 9), -1);
    assert_int_equal(mj_bench_weights_add_shared(w, MJ_FMT_MXFP8, I, 9), 0);
    assert_int_equal(w->shared_fmt, MJ_FMT_MXFP8);
    assert_int_equal(w->shared_w1_bytes, (size_t)2 * I * H);
    assert_int_equal(w->shared_w1_sf_bytes, (size_t)2 * I * H / 32);
    mj_bench_weights_release(w);
    w = mj_bench_weights_new(MJ_FMT_NVFP4, H, I, 3, 0, 7);
    assert_non_null(w);
    assert_int_equal(mj_bench_weights_add_shared(w, MJ_FMT_BF16, I, 9), 0);
    assert_int_equal(w->shared_w1_bytes, (size_t)2 * I * H * 2);
    assert_null(w->shared_w1_sf);
    mj_bench_weights_release(w);
}

/* With --shared the check's reference runs the shared expert: an output with
 * it passes (a token whose slots are all masked included: y = the shared
 * output), the same output checked as a layer without it fails, and a
 * shared size the weights do not hold is refused as a bench bug. */
static void test_jobs_shared(void **state) {
    (void)state;
    const int rows = mj_moe_format_count();
    mj_bench_checker *ck = mj_bench_checker_new(2);
    assert_non_null(ck);
    mj_bench_check_result *res = calloc((size_t)rows * 3, sizeof *res);
    uint16_t *y = malloc((size_t)rows * N * H * sizeof *y);
    assert_true(res && y);
    uint16_t x[N * H];
    int32_t ids[N * K];
    float tw[N * K];
    uint64_t rng = 23;
    for (int i = 0; i < N * H; i++)
        x[i] = mjr_bf16_from_f32((float)(int64_t)(mj_bench_rng(&rng) % 2001 - 1000) / 500.0f);
    assert_int_equal(mj_bench_route(MJ_BENCH_ROUTING_UNIFORM, E, K, N, 7, 0, ids, tw), 0);
    for (int k = 0; k < K; k++)
        ids[1 * K + k] = -1; /* token 1: every routed slot masked */
    const mj_bench_moe_variant shared = {.shared = 2}, none = {0}, smaller = {.shared = 1};
    for (int r = 0; r < rows; r++) {
        const mj_moe_format_row *row = mj_moe_format_at(r);
        mj_bench_weights *w = mj_bench_weights_new(row->weight_fmt, H, I, 3, 0, 31 + (uint64_t)r);
        assert_non_null(w);
        assert_int_equal(mj_bench_weights_add_shared(w, w->fmt, 2 * I, 41 + (uint64_t)r), 0);
        uint16_t *yr = y + (size_t)r * N * H;
        reference_all_experts(w, row, &shared, x, ids, tw, yr);
        int nonzero = 0;
        for (int h = 0; h < H; h++)
            nonzero += (yr[H + h] & 0x7fff) != 0;
        if (nonzero < H / 2)
            fail_msg("%s: the all-masked token's y is not the shared output (%d of %d nonzero)",
                     row->name, nonzero, H);
        const mj_bench_moe_variant *vs[3] = {&shared, &none, &smaller};
        for (int v = 0; v < 3; v++) {
            mj_bench_check_job *j =
                mj_bench_check_job_new(w, row, vs[v], H, I, K, N, x, ids, tw, yr, &res[r * 3 + v]);
            assert_non_null(j);
            mj_bench_checker_submit(ck, j);
        }
        mj_bench_weights_release(w);
    }
    mj_bench_checker_finish(ck);
    for (int r = 0; r < rows; r++) {
        const char *name = mj_moe_format_at(r)->name;
        const mj_bench_check_result *ok = &res[r * 3], *dropped = &res[r * 3 + 1],
                                    *bug = &res[r * 3 + 2];
        if (!ok->done || !ok->ok || ok->calc_diff != 0.0)
            fail_msg("%s: the reference's own output with the shared expert failed: %s", name,
                     ok->message);
        if (!dropped->done || dropped->ok || !strstr(dropped->message, "calc_diff"))
            fail_msg("%s: a layer without its shared expert passed (%s)", name, dropped->message);
        if (!bug->done || bug->ok || !strstr(bug->message, "a bench bug"))
            fail_msg("%s: a shared size the weights do not hold was checked (%s)", name,
                     bug->message);
    }
    free(res);
    free(y);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sample),         cmocka_unit_test(test_scan),
        cmocka_unit_test(test_weight_classes), cmocka_unit_test(test_jobs),
        cmocka_unit_test(test_shared_weights), cmocka_unit_test(test_jobs_shared),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
