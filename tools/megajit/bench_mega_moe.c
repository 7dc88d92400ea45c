/*
 * megajit bench mega-moe: every (shape, format row) the command line asks
 * for, each at every token count, against floors from ceilings measured in
 * the same run; every configuration checked against the fp64 reference.
 *
 * Order: parse; plan (unrunnable shapes become rows that say why); compile
 * every kernel the run will launch with the build pool (before this process
 * touches CUDA); join the launcher's ranks if any; open the runtime; measure
 * the ceilings; run each (shape, row) while the checks run on host threads;
 * print.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "heuristics/moe_formats.h"
#include "runtime/build_pool.h"
#include "runtime/configs.h"
#include "runtime/env.h"
#include "runtime/families/bench_ceilings.h"
#include "runtime/families/family.h"
#include "runtime/families/mega_moe.h"
#include "runtime/families/pre_dispatch.h"
#include "tools/bench/launcher.h"
#include "tools/bench/mega_moe.h"
#include "tools/bench/prebuild.h"
#include "tools/bench/routing_dump.h"
#include "tools/megajit/bench_moe_args.h"
#include "tools/megajit/cli.h"

static const char kCmd[] = "bench mega-moe";

static const char kUsage[] =
    "usage: megajit bench mega-moe [options]\n"
    "\n"
    "Times one MegaMoE layer (swiglu, random weights) per shape, format row and token count\n"
    "against its floor: max(bytes / read bandwidth, FLOPs / BF16 tensor rate), with the\n"
    "bandwidth and rate measured in the same run by the bench-ceiling kernels. bytes = the\n"
    "weights and scales of the experts the routing hits + the tokens in and out; FLOPs =\n"
    "2 x 3 H I per (token, slot) pair. Where those bytes are at most 4 GiB, the bulk-read\n"
    "kernel is also timed reading them in one launch (stream: launch, ramp and tail\n"
    "included). Each configuration is also timed as pre-dispatch + MegaMoE back to back,\n"
    "and checked against the fp64 host reference. Needs a GPU.\n"
    "\n"
    "With --ranks N > 1 the ranks are emulated on this GPU (SMs divided among them, every\n"
    "expert's weights on the device). Under build/tests/gpu/launch_ranks --gpus N each\n"
    "process is one rank on its own GPU over NCCL, and rank 0 prints.\n"
    "\n"
    "options:\n"
    "  --shape NAME        deepseek-v3 (7168, 2048, 256 experts, top-8; the default), kimi-k2\n"
    "                      (7168, 2048, 384, 8), qwen3-235b (4096, 1536, 128, 8), gpt-oss-120b\n"
    "                      (2880, 2880, 128, 4), or all\n"
    "  --hidden H, --intermediate I, --experts E, --topk K\n"
    "                      change the one shape named (it is then called custom)\n"
    "  --format ROW        bf16, mxfp8, mxfp4-a8, mxfp4-a16, nvfp4 or nvfp4-a16 (default: all)\n"
    "  --tokens LIST       tokens per rank, comma-separated (default 1,8,64,256,1024,4096)\n"
    "  --routing KIND      uniform (default) or skewed: half of the (token, slot) pairs on 10%\n"
    "                      of the experts\n"
    "  --max-tokens N      the buffer's max_tokens_per_rank (default: the largest --tokens);\n"
    "                      every token count runs on that one buffer\n"
    "  --iters N           timed steps per pass (default: as many as fit ~0.4 s, 3..200)\n"
    "  --ranks N           expert-parallel ranks (default 1, or the launcher's world)\n"
    "  --dump-routing DIR  write each configuration's top-k ids and weights there\n"
    "                      (bench/torch_moe_peer.py reads them)\n"
    "  --activation NAME   swiglu (default), swigluoai or situ\n"
    "  --clamp C           the swiglu family's clamp (gpt-oss: 7)\n"
    "  --biases            random expert biases (mj_moe_config.expert_biases), in the check too\n"
    "  --shared N          a fused shared expert of intermediate size N x I\n"
    "                      (mj_moe_config.shared_intermediate; default 0: none), random\n"
    "                      weights of its own, in the floor (its weights once per rank, 2 x 3 H\n"
    "                      N I FLOPs per token) and the check; rows that cannot fuse it say why\n"
    "  --shared-format F   its weight format (bf16 or mxfp8; default: the row's own where it\n"
    "                      fuses, else mxfp8)\n"
    "  --phases            one more launch per configuration (rank 0) stamps its phases:\n"
    "                      prologue, each GEMM's tasks (first-stage wait, K loop, epilogue),\n"
    "                      gaps, combine, tail; printed after the table and in the JSON\n"
    "  --cache DIR         cache directory\n"
    "  --json              one JSON object: ceilings, host cost, results\n"
    "\n"
    "exit status: 0 every runnable configuration ran and passed its check, 1 otherwise\n"
    "(a row says CHECK FAILED or FAILED), 2 bad arguments\n";

/* The warm-call target of the MegaMoE performance issue. */
static const double kHostCostTarget_us = 2.0;

