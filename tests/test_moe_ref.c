/*
 * The fp64 MegaMoE reference (tests/reference/moe_ref.c) on tiny cases whose
 * outputs were worked out by hand (exact rationals for the BF16 rounding), so
 * a wrong step order, scale, layout or routing fails here. H = I = 32; most
 * experts are identities (gate row j = up row j = unit vector j, W2 = I), so
 * output column j is the activation of x[j] pushed through the L2 path.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <math.h>

#include <cmocka.h>

#include "heuristics/moe_formats.h"
#include "templates/layout/symm_layout.h"
#include "tests/reference/moe_ref.h"
#include "tests/reference/quant.h"

#define H 32
#define I 32
#define POISON 0xffffu

/* x[0..3] = 2, -1, 0.5, 4; the rest 0 */
static const float x_basic[4] = {2.0f, -1.0f, 0.5f, 4.0f};

typedef struct bf16_expert {
    uint8_t w1[2 * I * H * 2];
    uint8_t w2[H * I * 2];
} bf16_expert;

/* Identity-like BF16 expert; W2 = w2_diag * identity. */
static void make_expert(bf16_expert *ex, float w2_diag) {
    static float m1[2 * I * H], m2[H * I];
    memset(m1, 0, sizeof m1);
    memset(m2, 0, sizeof m2);
    for (int j = 0; j < I; j++) {
        m1[j * H + j] = 1.0f;
        m1[(I + j) * H + j] = 1.0f;
        m2[j * I + j] = w2_diag;
    }
    assert_int_equal(mjr_quantize_weights(MJ_FMT_BF16, m1, 2 * I, H, ex->w1, NULL), 0);
    assert_int_equal(mjr_quantize_weights(MJ_FMT_BF16, m2, H, I, ex->w2, NULL), 0);
}

static mjr_expert_weights weights_of(const bf16_expert *ex) {
    mjr_expert_weights w = {ex->w1, NULL, ex->w2, NULL, 1.0f, 1.0f, 1.0f, 1.0f};
    return w;
}

/* BF16 token rows (little-endian bit patterns); x[i] for i < n, else 0. */
static void make_x(uint8_t *row, const float *x, int n) {
    for (int i = 0; i < H; i++) {
        uint16_t b = mjr_bf16_from_f32(i < n ? x[i] : 0.0f);
        row[2 * i] = (uint8_t)(b & 0xff);
        row[2 * i + 1] = (uint8_t)(b >> 8);
    }
}

static mjr_moe_shape bf16_shape(int experts, int topk, int ranks, int act) {
    mjr_moe_shape s = {H,           I,           experts,     topk, ranks, 8,
                       MJ_FMT_BF16, MJ_FMT_BF16, MJ_FMT_BF16, act,  0,     0.0f};
    return s;
}

static void poison(uint16_t *y, size_t n) {
    for (size_t i = 0; i < n; i++)
        y[i] = POISON;
}

/* y row = want[0..3], zeros after. */
static void check_row(const uint16_t *y, const uint16_t want[4]) {
    for (int i = 0; i < H; i++) {
        uint16_t w = i < 4 ? want[i] : 0;
        if (y[i] != w) fail_msg("column %d: got %#06x, want %#06x", i, y[i], w);
    }
}

/* One rank, one token, one slot to an identity expert with weight 1. */
/* One token, already in the dispatch format (sf, xs as the format needs),
 * routed to expert 0 with weight 1; y is poisoned first. */
static void run_token(const mjr_moe_shape *s, const mjr_expert_weights *ew, const uint8_t *xq,
                      const uint8_t *sf, const float *xs, uint16_t *y) {
    int32_t ids[1] = {0};
    float tw[1] = {1.0f};
    mjr_rank_input in = {1, xq, sf, xs, ids, tw};
    uint16_t *ys[1] = {y};
    poison(y, H);
    assert_int_equal(mjr_moe_forward(s, ew, &in, ys, NULL), 0);
}

static void run_single(const mjr_moe_shape *s, const mjr_expert_weights *ew, const float *x, int n,
                       uint16_t *y) {
    uint8_t xrow[H * 2];
    make_x(xrow, x, n);
    run_token(s, ew, xrow, NULL, NULL, y);
}

/* Each activation of x = 2, -1, 0.5, 4 rounded to BF16 (GEMM 2 input) and
 * again after W2 = I (unchanged):
 *   swiglu    x*x*sigmoid(x): 3.52319 0.268941 0.155615 15.7122
 *   swigluoai x*sigmoid(1.702x)*(x+1): 5.80698 -0 0.525583 19.9779
 *   situ      4tanh(x/4)sigmoid(x)*25tanh(x/25): 3.24932 0.263335 0.154789 11.8653 */
static void test_activations(void **state) {
    (void)state;
    static const uint16_t want[3][4] = {
        {0x4061, 0x3e8a, 0x3e1f, 0x417b}, /* 3.515625 0.26953125 0.1552734375 15.6875 */
        {0x40ba, 0x0000, 0x3f07, 0x41a0}, /* 5.8125 0 (fp32 sum of -0) 0.52734375 20 */
        {0x4050, 0x3e87, 0x3e1f, 0x413e}, /* 3.25 0.263671875 0.1552734375 11.875 */
    };
    static bf16_expert ex;
    make_expert(&ex, 1.0f);
    mjr_expert_weights ew[1] = {weights_of(&ex)};
    for (int act = 0; act < 3; act++) {
        mjr_moe_shape s = bf16_shape(1, 1, 1, act);
        uint16_t y[H];
        run_single(&s, ew, x_basic, 4, y);
        check_row(y, want[act]);
    }
}

/* The activations' parameters on x = 2, -1, 0.5, 4 (values from an
 * independent fp64 evaluation):
 *   swiglu alpha 2, beta 0.5: x sigmoid(2x) (x + 0.5): 4.91007 0.0596015 0.365529 17.994
 *   situ betas 2, 5: 2tanh(x/2)sigmoid(x)*5tanh(x/5): 2.54874 0.245303 0.151946 6.28636
 * swiglu at 1.702 and 1 is swigluoai; 0 stands for the standard value. */
