# FP8-kind K loop ablations of main (eleventh session, d78a1b9): build/tv/NAME =
# templates with one change; every variant but base is wrong by design.
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
ML = "mega_moe/mainloop.cuh"
PROMO = """        acc0[4 * i + 0] = fma_rn(p0[4 * i + 0], w0g * v.x, acc0[4 * i + 0]);
        acc0[4 * i + 1] = fma_rn(p0[4 * i + 1], w0g * v.y, acc0[4 * i + 1]);
        acc0[4 * i + 2] = fma_rn(p0[4 * i + 2], w0g8 * v.x, acc0[4 * i + 2]);
        acc0[4 * i + 3] = fma_rn(p0[4 * i + 3], w0g8 * v.y, acc0[4 * i + 3]);
        acc1[4 * i + 0] = fma_rn(p1[4 * i + 0], w1g * v.x, acc1[4 * i + 0]);
        acc1[4 * i + 1] = fma_rn(p1[4 * i + 1], w1g * v.y, acc1[4 * i + 1]);
        acc1[4 * i + 2] = fma_rn(p1[4 * i + 2], w1g8 * v.x, acc1[4 * i + 2]);
        acc1[4 * i + 3] = fma_rn(p1[4 * i + 3], w1g8 * v.y, acc1[4 * i + 3]);"""
ONEFMA = PROMO.replace("w0g8 * ", "").replace("w0g * ", "").replace("w1g8 * ", "").replace("w1g * ", "")
NOPROMO = "\n".join(l.split("=")[0] + "+= p" + l.split("fma_rn(p")[1].split(",")[0] + ";" for l in PROMO.split("\n"))
DEC = """                        e2m1x8_to_e4m3x8(words[b][2 * (c & 1)], a[j][b][0], a[j][b][2]);
                        e2m1x8_to_e4m3x8(words[b][2 * (c & 1) + 1], a[j][b][1], a[j][b][3]);"""
NODEC = """                        a[j][b][0] = words[b][2 * (c & 1)], a[j][b][2] = words[b][2 * (c & 1)] >> 4;
                        a[j][b][1] = words[b][2 * (c & 1) + 1], a[j][b][3] = words[b][2 * (c & 1) + 1] >> 4;"""
variant("base", [])
variant("onefma", [(ML, PROMO, ONEFMA)])
variant("nopromo", [(ML, PROMO, NOPROMO)])
variant("nomath", [(ML, PROMO, NOPROMO), (ML, DEC, NODEC)])
print(NOPROMO)
