/*
 * Deployment manifests: what a deployment will run, so every kernel it can
 * request is compiled ahead of time (`megajit precompile`).
 *
 * Schema (JSON; unknown keys and duplicate keys are rejected everywhere):
 *
 *   {
 *     "comment": "free text (optional)",
 *     "archs": ["sm_90a", "sm_100a"],            non-empty; duplicates collapse
 *     "layers": [                                non-empty
 *       {
 *         "name": "moe",                         optional string
 *         "comment": "free text",                optional string
 *         "hidden": 7168,                        integers within the limits of
 *         "intermediate": 2048,                  runtime/limits.h, which the API
 *         "experts": 256,                        checks too
 *         "topk": 8,
 *         "ranks": 8,
 *         "max_tokens_per_rank": 4096,
 *         "weight_format": "mxfp4",              bf16 | mxfp8 | mxfp4 | nvfp4
 *         "dispatch_format": "mxfp8",            bf16 | mxfp8 | mxfp4 | nvfp4
 *         "activation": "swiglu",                swiglu | swigluoai | situ
 *         "clamp": 7.0,                          optional positive number (swiglu family)
 *         "swiglu_alpha": 1.0,                   optional numbers: the activation's
 *         "swiglu_beta": 0.0,                    parameters (mj_moe_config; 0 =
 *         "situ_gate_beta": 4.0,                 standard; nonzero only with its
 *         "situ_up_beta": 25.0,                  own activation)
 *         "unfold_mx_scales": false,             optional boolean, no effect
 *                                                (mj_moe_config.unfold_mx_scales)
 *         "expert_biases": false,                optional boolean
 *                                                (mj_moe_config.expert_biases)
 *         "num_sms": 0                           optional, 0..MJ_LIMIT_NUM_SMS_MAX (0 = all
 *                                                SMs; MegaMoE kernels are then compiled
 *                                                for 132, the H100/H200 SM count, on sm_90a)
 *       }
 *     ]
 *   }
 *
 * Every error is MJ_ERR_INVALID_ARG with a sentence "manifest: <path>: <why>",
 * e.g. "manifest: layers[1].hidden: must be a multiple of 64 in 64..8192
 * (got 100)". Strings must be valid UTF-8, as JSON text must.
 *
 * Kernel enumeration walks arch x layer x kernel family (runtime/families/);
 * each family adds the specs the runtime would request for that layer. Specs
 * are de-duplicated by their bytes, which is also the runtime's in-memory key.
 */
#include <cjson/cJSON.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apis/manifest_impl.h"
#include "include/megajit.h"
#include "runtime/configs.h"
#include "runtime/error.h"
#include "runtime/families/family.h"
#include "runtime/jit.h"
#include "runtime/kernel_spec.h"
#include "runtime/limits.h"
#include "runtime/spec_list.h"
#include "runtime/utf8.h"

enum { MAX_ARCHS = 8 };

static const mj_arch kKnownArchs[] = {MJ_ARCH_SM90A, MJ_ARCH_SM100A};

typedef struct layer {
    char *name;
    mj_moe_config cfg; /* rank 0 and block_m 0: the layer as every rank launches it */
    int num_sms;
} layer;

struct mj_manifest {
    mj_arch archs[MAX_ARCHS];
    size_t num_archs;
    layer *layers;
    size_t num_layers;
    mj_spec_list kernels;
};

/* ------------------------------------------------------------ enumeration */

/* The SM count a layer with num_sms 0 ("all SMs") is compiled for, per arch:
 * precompiling runs without a device, so the arch's flagship part stands in. */
static int default_num_sms(mj_arch arch) {
    return arch == MJ_ARCH_SM90A ? 132 : 0;
}

/* Every kernel family adds the specs the runtime would request for each
 * layer on each arch. */
