/*
 * The MegaMoE task order (templates/mega_moe/scheduler.cuh), decoded on the
 * host with the kernel's own code over routing tables built the way
 * route_prefix builds them: every (GEMM, tile, block task) exactly once, every
 * GEMM 1 task before every GEMM 2 task (the deadlock-freedom argument of the
 * file), each expert's tasks one contiguous range, tile-major inside it, and
 * each task's rows and 64-row blocks right. Shapes with partial last tasks
 * (gpt-oss's 2880) and experts with 0, 1 and many tiles; with a fused shared
 * expert (the last routing entry, its own GEMM 1 task count and blocks) of
 * one and two experts' width.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <vector>

extern "C" {
#include <cmocka.h>
}

#include "mega_moe/scheduler.cuh"
extern "C" {
#include "tools/bench/bench.h"
}

namespace {

template <int kHidden, int kInter, int kExperts, int kBlockM, int kStageK, int kSharedInter = 0>
using Cfg = mj::MoeConfig<kHidden, kInter, kExperts, 8, 1, 4096, MJ_FMT_BF16, MJ_FMT_BF16,
                          MJ_FMT_BF16, MJ_ACT_SWIGLU, 0u, 0x3f800000u, 0u, kBlockM, kStageK, 2, 132,
                          1, 0, 0, kSharedInter, MJ_FMT_BF16>;
/* mxfp4-a8 with an MXFP8 shared expert: its tasks of two blocks. */
template <int kHidden, int kInter, int kExperts, int kBlockM, int kStageK, int kSharedInter>
using MixedCfg = mj::MoeConfig<kHidden, kInter, kExperts, 8, 1, 4096, MJ_FMT_MXFP4, MJ_FMT_MXFP8,
                               MJ_FMT_MXFP8, MJ_ACT_SWIGLU, 0u, 0x3f800000u, 0u, kBlockM, kStageK,
                               2, 132, 1, 0, 0, kSharedInter, MJ_FMT_MXFP8>;
/* nvfp4 with a BF16 shared expert: tasks of two blocks in half stages. */
template <int kHidden, int kInter, int kExperts, int kBlockM, int kStageK, int kSharedInter>
using HalfCfg = mj::MoeConfig<kHidden, kInter, kExperts, 8, 1, 4096, MJ_FMT_NVFP4, MJ_FMT_NVFP4,
                              MJ_FMT_NVFP4, MJ_ACT_SWIGLU, 0u, 0x3f800000u, 0u, kBlockM, kStageK, 2,
                              132, 1, 0, 0, kSharedInter, MJ_FMT_BF16>;

/* A value below n from the benchmarks' generator. */
mj_u32 below(uint64_t *rng, mj_u32 n) {
    return (mj_u32)(mj_bench_rng(rng) % n);
}

/* rows[le], then tiles (exclusive prefix of ceil(rows / BLOCK_M)), as the
 * kernel's shared-memory tables: the local experts, then the shared expert. */
template <class C> struct Tables {
    mj_u32 rows[C::kRoutes];
    mj_u32 tiles[C::kRoutes + 1];
    mj::Routing<C> routing() {
        mj::Routing<C> r;
        r.rows = rows;
        r.tiles = tiles;
        return r;
    }
    void build() {
        mj_u32 run = 0;
        for (int le = 0; le < C::kRoutes; le++) {
            tiles[le] = run;
            run += (rows[le] + C::kBlockM - 1) / C::kBlockM;
        }
        tiles[C::kRoutes] = run;
    }
};

