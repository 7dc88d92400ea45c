# build/tv/pairs and build/tv/quads for call2 (prepare.sh runs it from the
# repository root of branch s8-swizzled-token-tiles): the branch's templates
# with two K16 steps per wgmma group in the BF16-kind K loop (half the
# wgmma.fence waits; four fragment sets as now), or four (eight sets; stages
# of K 128 only); build/tv/noswz, the branch with the old token layout;
# build/tv/nofence, a timing probe (below).
import os, shutil

out = "build/tv"

ONE_STEP = """            mj_u64 desc = swizzled_desc_step(desc0, c, C::kBlockM, C::kTokenRowBytes);
            fence_frag(a[c % kSets][0]);
            fence_frag(a[c % kSets][1]);
            fence_desc(desc);
            wgmma_fence();
            WgmmaRs<MmaBF16, C::kBlockM>::mma(acc0, a[c % kSets][0], desc);
            WgmmaRs<MmaBF16, C::kBlockM>::mma(acc1, a[c % kSets][1], desc);
            wgmma_commit();
            wgmma_wait<kSets - 1>();
            // The previous stage's last wgmma is done once kSets - 1 steps of this one are in
            // flight.
            if (c == kSets - 2) mbar_arrive(prev_slot >= 0 ? ring.empty + prev_slot : ring.sink);"""

GROUPED = """            constexpr int kPair = PER_GROUP;
            if (c % kPair == kPair - 1) {
                mj_u64 desc[kPair];
#pragma unroll
                for (int j = 0; j < kPair; j++) {
                    const int cj = c - kPair + 1 + j;
                    desc[j] = swizzled_desc_step(desc0, cj, C::kBlockM, C::kTokenRowBytes);
                    fence_frag(a[cj % kSets][0]);
                    fence_frag(a[cj % kSets][1]);
                    fence_desc(desc[j]);
                }
                wgmma_fence();
#pragma unroll
                for (int j = 0; j < kPair; j++) {
                    const int cj = c - kPair + 1 + j;
                    WgmmaRs<MmaBF16, C::kBlockM>::mma(acc0, a[cj % kSets][0], desc[j]);
                    WgmmaRs<MmaBF16, C::kBlockM>::mma(acc1, a[cj % kSets][1], desc[j]);
                }
                wgmma_commit();
                wgmma_wait<kSets / kPair - 1>();
                if (c == kSets - kPair - 1)
                    mbar_arrive(prev_slot >= 0 ? ring.empty + prev_slot : ring.sink);
            }"""

SETS = "constexpr int kSets = C::kBlockM >= 128 || (C::kW4 && C::kBlockM >= 32) ? 2 : 4;"


def edit(d, path, old, new):
    p = os.path.join(d, path)
    s = open(p).read()
    assert s.count(old) == 1, (path, old[:60])
    open(p, "w").write(s.replace(old, new))


def grouped(name, sets, per_group):
    d = os.path.join(out, name)
    if os.path.exists(d):
        shutil.rmtree(d)
    shutil.copytree("templates", d)
    edit(d, "mega_moe/mainloop.cuh", SETS, SETS.replace(": 4;", ": %d;" % sets))
    # Wide tiles keep two sets and one step a group.
    per = "kSets == %d ? %d : 1" % (sets, per_group)
    edit(d, "mega_moe/mainloop.cuh", ONE_STEP, GROUPED.replace("PER_GROUP", per))


grouped("pairs", 4, 2)
grouped("quads", 8, 4)

# The branch without the swizzled token layout (the old no-swizzle core
# matrices; the host's ring sizes stay): if the branch fails its tests, this
# says whether the swizzle is why, and lets the rest be measured anyway.
d = os.path.join(out, "noswz")
if os.path.exists(d):
    shutil.rmtree(d)
shutil.copytree("templates", d)
edit(d, "layout/moe_layout.h", """    const int rb = mj_moe_token_row_bytes(kind, stage_k), kb = k * mj_moe_token_bytes(kind);
    const int within = kb % rb, swz = rb == 128 ? (n & 7) : ((n >> 1) & 3);
    return (mj_u32)((kb / rb) * block_m * rb + n * rb + (((within >> 4) ^ swz) << 4) +
                    (within & 15));""", """    (void)stage_k;
    const int kb = k * mj_moe_token_bytes(kind);
    return (mj_u32)(((kb >> 4) * (block_m >> 3) + (n >> 3)) * 128 + (n & 7) * 16 + (kb & 15));""")
p = os.path.join(d, "mega_moe/mainloop.cuh")
src = open(p).read()
old_desc0 = "swizzled_kmajor_desc(smem_u32(st + C::kRingTokens), 0, C::kBlockM, C::kTokenRowBytes)"
assert src.count(old_desc0) == 2
src = src.replace(old_desc0, "kmajor_desc(smem_u32(st + C::kRingTokens), 0, C::kBlockM)")
old_step = "swizzled_desc_step(desc0, c, C::kBlockM, C::kTokenRowBytes)"
assert src.count(old_step) == 2
src = src.replace(old_step, "kmajor_desc(smem_u32(st + C::kRingTokens), c, C::kBlockM)")
open(p, "w").write(src)

# A timing probe, wrong by design (the GEMM 2 token copies may read stale
# bytes): the GEMM 1 epilogue without its writers' proxy fence, to measure
# what the fence costs a task (--phases: GEMM 1 epilogue).
d = os.path.join(out, "nofence")
if os.path.exists(d):
    shutil.rmtree(d)
shutil.copytree("templates", d)
edit(d, "mega_moe/epilogue.cuh", """    fence_proxy_async_global();
    warpgroup_sync(1 + m.wg);
}""", """    warpgroup_sync(1 + m.wg);
}""")
print("variants in", out)
