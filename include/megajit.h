/*
 * megajit: a JIT kernel-generation runtime for fused MoE kernels.
 *
 * This is the only header users include. Every function that can fail returns
 * an mj_status; on failure mj_last_error() returns a sentence describing the
 * problem for the calling thread. Such a function clears that sentence on
 * entry, so after it succeeds mj_last_error() is "". Functions that return no
 * status (destroy, close, names, counts) leave the sentence as they found it,
 * so they may be called while reporting or cleaning up after an error. Every
 * output pointer is checked: NULL gives MJ_ERR_INVALID_ARG, or is skipped
 * where the documentation says an output may be NULL. No function aborts the
 * process on bad input or a missing GPU.
 *
 * Option and config structs begin with struct_size: initialize each with its
 * MJ_*_INIT macro, then set its fields, e.g.
 *     mj_symm_config cfg = MJ_SYMM_CONFIG_INIT;
 *     cfg.hidden = 7168;
 * Fields are only ever added at the end, so a program built against this
 * header keeps working with a later libmegajit.so.0; a struct_size of 0 (a
 * struct not initialized so) is refused with MJ_ERR_INVALID_ARG.
 *
 * Threading: a runtime may be shared by threads. Settings (SM count, PDL) are
 * per kernel family and guarded by the runtime's lock. Streams are always
 * passed by the caller; megajit never uses the legacy default stream on its own
 * (the copies of mj_weights_load and mj_weights_set_alphas run on a stream of
 * the weights' own, and the zeroing of a new buffer on a private stream; each
 * is complete when its call returns).
 *
 * Contexts: every call that touches the device (creating or destroying a
 * buffer or weights, mj_weights_load, mj_weights_set_alphas, warm-up,
 * pre-dispatch, MegaMoE) makes the runtime's context current on the calling
 * thread (cuCtxSetCurrent, when another is current) and leaves it current. A
 * thread that also drives another device makes that one current again after.
 * Cache, manifest, family-setting, info and view calls touch no context.
 *
 * Environment (read once, when the first runtime is created):
 *   MEGAJIT_CACHE_DIR      writable cache directory (default $XDG_CACHE_HOME/megajit,
 *                          else ~/.cache/megajit, else ${TMPDIR:-/tmp}/megajit-cache-<uid>)
 *   MEGAJIT_CACHE_RO       colon-separated read-only cache snapshots, consulted
 *                          before compiling
 *   MEGAJIT_CACHE_RO_ALLOW_WRITABLE  1: use snapshots that group or others can write
 *   MEGAJIT_CACHE_DISABLE  1: no on-disk cache (compile into memory only)
 *   MEGAJIT_LOG            0 (errors) .. 3 (debug), to stderr
 *   MEGAJIT_DUMP_DIR       write source, PTX and SASS-ready cubins of every compile here
 *   MEGAJIT_TEMPLATE_DIR   read kernel templates from this directory instead of the
 *                          copies embedded at build time (development)
 *   MEGAJIT_JIT_DISABLE    1: as allow_compile = 0 for every runtime (production)
 *   MEGAJIT_MOE_TIMEOUT_MS how long MegaMoE's in-kernel waits on other CTAs and ranks
 *                          last before they give up (default 10 s)
 */
#ifndef MEGAJIT_H
#define MEGAJIT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Marks what libmegajit.so exports: the library is built with
 * -fvisibility=hidden, so no other symbol of it reaches the dynamic table
 * (.ci/check-exports compares the two lists). */
#if defined(__GNUC__)
#define MJ_API __attribute__((visibility("default")))
#else
#define MJ_API
#endif

/* MJ_*_INIT: a struct with struct_size set and every other field zero, but
 * for the defaults named. C++ before C++20 has no designated initializers,
 * so it gets a value-initialized struct from a lambda. */
#ifdef __cplusplus
#define MJ_INIT_(type, ...)                                                                        \
    ([] {                                                                                          \
        type s_{};                                                                                 \
        s_.struct_size = sizeof(type);                                                             \
        __VA_ARGS__;                                                                               \
        return s_;                                                                                 \
    }())
#define MJ_DEFAULT_(field, value) s_.field = value
#else
#define MJ_INIT_(type, ...)                                                                        \
    { .struct_size = sizeof(type), __VA_ARGS__ }
#define MJ_DEFAULT_(field, value) .field = value
#endif

#define MJ_VERSION_MAJOR 0
#define MJ_VERSION_MINOR 1
#define MJ_VERSION_PATCH 0
#define MJ_VERSION_STRING "0.1.0"

typedef enum mj_status {
    MJ_OK = 0,
    MJ_ERR_INVALID_ARG = 1, /* a bad argument; nothing was written */
    MJ_ERR_NO_DEVICE = 2,   /* no CUDA driver or device on this machine */
    MJ_ERR_COMPILE = 3,     /* NVRTC rejected a kernel; see mj_last_error() for the log */
    MJ_ERR_CAPTURE = 4,     /* a kernel would have to be compiled during graph capture */
    MJ_ERR_CUDA = 5,        /* a CUDA driver call failed, or a kernel reported a failure */
    MJ_ERR_CACHE = 6,       /* the on-disk cache could not be used */
    MJ_ERR_IO = 7,          /* a file could not be read or written */
    MJ_ERR_NOMEM = 8,       /* host or device memory exhausted */
    MJ_ERR_UNSUPPORTED = 9, /* a valid request this build or device cannot serve */
    MJ_ERR_NOT_FOUND = 10,  /* a named thing (cache key, preset, view) does not exist, or a
                             * kernel is neither loaded nor cached and may not be compiled */
} mj_status;