static mj_status enumerate(const mj_arch *archs, size_t num_archs, const layer *layers,
                           size_t num_layers, mj_spec_list *out) {
    memset(out, 0, sizeof *out);
    mj_status st = MJ_OK;
    for (size_t a = 0; a < num_archs && st == MJ_OK; a++)
        for (size_t l = 0; l < num_layers && st == MJ_OK; l++) {
            const mj_moe_config *moe = &layers[l].cfg;
            const mj_symm_config buffer = mj_symm_config_of_moe(moe);
            const mj_family_request req = {
                .buffer = &buffer,
                .layer = moe,
                .num_sms = layers[l].num_sms ? layers[l].num_sms : default_num_sms(archs[a]),
                /* A deployment's ranks are processes on other GPUs: system scope. */
                .sys_scope = 1,
            };
            for (int f = 0; f < MJ_FAMILY_COUNT_ && st == MJ_OK; f++)
                st = mj_family_get((mj_family)f)->enumerate(&req, archs[a], mj_spec_list_add, out);
            if (st != MJ_OK) {
                /* parse_layer checked what the spec builders check, so this
                 * is a rule of theirs it does not know yet: name the layer. */
                char why[1024];
                snprintf(why, sizeof why, "%s", mj_last_error());
                st = mj_fail(st, "manifest: layers[%zu]: %s", l, why);
            }
        }
    if (st != MJ_OK) mj_spec_list_free(out);
    return st;
}

/* ---------------------------------------------------------------- parsing */

static const char *known_arch_list(void) {
    return "sm_90a, sm_100a";
}

static mj_status add_arch(mj_arch *archs, size_t *num_archs, const char *name, const char *path) {
    mj_arch a = mj_arch_parse(name);
    int known = 0;
    for (size_t i = 0; i < sizeof kKnownArchs / sizeof kKnownArchs[0]; i++)
        known |= a == kKnownArchs[i];
    if (!known)
        return mj_fail(MJ_ERR_INVALID_ARG, "manifest: %s: unknown architecture \"%s\" (known: %s)",
                       path, name, known_arch_list());
    for (size_t i = 0; i < *num_archs; i++)
        if (archs[i] == a) return MJ_OK;
    archs[(*num_archs)++] = a;
    return MJ_OK;
}

/* Rejects keys outside `allowed` and repeated keys, naming the first offender. */
static mj_status check_keys(const cJSON *obj, const char *const *allowed, const char *prefix) {
    for (const cJSON *c = obj->child; c; c = c->next) {
        int ok = 0;
        for (size_t i = 0; allowed[i]; i++)
            ok |= strcmp(c->string, allowed[i]) == 0;
        if (!ok)
            return mj_fail(MJ_ERR_INVALID_ARG, "manifest: %s%s: unknown key", prefix, c->string);
        for (const cJSON *d = obj->child; d != c; d = d->next)
            if (strcmp(d->string, c->string) == 0)
                return mj_fail(MJ_ERR_INVALID_ARG, "manifest: %s%s: duplicate key", prefix,
                               c->string);
    }
    return MJ_OK;
}

/* JSON numbers are doubles: an integer is exact up to 2^53, and the limits
 * (runtime/limits.h) then judge its size, so an absurd value is named with the
 * rule it breaks rather than wrapped into an int. */
static mj_status get_integer(const cJSON *obj, size_t li, const char *key, int required,
                             long long *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v) {
        if (required)
            return mj_fail(MJ_ERR_INVALID_ARG, "manifest: layers[%zu].%s: missing", li, key);
        *out = 0;
        return MJ_OK;
    }
    if (!cJSON_IsNumber(v) || !(fabs(v->valuedouble) <= 9007199254740992.0) ||
        v->valuedouble != floor(v->valuedouble))
        return mj_fail(MJ_ERR_INVALID_ARG, "manifest: layers[%zu].%s: must be an integer", li, key);
    *out = (long long)v->valuedouble;
    return MJ_OK;
}

static mj_status get_string(const cJSON *obj, size_t li, const char *key, int required,
                            const char **out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    *out = NULL;
    if (!v) {
        if (required)
            return mj_fail(MJ_ERR_INVALID_ARG, "manifest: layers[%zu].%s: missing", li, key);
        return MJ_OK;
    }
    if (!cJSON_IsString(v))
        return mj_fail(MJ_ERR_INVALID_ARG, "manifest: layers[%zu].%s: must be a string", li, key);
    *out = v->valuestring;
    return MJ_OK;
}

static mj_status get_format(const cJSON *obj, size_t li, const char *key, mj_format *out) {
    const char *s;
    mj_status st = get_string(obj, li, key, 1, &s);
    if (st != MJ_OK) return st;
    if (mj_format_parse(s, out) != MJ_OK)
        return mj_fail(MJ_ERR_INVALID_ARG,
                       "manifest: layers[%zu].%s: unknown format \"%s\" (known: bf16, mxfp8, "
                       "mxfp4, nvfp4)",
                       li, key, s);
    return MJ_OK;
}

