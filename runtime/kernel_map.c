#include "runtime/kernel_map.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

struct mj_kernel_map {
    pthread_rwlock_t lock;
    struct mj_kernel **slots; /* open addressing, linear probing */
    size_t capacity;          /* power of two */
    size_t count;
};

mj_kernel_map *mj_kernel_map_create(void) {
    mj_kernel_map *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->capacity = 64;
    m->slots = calloc(m->capacity, sizeof *m->slots);
    if (!m->slots) {
        free(m);
        return NULL;
    }
    pthread_rwlock_init(&m->lock, NULL);
    return m;
}

void mj_kernel_free(struct mj_kernel *k) {
    if (!k) return;
    free(k->lowered_name);
    free(k->cubin);
    pthread_mutex_destroy(&k->load_lock);
    free(k);
}

void mj_kernel_map_destroy(mj_kernel_map *m, const mj_cuda *cu) {
    if (!m) return;
    for (size_t i = 0; i < m->capacity; i++) {
        struct mj_kernel *k = m->slots[i];
        if (!k) continue;
        if (k->library && cu) cu->cuLibraryUnload(k->library);
        mj_kernel_free(k);
    }
    free(m->slots);
    pthread_rwlock_destroy(&m->lock);
    free(m);
}

uint64_t mj_kernel_spec_hash(const mj_kernel_spec *spec) {
    return XXH3_64bits(spec, sizeof *spec);
}

static size_t probe(struct mj_kernel *const *slots, size_t capacity, const mj_kernel_spec *spec,
                    uint64_t hash) {
    size_t i = hash & (capacity - 1);
    while (slots[i] &&
           !(slots[i]->spec_hash == hash && memcmp(&slots[i]->spec, spec, sizeof *spec) == 0))
        i = (i + 1) & (capacity - 1);
    return i;
}

struct mj_kernel *mj_kernel_map_find(mj_kernel_map *m, const mj_kernel_spec *spec, uint64_t hash) {
    pthread_rwlock_rdlock(&m->lock);
    struct mj_kernel *k = m->slots[probe(m->slots, m->capacity, spec, hash)];
    pthread_rwlock_unlock(&m->lock);
    return k;
}

static int grow(mj_kernel_map *m) {
    size_t capacity = m->capacity * 2;
    struct mj_kernel **slots = calloc(capacity, sizeof *slots);
    if (!slots) return 0;
    for (size_t i = 0; i < m->capacity; i++)
        if (m->slots[i])
            slots[probe(slots, capacity, &m->slots[i]->spec, m->slots[i]->spec_hash)] = m->slots[i];
    free(m->slots);
    m->slots = slots;
    m->capacity = capacity;
    return 1;
}

struct mj_kernel *mj_kernel_map_insert(mj_kernel_map *m, struct mj_kernel *k) {
    pthread_rwlock_wrlock(&m->lock);
    size_t i = probe(m->slots, m->capacity, &k->spec, k->spec_hash);
    struct mj_kernel *result = m->slots[i];
    if (result) {
        mj_kernel_free(k);
    } else if ((m->count + 1) * 2 > m->capacity && !grow(m)) {
        mj_kernel_free(k);
    } else {
        m->slots[probe(m->slots, m->capacity, &k->spec, k->spec_hash)] = k;
        m->count++;
        result = k;
    }
    pthread_rwlock_unlock(&m->lock);
    return result;
}
