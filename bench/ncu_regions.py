#!/usr/bin/env python3
"""Stall reasons and instruction mix of one address range of a kernel, from
Nsight Compute's source page exported as CSV (gzip or plain):

  ncu --section SourceCounters ... -o rep <program>
  ncu --import rep.ncu-rep --page source --csv --print-source sass | gzip > rep.csv.gz
  bench/ncu_regions.py rep.csv.gz LO HI          # offsets from the kernel's first instruction, hex
  bench/ncu_regions.py rep.csv.gz --top 30       # the instructions with the most warp samples

An address range is a piece of code (a K loop is where its HGMMA are; `--top`
and the SASS text name the rest). Samples are warp samples of every warp in
that range: compare ranges of the same warps, as shares."""
import argparse
import collections
import csv
import gzip


def read(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        rows = list(csv.reader(f))
    header = next(i for i, r in enumerate(rows) if r and r[0] == "Address")
    ix = {h: i for i, h in enumerate(rows[header])}
    stalls = [h for h in rows[header] if h.startswith("stall_") and "Not Issued" not in h]
    out = []
    for r in rows[header + 1:]:
        try:
            address = int(r[ix["Address"]], 16)
        except (ValueError, IndexError):
            continue
        out.append((address, r[ix["Source"]].strip(),
                    int(r[ix["Warp Stall Sampling (All Samples)"]] or 0),
                    int(r[ix["Instructions Executed"]] or 0),
                    {s: int(r[ix[s]] or 0) for s in stalls}))
    out.sort()
    base = out[0][0]
    return [(a - base, src, samples, executed, st) for a, src, samples, executed, st in out]


def opcode(src):
    words = src.split()
    return (words[1] if words[0].startswith("@") else words[0]).split(".")[0]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("csv")
    p.add_argument("lo", nargs="?", default="0")
    p.add_argument("hi", nargs="?", default="ffffffff")
    p.add_argument("--top", type=int, default=0)
    a = p.parse_args()
    ins = read(a.csv)
    total = sum(i[2] for i in ins)
    if a.top:
        for off, src, samples, executed, st in sorted(ins, key=lambda i: -i[2])[:a.top]:
            reason = max(st, key=st.get) if samples else "-"
            print(f"{off:6x} {samples:7d} {100 * samples / total:5.1f}% executed {executed:10d} "
                  f"{src[:64]:64s} {reason}")
        return
    lo, hi = int(a.lo, 16), int(a.hi, 16)
    stalls, ops, executed_sum, samples_sum = collections.Counter(), collections.Counter(), 0, 0
    for off, src, samples, executed, st in ins:
        if lo <= off < hi:
            stalls.update(st)
            ops[opcode(src)] += executed
            executed_sum += executed
            samples_sum += samples
    n = sum(stalls.values()) or 1
    print(f"{lo:x}-{hi:x}: {samples_sum} warp samples ({100 * samples_sum / total:.1f}% of the "
          f"kernel's), {executed_sum} warp instructions executed")
    for k, v in stalls.most_common(10):
        print(f"  {k:26s} {v:8d} {100 * v / n:5.1f}%")
    print("  mix: " + ", ".join(f"{k} {100 * v / (executed_sum or 1):.0f}%" for k, v in ops.most_common(12)))


if __name__ == "__main__":
    main()
