/* The helpers the scenarios of tests/gpu/mega_moe/harness.h run with. */
#include "tests/gpu/mega_moe/harness.h"

int mine(int r) {
    return g_real_rank < 0 || r == g_real_rank;
}

int out_of_time(void) {
    if (now_s() - g_t0 < g_budget_s) return 0;
    g_skipped++;
    printf("SKIP %s (past the %.0f s budget)\n", g_case, g_budget_s);
    return 1;
}

/* ------------------------------------------------------------ random inputs */

float rnd_sym(void) {
    return 2.0f * rnd_unit() - 1.0f;
}

int row_index_by_name(const char *name) {
    for (int i = 0; i < mj_moe_format_count(); i++)
        if (!strcmp(mj_moe_format_at(i)->name, name)) return i;
    return -1;
}

int sms_for_mode(int device_sms, int ranks, int quick) {
    int s = device_sms / ranks;
    /* compute-sanitizer pays per CTA; the tiny quick shapes need few. */
    if (quick && s > 8) s = 8;
    return s < 1 ? 1 : s;
}

int sms_for(int device_sms, int ranks) {
    return sms_for_mode(device_sms, ranks, g_quick);
}

int route_of(const scenario *sc, int row_index) {
    return sc->route < ROUTE_ROTATING ? (sc->route + row_index) % ROUTE_ROTATING : sc->route;
}

mj_moe_config moe_cfg(const shape *sh, const mj_moe_format_row *row, const scenario *sc, int rank) {
    mj_moe_config mc = {
        .struct_size = sizeof(mj_moe_config),
        .hidden = sh->H,
        .intermediate = sh->I,
        .num_experts = sh->E,
        .num_topk = sh->K,
        .num_ranks = sc->ranks,
        .rank = rank,
        .max_tokens_per_rank = sh->TMAX,
        .weight_format = (mj_format)row->weight_fmt,
        .dispatch_format = (mj_format)row->dispatch_fmt,
        .activation = (mj_activation)sc->act,
        .clamp = sc->clamp,
        .block_m = sc->block_m,
        .expert_biases = sc->biases,
    };
    if (sc->act == MJ_ACT_SITU) {
        mc.situ_gate_beta = sc->act_params[0];
        mc.situ_up_beta = sc->act_params[1];
    } else if (sc->act == MJ_ACT_SWIGLU) {
        mc.swiglu_alpha = sc->act_params[0];
        mc.swiglu_beta = sc->act_params[1];
    }
    if (sc->shared) {
        mc.shared_intermediate = sc->shared * sh->I;
        mc.shared_format = (mj_format)shared_format_of(sc, row);
    }
    return mc;
}

int shared_format_of(const scenario *sc, const mj_moe_format_row *row) {
    return sc->shared_fmt ? sc->shared_fmt - 1 : mj_moe_shared_format_of(row);
}

scenario with_shared_format(const scenario *sc, int fmt) {
    scenario s = *sc;
    s.shared_fmt = fmt + 1;
    return s;
}
