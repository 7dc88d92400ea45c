/* Format and activation codes: the public enums hold the values the kernels,
 * heuristics and reference read from templates/layout/codes.h, and the names
 * of the formats (mj_format_name, mj_format_parse). */
#include <string.h>

#include "include/megajit.h"
#include "runtime/error.h"
#include "templates/layout/codes.h"

_Static_assert(MJ_FORMAT_BF16 == MJ_FMT_BF16 && MJ_FORMAT_MXFP8 == MJ_FMT_MXFP8 &&
                   MJ_FORMAT_MXFP4 == MJ_FMT_MXFP4 && MJ_FORMAT_NVFP4 == MJ_FMT_NVFP4 &&
                   MJ_FORMAT_COUNT_ == MJ_FMT_COUNT,
               "mj_format must hold the MJ_FMT_* codes of templates/layout/codes.h");
_Static_assert(MJ_ACTIVATION_SWIGLU == MJ_ACT_SWIGLU &&
                   MJ_ACTIVATION_SWIGLUOAI == MJ_ACT_SWIGLUOAI &&
                   MJ_ACTIVATION_SITU == MJ_ACT_SITU && MJ_ACTIVATION_COUNT_ == MJ_ACT_COUNT,
               "mj_activation must hold the MJ_ACT_* codes of templates/layout/codes.h");

static const char *const format_names[MJ_FORMAT_COUNT_] = {"bf16", "mxfp8", "mxfp4", "nvfp4"};

const char *mj_format_name(mj_format format) {
    return (unsigned)format < MJ_FORMAT_COUNT_ ? format_names[format] : NULL;
}

mj_status mj_format_parse(const char *name, mj_format *format) {
    mj_clear_error();
    if (!format) return mj_fail(MJ_ERR_INVALID_ARG, "mj_format_parse: format is NULL");
    for (int i = 0; name && i < MJ_FORMAT_COUNT_; i++)
        if (strcmp(name, format_names[i]) == 0) {
            *format = (mj_format)i;
            return MJ_OK;
        }
    return mj_fail(MJ_ERR_INVALID_ARG,
                   "unknown format \"%s\" (expected bf16, mxfp8, mxfp4 or nvfp4)",
                   name ? name : "(null)");
}