static void test_activation_params(void **state) {
    (void)state;
    static bf16_expert ex;
    make_expert(&ex, 1.0f);
    mjr_expert_weights ew[1] = {weights_of(&ex)};
    uint16_t y[H];
    mjr_moe_shape s = bf16_shape(1, 1, 1, MJ_ACT_SWIGLU);
    s.act_params[0] = 2.0f;
    s.act_params[1] = 0.5f;
    run_single(&s, ew, x_basic, 4, y);
    check_row(y, (const uint16_t[4]){0x409d, 0x3d74, 0x3ebb, 0x4190});

    s = bf16_shape(1, 1, 1, MJ_ACT_SITU);
    s.act_params[0] = 2.0f;
    s.act_params[1] = 5.0f;
    run_single(&s, ew, x_basic, 4, y);
    check_row(y, (const uint16_t[4]){0x4023, 0x3e7b, 0x3e1c, 0x40c9});

    static const uint16_t oai[4] = {0x40ba, 0x0000, 0x3f07, 0x41a0}; /* test_activations */
    s = bf16_shape(1, 1, 1, MJ_ACT_SWIGLU);
    s.act_params[0] = 1.702f;
    s.act_params[1] = 1.0f;
    run_single(&s, ew, x_basic, 4, y);
    check_row(y, oai);

    /* 0 is the standard value: situ at (4, 0) is situ at (4, 25). */
    static const uint16_t situ[4] = {0x4050, 0x3e87, 0x3e1f, 0x413e}; /* test_activations */
    s = bf16_shape(1, 1, 1, MJ_ACT_SITU);
    s.act_params[0] = 4.0f;
    run_single(&s, ew, x_basic, 4, y);
    check_row(y, situ);

    /* Parameters the kernels refuse, the reference refuses. */
    int32_t ids[1] = {0};
    float tw[1] = {1.0f};
    uint8_t xrow[H * 2];
    make_x(xrow, x_basic, 4);
    mjr_rank_input in = {1, xrow, NULL, NULL, ids, tw};
    uint16_t *ys[1] = {y};
    const struct {
        int act;
        float p[2];
    } bad[] = {{MJ_ACT_SWIGLU, {NAN, 0.0f}},
               {MJ_ACT_SWIGLU, {1.0f, INFINITY}},
               {MJ_ACT_SWIGLUOAI, {1.702f, 0.0f}},
               {MJ_ACT_SITU, {4.0f, -25.0f}}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        s = bf16_shape(1, 1, 1, bad[i].act);
        memcpy(s.act_params, bad[i].p, sizeof s.act_params);
        assert_int_equal(mjr_moe_forward(&s, ew, &in, ys, NULL), -1);
    }
}

/* g = min(g, C), u = clamp(u, -C, C) on BF16 values, C itself rounded to BF16. */
static void test_clamp(void **state) {
    (void)state;
    static bf16_expert ex;
    make_expert(&ex, 1.0f);
    mjr_expert_weights ew[1] = {weights_of(&ex)};
    uint16_t y[H];

    /* C = 1.5: x = 2 and 4 both become g = u = 1.5: 2.25 sigmoid(1.5) = 1.83954
     * -> 1.8359375; -1 and 0.5 are inside the clamp. */
    mjr_moe_shape s = bf16_shape(1, 1, 1, MJ_ACT_SWIGLU);
    s.has_clamp = 1;
    s.clamp = 1.5f;
    run_single(&s, ew, x_basic, 4, y);
    check_row(y, (const uint16_t[4]){0x3feb, 0x3e8a, 0x3e1f, 0x3feb});

    /* C = 0.5: x = -1 keeps g = -1 (only an upper bound) but u = -0.5:
     * -1 * sigmoid(-1) * -0.5 = 0.134471 -> 0.134765625 */
    s.clamp = 0.5f;
    const float xm[1] = {-1.0f};
    run_single(&s, ew, xm, 1, y);
    check_row(y, (const uint16_t[4]){0x3e0a, 0, 0, 0});

    /* C = 1.51 is used as BF16 1.5078125: 1.5078125^2 sigmoid(1.5078125) = 1.8614
     * -> 1.859375 (1.51 itself would give 1.8662 -> 1.8671875 = 0x3fef) */
    s.clamp = 1.51f;
    const float x2[1] = {2.0f};
    run_single(&s, ew, x2, 1, y);
    check_row(y, (const uint16_t[4]){0x3fee, 0, 0, 0});

    /* swigluoai, C = 1.5, x = 4: 1.5 sigmoid(1.702 * 1.5) * 2.5 = 3.47916 -> 3.484375 */
    s = bf16_shape(1, 1, 1, MJ_ACT_SWIGLUOAI);
    s.has_clamp = 1;
    s.clamp = 1.5f;
    const float x4[1] = {4.0f};
    run_single(&s, ew, x4, 1, y);
    check_row(y, (const uint16_t[4]){0x405f, 0, 0, 0});
}

/* gate alpha 2, up alpha 0.5, l2_act_scale 3, l2_alpha 0.25; x = 2:
 * g = 4, u = 1, act = 4 sigmoid(4) * 3 = 11.7842 -> 11.8125, o = 2.953125 */
static void test_alphas(void **state) {
    (void)state;
    static bf16_expert ex;
    make_expert(&ex, 1.0f);
    mjr_expert_weights ew[1] = {weights_of(&ex)};
    ew[0].l1_alpha_gate = 2.0f;
    ew[0].l1_alpha_up = 0.5f;
    ew[0].l2_act_scale = 3.0f;
    ew[0].l2_alpha = 0.25f;
    mjr_moe_shape s = bf16_shape(1, 1, 1, MJ_ACT_SWIGLU);
    uint16_t y[H];
    run_single(&s, ew, x_basic, 4, y);
    /* -1: g = -2, u = -0.5: 0.357609 -> 0.357421875 -> 0.0893554688;
     * 0.5: g = 1, u = 0.25: 0.548294 -> 0.546875 -> 0.13671875; 4: 47.9839 -> 48 -> 12 */
    check_row(y, (const uint16_t[4]){0x403d, 0x3db7, 0x3e0c, 0x4140});
}