template <class C> void check_order(Tables<C> &tab) {
    tab.build();
    const mj::Routing<C> r = tab.routing();
    const int tiles = r.num_tiles(), tasks = r.num_tasks();
    const int shared_tiles = C::kShared ? tiles - (int)tab.tiles[C::kLocal] : 0;
    assert_int_equal(tasks, (tiles - shared_tiles) * (C::kTasks1 + C::kTasks2) +
                                shared_tiles * (C::kSharedTasks1 + C::kSharedTasks2));
    // Tasks of a tile in GEMM g + 1: the shared expert's cover its own image.
    auto per_of = [&](int g, int tile) {
        const bool shared = C::kShared && tile >= (int)tab.tiles[C::kLocal];
        return g ? (shared ? C::kSharedTasks2 : C::kTasks2)
                 : (shared ? C::kSharedTasks1 : C::kTasks1);
    };
    // seen[gemm - 1][tile][n]
    constexpr int kPer1 = C::kTasks1 > C::kSharedTasks1 ? C::kTasks1 : C::kSharedTasks1;
    constexpr int kPer2 = C::kTasks2 > C::kSharedTasks2 ? C::kTasks2 : C::kSharedTasks2;
    constexpr int kPer = kPer1 > kPer2 ? kPer1 : kPer2;
    std::vector<int> seen(2 * (size_t)tiles * kPer, 0);
    int last_gemm = 1, last_expert[2] = {-1, -1};
    std::vector<int> done(2 * C::kRoutes, 0);
    // What the releases add up to (release.cuh): a warpgroup owning both
    // blocks of a GEMM 1 unit adds one to its tile's count, one owning a
    // GEMM 2 block one arrival to each of its tile's tokens. The waits expect
    // C::units1 a tile and C::kUnits2 a token (and slot): with fewer, a wait
    // would never end.
    std::vector<int> l1_done(tiles, 0), arrivals(tiles, 0);
    mj::Task prev{};
    for (int t = 0; t < tasks; t++) {
        const mj::Task k = r.decode(t);
        assert_true(k.gemm == 1 || k.gemm == 2);
        assert_true(k.gemm >= last_gemm); // GEMM 1 first
        last_gemm = k.gemm;
        const int g = k.gemm - 1;
        assert_in_range(k.tile, 0, tiles - 1);
        const int per = per_of(g, k.tile);
        assert_in_range(k.n, 0, per - 1);
        assert_in_range(k.local, 0, C::kRoutes - 1);
        // The tile belongs to the expert; its rows and blocks are right.
        assert_true((int)tab.tiles[k.local] <= k.tile && k.tile < (int)tab.tiles[k.local + 1]);
        assert_int_equal(k.row0, (k.tile - (int)tab.tiles[k.local]) * C::kBlockM);
        const int left = (int)tab.rows[k.local] - k.row0;
        assert_int_equal(k.valid, left < C::kBlockM ? left : C::kBlockM);
        assert_true(k.valid > 0);
        const mj_moe_weight_layout l = C::image(), ls = C::shared_image();
        const bool shared = C::kShared && k.local == C::kLocal;
        assert_int_equal(k.nblk, shared ? mj_moe_task_blocks(g ? &ls.w2 : &ls.w1, k.n)
                                        : mj_moe_task_blocks(g ? &l.w2 : &l.w1, k.n));
        assert_int_equal(C::block_bytes(k.local),
                         shared ? ls.w1.blk_data + ls.w1.blk_sf : l.w1.blk_data + l.w1.blk_sf);
        assert_int_equal(C::task_stages(k.gemm, k.local), shared ? (g ? ls.w2.stages : ls.w1.stages)
                                                          : g    ? C::kStages2
                                                                 : C::kStages1);
        for (int wg = 0; wg < 2; wg++) {
            const int left = k.nblk - 2 * wg, nb = left < 0 ? 0 : left > 2 ? 2 : left;
            if (g == 0 && nb == 2) l1_done[k.tile]++;
            if (g == 1 && nb > 0) arrivals[k.tile]++;
        }
        int &s = seen[((size_t)g * tiles + k.tile) * kPer + k.n];
        assert_int_equal(s, 0);
        s = 1;
        // One contiguous range per expert and GEMM.
        if (k.local != last_expert[g]) {
            assert_int_equal(done[g * C::kRoutes + k.local], 0);
            if (last_expert[g] >= 0) done[g * C::kRoutes + last_expert[g]] = 1;
            last_expert[g] = k.local;
        } else if (t > 0 && prev.gemm == k.gemm) {
            // Tile-major inside the expert: every block task of a tile, then the next tile.
            if (prev.tile == k.tile) {
                assert_int_equal(k.n, prev.n + 1);
            } else {
                assert_int_equal(k.tile, prev.tile + 1);
                assert_int_equal(prev.n, per - 1);
                assert_int_equal(k.n, 0);
            }
        }
        prev = k;
    }
    for (size_t i = 0; i < seen.size(); i++) {
        const int tile = (int)(i / kPer % (size_t)tiles);
        const int per = per_of((int)(i / ((size_t)tiles * kPer)), tile);
        assert_int_equal(seen[i], (int)(i % kPer) < per ? 1 : 0);
    }
    for (int tile = 0; tile < tiles; tile++) {
        const int local = r.expert_of(tile);
        assert_int_equal(l1_done[tile], (int)C::units1(local));
        assert_int_equal(arrivals[tile], C::kUnits2);
    }
    assert_int_equal(r.decode(tasks).gemm, 0);
    assert_int_equal(r.decode(tasks + 17).gemm, 0);
}

template <class C> void random_routings(uint64_t seed) {
    uint64_t rng = seed;
    Tables<C> tab;
    for (int round = 0; round < 40; round++) {
        const int scale = 1 + round % 5; // from a few rows an expert to many tiles
        for (int le = 0; le < C::kLocal; le++)
            tab.rows[le] = below(&rng, 4) == 0 ? 0u : below(&rng, (mj_u32)(scale * 3 * C::kBlockM));
        tab.rows[below(&rng, C::kLocal)] += 1; // at least one tile
        if (C::kShared) // this rank's tokens: none, a partial tile, many tiles
            tab.rows[C::kLocal] =
                round % 3 == 0 ? 0u : below(&rng, (mj_u32)(scale * 4 * C::kBlockM));
        check_order<C>(tab);
    }
}

