#include "runtime/env.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static mj_env env;
static char default_cache_dir[4096];
static pthread_once_t env_once = PTHREAD_ONCE_INIT;

static const char *nonempty(const char *name) {
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

/* A relative base would put the cache wherever the process happens to run. */
static const char *absolute(const char *name) {
    const char *v = nonempty(name);
    return v && v[0] == '/' ? v : NULL;
}

static int flag(const char *name) {
    const char *v = nonempty(name);
    return v && atoi(v) != 0;
}

static void read_env(void) {
    const char *dir = nonempty("MEGAJIT_CACHE_DIR");
    if (!dir) {
        const char *xdg = absolute("XDG_CACHE_HOME");
        const char *home = absolute("HOME");
        const char *tmp = absolute("TMPDIR");
        if (xdg)
            snprintf(default_cache_dir, sizeof default_cache_dir, "%s/megajit", xdg);
        else if (home)
            snprintf(default_cache_dir, sizeof default_cache_dir, "%s/.cache/megajit", home);
        else
            /* Named for the user, so users never share it: one finding another's
             * directory there refuses it (the cache's ownership check). */
            snprintf(default_cache_dir, sizeof default_cache_dir, "%s/megajit-cache-%u",
                     tmp ? tmp : "/tmp", (unsigned)geteuid());
        env.cache_dir_fallback = !xdg && !home;
        dir = default_cache_dir;
    }
    env.cache_dir = dir;
    env.cache_ro = nonempty("MEGAJIT_CACHE_RO");
    env.cache_ro_allow_writable = flag("MEGAJIT_CACHE_RO_ALLOW_WRITABLE");
    env.cache_disable = flag("MEGAJIT_CACHE_DISABLE");
    const char *log = nonempty("MEGAJIT_LOG");
    env.log_level = log ? atoi(log) : 1;
    env.dump_dir = nonempty("MEGAJIT_DUMP_DIR");
    env.template_dir = nonempty("MEGAJIT_TEMPLATE_DIR");
    env.jit_disable = flag("MEGAJIT_JIT_DISABLE");
    env.moe_timeout_ms = mj_env_timeout_ms(nonempty("MEGAJIT_MOE_TIMEOUT_MS"));
}

unsigned long long mj_env_timeout_ms(const char *text) {
    /* Digits only: strtoull would take "-1" as its largest value. */
    if (!text || *text < '0' || *text > '9') return 0;
    char *end;
    errno = 0;
    const unsigned long long ms = strtoull(text, &end, 10);
    return !*end && !errno && ms <= MJ_MOE_TIMEOUT_MAX_MS ? ms : 0;
}

const mj_env *mj_env_get(void) {
    pthread_once(&env_once, read_env);
    return &env;
}
