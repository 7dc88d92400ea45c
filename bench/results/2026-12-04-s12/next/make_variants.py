# Template variants of main for MEGAJIT_TEMPLATE_DIR (twelfth session): how
# long each CTA's weight producer holds back the rest of its ring until its
# first stage has landed (mega_moe.cuh kFirstStageWaitNs, 2 us on main). At
# T = 1 the first stage of a GEMM 1 task landed 8.6 us after its weight copy,
# 5.1 us after its token tile was ready (eleventh session, call 7): the hold
# had run out and every CTA's whole ring was in flight before the tokens were.
import os, shutil
root = os.path.normpath(os.path.join(os.path.dirname(__file__), "../../../.."))
src, out = os.path.join(root, "templates"), os.path.join(root, "build/tv")
HOLD = "constexpr mj_u64 kFirstStageWaitNs = 2000;"
for name, ns in (("hold6", 6000), ("hold12", 12000)):
    d = os.path.join(out, name)
    if os.path.exists(d): shutil.rmtree(d)
    shutil.copytree(src, d)
    p = os.path.join(d, "mega_moe.cuh")
    s = open(p).read()
    assert s.count(HOLD) == 1, name
    open(p, "w").write(s.replace(HOLD, HOLD.replace("2000", str(ns))))
    print("build/tv/%s: kFirstStageWaitNs = %d" % (name, ns))