/* The calling thread's last error sentence ("" when none). Valid until the
 * thread's next call that returns a status. */
MJ_API const char *mj_last_error(void);
/* A short constant name for a status ("MJ_ERR_COMPILE"). */
MJ_API const char *mj_status_name(mj_status status);
/* "0.1.0" */
MJ_API const char *mj_version_string(void);

/* CUstream and cudaStream_t are both pointers to this incomplete type. */
typedef struct CUstream_st *mj_stream;

/* ---------------------------------------------------------------- runtime */

typedef struct mj_runtime mj_runtime;

typedef struct mj_runtime_options {
    size_t struct_size; /* sizeof(mj_runtime_options), from MJ_RUNTIME_OPTIONS_INIT */
    /* Writable cache directory; NULL = environment / default. */
    const char *cache_dir;
    /* Colon-separated read-only snapshots; NULL = environment. */
    const char *cache_ro;
    /* 1 = no on-disk cache at all. */
    int cache_disable;
    /* Target architecture for compiles ("sm_90a", "sm_100a"); NULL = the current device's. */
    const char *arch;
    /* 1 = after launches that take device-side indices (top-k ids), synchronize
     * the stream and turn a device-detected bad index into MJ_ERR_INVALID_ARG.
     * The kernels never write output for bad input either way; this only makes
     * the error visible synchronously (tests, debugging). Ignored while capturing.
     * It covers mj_pre_dispatch (ids outside [-1, num_experts): MJ_ERR_INVALID_ARG)
     * and mj_mega_moe: after the launch it synchronizes the stream and reads the
     * rank's device error word (a wait that timed out, a peer that never arrived,
     * a kernel-detected inconsistency), returning MJ_ERR_CUDA with its meaning and
     * clearing the word; for one-rank buffers and real ranks (create_nccl), not
     * for emulated multi-rank buffers, whose ranks cannot be synchronized alone.
     * mj_mega_moe does not re-check ids: pre-dispatch did. */
    int check_device_inputs;
    /* 1 (the default) = a launch or warm-up that needs a kernel neither loaded
     * nor cached compiles it; 0 = it fails with MJ_ERR_NOT_FOUND naming the
     * kernel and the `megajit precompile` command that builds it, so a server
     * never compiles on a request. mj_manifest_build_kernel always compiles. */
    int allow_compile;
} mj_runtime_options;
#define MJ_RUNTIME_OPTIONS_INIT MJ_INIT_(mj_runtime_options, MJ_DEFAULT_(allow_compile, 1))

/* Options at MJ_RUNTIME_OPTIONS_INIT, or opts NULL, mean: everything from the environment.
 * Without a CUDA driver the runtime still opens (cache, precompile work); launches
 * then return MJ_ERR_NO_DEVICE. With a driver, the runtime uses the context current
 * on the calling thread, or retains device 0's primary context when none is. */
MJ_API mj_status mj_runtime_create(mj_runtime **out, const mj_runtime_options *opts);
MJ_API void mj_runtime_destroy(mj_runtime *rt);

/* Whether this runtime can launch kernels (driver + device present). */
MJ_API int mj_runtime_has_device(const mj_runtime *rt);
/* The architecture this runtime compiles for ("sm_90a"). */
MJ_API const char *mj_runtime_arch(const mj_runtime *rt);

typedef enum mj_family {
    MJ_FAMILY_PRE_DISPATCH = 0,
    MJ_FAMILY_MEGA_MOE = 1,
    /* The kernels `megajit bench` measures the card's read bandwidth and BF16
     * tensor rate with; no MoE layer launches them. */
    MJ_FAMILY_BENCH_CEILINGS = 2,
    MJ_FAMILY_COUNT_ = 3
} mj_family;

/* Name of a family ("pre_dispatch"); NULL for an unknown one. */
MJ_API const char *mj_family_name(mj_family family);

/* Per-family settings; setting one family never changes another.
 * num_sms: 0 = all SMs of the device; otherwise 1..device SM count. */
MJ_API mj_status mj_family_set_num_sms(mj_runtime *rt, mj_family family, int num_sms);
MJ_API mj_status mj_family_get_num_sms(const mj_runtime *rt, mj_family family, int *num_sms);
MJ_API mj_status mj_family_set_pdl(mj_runtime *rt, mj_family family, int enable);
MJ_API mj_status mj_family_get_pdl(const mj_runtime *rt, mj_family family, int *enable);

/* Counters of this runtime's in-memory and on-disk cache since creation. */
typedef struct mj_runtime_stats {
    uint64_t memory_hits; /* spec found loaded in memory */
    uint64_t disk_hits;   /* cubin read from the on-disk cache or a snapshot */
    uint64_t compiles;    /* NVRTC compiles done by this process */
    uint64_t healed;      /* entries found corrupt, deleted and rebuilt */
    double compile_seconds;
} mj_runtime_stats;
MJ_API mj_status mj_runtime_get_stats(const mj_runtime *rt, mj_runtime_stats *out);

