#include "runtime/log.h"

#include <stdarg.h>
#include <stdio.h>

#include "runtime/env.h"

int mj_log_enabled(int level) {
    return level <= mj_env_get()->log_level;
}

void mj_log(int level, const char *fmt, ...) {
    if (!mj_log_enabled(level)) return;
    static const char *const names[] = {"error", "warn", "info", "debug"};
    char line[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    /* One fprintf per line keeps lines from concurrent threads whole. */
    fprintf(stderr, "megajit[%s]: %s\n", names[level < 0 ? 0 : level > 3 ? 3 : level], line);
}

void mj_log_cache_warning(void *ctx, const char *message) {
    (void)ctx;
    mj_log(MJ_LOG_WARN, "%s", message);
}