void test_gpt_oss_shape(void **state) {
    (void)state;
    random_routings<Cfg<2880, 2880, 8, 16, 64>>(1);
    random_routings<Cfg<2880, 2880, 8, 64, 64>>(2);
}

void test_deepseek_shape(void **state) {
    (void)state;
    random_routings<Cfg<7168, 2048, 32, 128, 128>>(3);
    random_routings<Cfg<7168, 2048, 32, 8, 128>>(4);
}

void test_shared_expert(void **state) {
    (void)state;
    random_routings<Cfg<7168, 2048, 32, 16, 128, 2048>>(5);
    random_routings<Cfg<7168, 2048, 32, 64, 128, 4096>>(6);
    random_routings<Cfg<2880, 2880, 8, 8, 64, 5760>>(7);
    // MXFP8 beside MXFP4: tasks of two blocks, of a stage within a routed one's.
    typedef MixedCfg<7168, 2048, 32, 64, 256, 2048> M;
    static_assert(M::kSharedOwnLoop && M::kSharedTaskBlocks == 2 &&
                      M::kSharedTasks1 == 2 * M::kTasks1 && M::kSharedTasks2 == 2 * M::kTasks2 &&
                      M::kSharedImage.w2.stages == M::kStages2 &&
                      2 * M::kSharedBlkBytes <= M::kWStage,
                  "mxfp4-a8 with an MXFP8 shared expert");
    random_routings<M>(8);
    // BF16 beside NVFP4: twice the stages, each half a routed one's K.
    typedef HalfCfg<7168, 2048, 32, 64, 128, 4096> N;
    static_assert(N::kSharedOwnLoop && N::kSharedTaskBlocks == 2 && N::kSharedSplit == 2 &&
                      N::kSharedImage.w1.stages == 2 * N::kStages1 &&
                      N::kSharedImage.w2.stages == 4 * N::kStages2 &&
                      N::kSharedTile2 == 2 * N::kTile2 && 2 * N::kSharedBlkBytes <= N::kWStage,
                  "nvfp4 with a BF16 shared expert of two experts' width");
    random_routings<N>(10);
    random_routings<MixedCfg<2880, 2880, 8, 16, 192, 5760>>(9);
    // Its GEMM 1 tasks follow every routed tile's, its GEMM 2 tasks come
    // last, and each of them streams the K of its own width.
    typedef Cfg<512, 128, 4, 8, 64, 256> C;
    static_assert(C::kRoutes == 5 && C::kSharedTasks1 == 2 * C::kTasks1 &&
                      C::kSharedImage.w2.stages == 2 * C::kStages2 &&
                      C::kSharedUnits1 == 2 * C::kUnits1,
                  "the shared expert of two experts' width");
    Tables<C> tab;
    tab.rows[0] = 3;
    tab.rows[1] = tab.rows[2] = tab.rows[3] = 0;
    tab.rows[4] = 9; // two tiles of this rank's tokens
    check_order<C>(tab);
    tab.build();
    const mj::Routing<C> r = tab.routing();
    const mj::Task first = r.decode(C::kTasks1), last = r.decode(r.num_tasks() - 1);
    assert_int_equal(first.gemm, 1);
    assert_int_equal(first.local, C::kLocal);
    assert_int_equal(first.tile, 1);
    assert_int_equal(first.valid, 8);
    assert_int_equal(last.gemm, 2);
    assert_int_equal(last.local, C::kLocal);
    assert_int_equal(last.tile, 2);
    assert_int_equal(last.valid, 1);
}

void test_one_expert_many_tiles(void **state) {
    (void)state;
    typedef Cfg<512, 128, 4, 8, 64> C;
    Tables<C> tab;
    tab.rows[0] = 0;
    tab.rows[1] = 8 * 7 + 3; // 8 tiles, the last partial
    tab.rows[2] = 0;
    tab.rows[3] = 8;
    check_order<C>(tab);
    tab.build();
    const mj::Routing<C> r = tab.routing();
    // Expert 1's first tile owns the first GEMM 1 tasks, then its second tile.
    const mj::Task a = r.decode(0), b = r.decode(C::kTasks1);
    assert_int_equal(a.local, 1);
    assert_int_equal(a.tile, 0);
    assert_int_equal(b.local, 1);
    assert_int_equal(b.tile, 1);
    assert_int_equal(b.n, 0);
}

} // namespace

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpt_oss_shape),
        cmocka_unit_test(test_deepseek_shape),
        cmocka_unit_test(test_one_expert_many_tiles),
        cmocka_unit_test(test_shared_expert),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
