# Session 9, call 6: the headline on the kernel that goes to main (branch
# s9-half-n): racecheck of the quick test, then DeepSeek-V3, every row at
# T = 1..4096 (uniform routing, one buffer of 4096 tokens), the PyTorch BF16
# peer on the same routing, merged into one table. Carry ["build/lib",
# "build/bin","build/tests","build/bench"].
set -u
export MEGAJIT_CACHE_DIR=/tmp/mjcache MEGAJIT_MOE_TIMEOUT_MS=3000 PATH="$PATH:/usr/local/cuda/bin"
OUT=$OUT STEPS="race" bash tests/gpu/mega_moe_iter.sh
OUT=$OUT SHAPE=deepseek-v3 UNIFORM_S=240 TORCH_S=150 STEPS="uniform torch merge" bash bench/run_mega_moe.sh