/* One (shape, row): what ran, or why not. */
typedef struct config {
    const mj_bench_moe_shape *shape;
    const mj_moe_format_row *row; /* NULL: every row of the shape (not runnable alike) */
    char reason[256];             /* not runnable: why; "" otherwise */
    mj_bench_moe_point *points;
    int num_sms;
    int ran;
    char error[512]; /* the run failed: why */
} config;

/* ------------------------------------------------------------------ plan */

/* Every (shape, row), with one entry for a shape no row can run for the
 * same reason (a --hidden no kernel takes). */
static int plan(const mj_moe_bench_args *a, int ranks, config *out) {
    int n = 0;
    for (int si = 0; si < a->num_shapes; si++) {
        const mj_bench_moe_shape *s = &a->shapes[si];
        char first[256] = "";
        int all_same = 1;
        for (int ri = 0; ri < a->num_rows; ri++) {
            const mj_moe_format_row *row = mj_moe_format_at(a->rows[ri]);
            config *c = &out[n + ri];
            memset(c, 0, sizeof *c);
            c->shape = s;
            c->row = row;
            if (!mj_bench_moe_unrunnable(s, row->dispatch_fmt, ranks, a->max_tokens,
                                         a->variant.shared * s->intermediate, c->reason,
                                         sizeof c->reason))
                mj_bench_moe_shared_unrunnable(s, row, a->variant.shared,
                                               a->variant.shared_format - 1, c->reason,
                                               sizeof c->reason);
            if (ri == 0) snprintf(first, sizeof first, "%s", c->reason);
            all_same &= c->reason[0] && strcmp(c->reason, first) == 0;
        }
        if (all_same && a->num_rows > 1) {
            out[n].row = NULL;
            n++;
        } else {
            n += a->num_rows;
        }
    }
    return n;
}

static int runnable(const config *c) {
    return !c->reason[0];
}

/* --------------------------------------------------------- prebuilding */

/* Every kernel the run can launch: the ceilings, and per runnable (shape,
 * row) what the families enumerate for its layer (as a manifest does) at the
 * SM count each rank will have. */
static mj_status plan_specs(const mj_moe_bench_args *a, const config *cfgs, int n, int ranks,
                            int sms_per_rank, int sys_scope, mj_arch arch, mj_spec_list *l) {
    mj_status st = MJ_OK;
    for (int k = 0; k < MJ_BC_NUM_KERNELS && st == MJ_OK; k++) {
        const mj_family_request req = {.num_sms = sms_per_rank};
        mj_kernel_spec spec;
        if (mj_bench_ceilings_family.build_spec(&req, k, arch, &spec) == MJ_OK)
            st = mj_spec_list_add(&spec, l);
    }
    for (int i = 0; i < n && st == MJ_OK; i++) {
        if (!runnable(&cfgs[i])) continue;
        const mj_moe_config layer =
            mj_bench_moe_layer(cfgs[i].shape, cfgs[i].row, &a->variant, ranks, 0, a->max_tokens);
        const mj_symm_config buffer = mj_symm_config_of_moe(&layer);
        /* Emulated ranks share the GPU (mj_symm_buffer_create). */
        const mj_family_request req = {.buffer = &buffer,
                                       .layer = &layer,
                                       .num_sms = sms_per_rank,
                                       .sys_scope = sys_scope,
                                       .shares_device = ranks > 1 && !sys_scope};
        st = mj_pre_dispatch_family.enumerate(&req, arch, mj_spec_list_add, l);
        if (st == MJ_OK) st = mj_mega_moe_family.enumerate(&req, arch, mj_spec_list_add, l);
    }
    return st;
}

/* Compiles what the run needs in worker processes, one per CPU up to 16
 * (NVRTC is serialized within a process). Returns 0, or the exit status: no device, or interrupted
 * (the signal is raised again). */
