#!/usr/bin/env bash
# Nsight Compute on one MegaMoE launch per format row given in ROWS (default
# mxfp4-a8), at TOKENS (default 64), DeepSeek-V3 shape: speed of light, warp
# states, scheduler and instruction statistics, into $OUT/prof_<row>.txt.
set -u
OUT=${OUT:-/tmp/mj-gpu-out}
mkdir -p "$OUT"
export MEGAJIT_CACHE_DIR=/tmp/mjcache PATH="$PATH:/usr/local/cuda/bin"
for row in ${ROWS:-mxfp4-a8}; do
    timeout -k 5 ${PROF_S:-120} ncu --clock-control none --kernel-name regex:mega_moe_kernel \
        --launch-skip 3 --launch-count 1 --section SpeedOfLight --section WarpStateStats \
        --section SchedulerStats --section InstructionStats --section MemoryWorkloadAnalysis \
        build/bin/megajit bench mega-moe --format "$row" --tokens ${TOKENS:-64} --iters 2 \
        >"$OUT/prof_$row.txt" 2>&1
    echo "prof $row rc=$?"
    grep -E "Duration|Throughput|Issue Slots|Issued Warp|No Eligible|Active Warps|Eligible Warps|Stall|Warp Cycles Per|Executed Ipc|L2 Hit|Mem Busy|DRAM" "$OUT/prof_$row.txt" | head -40
done
