#!/usr/bin/env bash
# Runs every CUDA kernel dev program: each checks its kernels' forward and backward against a
# CPU reference (exit 1 on a mismatch) and prints timings. Skips (77) without a GPU.
# CUDA_KERNELS="name name ...": those programs alone, in that order (scripts/gpu_check.sh: the
# programs not yet run on a GPU first); CUDA_KERNELS_FULL=1: each program's whole output;
# CUDA_KERNEL_TIMEOUT (s, default 60): each program's limit, past which it counts as failed
# ("TIMEOUT") and the next one runs.
cd "$(dirname "$0")/.."
T=${CUDA_KERNEL_TIMEOUT:-60}
if ! command -v nvidia-smi >/dev/null 2>&1 || ! timeout 20 nvidia-smi -L 2>/dev/null | grep -q "GPU"; then
    echo "SKIP: no GPU found"
    exit 77
fi
make -j"$(nproc 2>/dev/null || echo 2)" cuda-dev || { echo "FAIL: make cuda-dev"; exit 1; }
mkdir -p build/logs
pass=0; fail=0; skip=0; failed=()
names=${CUDA_KERNELS:-$(for src in dev/cuda/*.cu; do basename "$src" .cu; done)}
for name in $names; do
    bin=dev/cuda/bin/$name
    echo "=== $name"
    log=build/logs/cuda_$name.log
    timeout -k 5 "$T" "$bin" > "$log" 2>&1
    rc=$?
    [ $rc -eq 124 ] || [ $rc -eq 137 ] && echo "TIMEOUT $name: stopped after ${T}s" >> "$log"
    if [ "${CUDA_KERNELS_FULL:-0}" = 1 ]; then cat "$log"
    else grep -E "FAIL|SKIP|TIMEOUT|time |error" "$log" | head -40; tail -n 1 "$log"; fi
    if [ $rc -eq 0 ]; then pass=$((pass + 1))
    elif [ $rc -eq 77 ]; then skip=$((skip + 1))
    else fail=$((fail + 1)); failed+=("$name"); echo "FAIL $name (exit $rc, log $log)"; fi
done
echo "cuda kernels: $pass passed, $fail failed, $skip skipped"
[ ${#failed[@]} -gt 0 ] && echo "failed: ${failed[*]}"
[ $fail -eq 0 ]
