#!/usr/bin/env bash
# The plumbing of scripts/gpu_check.sh (the one command on a lent GPU machine) and of tests/test_gpu.sh and
# bench/gpu_train.sh under it, checked here where there is no GPU, before a GPU session spends its device
# time on a broken script. Everything runs in a copy of the tree whose build/gpu_*/train_gpt are the CPU
# trainer of the same ZeRO stage, with stand-ins for nvidia-smi, make, nvcc, compute-sanitizer and the
# dev/cuda programs (PATH and the copy's dev/cuda/bin).
#   1. gpu_check.sh with the stages that can run on stand-ins: the facts first; the stages in gpu_check's
#      order, each with its limit and expected time; kernels runs the pending dev/cuda programs (a new one
#      joins by existing) and fails on the one stand-in that fails; test_new runs test_gpu.sh's sections
#      9, 10, 12, 14 and 15 in parallel groups, where every comparison of an opt-in path with the default must
#      come out equal (the CPU trainer has one path; the flags only print a note) and the one check that
#      must fail is the lean step's start-up notice, which only the GPU trainer prints; speed runs
#      bench/gpu_train.sh's 9 pairs rows and prints its table and last line; sanitize runs every opt-in
#      flag through the (stand-in) sanitizers; a stage past its limit is a TIMEOUT; the hooks skip; the
#      summary counts what the stages printed and ends with exactly "gpu_check: N passed, N failed,
#      N skipped"; the whole log is in $OUT
#   2. a group of test_gpu.sh sections stopped by its stage's limit: TIMEOUT, and what it printed so far
#      is in the log; the stages after it, with less than GPU_CHECK_MIN_LEFT seconds of the budget left,
#      are SKIPPED
# What the comparisons find on a real GPU is scripts/gpu_check.sh's business.
cd "$(dirname "$0")/.." || exit 1
source tests/lib.sh
"$PY" -c "import torch" >/dev/null 2>&1 || { echo "SKIP: test_gpu.sh needs a python3 with torch"; exit 77; }
[ -f data/brown/train.bin ] || { echo "SKIP: no data/brown/train.bin (make data)"; exit 77; }
make -s build/z0/train_gpt_cpu build/z1/train_gpt_cpu build/z2/train_gpt_cpu build/z3/train_gpt_cpu || exit 1
ROOT=$PWD
T="$TMP/tree"
mkdir -p "$T" "$TMP/bin" "$TMP/out"
git ls-files -z | (cd "$ROOT" && xargs -0 cp --parents -t "$T")
ln -s "$ROOT/data" "$T/data"
# the GPU variants the stages run: gpu_z<k>_o<o>[_fp16] -> the CPU trainer built with ZERO=k
for v in z0_o0 z1_o0 z2_o0 z3_o0 z2_o1 z0_o0_fp16; do
    mkdir -p "$T/build/gpu_$v"
    printf '#!/bin/sh\nexec "%s/build/z%s/train_gpt_cpu" "$@"\n' "$ROOT" "${v:1:1}" > "$T/build/gpu_$v/train_gpt"
    chmod +x "$T/build/gpu_$v/train_gpt"
done
for k in 0 1 2 3; do ln -s "$ROOT/build/z$k" "$T/build/z$k"; done   # the CPU trainer, where a section compares with it
cat > "$TMP/bin/nvidia-smi" <<'EOF'
#!/bin/sh
case "$*" in
    *--query-gpu=name,*) echo "name, driver_version"; echo "Stand-in GPU, 0.0";;
    *--query-gpu=name*) echo "Stand-in GPU";;
    *) echo "GPU 0: stand-in for tests/test_gpu_dryrun.sh (UUID: none)";;
esac
EOF
printf '#!/bin/sh\nexit 0\n' > "$TMP/bin/make"
printf '#!/bin/sh\necho "Cuda compilation tools, release 0.0, V0.0.0 (stand-in)"\n' > "$TMP/bin/nvcc"
# the sanitizers: run the program (options dropped) and print the summary the real tool prints
cat > "$TMP/bin/compute-sanitizer" <<'EOF'
#!/bin/sh
tool=memcheck
while [ $# -gt 0 ]; do
    case "$1" in
        --tool) tool=$2; shift 2;;
        --error-exitcode|--print-limit|--kernel-name-exclude) shift 2;;
        --*) shift;;
        *) break;;
    esac
