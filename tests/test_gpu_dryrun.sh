#!/usr/bin/env bash
# The plumbing of scripts/gpu_check.sh (the one command on a lent GPU machine) and of tests/test_gpu.sh,
# tests/test_cuda_kernels.sh, bench/gpu_train.sh and bench/llmc_build.sh under it, checked here where there
# is no GPU, before a GPU session spends its device time on a broken script. Everything runs in a copy of
# the tree whose build/gpu_*/train_gpt are the CPU trainer of the same ZeRO stage, with stand-ins for
# nvidia-smi, make, nvcc (it "builds" a train_gpt2cu that prints llm.c's step lines), compute-sanitizer,
# PyTorch's speed script, llm.c's source and the dev/cuda programs (PATH and the copy's dev/cuda/bin).
#   1. gpu_check.sh with the stages that can run on stand-ins: the facts first; the stages in gpu_check's
#      order (build, kernels, test_new, sanitize, speed, llmc, torch, ...), each with its limit and expected
#      time; kernels runs the pending dev/cuda programs (a new one joins by existing) and fails on the one
#      stand-in that fails; test_new runs test_gpu.sh's sections 9, 10, 12, 14 and 15 in parallel groups,
#      where every comparison of an opt-in path with the default must come out equal (the CPU trainer has
#      one path; the flags only print a note) and the one check that must fail is the lean step's start-up
#      notice, which only the GPU trainer prints; sanitize runs every opt-in flag through the (stand-in)
#      sanitizers; speed runs bench/gpu_train.sh's 9 pairs rows; llmc builds llm.c in the background
#      (cuDNN found here) and adds its row and the ratio zeroc / llm.c; torch's compile row hangs past its
#      own limit (a FAILED row, the eager row kept) and PyTorch sees the library path from before
#      gpu_check; kernels_rest's gelu hangs past its program's limit and the programs after it still run;
#      dpu's bitwise checks and offload_speed's rows (stage 2 offload and DPU, stage 3 Twin-Flow's ratios)
#      run on the CPU trainer; the hooks skip; the summary counts what the stages printed and ends with exactly "gpu_check: N
#      passed, N failed, N skipped"; $OUT holds the log, the groups' lines, the speed record and llm.c's
#      build log, at most 8 files, each as written
#   2. a group of test_gpu.sh sections stopped by its stage's limit (an mpirun that never returns): TIMEOUT,
#      what it printed so far in the log, and in $OUT while the stage still runs; the facts' probes that
#      never answer (nvidia-smi, the library and PyTorch probes) cost their limit, not the call; the stages
#      after it whose expected time is not left are SKIPPED, a later one that fits still runs
#   3. a failed build: one make only, and every stage that needs it SKIPPED with that reason; torch,
#      which needs none, still runs
#   4. the stage table: gpu_check.sh's stage calls, its header and docs/gpu.md agree on every limit and
#      expected time, and docs/gpu.md's follow-up call adds up to the time it states
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
for v in z0_o0 z1_o0 z2_o0 z3_o0 z2_o1 z3_o1 z0_o0_fp16; do
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
# make: every call logged (one build, not one per group); DRYRUN_MAKE_FAIL=1: it fails
printf '#!/bin/sh\necho "make $*" >> "%s/make.log"\n[ "${DRYRUN_MAKE_FAIL:-0}" = 1 ] && { echo "make: stand-in failure"; exit 2; }\nexit 0\n' "$TMP" > "$TMP/bin/make"
# nvcc: its version; -c -o F: an empty object; -o F otherwise: a train_gpt2cu that prints llm.c's step lines
cat > "$TMP/bin/nvcc" <<'NVCC'
#!/bin/sh
out=""; compile=0
while [ $# -gt 0 ]; do
    case "$1" in
        --version) echo "Cuda compilation tools, release 0.0, V0.0.0 (stand-in)"; exit 0;;
        -o) out=$2; shift;;
        -c) compile=1;;
    esac
    shift