static int prebuild(const mj_moe_bench_args *a, const config *cfgs, int n, int ranks,
                    int launched) {
    int device_sms = 0;
    char arch[16];
    if (!mj_bench_probe_device(&device_sms, arch, sizeof arch)) {
        fputs("megajit bench mega-moe: needs a CUDA device, and none was found\n", stderr);
        return CLI_EXIT_FAIL;
    }
    if (mj_env_get()->cache_disable) return 0; /* workers could not share cubins */
    const int sms = launched || ranks == 1 ? device_sms : device_sms / ranks;
    mj_spec_list l = {0};
    if (plan_specs(a, cfgs, n, ranks, sms, launched, mj_arch_parse(arch), &l) != MJ_OK) {
        fprintf(stderr, "megajit bench mega-moe: %s\n", mj_last_error());
        mj_spec_list_free(&l);
        return CLI_EXIT_FAIL;
    }
    mj_runtime_options opts = MJ_RUNTIME_OPTIONS_INIT;
    opts.cache_dir = a->cache_dir;
    int jobs = mj_build_pool_default_jobs();
    jobs = jobs > 16 ? 16 : jobs;
    mj_bench_prebuild_result r;
    if (mj_bench_prebuild(&l, &opts, jobs, stderr, "megajit bench mega-moe: compile", &r) != MJ_OK)
        fprintf(stderr,
                "megajit bench mega-moe: compiling ahead failed (%s); kernels compile at "
                "first launch instead\n",
                mj_last_error());
    else
        fprintf(stderr, "bench mega-moe: %zu kernels (%d compiled, %d cached, %d failed)\n",
                l.count, r.compiled, r.cached, r.failed);
    mj_spec_list_free(&l);
    mj_build_pool_die_of(r.stop_signal);
    return 0;
}

/* ------------------------------------------------------------- output */

static const char *status_of(const config *c, const mj_bench_moe_point *p) {
    if (!runnable(c)) return "not runnable";
    if (!c->ran) return "FAILED";
    return p->check.ok ? "ok" : "CHECK FAILED";
}

static void status_text(const config *c, const mj_bench_moe_point *p, char *out, size_t cap) {
    if (!runnable(c))
        snprintf(out, cap, "not runnable: %s", c->reason);
    else if (!c->ran)
        snprintf(out, cap, "FAILED: %s", c->error);
    else if (p->check.ok)
        snprintf(out, cap, "ok (calc_diff %.1e, %d tokens)", p->check.calc_diff, p->check.tokens);
    else
        snprintf(out, cap, "CHECK FAILED: %s", p->check.message);
}

static cJSON *phases_json(const mj_bench_moe_phases *ph) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "ctas", ph->ctas);
    cJSON_AddNumberToObject(j, "untraced_tasks", ph->untraced);
    cJSON_AddNumberToObject(j, "span_us", ph->span_us);
    cJSON_AddNumberToObject(j, "entry_skew_us", ph->entry_skew_us);
    cJSON_AddNumberToObject(j, "inputs_us", ph->inputs_us);
    cJSON_AddNumberToObject(j, "routing_us", ph->routing_us);
    cJSON_AddNumberToObject(j, "pull_us", ph->pull_us);
    cJSON_AddNumberToObject(j, "first_stage_us", ph->first_stage_us);
    cJSON *gs = cJSON_AddArrayToObject(j, "gemm");
    for (int g = 0; g < 2; g++) {
        const mj_bench_moe_gemm_phases *p = &ph->gemm[g];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "tasks", p->tasks);
        cJSON_AddNumberToObject(o, "task_us", p->task_us);
        cJSON_AddNumberToObject(o, "first_stage_us", p->first_us);
        cJSON_AddNumberToObject(o, "loop_us", p->loop_us);
        cJSON_AddNumberToObject(o, "epilogue_us", p->epilogue_us);
        cJSON_AddNumberToObject(o, "epilogue_stores_us", p->stores_us);
        cJSON_AddNumberToObject(o, "epilogue_release_us", p->release_us);
        cJSON_AddNumberToObject(o, "first_weights_us", p->weights_us);
        cJSON_AddNumberToObject(o, "first_tile_us", p->tile_us);
        cJSON_AddNumberToObject(o, "tile_lag_us", p->tile_lag_us);
        cJSON_AddNumberToObject(o, "loop_gbps_per_cta", p->loop_gbps);
        cJSON_AddNumberToObject(o, "narrow_tasks", p->narrow_tasks);
        cJSON_AddNumberToObject(o, "narrow_loop_us", p->narrow_loop_us);
        cJSON_AddNumberToObject(o, "narrow_loop_share", p->narrow_loop_share);
        cJSON_AddNumberToObject(o, "start_us", p->start_us);
        cJSON_AddNumberToObject(o, "end_us", p->end_us);
        cJSON_AddItemToArray(gs, o);
    }
    cJSON_AddNumberToObject(j, "between_tasks_us", ph->between_us);
    cJSON_AddNumberToObject(j, "combine_us", ph->combine_us);
    cJSON_AddNumberToObject(j, "last_compute_us", ph->last_compute_us);
    cJSON_AddNumberToObject(j, "loop_busy", ph->busy);
    return j;
}