done
"$@" > /dev/null 2>&1 || { echo "stand-in: the program failed"; exit 5; }
[ "$tool" = racecheck ] && echo "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)" || echo "========= ERROR SUMMARY: 0 errors"
EOF
chmod +x "$TMP/bin/"*
# the dev/cuda programs: a program added today joins the pending list by existing; matmul's stand-in
# fails; gelu's (a validated one) runs past its stage's limit
touch "$T/dev/cuda/zz_new_kernel.cu"
mkdir -p "$T/dev/cuda/bin"
for src in "$T"/dev/cuda/*.cu; do
    n=$(basename "$src" .cu)
    case $n in
        matmul) printf '#!/bin/sh\necho "FAIL matmul: stand-in"; exit 1\n';;
        gelu) printf '#!/bin/sh\nsleep 100\n';;
        *) printf '#!/bin/sh\necho "%s: all checks passed (stand-in)"\n' "$n";;
    esac > "$T/dev/cuda/bin/$n"
    chmod +x "$T/dev/cuda/bin/$n"
done

# 2. a group of test_gpu.sh sections stopped by its stage's limit (an mpirun that never returns), and the budget
# it spent: the stages after it have less than GPU_CHECK_MIN_LEFT (10 s) left whatever the start-up took (under
# 20 s: test_rest's limit is always cut to the 30 s budget's rest, and the hang holds it to its end)
T2="$TMP/tree2"; cp -a "$T" "$T2"
mkdir -p "$TMP/hang"
printf '#!/bin/sh\n[ "$1" = --version ] && { echo "mpirun (stand-in that never returns)"; exit 0; }\nsleep 300\n' > "$TMP/hang/mpirun"
chmod +x "$TMP/hang/mpirun"
(cd "$T2" && PATH="$TMP/hang:$TMP/bin:$PATH" PYTHON="$PY" ZEROC_SYSTEM_DEPS=1 GPU_CHECK_ONLY=test_rest,kernels_rest,nvme \
    GPU_CHECK_TEST_REST="ranks" GPU_CHECK_BUDGET=30 GPU_CHECK_MIN_LEFT=10 GPU_CHECK_LIMIT_test_rest=30 GPU_RUN_TIMEOUT=200 \
    timeout 120 bash scripts/gpu_check.sh > "$TMP/run2.txt" 2>&1; echo $? > "$TMP/run2.rc") &
part2=$!
# (part 2 spends most of its time waiting on the stand-in that never returns: it runs beside part 1, in its own
# copy of the tree, where gpu_check writes its log)

# 1. the stages that run on stand-ins
t1=$SECONDS
(cd "$T" && PATH="$TMP/bin:$PATH" OUT="$TMP/out" PYTHON="$PY" ZEROC_SYSTEM_DEPS=1 ZEROC_COMMIT=dryrun GPU_CHECK_BUDGET=1500 \
    GPU_CHECK_ONLY=build,kernels,test_new,speed,sanitize,kernels_rest,tensorboard,hf_export GPU_CHECK_TEST_NEW="loss lean fusion bgrad zeropp" \
    GPU_CHECK_LIMIT_kernels_rest=3 GPU_CHECK_LIMIT_speed=5000 GPU_TRAIN_SHAPE="--preset tiny --batch 2 --seq 32" GPU_TRAIN_STEPS=3 \
    timeout 900 bash scripts/gpu_check.sh) > "$TMP/run1.txt" 2>&1
rc=$?
log="$TMP/run1.txt"
grep -E "^######## |^gpu_check: |^  (ok|FAIL) |^---- |^dev/cuda programs|^gpu_train: |^pair: " "$log"
[ $rc -eq 1 ] && [ "$(head -n 1 "$log" | cut -c1-16)" = "zeroc gpu_check:" ]
check "gpu_check.sh ran to its end (exit $rc: a stage failed, as planned) and printed the facts first" $?
grep -n -E "^NCCL: header|^######## build" "$log" | head -n 2 | grep -q "NCCL: header" && grep -q "^  NCCL found: .*libnccl" "$log"
check "the facts before the first stage: the NCCL headers, the one a run loads and every one found" $?
order=$(grep -E "^######## [a-z_]+: .*\(limit " "$log" | cut -d' ' -f2 | tr -d ':' | tr '\n' ' ')
[ "$order" = "build kernels test_new speed sanitize kernels_rest tensorboard hf_export " ] &&
    grep -n -E "^######## (env|build):" "$log" | head -n 1 | grep -q "######## env:"
check "the stages in gpu_check's order ($order)" $?
[ "$(grep -cE "^######## [a-z_]+: .*\(limit [0-9]+s(, cut from [0-9]+s)?, expected ~[0-9]+s, at [0-9]+s\)$" "$log")" -eq 8 ] &&
    grep -q "^######## speed: .*(limit [0-9]*s, cut from 5000s" "$log"
check "every stage says its limit and its expected time; a limit past the budget is cut to what is left" $?
res() { grep -E "^######## $1: (PASS|SKIP|FAIL|TIMEOUT)" "$log" | sed -E "s/^######## $1: ([A-Z]+).*/\1/"; }
[ "$(res build)" = PASS ] && [ "$(res kernels)" = FAIL ] && [ "$(res test_new)" = FAIL ] && [ "$(res speed)" = PASS ] &&
    [ "$(res sanitize)" = PASS ] && [ "$(res kernels_rest)" = TIMEOUT ] &&
    [[ "$(res tensorboard)" =~ ^(PASS|SKIP)$ ]] && [[ "$(res hf_export)" =~ ^(PASS|SKIP)$ ]]
