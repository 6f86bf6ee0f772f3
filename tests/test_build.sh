#!/usr/bin/env bash
# No build replaces another stage's binary unannounced: each ZeRO stage has its own file
# (./train_gpt_cpu_zero<k>, ./train_gpt_zero<k>[_offload][_fp16]) and ./train_gpt_cpu or ./train_gpt
# is a link to the one built last, said in one line. `make compare` builds its own stage's file and
# leaves the link alone. Without a CUDA compiler `make train_gpt` ends in one line naming the toolkit
# and the CPU trainer's build. Builds only the CPU trainer (make -n for the GPU names).
cd "$(dirname "$0")/.."
source tests/lib.sh
# make as a user types it, not as a sub-make of `make test`, whose -w adds "Entering directory" lines
unset MAKEFLAGS MFLAGS MAKELEVEL
make -s build/z0/train_gpt_cpu build/z3/train_gpt_cpu || exit 1

out=$(make train_gpt_cpu ZERO=3 2>&1); st=$?
[ $st -eq 0 ] && [ "$(readlink train_gpt_cpu)" = train_gpt_cpu_zero3 ] && cmp -s train_gpt_cpu_zero3 build/z3/train_gpt_cpu &&
    [ "$out" = "./train_gpt_cpu -> ./train_gpt_cpu_zero3 (ZeRO stage 3); each stage keeps its own binary, ./train_gpt_cpu_zero<k>" ]
check "make train_gpt_cpu ZERO=3: ./train_gpt_cpu_zero3, linked from ./train_gpt_cpu, in one line ($out)" $?

out=$(make train_gpt_cpu 2>&1); st=$?
[ $st -eq 0 ] && [ "$(readlink train_gpt_cpu)" = train_gpt_cpu_zero0 ] && cmp -s train_gpt_cpu_zero3 build/z3/train_gpt_cpu &&
    [ "$(echo "$out" | wc -l)" -eq 1 ] && echo "$out" | grep -q "^./train_gpt_cpu -> ./train_gpt_cpu_zero0 (ZeRO stage 0)"
check "then make train_gpt_cpu (stage 0): the link moves and says so; the stage-3 binary stays ($out)" $?

# make compare builds and runs its stage's own file; PYTHON=false stops it after the C run
make -s train_gpt_cpu ZERO=3 > /dev/null
make -s compare STEPS=1 PYTHON=false OUT="$TMP/compare" > "$TMP/compare.out" 2>&1
[ "$(readlink train_gpt_cpu)" = train_gpt_cpu_zero3 ] && [ -s "$TMP/compare/c_gpt2.jsonl" ] &&
    grep -q "== C: ./train_gpt_cpu_zero0 " "$TMP/compare.out"
st=$?
check "make compare trains ./train_gpt_cpu_zero0 and leaves ./train_gpt_cpu at stage 3 ($(readlink train_gpt_cpu))" $st

# the GPU trainer's names, without compiling CUDA
n=$(make -n train_gpt ZERO=2 OFFLOAD=1 FP16=1 NVCC=/bin/true | grep -c "^cp build/gpu_z2_o1_fp16/train_gpt train_gpt_zero2_offload_fp16$\|^ln -sfn train_gpt_zero2_offload_fp16 train_gpt ")
[ "$n" -eq 2 ] && ! make -n train_gpt ZERO=2 NVCC=/bin/true | grep -q "^rm "
check "make train_gpt ZERO=2 OFFLOAD=1 FP16=1: ./train_gpt_zero2_offload_fp16, ./train_gpt linked to it, build/ kept" $?

make train_gpt NVCC=/nonexistent > "$TMP/nonvcc.out" 2>&1; st=$?
[ $st -ne 0 ] && [ "$(wc -l < "$TMP/nonvcc.out")" -eq 1 ] && grep -q "no CUDA compiler (/nonexistent not found): install the CUDA toolkit.*make train_gpt_cpu" "$TMP/nonvcc.out"
st=$?
check "make train_gpt without nvcc: one line naming the CUDA toolkit and make train_gpt_cpu ($(cat "$TMP/nonvcc.out"))" $st

make -s train_gpt_cpu > /dev/null   # ./train_gpt_cpu back to the default build
[ $fails -eq 0 ]
