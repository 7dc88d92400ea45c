/*
 * Task epilogues of one math warpgroup.
 *
 * GEMM 1: the warpgroup holds gate and up of 64 intermediates for the tile's
 * tokens in matching registers; their step 2 BF16 pairs go through shared
 * memory (a token column per 68 words) so that each thread activates (steps
 * 3-5) and quantizes (step 6) whole groups of one token into the GEMM 2 tile
 * image; the task is then posted for the release of the tile's GEMM 1
 * count (release.cuh).
 *
 * With expert biases (C::kBiases) the gate and up bias of each row is added
 * to its scaled accumulator before step 2's rounding, and the down bias times
 * the column's routing weight before step 7's (include/megajit.h,
 * mj_weights_load_bias).
 *
 * GEMM 2: o = BF16(acc * l2_alpha) goes through shared memory so that each
 * token's rows leave as 16-byte stores into its combine slot on its home rank;
 * the task is then posted for one arrival per token on the home rank's
 * counter (release.cuh).
 *
 * The shared expert's tasks (k.local == kLocal) take alphas and
 * l2_act_scale 1 and no biases (NUMERICS.md step 8); their rows' routing
 * weight is 1 and their combine slot K (dispatch.cuh).
 *
 * Both write `stored`, when the task is traced, once the thread's stores are
 * issued (before the GEMM 1 proxy fence).
 */
#ifndef MJ_MEGA_MOE_EPILOGUE_CUH
#define MJ_MEGA_MOE_EPILOGUE_CUH

#include "mega_moe/activation.cuh"
#include "mega_moe/mainloop.cuh"
#include "mega_moe/release.cuh"
#include "mega_moe/weight_image.cuh"

