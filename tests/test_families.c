/*
 * Every kernel family of the table against its templates, without a GPU:
 * each kernel's parameter list matches the template's own (names, types,
 * order), its generated name expression compiles with NVRTC for sm_90a, and
 * constants a kernel defines for itself equal the host's codes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "include/megajit.h"
#include "runtime/configs.h"
#include "runtime/families/family.h"
#include "runtime/jit.h"
#include "runtime/nvrtc_lib.h"
#include "runtime/runtime.h"
#include "runtime/templates.h"
#include "tests/scratch_dir.h"

/* ------------------------------------------------ template parameter lists */

/* After "__global__": skips the return type and any __launch_bounds__(...) and
 * returns the identifier right before the parameter list's '(' (length in *len). */
static const char *kernel_name_after(const char *p, size_t *len) {
    for (;;) {
        while (isspace((unsigned char)*p))
            p++;
        if (strncmp(p, "__launch_bounds__", 17) == 0) {
            p += 17;
            int depth = 0;
            do {
                depth += *p == '(' ? 1 : *p == ')' ? -1 : 0;
                p++;
            } while (*p && depth > 0);
            continue;
        }
        const char *id = p;
        while (isalnum((unsigned char)*p) || *p == '_')
            p++;
        if (p == id) return NULL;
        const char *end = p;
        while (isspace((unsigned char)*p))
            p++;
        if (*p == '(') {
            *len = (size_t)(end - id);
            return id;
        }
    }
}

/* The text between "template <" and ">" right before the __global__ template
 * named `name` in text ("int kHidden, int kFormat"); 0 when there is none. */
static int template_params_of(const char *text, const char *name, char *out, size_t cap) {
    for (const char *g = strstr(text, "__global__"); g; g = strstr(g + 1, "__global__")) {
        size_t len = 0;
        const char *id = kernel_name_after(g + strlen("__global__"), &len);
        if (!id || len != strlen(name) || strncmp(id, name, len) != 0) continue;
        const char *close = g;
        while (close > text && isspace((unsigned char)close[-1]))
            close--;
        if (close == text || close[-1] != '>') continue;
        close--;
        const char *open = close;
        while (open > text && *open != '<')
            open--;
        const char *kw = open;
        while (kw > text && isspace((unsigned char)kw[-1]))
            kw--;
        if (kw - text < 8 || strncmp(kw - 8, "template", 8) != 0) continue;
        size_t n = (size_t)(close - open - 1);
        if (n >= cap) return 0;
        memcpy(out, open + 1, n);
        out[n] = '\0';
        return 1;
    }
    return 0;
}

/* Splits "int kHidden, unsigned kBits" into (type, name) pairs; their count. */
static int split_params(char *list, char types[][16], char names[][32], int max) {
    int n = 0;
    for (char *save = NULL, *item = strtok_r(list, ",", &save); item && n < max;
         item = strtok_r(NULL, ",", &save), n++)
        if (sscanf(item, " %15s %31s", types[n], names[n]) != 2) return -1;
    return n;
}

/* The embedded template declaring the __global__ template symbol, and its
 * template parameter list in params. */
static const char *text_with_kernel(const char *symbol, char *params, size_t cap) {
    const char *base = strrchr(symbol, ':');
    base = base ? base + 1 : symbol;
    for (size_t i = 0; i < mj_embedded_template_count; i++)
        if (template_params_of(mj_embedded_templates[i].text, base, params, cap))
            return mj_embedded_templates[i].path;
    return NULL;
}

static void test_table_is_consistent(void **state) {
    (void)state;
    for (int f = 0; f < MJ_FAMILY_COUNT_; f++) {
        const mj_family_desc *d = mj_family_get((mj_family)f);
        assert_non_null(d);
        assert_string_equal(mj_family_name((mj_family)f), d->name);
        assert_non_null(mj_template_find(mj_template_set_embedded(), d->template_path));
        assert_true(d->num_kernels >= 1);
        assert_non_null(d->build_spec);
        assert_non_null(d->launch_shape);
        assert_non_null(d->enumerate);
        for (int g = 0; g < f; g++)
            assert_string_not_equal(mj_family_get((mj_family)g)->name, d->name);
        for (int k = 0; k < d->num_kernels; k++)
            assert_in_range(d->kernels[k].num_params, 1, MJ_SPEC_MAX_PARAMS);
    }
    assert_null(mj_family_get(MJ_FAMILY_COUNT_));
    assert_null(mj_family_name((mj_family)-1));
}

static void test_parameter_lists_match_templates(void **state) {
    (void)state;
    for (int f = 0; f < MJ_FAMILY_COUNT_; f++) {
        const mj_family_desc *d = mj_family_get((mj_family)f);
        for (int k = 0; k < d->num_kernels; k++) {
            const mj_family_kernel *kernel = &d->kernels[k];
            char list[1024], types[MJ_SPEC_MAX_PARAMS][16], names[MJ_SPEC_MAX_PARAMS][32];
            const char *file = text_with_kernel(kernel->symbol, list, sizeof list);
            if (!file) fail_msg("%s: no __global__ template %s", d->name, kernel->symbol);
            int n = split_params(list, types, names, MJ_SPEC_MAX_PARAMS);
            if (n != kernel->num_params)
                fail_msg("%s (%s): the template has %d parameters, the family lists %d",
                         kernel->symbol, file, n, kernel->num_params);
            for (int i = 0; i < n; i++) {
                const mj_kernel_param *p = &kernel->params[i];
                const char *type = p->kind == MJ_PARAM_FLOAT_BITS ? "unsigned" : "int";
                if (strcmp(names[i], p->template_name) || strcmp(types[i], type))
                    fail_msg("%s parameter %d: the template has %s %s, the family lists %s %s",
                             kernel->symbol, i, types[i], names[i], type, p->template_name);
            }
        }
    }
}

