import os, shutil, sys
src = "/work/main/templates"
out = "/work/main/build/tv"
def variant(name, edits):
    d = os.path.join(out, name)
    if os.path.exists(d): shutil.rmtree(d)
    shutil.copytree(src, d)
    for path, old, new in edits:
        p = os.path.join(d, path)
        s = open(p).read()
        assert s.count(old) == 1, (name, path, old[:60], s.count(old))
        s = s.replace(old, new)
        open(p, "w").write(s)
ML = "mega_moe/mainloop.cuh"
DEC_OLD = """                for (int i = 0; i < 4; i++)
                    a[c % kSets][b][i] =
                        bf16x2_mul(e2m1x2_to_bf16x2_tiny(word, i), scale[b][i & 1]);"""
MMA_OLD = """            wgmma_fence();
            WgmmaRs<MmaBF16, C::kBlockM>::mma(acc0, a[c % kSets][0], desc);
            WgmmaRs<MmaBF16, C::kBlockM>::mma(acc1, a[c % kSets][1], desc);
            wgmma_commit();
            wgmma_wait<kSets - 1>();"""
variant("base", [])
variant("nodec", [(ML, DEC_OLD, """                for (int i = 0; i < 4; i++)
                    a[c % kSets][b][i] = words[b][(c + i) % 4];""")])
variant("nomul", [(ML, DEC_OLD, """                for (int i = 0; i < 4; i++)
                    a[c % kSets][b][i] = e2m1x2_to_bf16x2_tiny(word, i);""")])
variant("nomma", [(ML, MMA_OLD, """#pragma unroll
            for (int i = 0; i < 4; i++) {
                acc0[i % R] += __uint_as_float(a[c % kSets][0][i]);
                acc1[i % R] += __uint_as_float(a[c % kSets][1][i]);
            }""")])
variant("sets8", [(ML, "constexpr int kSets = C::kBlockM >= 128 || (C::kW4 && C::kBlockM >= 32) ? 2 : 4;",
                   "constexpr int kSets = C::kBlockM >= 128 || (C::kW4 && C::kBlockM >= 32) ? 2 : 8;")])
variant("nolds", [(ML, """                if (!C::kW4) {
                    const uint4 v = lds128(wd + c * 2048 + m.t * 16);""",
                   """                if (!C::kW4) {
                    const uint4 v = c < kSets ? lds128(wd + c * 2048 + m.t * 16) : make_uint4(a[c % kSets][b][0] + 1, a[c % kSets][b][1], a[c % kSets][b][2], a[c % kSets][b][3]);""")])
variant("nopromo", [(ML, """        acc0[4 * i + 0] = fma_rn(p0[4 * i + 0], w0g * v.x, acc0[4 * i + 0]);
        acc0[4 * i + 1] = fma_rn(p0[4 * i + 1], w0g * v.y, acc0[4 * i + 1]);
        acc0[4 * i + 2] = fma_rn(p0[4 * i + 2], w0g8 * v.x, acc0[4 * i + 2]);
        acc0[4 * i + 3] = fma_rn(p0[4 * i + 3], w0g8 * v.y, acc0[4 * i + 3]);
        acc1[4 * i + 0] = fma_rn(p1[4 * i + 0], w1g * v.x, acc1[4 * i + 0]);
        acc1[4 * i + 1] = fma_rn(p1[4 * i + 1], w1g * v.y, acc1[4 * i + 1]);
        acc1[4 * i + 2] = fma_rn(p1[4 * i + 2], w1g8 * v.x, acc1[4 * i + 2]);
        acc1[4 * i + 3] = fma_rn(p1[4 * i + 3], w1g8 * v.y, acc1[4 * i + 3]);""",
"""        (void)v; (void)w0g; (void)w0g8; (void)w1g; (void)w1g8;
#pragma unroll
        for (int r = 0; r < 4; r++) {
            acc0[4 * i + r] += p0[4 * i + r];
            acc1[4 * i + r] += p1[4 * i + r];
        }""")])
print("ok")
