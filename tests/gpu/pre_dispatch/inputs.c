/* Inputs that reach every edge of the quantizers: row kinds, top-k ids and weights. */
#include "tests/gpu/pre_dispatch/harness.h"

/* ------------------------------------------------------------ random inputs */

static float rnd_sign(void) {
    return (rnd() >> 63) ? -1.0f : 1.0f;
}

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

void gen_inputs(inputs *in, int hidden, int num_tokens, int rotate) {
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

void inputs_alloc(inputs *in, int hidden, int num_tokens) {
    size_t rows = num_tokens > 0 ? (size_t)num_tokens : 1;
    in->x = xmalloc(rows * (size_t)hidden * 2);
    in->ids = xmalloc(rows * TOPK * 4);
    in->weights = xmalloc(rows * TOPK * 4);
    in->scales = xmalloc(NUM_EXPERTS * 4);
}

void inputs_free(inputs *in) {
    free(in->x);
    free(in->ids);
    free(in->weights);
    free(in->scales);
    memset(in, 0, sizeof *in);
}
