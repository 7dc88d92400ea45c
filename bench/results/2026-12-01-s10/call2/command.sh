#!/usr/bin/env bash
# Tenth session, device call 2: the ninth session's prepared script, part 2
# (build/ = s9-w4-bm128 at b2b3a66, build/alt from its prepare.sh).
bash bench/results/2026-12-01-s9/next/command.sh 2 2>&1 | tail -60
