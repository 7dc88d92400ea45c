/* Name expressions and descriptions of specs, written from their kernels'
 * parameter lists. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "heuristics/moe_formats.h"
#include "runtime/families/family.h"

/* Appends to out[0..cap) at *len; *len grows past cap on overflow. */
static void append(char *out, size_t cap, size_t *len, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out + (*len < cap ? *len : cap), *len < cap ? cap - *len : 0, fmt, ap);
    va_end(ap);
    if (n > 0) *len += (size_t)n;
}

static float float_of_bits(int32_t bits) {
    float f;
    uint32_t u = (uint32_t)bits;
    memcpy(&f, &u, sizeof f);
    return f;
}

static int finish(size_t len, size_t cap) {
    return len < cap ? (int)len : -1;
}

int mj_family_name_expression(const mj_kernel_spec *spec, char *out, size_t cap) {
    const mj_family_kernel *k = mj_family_kernel_of(spec);
    if (!k || !cap) return -1;
    size_t len = 0;
    append(out, cap, &len, "%s<", k->symbol);
    for (int i = 0; i < k->num_params; i++) {
        const char *sep = i ? ", " : "";
        int32_t v = spec->params[i];
        if (k->params[i].kind == MJ_PARAM_FLOAT_BITS)
            append(out, cap, &len, "%s0x%xu", sep, (unsigned)v);
        else
            append(out, cap, &len, "%s%d", sep, v);
    }
    append(out, cap, &len, ">");
    return finish(len, cap);
}

int mj_family_describe(const mj_kernel_spec *spec, char *out, size_t cap) {
    const mj_family_kernel *k = mj_family_kernel_of(spec);
    if (!k || !cap) return -1;
    const mj_family_desc *f = mj_family_get((mj_family)spec->family);
    size_t len = 0;
    append(out, cap, &len, "%s", f->name);
    if (f->num_kernels > 1) append(out, cap, &len, ".%s", k->role);
    append(out, cap, &len, "<");
    for (int i = 0; i < k->num_params; i++) {
        const mj_kernel_param *p = &k->params[i];
        int32_t v = spec->params[i];
        append(out, cap, &len, "%s%s=", i ? "," : "", p->label);
        const char *name = p->kind == MJ_PARAM_FORMAT       ? mj_format_name((mj_format)v)
                           : p->kind == MJ_PARAM_ACTIVATION ? mj_moe_activation_name(v)
                                                            : NULL;
        if (name)
            append(out, cap, &len, "%s", name);
        else if (p->kind == MJ_PARAM_FLOAT_BITS)
            append(out, cap, &len, "%g", (double)float_of_bits(v));
        else
            append(out, cap, &len, "%d", v);
    }
    append(out, cap, &len, "> %s", mj_arch_name((mj_arch)spec->arch));
    return finish(len, cap);
}
