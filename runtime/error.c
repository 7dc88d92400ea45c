#include "runtime/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "runtime/log.h"

/* Per thread so concurrent callers never see each other's sentences. */
static _Thread_local char last_error[MJ_ERROR_CHARS];

mj_status mj_fail(mj_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    mj_log(MJ_LOG_DEBUG, "%s: %s", mj_status_name(status), last_error);
    return status;
}

void mj_clear_error(void) {
    last_error[0] = '\0';
}

void mj_error_save(mj_error_snapshot *s) {
    memcpy(s->text, last_error, sizeof s->text);
}

void mj_error_restore(const mj_error_snapshot *s) {
    memcpy(last_error, s->text, sizeof last_error);
}

const char *mj_last_error(void) {
    return last_error;
}

const char *mj_status_name(mj_status status) {
    switch (status) {
    case MJ_OK:
        return "MJ_OK";
    case MJ_ERR_INVALID_ARG:
        return "MJ_ERR_INVALID_ARG";
    case MJ_ERR_NO_DEVICE:
        return "MJ_ERR_NO_DEVICE";
    case MJ_ERR_COMPILE:
        return "MJ_ERR_COMPILE";
    case MJ_ERR_CAPTURE:
        return "MJ_ERR_CAPTURE";
    case MJ_ERR_CUDA:
        return "MJ_ERR_CUDA";
    case MJ_ERR_CACHE:
        return "MJ_ERR_CACHE";
    case MJ_ERR_IO:
        return "MJ_ERR_IO";
    case MJ_ERR_NOMEM:
        return "MJ_ERR_NOMEM";
    case MJ_ERR_UNSUPPORTED:
        return "MJ_ERR_UNSUPPORTED";
    case MJ_ERR_NOT_FOUND:
        return "MJ_ERR_NOT_FOUND";
    }
    return "MJ_ERR_UNKNOWN";
}