done
[ -n "$out" ] || exit 0
[ $compile = 1 ] && { : > "$out"; exit 0; }
printf '#!/bin/sh\necho "stand-in train_gpt2cu $*"\ni=1\nwhile [ $i -le 30 ]; do\n    printf "step %%4d/30 | loss 7.000000 (+0.00z)| norm 1.0000 (+0.00z)| lr 6.00e-04 | 40.00 ms | 40.0%%%% bf16 MFU | 409600 tok/s\\n" $i\n    i=$((i + 1))\ndone\n' > "$out"
chmod +x "$out"
NVCC
# the sanitizers: run the program (options dropped) and print the summary the real tool prints
cat > "$TMP/bin/compute-sanitizer" <<'SANITIZER'
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
SANITIZER
chmod +x "$TMP/bin/make" "$TMP/bin/nvcc" "$TMP/bin/compute-sanitizer" "$TMP/bin/nvidia-smi"
# PyTorch's speed script: it records the library path it sees; the compiled row never ends
cat > "$TMP/torch_speed.py" <<'TORCH'
import os, sys, time
open(os.environ["DRYRUN_TORCH_LD"], "a").write("LD_LIBRARY_PATH=%s\n" % os.environ.get("LD_LIBRARY_PATH", "<unset>"))
if sys.argv[sys.argv.index("--compile") + 1] == "1":
    time.sleep(300)
print("stand-in: 123456 tok/s, 33.0 ms/step")
TORCH
# llm.c's source as scripts/llmc_fetch.sh leaves it (the stand-in nvcc reads none of it)
mkdir -p "$T/.llmc/llm.c/llmc" "$T/.llmc/cudnn-frontend/include"
touch "$T/.llmc/llm.c/train_gpt2.cu" "$T/.llmc/llm.c/llmc/cudnn_att.cpp" "$T/.llmc/cudnn-frontend/include/cudnn_frontend.h"
# the dev/cuda programs: a program added today joins the pending list by existing; matmul's stand-in
# fails; gelu's (a validated one) runs past its own limit
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

# 2. a group stopped by its stage's limit (an mpirun that never returns), probes that never answer (the
# facts' nvidia-smi query, the library and PyTorch probes: the python they run reads the script first), and
# a budget with the expected time of kernels_rest and nvme (200 s each) no longer left, but tensorboard's (0 s)
T2="$TMP/tree2"; cp -a "$T" "$T2"
mkdir -p "$TMP/hang" "$TMP/out2"
printf '#!/bin/sh\n[ "$1" = --version ] && { echo "mpirun (stand-in that never returns)"; exit 0; }\nsleep 300\n' > "$TMP/hang/mpirun"
printf '#!/bin/sh\ncase "$*" in *driver_version*) sleep 300;; esac\nexec "%s/bin/nvidia-smi" "$@"\n' "$TMP" > "$TMP/hang/nvidia-smi"
printf '#!/bin/bash\n[ "$1" = - ] || exec "%s" "$@"\nscript=$(cat)\ncase "$script" in *ncclGetVersion*|*"the NCCL torch uses"*) sleep 300;; esac\nexec "%s" "$@" <<< "$script"\n' \
    "$PY" "$PY" > "$TMP/hang/python3"
chmod +x "$TMP/hang/mpirun" "$TMP/hang/nvidia-smi" "$TMP/hang/python3"
(cd "$T2" && PATH="$TMP/hang:$TMP/bin:$PATH" PYTHON="$TMP/hang/python3" OUT="$TMP/out2" ZEROC_SYSTEM_DEPS=1 \
    GPU_CHECK_ONLY=test_rest,kernels_rest,nvme,tensorboard GPU_CHECK_TEST_REST="ranks" GPU_CHECK_BUDGET=80 GPU_CHECK_PROBE_TIMEOUT=2 \
    GPU_CHECK_LIMIT_test_rest=30 GPU_CHECK_EXPECT_test_rest=10 GPU_CHECK_EXPECT_kernels_rest=200 GPU_CHECK_EXPECT_nvme=200 \
    GPU_CHECK_EXPECT_tensorboard=0 GPU_RUN_TIMEOUT=200 timeout 200 bash scripts/gpu_check.sh > "$TMP/run2.txt" 2>&1; echo $? > "$TMP/run2.rc") &