static mj_status get_activation(const cJSON *obj, size_t li, mj_activation *out) {
    const char *name;
    mj_status st = get_string(obj, li, "activation", 1, &name);
    if (st != MJ_OK) return st;
    const int act = mj_moe_activation_by_name(name);
    if (act >= 0) {
        *out = (mj_activation)act;
        return MJ_OK;
    }
    char known[128] = "";
    for (int a = 0; a < MJ_ACT_COUNT; a++) {
        size_t len = strlen(known);
        snprintf(known + len, sizeof known - len, "%s%s", a ? ", " : "", mj_moe_activation_name(a));
    }
    return mj_fail(MJ_ERR_INVALID_ARG,
                   "manifest: layers[%zu].activation: unknown activation \"%s\" (known: %s)", li,
                   name, known);
}

/* An optional boolean as 0 / 1; absent keeps *out. */
static mj_status get_bool(const cJSON *obj, size_t li, const char *key, int *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v) return MJ_OK;
    if (!cJSON_IsBool(v))
        return mj_fail(MJ_ERR_INVALID_ARG, "manifest: layers[%zu].%s: must be true or false", li,
                       key);
    *out = cJSON_IsTrue(v);
    return MJ_OK;
}

/* An optional number that must be a finite float, and not one that rounds
 * to 0 (which would mean the standard value); absent keeps *out. */
static mj_status get_float(const cJSON *obj, size_t li, const char *key, float *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v) return MJ_OK;
    if (!cJSON_IsNumber(v) || !(fabs(v->valuedouble) <= FLT_MAX))
        return mj_fail(MJ_ERR_INVALID_ARG, "manifest: layers[%zu].%s: must be a finite number", li,
                       key);
    if (v->valuedouble != 0 && (float)v->valuedouble == 0)
        return mj_fail(MJ_ERR_INVALID_ARG,
                       "manifest: layers[%zu].%s: %g rounds to 0 as a float (0 means the standard "
                       "value)",
                       li, key, v->valuedouble);
    *out = (float)v->valuedouble;
    return MJ_OK;
}

/* The activation and clamp rules of the API's mj_moe_config_check, named. */
static mj_status check_activation(const mj_moe_config *c, size_t li) {
    const char *act = mj_moe_activation_name((int)c->activation);
    const mj_moe_format_row *row =
        mj_moe_format_find((int)c->weight_format, (int)c->dispatch_format);
    if (row && !mj_moe_activation_allowed(row, (int)c->activation))
        return mj_fail(MJ_ERR_INVALID_ARG,
                       "manifest: layers[%zu].activation: %s is not available with the %s formats",
                       li, act, row->name);
    if (c->clamp > 0 && !mj_moe_activation_has_clamp((int)c->activation))
        return mj_fail(MJ_ERR_INVALID_ARG,
                       "manifest: layers[%zu].clamp: only swiglu and swigluoai take a clamp "
                       "(activation is %s)",
                       li, act);
    char where[48];
    snprintf(where, sizeof where, "manifest: layers[%zu].", li);
    mj_status st = mj_moe_activation_params_check(c, where);
    return st == MJ_OK && row ? mj_moe_shared_check(c, row, where) : st;
}

