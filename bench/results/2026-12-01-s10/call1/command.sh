#!/usr/bin/env bash
# Tenth session, device call 1: the ninth session's prepared script, part 1
# (build/ = s9-w4-bm128 at b2b3a66, build/alt from its prepare.sh).
bash bench/results/2026-12-01-s9/next/command.sh 1 2>&1 | tail -60
