# build/tv/noswz for call3 (prepare.sh runs it from the repository root of
# branch s9-tiles-quads): the branch with main's token layout (the old
# no-swizzle core matrices; the host's ring sizes stay), to tell whether the
# swizzled layout is what slows the FP8-kind K loop at 1-64 tokens.
import os, re, shutil

d = "build/tv/noswz"
if os.path.exists(d):
    shutil.rmtree(d)
shutil.copytree("templates", d)


def edit(path, old, new, count=1):
    p = os.path.join(d, path)
    s = open(p).read()
    n = len(re.findall(old, s))
    assert n == count, (path, old, n)
    open(p, "w").write(re.sub(old, new, s))


edit("layout/moe_layout.h", re.escape("""    const int rb = mj_moe_token_row_bytes(kind, stage_k), kb = k * mj_moe_token_bytes(kind);
    const int within = kb % rb, swz = rb == 128 ? (n & 7) : ((n >> 1) & 3);
    return (mj_u32)((kb / rb) * block_m * rb + n * rb + (((within >> 4) ^ swz) << 4) +
                    (within & 15));"""), """    (void)stage_k;
    const int kb = k * mj_moe_token_bytes(kind);
    return (mj_u32)(((kb >> 4) * (block_m >> 3) + (n >> 3)) * 128 + (n & 7) * 16 + (kb & 15));""")
edit("mega_moe/mainloop.cuh",
     re.escape("swizzled_kmajor_desc(smem_u32(st + C::kRingTokens), 0, C::kBlockM, C::kTokenRowBytes)"),
     "kmajor_desc(smem_u32(st + C::kRingTokens), 0, C::kBlockM)", 2)
edit("mega_moe/mainloop.cuh", r"swizzled_desc_step\(desc0, (c|cj), C::kBlockM, C::kTokenRowBytes\)",
     r"kmajor_desc(smem_u32(st + C::kRingTokens), \1, C::kBlockM)", 2)
print("variant in", d)
