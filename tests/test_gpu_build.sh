#!/usr/bin/env bash
# The GPU programs compile and link: `make gpu-check` builds, with the optimizers off and into
# build/check/, every variant whose preprocessed code differs (train_gpt.cu for ZeRO stages 0-3 and
# the fp16 build at stages 0 and 3, test_gpt.cu, tests/test_decode.c at stages 0 and 3); mk/gpu.mk
# says why. The variants it leaves to `make gpu-all` (optimizer offload on by default, the stage-3
# poison build) compile the same code, which this test checks: no #if tests OFFLOAD or ZERO_POISON.
# Then the programs without a GPU: one line, not a crash; the estimator; the README's GPU line.
# Needs the CUDA toolkit and mpicc, no GPU. A compile or link error fails the test.
# run.sh: last (tests/run.sh starts this build in the background, at nice 19, before the first test)
cd "$(dirname "$0")/.."
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
if [ ! -x "$NVCC" ] && ! command -v "$NVCC" >/dev/null 2>&1; then
    echo "SKIP: no nvcc ($NVCC)"
    exit 77
fi
gated=$(git grep -nE '^\s*#\s*(el)?if\b.*\b(OFFLOAD|ZERO_POISON)\b' -- '*.h' '*.cuh' '*.cu' '*.c')
[ -z "$gated" ] || { echo "FAIL: code selected by OFFLOAD or ZERO_POISON, which make gpu-check does not build:"; echo "$gated"; exit 1; }
echo "  no #if tests OFFLOAD or ZERO_POISON: the _o1 and poison builds compile what _o0 compiles"
# cudaMemset runs on the legacy stream, which the trainer's non-blocking streams (comm/comm.h) do not wait for
legacy=$(git grep -nE '\bcudaMemset\(' -- train_gpt.cu zero comm cuda train adamw.cuh)
[ -z "$legacy" ] || { echo "FAIL: cudaMemset (legacy stream, unordered with the compute stream) in the trainer:"; echo "$legacy"; exit 1; }
echo "  no cudaMemset in the trainer: device memory is zeroed on its stream (cudaMemsetAsync)"
mkdir -p build/check   # the lock: tests/run.sh may be building these in the background
flock build/check.lock make -j2 gpu-check NVCC="$NVCC" || { echo "FAIL: make gpu-check"; exit 1; }
B=build/check
bins=$(make -s -f Makefile -f /dev/stdin print-gpu-bins BUILD=$B <<'MK'
print-gpu-bins:
	@echo $(GPU_CHECK_BINS)
MK
)
n=0
for b in $bins; do
    [ -x "$b" ] || { echo "FAIL: $b was not built"; exit 1; }
    echo "  built $b"
    n=$((n + 1))