/* ---------------------------------------------------------------- formats */

typedef enum mj_format {
    MJ_FORMAT_BF16 = 0,
    MJ_FORMAT_MXFP8 = 1, /* E4M3 elements, UE8M0 scale per 32 */
    MJ_FORMAT_MXFP4 = 2, /* E2M1 elements, UE8M0 scale per 32 */
    MJ_FORMAT_NVFP4 = 3, /* E2M1 elements, UE4M3 scale per 16, fp32 per-token scale */
    MJ_FORMAT_COUNT_ = 4
} mj_format;

MJ_API const char *mj_format_name(mj_format format);                   /* "nvfp4" */
MJ_API mj_status mj_format_parse(const char *name, mj_format *format); /* inverse */

typedef enum mj_dtype {
    MJ_DTYPE_U8 = 0, /* packed FP4 pairs, scale bytes */
    MJ_DTYPE_E4M3 = 1,
    MJ_DTYPE_BF16 = 2,
    MJ_DTYPE_I32 = 3,
    MJ_DTYPE_F32 = 4,
} mj_dtype;

/* ------------------------------------------------------ symmetric buffers */

typedef struct mj_symm_buffer mj_symm_buffer;

typedef struct mj_symm_config {
    size_t struct_size;      /* sizeof(mj_symm_config), from MJ_SYMM_CONFIG_INIT */
    int hidden;              /* H, a multiple of 64, <= 8192 */
    int num_experts;         /* global expert count */
    int num_topk;            /* K */
    int max_tokens_per_rank; /* T_max: rows of each rank's input region */
    mj_format dispatch_format;
    int num_ranks; /* ranks: emulated in this process, or the communicator's size (>= 1) */
    /* MegaMoE expert intermediate size I; 0 = a buffer for pre-dispatch only.
     * > 0 adds the regions mj_mega_moe works in (sized for num_ranks, the
     * experts, top-k and max tokens). */
    int intermediate;
    /* The intermediate size of the layer's shared expert
     * (mj_moe_config.shared_intermediate; 0, the default, and for a struct
     * that ends before this field: none): the buffer then also holds its
     * token tiles and its combine slot. 64 bits wide only so that this
     * version's struct_size differs from the previous one's (an int would
     * have filled its padding). */
    int64_t shared_intermediate;
} mj_symm_config;
#define MJ_SYMM_CONFIG_INIT MJ_INIT_(mj_symm_config, )

/* One device allocation holding num_ranks rank regions (base + per-rank offsets).
 * Records the MegaMoE family's SM count at creation; a later launch with another
 * count is refused. The buffer is zeroed once here. */
MJ_API mj_status mj_symm_buffer_create(mj_runtime *rt, const mj_symm_config *cfg,
                                       mj_symm_buffer **out);
/* One process per GPU: cfg->num_ranks must equal the size of nccl_comm (an
 * ncclComm_t whose device is the runtime's); this process is its rank. Each rank's
 * region is allocated with CUDA VMM, shared with FABRIC handles or file descriptors
 * and every peer is mapped into one address range, so views of any rank give
 * addresses this process can use. Collective: every rank calls it with the same
 * cfg; when it returns on any rank, every rank's region is mapped and zeroed.
 * NCCL (libnccl.so.2) is loaded at run time; MJ_ERR_UNSUPPORTED without it or
 * without peer-to-peer access between the GPUs. Keep the communicator alive
 * until the buffer is destroyed: destroying such a buffer is collective as well. */
MJ_API mj_status mj_symm_buffer_create_nccl(mj_runtime *rt, const mj_symm_config *cfg,
                                            void *nccl_comm, mj_symm_buffer **out);
MJ_API void mj_symm_buffer_destroy(mj_symm_buffer *buf);

/* The regions of one rank, P = max_tokens_per_rank rows, row-major, one token
 * per row, rows packed (row_stride_bytes = a row's bytes):
 *   X: BF16 [P, H] (dtype BF16), E4M3 [P, H] (MXFP8), or E2M1 pairs [P, H / 2]
 *      bytes (MXFP4, NVFP4): element 2b in the LOW nibble of byte b, 2b + 1 in
 *      the high nibble; an E2M1 code is a sign bit (8) and an index into
 *      {0, 0.5, 1, 1.5, 2, 3, 4, 6}.
 *   X_SF: [P, H / group] scale bytes; byte g of a row scales elements
 *      g * group .. g * group + group - 1 of that row: UE8M0 (2^(b - 127)),
 *      group 32, for MXFP8 / MXFP4; UE4M3 (an E4M3 byte >= 0), group 16, NVFP4.
 *   X_SCALES: [P] fp32, NVFP4 only: token t's element = E2M1 x UE4M3 x
 *      x_scales[t] (the per-token scale multiplies the GEMM 1 accumulator).
 *   TOPK_IDX [P, K] int32 global expert ids, -1 masked; TOPK_WEIGHTS [P, K] fp32.
 * Rows >= the last pre-dispatch's num_tokens: ids -1, weights 0, X / X_SF /
 * X_SCALES as they were. */