check "results: build, speed, sanitize PASS; kernels FAIL (its failing stand-in); test_new FAIL (the notice); kernels_rest TIMEOUT; hooks PASS or SKIP" $?
want="flash_attention adamw global_norm layernorm rmsnorm classifier matmul "
grep -q "^dev/cuda programs (pending): ${want}[a-z_ ]*zz_new_kernel" "$log" && ! grep -q "^dev/cuda programs (pending):.* gelu " "$log" &&
    grep -q "^FAIL matmul (exit 1" "$log" && grep -q "^dev/cuda programs (validated): attention attention_decode encoder gelu" "$log"
check "kernels: the pending programs, most informative first, a new one included, validated ones apart; the failure named" $?
for s in 9 10 12 14 15; do
    grep -q "^== $s\. " "$log"
    check "test_gpu.sh section $s ran (in its group)" $?
done
n_ok=$(grep -c "^  ok " "$log")
notices=$(grep -c "^  \(ok\|FAIL\) .*its notice" "$log")
notice_failed=$(grep -c "^  FAIL .*its notice" "$log")
other=$(grep "^  FAIL " "$log" | grep -vc "its notice")
[ "$n_ok" -ge 30 ] && [ "$other" -eq 0 ]
check "every opt-in path equal to the default with the CPU standing in ($n_ok ok; failed: $other)" $?
[ "$notices" -ge 1 ] && [ "$notice_failed" -eq "$notices" ]
check "only the GPU trainer's lean-step notice missing ($notice_failed of $notices lean runs)" $?
[ "$(grep -cE "^(default|flash|lean_step|fuse_residual|device_loss|plan_cache|bias_grad|opt_in_all|default_again) +[0-9]+ " "$log")" -eq 9 ] &&
    [ "$(grep -c "^pair: default -> " "$log")" -eq 7 ] && grep -q "^gpu_train: default [0-9]* tok/s, opt-in paths [0-9]* tok/s" "$log" &&
    grep -q "^drift: " "$log"
check "speed: bench/gpu_train.sh's 9 rows, 7 pairs against the default, the drift and its last line" $?
[ "$(grep -c "^-- \(memcheck\|racecheck\|initcheck\): .*every opt-in path" "$log")" -eq 6 ] && ! grep -q "stand-in: the program failed" "$log"
check "sanitize: six runs with every opt-in flag, each accepted by the trainer" $?
summary=$(sed -n '/^######## summary/,$p' "$log")
p=$(echo "$summary" | grep -c "| PASS ") f=$(echo "$summary" | grep -cE "\| (FAIL|TIMEOUT)") s=$(echo "$summary" | grep -cE "\| SKIP")
[ "$(tail -n 1 "$log")" = "gpu_check: $p passed, $f failed, $s skipped" ] && [ "$f" -eq 3 ] && [ $((p + f + s)) -eq 9 ]
check "the last line counts the summary's stages: $(tail -n 1 "$log")" $?
out=$(ls "$TMP"/out/gpu_check_*.txt 2>/dev/null | head -n 1)
[ -n "$out" ] && [ "$(tail -n 1 "$out")" = "$(tail -n 1 "$log")" ] && ls "$TMP"/out/gpu_train_*.txt > /dev/null 2>&1
check "the whole log and bench/gpu_train.sh's record in \$OUT" $?

echo "   (part 1 took $((SECONDS - t1)) s)"
# 2., started before part 1 and finished here
wait "$part2"; rc=$(cat "$TMP/run2.rc")
grep -E "^######## |^gpu_check: |^---- " "$TMP/run2.txt"
grep -q "^######## test_rest: TIMEOUT (" "$TMP/run2.txt" && grep -q "^---- test_gpu.sh GPU_TEST_ONLY=ranks: stopped by the limit of the stage" "$TMP/run2.txt" &&
    grep -q "^== 5\. " "$TMP/run2.txt"
check "a group stopped by its stage's limit: TIMEOUT, and what it printed so far is in the log" $?
[ $rc -eq 1 ] && [ "$(grep -c "^######## [a-z_]*: SKIPPED (budget" "$TMP/run2.txt")" -eq 2 ] &&
    [ "$(tail -n 1 "$TMP/run2.txt")" = "gpu_check: 1 passed, 1 failed, 2 skipped" ]
check "the budget spent: kernels_rest and nvme SKIPPED; $(tail -n 1 "$TMP/run2.txt")" $?
[ $fails -eq 0 ]
