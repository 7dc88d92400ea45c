/* The table of kernel families, indexed by mj_family. */
#include "runtime/families/bench_ceilings.h"
#include "runtime/families/family.h"
#include "runtime/families/mega_moe.h"
#include "runtime/families/pre_dispatch.h"

static const mj_family_desc *const kFamilies[MJ_FAMILY_COUNT_] = {
    [MJ_FAMILY_PRE_DISPATCH] = &mj_pre_dispatch_family,
    [MJ_FAMILY_MEGA_MOE] = &mj_mega_moe_family,
    [MJ_FAMILY_BENCH_CEILINGS] = &mj_bench_ceilings_family,
};

const mj_family_desc *mj_family_get(mj_family family) {
    return (unsigned)family < MJ_FAMILY_COUNT_ ? kFamilies[family] : NULL;
}

const mj_family_kernel *mj_family_kernel_of(const mj_kernel_spec *spec) {
    const mj_family_desc *f = mj_family_get((mj_family)spec->family);
    if (!f || spec->kernel < 0 || spec->kernel >= f->num_kernels) return NULL;
    const mj_family_kernel *k = &f->kernels[spec->kernel];
    return spec->num_params == k->num_params ? k : NULL;
}

const char *mj_family_name(mj_family family) {
    const mj_family_desc *f = mj_family_get(family);
    return f ? f->name : NULL;
}