typedef enum mj_view_id {
    MJ_VIEW_X = 0,            /* [P, H * bits / 8] tokens in the dispatch format */
    MJ_VIEW_X_SF = 1,         /* [P, H / group] scale bytes (u8); absent for BF16 */
    MJ_VIEW_TOPK_IDX = 2,     /* [P, K] int32, -1 = masked */
    MJ_VIEW_TOPK_WEIGHTS = 3, /* [P, K] fp32 */
    MJ_VIEW_X_SCALES = 4,     /* [P] fp32 per-token scale; NVFP4 only */
    MJ_VIEW_COUNT_ = 5
} mj_view_id;

typedef struct mj_view {
    void *ptr; /* device address inside the calling process */
    mj_dtype dtype;
    int ndim;
    int64_t shape[2];
    int64_t row_stride_bytes;
    size_t nbytes;
} mj_view;

/* A view of one rank's region. MJ_ERR_NOT_FOUND when the format has no such view. */
MJ_API mj_status mj_symm_buffer_view(const mj_symm_buffer *buf, int rank, mj_view_id id,
                                     mj_view *out);
/* The buffer's config, SM count and bytes per rank; any output may be NULL.
 * cfg must be initialized with MJ_SYMM_CONFIG_INIT: it gets as many fields as
 * its struct_size holds. */
MJ_API mj_status mj_symm_buffer_info(const mj_symm_buffer *buf, mj_symm_config *cfg, int *num_sms,
                                     size_t *bytes_per_rank);

/* ---------------------------------------------------------- pre-dispatch */

/* Quantizes num_tokens BF16 rows x [num_tokens, H] (device, row-major) into rank
 * `rank`'s input region of buf in the buffer's dispatch format, with top-k ids
 * [num_tokens, K] (int32, -1 = masked) and weights [num_tokens, K] (fp32).
 * expert_scales (device fp32 [num_experts], may be NULL) multiplies each valid
 * slot's weight once. Rows num_tokens..T_max-1 of ids/weights become (-1, 0).
 * Numerics: NUMERICS.md, bit-identical to the host reference quantizers (a NaN
 * element keeps its sign in E4M3 and is code 0 in E2M1; an NVFP4 block scale
 * that is NaN, Inf / Inf when the row holds an Inf, is 0x7f).
 * Enqueues two kernels on `stream`: a check of the ids (PDL-chained to the
 * previous work when the family's PDL flag is set) and the persistent main
 * kernel on the pre-dispatch family's SM count, which starts loading at once
 * and writes nothing if any id lies outside [-1, num_experts).
 * Masked slots (id -1) of rows < num_tokens keep id -1 and their weight as
 * given (expert_scales does not touch it); everything downstream skips them:
 * they are not dispatched, not counted in recv_stats and not in the combine,
 * so their weight never reaches y.
 * num_tokens = 0 is valid: x, topk_ids and topk_weights may then be NULL; both
 * kernels still run and every row's top-k slots become (-1, 0). */
MJ_API mj_status mj_pre_dispatch(mj_runtime *rt, mj_symm_buffer *buf, int rank, const void *x,
                                 const int32_t *topk_ids, const float *topk_weights,
                                 const float *expert_scales, int num_tokens, mj_stream stream);

/* ---------------------------------------------------------------- MegaMoE */

/* The activation of NUMERICS.md step 4 on the BF16-rounded gate g and up u;
 * its parameters are mj_moe_config fields (left 0, the standard values below). */
typedef enum mj_activation {
    /* h = g sigmoid(alpha g), v = u + beta (swiglu_alpha, swiglu_beta: 1, 0) */
    MJ_ACTIVATION_SWIGLU = 0,
    /* swiglu at alpha 1.702, beta 1: h = g sigmoid(1.702 g), v = u + 1 */
    MJ_ACTIVATION_SWIGLUOAI = 1,
    /* h = bg tanh(g / bg) sigmoid(g), v = bu tanh(u / bu) (situ_gate_beta,
     * situ_up_beta: 4, 25) */
    MJ_ACTIVATION_SITU = 2,
    MJ_ACTIVATION_COUNT_ = 3
} mj_activation;

/* One MoE layer as one rank sees it. Supported (weight, dispatch) pairs and the
 * GEMM 2 input format they imply: bf16/bf16, mxfp8/mxfp8, mxfp4/mxfp8,
 * mxfp4/bf16, nvfp4/nvfp4, nvfp4/bf16. The GEMM 2 input (the activation,
 * quantized in GEMM 1's epilogue, NUMERICS.md step 6) is:
 *   bf16/bf16 -> BF16        mxfp8/mxfp8 -> MXFP8     mxfp4/mxfp8 -> MXFP8
 *   mxfp4/bf16 -> BF16       nvfp4/nvfp4 -> NVFP4     nvfp4/bf16 -> BF16
 * i.e. the dispatch format; NVFP4's GEMM 2 input has no per-token scale (a
 * UE4M3 scale per 16 from amax * fp32(1/6)), so l2_act_scale and l2_alpha are
 * where a global scale of the activation goes. */
