# Session 9, call 10: the full correctness test on branch s9-bf16-half (run
# as `export OUT; STEPS="full" bash tests/gpu/mega_moe_iter.sh` with carry
# ["build/lib","build/bin","build/tests","build/bench"]; the call's exit
# status 1 came from a stray command after the test, whose own rc was 0).
export OUT; STEPS="full" bash tests/gpu/mega_moe_iter.sh