static mj_status parse_layer(const cJSON *obj, size_t li, layer *l) {
    static const char *const keys[] = {"name",           "comment",
                                       "hidden",         "intermediate",
                                       "experts",        "topk",
                                       "ranks",          "max_tokens_per_rank",
                                       "weight_format",  "dispatch_format",
                                       "activation",     "clamp",
                                       "swiglu_alpha",   "swiglu_beta",
                                       "situ_gate_beta", "situ_up_beta",
                                       "num_sms",        "unfold_mx_scales",
                                       "expert_biases",  "shared_intermediate",
                                       "shared_format",  NULL};
    if (!cJSON_IsObject(obj))
        return mj_fail(MJ_ERR_INVALID_ARG, "manifest: layers[%zu]: must be an object", li);
    char prefix[48];
    snprintf(prefix, sizeof prefix, "layers[%zu].", li);
    mj_status st = check_keys(obj, keys, prefix);
    const char *name = NULL, *comment;
    mj_shape shape = {.moe = 1};
    long long num_sms = 0;
    mj_moe_config *c = &l->cfg;
    *c = (mj_moe_config)MJ_MOE_CONFIG_INIT;
    if (st == MJ_OK) st = get_string(obj, li, "name", 0, &name);
    if (st == MJ_OK) st = get_string(obj, li, "comment", 0, &comment);
    for (int f = 0; st == MJ_OK && f < MJ_SHAPE_FIELDS_; f++)
        if (f != MJ_SHAPE_DISPATCH_FORMAT)
            st = get_integer(obj, li, mj_shape_field_name(f, MJ_SHAPE_MANIFEST_NAMES),
                             f != MJ_SHAPE_SHARED_INTERMEDIATE, &shape.v[f]);
    if (st == MJ_OK) st = get_format(obj, li, "weight_format", &c->weight_format);
    if (st == MJ_OK) st = get_format(obj, li, "dispatch_format", &c->dispatch_format);
    if (st == MJ_OK) st = get_activation(obj, li, &c->activation);
    if (st == MJ_OK) st = get_integer(obj, li, "num_sms", 0, &num_sms);
    if (st != MJ_OK) return st;

    shape.v[MJ_SHAPE_DISPATCH_FORMAT] = c->dispatch_format;
    mj_shape_violation bad;
    if (mj_shape_check(&shape, MJ_SHAPE_MANIFEST_NAMES, &bad))
        return mj_fail(MJ_ERR_INVALID_ARG, "manifest: layers[%zu].%s: %s (got %lld)", li,
                       mj_shape_field_name(bad.field, MJ_SHAPE_MANIFEST_NAMES), bad.rule,
                       shape.v[bad.field]);
    if (num_sms < 0 || num_sms > MJ_LIMIT_NUM_SMS_MAX)
        return mj_fail(MJ_ERR_INVALID_ARG,
                       "manifest: layers[%zu].num_sms: must be in 0..%d, 0 = all SMs (got %lld)",
                       li, MJ_LIMIT_NUM_SMS_MAX, num_sms);
    /* Every value now fits an int. */
    c->hidden = (int)shape.v[MJ_SHAPE_HIDDEN];
    c->intermediate = (int)shape.v[MJ_SHAPE_INTERMEDIATE];
    c->num_experts = (int)shape.v[MJ_SHAPE_EXPERTS];
    c->num_topk = (int)shape.v[MJ_SHAPE_TOPK];
    c->num_ranks = (int)shape.v[MJ_SHAPE_RANKS];
    c->max_tokens_per_rank = (int)shape.v[MJ_SHAPE_MAX_TOKENS];
    c->shared_intermediate = (int)shape.v[MJ_SHAPE_SHARED_INTERMEDIATE];
    if (cJSON_GetObjectItemCaseSensitive(obj, "shared_format")) {
        if (!c->shared_intermediate)
            return mj_fail(MJ_ERR_INVALID_ARG,
                           "manifest: layers[%zu].shared_format: the layer has no shared expert "
                           "(give shared_intermediate too)",
                           li);
        st = get_format(obj, li, "shared_format", &c->shared_format);
        if (st != MJ_OK) return st;
    } else if (c->shared_intermediate) {
        return mj_fail(MJ_ERR_INVALID_ARG,
                       "manifest: layers[%zu].shared_format: missing (the layer has a shared "
                       "expert)",
                       li);
    }
    l->num_sms = (int)num_sms;
    const cJSON *clamp = cJSON_GetObjectItemCaseSensitive(obj, "clamp");
    if (clamp) {
        /* The kernels take the clamp as a float: one that rounds to 0 would mean none. */
        if (!cJSON_IsNumber(clamp) || !(clamp->valuedouble <= FLT_MAX) ||
            !((float)clamp->valuedouble > 0))
            return mj_fail(MJ_ERR_INVALID_ARG,
                           "manifest: layers[%zu].clamp: must be a positive number (a float)", li);
        c->clamp = (float)clamp->valuedouble;
    }
    st = get_bool(obj, li, "unfold_mx_scales", &c->unfold_mx_scales);
    if (st == MJ_OK) st = get_bool(obj, li, "expert_biases", &c->expert_biases);
    if (st != MJ_OK) return st;
    st = get_float(obj, li, "swiglu_alpha", &c->swiglu_alpha);
    if (st == MJ_OK) st = get_float(obj, li, "swiglu_beta", &c->swiglu_beta);
    if (st == MJ_OK) st = get_float(obj, li, "situ_gate_beta", &c->situ_gate_beta);
    if (st == MJ_OK) st = get_float(obj, li, "situ_up_beta", &c->situ_up_beta);
    if (st == MJ_OK) st = check_activation(c, li);
    if (st != MJ_OK) return st;
    char fallback[32];
    snprintf(fallback, sizeof fallback, "layers[%zu]", li);
    l->name = strdup(name ? name : fallback);
    if (!l->name) return mj_fail(MJ_ERR_NOMEM, "manifest: out of memory");
    return MJ_OK;
}