static void print_phases(FILE *f, const config *c, const mj_bench_moe_point *p) {
    const mj_bench_moe_phases *ph = &p->phases;
    fprintf(f,
            "phases %s %s T=%d (one traced launch of %d CTAs; means per CTA or task): span "
            "%.1f us; entry skew %.1f, to inputs %.1f, routing %.1f, pull %.1f; first stage "
            "landed %.1f us after entry\n",
            c->shape->name, c->row->name, p->tokens, ph->ctas, ph->span_us, ph->entry_skew_us,
            ph->inputs_us, ph->routing_us, ph->pull_us, ph->first_stage_us);
    for (int g = 0; g < 2; g++) {
        const mj_bench_moe_gemm_phases *q = &ph->gemm[g];
        fprintf(
            f,
            "  GEMM %d: %d tasks, %.2f us each = first stage %.2f + K loop %.2f (%.1f GB/s "
            "a CTA) + epilogue %.2f (stores %.2f, fence + release %.2f); from %.1f to %.1f us\n",
            g + 1, q->tasks, q->task_us, q->first_us, q->loop_us, q->loop_gbps, q->epilogue_us,
            q->stores_us, q->release_us, q->start_us, q->end_us);
        if (q->tasks)
            fprintf(f,
                    "    first stage landed %.2f us after its first weight copy, %.2f after its "
                    "token tile was ready; the tile was ready a mean %.2f us after that copy (0 "
                    "where it was ready first)\n",
                    q->weights_us, q->tile_us, q->tile_lag_us);
        if (q->narrow_tasks)
            fprintf(f,
                    "    tiles of at most %d rows: %d tasks, K loop %.2f us each, %.0f%% of this "
                    "GEMM's K-loop time\n",
                    MJ_BENCH_MOE_NARROW_ROWS, q->narrow_tasks, q->narrow_loop_us,
                    100 * q->narrow_loop_share);
    }
    fprintf(f,
            "  between tasks %.1f us a CTA; last task done at %.1f us; combine + end %.1f us a "
            "CTA; K loops busy %.0f%% of CTAs x span%s\n",
            ph->between_us, ph->last_compute_us, ph->combine_us, 100 * ph->busy,
            ph->untraced ? " (some tasks past the trace's capacity are not counted)" : "");
}