/* Biases (gpt-oss): b1 joins the scaled GEMM 1 accumulator before step 2's
 * rounding, b2 times the routing weight (0.5) joins GEMM 2's before step 7's.
 * x = 2, -1, 0.5, 4 and zeros; gate/up bias 0.5/-1 on row 0 and 1/2 on row
 * 5; down bias 3, 0.125, -1, 0.25 on rows 0, 3, 5, 10. Row 0: g = 2.5, u = 1,
 * act = 0.5 * 2.5 sigmoid(2.5) = 1.15518 -> 1.15625, o = 1.15625 + 1.5 ->
 * 2.65625 (0x402a); unweighted (the control) + 3 -> 4.15625 (0x4085). Row 10:
 * act 0, o = 0.5 * 0.25. Values from an independent fp64 evaluation. */
static void test_biases(void **state) {
    (void)state;
    static bf16_expert ex;
    make_expert(&ex, 1.0f);
    float b1[2 * I] = {0}, b2[H] = {0};
    b1[0] = 0.5f, b1[I] = -1.0f, b1[5] = 1.0f, b1[I + 5] = 2.0f;
    b2[0] = 3.0f, b2[3] = 0.125f, b2[5] = -1.0f, b2[10] = 0.25f;
    mjr_expert_weights ew[1] = {weights_of(&ex)};
    ew[0].b1 = b1;
    ew[0].b2 = b2;
    uint8_t xrow[H * 2];
    make_x(xrow, x_basic, 4);
    int32_t ids[1] = {0};
    float tw[1] = {0.5f};
    mjr_rank_input in = {1, xrow, NULL, NULL, ids, tw};
    uint16_t y[H];
    uint16_t *ys[1] = {y};
    static const struct {
        int col;
        uint16_t weighted, unweighted;
    } want[] = {{0, 0x402a, 0x4085}, {1, 0x3e0a, 0x3e0a}, {2, 0x3d9f, 0x3d9f},
                {3, 0x40fd, 0x40ff}, {5, 0x3e6c, 0xbe8a}, {10, 0x3e00, 0x3e80}};
    for (int unweighted = 0; unweighted < 2; unweighted++) {
        mjr_moe_shape s = bf16_shape(1, 1, 1, MJ_ACT_SWIGLU);
        s.down_bias_unweighted = unweighted;
        poison(y, H);
        assert_int_equal(mjr_moe_forward(&s, ew, &in, ys, NULL), 0);
        uint16_t expect[H] = {0};
        for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
            expect[want[i].col] = unweighted ? want[i].unweighted : want[i].weighted;
        for (int h = 0; h < H; h++)
            if (y[h] != expect[h])
                fail_msg("unweighted %d column %d: got %#06x, want %#06x", unweighted, h, y[h],
                         expect[h]);
    }
}

/* A fused shared expert (I_s = 2I, BF16): gate and up rows j read x[j % 32],
 * W2s row h takes column h with 1 and column h + 32 with 0.5, so o_s[h] =
 * BF16(1.5 a_h) where a_h = BF16(swiglu(x_h)). The routed identity expert
 * (weight 1) gives a_h; y = BF16(fp32(a_h + o_s[h])): 3.515625 + 5.28125 ->
 * 8.8125 (0x410d), ... With every routed slot masked y = BF16(o_s). Values
 * from an independent fp64 evaluation. */
static void test_shared_expert(void **state) {
    (void)state;
    enum { IS = 2 * I };
    static bf16_expert ex;
    make_expert(&ex, 1.0f);
    static float m1[2 * IS * H], m2[H * IS];
    static uint8_t q1[2 * IS * H * 2], q2[H * IS * 2];
    memset(m1, 0, sizeof m1);
    memset(m2, 0, sizeof m2);
    for (int j = 0; j < IS; j++) {
        m1[j * H + j % H] = 1.0f;
        m1[(IS + j) * H + j % H] = 1.0f;
    }
    for (int h = 0; h < H; h++) {
        m2[h * IS + h] = 1.0f;
        m2[h * IS + h + 32] = 0.5f;
    }
    assert_int_equal(mjr_quantize_weights(MJ_FMT_BF16, m1, 2 * IS, H, q1, NULL), 0);
    assert_int_equal(mjr_quantize_weights(MJ_FMT_BF16, m2, H, IS, q2, NULL), 0);
    mjr_expert_weights ew[2] = {weights_of(&ex), {q1, NULL, q2, NULL, 1.0f, 1.0f, 1.0f, 1.0f}};
    mjr_moe_shape s = bf16_shape(1, 1, 1, MJ_ACT_SWIGLU);
    s.shared_inter = IS;
    s.shared_fmt = MJ_FMT_BF16;
    uint8_t xrow[H * 2];
    make_x(xrow, x_basic, 4);
    uint16_t y[H];
    uint16_t *ys[1] = {y};
    static const uint16_t want[2][4] = {{0x410d, 0x3f2c, 0x3ec6, 0x421d},
                                        {0x40a9, 0x3ecf, 0x3e6e, 0x41bc}};
    for (int masked = 0; masked < 2; masked++) {
        int32_t ids[1] = {masked ? -1 : 0};
        float tw[1] = {1.0f};
        mjr_rank_input in = {1, xrow, NULL, NULL, ids, tw};
        poison(y, H);
        assert_int_equal(mjr_moe_forward(&s, ew, &in, ys, NULL), 0);
        check_row(y, want[masked]);
    }

    /* refused: a size that is no multiple of I, alphas or biases on it */
    int32_t ids[1] = {0};
    float tw[1] = {1.0f}, bias[2 * IS] = {0};
    mjr_rank_input in = {1, xrow, NULL, NULL, ids, tw};
    s.shared_inter = I + I / 2;
    assert_int_equal(mjr_moe_forward(&s, ew, &in, ys, NULL), -1);
    s.shared_inter = IS;
    ew[1].l1_alpha_up = 2.0f;
    assert_int_equal(mjr_moe_forward(&s, ew, &in, ys, NULL), -1);
    ew[1].l1_alpha_up = 1.0f;
    ew[1].b1 = bias;
    assert_int_equal(mjr_moe_forward(&s, ew, &in, ys, NULL), -1);
}