part2=$!
# the groups' lines in $OUT while the stage still runs: polled until the hung group printed section 5
( for _ in $(seq 1 150); do
      [ -e "$TMP/run2.rc" ] && break
      if grep -q "^\[test_rest ranks\] == 5\. " "$TMP"/out2/*.groups.txt 2>/dev/null; then touch "$TMP/streamed"; break; fi
      sleep 1
  done ) &
poll=$!

# 1. the stages that run on stand-ins
t1=$SECONDS
(cd "$T" && PATH="$TMP/bin:$PATH" OUT="$TMP/out" PYTHON="$PY" ZEROC_SYSTEM_DEPS=1 ZEROC_COMMIT=dryrun GPU_CHECK_BUDGET=1500 \
    GPU_CHECK_ONLY=build,kernels,test_new,sanitize,speed,llmc,torch,kernels_rest,dpu,offload_speed,tensorboard,hf_export \
    GPU_CHECK_TEST_NEW="loss lean fusion bgrad zeropp" GPU_CHECK_KERNEL_TIMEOUT=3 GPU_CHECK_LIMIT_speed=5000 \
    GPU_TRAIN_SHAPE="--preset tiny --batch 2 --seq 32" GPU_TRAIN_STEPS=3 GPU_TRAIN_TORCH_SCRIPT="$TMP/torch_speed.py" \
    GPU_TRAIN_TORCH_TIMEOUT=3 DRYRUN_TORCH_LD="$TMP/torch_ld.txt" LD_LIBRARY_PATH=/dryrun/base \
    timeout 900 bash scripts/gpu_check.sh) > "$TMP/run1.txt" 2>&1
rc=$?
log="$TMP/run1.txt"
grep -E "^######## |^gpu_check: |^  (ok|FAIL) |^---- |^dev/cuda programs|^gpu_train: |^pair: |^llm|^TIMEOUT |   timed out" "$log"
[ $rc -eq 1 ] && [ "$(head -n 1 "$log" | cut -c1-16)" = "zeroc gpu_check:" ]
check "gpu_check.sh ran to its end (exit $rc: a stage failed, as planned) and printed the facts first" $?
grep -n -E "^NCCL: header|^######## build" "$log" | head -n 2 | grep -q "NCCL: header" && grep -q "^  NCCL found: .*libnccl" "$log"
check "the facts before the first stage: the NCCL headers, the one a run loads and every one found" $?
order=$(grep -E "^######## [a-z_]+: .*\(limit " "$log" | cut -d' ' -f2 | tr -d ':' | tr '\n' ' ')
[ "$order" = "build kernels test_new sanitize speed llmc torch kernels_rest dpu offload_speed tensorboard hf_export " ] &&
    grep -n -E "^######## (env|build):" "$log" | head -n 1 | grep -q "######## env:"
check "the stages in gpu_check's order ($order)" $?
[ "$(grep -cE "^######## [a-z_]+: .*\(limit [0-9]+s(, cut from [0-9]+s)?, expected ~[0-9]+s, at [0-9]+s\)$" "$log")" -eq 12 ] &&
    grep -q "^######## speed: .*(limit [0-9]*s, cut from 5000s" "$log"
check "every stage says its limit and its expected time; a limit past the budget is cut to what is left" $?
res() { grep -E "^######## $1: (PASS|SKIP|FAIL|TIMEOUT)" "$log" | sed -E "s/^######## $1: ([A-Z]+).*/\1/"; }
[ "$(res build)" = PASS ] && [ "$(res kernels)" = FAIL ] && [ "$(res test_new)" = FAIL ] && [ "$(res sanitize)" = PASS ] &&
    [ "$(res speed)" = PASS ] && [ "$(res llmc)" = PASS ] && [ "$(res torch)" = FAIL ] && [ "$(res kernels_rest)" = FAIL ] && [ "$(res dpu)" = PASS ] && [ "$(res offload_speed)" = PASS ] &&
    [[ "$(res tensorboard)" =~ ^(PASS|SKIP)$ ]] && [[ "$(res hf_export)" =~ ^(PASS|SKIP)$ ]]
check "results: build, sanitize, speed, llmc, dpu, offload_speed PASS; kernels, test_new FAIL (a failing stand-in, the notice); torch, kernels_rest FAIL (a run past its own limit); hooks PASS or SKIP" $?
want="flash_attention adamw global_norm layernorm rmsnorm classifier matmul "
grep -q "^dev/cuda programs (pending): ${want}[a-z_ ]*zz_new_kernel" "$log" && ! grep -q "^dev/cuda programs (pending):.* gelu " "$log" &&
    grep -q "^FAIL matmul (exit 1" "$log" && grep -q "^dev/cuda programs (validated): attention attention_decode encoder gelu" "$log"
check "kernels: the pending programs, most informative first, a new one included, validated ones apart; the failure named" $?
sed -n '/^######## kernels_rest: dev/,/^######## kernels_rest: /p' "$log" > "$TMP/krest.txt"
grep -q "^TIMEOUT gelu: stopped after 3s" "$TMP/krest.txt" && grep -q "^FAIL gelu (exit 124" "$TMP/krest.txt" &&
    grep -q "^=== swiglu" "$TMP/krest.txt" && grep -q "^cuda kernels: 6 passed, 1 failed" "$TMP/krest.txt"
check "a dev/cuda program past its own limit: TIMEOUT, and the programs after it still run" $?
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
[ "$(grep -cE "^(default|flash|lean_step|fuse_residual|device_loss|plan_cache|bias_grad|opt_in_all|default_again) +[0-9]+ " "$log")" -ge 9 ] &&
    [ "$(grep -c "^pair: default -> " "$log")" -ge 7 ] && grep -q "^gpu_train: default [0-9]* tok/s, opt-in paths [0-9]* tok/s" "$log" &&
    grep -q "^drift: " "$log"
check "speed: bench/gpu_train.sh's 9 rows, 7 pairs against the default, the drift and its last line" $?
grep -q "^llm.c: bench/llmc_build.sh started in the background" "$log" && grep -q "^llmc: train_gpt2cu built for sm_90 with " "$log" &&
    grep -qE "^llmc +409600 +40\.0 .*llm.c f1e2ace, (cuDNN [0-9.?]*|llm.c's own kernels) attention" "$log" &&
    grep -q "^llm.c on this GPU: 409600 tok/s; zeroc / llm.c: default [0-9.]*x" "$log" &&
    grep -q "^gpu_train: .*/ llm.c on this GPU [0-9.]*x" "$log"
grep -q "^DPU, never delayed .*: identical" "$log" && grep -q "resumed at 4 .*: identical" "$log" &&
    grep -qE "^DPU, GPU against the CPU trainer's DPU: max rel [0-9.e+-]+ \(tolerance 1e-3\); the CPU's DPU against no DPU: 1\.[0-9]+e-02" "$log" &&
    grep -q "^ratio 0.5 .*: within 1%" "$log" && grep -q "^ratio 0.5 resumed at 4 .*: identical" "$log" &&
    grep -q "^ratio 0.5 from ratio 1's step-4 checkpoint .*: within 1%" "$log"
check "dpu: the bitwise checks, DPU against the CPU trainer's, Twin-Flow's ratio 0.5 against 1 and its resumes" $?
sed -n '/^######## offload_speed: GPT/,/^######## offload_speed: /p' "$log" > "$TMP/offload_speed.txt"
[ "$(grep -cE "^z3_twin_(1|0\.5|0\.25) +[0-9]+ .*--offload-ratio (1|0\.5|0\.25) --sub-group-size 10000000" "$TMP/offload_speed.txt")" -eq 3 ] &&
    [ "$(grep -cE "^offload: z2_offload(_dpu)? / z2_no_offload: [0-9.]+x tokens/s" "$TMP/offload_speed.txt")" -eq 2 ] &&
    [ "$(grep -cE "^offload: z3_twin_(1|0\.5|0\.25) / z3_no_offload: [0-9.]+x tokens/s" "$TMP/offload_speed.txt")" -eq 3 ]
check "offload_speed: stage 2's offload and DPU rows and stage 3's Twin-Flow rows at ratios 1, 0.5, 0.25, each against no offload at its stage" $?
check "llmc: llm.c built in the background, its row from its step lines (409,600 tok/s), the ratio zeroc / llm.c" $?
sed -n '/^-- torch_compile:/,/^-- \|^$/p' "$log" | grep -q "^   timed out after 3s" &&
    grep -qE "^torch_eager +123456 " "$log" && grep -qE "^torch_compile +FAILED" "$log"
check "torch: torch.compile past its own limit is a FAILED row, the eager row stands" $?
[ "$(sort -u "$TMP/torch_ld.txt" 2>/dev/null)" = "LD_LIBRARY_PATH=/dryrun/base" ]
check "PyTorch ran with the library path from before gpu_check ($(sort -u "$TMP/torch_ld.txt" 2>/dev/null | paste -sd' '))" $?
[ "$(grep -c "^-- \(memcheck\|racecheck\|initcheck\): .*every opt-in path" "$log")" -eq 6 ] && ! grep -q "stand-in: the program failed" "$log"
check "sanitize: six runs with every opt-in flag, each accepted by the trainer" $?
summary=$(sed -n '/^######## summary/,$p' "$log")
p=$(echo "$summary" | grep -c "| PASS ") f=$(echo "$summary" | grep -cE "\| (FAIL|TIMEOUT)") s=$(echo "$summary" | grep -cE "\| SKIP")
[ "$(tail -n 1 "$log")" = "gpu_check: $p passed, $f failed, $s skipped" ] && [ "$f" -eq 4 ] && [ $((p + f + s)) -eq 13 ]
check "the last line counts the summary's stages: $(tail -n 1 "$log")" $?
out=$(ls "$TMP"/out/gpu_check_*.txt 2>/dev/null | grep -v '\.groups\.txt$\|\.llmc\.txt$' | head -n 1)
nfiles=$(find "$TMP/out" -type f | wc -l)
[ -n "$out" ] && [ "$(tail -n 1 "$out")" = "$(tail -n 1 "$log")" ] && ls "$TMP"/out/gpu_train_*.txt > /dev/null 2>&1 &&
    grep -q "^\[test_new lean\] " "$TMP"/out/gpu_check_*.groups.txt && grep -q "^llmc: train_gpt2cu built" "$TMP"/out/gpu_check_*.llmc.txt &&
    [ "$nfiles" -le 8 ] && [ -z "$(find "$TMP/out" -mindepth 3)" ]
check "\$OUT: the whole log, the groups' lines, llm.c's build, the speed record ($nfiles files, at most 8)" $?
echo "   (part 1 took $((SECONDS - t1)) s)"

# 3. a failed build
rm -f "$TMP/make.log"
(cd "$T" && PATH="$TMP/bin:$PATH" PYTHON="$PY" ZEROC_SYSTEM_DEPS=1 DRYRUN_MAKE_FAIL=1 \
    GPU_CHECK_ONLY=build,kernels,test_new,torch,test_rest,tensorboard GPU_TRAIN_TORCH_SCRIPT="$TMP/torch_speed.py" \
    GPU_TRAIN_TORCH_TIMEOUT=2 DRYRUN_TORCH_LD="$TMP/torch_ld3.txt" timeout 300 bash scripts/gpu_check.sh) > "$TMP/run3.txt" 2>&1
grep -E "^######## |^gpu_check: " "$TMP/run3.txt"
calls=$(wc -l < "$TMP/make.log" 2>/dev/null || echo 0)
[ "$calls" -eq 1 ] && grep -q "^######## build: FAIL" "$TMP/run3.txt" &&
    [ "$(grep -c "^######## [a-z_]*: SKIPPED (the build failed: FAIL (exit 1))" "$TMP/run3.txt")" -eq 4 ] &&
    grep -q "^######## torch: PyTorch.*(limit" "$TMP/run3.txt" && [ "$(tail -n 1 "$TMP/run3.txt")" = "gpu_check: 1 passed, 2 failed, 4 skipped" ]
check "a failed build: one make ($calls calls); kernels, test_new, test_rest, tensorboard SKIPPED with the reason; torch still ran (env passed)" $?

# 2., started before part 1 and finished here
wait "$part2"; rc=$(cat "$TMP/run2.rc")
wait "$poll"
grep -E "^######## |^gpu_check: |^---- |no answer" "$TMP/run2.txt"
grep -q "^######## test_rest: TIMEOUT (" "$TMP/run2.txt" && grep -q "^---- test_gpu.sh GPU_TEST_ONLY=ranks: stopped by the limit of the stage" "$TMP/run2.txt" &&
    grep -q "^== 5\. " "$TMP/run2.txt"
check "a group stopped by its stage's limit: TIMEOUT, and what it printed so far is in the log" $?
[ -e "$TMP/streamed" ]
check "the group's lines reached \$OUT while the stage still ran" $?
at=$(grep -oE "^######## test_rest: .*at [0-9]+s\)$" "$TMP/run2.txt" | grep -oE "[0-9]+s\)$" | tr -d 's)')
grep -q "^the PyTorch probe: no answer in 2s" "$TMP/run2.txt" && [ -n "$at" ] && [ "$at" -lt 60 ]
check "probes that never answer cost their limit: the first stage starts at ${at:-?}s" $?
summary=$(sed -n '/^######## summary/,$p' "$TMP/run2.txt")
p=$(echo "$summary" | grep -c "| PASS ") f=$(echo "$summary" | grep -cE "\| (FAIL|TIMEOUT)") s=$(echo "$summary" | grep -cE "\| SKIP")
[ "$rc" = 1 ] && [ "$(grep -c "^######## [a-z_]*: SKIPPED (budget: [0-9]*s of 80s left, the stage is expected to take 200s)" "$TMP/run2.txt")" -eq 2 ] &&
    grep -q "^######## tensorboard: .*(limit" "$TMP/run2.txt" && [ "$(tail -n 1 "$TMP/run2.txt")" = "gpu_check: $p passed, $f failed, $s skipped" ]
check "kernels_rest and nvme SKIPPED by their expected time, tensorboard after them still runs; $(tail -n 1 "$TMP/run2.txt")" $?
# 4. the stage table: gpu_check.sh's header, its stage calls and docs/gpu.md's table give every stage the same
# limit and expected time, and docs/gpu.md's follow-up call adds up to the time it states
"$PY" - <<'PYEOF'
import re, sys
src, doc = open("scripts/gpu_check.sh").read(), open("docs/gpu.md").read()
table = lambda pat, text: {m.group(1): (int(m.group(2)), int(m.group(3))) for m in re.finditer(pat, text, re.M)}
calls = table(r'^\s*stage (\w+) "[^"]*"\s*(?:\\\n\s*)?(\d+) (\d+)', src)
head = table(r'^#   (\w+) +(\d+) +(\d+)   ', src)
rows = table(r'^\| (\w+) \| (\d+) s \| (\d+) s \|', doc)
order = re.search(r'^ORDER="([^"]*)"', src, re.M).group(1).split()
bad = [k for k in order if not calls.get(k) == head.get(k) == rows.get(k)]
m = re.search(r"expected times adding up to about (\d+) s:\n`ZEROC_COMMIT=<hash> GPU_CHECK_ONLY=([a-z_,]+) bash", doc)
follow = sum(calls[k][1] for k in m.group(2).split(",")) if m else -1
print(f"       {len(order)} stages; differing: {bad or 'none'}; the follow-up call's expected times: {follow} s, docs say {m.group(1) if m else '?'}")
sys.exit(0 if len(order) >= 15 and not bad and m and follow == int(m.group(1)) else 1)
PYEOF
check "gpu_check.sh's stage calls, its header and docs/gpu.md agree on every limit and expected time; the follow-up call's sum" $?
[ $fails -eq 0 ]
