/*
 * Launch shape of the pre-dispatch family, shared by the host launcher and the
 * kernels (plain C for gcc and NVRTC).
 */
#ifndef MJ_PRE_DISPATCH_LAUNCH_H
#define MJ_PRE_DISPATCH_LAUNCH_H

/* Tokens per CTA of the main kernel: each thread keeps this many 16-byte loads
 * in flight before the first use. Quantizing formats hold more registers per
 * token; two tokens keep them under the 32 that let two CTAs share an SM, so
 * one CTA computes while the other waits on memory. */
#define MJ_PD_TOKENS_PER_CTA_BF16 4
#define MJ_PD_TOKENS_PER_CTA_QUANT 2
/* The check kernel: threads per CTA and ids per thread. */
#define MJ_PD_CHECK_THREADS 256
#define MJ_PD_CHECK_IDS_PER_THREAD 4
#define MJ_PD_CHECK_IDS_PER_CTA (MJ_PD_CHECK_THREADS * MJ_PD_CHECK_IDS_PER_THREAD)

/* Main-kernel grid: token CTAs, then CTAs that write the top-k padding rows
 * (one entry per thread; a CTA has hidden / 8 threads). */
static inline int mj_pd_tokens_per_cta(int fmt) {
    return fmt == 0 /* MJ_FMT_BF16 */ ? MJ_PD_TOKENS_PER_CTA_BF16 : MJ_PD_TOKENS_PER_CTA_QUANT;
}
static inline unsigned mj_pd_token_ctas(int fmt, int num_tokens) {
    int per_cta = mj_pd_tokens_per_cta(fmt);
    return (unsigned)((num_tokens + per_cta - 1) / per_cta);
}
static inline unsigned mj_pd_grid(int fmt, int hidden, int topk, int num_tokens, int max_tokens) {
    long long pad = (long long)(max_tokens - num_tokens) * topk, threads = hidden / 8;
    return mj_pd_token_ctas(fmt, num_tokens) + (unsigned)((pad + threads - 1) / threads);
}

#endif /* MJ_PRE_DISPATCH_LAUNCH_H */
