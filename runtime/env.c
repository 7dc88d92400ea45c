#include "runtime/env.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static mj_env env;
static char default_cache_dir[4096];
static pthread_once_t env_once = PTHREAD_ONCE_INIT;

static const char *nonempty(const char *name) {
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

static void read_env(void) {
    const char *dir = nonempty("MEGAJIT_CACHE_DIR");
    if (!dir) {
        const char *xdg = nonempty("XDG_CACHE_HOME");
        const char *home = nonempty("HOME");
        if (xdg)
            snprintf(default_cache_dir, sizeof default_cache_dir, "%s/megajit", xdg);
        else
            snprintf(default_cache_dir, sizeof default_cache_dir, "%s/.cache/megajit",
                     home ? home : "/tmp");
        dir = default_cache_dir;
    }
    env.cache_dir = dir;
    env.cache_ro = nonempty("MEGAJIT_CACHE_RO");
    const char *disable = nonempty("MEGAJIT_CACHE_DISABLE");
    env.cache_disable = disable && atoi(disable) != 0;
    const char *log = nonempty("MEGAJIT_LOG");
    env.log_level = log ? atoi(log) : 1;
    env.dump_dir = nonempty("MEGAJIT_DUMP_DIR");
    env.template_dir = nonempty("MEGAJIT_TEMPLATE_DIR");
    const char *jit_disable = nonempty("MEGAJIT_JIT_DISABLE");
    env.jit_disable = jit_disable && atoi(jit_disable) != 0;
}

const mj_env *mj_env_get(void) {
    pthread_once(&env_once, read_env);
    return &env;
}