/* The routing weight scales act before the GEMM 2 input is rounded. */
static void test_routing_weight(void **state) {
    (void)state;
    static bf16_expert ex;
    make_expert(&ex, 1.0f);
    mjr_expert_weights ew[1] = {weights_of(&ex)};
    mjr_moe_shape s = bf16_shape(1, 1, 1, MJ_ACT_SWIGLU);
    uint8_t xrow[2][H * 2];
    make_x(xrow[0], x_basic, 4);
    /* act(0.28125) = 0.0450762, act(0.171875) = 0.0160367 */
    make_x(xrow[1], (const float[2]){0.28125f, 0.171875f}, 2);
    int32_t ids[1] = {0};
    uint16_t y_full[H], y_half[H], y_q[H];
    uint16_t *ys[1];

    float w = 1.0f;
    mjr_rank_input in = {1, xrow[0], NULL, NULL, ids, &w};
    ys[0] = y_full;
    assert_int_equal(mjr_moe_forward(&s, ew, &in, ys, NULL), 0);
    w = 0.5f;
    ys[0] = y_half;
    poison(y_half, H);
    assert_int_equal(mjr_moe_forward(&s, ew, &in, ys, NULL), 0);
    /* a power of two commutes with every rounding on the BF16 path */
    for (int i = 0; i < H; i++)
        assert_true(mjr_f32_from_bf16(y_half[i]) == 0.5f * mjr_f32_from_bf16(y_full[i]));
    assert_int_equal(y_half[0], 0x3fe1); /* 1.7578125 = 3.515625 / 2 */

    /* 0.75: bf16(0.75 act) = 0.03369140625 and 0.01202392578125; applying the
     * weight after rounding act would give 0x3d0b and 0x3c44 */
    w = 0.75f;
    in.x = xrow[1];
    ys[0] = y_q;
    poison(y_q, H);
    assert_int_equal(mjr_moe_forward(&s, ew, &in, ys, NULL), 0);
    check_row(y_q, (const uint16_t[4]){0x3d0a, 0x3c45, 0, 0});
}

/* Expert 0 = identity, expert 1 has W2 = 2I (o1 = bf16(2 o0)). K = 2. */
static void test_masked_slots(void **state) {
    (void)state;
    static bf16_expert ex[2];
    make_expert(&ex[0], 1.0f);
    make_expert(&ex[1], 2.0f);
    mjr_expert_weights ew[2] = {weights_of(&ex[0]), weights_of(&ex[1])};
    mjr_moe_shape s = bf16_shape(2, 2, 1, MJ_ACT_SWIGLU);
    uint8_t x[4][H * 2];
    for (int t = 0; t < 4; t++)
        make_x(x[t], x_basic, 4);
    int32_t ids[4][2] = {{0, 1}, {-1, 1}, {-1, -1}, {1, -1}};
    float tw[4][2] = {{1, 1}, {5, 1}, {1, 1}, {1, 7}}; /* masked slots' weights are ignored */
    mjr_rank_input in = {4, x[0], NULL, NULL, ids[0], tw[0]};
    uint16_t y[4 * H];
    uint16_t *ys[1] = {y};
    poison(y, 4 * H);
    int32_t stats[2] = {-5, -5};
    assert_int_equal(mjr_moe_forward(&s, ew, &in, ys, stats), 0);
    /* o0 + o1: 3.515625 + 7.03125 = 10.546875 -> 10.5625; 0.26953125 + 0.5390625
     * -> 0.80859375; 0.1552734375 + 0.310546875 -> 0.46484375; 15.6875 + 31.375 -> 47 */
    check_row(y, (const uint16_t[4]){0x4129, 0x3f4f, 0x3eee, 0x423c});
    /* o1 alone: 7.03125 0.5390625 0.310546875 31.375 */
    check_row(y + H, (const uint16_t[4]){0x40e1, 0x3f0a, 0x3e9f, 0x41fb});
    check_row(y + 2 * H, (const uint16_t[4]){0, 0, 0, 0}); /* no valid slot: 0, not poison */
    check_row(y + 3 * H, (const uint16_t[4]){0x40e1, 0x3f0a, 0x3e9f, 0x41fb});
    assert_int_equal(stats[0], 1);
    assert_int_equal(stats[1], 3);
}

/* R = 2, E = 2: expert 0 on rank 0, expert 1 (W2 = 2I) on rank 1. Each rank's
 * token goes to the other rank's expert and its output comes home. */
static void test_two_ranks(void **state) {
    (void)state;
    static bf16_expert ex[2];
    make_expert(&ex[0], 1.0f);
    make_expert(&ex[1], 2.0f);
    mjr_expert_weights ew[2] = {weights_of(&ex[0]), weights_of(&ex[1])};
    mjr_moe_shape s = bf16_shape(2, 1, 2, MJ_ACT_SWIGLU);
    uint8_t x[2][H * 2];
    make_x(x[0], x_basic, 4);
    make_x(x[1], x_basic, 4);
    int32_t ids0[1] = {1}, ids1[2] = {0, -1};
    float tw[2] = {1.0f, 1.0f};
    mjr_rank_input in[2] = {{1, x[0], NULL, NULL, ids0, tw}, {2, x[1], NULL, NULL, ids1, tw}};
    uint16_t y0[H], y1[2 * H];
    uint16_t *ys[2] = {y0, y1};
    poison(y0, H);
    poison(y1, 2 * H);
    int32_t stats[2] = {-1, -1};
    assert_int_equal(mjr_moe_forward(&s, ew, in, ys, stats), 0);
    check_row(y0, (const uint16_t[4]){0x40e1, 0x3f0a, 0x3e9f, 0x41fb}); /* expert 1 */
    check_row(y1, (const uint16_t[4]){0x4061, 0x3e8a, 0x3e1f, 0x417b}); /* expert 0 */
    check_row(y1 + H, (const uint16_t[4]){0, 0, 0, 0});
    assert_int_equal(stats[0], 1); /* rank 0, expert 0: rank 1's token */
    assert_int_equal(stats[1], 1); /* rank 1, expert 1: rank 0's token */
}

