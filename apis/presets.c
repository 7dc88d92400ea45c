/*
 * Embedded deployment presets. They are JSON text run through
 * mj_manifest_parse so a preset is validated exactly like a user's manifest
 * and can be copied out as a starting point (docs/manifest.md lists them).
 */
#include <stdio.h>
#include <string.h>

#include "include/megajit.h"
#include "runtime/error.h"

/* kNames[i] names kJson[i]; kNames is NULL-terminated for mj_manifest_preset_names. */
static const char *const kNames[] = {
    "deepseek-v3-ep8", "kimi-k2-ep8", "qwen3-235b-ep4", "gpt-oss-120b-ep1",
    "gpt-oss-20b-ep1", "glm-4.5-ep8", "minimax-m2-ep8", NULL};

static const char *const kJson[] = {
    "{\"comment\": \"DeepSeek-V3 MoE layers, expert parallel over 8 ranks, with the"
    " shared expert fused\","
    " \"archs\": [\"sm_90a\"],"
    " \"layers\": [{\"name\": \"moe\", \"hidden\": 7168, \"intermediate\": 2048,"
    " \"experts\": 256, \"topk\": 8, \"ranks\": 8, \"max_tokens_per_rank\": 4096,"
    " \"weight_format\": \"mxfp8\", \"dispatch_format\": \"mxfp8\","
    " \"activation\": \"swiglu\", \"shared_intermediate\": 2048,"
    " \"shared_format\": \"mxfp8\", \"num_sms\": 0}]}",

    "{\"comment\": \"Kimi K2 MoE layers, expert parallel over 8 ranks, with the shared"
    " expert fused (MXFP8 beside the MXFP4 experts)\","
    " \"archs\": [\"sm_90a\"],"
    " \"layers\": [{\"name\": \"moe\", \"hidden\": 7168, \"intermediate\": 2048,"
    " \"experts\": 384, \"topk\": 8, \"ranks\": 8, \"max_tokens_per_rank\": 4096,"
    " \"weight_format\": \"mxfp4\", \"dispatch_format\": \"mxfp8\","
    " \"activation\": \"swiglu\", \"shared_intermediate\": 2048,"
    " \"shared_format\": \"mxfp8\", \"num_sms\": 0}]}",

    "{\"comment\": \"Qwen3-235B-A22B MoE layers, expert parallel over 4 ranks\","
    " \"archs\": [\"sm_90a\"],"
    " \"layers\": [{\"name\": \"moe\", \"hidden\": 4096, \"intermediate\": 1536,"
    " \"experts\": 128, \"topk\": 8, \"ranks\": 4, \"max_tokens_per_rank\": 4096,"
    " \"weight_format\": \"nvfp4\", \"dispatch_format\": \"nvfp4\","
    " \"activation\": \"swiglu\", \"num_sms\": 0}]}",

    "{\"comment\": \"gpt-oss-120b on one rank, W4A16, at the model's own hidden and"
    " intermediate sizes (2880 = 45 x 64: nothing padded), with its expert biases\","
    " \"archs\": [\"sm_90a\"],"
    " \"layers\": [{\"name\": \"moe\", \"hidden\": 2880, \"intermediate\": 2880,"
    " \"experts\": 128, \"topk\": 4, \"ranks\": 1, \"max_tokens_per_rank\": 8192,"
    " \"weight_format\": \"mxfp4\", \"dispatch_format\": \"bf16\","
    " \"activation\": \"swigluoai\", \"clamp\": 7.0, \"expert_biases\": true,"
    " \"num_sms\": 0}]}",

    "{\"comment\": \"gpt-oss-20b on one rank, W4A16: gpt-oss-120b's layer with 32 experts\","
    " \"archs\": [\"sm_90a\"],"
    " \"layers\": [{\"name\": \"moe\", \"hidden\": 2880, \"intermediate\": 2880,"
    " \"experts\": 32, \"topk\": 4, \"ranks\": 1, \"max_tokens_per_rank\": 8192,"
    " \"weight_format\": \"mxfp4\", \"dispatch_format\": \"bf16\","
    " \"activation\": \"swigluoai\", \"clamp\": 7.0, \"expert_biases\": true,"
    " \"num_sms\": 0}]}",

    "{\"comment\": \"GLM-4.5 MoE layers, expert parallel over 8 ranks, with the shared"
    " expert fused\","
    " \"archs\": [\"sm_90a\"],"
    " \"layers\": [{\"name\": \"moe\", \"hidden\": 5120, \"intermediate\": 1536,"
    " \"experts\": 160, \"topk\": 8, \"ranks\": 8, \"max_tokens_per_rank\": 4096,"
    " \"weight_format\": \"mxfp8\", \"dispatch_format\": \"mxfp8\","
    " \"activation\": \"swiglu\", \"shared_intermediate\": 1536,"
    " \"shared_format\": \"mxfp8\", \"num_sms\": 0}]}",

    "{\"comment\": \"MiniMax-M2 MoE layers, expert parallel over 8 ranks\","
    " \"archs\": [\"sm_90a\"],"
    " \"layers\": [{\"name\": \"moe\", \"hidden\": 3072, \"intermediate\": 1536,"
    " \"experts\": 256, \"topk\": 8, \"ranks\": 8, \"max_tokens_per_rank\": 4096,"
    " \"weight_format\": \"mxfp8\", \"dispatch_format\": \"mxfp8\","
    " \"activation\": \"swiglu\", \"num_sms\": 0}]}",
};

enum { NUM_PRESETS = sizeof kJson / sizeof kJson[0] };
_Static_assert(sizeof kNames / sizeof kNames[0] == NUM_PRESETS + 1, "one name per preset");

const char *const *mj_manifest_preset_names(void) {
    return kNames;
}

mj_status mj_manifest_preset(const char *name, mj_manifest **out) {
    mj_clear_error();
    if (!out) return mj_fail(MJ_ERR_INVALID_ARG, "mj_manifest_preset: out is NULL");
    *out = NULL;
    if (!name) return mj_fail(MJ_ERR_INVALID_ARG, "mj_manifest_preset: name is NULL");
    for (size_t i = 0; i < NUM_PRESETS; i++)
        if (strcmp(name, kNames[i]) == 0) return mj_manifest_parse(kJson[i], out);
    char known[256] = "";
    for (size_t i = 0; i < NUM_PRESETS; i++) {
        size_t len = strlen(known);
        snprintf(known + len, sizeof known - len, "%s%s", i ? ", " : "", kNames[i]);
    }
    return mj_fail(MJ_ERR_NOT_FOUND, "unknown preset \"%s\" (known: %s)", name, known);
}
