bash bench/results/2026-12-02-s11/command.sh 2 > $OUT/summary.txt 2>&1; cat $OUT/summary.txt   # carry build/{lib,bin,tests,bench,alt}, branch s10-epi-act 4934fbd
