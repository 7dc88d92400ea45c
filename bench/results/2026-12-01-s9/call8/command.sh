# Session 9, call 8: the full correctness test on branch s9-half16 (what goes
# to main), then the mxfp4-a8 row of the headline (DeepSeek-V3, T = 1..4096,
# one buffer of 4096 tokens) again, as half16 changed its T=256 kernel. Carry
# ["build/lib","build/bin","build/tests","build/bench"].
set -u
export MEGAJIT_CACHE_DIR=/tmp/mjcache MEGAJIT_MOE_TIMEOUT_MS=3000 PATH="$PATH:/usr/local/cuda/bin"
OUT=$OUT STEPS="full" bash tests/gpu/mega_moe_iter.sh
timeout -k 5 120 build/bin/megajit bench mega-moe --shape deepseek-v3 --format mxfp4-a8 --max-tokens 4096 > $OUT/a8_headline.log 2>&1
echo "a8 headline rc=$?"; cat $OUT/a8_headline.log | tail -12