typedef struct mj_moe_config {
    size_t struct_size;      /* sizeof(mj_moe_config), from MJ_MOE_CONFIG_INIT */
    int hidden;              /* H, a multiple of 64, <= 8192 */
    int intermediate;        /* I, a multiple of 64 */
    int num_experts;         /* global; a multiple of num_ranks */
    int num_topk;            /* K */
    int num_ranks;           /* expert-parallel ranks */
    int rank;                /* the rank these weights belong to */
    int max_tokens_per_rank; /* as the symmetric buffer was created with */
    mj_format weight_format;
    mj_format dispatch_format;
    mj_activation activation;
    float clamp; /* > 0: clamp C of the swiglu family (NUMERICS.md step 3); 0: none */
    int block_m; /* 0: the heuristics choose per token count; 8/16/32/64/128/160 forced,
                  * at most 160 for the MXFP4 and NVFP4 weight rows without a shared
                  * expert (nor, for mxfp4-a8, expert biases), 128 otherwise */
    /* No effect; 0 or 1 (anything else is MJ_ERR_INVALID_ARG). It chose how the
     * mxfp4-a8 row's E4M3 kernels applied MXFP4 block scales; that row now
     * decodes its weights into BF16 like every other row, which applies any
     * scale exactly. Kept so callers that set it still build and run. A struct
     * that ends before this field (an older megajit.h) means 0. */
    int unfold_mx_scales;
    /* Parameters of the activation (NUMERICS.md step 4; mj_activation), compiled
     * into the kernels as constants (part of their cache keys); 0 in a field
     * means its standard value. swiglu: swiglu_alpha (0 means 1; h = g
     * sigmoid(alpha g), alpha g rounded to fp32) and swiglu_beta (0: v = u;
     * else v = u + beta in fp32), finite. swigluoai is swiglu at 1.702 and 1,
     * and swiglu given exactly those values runs swigluoai's kernels. situ:
     * situ_gate_beta (0 means 4) and situ_up_beta (0 means 25), finite and >
     * 0 when given; g / bg and u / bu are fp32 divisions. The fields of the
     * other activations must be 0, so a parameter is never silently ignored.
     * A struct that ends before these fields (an older megajit.h) means 0. */
    float swiglu_alpha;
    float swiglu_beta;
    float situ_gate_beta;
    float situ_up_beta;
    /* 1: the layer's experts have biases (gpt-oss), loaded with
     * mj_weights_load_bias and zero until then; the kernels are compiled with
     * them (NUMERICS.md steps 2 and 7, as mj_weights_load_bias says). 0 (the
     * default, and for a struct that ends before this field): none. */
    int expert_biases;
    /* A shared expert fused into the layer (NUMERICS.md step 8): every rank
     * runs it on each of its own tokens, from the token's dispatch-format row
     * (no second quantization), with routing weight 1 and alphas 1, the
     * layer's activation, clamp and GEMM 2 input format, and adds its output
     * to the token's routed sum as slot K. shared_intermediate is its
     * intermediate size, a positive multiple of intermediate (one or more
     * experts' worth), or 0 (the default, and for a struct that ends before
     * these fields): no shared expert. shared_format is its weights'
     * format; the fusable ones per format row: bf16 -> bf16; mxfp8, mxfp4-a8,
     * mxfp4-a16 -> mxfp8; nvfp4, nvfp4-a16 -> mxfp8 or bf16 (others:
     * MJ_ERR_INVALID_ARG). The kernels run every fusable pair where its
     * stages fit the routed experts' (bf16 beside the nvfp4 rows needs
     * hidden and intermediate multiples of 128; MJ_ERR_UNSUPPORTED names
     * the stage otherwise). Fusion is fixed when the weights are created (the
     * kernels are compiled with it); load the projections with
     * mj_weights_load_shared. Without a shared expert shared_format must stay
     * 0 (with one, 0 is bf16). */
    int shared_intermediate;
    mj_format shared_format;
} mj_moe_config;
#define MJ_MOE_CONFIG_INIT MJ_INIT_(mj_moe_config, )

/* Local expert weights of one rank, in the kernel's private device layout. */
typedef struct mj_weights mj_weights;

MJ_API mj_status mj_weights_create(mj_runtime *rt, const mj_moe_config *cfg, mj_weights **out);
MJ_API void mj_weights_destroy(mj_weights *w);

typedef enum mj_projection {
    MJ_PROJ_GATE = 0, /* [I][H] */
    MJ_PROJ_UP = 1,   /* [I][H] */
    MJ_PROJ_DOWN = 2, /* [H][I] */
} mj_projection;

