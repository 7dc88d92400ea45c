#include "runtime/kernel_spec.h"

#include <stdio.h>

#include "runtime/family_codegen.h"

mj_arch mj_arch_parse(const char *name) {
    if (!name) return (mj_arch)0;
    if (strcmp(name, "sm_90a") == 0) return MJ_ARCH_SM90A;
    if (strcmp(name, "sm_100a") == 0) return MJ_ARCH_SM100A;
    return (mj_arch)0;
}

const char *mj_arch_name(mj_arch arch) {
    switch (arch) {
    case MJ_ARCH_SM90A:
        return "sm_90a";
    case MJ_ARCH_SM100A:
        return "sm_100a";
    }
    return NULL;
}

const char *mj_family_name(mj_family family) {
    switch (family) {
    case MJ_FAMILY_PRE_DISPATCH:
        return "pre_dispatch";
    case MJ_FAMILY_MEGA_MOE:
        return "mega_moe";
    case MJ_FAMILY_COUNT_:
        break;
    }
    return NULL;
}

const mj_family_codegen *mj_family_codegen_get(mj_family family) {
    switch (family) {
    case MJ_FAMILY_PRE_DISPATCH:
        return &mj_pre_dispatch_codegen;
    case MJ_FAMILY_MEGA_MOE:
        return &mj_mega_moe_codegen;
    case MJ_FAMILY_COUNT_:
        break;
    }
    return NULL;
}