static mj_status parse_archs(const cJSON *arr, mj_manifest *m) {
    if (!arr) return mj_fail(MJ_ERR_INVALID_ARG, "manifest: archs: missing");
    if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) == 0)
        return mj_fail(MJ_ERR_INVALID_ARG, "manifest: archs: must be a non-empty array of strings");
    size_t i = 0;
    for (const cJSON *c = arr->child; c; c = c->next, i++) {
        char path[32];
        snprintf(path, sizeof path, "archs[%zu]", i);
        if (!cJSON_IsString(c))
            return mj_fail(MJ_ERR_INVALID_ARG, "manifest: %s: must be a string", path);
        mj_status st = add_arch(m->archs, &m->num_archs, c->valuestring, path);
        if (st != MJ_OK) return st;
    }
    return MJ_OK;
}

static int utf8(const char *s) {
    size_t n = strlen(s);
    return mj_utf8_valid_prefix(s, n) == n;
}

/* JSON text is UTF-8 (RFC 8259), and the CLI prints manifest strings back
 * (in messages, in its JSON output): every key and string must be. path holds
 * the location of item ("layers[0]"), len its length. */
static mj_status check_utf8(const cJSON *item, char *path, size_t len, size_t cap) {
    int i = 0;
    for (const cJSON *c = item->child; c; c = c->next, i++) {
        if (c->string && !utf8(c->string))
            return mj_fail(MJ_ERR_INVALID_ARG, "manifest: %s%s: a key is not valid UTF-8", path,
                           len ? "" : "(top level)");
        size_t n = len + (size_t)(cJSON_IsArray(item) ? snprintf(path + len, cap - len, "[%d]", i)
                                                      : snprintf(path + len, cap - len, "%s%s",
                                                                 len ? "." : "", c->string));
        if (n >= cap) n = cap - 1;
        if (cJSON_IsString(c) && !utf8(c->valuestring))
            return mj_fail(MJ_ERR_INVALID_ARG, "manifest: %s: is not valid UTF-8", path);
        mj_status st = check_utf8(c, path, n, cap);
        if (st != MJ_OK) return st;
        path[len] = '\0';
    }
    return MJ_OK;
}

static mj_status parse_root(const cJSON *root, mj_manifest *m) {
    static const char *const keys[] = {"comment", "archs", "layers", NULL};
    if (!cJSON_IsObject(root))
        return mj_fail(MJ_ERR_INVALID_ARG, "manifest: the top level must be a JSON object");
    char path[256] = "";
    mj_status st = check_utf8(root, path, 0, sizeof path);
    if (st == MJ_OK) st = check_keys(root, keys, "");
    if (st != MJ_OK) return st;
    const cJSON *comment = cJSON_GetObjectItemCaseSensitive(root, "comment");
    if (comment && !cJSON_IsString(comment))
        return mj_fail(MJ_ERR_INVALID_ARG, "manifest: comment: must be a string");
    st = parse_archs(cJSON_GetObjectItemCaseSensitive(root, "archs"), m);
    if (st != MJ_OK) return st;
    const cJSON *layers = cJSON_GetObjectItemCaseSensitive(root, "layers");
    if (!layers) return mj_fail(MJ_ERR_INVALID_ARG, "manifest: layers: missing");
    if (!cJSON_IsArray(layers) || cJSON_GetArraySize(layers) == 0)
        return mj_fail(MJ_ERR_INVALID_ARG,
                       "manifest: layers: must be a non-empty array of objects");
    size_t n = (size_t)cJSON_GetArraySize(layers);
    m->layers = calloc(n, sizeof *m->layers);
    if (!m->layers) return mj_fail(MJ_ERR_NOMEM, "manifest: out of memory");
    for (const cJSON *c = layers->child; c; c = c->next) {
        st = parse_layer(c, m->num_layers, &m->layers[m->num_layers]);
        if (st != MJ_OK) return st;
        m->num_layers++;
    }
    return enumerate(m->archs, m->num_archs, m->layers, m->num_layers, &m->kernels);
}