/* Loads one projection of local expert e (0 .. E/R - 1) from the checkpoint
 * layout: row-major [out][in] in the weight format (BF16 values, E4M3 bytes,
 * or E2M1 packed two per byte with the even element in the low nibble) and
 * scales [out][in / group] (UE8M0 bytes for MX formats, UE4M3 for NVFP4; NULL
 * for BF16). from_device: both pointers are device memory, read after the
 * context's pending work (the caller's writes) completes. Synchronous: the
 * sources may be freed on return. The projection is written into the
 * kernel's layout by the MegaMoE weight-image kernel, on a stream of the
 * weights' own; like the main kernels it comes from the cache or a compile
 * (a manifest lists it). MX weight scales must keep every decoded weight
 * exact in BF16: bytes 3..246; MXFP4 weights keep each row's bytes within
 * 126 of each other, MXFP8 weights within 118. A row that spreads wider is
 * MJ_ERR_INVALID_ARG naming it.
 * What "synchronous" means: the call returns when the image is written (the
 * image kernel runs on a non-blocking stream of the weights' own, which the
 * call synchronizes); it is ordered against none of the caller's streams. For
 * from_device = 0 the sources are copied in on that same stream (an
 * asynchronous copy the call waits for), so the image kernel reads only
 * bytes that have landed. For
 * from_device = 1 cuCtxSynchronize first waits for all pending work of the
 * context, every stream included (the caller's writes into the sources), then
 * the scales are copied to the host for the checks above and the image kernel
 * reads data and scales. It blocks the calling thread and the whole context;
 * it cannot run while a stream of the context captures a graph. */
MJ_API mj_status mj_weights_load(mj_weights *w, int local_expert, mj_projection proj,
                                 const void *data, const void *scales, int from_device);

/* Loads one projection of the shared expert of weights created with
 * mj_moe_config.shared_intermediate > 0, as mj_weights_load loads a routed
 * expert's (same layouts, checks and synchronization) in
 * mj_moe_config.shared_format: gate and up [I_s][H], down [H][I_s], I_s =
 * shared_intermediate. MXFP8 weights decode into BF16: each row's MX scale
 * bytes must lie within 118 of each other
 * (MJ_ERR_INVALID_ARG names the row). The shared expert has no alphas, biases or
 * l2_act_scale (all 1 or 0, NUMERICS.md step 8). mj_mega_moe and
 * mj_mega_moe_warmup refuse weights whose shared projections are not all
 * loaded. */
MJ_API mj_status mj_weights_load_shared(mj_weights *w, mj_projection proj, const void *data,
                                        const void *scales, int from_device);

/* Loads the bias of one projection of local expert e (0 .. E/R - 1) of
 * weights created with mj_moe_config.expert_biases = 1: fp32, finite, [I]
 * for MJ_PROJ_GATE and MJ_PROJ_UP, [H] for MJ_PROJ_DOWN (host memory, or
 * device memory with from_device = 1, read after the context's pending work
 * as mj_weights_load reads). Until loaded a bias is 0. The values live in a
 * device array of the weights, so a reload needs no recompile and no
 * CUDA-graph recapture; like mj_weights_set_alphas the copy is not ordered
 * against a MegaMoE launch in flight on a caller's stream. Synchronous.
 * Where they enter, for a (token, slot) pair routed to the expert with
 * routing weight w (the top-k weight times expert_scales, as pre-dispatched):
 *   gate and up: g = BF16(fp32(acc1_gate * (xs * l1_alpha_gate)) + b_gate[n]),
 *     u likewise, each an fp32 multiply then an fp32 add (no fused
 *     multiply-add), before the clamp and the activation (step 2);
 *   down: o[h] = BF16(fp32(acc2[h] * l2_alpha) + fp32(w * b_down[h])) (step
 *     7). The layer computes sum_k w_k (W2 h_k + b_k) and megajit applies w_k
 *     before GEMM 2 (step 5), so the bias takes it here. */
MJ_API mj_status mj_weights_load_bias(mj_weights *w, int local_expert, mj_projection proj,
                                      const float *bias, int from_device);

/* Per-expert fp32 scalars (default 1), kept in device arrays so a reload needs
 * no recompile and no CUDA-graph recapture: GEMM 1 gate/up alphas (NVFP4 global
 * scales), GEMM 2 alpha, and the GEMM 2 input scale (NUMERICS.md steps 2, 5, 7).
 * Which rows: for every (token, slot) pair routed to local expert local_expert,
 *   l1_alpha_gate multiplies GEMM 1's gate rows (W1 rows 0..I-1, the gate
 *     projection) and l1_alpha_up its up rows (I..2I-1), each times the token's
 *     per-token scale (NVFP4 tokens; 1 otherwise), before the BF16 rounding;
 *   l2_act_scale multiplies the activation h * v, with the slot's routing
 *     weight, before it is quantized into GEMM 2's input;
 *   l2_alpha multiplies GEMM 2's accumulator, all H output rows, before their
 *     BF16 rounding.
 * The values are copied on the weights' own stream and have landed when the
 * call returns; the copy is not ordered against a MegaMoE launch in flight on
 * a caller's stream: change them between launches. */
MJ_API mj_status mj_weights_set_alphas(mj_weights *w, int local_expert, float l1_alpha_gate,
                                       float l1_alpha_up, float l2_alpha, float l2_act_scale);

/* The BLOCK_M (tokens per tile) a launch with num_tokens per rank uses. */
MJ_API mj_status mj_mega_moe_block_m(const mj_moe_config *cfg, int num_tokens, int *block_m);

/* Compiles (or reads from the cache) and loads the kernel that mj_mega_moe
 * with num_tokens would launch; nothing runs on the device. A server calls it
 * at start-up; emulated ranks must call it for every rank before launching
 * any, since a rank's kernel waits inside for the others. */
MJ_API mj_status mj_mega_moe_warmup(mj_runtime *rt, mj_symm_buffer *buf, const mj_weights *weights,
                                    int num_tokens);

