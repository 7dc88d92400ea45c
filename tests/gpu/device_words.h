/*
 * Whether every 32-bit word of a device range holds one value: how the
 * multi-process GPU programs check what a peer wrote through the symmetric
 * buffer.
 */
#ifndef MJ_GPU_DEVICE_WORDS_H
#define MJ_GPU_DEVICE_WORDS_H

#include <cuda.h>
#include <stdlib.h>

static inline int device_words_equal(CUdeviceptr p, size_t words, unsigned want) {
    unsigned *h = malloc(words * 4);
    int ok = h && cuMemcpyDtoH(h, p, words * 4) == CUDA_SUCCESS;
    for (size_t i = 0; ok && i < words; i++)
        ok = h[i] == want;
    free(h);
    return ok;
}

#endif /* MJ_GPU_DEVICE_WORDS_H */