done
[ "$n" -ge 9 ] || { echo "FAIL: expected at least 9 GPU programs, found $n"; exit 1; }
n16=$(echo "$bins" | tr ' ' '\n' | grep -c "_fp16/train_gpt")
[ "$n16" -ge 2 ] || { echo "FAIL: expected at least 2 fp16 builds (make train_gpt FP16=1), found $n16"; exit 1; }
# without a GPU they must stop with one line, not crash
out=$(./$B/gpu_test/test_gpt --state /dev/null 2>&1); rc=$?
if [ $rc -eq 77 ]; then echo "  test_gpt without a GPU: $out"
elif [ $rc -ne 0 ]; then echo "FAIL: test_gpt exited $rc: $out"; exit 1; fi
# the estimator needs no GPU: train_gpt answers on the build machine, with train_gpt_cpu's numbers
if ! nvidia-smi -L 2>/dev/null | grep -q GPU && [ -x build/z0/train_gpt_cpu ]; then
    E="--preset gpt2-124m --batch 8 --seq 1024 --recompute 1 --cpu-checkpointing 1 --offload 1 --estimate-memory 8"
    ./$B/gpu_z3_o0/train_gpt $E --log "$TMP/est_gpu.jsonl" > /dev/null 2>&1 || { echo "FAIL: train_gpt --estimate-memory without a GPU"; exit 1; }
    ./build/z0/train_gpt_cpu $E --log "$TMP/est_cpu.jsonl" > /dev/null 2>&1
    a=$(grep '"estimate"' "$TMP/est_gpu.jsonl"); b=$(grep '"estimate"' "$TMP/est_cpu.jsonl")
    [ -n "$a" ] && [ "$a" = "$b" ] || { echo "FAIL: train_gpt's and train_gpt_cpu's estimates differ"; exit 1; }
    echo "  train_gpt --estimate-memory runs without a GPU and equals train_gpt_cpu's estimate"
    # the README's GPU line on a machine without a usable GPU: one error line (not one per rank, not the CUDA
    # runtime's "driver version is insufficient"), then the CPU trainer's command for the same run, which runs
    NOGPU="error: no (NVIDIA GPU found \\(no /dev/nvidia\\*\\)|usable NVIDIA GPU: .*): train_gpt needs an NVIDIA GPU per rank"
    ./$B/gpu_z0_o0/train_gpt --preset tiny --steps 1 > "$TMP/nogpu.out" 2>&1
    [ $? -eq 1 ] && [ "$(wc -l < "$TMP/nogpu.out")" -eq 2 ] && grep -Eq "^$NOGPU" "$TMP/nogpu.out" &&
        [ "$(tail -1 "$TMP/nogpu.out")" = "  make train_gpt_cpu ZERO=0 && ./train_gpt_cpu --preset tiny --steps 1" ] ||
        { echo "FAIL: train_gpt without a GPU: $(cat "$TMP/nogpu.out")"; exit 1; }
    echo "  train_gpt without a GPU: $(cat "$TMP/nogpu.out")"
    MPIRUN="mpirun --allow-run-as-root --oversubscribe --mca btl self,vader"
    $MPIRUN -np 4 ./$B/gpu_z3_o0/train_gpt --preset tiny --steps 1 --threads 1 --prompt "it's" > "$TMP/nogpu4.out" 2>&1
    rc=$?
    cmd=$(grep "^  make train_gpt_cpu" "$TMP/nogpu4.out" | sed 's/^  //')
    root=; [ "$(id -u)" = 0 ] && root="--allow-run-as-root "
    [ $rc -ne 0 ] && [ "$(grep -c "error" "$TMP/nogpu4.out")" -eq 1 ] && grep -Eq "^$NOGPU" "$TMP/nogpu4.out" &&
        ! grep -q "insufficient" "$TMP/nogpu4.out" &&
        [ "$cmd" = "make train_gpt_cpu ZERO=3 && mpirun ${root}--oversubscribe -np 4 ./train_gpt_cpu --preset tiny --steps 1 --threads 1 --prompt 'it'\\''s'" ] ||
        { echo "FAIL: mpirun -np 4 train_gpt without a GPU (exit $rc):"; cat "$TMP/nogpu4.out"; exit 1; }
    echo "  mpirun -np 4 train_gpt without a GPU: one error line, then: $cmd"
    (eval "${cmd/make /make -s }") > "$TMP/cpu_cmd.out" 2>&1 && grep -q "^step    1/1" "$TMP/cpu_cmd.out" ||
        { echo "FAIL: the printed CPU command did not train:"; tail -5 "$TMP/cpu_cmd.out"; exit 1; }
    echo "  ... and that command trains on the CPU: $(grep -m1 "^step    1/1" "$TMP/cpu_cmd.out" | cut -d'|' -f1-2)"
    make -s train_gpt_cpu > /dev/null   # ./train_gpt_cpu back to the default build (ZERO=0)
fi
# scripts/gpu_env.sh (the lent GPU machine) refuses carried libraries that need a newer glibc, in one line
R="$TMP/repo"; mkdir -p "$R/scripts" "$R/.gpu_deps" "$TMP/pkg/DEBIAN" "$TMP/pkg/usr/lib/x86_64-linux-gnu"
cp scripts/gpu_env.sh "$R/scripts/"
printf 'Package: fake\nVersion: 1\nArchitecture: amd64\nMaintainer: t <t@t>\nDescription: t\n' > "$TMP/pkg/DEBIAN/control"
printf 'x\0GLIBC_2.17\0GLIBC_2.36\0' > "$TMP/pkg/usr/lib/x86_64-linux-gnu/libfake.so.1"
dpkg-deb --build "$TMP/pkg" "$R/.gpu_deps/fake_1_amd64.deb" > /dev/null || { echo "FAIL: dpkg-deb"; exit 1; }
out=$(ZEROC_GLIBC_HAVE=2.31 bash -c 'source "$1/scripts/gpu_env.sh" "$2"' sh "$R" "$TMP/prefix" 2>&1); rc=$?
[ $rc -ne 0 ] && [ "$(echo "$out" | wc -l)" -eq 1 ] && echo "$out" | grep -q "need GLIBC_2.36, this machine has glibc 2.31" ||
    { echo "FAIL: gpu_env.sh on an older glibc: exit $rc: $out"; exit 1; }
echo "  gpu_env.sh on glibc 2.31: $out"
out=$(ZEROC_GLIBC_HAVE=2.39 bash -c 'source "$1/scripts/gpu_env.sh" "$2"' sh "$R" "$TMP/prefix" 2>&1)
echo "$out" | grep -q "glibc" && { echo "FAIL: gpu_env.sh on glibc 2.39 refused: $out"; exit 1; }
echo "  gpu_env.sh on glibc 2.39: no glibc complaint"
echo "built $n GPU programs ($n16 of them the fp16 build)"