/* One MoE layer for rank weights->rank: dispatch of the tokens pre-dispatched
 * into buf across ranks, expert GEMM 1, activation, GEMM 2 and combine, in one
 * persistent kernel of the MegaMoE family's SM count on `stream`. y: device
 * BF16 [num_tokens][H]. recv_stats (device int32 [E/R], may be NULL) gets the
 * received (token, slot) count of each local expert added: the valid slots only
 * (ids >= 0) of every rank's first num_tokens rows, accumulated across calls
 * (the kernel adds; zero it yourself). With emulated ranks
 * every rank's call must be in flight together (one stream each, the family SM
 * count divided among them, after mj_mega_moe_warmup of every rank): the ranks
 * wait for each other inside the kernel.
 * num_tokens = 0 is valid (y may be NULL): the kernel still launches, since
 * with several ranks this rank's experts serve the others and it must take
 * part; it writes no y row.
 * The kernel reads the input regions and never modifies them (its counters are
 * double-banked and reset by each launch), so it may run again on the same
 * pre-dispatched input without another mj_pre_dispatch: it gives the same y
 * (the sums are in a fixed order) and adds to recv_stats again. It reads the
 * first num_tokens rows of its region (with ranks, each rank's own count): run
 * it with the count that was pre-dispatched (rows past it hold ids -1, y = 0). */
MJ_API mj_status mj_mega_moe(mj_runtime *rt, mj_symm_buffer *buf, const mj_weights *weights,
                             void *y, int num_tokens, int32_t *recv_stats, mj_stream stream);

/* One MoE layer for one rank in one call: mj_pre_dispatch of the tokens into
 * the region of the weights' rank (their mj_moe_config.rank), then
 * mj_mega_moe, both on `stream`, with the arguments, statuses and messages of
 * those two calls (the Python MegaMoE.forward is this one call). Every
 * argument of both steps is checked, and every kernel either needs is loaded
 * (compiled when missing), before anything launches: a bad argument, a kernel
 * that may not be compiled (MJ_ERR_NOT_FOUND) or not while capturing
 * (MJ_ERR_CAPTURE) writes nothing and captures nothing. With
 * check_device_inputs a bad top-k id stops the call after the pre-dispatch
 * (MJ_ERR_INVALID_ARG, as mj_pre_dispatch) and MegaMoE does not run; neither
 * does it after a failed pre-dispatch launch. num_tokens = 0 is valid (x,
 * topk_ids, topk_weights and y may then be NULL). */
MJ_API mj_status mj_moe_forward(mj_runtime *rt, mj_symm_buffer *buf, const mj_weights *weights,
                                const void *x, const int32_t *topk_ids, const float *topk_weights,
                                const float *expert_scales, void *y, int num_tokens,
                                int32_t *recv_stats, mj_stream stream);

/* ------------------------------------------------------ offline precompile */

typedef struct mj_manifest mj_manifest;

/* Parses a deployment manifest (JSON text). On error the message names the field. */
MJ_API mj_status mj_manifest_parse(const char *json, mj_manifest **out);
/* An embedded preset ("deepseek-v3-ep8"). */
MJ_API mj_status mj_manifest_preset(const char *name, mj_manifest **out);
/* Names of the embedded presets, NULL-terminated. */
MJ_API const char *const *mj_manifest_preset_names(void);
/* Replaces the manifest's architecture list ("sm_90a,sm_100a"). */
MJ_API mj_status mj_manifest_set_archs(mj_manifest *m, const char *comma_separated);
MJ_API void mj_manifest_destroy(mj_manifest *m);

/* Kernels a manifest needs, as the runtime would request them. */
MJ_API size_t mj_manifest_kernel_count(const mj_manifest *m);
/* A short human description of kernel i ("pre_dispatch.main<H=7168,fmt=nvfp4,K=8> sm_90a"). */
MJ_API const char *mj_manifest_kernel_describe(const mj_manifest *m, size_t i);

typedef enum mj_build_result {
    MJ_BUILD_CACHED = 0,   /* already in the cache */
    MJ_BUILD_COMPILED = 1, /* compiled and stored in the cache by this call */
    MJ_BUILD_FAILED = 2,
} mj_build_result;

/* Ensures kernel i of the manifest is in rt's cache (compiling when missing);
 * needs no GPU. result and seconds may be NULL. A kernel compiled but not
 * stored (no writable cache, a full disk) is a failure: MJ_ERR_CACHE, the
 * message says why. */
MJ_API mj_status mj_manifest_build_kernel(mj_runtime *rt, const mj_manifest *m, size_t i,
                                          mj_build_result *result, double *seconds);

/* ------------------------------------------------------- cache inspection */

typedef struct mj_cache mj_cache;

/* Opens the cache directory (NULL = the runtime default rules) for inspection
 * and maintenance; creates nothing. A cache that does not exist yet is empty:
 * it lists nothing and removes nothing. read_only = 1 never writes; with 0,
 * mj_cache_import creates the cache when it is missing. The MEGAJIT_CACHE_RO
 * snapshots a runtime would use are opened too: mj_cache_list lists their
 * entries after the cache's own; nothing else touches them. */
