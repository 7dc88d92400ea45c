# Epilogue ablations of main (eleventh session): build/tv/NAME = templates with
# one change; results are wrong by design except base and unroll4.
import os, shutil
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
        open(p, "w").write(s.replace(old, new))
EP = "mega_moe/epilogue.cuh"
ACT = """            moe::activate<C::kActivation, C::kClampBits>(f32_from_bf16((bf16_bits)(gu & 0xffffu)),
                                                         f32_from_bf16((bf16_bits)(gu >> 16))) *"""
LOOP = """#pragma unroll 1
    for (int el = m.t; el < k.valid * MJ_MOE_BLOCK_ROWS; el += 128) {"""
QUANT = """    for (int item = m.t; item < k.valid * kPerCol; item += 128) {
        const int col = item / kPerCol, grp = item % kPerCol;"""
variant("base", [])
variant("noact", [(EP, ACT, """            (f32_from_bf16((bf16_bits)(gu & 0xffffu)) * f32_from_bf16((bf16_bits)(gu >> 16))) *""")])
variant("unroll4", [(EP, LOOP, LOOP.replace("unroll 1", "unroll 4"))])
variant("noquant", [(EP, QUANT, QUANT.replace("item < k.valid * kPerCol", "item < 0"))])
variant("noepi", [(EP, """    const mj_u32 *table = share_inputs<C>(e, k, m, scratch_bytes);
    // Each accumulator""", """    if (k.valid >= 0) { fence_proxy_async_global(); return; }
    const mj_u32 *table = share_inputs<C>(e, k, m, scratch_bytes);
    // Each accumulator""")])
print("variants in", out)
