#!/usr/bin/env bash
# The plumbing of tests/test_gpu.sh, checked here where there is no GPU: its sections 9, 10 and 12
# (each compares the GPU trainer's default path with --gpu-baseline 1) and 13 (--bias-grad-epilogue 1
# against the default) run in a copy of the tree whose build/gpu_*/train_gpt are the CPU trainer of the
# same ZeRO stage, with a stand-in nvidia-smi and a make that builds nothing. The CPU trainer has one
# path (--gpu-baseline and --bias-grad-epilogue only print a note), so every comparison must come out
# equal: a failure here is a broken script (a checkpoint path, a log field, a flag), found before a GPU
# session spends its device time on it. The one kind of check that must fail
# is the lean step's start-up notice, which only the GPU trainer prints: exactly one per lean run.
# What the comparisons find on a real GPU is test_gpu.sh's business (scripts/gpu_check.sh).
cd "$(dirname "$0")/.."
source tests/lib.sh
"$PY" -c "import torch" >/dev/null 2>&1 || { echo "SKIP: test_gpu.sh needs a python3 with torch"; exit 77; }
make -s build/z0/train_gpt_cpu build/z1/train_gpt_cpu build/z2/train_gpt_cpu build/z3/train_gpt_cpu || exit 1
ROOT=$PWD
T="$TMP/tree"
mkdir -p "$T" "$TMP/bin"
git ls-files -z | (cd "$ROOT" && xargs -0 cp --parents -t "$T")
# the GPU variants the sections run: gpu_z<k>_o<o>[_fp16] -> the CPU trainer built with ZERO=k
for v in z0_o0 z1_o0 z2_o0 z3_o0 z2_o1 z0_o0_fp16; do
    mkdir -p "$T/build/gpu_$v"
    printf '#!/bin/sh\nexec "%s/build/z%s/train_gpt_cpu" "$@"\n' "$ROOT" "${v:1:1}" > "$T/build/gpu_$v/train_gpt"
    chmod +x "$T/build/gpu_$v/train_gpt"
done
for k in 0 1 2 3; do ln -s "$ROOT/build/z$k" "$T/build/z$k"; done   # the CPU trainer, where a section compares with it
printf '#!/bin/sh\necho "GPU 0: stand-in for tests/test_gpu_dryrun.sh (UUID: none)"\n' > "$TMP/bin/nvidia-smi"
printf '#!/bin/sh\nexit 0\n' > "$TMP/bin/make"
chmod +x "$TMP/bin/nvidia-smi" "$TMP/bin/make"

(cd "$T" && PATH="$TMP/bin:$PATH" GPU_TEST_ONLY=loss,lean,fusion,bgrad timeout 600 bash tests/test_gpu.sh) > "$TMP/out.txt" 2>&1
rc=$?
grep -E "^== |^  (ok|FAIL)" "$TMP/out.txt"
grep -q "^== done" "$TMP/out.txt"
check "test_gpu.sh ran sections 9, 10, 12 and 13 to the end (exit $rc)" $?
for s in 9 10 12 13; do
    grep -q "^== $s\. " "$TMP/out.txt"
    check "section $s ran" $?
done
n_ok=$(grep -c "^  ok " "$TMP/out.txt")
notices=$(grep -c "^  \(ok\|FAIL\) .*its notice" "$TMP/out.txt")
notice_failed=$(grep -c "^  FAIL .*its notice" "$TMP/out.txt")
other=$(grep "^  FAIL " "$TMP/out.txt" | grep -vc "its notice")
[ "$n_ok" -ge 20 ] && [ "$other" -eq 0 ]
check "every comparison with --gpu-baseline 1 equal with the CPU standing in ($n_ok ok; failed: $other)" $?
[ "$notices" -ge 1 ] && [ "$notice_failed" -eq "$notices" ]
check "only the GPU trainer's lean-step notice missing ($notice_failed of $notices lean runs)" $?
[ $fails -eq 0 ]
