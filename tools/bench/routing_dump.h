/* The routing of each MegaMoE benchmark configuration, written for the
 * PyTorch peer (bench/torch_moe_peer.py) so it runs on the same top-k ids and
 * weights: per input set, <stem>-s<set>.ids (int32 [tokens][topk]) and
 * <stem>-s<set>.weights (float32 [tokens][topk]), little-endian, all ranks'
 * tokens in rank order; and index.json listing every configuration:
 *
 *   {"version": 1, "configs": [{"shape": "deepseek-v3", "hidden": 7168,
 *     "intermediate": 2048, "experts": 256, "topk": 8, "routing": "uniform",
 *     "ranks": 1, "tokens_per_rank": 64, "tokens": 64,
 *     "sets": [{"ids": "deepseek-v3-uniform-r1-t64-s0.ids",
 *               "weights": "deepseek-v3-uniform-r1-t64-s0.weights"}, ...]}]}
 */
#ifndef MJ_TOOLS_BENCH_ROUTING_DUMP_H
#define MJ_TOOLS_BENCH_ROUTING_DUMP_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "include/megajit.h"
#include "tools/bench/moe_routing.h"
#include "tools/bench/moe_shapes.h"

/* Writes the sets' files into dir (created with its parents when missing) and appends the
 * configuration's entry to configs. ids[s] and weights[s]: set s, tokens x
 * topk each. */
mj_status mj_bench_dump_routing(const char *dir, cJSON *configs, const mj_bench_moe_shape *shape,
                                mj_bench_routing routing, int ranks, int tokens_per_rank,
                                int num_sets, int32_t *const *ids, float *const *weights);
/* Writes dir/index.json over configs. */
mj_status mj_bench_dump_index(const char *dir, const cJSON *configs);

#endif