MJ_API mj_status mj_cache_open(const char *dir, int read_only, mj_cache **out);
/* Opens the cache for storing kernels into (precompile), creating its
 * directory and database now. MJ_ERR_CACHE when nothing could be stored
 * there: the cache is disabled (MEGAJIT_CACHE_DISABLE), dir is "", the
 * database was written by a newer megajit (read-only to this one), or the
 * directory is refused (network filesystem, cannot be created). */
MJ_API mj_status mj_cache_create(const char *dir, mj_cache **out);
MJ_API void mj_cache_close(mj_cache *c);
MJ_API const char *mj_cache_path(const mj_cache *c); /* the database file */

typedef struct mj_cache_entry {
    char key_hex[33];
    const char *family;
    const char *kernel_name;
    const char *lowered_name;
    const char *arch;
    const char *compiler;
    const char *flags;
    int64_t cubin_bytes;
    int64_t source_bytes;
    int64_t created_at;   /* unix seconds */
    int64_t last_used_at; /* unix seconds */
    int64_t hits;
    double compile_ms;
    const char *layer; /* "": the cache itself; else the MEGAJIT_CACHE_RO snapshot holding it */
} mj_cache_entry;

/* Calls fn for every entry matching the filters (NULL = any); stops when fn returns non-zero. */
typedef int (*mj_cache_entry_fn)(const mj_cache_entry *e, void *user);
MJ_API mj_status mj_cache_list(mj_cache *c, const char *family, const char *arch,
                               mj_cache_entry_fn fn, void *user);

/* Looks up one entry by key prefix (hex, >= 4 chars). MJ_ERR_NOT_FOUND / MJ_ERR_INVALID_ARG
 * when none / several match. The strings stay valid until the next call on c. */
typedef struct mj_cache_detail {
    mj_cache_entry entry;
    const char *source;         /* rendered instantiation source */
    const char *log;            /* NVRTC log */
    const char *const *headers; /* project headers in the closure, NULL-terminated */
    const void *cubin;
    size_t cubin_size;
} mj_cache_detail;
MJ_API mj_status mj_cache_show(mj_cache *c, const char *key_prefix, mj_cache_detail *out);

typedef struct mj_cache_stats {
    int64_t entries;
    int64_t cubin_bytes;
    int64_t file_bytes; /* database + WAL on disk */
    int64_t hits;
    double compile_ms_total;
    double compile_ms_max;
    const char *journal_mode;
    const char *filesystem;
} mj_cache_stats;
MJ_API mj_status mj_cache_stat(mj_cache *c, mj_cache_stats *out);

/* Checks the database and every entry's cubin hash. *bad = number of bad entries;
 * fn (may be NULL) is called for each bad one with a reason. checked and bad
 * may be NULL. */
typedef void (*mj_cache_bad_fn)(const char *key_hex, const char *reason, void *user);
MJ_API mj_status mj_cache_verify(mj_cache *c, int64_t *checked, int64_t *bad, mj_cache_bad_fn fn,
                                 void *user);

typedef enum mj_cache_selector {
    MJ_CACHE_SELECT_KEY = 0,      /* value: key hex prefix */
    MJ_CACHE_SELECT_FAMILY = 1,   /* value: family name */
    MJ_CACHE_SELECT_HEADER = 2,   /* value: project header path ("common/fp4.cuh") */
    MJ_CACHE_SELECT_COMPILER = 3, /* value: compiler string */
    MJ_CACHE_SELECT_ARCH = 4,     /* value: "sm_90a" */
    MJ_CACHE_SELECT_OLDER = 5,    /* value: days since last use, decimal */
    MJ_CACHE_SELECT_ALL = 6,      /* value ignored */
} mj_cache_selector;
MJ_API mj_status mj_cache_remove(mj_cache *c, mj_cache_selector sel, const char *value,
                                 int64_t *removed);
/* Evicts least-recently-used entries until the cubin bytes fit max_bytes.
 * removed and bytes_after may be NULL; so may remove's and import's counts. */
MJ_API mj_status mj_cache_gc(mj_cache *c, int64_t max_bytes, int64_t *removed,
                             int64_t *bytes_after);
/* A consistent, compact snapshot file (usable as a MEGAJIT_CACHE_RO layer). */
MJ_API mj_status mj_cache_export(mj_cache *c, const char *file);
/* Copies entries of a snapshot into this cache (existing keys win). */
MJ_API mj_status mj_cache_import(mj_cache *c, const char *file, int64_t *imported);

/* ------------------------------------------------------------ information */

typedef struct mj_info {
    const char *megajit_version;
    const char *nvrtc_version; /* "13.0.88" or "" when NVRTC is missing */
    int driver_version;        /* 13000 = 13.0; 0 when no driver */
    const char *device_name;   /* "" without a device */
    int device_sms;
    const char *arch;
    const char *cache_path;
    const char *cache_filesystem;
    const char *cache_journal_mode;
    const char *cache_ro_layers;
    int cache_disabled;
} mj_info;
/* Fills info from rt (strings owned by rt). */
MJ_API mj_status mj_runtime_info(mj_runtime *rt, mj_info *info);

#ifdef __cplusplus
}
#endif
#endif /* MEGAJIT_H */
