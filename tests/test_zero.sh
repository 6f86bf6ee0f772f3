#!/usr/bin/env bash
# ZeRO stages 0-3 x world sizes 1-4 x gpt2/llama against single-process stage 0
# (losses, final parameters, memory formula, communication theory, stage-3 live cap, NaN poison).
set -e
cd "$(dirname "$0")/.."
# with ZERO_CHECK_STAGES (a subset, as scripts/mutate.py asks): stage 0's trainer, the reference, and those stages'
bins=zero-bins
if [ -n "${ZERO_CHECK_STAGES:-}" ]; then
    bins=build/z0/train_gpt_cpu
    for s in ${ZERO_CHECK_STAGES//,/ }; do bins="$bins build/z$s/train_gpt_cpu"; [ "$s" = 3 ] && bins="$bins build/z3/train_gpt_cpu_poison"; done
fi
make -s $bins
/usr/bin/python3 tests/zero_check.py
