#include "runtime/kernel_spec.h"

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
