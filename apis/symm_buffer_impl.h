/* The symmetric buffer object, shared by the entry points that write into it. */
#ifndef MJ_SYMM_BUFFER_IMPL_H
#define MJ_SYMM_BUFFER_IMPL_H

#include <cuda.h>

#include "apis/megajit.h"
#include "templates/layout/symm_layout.h"

struct mj_symm_buffer {
    mj_runtime *rt;
    mj_symm_config cfg;
    int num_sms; /* the MegaMoE family's SM count at creation */
    CUdeviceptr base;
    size_t rank_bytes; /* stride between rank regions */
    mj_input_layout layout;
};

/* Validates a config; the message names the bad field. */
mj_status mj_symm_config_check(const mj_symm_config *c);

/* Device address of rank r's region. */
static inline CUdeviceptr mj_symm_rank_base(const struct mj_symm_buffer *b, int rank) {
    return b->base + (CUdeviceptr)rank * b->rank_bytes;
}

#endif
