#include "tools/bench/routing_dump.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cache/internal.h"
#include "runtime/error.h"

static mj_status write_file(const char *dir, const char *name, const void *data, size_t bytes) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f)
        return mj_fail(MJ_ERR_IO, "--dump-routing: cannot create %s: %s", path, strerror(errno));
    const size_t wrote = fwrite(data, 1, bytes, f);
    const int closed = fclose(f);
    if (wrote != bytes || closed != 0)
        return mj_fail(MJ_ERR_IO, "--dump-routing: cannot write %s: %s", path, strerror(errno));
    return MJ_OK;
}

mj_status mj_bench_dump_routing(const char *dir, cJSON *configs, const mj_bench_moe_shape *shape,
                                mj_bench_routing routing, int ranks, int tokens_per_rank,
                                int num_sets, int32_t *const *ids, float *const *weights) {
    if (mjc_mkdirs(dir) != 0)
        return mj_fail(MJ_ERR_IO, "--dump-routing: cannot create the directory %s: %s", dir,
                       strerror(errno));
    const int tokens = ranks * tokens_per_rank;
    const size_t pairs = (size_t)tokens * (size_t)shape->topk;
    cJSON *c = cJSON_CreateObject(), *sets = cJSON_CreateArray();
    cJSON_AddStringToObject(c, "shape", shape->name);
    cJSON_AddNumberToObject(c, "hidden", shape->hidden);
    cJSON_AddNumberToObject(c, "intermediate", shape->intermediate);
    cJSON_AddNumberToObject(c, "experts", shape->experts);
    cJSON_AddNumberToObject(c, "topk", shape->topk);
    cJSON_AddStringToObject(c, "routing", mj_bench_routing_name(routing));
    cJSON_AddNumberToObject(c, "ranks", ranks);
    cJSON_AddNumberToObject(c, "tokens_per_rank", tokens_per_rank);
    cJSON_AddNumberToObject(c, "tokens", tokens);
    cJSON_AddItemToObject(c, "sets", sets);
    cJSON_AddItemToArray(configs, c);
    for (int s = 0; s < num_sets; s++) {
        char stem[160], ids_name[192], w_name[192];
        snprintf(stem, sizeof stem, "%s-%s-r%d-t%d-s%d", shape->name,
                 mj_bench_routing_name(routing), ranks, tokens_per_rank, s);
        snprintf(ids_name, sizeof ids_name, "%s.ids", stem);
        snprintf(w_name, sizeof w_name, "%s.weights", stem);
        mj_status st = write_file(dir, ids_name, ids[s], pairs * sizeof(int32_t));
        if (st == MJ_OK) st = write_file(dir, w_name, weights[s], pairs * sizeof(float));
        if (st != MJ_OK) return st;
        cJSON *set = cJSON_CreateObject();
        cJSON_AddStringToObject(set, "ids", ids_name);
        cJSON_AddStringToObject(set, "weights", w_name);
        cJSON_AddItemToArray(sets, set);
    }
    return MJ_OK;
}

mj_status mj_bench_dump_index(const char *dir, const cJSON *configs) {
    cJSON *index = cJSON_CreateObject();
    cJSON_AddNumberToObject(index, "version", 1);
    cJSON_AddItemReferenceToObject(index, "configs", (cJSON *)configs);
    char *text = cJSON_Print(index);
    cJSON_Delete(index);
    if (!text) return mj_fail(MJ_ERR_NOMEM, "--dump-routing: out of memory");
    mj_status st = write_file(dir, "index.json", text, strlen(text));
    cJSON_free(text);
    return st;
}
