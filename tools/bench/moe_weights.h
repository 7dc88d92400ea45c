/* The MegaMoE benchmark's expert weights on the host (pure: no device).
 *
 * Streaming every expert's own random bytes would mean generating tens of GB
 * per format row; instead there are `classes` random projections, and expert
 * e is of class c = e % classes: gate = projection c, up = c + 1, down =
 * c + 2 (mod classes). The projections are stored as a ring of classes + 1
 * (the last repeats the first), so an expert's gate and up are adjacent: one
 * [2I][H] W1 block, as the fp64 reference takes it. The device loads the
 * same bytes, so the reference of any routing needs only `classes` experts:
 * ids mapped to their class. Every projection has I x H elements (gate and up
 * are [I][H], down [H][I]), so one ring serves all three.
 *
 * Shared by the check jobs of one (shape, row), which may outlive the run
 * that made them: reference counted. */
#ifndef MJ_TOOLS_BENCH_MOE_WEIGHTS_H
#define MJ_TOOLS_BENCH_MOE_WEIGHTS_H

#include <stddef.h>
#include <stdint.h>

#include "tests/reference/moe_ref.h"

/* Enough classes that gate, up and down of an expert differ and that a token
 * routed to a wrong expert is usually routed to another class. */
#define MJ_BENCH_WEIGHT_CLASSES 3

typedef struct mj_bench_weights {
    int refs;
    int classes;
    size_t data_bytes; /* one projection's elements */
    size_t sf_bytes;   /* one projection's block scales; 0 for BF16 */
    uint8_t *data;     /* (classes + 1) x data_bytes */
    uint8_t *sf;       /* (classes + 1) x sf_bytes, NULL for BF16 */
    /* With biases: classes x (2I + H) fp32, class c's gate, up and down
     * biases, which every expert of the class loads; else NULL. */
    float *bias;
    int fmt, hidden, intermediate;
    /* The shared expert (mj_bench_weights_add_shared), in shared_fmt: W1
     * [2 I_s][H] (gate rows, then up rows) and W2 [H][I_s], I_s =
     * shared_intermediate, their scales (NULL for BF16); 0 and NULL without
     * one. */
    int shared_fmt, shared_intermediate;
    size_t shared_w1_bytes, shared_w1_sf_bytes, shared_w2_bytes, shared_w2_sf_bytes;
    uint8_t *shared_w1, *shared_w1_sf, *shared_w2, *shared_w2_sf;
} mj_bench_weights;

/* Random projections of weight format fmt: BF16 of magnitude 2^-9..2^-4,
 * E4M3 of magnitude <= 1.875 (never NaN), E2M1 any code; UE8M0 scales
 * 120..130 and UE4M3 scales 0x30..0x40, inside what mj_weights_load accepts
 * for every row (MX bytes within 126 of each other); with biases, fp32
 * biases of magnitude at most 2^-4. NULL when out of memory. One reference
 * held. */
mj_bench_weights *mj_bench_weights_new(int fmt, int hidden, int intermediate, int classes,
                                       int biases, uint64_t seed);
/* Adds a shared expert of intermediate size shared_intermediate (> 0, a
 * multiple of the group of w's format) with random weights of the same kind,
 * drawn from seed; before w is shared with any check job. 0, or -1 when out
 * of memory or w has one already (w unchanged). */
int mj_bench_weights_add_shared(mj_bench_weights *w, int shared_fmt, int shared_intermediate,
                                uint64_t seed);
mj_bench_weights *mj_bench_weights_retain(mj_bench_weights *w);
void mj_bench_weights_release(mj_bench_weights *w);

/* Offsets into data / sf (in units of one projection) of expert e's gate,
 * up and down. */
typedef struct mj_bench_expert_sources {
    int gate, up, down;
} mj_bench_expert_sources;
mj_bench_expert_sources mj_bench_weights_sources(const mj_bench_weights *w, int expert);

/* The fp64 reference's view of class c (its W1 = gate and up, adjacent; its
 * biases when there are). */
mjr_expert_weights mj_bench_weights_class(const mj_bench_weights *w, int c);

/* The fp64 reference's view of the shared expert (alphas 1, no biases:
 * experts[E] of mjr_moe_forward); all NULL without one. */
mjr_expert_weights mj_bench_weights_shared(const mj_bench_weights *w);

/* Expert e's bias of projection proj (0 gate, 1 up, 2 down: I, I or H
 * floats); NULL without biases. */
const float *mj_bench_weights_bias(const mj_bench_weights *w, int expert, int proj);

#endif