/* R = 2, E = 4, K = 2: per-expert receive counts across ranks. */
static void test_recv_stats(void **state) {
    (void)state;
    static bf16_expert ex;
    make_expert(&ex, 1.0f);
    mjr_expert_weights ew[4];
    for (int e = 0; e < 4; e++)
        ew[e] = weights_of(&ex);
    mjr_moe_shape s = bf16_shape(4, 2, 2, MJ_ACT_SITU);
    uint8_t x[3][H * 2];
    for (int t = 0; t < 3; t++)
        make_x(x[t], x_basic, 4);
    int32_t ids0[3][2] = {{0, 3}, {2, -1}, {3, 3}};
    int32_t ids1[2][2] = {{1, 0}, {-1, -1}};
    float tw[3][2] = {{1, 1}, {1, 1}, {1, 1}};
    mjr_rank_input in[2] = {{3, x[0], NULL, NULL, ids0[0], tw[0]},
                            {2, x[0], NULL, NULL, ids1[0], tw[0]}};
    uint16_t y0[3 * H], y1[2 * H];
    uint16_t *ys[2] = {y0, y1};
    int32_t stats[2][2];
    memset(stats, 0x7f, sizeof stats);
    assert_int_equal(mjr_moe_forward(&s, ew, in, ys, stats[0]), 0);
    /* expert 0: 2 (rank 0 t0, rank 1 t0), 1: 1, 2: 1, 3: 3 (t0, and t2 twice) */
    assert_int_equal(stats[0][0], 2);
    assert_int_equal(stats[0][1], 1);
    assert_int_equal(stats[1][0], 1);
    assert_int_equal(stats[1][1], 3);
    /* t2 sums the same expert twice: situ 3.25 + 3.25 = 6.5 */
    assert_int_equal(y0[2 * H], 0x40d0);
}

/* NVFP4 dispatch: codes 2, -1, 0.5, 4 with sf 1.0 and per-token scale 0.5;
 * alphas 2 so xs * alpha = 1 and the BF16 swiglu row comes back. Byte 0 holds
 * element 0 (code 0x4) low and element 1 (code 0xa) high. */
static void test_nvfp4_dispatch(void **state) {
    (void)state;
    static bf16_expert ex;
    make_expert(&ex, 1.0f);
    mjr_expert_weights ew[1] = {weights_of(&ex)};
    ew[0].l1_alpha_gate = 2.0f;
    ew[0].l1_alpha_up = 2.0f;
    mjr_moe_shape s = bf16_shape(1, 1, 1, MJ_ACT_SWIGLU);
    s.dispatch_fmt = MJ_FMT_NVFP4;
    uint8_t xq[H / 2] = {0xa4, 0x61};
    uint8_t sf[H / 16] = {0x38, 0x38};
    float xs = 0.5f;
    uint16_t y[H];
    run_token(&s, ew, xq, sf, &xs, y);
    check_row(y, (const uint16_t[4]){0x4061, 0x3e8a, 0x3e1f, 0x417b});
    /* without the per-token scale g and u double: 4 sigmoid(4) * 4 = 15.7122 */
    xs = 1.0f;
    run_token(&s, ew, xq, sf, &xs, y);
    assert_int_equal(y[0], 0x417b);
}

/* The full nvfp4 row: NVFP4 identity weights (code 1.0, sf 1.0) and NVFP4 GEMM 2
 * input. act = 3.52319 0.268941 0.155615 15.7122 in group 0:
 * sf = E4M3(15.7122 / 6 = 2.6187) = 2.5, codes of act * 0.4: 1.409 -> 1.5,
 * 0.108 -> 0, 0.062 -> 0, 6.285 -> 6; o = 3.75 0 0 15. */
static void test_nvfp4_row(void **state) {
    (void)state;
    static uint8_t w1[2 * I * H / 2], w1sf[2 * I * H / 16], w2[H * I / 2], w2sf[H * I / 16];
    memset(w1, 0, sizeof w1);
    memset(w2, 0, sizeof w2);
    memset(w1sf, 0x38, sizeof w1sf);
    memset(w2sf, 0x38, sizeof w2sf);
    for (int j = 0; j < I; j++) {
        uint8_t one = (uint8_t)(j % 2 ? 0x20 : 0x02); /* E2M1 1.0 = code 2 */
        w1[(j * H + j) / 2] = one;
        w1[((I + j) * H + j) / 2] = one;
        w2[(j * I + j) / 2] = one;
    }
    mjr_expert_weights ew[1] = {{w1, w1sf, w2, w2sf, 2.0f, 2.0f, 1.0f, 1.0f}};
    mjr_moe_shape s = bf16_shape(1, 1, 1, MJ_ACT_SWIGLU);
    s.weight_fmt = s.dispatch_fmt = s.l2_fmt = MJ_FMT_NVFP4;
    uint8_t xq[H / 2] = {0xa4, 0x61};
    uint8_t sf[H / 16] = {0x38, 0x38};
    float xs = 0.5f;
    uint16_t y[H];
    run_token(&s, ew, xq, sf, &xs, y);
    check_row(y, (const uint16_t[4]){0x4070, 0, 0, 0x4170});
}

/* The mxfp8 row: x codes 1, -0.5, 0.25, 2 (E4M3) with UE8M0 128 (x2); MXFP8
 * identity weights. GEMM 2 input group amax 15.7122 / 448 -> 2^-4 (e = 123);
 * act * 16 = 56.37 -> 56, 4.303 -> 4.5, 2.490 -> 2.5, 251.4 -> 256;
 * o = 3.5 0.28125 0.15625 16. */
static void test_mxfp8_row(void **state) {
    (void)state;
    static uint8_t w1[2 * I * H], w1sf[2 * I * H / 32], w2[H * I], w2sf[H * I / 32];
    memset(w1, 0, sizeof w1);
    memset(w2, 0, sizeof w2);
    memset(w1sf, 127, sizeof w1sf);
    memset(w2sf, 127, sizeof w2sf);
    for (int j = 0; j < I; j++) {
        w1[j * H + j] = 0x38;
        w1[(I + j) * H + j] = 0x38;
        w2[j * I + j] = 0x38;
    }
    mjr_expert_weights ew[1] = {{w1, w1sf, w2, w2sf, 1.0f, 1.0f, 1.0f, 1.0f}};
    mjr_moe_shape s = bf16_shape(1, 1, 1, MJ_ACT_SWIGLU);
    s.weight_fmt = s.dispatch_fmt = s.l2_fmt = MJ_FMT_MXFP8;
    uint8_t xq[H] = {0x38, 0xb0, 0x28, 0x40};
    uint8_t sf[1] = {128};
    uint16_t y[H];
    run_token(&s, ew, xq, sf, NULL, y);
    check_row(y, (const uint16_t[4]){0x4060, 0x3e90, 0x3e20, 0x4180});
}

/* mxfp4-a16: W1 stores 1.0 as code 0.5 (0x1) with UE8M0 128 (x2), so a wrong
 * scale breaks the identity. Gate row 1 is left zero: a nibble swap permutes W1
 * and W2 alike and would cancel out on a pure identity. */