static cJSON *point_json(const mj_moe_bench_args *a, const config *c, const mj_bench_moe_point *p,
                         int ranks) {
    cJSON *j = cJSON_CreateObject();
    const mj_bench_moe_shape *s = c->shape;
    cJSON_AddStringToObject(j, "shape", s->name);
    cJSON_AddNumberToObject(j, "hidden", s->hidden);
    cJSON_AddNumberToObject(j, "intermediate", s->intermediate);
    cJSON_AddNumberToObject(j, "experts", s->experts);
    cJSON_AddNumberToObject(j, "topk", s->topk);
    /* 0: none; else in shared_format */
    cJSON_AddNumberToObject(j, "shared_intermediate", a->variant.shared * s->intermediate);
    if (a->variant.shared && c->row)
        cJSON_AddStringToObject(
            j, "shared_format",
            mj_format_name((mj_format)mj_bench_shared_format(&a->variant, c->row)));
    cJSON_AddStringToObject(j, "row", c->row ? c->row->name : "all");
    cJSON_AddStringToObject(j, "routing", mj_bench_routing_name(a->routing));
    cJSON_AddNumberToObject(j, "ranks", ranks);
    cJSON_AddNumberToObject(j, "max_tokens", a->max_tokens);
    char text[768];
    status_text(c, p, text, sizeof text);
    cJSON_AddStringToObject(j, "status", status_of(c, p));
    cJSON_AddStringToObject(j, "detail", text);
    if (!p) return j;
    cJSON_AddNumberToObject(j, "tokens_per_rank", p->tokens);
    if (!c->ran) return j;
    cJSON_AddNumberToObject(j, "block_m", p->block_m);
    cJSON_AddNumberToObject(j, "num_sms", c->num_sms);
    cJSON_AddNumberToObject(j, "sets", p->sets);
    cJSON_AddNumberToObject(j, "iters", p->iters);
    cJSON_AddNumberToObject(j, "us", p->us);
    cJSON_AddNumberToObject(j, "pd_moe_us", p->pd_moe_us);
    cJSON_AddNumberToObject(j, "us_sm_clock_mhz", p->us_sm_clock_mhz);
    cJSON_AddNumberToObject(j, "pd_moe_sm_clock_mhz", p->pd_moe_sm_clock_mhz);
    cJSON_AddNumberToObject(j, "experts_hit", p->experts_hit);
    cJSON_AddNumberToObject(j, "bytes", p->bytes);
    cJSON_AddNumberToObject(j, "shared_bytes", p->shared_bytes);
    cJSON_AddNumberToObject(j, "flops", p->flops);
    cJSON_AddNumberToObject(j, "memory_us", p->floor.memory_us);
    cJSON_AddNumberToObject(j, "compute_us", p->floor.compute_us);
    cJSON_AddNumberToObject(j, "floor_us", p->floor.floor_us);
    cJSON_AddStringToObject(j, "bound", mj_bench_bound_name(p->floor.bound));
    cJSON_AddNumberToObject(j, "ratio", p->us / p->floor.floor_us);
    if (p->stream_us > 0) cJSON_AddNumberToObject(j, "stream_us", p->stream_us);
    cJSON_AddNumberToObject(j, "pd_moe_ratio", p->pd_moe_us / p->floor.floor_us);
    cJSON *ck = cJSON_AddObjectToObject(j, "check");
    cJSON_AddBoolToObject(ck, "ok", p->check.ok);
    cJSON_AddNumberToObject(ck, "calc_diff", isnan(p->check.calc_diff) ? -1 : p->check.calc_diff);
    cJSON_AddNumberToObject(ck, "bar", p->check.bar);
    cJSON_AddNumberToObject(ck, "tokens", p->check.tokens);
    cJSON_AddNumberToObject(ck, "unwritten", (double)p->check.unwritten);
    cJSON_AddNumberToObject(ck, "nonfinite", (double)p->check.nonfinite);
    cJSON_AddNumberToObject(ck, "past", (double)p->check.past);
    cJSON_AddStringToObject(ck, "message", p->check.message);
    if (p->traced) cJSON_AddItemToObject(j, "phases", phases_json(&p->phases));
    return j;
}

static void table_row(cli_table *t, const config *c, const mj_bench_moe_point *p) {
    char text[768];
    status_text(c, p, text, sizeof text);
    cli_table_cell(t, "%s", c->shape->name);
    cli_table_cell(t, "%s", c->row ? c->row->name : "all");
    if (p)
        cli_table_cell(t, "%d", p->tokens);
    else
        cli_table_cell(t, "-");
    if (p && c->ran) {
        cli_table_cell(t, "%d", p->block_m);
        cli_table_cell(t, "%.1f", p->us);
        cli_table_cell(t, "%.1f", p->floor.floor_us);
        cli_table_cell(t, "%.2f", p->us / p->floor.floor_us);
        cli_table_cell(t, "%s", mj_bench_bound_name(p->floor.bound));
        if (p->stream_us > 0)
            cli_table_cell(t, "%.1f", p->stream_us);
        else
            cli_table_cell(t, "-");
        cli_table_cell(t, "%.1f", p->pd_moe_us);
        cli_table_cell(t, "%.2f", p->pd_moe_us / p->floor.floor_us);
    } else {
        for (int i = 0; i < 8; i++)
            cli_table_cell(t, "-");
    }
    cli_table_cell(t, "%s", text);
}

