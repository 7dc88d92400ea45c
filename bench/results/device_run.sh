# Sourced by the sessions' device scripts (bench/results/*/command.sh): the
# output folder, the kernel cache, the GPU test, and the steps the calls share.
OUT=${OUT:-/tmp/mj-gpu-out}
mkdir -p "$OUT"
export MEGAJIT_MOE_TIMEOUT_MS=3000 PATH="$PATH:/usr/local/cuda/bin"
export MEGAJIT_CACHE_DIR=/tmp/mjcache
T=build/tests/gpu/test_mega_moe
run() { # run NAME LIMIT CMD...: output appended to $OUT/NAME.log
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS
  timeout -k 5 "$limit" "$@" >> "$OUT/$name.log" 2>&1
  echo "== $name rc=$? $((SECONDS - t0)) s"
}
card() { # the GPU, its driver and its SM clock
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
}
full_test() { # full_test BUDGET_S: the whole GPU test
  run full $(($1 + 15)) $T --budget "$1"
  grep -E "passed, |^FAIL|not run|skipped \(" "$OUT/full.log" | tail -4
}
checks() { # checks BUDGET_S: the whole GPU test, then racecheck and memcheck of --quick
  full_test "$1"
  # A long wait limit: under racecheck a wait that gives up goes on unsynchronized.
  MEGAJIT_MOE_TIMEOUT_MS=60000 run race 120 compute-sanitizer --tool racecheck --error-exitcode 97 \
    $T --quick
  grep -E "passed, |^FAIL|RACECHECK SUMMARY" "$OUT/race.log" | tail -4
  run memcheck 120 compute-sanitizer --tool memcheck --error-exitcode 97 $T --quick
  grep -E "passed, |^FAIL|ERROR SUMMARY" "$OUT/memcheck.log" | tail -3
}
race_block_m() { # race_block_m BUDGET_S: racecheck of test_mega_moe's BLOCK_M section (every tile size)
  MEGAJIT_MOE_TIMEOUT_MS=60000 run race_bm $(($1 + 30)) compute-sanitizer --tool racecheck \
    --error-exitcode 97 $T --section block_m --budget "$1"
  grep -E "passed, |^FAIL|RACECHECK SUMMARY|skipped" "$OUT/race_bm.log" | tail -4
}
phases() { # phases TOKENS ROW...: DeepSeek-V3's rows at TOKENS with --phases
  local tokens=$1 f
  shift
  for f in "$@"; do
    run phases_$f 120 build/bin/megajit bench mega-moe --format $f --tokens $tokens \
      --max-tokens 4096 --iters 10 --phases
    grep -E "^deepseek-v3 " "$OUT/phases_$f.log" | tail -$(echo $tokens | tr ',' '\n' | wc -l)
  done
}
race_variants() { # race_variants VARIANT...: racecheck of --quick with build/tv/VARIANT's templates
  local v
  for v in "$@"; do
    MEGAJIT_TEMPLATE_DIR=build/tv/$v MEGAJIT_MOE_TIMEOUT_MS=60000 run race_$v 120 \
      compute-sanitizer --tool racecheck --error-exitcode 97 $T --quick
    grep -E "passed, |^FAIL|RACECHECK SUMMARY" "$OUT/race_$v.log" | tail -4 | sed "s|^|$v |"
  done
}
trees() { # trees NAME TOKENS ROWS TREE...: DeepSeek-V3's rows ROWS at TOKENS with each template tree, in order
  local name=$1 tokens=$2 rows=$3 f v
  shift 3
  for f in $rows; do
    for v in "$@"; do
      MEGAJIT_TEMPLATE_DIR=$v run ${name}_$f 60 build/bin/megajit bench mega-moe --format $f \
        --tokens $tokens --max-tokens 4096 --iters 10
      grep -E "^deepseek-v3 +$f +(${tokens//,/|}) " "$OUT/${name}_$f.log" |
        tail -$(echo $tokens | tr ',' '\n' | wc -l) | sed "s|^|$v |"
    done
  done
}
mxfp8_ab() { # mxfp8_ab CLI...: DeepSeek-V3's mxfp8 row at T = 1 .. 4096 with each CLI
  local cli
  for cli in "$@"; do
    run ab 100 "$cli" bench mega-moe --format mxfp8 --tokens 1,8,64,256,1024,4096 \
      --max-tokens 4096 --iters 10
    grep -E "^deepseek-v3 +mxfp8 " "$OUT/ab.log" | tail -6 | sed "s|^|$cli |"
  done
}
table() { # issue 10's DeepSeek-V3 table with the PyTorch BF16 peer
  OUT=$OUT/table SHAPE=deepseek-v3 UNIFORM_S=300 TORCH_S=${TORCH_S:-150} STEPS="uniform torch merge" \
    bash bench/run_mega_moe.sh
  head -40 "$OUT/table/table.txt" 2>/dev/null
}
rows() { # rows NAME SHAPE ROW TOKENS VARIANT...: the rows of TOKENS with each variant, in
  # order; a variant is a CLI (build/bin/X), a template tree (build/tv/X, with the
  # embedded CLI) or both (CLI+TREE)
  local name=$1 shape=$2 f=$3 tokens=$4 v c tree
  shift 4
  for v in "$@"; do
    c=build/bin/megajit tree=
    case $v in
    *+*) c=${v%%+*} tree=${v#*+} ;;
    build/tv/*) tree=$v ;;
    *) c=$v ;;
    esac
    MEGAJIT_TEMPLATE_DIR=$tree run $name 90 $c bench mega-moe --shape $shape --format $f \
      --tokens $tokens --max-tokens 4096 --iters ${ITERS:-10}
    grep -E "^$shape +$f +(${tokens//,/|}) " "$OUT/$name.log" |
      tail -$(echo $tokens | tr ',' '\n' | wc -l) | sed "s|^|$v |"
  done
}
