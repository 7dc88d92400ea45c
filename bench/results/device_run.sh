# Sourced by the sessions' device scripts (bench/results/*/command.sh): the
# output folder and the run helper every call uses.
OUT=${OUT:-/tmp/mj-gpu-out}
mkdir -p "$OUT"
export MEGAJIT_MOE_TIMEOUT_MS=3000 PATH="$PATH:/usr/local/cuda/bin"
run() { # run NAME LIMIT CMD...: output appended to $OUT/NAME.log
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS
  timeout -k 5 "$limit" "$@" >> "$OUT/$name.log" 2>&1
  echo "== $name rc=$? $((SECONDS - t0)) s"
}
