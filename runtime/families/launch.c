/* A family's kernel for a launch: spec, kernel and launch shape in one call. */
#include "runtime/families/family.h"
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
