/* Leveled logging to stderr, controlled by MEGAJIT_LOG (0 errors .. 3 debug). */
#ifndef MJ_LOG_H
#define MJ_LOG_H

enum { MJ_LOG_ERROR = 0, MJ_LOG_WARN = 1, MJ_LOG_INFO = 2, MJ_LOG_DEBUG = 3 };

void mj_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int mj_log_enabled(int level);
/* An mjc_warn_fn: the cache's warnings become MJ_LOG_WARN lines (ctx unused). */
void mj_log_cache_warning(void *ctx, const char *message);

#endif