namespace mj {

/* D fragment element j of a thread: its row in the 64-row block and its token column. */
__device__ __forceinline__ int frag_row(const MathThread &m, int j) {
    return 16 * m.w + m.g + 8 * ((j >> 1) & 1);
}
__device__ __forceinline__ int frag_col(const MathThread &m, int j) {
    return 8 * (j >> 2) + 2 * m.q + (j & 1);
}

/* The 64-row blocks of task k that warpgroup m.wg owns: 0, 1 or 2. */
__device__ __forceinline__ int own_blocks(const Task &k, const MathThread &m) {
    const int left = k.nblk - 2 * m.wg;
    return left < 0 ? 0 : left > 2 ? 2 : left;
}
/* Whether warpgroup m.wg owns at least n (1 or 2) of task k's blocks, from
 * k.nblk: ptxas (CUDA 13.0) folded "own_blocks == 2" into the predicate
 * output of the VIMNMX.RELU that clamps the count, and the predicate came out
 * false for a warpgroup with four blocks left (the first warpgroup of a
 * shared expert's four-block task then skipped its row scales;
 * bench/RESULTS.md, eighteenth session). bench/sass_guard.py looks for such
 * a predicate in every kernel's SASS. */
__device__ __forceinline__ bool owns_blocks(const Task &k, const MathThread &m, int n) {
    return k.nblk >= 2 * m.wg + n;
}
/* GEMM 1: the warpgroup's unit, gate and up of 64 intermediates (its
 * epilogue runs when it owns both blocks). */
__device__ __forceinline__ int l1_unit(const Task &k, const MathThread &m) {
    return 2 * k.n + m.wg;
}
/* GEMM 2: the first of the warpgroup's output rows. */
__device__ __forceinline__ int l2_first_row(const Task &k, const MathThread &m) {
    return MJ_MOE_BLOCK_ROWS * (MJ_MOE_TASK_BLOCKS * k.n + 2 * m.wg);
}
/* The three for a task of any routing entry: a shared expert's tasks of two
 * blocks (C::kSharedOwnLoop) are block pairs, a block a warpgroup
 * (hand_up_rows, post_block_pair below): in GEMM 1 one unit, whose epilogue
 * the first warpgroup runs. */
template <class C> __device__ __forceinline__ bool block_pair(const Task &k) {
    if constexpr (C::kSharedOwnLoop) return k.local == C::kLocal;
    return false;
}
template <class C>
__device__ __forceinline__ int task_own_blocks(const Task &k, const MathThread &m) {
    if (block_pair<C>(k)) return k.nblk > m.wg ? 1 : 0;
    return own_blocks(k, m);
}
/* owns_blocks for a task of any routing entry: a block pair's warpgroup owns
 * one block at most. */
template <class C>
__device__ __forceinline__ bool task_owns_blocks(const Task &k, const MathThread &m, int n) {
    if (block_pair<C>(k)) return n == 1 && k.nblk > m.wg;
    return owns_blocks(k, m, n);
}
template <class C> __device__ __forceinline__ int task_l1_unit(const Task &k, const MathThread &m) {
    if (block_pair<C>(k)) return k.n;
    return l1_unit(k, m);
}
template <class C>
__device__ __forceinline__ int task_l2_first_row(const Task &k, const MathThread &m) {
    if (block_pair<C>(k)) return MJ_MOE_BLOCK_ROWS * (2 * k.n + m.wg);
    return l2_first_row(k, m);
}

/* The row scales (weight_image.cuh) of a thread's two rows in a 64-row
 * block whose first row is checkpoint row `first` of an image's row-scale
 * array (at `array`). */
__device__ __forceinline__ float2 image_row_scales(const unsigned char *array, int first,
                                                   const MathThread &m) {
    const float *rs = reinterpret_cast<const float *>(array) + first + 16 * m.w + m.g;
    return make_float2(rs[0], rs[8]);
}

/* Those of a local expert's image; 1 for images without them. */
template <class C>
__device__ __forceinline__ float2 row_scales(const Launch<C> &L, int local, int first,
                                             const MathThread &m) {
    if (!C::kRebased) return make_float2(1.0f, 1.0f);
    return image_row_scales(L.args->w + (mj_u64)local * C::kExpertBytes + C::kRowScaleOffset, first,
                            m);
}

/* What a task's epilogue reads besides the accumulators, loaded when its
 * first stage has landed (its token rows and their meta are visible from
 * then) so that the loads complete under the K loop. */
struct EpiInputs {
    mj_u32 meta[4]; // token column m.t (< valid): GEMM 1 xs, w; GEMM 2 home, token, slot, w
    float alpha[3]; // GEMM 1: gate alpha, up alpha, act scale; GEMM 2: alpha
    float2 rs[2];   // the thread's row scales: GEMM 1 gate, up; GEMM 2 both blocks
    float2 bias[2]; // with biases, of the thread's rows as rs; else 0
};

/* The biases of a thread's two rows (16 m.w + m.g and 8 below) from row
 * `first` of an fp32 array; 0 where the warpgroup owns no such block. */
__device__ __forceinline__ float2 row_biases(const float *b, mj_u64 first, bool owned,
                                             const MathThread &m) {
    if (!owned) return make_float2(0.0f, 0.0f);
    const float *r = b + first + 16 * m.w + m.g;
    return make_float2(r[0], r[8]);
}

/* Token column col's words of the tile's meta (col < k.valid): GEMM 1 its x
 * scale and routing weight; GEMM 2 its home rank, token, slot, and with
 * biases its routing weight. */
template <class C>
__device__ __forceinline__ uint4 column_meta(const Launch<C> &L, const Task &k, int col) {
    const mj_u32 *meta = L.meta_row(k.tile, col);
    if (k.gemm == 1) return make_uint4(ld_cg(meta + 3), ld_cg(meta + 4), 0u, 0u);
    return make_uint4(ld_cg(meta), ld_cg(meta + 1), ld_cg(meta + 2),
                      C::kBiases ? ld_cg(meta + 4) : 0u);
}

/* Token column m.t's meta words (zero past the tile's valid rows). */
template <class C>
__device__ __forceinline__ void load_meta(const Launch<C> &L, const Task &k, const MathThread &m,
                                          EpiInputs &e) {
    if (m.t >= k.valid) return;
    const uint4 w = column_meta(L, k, m.t);
    e.meta[0] = w.x, e.meta[1] = w.y, e.meta[2] = w.z, e.meta[3] = w.w;
}

template <class C>
__device__ __forceinline__ EpiInputs epi_inputs(const Launch<C> &L, const Task &k,
                                                const MathThread &m) {
    const float2 one = make_float2(1.0f, 1.0f);
    EpiInputs e;
    e.meta[0] = e.meta[1] = e.meta[2] = e.meta[3] = 0u;
    e.bias[0] = e.bias[1] = make_float2(0.0f, 0.0f);
    const mj_moe_args &a = *L.args;
    if constexpr (C::kShared) {
        if (k.local == C::kLocal) {
            load_meta(L, k, m, e);
            e.alpha[0] = e.alpha[1] = e.alpha[2] = 1.0f;
            e.rs[0] = e.rs[1] = one;
            // Its image's row scales: in GEMM 1 the gate and up rows of the
            // unit whose epilogue the warpgroup runs, in GEMM 2 those of each
            // block it owns. Block pairs (every shared task of a kernel with
            // its own loop): the first warpgroup's unit, one block each.
            if constexpr (C::kSharedRebased) {
                const unsigned char *rs = a.w_shared + C::kSharedImage.row_scale_offset;
                const bool unit = C::kSharedOwnLoop ? m.wg == 0 : owns_blocks(k, m, 2);
                if (k.gemm == 1 && unit) {
                    const int row = MJ_MOE_BLOCK_ROWS * task_l1_unit<C>(k, m);
                    e.rs[0] = image_row_scales(rs, row_scale_index(0, C::kSharedInter, row), m);
                    e.rs[1] = image_row_scales(rs, row_scale_index(1, C::kSharedInter, row), m);
                } else if (k.gemm == 2 && task_owns_blocks<C>(k, m, 1)) {
                    const int first =
                        row_scale_index(2, C::kSharedInter, task_l2_first_row<C>(k, m));
                    e.rs[0] = image_row_scales(rs, first, m);
                    if (!C::kSharedOwnLoop && owns_blocks(k, m, 2))
                        e.rs[1] = image_row_scales(rs, first + MJ_MOE_BLOCK_ROWS, m);
                }
            }
            return e;
        }
    }
    if (k.gemm == 1) {
        load_meta(L, k, m, e);
        e.alpha[0] = a.l1_alpha_gate[k.local];
        e.alpha[1] = a.l1_alpha_up[k.local];
        e.alpha[2] = a.l2_act_scale[k.local];
        const int row = MJ_MOE_BLOCK_ROWS * l1_unit(k, m);
        const bool unit = owns_blocks(k, m, 2);
        e.rs[0] = unit ? row_scales(L, k.local, row_scale_index(0, C::kInter, row), m) : one;
        e.rs[1] = unit ? row_scales(L, k.local, row_scale_index(1, C::kInter, row), m) : one;
        if (C::kBiases) {
            const mj_u64 gate = (mj_u64)k.local * (2 * C::kInter) + (mj_u64)row;
            e.bias[0] = row_biases(a.l1_bias, gate, unit, m);
            e.bias[1] = row_biases(a.l1_bias, gate + C::kInter, unit, m);
        }
    } else {
        load_meta(L, k, m, e);
        e.alpha[0] = a.l2_alpha[k.local];
        e.alpha[1] = e.alpha[2] = 1.0f;
        const int first = row_scale_index(2, C::kInter, l2_first_row(k, m));
        const bool first_block = owns_blocks(k, m, 1), second_block = owns_blocks(k, m, 2);
        e.rs[0] = first_block ? row_scales(L, k.local, first, m) : one;
        e.rs[1] = second_block ? row_scales(L, k.local, first + MJ_MOE_BLOCK_ROWS, m) : one;
        if (C::kBiases) {
            const mj_u64 h = (mj_u64)k.local * C::kHidden + (mj_u64)l2_first_row(k, m);
            e.bias[0] = row_biases(a.l2_bias, h, first_block, m);
            e.bias[1] = row_biases(a.l2_bias, h + MJ_MOE_BLOCK_ROWS, second_block, m);
        }
    }
    return e;
}

/* The warpgroup's table of per-token inputs (4 words per token column). */
template <class C> __device__ __forceinline__ mj_u32 *epi_table(unsigned char *scratch) {
    return reinterpret_cast<mj_u32 *>(scratch + C::kEpiStage);
}

/* Each thread's token column into the table, for every thread to read; a
 * wide tile's columns past the warpgroup's 128 threads are loaded here, after
 * the K loop, as its inputs are (mega_moe.cuh). */
template <class C>
__device__ __forceinline__ const mj_u32 *share_inputs(const Launch<C> &L, const EpiInputs &e,
                                                      const Task &k, const MathThread &m,
                                                      unsigned char *scratch) {
    mj_u32 *table = epi_table<C>(scratch);
    if (m.t < k.valid)
        *reinterpret_cast<uint4 *>(table + 4 * m.t) =
            make_uint4(e.meta[0], e.meta[1], e.meta[2], e.meta[3]);
    static_assert(C::kBlockM <= 256, "a thread loads at most one column past 128");
    if (C::kWideTile && m.t + 128 < k.valid)
        *reinterpret_cast<uint4 *>(table + 4 * (m.t + 128)) = column_meta(L, k, m.t + 128);
    warpgroup_sync(1 + m.wg);
    return table;
}

/* acc of one 64-row block times its rows' scales (exact: powers of two). */
template <int R> __device__ __forceinline__ void scale_rows(float (&acc)[R], float2 s) {
#pragma unroll
    for (int j = 0; j < R; j++)
        acc[j] *= (j >> 1) & 1 ? s.y : s.x;
}

template <class C>
__device__ __forceinline__ void epilogue_l1(const Launch<C> &L, const Task &k, const EpiInputs &e,
                                            float (&gate)[C::kBlockM / 2],
                                            float (&up)[C::kBlockM / 2], const MathThread &m,
                                            unsigned char *scratch_bytes, mj_u64 *stored) {
    scale_rows(gate, e.rs[0]);
    scale_rows(up, e.rs[1]);
    const float ag = e.alpha[0], au = e.alpha[1], as = e.alpha[2];
    const mj_u32 *table = share_inputs<C>(L, e, k, m, scratch_bytes);
    // Each accumulator pair leaves as its step 2 BF16 gate and up values (one
    // word); a rolled loop over the tile's valid (token, group) items then
    // activates a group's words and quantizes them: unrolled over all
    // kBlockM / 2 registers, the activation was most of a wide tile's code,
    // and it ran for empty columns too. Columns past k.valid are stored too
    // (nothing reads them): a branch per register cost a sixth of the
    // kernel's compile time. A group's activations are independent; in a
    // pass of their own, one element an iteration and a barrier before the
    // quantization, they made the epilogue 2.69 instead of 1.72 us a 64-token
    // task (H100, bench/RESULTS.md, twenty-third session).
    mj_u32 *words = reinterpret_cast<mj_u32 *>(scratch_bytes);
#pragma unroll
    for (int j = 0; j < C::kBlockM / 2; j++) {
        const int row = frag_row(m, j), col = frag_col(m, j);
        // Only NVFP4 tokens carry a per-token scale (the others' is 1: their
        // products are the same bits without the table read).
        const float xs = C::kDispatchFmt == MJ_FMT_NVFP4 ? f32_from_bits(table[4 * col]) : 1.0f;
        float g = gate[j] * (xs * ag), u = up[j] * (xs * au);
        if (C::kBiases) {
            const bool below = (j >> 1) & 1; // row g + 8
            g += below ? e.bias[0].y : e.bias[0].x;
            u += below ? e.bias[1].y : e.bias[1].x;
        }
        words[col * C::kEpiStride + row] = bf16x2_rn(g, u);
    }
    warpgroup_sync(1 + m.wg);

    unsigned char *tile = L.tile2(k.tile, k.local);
    constexpr bool kNvfp4 = C::kL2Fmt == MJ_FMT_NVFP4;
    constexpr bool kMxfp8 = C::kL2Fmt == MJ_FMT_MXFP8;
    constexpr int kGroup = kMxfp8 ? 32 : kNvfp4 ? 16 : 8;
    constexpr int kPerCol = MJ_MOE_BLOCK_ROWS / kGroup;
#pragma unroll 1
    for (int item = m.t; item < k.valid * kPerCol; item += 128) {
        const int col = item / kPerCol, grp = item % kPerCol;
        const float w = f32_from_bits(table[4 * col + 1]) * as;
        float v[kGroup];
        const uint4 *src =
            reinterpret_cast<const uint4 *>(words + col * C::kEpiStride + grp * kGroup);
#pragma unroll
        for (int i = 0; i < kGroup / 4; i++) {
            const uint4 q = src[i];
            const mj_u32 gu[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
            for (int h = 0; h < 4; h++)
                v[4 * i + h] = moe::activate<C>(f32_from_bf16((bf16_bits)(gu[h] & 0xffffu)),
                                                f32_from_bf16((bf16_bits)(gu[h] >> 16))) *
                               w;
        }
        const int kq = MJ_MOE_BLOCK_ROWS * task_l1_unit<C>(k, m) + grp * kGroup; // K of GEMM 2
        unsigned char *stage = tile + (mj_u64)(kq / C::kStageK) * C::kBStage;
        const int kk = kq % C::kStageK;
        float amax = 0.0f; // the group's, for the block-scaled formats
        if (kNvfp4 || kMxfp8)
#pragma unroll
            for (int i = 0; i < kGroup; i++)
                amax = max_num(amax, abs_f32(v[i]));
        if (kMxfp8) {
            // MXFP8 (NUMERICS.md, quantizing activations): E4M3 bytes with a
            // UE8M0 scale, stored decoded back into BF16 (the scale byte is
            // at least 105 here, NUMERICS.md).
            const unsigned char e = ue8m0_for_amax(amax, MJ_E4M3_MAX);
            const float inv = ue8m0_inv_scale(e), scale = ue8m0_value(e);
            mj_u32 q[8];
#pragma unroll
            for (int h = 0; h < 4; h++) {
                pack_e4m3x8(v + 8 * h, inv, q + 2 * h);
                *reinterpret_cast<uint4 *>(
                    stage + mj_moe_token_offset(C::kBlockM, C::kStageK, col, kk + 8 * h)) =
                    bf16x8_of_mxfp8(q[2 * h], q[2 * h + 1], scale);
            }
        } else {
            // Step 6 into BF16 tiles: BF16 rounds; NVFP4 quantizes the group and
            // stores its values decoded back, which BF16 holds exactly
            // (nvfp4_requant, without forming the codes).
            float inv8 = 0.0f, s8 = 0.0f;
            if (kNvfp4) { // no per-token scale here: pts = 1
                // The hardware's conversion is e4m3_from_f32's bits for any
                // input but NaN, and amax is never NaN.
                const mj_u32 sf = cvt_e4m3x2(amax * 0.16666667f, 0.0f) & 0xffu;
                float s, unused;
                f32x2_from_e4m3x2(sf, s, unused);
                inv8 = nvfp4_inv_of_scale(s, 1.0f) * 0.125f;
                s8 = s * 8.0f;
            }
#pragma unroll
            for (int h = 0; h < kGroup / 8; h++) {
                mj_u32 q[4];
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    const float x = v[8 * h + 2 * i], y = v[8 * h + 2 * i + 1];
                    q[i] = kNvfp4 ? byte_perm(f32_bits(nvfp4_requant(x, inv8, s8)),
                                              f32_bits(nvfp4_requant(y, inv8, s8)), 0x7632u)
                                  : bf16x2_rn(x, y);
                }
                *reinterpret_cast<uint4 *>(
                    stage + mj_moe_token_offset(C::kBlockM, C::kStageK, col, kk + 8 * h)) =
                    make_uint4(q[0], q[1], q[2], q[3]);
            }
        }
    }
    if (stored) *stored = global_timer_ns();
    // Each writer fences its own stores towards the bulk copies that will
    // read them; the release after the barrier is the helper's (release.cuh).
    fence_proxy_async_global();
    warpgroup_sync(1 + m.wg);
}

template <class C>
__device__ __forceinline__ void epilogue_l2(const Launch<C> &L, const Task &k, const EpiInputs &e,
                                            float (&acc0)[C::kBlockM / 2],
                                            float (&acc1)[C::kBlockM / 2], const MathThread &m,
                                            unsigned char *scratch_bytes, mj_u64 *stored) {
    constexpr int kPitch = 136; // BF16 per token column: 128 rows + 16 bytes
    unsigned short *scratch = reinterpret_cast<unsigned short *>(scratch_bytes);
    const int first = task_l2_first_row<C>(k, m);
    scale_rows(acc0, e.rs[0]);
    scale_rows(acc1, e.rs[1]);
    const float alpha = e.alpha[0];
    // The down bias needs each column's routing weight: the table comes first.
    const mj_u32 *table = C::kBiases ? share_inputs<C>(L, e, k, m, scratch_bytes) : nullptr;
#pragma unroll
    for (int j = 0; j < C::kBlockM / 2; j++) {
        const int row = frag_row(m, j), col = frag_col(m, j);
        float o0 = acc0[j] * alpha, o1 = acc1[j] * alpha;
        if (C::kBiases) {
            const bool below = (j >> 1) & 1; // row g + 8
            const float w = col < k.valid ? f32_from_bits(table[4 * col + 3]) : 0.0f;
            o0 += w * (below ? e.bias[0].y : e.bias[0].x);
            o1 += w * (below ? e.bias[1].y : e.bias[1].x);
        }
        const mj_u32 o = bf16x2_rn(o0, o1);
        scratch[col * kPitch + row] = (bf16_bits)(o & 0xffffu);
        scratch[col * kPitch + 64 + row] = (bf16_bits)(o >> 16);
    }
    if (C::kBiases)
        warpgroup_sync(1 + m.wg);
    else
        table = share_inputs<C>(L, e, k, m, scratch_bytes);
    const int chunks = 8 * task_own_blocks<C>(k, m);
    for (int item = m.t; item < k.valid * chunks; item += 128) {
        const int col = item / chunks, ch = item % chunks;
        const int home = (int)table[4 * col], token = (int)table[4 * col + 1],
                  slot = (int)table[4 * col + 2];
        unsigned short *dst = peer_ptr(L.peers(), home, L.combine_slots()) +
                              ((mj_u64)slot * C::kMaxTokens + (mj_u64)token) * C::kHidden + first +
                              8 * ch;
        *reinterpret_cast<uint4 *>(dst) =
            *reinterpret_cast<const uint4 *>(scratch + col * kPitch + 8 * ch);
    }
    if (stored) *stored = global_timer_ns();
    // The tokens' releases after the barrier are the helper's (release.cuh).
    warpgroup_sync(1 + m.wg);
}

/* Both math warpgroups (named barriers 1 and 2 are each one's). */
__device__ __forceinline__ void math_sync() {
    asm volatile("bar.sync 3, 256;" ::: "memory");
}

/* A shared expert's task of two blocks, one a warpgroup (block_pair), in
 * GEMM 1: the first warpgroup holds the unit's gate rows, the second its up
 * rows, which reach the first's acc1 through the second's scratch (register
 * j of thread t at word 128 j + t: no bank conflict); the first then runs the
 * unit's epilogue (runs_epilogue). */
template <class C>
__device__ __forceinline__ void hand_up_rows(const Launch<C> &L,
                                             const float (&acc0)[C::kBlockM / 2],
                                             float (&acc1)[C::kBlockM / 2], const MathThread &m) {
    float *handoff = reinterpret_cast<float *>(L.smem + C::kSmemEpi + C::kEpiBytes);
    static_assert(C::kBlockM / 2 * 128 * 4 <= C::kEpiStage, "the up rows fit the scratch");
    if (m.wg == 1)
#pragma unroll
        for (int j = 0; j < C::kBlockM / 2; j++)
            handoff[j * 128 + m.t] = acc0[j];
    math_sync();
    if (m.wg == 0)
#pragma unroll
        for (int j = 0; j < C::kBlockM / 2; j++)
            acc1[j] = handoff[j * 128 + m.t];
    math_sync();
}

/* Whether warpgroup m runs an epilogue for task k: in GEMM 1 for a whole
 * unit of its own (in a block pair's, the first warpgroup runs the unit's),
 * in GEMM 2 for any block of its own. From the clamped count with >=: the
 * same test on k.nblk (owns_blocks) made the 64-token kernels with MXFP8
 * block pairs beside mxfp4-a16 and nvfp4-a16 spill 16 bytes. */
template <class C>
__device__ __forceinline__ bool runs_epilogue(const Task &k, const MathThread &m) {
    const int nb = block_pair<C>(k) && k.gemm == 1 ? (m.wg == 0 ? 2 : 0) : task_own_blocks<C>(k, m);
    return nb >= (k.gemm == 1 ? 2 : 1);
}

/* A block pair's task is posted once, by the first warpgroup, as a routed
 * task's unit of two blocks is (the counts GEMM 2 and the combine wait for):
 * in GEMM 2 once both warpgroups have stored their rows. */
template <class C>
__device__ __forceinline__ void post_block_pair(const Launch<C> &L, const Task &k,
                                                const MathThread &m, const ReleaseRing &rel,
                                                mj_u32 &posts) {
    if (k.gemm == 2) math_sync();
    if (m.wg == 0 && m.t == 0) rel.post(0, posts, k, L);
}

} // namespace mj

#endif // MJ_MEGA_MOE_EPILOGUE_CUH
