/*
 * The MegaMoE token tile layout (mj_moe_token_offset) against the wgmma
 * shared-memory layouts it claims to be: every element of a stage has its own
 * byte, each token's bytes of a K block are one contiguous piece, and the
 * position of every byte is the canonical K-major layout passed through the
 * 128B or 64B swizzle as the hardware defines it (address bits [4, 4 + b)
 * XOR bits [7, 7 + b), b = 3 or 2, inside 1024-byte aligned tiles). Also
 * that every ring stage's token tile stays on such an alignment.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "templates/layout/moe_layout.h"

static const int kBlockMs[] = {8, 16, 32, 64, 128, 160};
static const int kStageKs[] = {64, 128, 192, 256};

/* The byte of (row n, byte kb of the row) in the canonical K-major tile of
 * K blocks of rb bytes, then swizzled. */
static uint32_t swizzled(int block_m, int rb, int n, int kb) {
    const uint32_t canonical = (uint32_t)((kb / rb) * block_m * rb + n * rb + kb % rb);
    const uint32_t bits = rb == 128 ? 7u : 3u;
    return canonical ^ (((canonical >> 7) & bits) << 4);
}

/* Every element of a stage has its own bytes, at the swizzled address. */
static void check_offsets(int bm, int sk) {
    const int tb = MJ_MOE_TOKEN_BYTES, rb = mj_moe_token_row_bytes(sk);
    assert_true(rb == 128 || rb == 64);  /* the two swizzles swizzled() models */
    assert_int_equal((sk * tb) % rb, 0); /* a stage's row is whole K blocks */
    const uint32_t bytes = mj_moe_token_stage_bytes(bm, sk);
    unsigned char *seen = calloc(bytes, 1);
    assert_non_null(seen);
    for (int n = 0; n < bm; n++)
        for (int k = 0; k < sk; k++) {
            const uint32_t at = mj_moe_token_offset(bm, sk, n, k);
            assert_true(at + (uint32_t)tb <= bytes);
            assert_int_equal(at, swizzled(bm, rb, n, k * tb));
            for (int i = 0; i < tb; i++) {
                assert_int_equal(seen[at + (uint32_t)i], 0);
                seen[at + (uint32_t)i] = 1;
            }
        }
    free(seen);
}

/* A token's bytes of one K block: exactly [piece, piece + rb), so writing a
 * row fills whole lines. */
static void check_pieces(int bm, int sk) {
    const int tb = MJ_MOE_TOKEN_BYTES, rb = mj_moe_token_row_bytes(sk);
    const int per_block = rb / tb;
    for (int n = 0; n < bm; n++)
        for (int kb0 = 0; kb0 < sk; kb0 += per_block) {
            const uint32_t piece = (uint32_t)((kb0 / per_block) * bm * rb + n * rb);
            assert_int_equal(piece % (uint32_t)rb, 0);
            for (int k = kb0; k < kb0 + per_block; k++) {
                const uint32_t at = mj_moe_token_offset(bm, sk, n, k);
                assert_true(at >= piece && at < piece + (uint32_t)rb);
            }
        }
}

static void for_each_tile(void (*check)(int bm, int sk)) {
    for (size_t b = 0; b < sizeof kBlockMs / sizeof *kBlockMs; b++)
        for (size_t s = 0; s < sizeof kStageKs / sizeof *kStageKs; s++)
            check(kBlockMs[b], kStageKs[s]);
}

static void test_offsets_are_the_swizzled_layout(void **state) {
    (void)state;
    for_each_tile(check_offsets);
}

static void test_a_token_block_is_one_piece(void **state) {
    (void)state;
    for_each_tile(check_pieces);
}

/* Every stage's token tile in the ring (whose arrays start 1024-aligned, one
 * entry a stage) is whole swizzle atoms (8 rows: 1024 or 512 bytes), so each
 * stage's atoms keep their alignment; the ring adds no padding. */
static void test_ring_keeps_every_stage_aligned(void **state) {
    (void)state;
    for (size_t b = 0; b < sizeof kBlockMs / sizeof *kBlockMs; b++)
        for (size_t s = 0; s < sizeof kStageKs / sizeof *kStageKs; s++) {
            const int bm = kBlockMs[b], sk = kStageKs[s];
            const uint32_t atom = mj_moe_token_row_bytes(sk) == 128 ? 1024u : 512u;
            assert_int_equal(mj_moe_token_stage_bytes(bm, sk) % atom, 0);
        }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_offsets_are_the_swizzled_layout),
        cmocka_unit_test(test_a_token_block_is_one_piece),
        cmocka_unit_test(test_ring_keeps_every_stage_aligned),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
