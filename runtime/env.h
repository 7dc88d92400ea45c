/* Environment settings, read once per process (thread-safe). */
#ifndef MJ_ENV_H
#define MJ_ENV_H

typedef struct mj_env {
    const char
        *cache_dir; /* MEGAJIT_CACHE_DIR, else $XDG_CACHE_HOME/megajit, else ~/.cache/megajit */
    const char *cache_ro;     /* MEGAJIT_CACHE_RO or NULL */
    int cache_disable;        /* MEGAJIT_CACHE_DISABLE */
    int log_level;            /* MEGAJIT_LOG, default 1 */
    const char *dump_dir;     /* MEGAJIT_DUMP_DIR or NULL */
    const char *template_dir; /* MEGAJIT_TEMPLATE_DIR or NULL */
    int jit_disable;          /* MEGAJIT_JIT_DISABLE: a launch never compiles */
} mj_env;

const mj_env *mj_env_get(void);

#endif