mj_status mj_manifest_parse(const char *json, mj_manifest **out) {
    mj_clear_error();
    if (!out) return mj_fail(MJ_ERR_INVALID_ARG, "mj_manifest_parse: out is NULL");
    *out = NULL;
    if (!json) return mj_fail(MJ_ERR_INVALID_ARG, "mj_manifest_parse: json is NULL");
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(json, &end, 1);
    if (!root) {
        size_t off = end ? (size_t)(end - json) : 0;
        size_t line = 1, col = 1;
        for (size_t i = 0; i < off && json[i]; i++, col++)
            if (json[i] == '\n') {
                line++;
                col = 0;
            }
        return mj_fail(MJ_ERR_INVALID_ARG, "manifest: invalid JSON at line %zu, column %zu", line,
                       col);
    }
    mj_manifest *m = calloc(1, sizeof *m);
    if (!m) {
        cJSON_Delete(root);
        return mj_fail(MJ_ERR_NOMEM, "manifest: out of memory");
    }
    mj_status st = parse_root(root, m);
    cJSON_Delete(root);
    if (st != MJ_OK) {
        mj_manifest_destroy(m);
        return st;
    }
    *out = m;
    return MJ_OK;
}

mj_status mj_manifest_set_archs(mj_manifest *m, const char *comma_separated) {
    mj_clear_error();
    if (!m || !comma_separated)
        return mj_fail(MJ_ERR_INVALID_ARG, "mj_manifest_set_archs: NULL argument");
    mj_arch archs[MAX_ARCHS];
    size_t num_archs = 0;
    const char *p = comma_separated;
    for (size_t i = 0;; i++) {
        size_t len = strcspn(p, ",");
        char name[32], path[32];
        snprintf(path, sizeof path, "archs[%zu]", i);
        if (len == 0 || len >= sizeof name)
            return mj_fail(MJ_ERR_INVALID_ARG,
                           "manifest: %s: \"%.*s\" is not an architecture (known: %s)", path,
                           (int)len, p, known_arch_list());
        memcpy(name, p, len);
        name[len] = '\0';
        mj_status st = add_arch(archs, &num_archs, name, path);
        if (st != MJ_OK) return st;
        if (p[len] == '\0') break;
        p += len + 1;
    }
    mj_spec_list kernels;
    mj_status st = enumerate(archs, num_archs, m->layers, m->num_layers, &kernels);
    if (st != MJ_OK) return st;
    mj_spec_list_free(&m->kernels);
    m->kernels = kernels;
    memcpy(m->archs, archs, sizeof archs);
    m->num_archs = num_archs;
    return MJ_OK;
}

void mj_manifest_destroy(mj_manifest *m) {
    if (!m) return;
    for (size_t i = 0; i < m->num_layers; i++)
        free(m->layers[i].name);
    free(m->layers);
    mj_spec_list_free(&m->kernels);
    free(m);
}

size_t mj_manifest_kernel_count(const mj_manifest *m) {
    return m ? m->kernels.count : 0;
}

const mj_kernel_spec *mj_manifest_kernel_spec(const mj_manifest *m, size_t i) {
    return m && i < m->kernels.count ? &m->kernels.specs[i] : NULL;
}

const char *mj_manifest_kernel_describe(const mj_manifest *m, size_t i) {
    if (!m || i >= m->kernels.count) return NULL;
    return m->kernels.descriptions[i];
}

mj_status mj_manifest_build_kernel(mj_runtime *rt, const mj_manifest *m, size_t i,
                                   mj_build_result *result, double *seconds) {
    mj_clear_error();
    if (result) *result = MJ_BUILD_FAILED;
    if (seconds) *seconds = 0;
    if (!rt || !m) return mj_fail(MJ_ERR_INVALID_ARG, "mj_manifest_build_kernel: NULL argument");
    if (i >= m->kernels.count)
        return mj_fail(MJ_ERR_INVALID_ARG,
                       "mj_manifest_build_kernel: kernel %zu out of range (manifest has %zu)", i,
                       m->kernels.count);
    mj_build_result r = MJ_BUILD_FAILED;
    double s = 0;
    mj_status st = mj_jit_build(rt, &m->kernels.specs[i], &r, &s);
    if (result) *result = st == MJ_OK ? r : MJ_BUILD_FAILED;
    if (seconds) *seconds = s;
    return st;
}
