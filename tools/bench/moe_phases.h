/* Where one MegaMoE launch's time goes, from the phase stamps its CTAs write
 * when mj_moe_args.trace is set (templates/layout/moe_layout.h): the
 * prologue, each GEMM's tasks split into waiting for the first stage (and
 * whether its weights or its token tile came last), the K loop and the
 * epilogue (stores, then fence and release), the gaps between tasks, the
 * combine and the tail.
 * Times are microseconds; "from launch" means from the first CTA's entry. */
#ifndef MJ_TOOLS_BENCH_MOE_PHASES_H
#define MJ_TOOLS_BENCH_MOE_PHASES_H

#include <stdint.h>

/* The rows of the tiles whose tasks the phases count apart: at large T an
 * expert's second tile of a few tokens streams and decodes the expert's whole
 * weights, as a full tile does (32: the 128-token tiles' narrowest loop). */
#define MJ_BENCH_MOE_NARROW_ROWS 32

typedef struct mj_bench_moe_gemm_phases {
    int tasks;          /* traced tasks of this GEMM, over all CTAs */
    double task_us;     /* mean: taken -> epilogue done */
    double first_us;    /* mean: taken -> first stage landed */
    double loop_us;     /* mean: first stage -> K loop done */
    double epilogue_us; /* mean: K loop done -> epilogue done, = stores_us + release_us */
    double stores_us;   /* mean: K loop done -> math warpgroup 0's results stored */
    double release_us;  /* mean: -> epilogue done (GEMM 1's proxy fence, barriers, release post) */
    double weights_us;  /* mean: the task's first weight copy issued -> first stage landed */
    double tile_us;     /* mean: its token tile found ready -> first stage landed */
    double tile_lag_us; /* mean: how much later than that weight copy the tile was ready (or 0) */
    double loop_gbps;   /* weight bytes / K loop time, per CTA (mean of tasks) */
    int narrow_tasks;   /* tasks whose token tile holds at most MJ_BENCH_MOE_NARROW_ROWS rows */
    double narrow_loop_us;    /* their mean K loop */
    double narrow_loop_share; /* their K-loop time over the GEMM's (0 without tasks) */
    double start_us;          /* first task taken, from launch */
    double end_us;            /* last epilogue done, from launch */
} mj_bench_moe_gemm_phases;

typedef struct mj_bench_moe_phases {
    int ctas;
    int untraced;          /* tasks past MJ_MOE_TRACE_TASKS of a CTA (not in the means) */
    double span_us;        /* first entry -> last end */
    double entry_skew_us;  /* first -> last CTA entry */
    double inputs_us;      /* mean: entry -> past griddepcontrol.wait */
    double routing_us;     /* mean: -> routing tables built */
    double pull_us;        /* mean: -> math warpgroup 0 starts (rows pulled) */
    double first_stage_us; /* mean over CTAs with a task: entry -> their first task's first
                            * stage landed (the GEMM means spread it over every task) */
    mj_bench_moe_gemm_phases gemm[2];
    double between_us;      /* mean per CTA: sum of gaps between one task's epilogue and the next */
    double combine_us;      /* mean: last task done -> CTA end (combine, end bookkeeping) */
    double last_compute_us; /* the last CTA's last task done, from launch */
    double busy;            /* K-loop time over all CTAs / (ctas x span) */
} mj_bench_moe_phases;

/* trace: [ctas][MJ_MOE_TRACE_WORDS] as the kernel wrote it (zeroed before).
 * Returns 0, or -1 when a CTA's stamps are missing or out of order (the
 * launch did not finish, or the trace was not written). */
int mj_bench_moe_phases_of(const uint64_t *trace, int ctas, mj_bench_moe_phases *out);

#endif
