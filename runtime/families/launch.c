/* A family's kernel for a launch: spec, kernel and launch shape in one call. */
#include "runtime/families/family.h"
#include "runtime/error.h"
#include "runtime/runtime.h"

mj_status mj_family_prepare(mj_runtime *rt, const mj_family_desc *family, int kernel,
                            const mj_family_request *req, mj_stream stream, mj_kernel **k,
                            mj_launch_config *lc) {
    mj_kernel_spec spec;
    mj_status st = family->build_spec(req, kernel, rt->arch, &spec);
    if (st == MJ_OK) st = mj_jit_get(rt, &spec, stream, k);
    if (st == MJ_OK) family->launch_shape(&spec, req, lc);
    return st;
}

mj_status mj_family_require_sm90a(const char *family, mj_arch arch, const char *built_on) {
    const char *arch_name = mj_arch_name(arch);
    if (!arch_name) return mj_fail(MJ_ERR_INVALID_ARG, "unknown arch %d", (int)arch);
    if (arch != MJ_ARCH_SM90A)
        return mj_fail(MJ_ERR_UNSUPPORTED,
                       "%s: no kernel for %s (its kernels are built on %s and exist for sm_90a "
                       "only)",
                       family, arch_name, built_on);
    return MJ_OK;
}
