/* Thread-local error sentences behind mj_last_error(). */
#ifndef MJ_ERROR_H
#define MJ_ERROR_H

#include "include/megajit.h"

/* Records the sentence for the calling thread and returns status. */
mj_status mj_fail(mj_status status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Public calls that return a status start with it: mj_last_error() then
 * describes this call only, and is "" after it succeeds. */
void mj_clear_error(void);

#define MJ_ERROR_CHARS 8192

/* The thread's sentence, kept across work that may replace it: calls that
 * return no status (destroy) leave mj_last_error() as they found it, so a
 * caller can clean up before reporting. */
typedef struct mj_error_snapshot {
    char text[MJ_ERROR_CHARS];
} mj_error_snapshot;
void mj_error_save(mj_error_snapshot *s);
void mj_error_restore(const mj_error_snapshot *s);

#endif