static void print_header(FILE *f, const mj_info *info, const mj_moe_bench_args *a, int ranks,
                         const char *mode, const mj_bench_ceilings *ceil,
                         const mj_bench_host_cost *hc) {
    fprintf(f, "device: %s, %d SMs; %s routing, %d rank%s (%s), max_tokens_per_rank %d\n",
            info->device_name, info->device_sms, mj_bench_routing_name(a->routing), ranks,
            ranks == 1 ? "" : "s", mode, a->max_tokens);
    const mj_bench_moe_variant *v = &a->variant;
    char clamp[32] = "";
    if (v->clamp > 0) snprintf(clamp, sizeof clamp, ", clamp %g", (double)v->clamp);
    char shared[64] = "";
    if (v->shared) snprintf(shared, sizeof shared, ", a shared expert of %d x I", v->shared);
    fprintf(f, "layer: %s%s%s%s\n", mj_moe_activation_name(v->activation), clamp,
            v->biases ? ", expert biases" : "", shared);
    fprintf(f,
            "ceilings (measured now): bulk-copy read %.0f GB/s (%.1f GB read), device copy %.0f "
            "GB/s (read + write), BF16 wgmma %.0f TFLOP/s (%d SMs)\n",
            ceil->read_gbps, ceil->read_bytes / 1e9, ceil->copy_gbps, ceil->bf16_tflops,
            ceil->num_sms);
    if (hc && hc->calls)
        fprintf(f,
                "host cost of a warm mj_mega_moe call: %.2f us vs %.2f us for a bare "
                "cuLaunchKernelEx of the same kernel: +%.2f us (target <= %.0f), median of %d\n",
                hc->api_us, hc->bare_us, hc->extra_us, kHostCostTarget_us, hc->calls);
}

static cJSON *header_json(const mj_info *info, const mj_moe_bench_args *a, int ranks,
                          const char *mode, const mj_bench_ceilings *ceil,
                          const mj_bench_host_cost *hc) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "device", info->device_name);
    cJSON_AddNumberToObject(j, "device_sms", info->device_sms);
    cJSON_AddStringToObject(j, "routing", mj_bench_routing_name(a->routing));
    cJSON_AddNumberToObject(j, "ranks", ranks);
    cJSON_AddStringToObject(j, "mode", mode);
    cJSON_AddStringToObject(j, "activation", mj_moe_activation_name(a->variant.activation));
    cJSON_AddNumberToObject(j, "clamp", a->variant.clamp);
    cJSON_AddBoolToObject(j, "expert_biases", a->variant.biases);
    cJSON_AddNumberToObject(j, "shared", a->variant.shared);
    cJSON_AddNumberToObject(j, "max_tokens", a->max_tokens);
    cJSON *c = cJSON_AddObjectToObject(j, "ceilings");
    cJSON_AddNumberToObject(c, "read_gbps", ceil->read_gbps);
    cJSON_AddNumberToObject(c, "read_bytes", ceil->read_bytes);
    cJSON_AddNumberToObject(c, "copy_gbps", ceil->copy_gbps);
    cJSON_AddNumberToObject(c, "bf16_tflops", ceil->bf16_tflops);
    cJSON_AddNumberToObject(c, "tensor_flops", ceil->tensor_flops);
    cJSON_AddNumberToObject(c, "num_sms", ceil->num_sms);
    if (hc && hc->calls) {
        cJSON *h = cJSON_AddObjectToObject(j, "host_cost");
        cJSON_AddNumberToObject(h, "api_us", hc->api_us);
        cJSON_AddNumberToObject(h, "bare_us", hc->bare_us);
        cJSON_AddNumberToObject(h, "extra_us", hc->extra_us);
        cJSON_AddNumberToObject(h, "target_us", kHostCostTarget_us);
        cJSON_AddNumberToObject(h, "calls", hc->calls);
    } else {
        cJSON_AddNullToObject(j, "host_cost");
    }
    return j;
}

/* Prints the configurations that are not runnable, for a run that has
 * nothing else (no device needed). */
static void print_unrunnable(const mj_moe_bench_args *a, const config *cfgs, int n, int ranks) {
    if (a->json) {
        cJSON *j = cJSON_CreateObject();
        cJSON *results = cJSON_AddArrayToObject(j, "results");
        for (int i = 0; i < n; i++)
            cJSON_AddItemToArray(results, point_json(a, &cfgs[i], NULL, ranks));
        cli_print_json(j);
        return;
    }
    for (int i = 0; i < n; i++)
        printf("%s %s: not runnable: %s\n", cfgs[i].shape->name,
               cfgs[i].row ? cfgs[i].row->name : "(every row)", cfgs[i].reason);
}

/* ---------------------------------------------------------------- run */

static int checker_threads(void) {
    /* Leave the launching thread and the driver a CPU each. */
    const int n = mj_build_pool_default_jobs() - 2;
    return n < 1 ? 1 : n > 16 ? 16 : n;
}

