/* Thread-local error sentences behind mj_last_error(). */
#ifndef MJ_ERROR_H
#define MJ_ERROR_H

#include "include/megajit.h"

/* Records the sentence for the calling thread and returns status. */
mj_status mj_fail(mj_status status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void mj_clear_error(void);

#endif
