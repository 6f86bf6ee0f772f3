#!/usr/bin/env bash
# ZeRO stages 0-3 x world sizes 1-4 x gpt2/llama against single-process stage 0
# (losses, final parameters, memory formula, communication theory, stage-3 live cap, NaN poison).
set -e
cd "$(dirname "$0")/.."
make -s zero-bins
/usr/bin/python3 tests/zero_check.py