static void test_mxfp4_weights(void **state) {
    (void)state;
    static uint8_t w1[2 * I * H / 2], w1sf[2 * I * H / 32], w2[H * I / 2], w2sf[H * I / 32];
    memset(w1, 0, sizeof w1);
    memset(w2, 0, sizeof w2);
    memset(w1sf, 128, sizeof w1sf);
    memset(w2sf, 127, sizeof w2sf);
    for (int j = 0; j < I; j++) {
        uint8_t half = (uint8_t)(j % 2 ? 0x10 : 0x01);
        if (j != 1) w1[(j * H + j) / 2] = half;
        w1[((I + j) * H + j) / 2] = half;
        w2[(j * I + j) / 2] = (uint8_t)(j % 2 ? 0x20 : 0x02);
    }
    mjr_expert_weights ew[1] = {{w1, w1sf, w2, w2sf, 1.0f, 1.0f, 1.0f, 1.0f}};
    mjr_moe_shape s = bf16_shape(1, 1, 1, MJ_ACT_SWIGLU);
    s.weight_fmt = MJ_FMT_MXFP4;
    uint16_t y[H];
    run_single(&s, ew, x_basic, 4, y);
    /* column 1: g = 0 -> act = -0 -> y = +0 (fp32 sum from 0) */
    check_row(y, (const uint16_t[4]){0x4061, 0x0000, 0x3e1f, 0x417b});
}

static void test_quantize_weights(void **state) {
    (void)state;
    float w[32] = {0};
    uint8_t data[32], sf[2];
    /* MXFP8: amax 448 -> 448/448 = 1 = 2^0 -> 127; 1.5 -> 0x3c, -448 -> 0xfe */
    w[0] = 1.5f;
    w[1] = -448.0f;
    assert_int_equal(mjr_quantize_weights(MJ_FMT_MXFP8, w, 1, 32, data, sf), 0);
    assert_int_equal(sf[0], 127);
    assert_int_equal(data[0], 0x3c);
    assert_int_equal(data[1], 0xfe);
    /* MXFP4: amax 12 -> 2 -> 128; 3/2 = 1.5 -> code 3 (low), -12/2 = -6 -> 0xf (high) */
    w[0] = 3.0f;
    w[1] = -12.0f;
    assert_int_equal(mjr_quantize_weights(MJ_FMT_MXFP4, w, 1, 32, data, sf), 0);
    assert_int_equal(sf[0], 128);
    assert_int_equal(data[0], 0xf3);
    assert_int_equal(data[1], 0x00);
    /* NVFP4: group 0 amax 3 -> sf E4M3(0.5) = 0x30, 3/0.5 = 6 -> 7, 1/0.5 = 2 -> 4;
     * group 1 all zero -> sf 0, codes 0 */
    memset(w, 0, sizeof w);
    w[0] = 1.0f;
    w[1] = -3.0f;
    assert_int_equal(mjr_quantize_weights(MJ_FMT_NVFP4, w, 1, 32, data, sf), 0);
    assert_int_equal(sf[0], 0x30);
    assert_int_equal(sf[1], 0x00);
    assert_int_equal(data[0], 0xf4);
    for (int i = 1; i < 16; i++)
        assert_int_equal(data[i], 0);
    /* BF16: little-endian bit patterns */
    w[0] = -2.0f;
    assert_int_equal(mjr_quantize_weights(MJ_FMT_BF16, w, 1, 1, data, NULL), 0);
    assert_int_equal(data[0], 0x00);
    assert_int_equal(data[1], 0xc0);
    /* rejected: unknown format, cols not a multiple of the group, missing sf */
    assert_int_equal(mjr_quantize_weights(4, w, 1, 32, data, sf), -1);
    assert_int_equal(mjr_quantize_weights(MJ_FMT_NVFP4, w, 1, 24, data, sf), -1);
    assert_int_equal(mjr_quantize_weights(MJ_FMT_MXFP8, w, 1, 32, data, NULL), -1);
}

static void test_bf16_from_f64(void **state) {
    (void)state;
    assert_int_equal(mjr_bf16_from_f64(1.0), 0x3f80);
    assert_int_equal(mjr_bf16_from_f64(1.0 + 0x1p-8), 0x3f80);     /* tie to even */
    assert_int_equal(mjr_bf16_from_f64(1.0 + 3 * 0x1p-8), 0x3f82); /* tie to even */
    /* just above the tie; through fp32 it would first become the tie, then 0x3f80 */
    assert_int_equal(mjr_bf16_from_f64(1.0 + 0x1p-8 + 0x1p-40), 0x3f81);
    assert_int_equal(mjr_bf16_from_f64(-3.515625), 0xc061);
    assert_int_equal(mjr_bf16_from_f64(0x1.fefffffp127), 0x7f7f);
    assert_int_equal(mjr_bf16_from_f64(0x1.ffp127), 0x7f80); /* tie above max -> inf */
    assert_int_equal(mjr_bf16_from_f64(-1e300), 0xff80);
    assert_int_equal(mjr_bf16_from_f64(0x1p-133), 0x0001);
    assert_int_equal(mjr_bf16_from_f64(0x1p-134), 0x0000);     /* tie to even */
    assert_int_equal(mjr_bf16_from_f64(3 * 0x1p-134), 0x0002); /* tie to even */
    assert_int_equal(mjr_bf16_from_f64(1e-300), 0x0000);
    assert_int_equal(mjr_bf16_from_f64(-0.0), 0x8000);
    assert_int_equal(mjr_bf16_from_f64(INFINITY), 0x7f80);
    assert_int_equal(mjr_bf16_from_f64(NAN) & 0x7fff, 0x7fc0);
}

static void test_calc_diff(void **state) {
    (void)state;
    uint16_t a[4] = {0x3f80, 0xc000, 0x4040, 0x3e80}; /* 1 -2 3 0.25 */
    uint16_t neg[4], dbl[4], zero[4] = {0};
    for (int i = 0; i < 4; i++) {
        neg[i] = (uint16_t)(a[i] ^ 0x8000);
        dbl[i] = (uint16_t)(a[i] + 0x80); /* exponent + 1 */
    }
    assert_true(mjr_calc_diff(a, a, 4) == 0.0);
    assert_true(mjr_calc_diff(a, neg, 4) == 2.0);
    assert_true(mjr_calc_diff(zero, zero, 4) == 0.0);
    assert_true(mjr_calc_diff(a, zero, 4) == 1.0);
    /* y = 2x: 1 - 4/5 */
    assert_true(fabs(mjr_calc_diff(a, dbl, 4) - 0.2) < 1e-15);
    assert_true(mjr_calc_diff(a, a, 0) == 0.0);
}

