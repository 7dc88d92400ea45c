#!/usr/bin/env bash
# The MegaMoE benchmark on the GPU machine (build/ made here with
# `make all test-gpu` and carried; run from the repository root). Steps, in
# $STEPS (default all four, in this order):
#   uniform  megajit bench mega-moe --shape all, uniform routing, every row at
#            T = 1, 8, 64, 256, 1024, 4096 on one buffer of 4096 tokens, its
#            routing dumped to $OUT/routing/uniform
#   skewed   the same at T = 64 and 256 with skewed routing (same buffer size,
#            so the same kernels), routing in $OUT/routing/skewed
#   torch    the PyTorch BF16 peer on every routing dumped so far
#   merge    one table of everything in $OUT
# SHAPE (default all) narrows uniform and skewed to one --shape.
# Each step is bounded by a timeout (UNIFORM_S, SKEWED_S, TORCH_S seconds)
# and says how long it took; logs and JSON land in $OUT. The default timeouts
# add up to more than one 10-minute device call (bench/RESULTS.md has the step
# sets its runs fitted into one); where all of it does not fit, split it:
#   STEPS="uniform torch merge" ...  then  STEPS="skewed torch merge" ...
# and merge the two $OUT folders afterwards with bench/merge_mega_moe.py.
# Exit status: 0 when every step passed.
set -u
OUT=${OUT:-/tmp/mj-bench-out}
CLI=${CLI:-build/bin/megajit}
STEPS=${STEPS:-uniform skewed torch merge}
mkdir -p "$OUT"
export MEGAJIT_CACHE_DIR=${MEGAJIT_CACHE_DIR:-/tmp/mjcache} PATH="$PATH:/usr/local/cuda/bin"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total \
    --format=csv,noheader 2>&1
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

for s in $STEPS; do
    case $s in
    uniform)
        rm -rf "$OUT/routing/uniform"
        step uniform "${UNIFORM_S:-330}" "$OUT/uniform.log" \
            "$CLI" bench mega-moe --shape "${SHAPE:-all}" --routing uniform --json \
            --dump-routing "$OUT/routing/uniform" >"$OUT/uniform.json" ;;
    skewed)
        rm -rf "$OUT/routing/skewed"
        step skewed "${SKEWED_S:-150}" "$OUT/skewed.log" \
            "$CLI" bench mega-moe --shape "${SHAPE:-all}" --routing skewed --tokens 64,256 \
            --max-tokens 4096 --json --dump-routing "$OUT/routing/skewed" >"$OUT/skewed.json" ;;
    torch)
        dirs=()
        for d in "$OUT"/routing/*/; do
            [ -f "$d/index.json" ] && dirs+=("${d%/}")
        done
        if [ ${#dirs[@]} -eq 0 ]; then
            echo "== torch: no routing dumped in $OUT/routing; skipped" >&2
            status=1
        else
            step torch "${TORCH_S:-150}" "$OUT/torch.log" \
                python3 bench/torch_moe_peer.py "${dirs[@]}" --json "$OUT/torch.json" \
                >"$OUT/torch.txt"
        fi ;;
    merge)
        benches=()
        for f in "$OUT/uniform.json" "$OUT/skewed.json"; do
            [ -s "$f" ] && benches+=("$f")
        done
        peer=()
        [ -s "$OUT/torch.json" ] && peer=(--torch "$OUT/torch.json")
        if [ ${#benches[@]} -eq 0 ]; then
            echo "== merge: no benchmark JSON in $OUT" >&2
            status=1
        else
            python3 bench/merge_mega_moe.py "${benches[@]}" ${peer[@]+"${peer[@]}"} |
                tee "$OUT/table.txt"
        fi ;;
    *)
        echo "unknown step '$s' (uniform, skewed, torch, merge)" >&2
        exit 2 ;;
    esac
done
exit $status
