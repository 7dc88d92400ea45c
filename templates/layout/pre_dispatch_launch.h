/*
 * Launch shape of the pre-dispatch family, shared by the host launcher and the
 * kernels (plain C for gcc and NVRTC; macros so kernels get constants).
 *
 * A thread owns 32 consecutive elements of one token row: one MX block, two
 * NVFP4 blocks, four 16-byte loads. A row takes whole warps, so the NVFP4 row
 * maximum reduces warp by warp; the threads past the row's last chunk (hidden
 * not a multiple of 1024: 2880 is 90 chunks on 96 threads) load and store
 * nothing and only join the warp's shuffles and that reduction. A CTA holds as
 * many rows as fit in about MJ_PD_CTA_THREADS threads.
 */
#ifndef MJ_PRE_DISPATCH_LAUNCH_H
#define MJ_PRE_DISPATCH_LAUNCH_H

#include "layout/symm_layout.h"

#define MJ_PD_ELEMS_PER_THREAD 32
#define MJ_PD_CTA_THREADS 256
#define MJ_PD_ROW_THREADS(hidden) (((hidden) / MJ_PD_ELEMS_PER_THREAD + 31) / 32 * 32)
#define MJ_PD_ROWS_PER_CTA(hidden)                                                                 \
    (MJ_PD_ROW_THREADS(hidden) >= MJ_PD_CTA_THREADS                                                \
         ? 1                                                                                       \
         : MJ_PD_CTA_THREADS / MJ_PD_ROW_THREADS(hidden))
#define MJ_PD_BLOCK_THREADS(hidden) (MJ_PD_ROWS_PER_CTA(hidden) * MJ_PD_ROW_THREADS(hidden))

/* The check kernel: threads per CTA and ids per thread per pass; at least one
 * CTA, which the main kernel waits for even when there are no tokens, and at
 * most one per workspace slot (CTAs then stride over the ids). */
#define MJ_PD_CHECK_THREADS 256
#define MJ_PD_CHECK_IDS_PER_THREAD 4
#define MJ_PD_CHECK_IDS_PER_CTA (MJ_PD_CHECK_THREADS * MJ_PD_CHECK_IDS_PER_THREAD)
MJ_LAYOUT_FN unsigned mj_pd_check_ctas(int topk, int num_tokens) {
    long long ids = (long long)num_tokens * topk;
    long long ctas = (ids + MJ_PD_CHECK_IDS_PER_CTA - 1) / MJ_PD_CHECK_IDS_PER_CTA;
    return ctas < 1                           ? 1u
           : ctas > MJ_WS_PD_CHECK_SLOT_COUNT ? (unsigned)MJ_WS_PD_CHECK_SLOT_COUNT
                                              : (unsigned)ctas;
}

/* The main kernel is persistent: CTAs resident per SM (its launch bounds
 * promise them). Quantizing formats stage rows in shared memory, each warp
 * keeping MJ_PD_STAGES - 1 rows of its slice in flight while it quantizes
 * another (dynamic shared memory, at most 48 KiB per CTA); BF16 copies
 * through registers with MJ_PD_BF16_BATCH 16-byte loads per thread in flight,
 * only MJ_PD_BF16_EARLY of the first batch issued before the wait for the
 * check grid: a larger burst there delays the check's own loads (measured). */
#define MJ_PD_CTAS_PER_SM 4
#define MJ_PD_STAGES 2
#define MJ_PD_BF16_BATCH 8
#define MJ_PD_BF16_EARLY 2
/* Each warp stages 2 KiB (its 1024 elements of a row) per stage. */
#define MJ_PD_SMEM_BYTES(hidden, fmt)                                                              \
    ((fmt) == 0 ? 0 : MJ_PD_STAGES * MJ_PD_BLOCK_THREADS(hidden) * 64)

/* Main-kernel grid: enough CTAs for the token row blocks and for the top-k
 * padding entries of rows [num_tokens, max_tokens) (one per thread), at most
 * num_sms * MJ_PD_CTAS_PER_SM; CTAs stride over both. */
MJ_LAYOUT_FN unsigned mj_pd_token_blocks(int hidden, int num_tokens) {
    int rows = MJ_PD_ROWS_PER_CTA(hidden);
    return (unsigned)((num_tokens + rows - 1) / rows);
}
MJ_LAYOUT_FN unsigned mj_pd_grid(int hidden, int topk, int num_tokens, int max_tokens,
                                 int num_sms) {
    long long pad = (long long)(max_tokens - num_tokens) * topk,
              threads = MJ_PD_BLOCK_THREADS(hidden);
    long long need = (long long)mj_pd_token_blocks(hidden, num_tokens);
    long long pad_ctas = (pad + threads - 1) / threads;
    long long cap = (long long)num_sms * MJ_PD_CTAS_PER_SM;
    if (pad_ctas > need) need = pad_ctas;
    /* Past the cap, as few rounds as the cap allows, with every CTA doing the
     * same number: 4096 rows on 528 CTAs would leave 128 idle for the last. */
    if (need > cap) {
        long long rounds = (need + cap - 1) / cap;
        need = (need + rounds - 1) / rounds;
    }
    return (unsigned)(need < 1 ? 1 : need);
}

#endif /* MJ_PRE_DISPATCH_LAUNCH_H */
