#!/usr/bin/env bash
# The MegaMoE benchmark on the GPU machine, in one go (build/ made here with
# `make all test-gpu` and carried; run from the repository root):
#   1. megajit bench mega-moe --shape all, uniform routing, every row at
#      T = 1, 8, 64, 256, 1024, 4096 on one buffer of 4096 tokens, its
#      routing dumped;
#   2. the same at T = 64 and 256 with skewed routing (same buffer size, so
#      the same kernels);
#   3. the PyTorch BF16 peer on both dumped routings;
#   4. one merged table.
# Every step is bounded by a timeout; logs and JSON land in $OUT. About 6
# minutes on an H200 (most of it step 1: ~1 s per configuration, kernels
# compiled first with every CPU). Exit status: 0 when every step passed.
set -u
OUT=${OUT:-/tmp/mj-bench-out}
CLI=${CLI:-build/bin/megajit}
mkdir -p "$OUT"
rm -rf "$OUT/routing"
export MEGAJIT_CACHE_DIR=${MEGAJIT_CACHE_DIR:-/tmp/mjcache} PATH="$PATH:/usr/local/cuda/bin"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv,noheader
status=0

# step NAME SECONDS LOG COMMAND...: runs it with a timeout, says how it ended.
step() {
    local name=$1 limit=$2 log=$3
    shift 3
    local t0=$SECONDS
    timeout -k 10 "$limit" "$@" 2>"$log"
    local rc=$?
    echo "== $name: rc=$rc in $((SECONDS - t0)) s (log $log)" >&2
    if [ $rc -ne 0 ]; then
        status=1
        [ $rc -eq 124 ] && echo "   timed out after $limit s" >&2
        tail -n 15 "$log" >&2
    fi
}

step "uniform" "${UNIFORM_S:-330}" "$OUT/uniform.log" \
    "$CLI" bench mega-moe --shape all --routing uniform --json \
    --dump-routing "$OUT/routing/uniform" >"$OUT/uniform.json"
step "skewed" "${SKEWED_S:-120}" "$OUT/skewed.log" \
    "$CLI" bench mega-moe --shape all --routing skewed --tokens 64,256 --max-tokens 4096 --json \
    --dump-routing "$OUT/routing/skewed" >"$OUT/skewed.json"
peer=()
if [ -f "$OUT/routing/uniform/index.json" ] || [ -f "$OUT/routing/skewed/index.json" ]; then
    dirs=()
    for d in "$OUT/routing/uniform" "$OUT/routing/skewed"; do
        [ -f "$d/index.json" ] && dirs+=("$d")
    done
    step "torch peer" "${TORCH_S:-150}" "$OUT/torch.log" \
        python3 bench/torch_moe_peer.py "${dirs[@]}" --json "$OUT/torch.json" >"$OUT/torch.txt"
    [ -s "$OUT/torch.json" ] && peer=(--torch "$OUT/torch.json")
fi
python3 bench/merge_mega_moe.py "$OUT/uniform.json" "$OUT/skewed.json" ${peer[@]+"${peer[@]}"} |
    tee "$OUT/table.txt"
exit $status
