#include "runtime/cache_key.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
/* The state lives on the stack: no allocation per key. */
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

/* Options that never change the cubin bytes. */
static int flag_is_keyed(const char *f) {
    static const char *const unkeyed_prefixes[] = {"-I",     "--include-path", "--pch",
                                                   "-pch",   "--create-pch",   "--use-pch",
                                                   "--time", "--pch-dir"};
    for (size_t i = 0; i < sizeof unkeyed_prefixes / sizeof unkeyed_prefixes[0]; i++)
        if (strncmp(f, unkeyed_prefixes[i], strlen(unkeyed_prefixes[i])) == 0) return 0;
    return 1;
}

static int by_string(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

void mj_key_normalized_flags(const char *const *flags, int num_flags, char *out, size_t cap) {
    const char *keyed[128];
    int n = 0;
    for (int i = 0; i < num_flags && n < 128; i++)
        if (flag_is_keyed(flags[i])) keyed[n++] = flags[i];
    qsort(keyed, (size_t)n, sizeof keyed[0], by_string);
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; i < n && used < cap; i++)
        used += (size_t)snprintf(out + used, cap - used, "%s%s", i ? " " : "", keyed[i]);
}

/* Each part is its length then its bytes, so no two part lists serialize alike. */
static void add_part(XXH3_state_t *h, const void *data, size_t size) {
    uint64_t n = size;
    XXH3_128bits_update(h, &n, sizeof n);
    XXH3_128bits_update(h, data, size);
}

static void add_string(XXH3_state_t *h, const char *s) {
    add_part(h, s, strlen(s));
}

void mj_key_compute(const mj_key_parts *p, uint8_t key[16]) {
    char flags[4096];
    mj_key_normalized_flags(p->flags, p->num_flags, flags, sizeof flags);
    uint32_t version = MJ_CACHE_FORMAT_VERSION;
    XXH3_state_t state;
    XXH3_INITSTATE(&state);
    XXH3_128bits_reset(&state);
    add_part(&state, &version, sizeof version);
    add_string(&state, p->family);
    add_part(&state, p->closure_hash, 16);
    add_string(&state, p->source);
    add_string(&state, p->name_expression);
    add_string(&state, p->compiler);
    add_string(&state, flags);
    add_string(&state, p->arch);
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits_digest(&state));
    memcpy(key, c.digest, 16);
}
