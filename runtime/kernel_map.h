/*
 * The in-memory layer: kernel spec -> kernel (lowered name, cubin until the
 * first launch loads it, then the CUfunction). Lookups take a read lock and
 * do no allocation; entries live until the runtime is destroyed.
 */
#ifndef MJ_KERNEL_MAP_H
#define MJ_KERNEL_MAP_H

#include <cuda.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/cuda_driver.h"
#include "runtime/kernel_spec.h"

struct mj_kernel {
    mj_kernel_spec spec;
    uint64_t spec_hash;
    char name_expression[256];
    char *lowered_name;
    void *cubin; /* freed once loaded */
    size_t cubin_size;
    pthread_mutex_t load_lock;
    CUlibrary library;
    CUfunction function; /* published with release order once loaded */
    unsigned max_dynamic_smem;
};

typedef struct mj_kernel_map mj_kernel_map;

mj_kernel_map *mj_kernel_map_create(void);
/* Unloads every loaded library through cu (may be NULL when nothing was loaded). */
void mj_kernel_map_destroy(mj_kernel_map *map, const mj_cuda *cu);

uint64_t mj_kernel_spec_hash(const mj_kernel_spec *spec);
struct mj_kernel *mj_kernel_map_find(mj_kernel_map *map, const mj_kernel_spec *spec, uint64_t hash);
/* Takes ownership of k; returns the entry now in the map (k, or an earlier one,
 * in which case k is freed). NULL when out of memory (k freed). */
struct mj_kernel *mj_kernel_map_insert(mj_kernel_map *map, struct mj_kernel *k);
void mj_kernel_free(struct mj_kernel *k);

#endif