static void test_invalid(void **state) {
    (void)state;
    static bf16_expert ex;
    make_expert(&ex, 1.0f);
    mjr_expert_weights ew[2] = {weights_of(&ex), weights_of(&ex)};
    uint8_t x[H * 2];
    make_x(x, x_basic, 4);
    int32_t ids[1] = {0};
    float tw[1] = {1.0f};
    mjr_rank_input in = {1, x, NULL, NULL, ids, tw};
    uint16_t y[H];
    uint16_t *ys[1] = {y};
    int32_t stats[2] = {99, 99};
    mjr_moe_shape good = bf16_shape(2, 1, 1, MJ_ACT_SWIGLU);

    poison(y, H);
    ids[0] = 2; /* = E */
    assert_int_equal(mjr_moe_forward(&good, ew, &in, ys, stats), -1);
    ids[0] = -2;
    assert_int_equal(mjr_moe_forward(&good, ew, &in, ys, stats), -1);
    ids[0] = 0;

    mjr_moe_shape bad[8];
    for (int i = 0; i < 8; i++)
        bad[i] = good;
    bad[0].activation = MJ_ACT_SITU; /* clamp is for the swiglu family only */
    bad[0].has_clamp = 1;
    bad[0].clamp = 1.0f;
    bad[1].has_clamp = 1;
    bad[1].clamp = NAN;
    bad[2].hidden = 48;
    bad[3].experts = 3;
    bad[3].ranks = 2;
    bad[4].max_tokens = 0; /* fewer than the rank's num_tokens */
    bad[5].l2_fmt = 4;
    bad[6].activation = MJ_ACT_COUNT;
    bad[7].dispatch_fmt = MJ_FMT_MXFP8; /* x_sf missing */
    for (int i = 0; i < 8; i++)
        if (mjr_moe_forward(&bad[i], ew, &in, ys, stats) != -1)
            fail_msg("bad shape %d accepted", i);
    assert_int_equal(mjr_moe_forward(NULL, ew, &in, ys, stats), -1);
    assert_int_equal(mjr_moe_forward(&good, NULL, &in, ys, stats), -1);
    assert_int_equal(mjr_moe_forward(&good, ew, NULL, ys, stats), -1);
    ew[1].w2 = NULL;
    assert_int_equal(mjr_moe_forward(&good, ew, &in, ys, stats), -1);
    for (int i = 0; i < H; i++)
        assert_int_equal(y[i], POISON);
    assert_int_equal(stats[0], 99);
    assert_int_equal(stats[1], 99);
}

/* ---- every format-table row on random data against the BF16 path built from
 * the same fp32 originals: quantization error only, and a wrong scale or alpha
 * is far outside the bound. */

#define RH 64
#define RI 64
#define RE 4
#define RK 2
#define RT 3 /* tokens per rank, R = 2 */

static uint32_t rng_state = 12345u;
static float uniform(void) {
    rng_state = rng_state * 1664525u + 1013904223u;
    return (float)(rng_state >> 8) / 8388608.0f - 1.0f; /* [-1, 1) */
}

typedef struct rand_case {
    float w1[RE][2 * RI * RH], w2[RE][RH * RI];
    uint16_t x[2][RT * RH];
    int32_t ids[2][RT * RK];
    float tw[2][RT * RK];
} rand_case;

typedef struct quantized {
    uint8_t w1[RE][2 * RI * RH * 2], w1sf[RE][2 * RI * RH / 16];
    uint8_t w2[RE][RH * RI * 2], w2sf[RE][RH * RI / 16];
    uint8_t x[2][RT * RH * 2], xsf[2][RT * RH / 16];
    float xs[2][RT];
    mjr_expert_weights ew[RE];
    mjr_rank_input in[2];
} quantized;

static float amax_of(const float *v, int n) {
    float a = 0.0f;
    for (int i = 0; i < n; i++)
        a = fabsf(v[i]) > a ? fabsf(v[i]) : a;
    return a;
}

/* NVFP4 weights carry their range in the alphas (moe_ref.h), as checkpoints do. */
static void quantize_case(const rand_case *c, const mj_moe_format_row *row, quantized *q) {
    static float scaled[2 * RI * RH];
    int wf = row->weight_fmt, df = row->dispatch_fmt;
    for (int e = 0; e < RE; e++) {
        float g1 = 1.0f, g2 = 1.0f;
        if (wf == MJ_FMT_NVFP4) {
            g1 = 2688.0f / amax_of(c->w1[e], 2 * RI * RH);
            g2 = 2688.0f / amax_of(c->w2[e], RH * RI);
        }
        for (int i = 0; i < 2 * RI * RH; i++)
            scaled[i] = c->w1[e][i] * g1;
        assert_int_equal(mjr_quantize_weights(wf, scaled, 2 * RI, RH, q->w1[e], q->w1sf[e]), 0);
        for (int i = 0; i < RH * RI; i++)
            scaled[i] = c->w2[e][i] * g2;
        assert_int_equal(mjr_quantize_weights(wf, scaled, RH, RI, q->w2[e], q->w2sf[e]), 0);
        mjr_expert_weights w = {q->w1[e],  q->w1sf[e], q->w2[e],  q->w2sf[e],
                                1.0f / g1, 1.0f / g1,  1.0f / g2, 1.0f};
        q->ew[e] = w;
    }
    size_t xrb = (size_t)RH * (size_t)mj_format_bits(df) / 8u;
    size_t sfb = mj_format_group(df) ? (size_t)(RH / mj_format_group(df)) : 0u;
    for (int r = 0; r < 2; r++) {
        for (int t = 0; t < RT; t++)
            mjr_quantize_row(df, c->x[r] + t * RH, RH, q->x[r] + t * xrb, q->xsf[r] + t * sfb,
                             &q->xs[r][t]);
        mjr_rank_input in = {RT, q->x[r], q->xsf[r], q->xs[r], c->ids[r], c->tw[r]};
        q->in[r] = in;
    }
}

