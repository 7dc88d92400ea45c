/* The names of the element formats (public: mj_format_name, mj_format_parse). */
#include <string.h>

#include "include/megajit.h"
#include "runtime/error.h"

static const char *const format_names[MJ_FORMAT_COUNT_] = {"bf16", "mxfp8", "mxfp4", "nvfp4"};

const char *mj_format_name(mj_format format) {
    return (unsigned)format < MJ_FORMAT_COUNT_ ? format_names[format] : NULL;
}

mj_status mj_format_parse(const char *name, mj_format *format) {
    for (int i = 0; name && i < MJ_FORMAT_COUNT_; i++)
        if (strcmp(name, format_names[i]) == 0) {
            *format = (mj_format)i;
            return MJ_OK;
        }
    return mj_fail(MJ_ERR_INVALID_ARG,
                   "unknown format \"%s\" (expected bf16, mxfp8, mxfp4 or nvfp4)",
                   name ? name : "(null)");
}