/* ------------------------------------------------------- NVRTC compiles */

/* Small layers that every family has kernels for on sm_90a: one per path of
 * the MegaMoE kernel (E4M3 wgmma for MXFP8 tokens, BF16 wgmma otherwise). */
static const mj_moe_config kLayers[] = {
    {.struct_size = sizeof(mj_moe_config),
     .hidden = 256,
     .intermediate = 64,
     .num_experts = 4,
     .num_topk = 2,
     .num_ranks = 1,
     .max_tokens_per_rank = 8,
     .weight_format = MJ_FORMAT_MXFP8,
     .dispatch_format = MJ_FORMAT_MXFP8,
     .activation = MJ_ACTIVATION_SWIGLU,
     .clamp = 7.0f},
    {.struct_size = sizeof(mj_moe_config),
     .hidden = 256,
     .intermediate = 128,
     .num_experts = 4,
     .num_topk = 2,
     .num_ranks = 2,
     .max_tokens_per_rank = 8,
     .weight_format = MJ_FORMAT_NVFP4,
     .dispatch_format = MJ_FORMAT_BF16,
     .activation = MJ_ACTIVATION_SWIGLUOAI},
};

typedef struct first_specs {
    mj_kernel_spec spec[8];
    int found[8];
} first_specs;

static mj_status keep_first(const mj_kernel_spec *spec, void *ctx) {
    first_specs *f = ctx;
    if (spec->kernel >= 0 && spec->kernel < 8 && !f->found[spec->kernel]) {
        f->spec[spec->kernel] = *spec;
        f->found[spec->kernel] = 1;
    }
    return MJ_OK;
}

static void test_every_kernel_compiles(void **state) {
    (void)state;
    /* A build stores what it compiles: a fresh cache of the test's own. */
    mj_runtime_options o = MJ_RUNTIME_OPTIONS_INIT;
    o.cache_dir = scratch_dir;
    o.arch = "sm_90a";
    mj_runtime *rt = NULL;
    assert_int_equal(mj_runtime_create(&rt, &o), MJ_OK);
    mj_kernel_spec built[16];
    int num_built = 0;
    for (size_t l = 0; l < sizeof kLayers / sizeof kLayers[0]; l++)
        for (int f = 0; f < MJ_FAMILY_COUNT_; f++) {
            const mj_symm_config buffer = mj_symm_config_of_moe(&kLayers[l]);
            const mj_family_request layer = {
                .buffer = &buffer, .layer = &kLayers[l], .num_sms = 2, .sys_scope = 1};
            const mj_family_desc *d = mj_family_get((mj_family)f);
            first_specs first;
            memset(&first, 0, sizeof first);
            assert_int_equal(d->enumerate(&layer, MJ_ARCH_SM90A, keep_first, &first), MJ_OK);
            /* No layer launches the bench ceilings (a manifest must not list
             * them): their kernels come from the spec builder alone. */
            if (f == MJ_FAMILY_BENCH_CEILINGS)
                for (int k = 0; k < d->num_kernels; k++) {
                    assert_false(first.found[k]);
                    assert_int_equal(d->build_spec(&layer, k, MJ_ARCH_SM90A, &first.spec[k]),
                                     MJ_OK);
                    first.found[k] = 1;
                }
            for (int k = 0; k < d->num_kernels; k++) {
                if (!first.found[k])
                    fail_msg("%s.%s: no spec for the test layer", d->name, d->kernels[k].role);
                char name[256];
                assert_true(mj_family_name_expression(&first.spec[k], name, sizeof name) > 0);
                assert_non_null(strstr(name, d->kernels[k].symbol));
                int again = 0; /* the layers share some kernels (pre-dispatch's check) */
                for (int b = 0; b < num_built; b++)
                    again |= !memcmp(&built[b], &first.spec[k], sizeof built[b]);
                if (again) continue;
                assert_true(num_built < 16);
                built[num_built++] = first.spec[k];
                mj_build_result r;
                double s;
                if (mj_jit_build(rt, &first.spec[k], &r, &s) != MJ_OK)
                    fail_msg("%s does not compile: %.2000s", name, mj_last_error());
                assert_int_equal(r, MJ_BUILD_COMPILED);
                printf("compiled %s in %.1f s\n", name, s);
            }
        }
    mj_runtime_destroy(rt);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_is_consistent),
        cmocka_unit_test(test_parameter_lists_match_templates),
        cmocka_unit_test(test_every_kernel_compiles),
    };
    return cmocka_run_group_tests(tests, scratch_dir_create, scratch_dir_remove);
}
