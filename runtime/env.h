/* Environment settings, read once per process (thread-safe). */
#ifndef MJ_ENV_H
#define MJ_ENV_H

typedef struct mj_env {
    /* MEGAJIT_CACHE_DIR, else $XDG_CACHE_HOME/megajit, else $HOME/.cache/megajit
     * (relative values of either are ignored, as the XDG spec says), else the
     * per-user ${TMPDIR:-/tmp}/megajit-cache-<uid>; never shared by users. */
    const char *cache_dir;
    int cache_dir_fallback;      /* cache_dir is the temporary per-user one */
    const char *cache_ro;        /* MEGAJIT_CACHE_RO or NULL */
    int cache_ro_allow_writable; /* MEGAJIT_CACHE_RO_ALLOW_WRITABLE */
    int cache_disable;           /* MEGAJIT_CACHE_DISABLE */
    int log_level;               /* MEGAJIT_LOG, default 1 */
    const char *dump_dir;        /* MEGAJIT_DUMP_DIR or NULL */
    const char *template_dir;    /* MEGAJIT_TEMPLATE_DIR or NULL */
    int jit_disable;             /* MEGAJIT_JIT_DISABLE: a launch never compiles */
    /* MEGAJIT_MOE_TIMEOUT_MS: how long MegaMoE's in-kernel waits last (tests of
     * ranks that never arrive shorten it); 0 = unset, or not a number of
     * milliseconds in 1..MJ_MOE_TIMEOUT_MAX_MS. */
    unsigned long long moe_timeout_ms;
} mj_env;

/* A day: beyond it no wait is shorter than anyone asked for (and ns would overflow). */
#define MJ_MOE_TIMEOUT_MAX_MS 86400000ull

const mj_env *mj_env_get(void);
/* MEGAJIT_MOE_TIMEOUT_MS's rule on one value (NULL: unset). */
unsigned long long mj_env_timeout_ms(const char *text);

#endif
