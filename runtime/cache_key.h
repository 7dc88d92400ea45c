/*
 * The on-disk cache key: XXH3-128 over a length-prefixed serialization of
 * everything that shapes a cubin, and nothing else:
 *   1. the cache format version (MJ_CACHE_FORMAT_VERSION), bumped when the
 *      meaning of an entry changes;
 *   2. the family name;
 *   3. the include-closure hash (relative path + content of the template and
 *      every project header it includes; never absolute paths);
 *   4. the rendered instantiation source;
 *   5. the name expression (the template arguments);
 *   6. the compiler: "nvrtc MAJOR.MINOR.BUILD";
 *   7. the normalized flags: sorted, without include paths, PCH and dump
 *      options, which do not change the cubin;
 *   8. the exact arch ("sm_90a").
 * Absent on purpose: driver version, GPU name, host, time, install paths.
 */
#ifndef MJ_CACHE_KEY_H
#define MJ_CACHE_KEY_H

#include <stddef.h>
#include <stdint.h>

#define MJ_CACHE_FORMAT_VERSION 1

typedef struct mj_key_parts {
    const char *family;
    const uint8_t *closure_hash; /* 16 bytes */
    const char *source;
    const char *name_expression;
    const char *compiler;
    const char *const *flags;
    int num_flags;
    const char *arch;
} mj_key_parts;

/* Writes the normalized flag string ("-std=c++20 --fmad=false ...") into out. */
void mj_key_normalized_flags(const char *const *flags, int num_flags, char *out, size_t cap);
void mj_key_compute(const mj_key_parts *parts, uint8_t key[16]);

#endif
