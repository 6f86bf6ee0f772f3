#!/usr/bin/env bash
# Runs every CUDA kernel dev program: each checks its kernels' forward and backward against a
# CPU reference (exit 1 on a mismatch) and prints timings. Skips (77) without a GPU.
cd "$(dirname "$0")/.."
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q "GPU"; then
    echo "SKIP: no GPU found"
    exit 77
fi
make -j"$(nproc 2>/dev/null || echo 2)" cuda-dev || { echo "FAIL: make cuda-dev"; exit 1; }
mkdir -p build/logs
pass=0; fail=0; skip=0; failed=()
for src in dev/cuda/*.cu; do
    name=$(basename "$src" .cu)
    bin=dev/cuda/bin/$name
    echo "=== $name"
    log=build/logs/cuda_$name.log
    "$bin" > "$log" 2>&1
    rc=$?
    grep -E "FAIL|SKIP|time |error" "$log" | head -40
    tail -n 1 "$log"
    if [ $rc -eq 0 ]; then pass=$((pass + 1))
    elif [ $rc -eq 77 ]; then skip=$((skip + 1))
    else fail=$((fail + 1)); failed+=("$name"); echo "FAIL $name (exit $rc, log $log)"; fi
done
echo "cuda kernels: $pass passed, $fail failed, $skip skipped"
[ ${#failed[@]} -gt 0 ] && echo "failed: ${failed[*]}"
[ $fail -eq 0 ]