int cmd_bench_mega_moe(int argc, char **argv) {
    mj_moe_bench_args a;
    char err[512];
    switch (mj_moe_bench_parse(argc, argv, &a, err, sizeof err)) {
    case MJ_MOE_ARGS_HELP:
        fputs(kUsage, stdout);
        return 0;
    case MJ_MOE_ARGS_BAD:
        return cli_usage_error(kCmd, kUsage, "%s", err);
    }
    int rank = 0, world = 1;
    const int launched = mj_launcher_env(&rank, &world);
    if (launched && a.ranks && a.ranks != world)
        return cli_usage_error(kCmd, kUsage, "--ranks %d but the launcher started %d", a.ranks,
                               world);
    const int ranks = launched ? world : a.ranks ? a.ranks : 1;
    const char *mode = launched ? "nccl" : ranks > 1 ? "emulated" : "single";

    config cfgs[MJ_MOE_ARGS_MAX_SHAPES * MJ_MOE_ARGS_MAX_ROWS];
    const int n = plan(&a, ranks, cfgs);
    int any = 0;
    for (int i = 0; i < n; i++)
        any |= runnable(&cfgs[i]);
    if (!any) {
        if (rank == 0) print_unrunnable(&a, cfgs, n, ranks);
        fputs("megajit bench mega-moe: no configuration is runnable\n", stderr);
        return CLI_EXIT_FAIL;
    }
    int rc = prebuild(&a, cfgs, n, ranks, launched);
    if (rc) return rc;

    void *comm = NULL;
    /* The device context must be current before the runtime attaches to one. */
    if (launched && mj_launcher_join(rank, world, &comm) != MJ_OK)
        return cli_fail(kCmd, "joining the ranks");
    mj_runtime_options opts = MJ_RUNTIME_OPTIONS_INIT;
    opts.cache_dir = a.cache_dir;
    mj_runtime *rt;
    if (mj_runtime_create(&rt, &opts) != MJ_OK) {
        mj_launcher_leave(comm);
        return cli_fail(kCmd, "cannot open the runtime");
    }
    mj_info info;
    mj_bench_ceilings ceil;
    if (!mj_runtime_has_device(rt) || mj_runtime_info(rt, &info) != MJ_OK) {
        mj_runtime_destroy(rt);
        mj_launcher_leave(comm);
        fputs("megajit bench mega-moe: needs a CUDA device, and none was found\n", stderr);
        return CLI_EXIT_FAIL;
    }
    if (mj_bench_measure_ceilings(rt, &ceil) != MJ_OK) {
        rc = cli_fail(kCmd, "measuring the ceilings");
        mj_runtime_destroy(rt);
        mj_launcher_leave(comm);
        return rc;
    }
    const int print = rank == 0;
    if (print) print_header(stderr, &info, &a, ranks, mode, &ceil, NULL);

    mj_bench_checker *checker = mj_bench_checker_new(checker_threads());
    cJSON *dumps = a.dump_dir && print ? cJSON_CreateArray() : NULL;
    mj_bench_host_cost host_cost = {0};
    int host_cost_done = ranks > 1 || launched; /* it needs one rank alone on the device */
    const mj_bench_moe_shape *dumped = NULL;
    for (int i = 0; checker && i < n; i++) {
        config *c = &cfgs[i];
        if (!runnable(c)) continue;
        c->points = calloc((size_t)a.num_tokens, sizeof *c->points);
        if (!c->points) {
            snprintf(c->error, sizeof c->error, "out of host memory");
            continue;
        }
        /* Rows of a shape share their routing: the first to run writes it. */
        const int dump = dumps && dumped != c->shape;
        if (dump) dumped = c->shape;
        const mj_bench_mega_moe_options o = {.shape = c->shape,
                                             .row = c->row,
                                             .tokens = a.tokens,
                                             .num_tokens = a.num_tokens,
                                             .max_tokens = a.max_tokens,
                                             .routing = a.routing,
                                             .iters = a.iters,
                                             .num_ranks = ranks,
                                             .nccl_comm = comm,
                                             .ceilings = &ceil,
                                             .checker = checker,
                                             .dump_dir = dump ? a.dump_dir : NULL,
                                             .dump_configs = dump ? dumps : NULL,
                                             .host_cost = host_cost_done ? NULL : &host_cost,
                                             .phases = a.phases,
                                             .variant = a.variant};
        if (mj_bench_mega_moe(rt, &o, c->points, &c->num_sms) != MJ_OK) {
            snprintf(c->error, sizeof c->error, "%s", mj_last_error());
            if (print)
                fprintf(stderr, "%s %s: FAILED: %s\n", c->shape->name, c->row->name, c->error);
            continue;
        }
        c->ran = 1;
        host_cost_done = 1;
        for (int t = 0; print && t < a.num_tokens; t++) {
            const mj_bench_moe_point *p = &c->points[t];
            char stream[48] = "";
            if (p->stream_us > 0) snprintf(stream, sizeof stream, "; stream %.1f us", p->stream_us);
            fprintf(stderr,
                    "%s %s T=%d: %.1f us, floor %.1f us (%s), %.2fx%s; pd+moe %.1f us; SM clock "
                    "after the passes %.0f, %.0f MHz\n",
                    c->shape->name, c->row->name, p->tokens, p->us, p->floor.floor_us,
                    mj_bench_bound_name(p->floor.bound), p->us / p->floor.floor_us, stream,
                    p->pd_moe_us, p->us_sm_clock_mhz, p->pd_moe_sm_clock_mhz);
        }
    }
    if (!checker) rc = cli_fail(kCmd, "cannot start the check threads");
    mj_bench_checker_finish(checker);
    /* A routing index that cannot be written fails the run, after its results. */
    int dump_failed = 0;
    if (!rc && dumps && mj_bench_dump_index(a.dump_dir, dumps) != MJ_OK)
        dump_failed = cli_fail(kCmd, "writing the routing index");
    cJSON_Delete(dumps);

    int failed = 0;
    for (int i = 0; i < n; i++)
        for (int t = 0; runnable(&cfgs[i]) && t < a.num_tokens; t++)
            failed |= !cfgs[i].ran || !cfgs[i].points || !cfgs[i].points[t].check.ok;
    if (print && !rc) {
        if (a.json) {
            cJSON *j = header_json(&info, &a, ranks, mode, &ceil, &host_cost);
            cJSON *results = cJSON_AddArrayToObject(j, "results");
            for (int i = 0; i < n; i++) {
                const config *c = &cfgs[i];
                if (!c->points) cJSON_AddItemToArray(results, point_json(&a, c, NULL, ranks));
                for (int t = 0; c->points && t < a.num_tokens; t++)
                    cJSON_AddItemToArray(results, point_json(&a, c, &c->points[t], ranks));
            }
            rc = cli_print_json(j);
        } else {
            static const char *const headers[] = {
                "SHAPE",          "ROW",     "T",     "BM",        "US",
                "FLOOR US",       "T/FLOOR", "BOUND", "STREAM US", "PD+MOE US",
                "(PD+MOE)/FLOOR", "STATUS"};
            cli_table *t = cli_table_new("llrrrrrlrrrl", headers);
            for (int i = 0; i < n; i++) {
                const config *c = &cfgs[i];
                if (!c->points) table_row(t, c, NULL);
                for (int k = 0; c->points && k < a.num_tokens; k++)
                    table_row(t, c, &c->points[k]);
            }
            print_header(stdout, &info, &a, ranks, mode, &ceil, &host_cost);
            cli_table_print(t, stdout);
            printf("floor = max(bytes / bulk-copy read bandwidth, FLOPs / BF16 tensor rate): "
                   "bytes = weights and scales of the experts this routing hits%s%s + tokens in "
                   "and out, FLOPs = 2 x 3 H I per (token, slot) pair%s; stream = the bulk-read "
                   "kernel reading those bytes in one launch (up to 4 GiB)\n",
                   ranks > 1 && !launched ? " on every emulated rank" : "",
                   a.variant.shared ? " + the shared expert's, once per rank" : "",
                   a.variant.shared ? " + 2 x 3 H I_s per token (the shared expert)" : "");
            cli_table_free(t);
            for (int i = 0; i < n; i++)
                for (int k = 0; cfgs[i].points && k < a.num_tokens; k++)
                    if (cfgs[i].points[k].traced)
                        print_phases(stdout, &cfgs[i], &cfgs[i].points[k]);
        }
    }
    for (int i = 0; i < n; i++)
        free(cfgs[i].points);
    mj_runtime_destroy(rt);
    mj_launcher_leave(comm);
    return rc ? rc : failed || dump_failed ? CLI_EXIT_FAIL : 0;
}