static double run_case(const mj_moe_format_row *row, const quantized *q, uint16_t y[2][RT * RH]) {
    mjr_moe_shape s = {RH,
                       RI,
                       RE,
                       RK,
                       2,
                       RT,
                       row->weight_fmt,
                       row->dispatch_fmt,
                       row->l2_input_fmt,
                       MJ_ACT_SWIGLU,
                       0,
                       0.0f};
    uint16_t *ys[2] = {y[0], y[1]};
    poison(y[0], RT * RH);
    poison(y[1], RT * RH);
    return mjr_moe_forward(&s, q->ew, q->in, ys, NULL);
}

static void make_rand_case(rand_case *c) {
    for (int e = 0; e < RE; e++) {
        for (int i = 0; i < 2 * RI * RH; i++)
            c->w1[e][i] = uniform() * 0.25f;
        for (int i = 0; i < RH * RI; i++)
            c->w2[e][i] = uniform() * 0.25f;
    }
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < RT * RH; i++)
            c->x[r][i] = mjr_bf16_from_f32(uniform());
    /* rank 0: both slots valid and distinct; rank 1 masks some slots */
    static const int32_t ids[2][RT * RK] = {{0, 3, 2, 1, 1, 0}, {3, -1, -1, 2, 0, 3}};
    static const float tw[2][RT * RK] = {{0.7f, 0.3f, 0.5f, 0.5f, 0.9f, 0.1f},
                                         {1.0f, 0.4f, 0.0f, 0.6f, 0.25f, 0.75f}};
    memcpy(c->ids, ids, sizeof ids);
    memcpy(c->tw, tw, sizeof tw);
}

static void test_format_rows_random(void **state) {
    (void)state;
    static rand_case c;
    static quantized q, qb;
    static uint16_t y[2][RT * RH], yb[2][RT * RH];
    make_rand_case(&c);
    const mj_moe_format_row *bf16 = mj_moe_format_by_name("bf16");
    quantize_case(&c, bf16, &qb);
    assert_int_equal(run_case(bf16, &qb, yb), 0);
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < RT * RH; i++) {
            assert_int_not_equal(yb[r][i], POISON);
            assert_true(isfinite(mjr_f32_from_bf16(yb[r][i])));
        }
    for (int i = 1; i < mj_moe_format_count(); i++) {
        const mj_moe_format_row *row = mj_moe_format_at(i);
        quantize_case(&c, row, &q);
        assert_int_equal(run_case(row, &q, y), 0);
        double d = mjr_calc_diff(y[0], yb[0], 2 * RT * RH);
        /* measured: mxfp8 ~1e-3, fp4 rows ~1e-2; a factor-2 error alone costs 0.2 */
        double bound = row->weight_fmt == MJ_FMT_MXFP8 ? 0.005 : 0.05;
        if (!(d < bound)) fail_msg("%s: calc_diff %g >= %g", row->name, d, bound);
        for (int e = 0; e < RE; e++)
            q.ew[e].l2_alpha *= 2.0f;
        assert_int_equal(run_case(row, &q, y), 0);
        d = mjr_calc_diff(y[0], yb[0], 2 * RT * RH);
        if (!(d > 0.1)) fail_msg("%s: a doubled l2_alpha went unnoticed (%g)", row->name, d);
    }
}

/* The same tokens on one rank or split over two give the same bits: the
 * reference's output depends on the token, never on where its experts live. */
static void test_rank_split_invariance(void **state) {
    (void)state;
    static rand_case c;
    static quantized q;
    static uint16_t y2[2][RT * RH];
    static uint16_t y1[2 * RT * RH];
    make_rand_case(&c);
    const mj_moe_format_row *row = mj_moe_format_by_name("mxfp4-a8");
    quantize_case(&c, row, &q);
    assert_int_equal(run_case(row, &q, y2), 0);

    static uint8_t x[2 * RT * RH], xsf[2 * RT * RH / 32];
    int32_t ids[2 * RT * RK];
    float tw[2 * RT * RK];
    size_t xb = RT * RH, sb = RT * RH / 32;
    for (int r = 0; r < 2; r++) {
        memcpy(x + r * xb, q.x[r], xb);
        memcpy(xsf + r * sb, q.xsf[r], sb);
        memcpy(ids + r * RT * RK, c.ids[r], sizeof c.ids[r]);
        memcpy(tw + r * RT * RK, c.tw[r], sizeof c.tw[r]);
    }
    mjr_moe_shape s = {RH,
                       RI,
                       RE,
                       RK,
                       1,
                       2 * RT,
                       row->weight_fmt,
                       row->dispatch_fmt,
                       row->l2_input_fmt,
                       MJ_ACT_SWIGLU,
                       0,
                       0.0f};
    mjr_rank_input in = {2 * RT, x, xsf, NULL, ids, tw};
    uint16_t *ys[1] = {y1};
    int32_t stats[RE];
    assert_int_equal(mjr_moe_forward(&s, q.ew, &in, ys, stats), 0);
    assert_memory_equal(y1, y2[0], sizeof y2[0]);
    assert_memory_equal(y1 + RT * RH, y2[1], sizeof y2[1]);
    /* ids: 0 x3, 1 x2, 2 x2, 3 x3 */
    assert_int_equal(stats[0], 3);
    assert_int_equal(stats[1], 2);
    assert_int_equal(stats[2], 2);
    assert_int_equal(stats[3], 3);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_activations),
        cmocka_unit_test(test_activation_params),
        cmocka_unit_test(test_biases),
        cmocka_unit_test(test_shared_expert),
        cmocka_unit_test(test_clamp),
        cmocka_unit_test(test_alphas),
        cmocka_unit_test(test_routing_weight),
        cmocka_unit_test(test_masked_slots),
        cmocka_unit_test(test_two_ranks),
        cmocka_unit_test(test_recv_stats),
        cmocka_unit_test(test_nvfp4_dispatch),
        cmocka_unit_test(test_nvfp4_row),
        cmocka_unit_test(test_mxfp8_row),
        cmocka_unit_test(test_mxfp4_weights),
        cmocka_unit_test(test_quantize_weights),
        cmocka_unit_test(test_bf16_from_f64),
        cmocka_unit_test(test_calc_diff),
        cmocka_unit_test(test_invalid),
        cmocka_unit_test(test_format_rows_random),
        cmocka_unit_test(test_rank_split_invariance),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
