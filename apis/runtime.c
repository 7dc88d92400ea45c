/* mj_runtime_*, mj_family_*: the public runtime calls over runtime/runtime.h. */
#include "include/megajit.h"
#include "runtime/error.h"
#include "runtime/runtime.h"
#include "runtime/struct_size.h"

const char *mj_version_string(void) {
    return MJ_VERSION_STRING;
}

/* mj_runtime_options has one version. */
static const mj_struct_version kOptionVersions[] = {
    MJ_STRUCT_VERSION(mj_runtime_options, allow_compile)};
_Static_assert(MJ_STRUCT_SIZE_TO(mj_runtime_options, allow_compile) == sizeof(mj_runtime_options),
               "kOptionVersions must end with the current version");

mj_status mj_runtime_create(mj_runtime **out, const mj_runtime_options *opts) {
    mj_clear_error();
    if (!out) return mj_fail(MJ_ERR_INVALID_ARG, "mj_runtime_create: out is NULL");
    *out = NULL;
    mj_runtime_options o = MJ_RUNTIME_OPTIONS_INIT;
    mj_status st =
        opts ? mj_struct_read(opts, &o, kOptionVersions, MJ_STRUCT_VERSION_COUNT(kOptionVersions),
                              "mj_runtime_options")
             : MJ_OK;
    return st != MJ_OK ? st : mj_runtime_new(&o, out);
}

void mj_runtime_destroy(mj_runtime *rt) {
    mj_runtime_free(rt);
}

int mj_runtime_has_device(const mj_runtime *rt) {
    return rt && rt->cu != NULL;
}

const char *mj_runtime_arch(const mj_runtime *rt) {
    return rt ? rt->arch_name : NULL;
}

static mj_status check_family(const char *fn, const mj_runtime *rt, mj_family family,
                              const void *out) {
    if (!rt || !out) return mj_fail(MJ_ERR_INVALID_ARG, "%s: NULL runtime or output", fn);
    if ((unsigned)family >= MJ_FAMILY_COUNT_)
        return mj_fail(MJ_ERR_INVALID_ARG, "%s: unknown kernel family %d", fn, (int)family);
    return MJ_OK;
}

mj_status mj_family_set_num_sms(mj_runtime *rt, mj_family family, int num_sms) {
    mj_clear_error();
    mj_status st = check_family("mj_family_set_num_sms", rt, family, rt);
    return st != MJ_OK ? st : mj_runtime_set_family_sms(rt, family, num_sms);
}

mj_status mj_family_get_num_sms(const mj_runtime *rt, mj_family family, int *num_sms) {
    mj_clear_error();
    mj_status st = check_family("mj_family_get_num_sms", rt, family, num_sms);
    if (st == MJ_OK) *num_sms = mj_runtime_family_settings(rt, family).num_sms;
    return st;
}

mj_status mj_family_set_pdl(mj_runtime *rt, mj_family family, int enable) {
    mj_clear_error();
    mj_status st = check_family("mj_family_set_pdl", rt, family, rt);
    if (st == MJ_OK) mj_runtime_set_family_pdl(rt, family, enable);
    return st;
}

mj_status mj_family_get_pdl(const mj_runtime *rt, mj_family family, int *enable) {
    mj_clear_error();
    mj_status st = check_family("mj_family_get_pdl", rt, family, enable);
    if (st == MJ_OK) *enable = mj_runtime_family_settings(rt, family).pdl;
    return st;
}

mj_status mj_runtime_get_stats(const mj_runtime *rt, mj_runtime_stats *out) {
    mj_clear_error();
    if (!rt || !out)
        return mj_fail(MJ_ERR_INVALID_ARG, "mj_runtime_get_stats: NULL runtime or output");
    *out = mj_runtime_read_stats(rt);
    return MJ_OK;
}

mj_status mj_runtime_info(mj_runtime *rt, mj_info *info) {
    mj_clear_error();
    if (!rt || !info) return mj_fail(MJ_ERR_INVALID_ARG, "mj_runtime_info: NULL runtime or output");
    mj_runtime_describe(rt, info);
    return MJ_OK;
}
