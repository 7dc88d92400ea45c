/* include/megajit.h on its own, the way a user compiles it: as C11 and as
 * C++11, with every warning as an error (make check-header). Exits 0 when the
 * MJ_*_INIT initializers set struct_size and the defaults. */
#include "megajit.h"

int main(void) {
    mj_runtime_options options = MJ_RUNTIME_OPTIONS_INIT;
    mj_symm_config buffer = MJ_SYMM_CONFIG_INIT;
    mj_moe_config layer = MJ_MOE_CONFIG_INIT;
    int ok = options.struct_size == sizeof options && options.allow_compile == 1 &&
             !options.cache_dir && buffer.struct_size == sizeof buffer && buffer.hidden == 0 &&
             layer.struct_size == sizeof layer && layer.clamp == 0.0f;
    return ok ? 0 : 1;
}
