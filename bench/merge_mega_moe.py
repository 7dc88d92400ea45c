#!/usr/bin/env python3
"""One table from `megajit bench mega-moe --json` runs and the PyTorch peer's
--json (bench/torch_moe_peer.py), matched on (shape, routing, ranks, tokens per
rank): row, shape, routing, T, megajit us, floor us, time / floor, bound,
the bulk-read kernel's time for the same bytes (where measured), pre-dispatch +
MegaMoE us and / floor, the peer's us and megajit's speedup over
it, and the check. The ceilings and host cost of each run are printed first.

    python3 bench/merge_mega_moe.py BENCH.json [BENCH.json ...] [--torch TORCH.json ...]

Exit status 1 when any of the files cannot be read (the table has the rest).
"""

import argparse
import json
import sys


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        print(f"merge_mega_moe: cannot read {path}: {e}", file=sys.stderr)
        return None


def key(r):
    return (r["shape"], r["routing"], r["ranks"], r.get("tokens_per_rank"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("bench", nargs="+", help="megajit bench mega-moe --json outputs")
    ap.add_argument("--torch", action="append", default=[],
                    help="bench/torch_moe_peer.py --json output (repeatable)")
    args = ap.parse_args()

    peer, impls, missing = {}, [], 0
    for path in args.torch:
        t = load(path)
        if not t:
            missing += 1
            continue
        impls.append(f"torch {t['torch']}, {t['impl']}")
        peer.update({key(r): r["us"] for r in t["results"]})

    header = ["ROW", "SHAPE", "ROUTING", "T", "US", "FLOOR US", "T/FLOOR", "BOUND", "STREAM US",
              "PD+MOE US", "(PD+MOE)/FLOOR", "TORCH US", "SPEEDUP", "STATUS"]
    rows = [header]
    for path in args.bench:
        b = load(path)
        if not b:
            missing += 1
            continue
        c = b.get("ceilings")
        if c:
            print(f"{path}: {b['device']}, {b['routing']} routing, {b['ranks']} rank(s); "
                  f"read {c['read_gbps']:.0f} GB/s, copy {c['copy_gbps']:.0f} GB/s, BF16 "
                  f"{c['bf16_tflops']:.0f} TFLOP/s")
        h = b.get("host_cost")
        if h:
            print(f"  host cost of a warm mj_mega_moe call: +{h['extra_us']:.2f} us over a bare "
                  f"cuLaunchKernelEx ({h['api_us']:.2f} vs {h['bare_us']:.2f}; target "
                  f"<= {h['target_us']:.0f})")
        for r in b["results"]:
            t_us = peer.get(key(r))
            ran = "us" in r
            cells = [r["row"], r["shape"], r["routing"], str(r.get("tokens_per_rank", "-"))]
            if ran:
                stream = f"{r['stream_us']:.1f}" if "stream_us" in r else "-"
                cells += [f"{r['us']:.1f}", f"{r['floor_us']:.1f}", f"{r['ratio']:.2f}",
                          r["bound"], stream, f"{r['pd_moe_us']:.1f}", f"{r['pd_moe_ratio']:.2f}"]
            else:
                cells += ["-"] * 7
            cells += [f"{t_us:.1f}" if t_us else "-",
                      f"{t_us / r['us']:.2f}x" if t_us and ran else "-", r["detail"]]
            rows.append(cells)
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    for row in rows:
        print("  ".join(cell.ljust(w) if i in (0, 1, 2, 7, 13) else cell.rjust(w)
                        for i, (cell, w) in enumerate(zip(row, widths))).rstrip())
    print(f"peer: {'; '.join(sorted(set(impls)))}" if impls else "peer: no PyTorch numbers")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
