/*
 * The token tiles' wgmma descriptors (templates/common/smem_desc.cuh) against
 * their layout (mj_moe_token_offset): each K step's descriptor starts at the
 * unswizzled address of the step's first byte in row 0, with the stride of one 8-row atom and the
 * swizzle the layout uses, and the stepped descriptor equals the one built for the step.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

extern "C" {
#include <cmocka.h>
}

#include "common/smem_desc.cuh"
#include "layout/moe_layout.h"

namespace {

const int kBlockMs[] = {8, 16, 32, 64, 128, 160};
const int kStageKs[] = {64, 128, 192, 256};
const uint32_t kTile = 3u * 1024u; // a stage's token part: on 1024 bytes

void test_token_descriptors(void **) {
    for (int bm : kBlockMs)
        for (int sk : kStageKs) {
            const int tb = MJ_MOE_TOKEN_BYTES, rb = mj_moe_token_row_bytes(sk);
            const uint64_t desc0 = mj::swizzled_kmajor_desc(kTile, 0, bm, rb);
            for (int step = 0; step < sk * tb / 32; step++) {
                const uint64_t d = mj::swizzled_kmajor_desc(kTile, step, bm, rb);
                assert_int_equal(mj::swizzled_desc_step(desc0, step, bm, rb), d);
                const int kb = 32 * step;
                // Row 0 is not swizzled: its bytes sit where the canonical layout has them.
                const uint32_t first = mj_moe_token_offset(bm, sk, 0, kb / tb);
                assert_int_equal((d & 0x3fffu) << 4, kTile + first);
                assert_int_equal((d >> 16) & 0x3fffu, 1u);
                assert_int_equal(((d >> 32) & 0x3fffu) << 4, 8u * (uint32_t)rb);
                assert_int_equal((d >> 49) & 7u, 0u);
                assert_int_equal(d >> 62, rb == 128 ? 1u : 2u);
            }
        }
}

} // namespace

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_token_descriptors)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
